// Online fit of the throughput model from observed steps: non-negative least squares in relative error,
// weak priors for what the samples cannot tell apart, and a 1-D search for the overlap exponent gamma.
import { ValidationError } from '../errors.js';
import type { StepSample } from '../types.js';
import {
  FORMS,
  type FormName,
  type ModelForm,
  type ParamPrior,
  type Scaled,
  scalePlacement,
} from './forms.js';
import { inverseSymmetric, type Matrix, nnls, quadraticForm } from './nnls.js';
import type { Placement, Prediction, ThroughputModel } from './throughput-model.js';

export interface FitOptions {
  /** 'auto' (default): Optimus form if any sample has parameter servers, else the all-reduce form. */
  form?: FormName | 'auto';
  /** Fit the sync terms on measured syncTime when every synchronising sample has one (default true). */
  useSyncTime?: boolean;
  /** Fix gamma instead of searching [1, 10]. */
  gamma?: number;
  /** Relative stdev added per unit of log-distance from the nearest observed placement (default 0.1). */
  extrapolationStdev?: number;
  /** Weight of the priors relative to one sample (default 1). */
  priorWeight?: number;
  /**
   * The active sets of an earlier fit of the same job (its `warmStart`): each non-negative least squares
   * starts from them. The solution is unique (the prior rows give full column rank), so only the work changes.
   */
  warmStart?: FitWarmStart;
  /**
   * One least-squares row per distinct placement, its samples' rows merged (default true): the same normal
   * equations, a few rows instead of hundreds. False keeps one row per sample (the reference in the tests).
   */
  groupSamples?: boolean;
}

/** Which parameters ended non-zero in each least-squares problem of a fit: where the next fit starts. */
export interface FitWarmStart {
  compute?: readonly number[];
  sync?: readonly number[];
  joint?: readonly number[];
}

/** What the fit found, for reports and for writing down as constants. */
export interface FittedParameters {
  form: FormName;
  /** Reference per-replica batch: features use localBatchSize / refBatch. */
  refBatch: number;
  /** Reference compute time t0 in seconds (median observed compute time); priors scale with it. */
  t0: number;
  compute: number[];
  sync: number[];
  gamma: number;
  /** Root mean square relative error of the fitted step times. */
  residualStdev: number;
}

export interface FittedThroughputModel extends ThroughputModel {
  readonly parameters: FittedParameters;
  /** Where a refit of the same job on newer samples starts (FitOptions.warmStart). */
  readonly warmStart: FitWarmStart;
}

const GAMMA_MIN = 1;
/**
 * Relative noise assumed when weighing the priors against the samples (MAP estimate): a sample's relative
 * residual counts as much as a parameter's deviation from its prior of PRIOR_NOISE prior standard deviations.
 */
const PRIOR_NOISE = 0.05;
const GAMMA_MAX = 10;

interface Obs {
  /** Index of the sample's placement group (PlacementGroup); samples at one placement share features. */
  group: number;
  s: Scaled;
  fc: number[];
  fs: number[];
  syncs: boolean;
  step: number;
  sync: number | undefined;
}

/** The samples at one placement: the same features, so the same fitted step time and fixed-point weights. */
interface PlacementGroup {
  fc: number[];
  fs: number[];
  syncs: boolean;
  members: Obs[];
}

/** Samples in groups by placement, in order of first appearance; with `group` false each sample alone. */
function placementGroups(obs: Obs[], group: boolean): PlacementGroup[] {
  const groups: PlacementGroup[] = [];
  const index = new Map<string, number>();
  for (const o of obs) {
    const key = `${o.s.K}/${o.s.N}/${o.s.P}/${o.s.mu}`;
    let i = group ? index.get(key) : undefined;
    if (i === undefined) {
      i = groups.length;
      groups.push({ fc: o.fc, fs: o.fs, syncs: o.syncs, members: [] });
      if (group) index.set(key, i);
    }
    o.group = i;
    groups[i]?.members.push(o);
  }
  return groups;
}

/**
 * Least-squares rows in relative units, one per group: sample i's row f / step_i with target
 * numerator_i / step_i. A group's rows a_i f (targets t_i) merge into W f with target (sum a_i t_i) / W,
 * W^2 = sum a_i^2: the same contribution to the normal equations, so the same solution. A group of one keeps
 * the sample's own row exactly.
 */
function mergedRows(
  groups: readonly PlacementGroup[],
  features: (g: PlacementGroup, index: number) => readonly number[],
  numerator: (o: Obs) => number,
): { rows: number[][]; targets: number[] } {
  const rows: number[][] = [];
  const targets: number[] = [];
  groups.forEach((g, index) => {
    const f = features(g, index);
    const only = g.members.length === 1 ? g.members[0] : undefined;
    if (only) {
      rows.push(f.map((v) => v / only.step));
      targets.push(numerator(only) / only.step);
      return;
    }
    let w2 = 0;
    let wt = 0;
    for (const o of g.members) {
      const a = 1 / o.step;
      w2 += a * a;
      wt += a * (numerator(o) / o.step);
    }
    const w = Math.sqrt(w2);
    rows.push(f.map((v) => v * w));
    targets.push(wt / w);
  });
  return { rows, targets };
}

function dot(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] ?? 0) * (b[i] ?? 0);
  return s;
}

function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? (v[mid] ?? 0) : ((v[mid - 1] ?? 0) + (v[mid] ?? 0)) / 2;
}

function combine(c: number, s: number, gamma: number): number {
  if (s <= 0) return c;
  if (gamma === 1) return c + s;
  const hi = Math.max(c, s);
  // Scaled to avoid overflow for large gamma.
  return hi * ((c / hi) ** gamma + (s / hi) ** gamma) ** (1 / gamma);
}

function validate(samples: readonly StepSample[]): void {
  if (samples.length === 0) throw new Error('fitThroughputModel: no samples to fit');
  samples.forEach((s, i) => {
    const bad = (what: string): never => {
      throw new Error(`fitThroughputModel: sample ${i} ${what}`);
    };
    if (!(Number.isFinite(s.stepTime) && s.stepTime > 0)) bad(`has non-positive step time ${s.stepTime}`);
    if (!(Number.isInteger(s.replicas) && s.replicas >= 1)) bad(`has invalid replicas ${s.replicas}`);
    if (!(Number.isInteger(s.nodes) && s.nodes >= 1 && s.nodes <= s.replicas))
      bad(`has invalid nodes ${s.nodes}`);
    if (!(Number.isFinite(s.localBatchSize) && s.localBatchSize > 0))
      bad(`has invalid batch ${s.localBatchSize}`);
    if (s.ps !== undefined && !(Number.isInteger(s.ps) && s.ps >= 0)) bad(`has invalid ps ${s.ps}`);
    if (s.syncTime !== undefined && !(Number.isFinite(s.syncTime) && s.syncTime >= 0)) {
      bad(`has invalid sync time ${s.syncTime}`);
    }
  });
}

/** Non-negative least squares of `targets` on `features` (rows already in relative units) plus prior rows. */
function solveWithPriors(
  rows: number[][],
  targets: number[],
  priors: readonly ParamPrior[],
  t0: number,
  priorWeight: number,
  start?: readonly number[],
): { x: number[]; active: number[] } {
  const A: Matrix = rows.map((r) => [...r]);
  const b = [...targets];
  const w = Math.sqrt(priorWeight) * PRIOR_NOISE;
  priors.forEach((p, j) => {
    const r = new Array<number>(priors.length).fill(0);
    r[j] = w / (p.sd * t0);
    A.push(r);
    b.push((w * p.mean) / p.sd);
  });
  const { x, active } = nnls(A, b, undefined, start);
  return { x, active };
}

/** Posterior covariance of parameters: (X^T X / sigma^2 + diag(priorWeight / (sd t0)^2))^-1. */
function posteriorCovariance(
  rows: readonly number[][],
  priors: readonly ParamPrior[],
  t0: number,
  sigma: number,
  priorWeight: number,
): Matrix {
  const n = priors.length;
  const M: Matrix = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (const r of rows) {
    for (let i = 0; i < n; i++) {
      const ri = r[i] ?? 0;
      if (ri === 0) continue;
      const Mi = M[i] as number[];
      for (let j = 0; j < n; j++) Mi[j] = (Mi[j] ?? 0) + (ri * (r[j] ?? 0)) / sigma ** 2;
    }
  }
  priors.forEach((p, j) => {
    const Mj = M[j] as number[];
    Mj[j] = (Mj[j] ?? 0) + priorWeight / (p.sd * t0) ** 2;
  });
  return inverseSymmetric(M);
}

interface Solution {
  xc: number[];
  xs: number[];
  gamma: number;
  loss: number;
  warmStart: FitWarmStart;
}

function relativeLoss(
  obs: readonly Obs[],
  groups: readonly PlacementGroup[],
  xc: number[],
  xs: number[],
  gamma: number,
  floor: number,
): number {
  // The step time is a placement's: computed once per group, summed per sample in the samples' order.
  const fitted = groups.map((g) =>
    combine(Math.max(dot(g.fc, xc), floor), g.syncs ? Math.max(dot(g.fs, xs), 0) : 0, gamma),
  );
  let L = 0;
  for (const o of obs) {
    const t = fitted[o.group] ?? 0;
    L += ((t - o.step) / o.step) ** 2;
  }
  return L;
}

/** 1-D search: a coarse grid over [1, 10], then golden-section refinement around the best point. */
function searchGamma(loss: (g: number) => number): number {
  const grid = [1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 9, 10];
  let bi = 0;
  let bl = Number.POSITIVE_INFINITY;
  grid.forEach((g, i) => {
    const l = loss(g);
    if (l < bl - 1e-15) {
      bl = l;
      bi = i;
    }
  });
  let lo = grid[Math.max(0, bi - 1)] ?? GAMMA_MIN;
  let hi = grid[Math.min(grid.length - 1, bi + 1)] ?? GAMMA_MAX;
  const phi = (Math.sqrt(5) - 1) / 2;
  let x1 = hi - phi * (hi - lo);
  let x2 = lo + phi * (hi - lo);
  let f1 = loss(x1);
  let f2 = loss(x2);
  for (let it = 0; it < 30 && hi - lo > 1e-3; it++) {
    if (f1 <= f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = hi - phi * (hi - lo);
      f1 = loss(x1);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = lo + phi * (hi - lo);
      f2 = loss(x2);
    }
  }
  const cand = [
    { g: grid[bi] ?? 1, l: bl },
    { g: x1, l: f1 },
    { g: x2, l: f2 },
  ];
  cand.sort((a, b) => a.l - b.l || a.g - b.g);
  return cand[0]?.g ?? 1;
}

export function fitThroughputModel(samples: StepSample[], options: FitOptions = {}): FittedThroughputModel {
  validate(samples);
  const ps = samples.some((s) => (s.ps ?? 0) > 0);
  const formName: FormName =
    options.form && options.form !== 'auto' ? options.form : ps ? 'optimus' : 'allreduce';
  const form: ModelForm = FORMS[formName];
  const psForm = formName === 'optimus';
  const priorWeight = options.priorWeight ?? 1;
  const refBatch = median(samples.map((s) => s.localBatchSize));
  const obs: Obs[] = samples.map((s) => {
    const sc = scalePlacement(s, refBatch, psForm);
    const fs = form.syncFeatures(sc);
    return {
      group: -1,
      s: sc,
      fc: form.computeFeatures(sc),
      fs,
      syncs: fs.some((v) => v !== 0),
      step: s.stepTime,
      sync: s.syncTime,
    };
  });
  const groups = placementGroups(obs, options.groupSamples ?? true);
  const syncingGroups = groups.filter((g) => g.syncs);
  const syncing = obs.filter((o) => o.syncs);
  const separate = (options.useSyncTime ?? true) && syncing.every((o) => o.sync !== undefined);
  // Compute time of each sample: what is left of the step once its measured sync is taken out (at least
  // 1% of the step, in case sync was measured generously).
  const computeOf = (o: Obs): number =>
    separate && o.syncs ? Math.max(o.step - (o.sync ?? 0), 0.01 * o.step) : o.step;
  const t0 = median(obs.map(computeOf));
  const floor = 1e-6 * t0;

  let sol: Solution;
  const warm = options.warmStart ?? {};
  if (separate) {
    const computeRows = mergedRows(groups, (g) => g.fc, computeOf);
    const c = solveWithPriors(
      computeRows.rows,
      computeRows.targets,
      form.compute,
      t0,
      priorWeight,
      warm.compute,
    );
    const syncRows = mergedRows(
      syncingGroups,
      (g) => g.fs,
      (o) => Math.min(o.sync ?? 0, o.step),
    );
    const s = solveWithPriors(syncRows.rows, syncRows.targets, form.sync, t0, priorWeight, warm.sync);
    const xc = c.x;
    const xs = s.x;
    const lossAt = (g: number) => relativeLoss(obs, groups, xc, xs, g, floor);
    const gamma = options.gamma ?? (syncing.length > 0 ? searchGamma(lossAt) : 1);
    sol = { xc, xs, gamma, loss: lossAt(gamma), warmStart: { compute: c.active, sync: s.active } };
  } else {
    // Each solve starts from the last one's active set (the first from the earlier fit's): same solutions.
    let start = warm.joint;
    const fitAt = (g: number): Solution => {
      const solved = fitJoint(obs, groups, form, t0, priorWeight, g, floor, start);
      start = solved.warmStart.joint;
      return solved;
    };
    let best: Solution;
    if (options.gamma !== undefined) best = fitAt(options.gamma);
    else if (syncing.length === 0) best = fitAt(1);
    else {
      const cache = new Map<number, Solution>();
      const at = (g: number): Solution => {
        const hit = cache.get(g);
        if (hit) return hit;
        const s = fitAt(g);
        cache.set(g, s);
        return s;
      };
      const g = searchGamma((x) => at(x).loss);
      best = at(g);
    }
    sol = best;
  }

  const nc = form.compute.length;
  const ns = form.sync.length;
  const activeParams = [...sol.xc, ...sol.xs].filter((v) => v > 0).length;
  const dof = Math.max(1, obs.length - activeParams);
  const residualStdev = Math.sqrt(sol.loss / obs.length);
  // Noise estimate for the step time, relative; never below 1% (measurements jitter at least that much).
  const sigma = Math.max(0.01, Math.sqrt(sol.loss / dof));
  const covC = posteriorCovariance(
    mergedRows(
      groups,
      (g) => g.fc,
      () => 0,
    ).rows,
    form.compute,
    t0,
    sigma,
    priorWeight,
  );
  const covS = posteriorCovariance(
    mergedRows(
      syncingGroups,
      (g) => g.fs,
      () => 0,
    ).rows,
    form.sync,
    t0,
    sigma,
    priorWeight,
  );
  const seen = uniquePoints(obs.map((o) => o.s));
  const kappa = options.extrapolationStdev ?? 0.1;
  const distinctScales = new Set(samples.map((s) => s.replicas)).size;
  const parameters: FittedParameters = {
    form: formName,
    refBatch,
    t0,
    compute: sol.xc.slice(0, nc),
    sync: sol.xs.slice(0, ns),
    gamma: sol.gamma,
    residualStdev,
  };

  const predict = predictor({ parameters, covC, covS, sigma, seen, kappa });
  return { predict, sampleCount: samples.length, distinctScales, parameters, warmStart: sol.warmStart };
}

/** What a fitted model keeps to answer: built apart from the fit so that its samples are not kept with it. */
interface PredictorInputs {
  parameters: FittedParameters;
  covC: Matrix;
  covS: Matrix;
  sigma: number;
  seen: readonly Scaled[];
  kappa: number;
}

function predictor({ parameters, covC, covS, sigma, seen, kappa }: PredictorInputs) {
  const form = FORMS[parameters.form];
  const { refBatch } = parameters;
  const psForm = parameters.form === 'optimus';
  return (placement: Placement): Prediction => {
    // A placement comes from a job its owner edits (Worker replicas patched to 0): a typed error, so that the
    // caller reports it as that job's and carries on with the others.
    if (!(placement.replicas >= 1 && placement.localBatchSize > 0)) {
      throw new ValidationError(
        placement.replicas >= 1 ? '/localBatchSize' : '/replicas',
        `predict: invalid placement ${JSON.stringify(placement)}`,
      );
    }
    const sc = scalePlacement(placement, refBatch, psForm);
    const fc = form.computeFeatures(sc);
    const fs = form.syncFeatures(sc);
    const stepTime = evaluateStepTime(parameters, placement);
    // Variance of the fitted parts (parameter uncertainty, including what only the priors pin down),
    // relative to the step, plus measurement noise, plus a misspecification term that grows with the
    // log-distance from the nearest placement the fit has seen.
    const varParams = (quadraticForm(covC, fc) + quadraticForm(covS, fs)) / stepTime ** 2;
    const d = distanceToSeen(sc, seen);
    const rel = Math.sqrt(sigma ** 2 + varParams + (kappa * d) ** 2);
    return {
      stepTime,
      stdev: rel * stepTime,
      throughput: (placement.replicas * placement.localBatchSize) / stepTime,
    };
  };
}

/**
 * Step time (seconds) of a placement under fitted parameters; what `predict` returns as stepTime. Pure, so
 * parameters written down as constants (lib/sim/app-profiles.ts) evaluate exactly like a live fit.
 */
export function evaluateStepTime(params: FittedParameters, placement: Placement): number {
  const form = FORMS[params.form];
  const sc = scalePlacement(placement, params.refBatch, params.form === 'optimus');
  const c = Math.max(dot(form.computeFeatures(sc), params.compute), 1e-6 * params.t0);
  const s = Math.max(dot(form.syncFeatures(sc), params.sync), 0);
  return combine(c, s, params.gamma);
}

/** The synchronisation part of the step time at a placement (before it is combined with compute). */
export function evaluateSyncTime(params: FittedParameters, placement: Placement): number {
  const form = FORMS[params.form];
  const sc = scalePlacement(placement, params.refBatch, params.form === 'optimus');
  return Math.max(dot(form.syncFeatures(sc), params.sync), 0);
}

/** For fixed gamma, fit step times directly (no sync measurements) by fixed-point NNLS iterations. */
function fitJoint(
  obs: readonly Obs[],
  groups: readonly PlacementGroup[],
  form: ModelForm,
  t0: number,
  priorWeight: number,
  gamma: number,
  floor: number,
  start: readonly number[] | undefined,
): Solution {
  const nc = form.compute.length;
  const priors = [...form.compute, ...form.sync];
  let xc = new Array<number>(nc).fill(0);
  let xs = new Array<number>(form.sync.length).fill(0);
  // The fixed-point weights are a placement's, so one per group.
  let u = groups.map(() => 1);
  let v = groups.map(() => 1);
  let active = start;
  // By Euler's theorem T = (C/T)^(g-1) C + (S/T)^(g-1) S, so with the weights frozen the fit is linear.
  for (let it = 0; it < (gamma === 1 ? 1 : 12); it++) {
    const { rows, targets } = mergedRows(
      groups,
      (g, i) => [...g.fc.map((f) => (u[i] ?? 1) * f), ...g.fs.map((f) => (g.syncs ? (v[i] ?? 1) * f : 0))],
      (o) => o.step,
    );
    const solved = solveWithPriors(rows, targets, priors, t0, priorWeight, active);
    const x = solved.x;
    active = solved.active;
    xc = x.slice(0, nc);
    xs = x.slice(nc);
    u = groups.map((o) => {
      const c = Math.max(dot(o.fc, xc), floor);
      const s = o.syncs ? Math.max(dot(o.fs, xs), 0) : 0;
      return (c / combine(c, s, gamma)) ** (gamma - 1);
    });
    v = groups.map((o) => {
      const c = Math.max(dot(o.fc, xc), floor);
      const s = o.syncs ? Math.max(dot(o.fs, xs), 0) : 0;
      return s > 0 ? (s / combine(c, s, gamma)) ** (gamma - 1) : 1;
    });
  }
  return {
    xc,
    xs,
    gamma,
    loss: relativeLoss(obs, groups, xc, xs, gamma, floor),
    warmStart: active ? { joint: active } : {},
  };
}

function uniquePoints(points: readonly Scaled[]): Scaled[] {
  const seen = new Map<string, Scaled>();
  for (const p of points) seen.set(`${p.K}/${p.N}/${p.P}/${p.mu}`, p);
  return [...seen.values()];
}

/** Log-space distance to the nearest observed placement (replicas, nodes, servers, batch). */
function distanceToSeen(p: Scaled, seen: readonly Scaled[]): number {
  let best = Number.POSITIVE_INFINITY;
  for (const q of seen) {
    const d2 =
      Math.log(p.K / q.K) ** 2 +
      Math.log(p.N / q.N) ** 2 +
      (p.P > 0 && q.P > 0 ? Math.log(p.P / q.P) ** 2 : 0) +
      0.25 * Math.log(p.mu / q.mu) ** 2;
    best = Math.min(best, d2);
  }
  return Math.sqrt(best);
}
