// What trainscaler remembers about a job signature between runs. The handler keeps one profile per
// signature as a JSON value in a ConfigMap, so a profile must stay small (ConfigMaps cap at 1 MiB for all
// keys together) and must be validated on the way in: a hand-edited or truncated value must not steer a
// policy.

import { ValidationError } from '../errors.js';
import { fitThroughputModel, type ThroughputModel } from '../model/throughput-model.js';
import type { ContainerUsage, RoleName, StepSample } from '../types.js';

export const PROFILE_VERSION = 1;

/** Enough distinct scales for a fit while keeping a profile a few KiB. */
export const MAX_STEP_SUMMARIES = 20;

/**
 * Weight a summary can carry into a merge. Without a cap a long history would freeze the median and a
 * changed code path or driver would never show up.
 */
export const MAX_SUMMARY_WEIGHT = 100;

/** Median step time of one scale, summarised from the step samples of one or more runs. */
export interface StepTimeSummary {
  replicas: number;
  nodes: number;
  ps?: number;
  localBatchSize: number;
  /** Median seconds per step at this scale. */
  stepTime: number;
  /**
   * Median seconds of each step spent synchronising, when every sample behind the summary measured it: a
   * fit that separates compute from sync extrapolates better, and the running job's own samples carry it.
   */
  syncTime?: number;
  /** Step samples behind the median, capped at MAX_SUMMARY_WEIGHT. */
  samples: number;
  /** Epoch seconds this scale was last seen. */
  lastSeenAt: number;
}

/** Peak usage of one pod of a role (the training container). */
export interface PeakUsage {
  cpuMillis: number;
  memoryBytes: number;
}

/** The highest throughput seen for this signature and the scale it was seen at. */
export interface BestScale {
  replicas: number;
  ps?: number;
  localBatchSize: number;
  throughput: number;
}

export interface JobProfile {
  version: typeof PROFILE_VERSION;
  signature: string;
  runs: number;
  best?: BestScale;
  peaks: Partial<Record<RoleName, PeakUsage>>;
  steps: StepTimeSummary[];
  /** Epoch seconds. */
  updatedAt: number;
  /**
   * Rescale pauses measured on finished runs of this signature (each run's last per direction, its
   * ScaledTrainingJob status), oldest first, at most MAX_RESCALE_COSTS each: a new run's cost before trainscaler
   * has measured it on that run (lib/policies/rescale-cost.ts).
   */
  rescaleCosts?: { up: number[]; down: number[] };
}

/** Measured rescale pauses a profile keeps per direction: recent enough to follow a changed launch. */
export const MAX_RESCALE_COSTS = 5;

/** What one finished (or long enough observed) run contributes to its signature's profile. */
export interface FinishedRun {
  signature: string;
  samples: StepSample[];
  usage: ContainerUsage[];
  /** The run's last measured rescale pauses, seconds (state.rescaleCost: upPause, down), when measured. */
  rescaleCost?: { up?: number; down?: number };
}

const ROLE_NAMES: readonly RoleName[] = ['Worker', 'Master', 'PS', 'Chief', 'Evaluator'];

export function serializeProfile(profile: JobProfile): string {
  // Fields written in a fixed order so that an unchanged profile serialises to the same bytes and the
  // handler can skip a ConfigMap write.
  const peaks: Partial<Record<RoleName, PeakUsage>> = {};
  for (const role of ROLE_NAMES) {
    const p = profile.peaks[role];
    if (p) peaks[role] = { cpuMillis: p.cpuMillis, memoryBytes: p.memoryBytes };
  }
  const out = {
    version: profile.version,
    signature: profile.signature,
    runs: profile.runs,
    ...(profile.best ? { best: orderedBest(profile.best) } : {}),
    peaks,
    steps: sortSummaries(profile.steps).map(orderedSummary),
    updatedAt: profile.updatedAt,
    ...(profile.rescaleCosts
      ? { rescaleCosts: { up: profile.rescaleCosts.up, down: profile.rescaleCosts.down } }
      : {}),
  };
  return JSON.stringify(out);
}

export function parseProfile(json: string): JobProfile {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new ValidationError(
      '',
      `profile is not JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  const obj = record(raw, '');
  const version = obj.version;
  if (version !== PROFILE_VERSION) {
    throw new ValidationError('/version', `unsupported profile version ${JSON.stringify(version)}`);
  }
  const signature = obj.signature;
  if (typeof signature !== 'string' || signature === '') {
    throw new ValidationError('/signature', 'must be a non-empty string');
  }
  const steps = obj.steps;
  if (!Array.isArray(steps)) throw new ValidationError('/steps', 'must be an array');
  if (steps.length > MAX_STEP_SUMMARIES) {
    throw new ValidationError('/steps', `at most ${MAX_STEP_SUMMARIES} entries, got ${steps.length}`);
  }
  const profile: JobProfile = {
    version: PROFILE_VERSION,
    signature,
    runs: num(obj, 'runs', '', { integer: true, min: 0 }),
    peaks: parsePeaks(obj.peaks),
    steps: steps.map((s, i) => parseSummary(s, `/steps/${i}`)),
    updatedAt: num(obj, 'updatedAt', '', { min: 0 }),
  };
  if (obj.best !== undefined) profile.best = parseBest(obj.best);
  if (obj.rescaleCosts !== undefined) profile.rescaleCosts = parseRescaleCosts(obj.rescaleCosts);
  return profile;
}

function parseRescaleCosts(value: unknown): { up: number[]; down: number[] } {
  const obj = record(value, '/rescaleCosts');
  const list = (key: 'up' | 'down') => {
    const ptr = `/rescaleCosts/${key}`;
    const raw = obj[key];
    if (!Array.isArray(raw)) throw new ValidationError(ptr, 'must be an array');
    if (raw.length > MAX_RESCALE_COSTS)
      throw new ValidationError(ptr, `at most ${MAX_RESCALE_COSTS} entries, got ${raw.length}`);
    return raw.map((v: unknown, i) => {
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        throw new ValidationError(`${ptr}/${i}`, `must be a finite number >= 0, got ${JSON.stringify(v)}`);
      return v;
    });
  };
  return { up: list('up'), down: list('down') };
}

/** The run's measured pauses appended to the profile's, the oldest dropped beyond MAX_RESCALE_COSTS. */
function mergeRescaleCosts(
  kept: JobProfile['rescaleCosts'],
  run: FinishedRun['rescaleCost'],
): JobProfile['rescaleCosts'] {
  const valid = (v: number | undefined): v is number => v !== undefined && Number.isFinite(v) && v >= 0;
  const add = (list: number[] = [], v: number | undefined) =>
    (valid(v) ? [...list, v] : list).slice(-MAX_RESCALE_COSTS);
  const up = add(kept?.up, run?.up);
  const down = add(kept?.down, run?.down);
  return up.length + down.length > 0 ? { up, down } : undefined;
}

/** Folds one run into the profile of its signature; a new profile when there is none yet. */
export function mergeRunIntoProfile(
  profile: JobProfile | undefined,
  run: FinishedRun,
  now: number,
): JobProfile {
  if (profile && profile.signature !== run.signature) {
    throw new ValidationError(
      '/signature',
      `run of '${run.signature}' cannot be merged into the profile of '${profile.signature}'`,
    );
  }
  const runSummaries = summariseSamples(run.samples, now);

  const byKey = new Map<string, StepTimeSummary>();
  for (const s of profile?.steps ?? []) byKey.set(scaleKey(s), { ...s });
  for (const s of runSummaries) {
    const old = byKey.get(scaleKey(s));
    byKey.set(scaleKey(s), old ? combine(old, s) : s);
  }

  let best = profile?.best;
  for (const s of runSummaries) {
    const throughput = (s.replicas * s.localBatchSize) / s.stepTime;
    if (!best || throughput > best.throughput) {
      best = {
        replicas: s.replicas,
        ...(s.ps ? { ps: s.ps } : {}),
        localBatchSize: s.localBatchSize,
        throughput,
      };
    }
  }

  const merged: JobProfile = {
    version: PROFILE_VERSION,
    signature: run.signature,
    runs: (profile?.runs ?? 0) + 1,
    peaks: mergePeaks(profile?.peaks ?? {}, run.usage),
    steps: capSummaries([...byKey.values()]),
    updatedAt: now,
  };
  if (best) merged.best = best;
  const rescaleCosts = mergeRescaleCosts(profile?.rescaleCosts, run.rescaleCost);
  if (rescaleCosts) merged.rescaleCosts = rescaleCosts;
  return merged;
}

/** The profile's summaries as step samples, for fitting a throughput model before the job starts. */
export function profileSamples(profile: JobProfile): StepSample[] {
  return sortSummaries(profile.steps).map((s) => ({
    replicas: s.replicas,
    nodes: s.nodes,
    ...(s.ps !== undefined ? { ps: s.ps } : {}),
    localBatchSize: s.localBatchSize,
    stepTime: s.stepTime,
    ...(s.syncTime !== undefined ? { syncTime: s.syncTime } : {}),
    at: s.lastSeenAt,
  }));
}

/** The throughput model fitted on the profile's summaries; undefined without a profile or summaries. */
export function profileModel(profile: JobProfile | undefined): ThroughputModel | undefined {
  const samples = profile ? profileSamples(profile) : [];
  return samples.length > 0 ? fitThroughputModel(samples) : undefined;
}

/** Parameter servers per worker at the best scale seen, when the profile knows one. */
export function psPerWorker(profile: JobProfile): number | undefined {
  const best = profile.best;
  if (!best?.ps || best.replicas <= 0) return undefined;
  return best.ps / best.replicas;
}

function summariseSamples(samples: StepSample[], now: number): StepTimeSummary[] {
  const groups = new Map<string, StepSample[]>();
  for (const s of samples) {
    // Metrics can carry zero or garbage step times while a job starts; they say nothing about the scale.
    if (!(s.stepTime > 0) || !Number.isFinite(s.stepTime)) continue;
    if (!(s.replicas >= 1) || !(s.nodes >= 1) || !(s.localBatchSize > 0)) continue;
    const key = scaleKey(s);
    const group = groups.get(key);
    if (group) group.push(s);
    else groups.set(key, [s]);
  }
  const out: StepTimeSummary[] = [];
  for (const group of groups.values()) {
    const first = group[0];
    if (!first) continue;
    out.push({
      replicas: first.replicas,
      nodes: first.nodes,
      ...(first.ps ? { ps: first.ps } : {}),
      localBatchSize: first.localBatchSize,
      stepTime: median(group.map((s) => s.stepTime)),
      ...syncMedian(group),
      samples: Math.min(group.length, MAX_SUMMARY_WEIGHT),
      lastSeenAt: now,
    });
  }
  return sortSummaries(out);
}

/** A weighted mean of two medians: not the median of the union, but close and needs no raw samples. */
function combine(old: StepTimeSummary, fresh: StepTimeSummary): StepTimeSummary {
  const weight = old.samples + fresh.samples;
  const { syncTime: _, ...rest } = fresh;
  const stepTime = (old.stepTime * old.samples + fresh.stepTime * fresh.samples) / weight;
  return {
    ...rest,
    stepTime,
    ...combinedSync(old, fresh, stepTime),
    samples: Math.min(weight, MAX_SUMMARY_WEIGHT),
    lastSeenAt: Math.max(old.lastSeenAt, fresh.lastSeenAt),
  };
}

/**
 * Sync time by weight over the sides that measured it: a summary written before profiles kept sync gains it
 * from the next run at its size instead of never.
 */
function combinedSync(old: StepTimeSummary, fresh: StepTimeSummary, stepTime: number): { syncTime?: number } {
  const timed = [old, fresh].filter((s) => s.syncTime !== undefined);
  const weight = timed.reduce((sum, s) => sum + s.samples, 0);
  if (weight === 0) return {};
  const syncTime = timed.reduce((sum, s) => sum + (s.syncTime ?? 0) * s.samples, 0) / weight;
  // Averaged over fewer samples than the step, it could exceed it: never more than the step it is part of.
  return { syncTime: Math.min(syncTime, stepTime) };
}

/**
 * Drops the stalest summaries beyond the cap, but never the last one of a replica count: a fit needs
 * distinct scales more than it needs a second node layout of a scale it already knows.
 */
function capSummaries(summaries: StepTimeSummary[]): StepTimeSummary[] {
  const kept = sortSummaries(summaries);
  while (kept.length > MAX_STEP_SUMMARIES) {
    const perReplicas = new Map<number, number>();
    for (const s of kept) perReplicas.set(s.replicas, (perReplicas.get(s.replicas) ?? 0) + 1);
    const duplicated = kept.filter((s) => (perReplicas.get(s.replicas) ?? 0) > 1);
    const pool = duplicated.length > 0 ? duplicated : kept;
    const victim = [...pool].sort(
      (a, b) => a.lastSeenAt - b.lastSeenAt || a.samples - b.samples || compareKeys(a, b),
    )[0];
    if (!victim) break;
    kept.splice(kept.indexOf(victim), 1);
  }
  return kept;
}

/** The peaks per role of `old` and `usage` together (non-finite usage is left out). */
export function mergePeaks(
  old: Partial<Record<RoleName, PeakUsage>>,
  usage: ContainerUsage[],
): Partial<Record<RoleName, PeakUsage>> {
  const peaks: Partial<Record<RoleName, PeakUsage>> = {};
  for (const role of ROLE_NAMES) {
    const p = old[role];
    if (p) peaks[role] = { ...p };
  }
  for (const u of usage) {
    if (!Number.isFinite(u.cpuMillis) || !Number.isFinite(u.memoryBytes)) continue;
    const p = peaks[u.role];
    peaks[u.role] = {
      cpuMillis: Math.max(p?.cpuMillis ?? 0, u.cpuMillis),
      memoryBytes: Math.max(p?.memoryBytes ?? 0, u.memoryBytes),
    };
  }
  return peaks;
}

function scaleKey(s: { replicas: number; nodes: number; ps?: number; localBatchSize: number }): string {
  return `${s.replicas}/${s.nodes}/${s.ps ?? 0}/${s.localBatchSize}`;
}

function compareKeys(a: StepTimeSummary, b: StepTimeSummary): number {
  return (
    a.replicas - b.replicas ||
    a.nodes - b.nodes ||
    (a.ps ?? 0) - (b.ps ?? 0) ||
    a.localBatchSize - b.localBatchSize
  );
}

function sortSummaries(summaries: StepTimeSummary[]): StepTimeSummary[] {
  return [...summaries].sort(compareKeys);
}

function syncMedian(group: readonly StepSample[]): { syncTime?: number } {
  const syncs = group.map((s) => s.syncTime);
  if (!syncs.every((v): v is number => v !== undefined && v >= 0 && Number.isFinite(v))) return {};
  return { syncTime: median(syncs) };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] ?? 0;
  if (sorted.length % 2 === 1) return hi;
  return ((sorted[mid - 1] ?? hi) + hi) / 2;
}

function orderedSummary(s: StepTimeSummary): StepTimeSummary {
  return {
    replicas: s.replicas,
    nodes: s.nodes,
    ...(s.ps !== undefined ? { ps: s.ps } : {}),
    localBatchSize: s.localBatchSize,
    stepTime: s.stepTime,
    ...(s.syncTime !== undefined ? { syncTime: s.syncTime } : {}),
    samples: s.samples,
    lastSeenAt: s.lastSeenAt,
  };
}

function orderedBest(b: BestScale): BestScale {
  return {
    replicas: b.replicas,
    ...(b.ps !== undefined ? { ps: b.ps } : {}),
    localBatchSize: b.localBatchSize,
    throughput: b.throughput,
  };
}

// --- validation -----------------------------------------------------------------------------------

function record(value: unknown, ptr: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError(ptr, 'must be an object');
  }
  return value as Record<string, unknown>;
}

function num(
  obj: Record<string, unknown>,
  key: string,
  ptr: string,
  opts: { integer?: boolean; min?: number; exclusiveMin?: number } = {},
): number {
  const at = `${ptr}/${key}`;
  const value = obj[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ValidationError(at, `must be a finite number, got ${JSON.stringify(value) ?? 'nothing'}`);
  }
  if (opts.integer && !Number.isInteger(value))
    throw new ValidationError(at, `must be an integer, got ${value}`);
  if (opts.min !== undefined && value < opts.min) throw new ValidationError(at, `must be >= ${opts.min}`);
  if (opts.exclusiveMin !== undefined && value <= opts.exclusiveMin) {
    throw new ValidationError(at, `must be > ${opts.exclusiveMin}`);
  }
  return value;
}

function optionalPs(obj: Record<string, unknown>, ptr: string): { ps?: number } {
  if (obj.ps === undefined) return {};
  return { ps: num(obj, 'ps', ptr, { integer: true, min: 0 }) };
}

function parseSummary(value: unknown, ptr: string): StepTimeSummary {
  const o = record(value, ptr);
  return {
    replicas: num(o, 'replicas', ptr, { integer: true, min: 1 }),
    nodes: num(o, 'nodes', ptr, { integer: true, min: 1 }),
    ...optionalPs(o, ptr),
    localBatchSize: num(o, 'localBatchSize', ptr, { exclusiveMin: 0 }),
    stepTime: num(o, 'stepTime', ptr, { exclusiveMin: 0 }),
    ...optionalSync(o, ptr),
    samples: num(o, 'samples', ptr, { integer: true, min: 1 }),
    lastSeenAt: num(o, 'lastSeenAt', ptr, { min: 0 }),
  };
}

function optionalSync(obj: Record<string, unknown>, ptr: string): { syncTime?: number } {
  if (obj.syncTime === undefined) return {};
  const syncTime = num(obj, 'syncTime', ptr, { min: 0 });
  if (syncTime > num(obj, 'stepTime', ptr, { exclusiveMin: 0 })) {
    throw new ValidationError(`${ptr}/syncTime`, 'must not exceed stepTime');
  }
  return { syncTime };
}

function parseBest(value: unknown): BestScale {
  const o = record(value, '/best');
  return {
    replicas: num(o, 'replicas', '/best', { integer: true, min: 1 }),
    ...optionalPs(o, '/best'),
    localBatchSize: num(o, 'localBatchSize', '/best', { exclusiveMin: 0 }),
    throughput: num(o, 'throughput', '/best', { exclusiveMin: 0 }),
  };
}

function parsePeaks(value: unknown): Partial<Record<RoleName, PeakUsage>> {
  const o = record(value, '/peaks');
  const peaks: Partial<Record<RoleName, PeakUsage>> = {};
  for (const key of Object.keys(o)) {
    const ptr = `/peaks/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const role = ROLE_NAMES.find((r) => r === key);
    if (!role) throw new ValidationError(ptr, `unknown role (expected one of ${ROLE_NAMES.join(', ')})`);
    const p = record(o[key], ptr);
    peaks[role] = {
      cpuMillis: num(p, 'cpuMillis', ptr, { min: 0 }),
      memoryBytes: num(p, 'memoryBytes', ptr, { min: 0 }),
    };
  }
  return peaks;
}
