// Runtime tuning of one job's worker count (and, Optimus-style, its parameter-server count). Every rescale
// restarts training, so a change must beat hysteresis (no flapping on noise) and must pay back its restart
// over the rest of the run; scale-ups are scored at step time + one stdev so that an unsure extrapolation
// argues for caution rather than for more pods.

import { podsFitting } from '../cluster/capacity.js';
import type { PolicyConfig } from '../config.js';
import type { Placement, ThroughputModel } from '../model/throughput-model.js';
import type { Change, ClusterCapacity, JobView, Plan, RoleView } from '../types.js';
import { formatPercent } from './format.js';
import { planWithinKind } from './kind-limits.js';
import {
  expectedThroughput,
  findRole,
  formatChange,
  formatDuration,
  formatRate,
  formatRateChange,
  localBatchFor,
  nodesAfterResize,
  pessimisticThroughput,
  plural,
  podsPerNode,
  withinHysteresis,
} from './placement.js';
import { explained, oneLine, workersChange } from './reason.js';
import {
  describeCost,
  type RescaleCosts,
  rescaleCostsOf,
  restartBudgetNote,
  scaleDownsLeft,
} from './rescale-cost.js';

/** Horizon used when the job does not say how much is left: long enough to matter, short enough to be modest. */
export const ASSUMED_REMAINING_SECONDS = 3600;

export interface TuningInput {
  job: JobView;
  model: ThroughputModel;
  current: Placement;
  capacity: ClusterCapacity;
  remainingSeconds: number | undefined;
  config: PolicyConfig;
  now: number;
}

/** Seconds left of the cool-down after trainscaler's last write to the job; 0 when it may act. */
export function cooldownRemaining(job: JobView, now: number, config: PolicyConfig): number {
  const last = job.state.lastActionAt;
  if (last === undefined) return 0;
  return Math.max(0, last + config.cooldownSeconds - now);
}

/** Run time saved by going from oldTp to newTp for the rest of the run (negative when newTp is slower). */
export function timeSaved(remainingSeconds: number, oldTp: number, newTp: number): number {
  return remainingSeconds * (1 - oldTp / newTp);
}

/** What a scale-up must save: its cost (the restart plus the new pods' start-up) times the safety factor. */
export function scaleUpCost(costs: RescaleCosts, config: Pick<PolicyConfig, 'gainOverCostFactor'>): number {
  return config.gainOverCostFactor * costs.up;
}

export function scaleUpPaysOff(
  remainingSeconds: number,
  oldTp: number,
  newTp: number,
  costs: RescaleCosts,
  config: Pick<PolicyConfig, 'gainOverCostFactor'>,
) {
  return timeSaved(remainingSeconds, oldTp, newTp) > scaleUpCost(costs, config);
}

/**
 * A scale-down pays off when the pod-seconds it frees over the rest of the run exceed (by the safety factor)
 * the pod-seconds every pod of the job stalls during the restart; shrinking a job about to finish does not.
 */
export function scaleDownPaysOff(
  remainingSeconds: number,
  podsBefore: number,
  podsAfter: number,
  costs: RescaleCosts,
  config: Pick<PolicyConfig, 'gainOverCostFactor'>,
): boolean {
  const freed = (podsBefore - podsAfter) * remainingSeconds;
  return freed > config.gainOverCostFactor * podsBefore * costs.down;
}

/**
 * The one rule for how far a single decision may grow a job's worker count, the same on every path that can
 * grow one (tuning on an alarm, the rebalance on the schedule, the initial configuration at submit): until
 * the job's throughput has been observed at two worker counts, its model's scaling is priors, not
 * measurement, so it grows by one worker at most (a probe; the next review fits on two scales). An unknown
 * remaining time (no trainscaler.io/target-samples) is an assumed hour, and an assumption alone does not
 * justify a large step either: one worker at most. Otherwise up to maxReplicaStep.
 *
 * Where that one worker would open a new node (`nodeFill`: the workers that fill the node it opens, given by
 * the caller only where it applies), the step may fill that node instead, up to maxReplicaStep: the one worker
 * alone makes every other worker pay the inter-node all-reduce and is predicted slower, so "one at a time"
 * never crosses the boundary. Filling the node is the smallest step that measures the job across nodes.
 */
export function growthLimit(
  evidence: {
    distinctScales: number;
    remainingKnown: boolean;
    nodeFill?: number;
    /** The job's workers now and the most it has run at (JobAutoscalerState.largestRunWorkers). */
    regrow?: { from: number; largestRun?: number };
  },
  config: Pick<PolicyConfig, 'maxReplicaStep'>,
): { workers: number; why?: string } {
  const step = Math.max(0, Math.floor(config.maxReplicaStep));
  const one = (why: string) => {
    const fill = Math.min(step, Math.floor(evidence.nodeFill ?? 0));
    return fill > 1
      ? { workers: fill, why: `${why}, but ${fill} to fill the node the first one opens` }
      : { workers: 1, why };
  };
  if (evidence.distinctScales < 2) return one('seen at one size only: one probe worker at a time');
  if (!evidence.remainingKnown) return one('remaining time unknown: one worker at a time');
  // A job shrunk for others and measured at two sizes grows back to a size it has run at in one decision: a
  // step a cool-down at a time took a 46-worker imagenet job 10 decisions and 18 minutes from 8 back to 45
  // beside 36 idle GPUs (1.0x workload-1). Beyond that size the step holds: there the model extrapolates.
  const { from = 0, largestRun = 0 } = evidence.regrow ?? {};
  if (largestRun - from > step)
    return { workers: largestRun - from, why: `back to the ${largestRun} workers it has run at` };
  return { workers: step };
}

export function describeRemaining(remainingSeconds: number | undefined): string {
  return remainingSeconds === undefined
    ? `remaining ~${formatDuration(ASSUMED_REMAINING_SECONDS)} (unknown, assumed)`
    : `remaining ~${formatDuration(remainingSeconds)}`;
}

interface Candidate {
  role: 'Worker' | 'PS';
  from: number;
  to: number;
  placement: Placement;
  /** Pessimistic samples/s. */
  tp: number;
  deltaPods: number;
  deltaGpus: number;
}

export function decideTuning(input: TuningInput): Plan {
  const { job, model, current, capacity, config, now } = input;
  const plan = (changes: Change[], reason: string, details: (string | undefined)[] = []): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'tuning', changes, ...explained(reason, details) });

  if (!job.managed) return plan([], 'not managed by trainscaler (trainscaler.io/managed=false)');
  if (job.state.paused) {
    return plan([], `paused${job.state.pauseReason ? ` (${job.state.pauseReason})` : ''}: no tuning`);
  }
  if (!job.elastic) {
    return plan([], `${job.ref.kind} is not elastic: worker count stays ${current.replicas}`);
  }
  const worker = findRole(job, 'Worker');
  if (!worker) return plan([], 'job has no Worker role to tune');

  const wait = cooldownRemaining(job, now, config);
  if (wait > 0) {
    return plan(
      [],
      `cool-down: ${Math.ceil(wait)} s left of ${config.cooldownSeconds} s since the last change`,
    );
  }

  const psRole = job.ref.kind === 'TFJob' ? findRole(job, 'PS') : undefined;
  const ps = psRole ? (current.ps ?? psRole.replicas) : current.ps;
  if (worker.replicas !== current.replicas || (psRole && psRole.replicas !== ps)) {
    return plan(
      [],
      `rescale in progress: spec asks ${plural(worker.replicas, 'worker')}, ${current.replicas} running; ` +
        'waiting for it to settle',
    );
  }

  const k = current.replicas;
  const perNode = podsPerNode(capacity, worker.requests);
  const build = (workers: number, psCount: number | undefined): Placement => ({
    replicas: workers,
    nodes: nodesAfterResize(current, workers, perNode),
    ...(psCount !== undefined ? { ps: psCount } : {}),
    localBatchSize: localBatchFor(job, workers, current.localBatchSize),
  });
  const baseTp = expectedThroughput(model, build(k, ps));
  if (baseTp === undefined) return plan([], `model gives no usable prediction at ${plural(k, 'worker')}`);

  const remaining = input.remainingSeconds ?? ASSUMED_REMAINING_SECONDS;
  const remainingText = describeRemaining(input.remainingSeconds);
  const mrg = config.minRelativeGain;
  const costs = rescaleCostsOf(job, config);

  const limit = growthLimit(
    {
      distinctScales: model.distinctScales,
      remainingKnown: input.remainingSeconds !== undefined,
      regrow: { from: k, largestRun: job.state.largestRunWorkers },
    },
    config,
  );
  const limitNote = limit.why ? `growth rule: ${limit.why}` : undefined;
  const ups = scaleUpCandidates(input, worker, psRole, ps, build, limit.workers);
  const upsPassing = ups.filter(
    (c) => c.tp / baseTp - 1 >= mrg && scaleUpPaysOff(remaining, baseTp, c.tp, costs, config),
  );
  if (upsPassing.length > 0) {
    const best = maxBy(upsPassing, (c) => c.tp);
    const chosen = byCheapestFirst(upsPassing).find((c) => withinHysteresis(c.tp, best.tp, mrg)) ?? best;
    const saved = timeSaved(remaining, baseTp, chosen.tp);
    const tail =
      chosen === best
        ? undefined
        : `${plural(best.to, best.role === 'Worker' ? 'worker' : 'PS')} would reach ${formatRate(best.tp)}, ` +
          `less than ${formatPercent(mrg)} more for ${plural(best.deltaPods - chosen.deltaPods, 'more pod')}`;
    return plan(
      [changeOf(chosen)],
      `${describe(chosen)}: predicted ${formatChange(chosen.tp / baseTp - 1)} at step time + 1 sd`,
      [
        `predicted ${formatRateChange(baseTp, chosen.tp)} at step time + 1 sd`,
        `gain over ${remainingText} = ${formatDuration(saved)} > ${config.gainOverCostFactor} x ${describeCost(costs, 'up')}`,
        tail,
        limitNote,
      ],
    );
  }

  // Exploration: a model that has seen one scale only can never be sure that more workers help, so scoring
  // at step time + 1 sd would keep a job that started small small forever. One worker more is tried when the
  // expected (mean) prediction says it pays; the next review then fits on two scales.
  const probe =
    input.model.distinctScales < 2 ? ups.find((c) => c.role === 'Worker' && c.to === k + 1) : undefined;
  const probeTp = probe ? expectedThroughput(model, probe.placement) : undefined;
  if (
    probe &&
    probeTp !== undefined &&
    probeTp / baseTp - 1 >= mrg &&
    scaleUpPaysOff(remaining, baseTp, probeTp, costs, config)
  ) {
    return plan(
      [changeOf(probe)],
      `${describe(probe)}: probe, only one scale observed so far; expected ${formatChange(probeTp / baseTp - 1)}`,
      [
        `expected ${formatRateChange(baseTp, probeTp)} (mean prediction)`,
        `gain over ${remainingText} = ${formatDuration(timeSaved(remaining, baseTp, probeTp))} > ` +
          `${config.gainOverCostFactor} x ${describeCost(costs, 'up')}`,
        limitNote,
      ],
    );
  }

  // Each worker scale-down of an elastic PyTorchJob spends one of its maxRestarts: none is planned once only
  // the reserved last one is left (the guardrail would hold it anyway).
  const shrinkable = scaleDownsLeft(job) > 0;
  const downs = scaleDownCandidates(input, worker, psRole, ps, build).filter(
    (c) => shrinkable || c.role !== 'Worker',
  );
  const bestTp = Math.max(baseTp, ...downs.map((c) => c.tp));
  const podsBefore = k + (psRole ? (ps ?? 0) : 0);
  const downsPassing = downs.filter(
    (c) =>
      withinHysteresis(c.tp, bestTp, mrg) &&
      scaleDownPaysOff(remaining, podsBefore, podsBefore + c.deltaPods, costs, config),
  );
  const chosenDown = byCheapestFirst(downsPassing)[0];
  if (chosenDown) {
    return plan(
      [changeOf(chosenDown)],
      `${describe(chosenDown)}: ${plural(-chosenDown.deltaPods, 'pod')} freed that added nearly nothing ` +
        `(predicted ${formatChange(chosenDown.tp / baseTp - 1)})`,
      [
        `predicted ${formatRateChange(baseTp, chosenDown.tp)} at step time + 1 sd, ` +
          `within ${formatPercent(mrg)} of the best ${formatRate(bestTp)}`,
      ],
    );
  }

  const up = whyNoScaleUp(ups, input, worker, baseTp, remaining, remainingText, costs);
  const down = shrinkable
    ? whyNoScaleDown(downs, bestTp, remaining, podsBefore, costs, config)
    : `no scale-down: ${restartBudgetNote(job)}`;
  return plan([], oneLine(`keep ${plural(k, 'worker')} at ${formatRate(baseTp)}: ${up.summary}`), [
    up.detail,
    down,
  ]);
}

type Build = (workers: number, ps: number | undefined) => Placement;

/** A resize of one role scored pessimistically; undefined when the model gives no usable prediction. */
function candidate(
  model: ThroughputModel,
  role: RoleView,
  from: number,
  to: number,
  placement: Placement,
): Candidate | undefined {
  const tp = pessimisticThroughput(model, placement);
  if (tp === undefined) return undefined;
  const d = to - from;
  return {
    role: role.role === 'PS' ? 'PS' : 'Worker',
    from,
    to,
    placement,
    tp,
    deltaPods: d,
    deltaGpus: d * role.requests.gpus,
  };
}

function scaleUpCandidates(
  input: TuningInput,
  worker: RoleView,
  psRole: RoleView | undefined,
  ps: number | undefined,
  build: Build,
  maxGrowth: number,
): Candidate[] {
  const { model, current, capacity } = input;
  const out: (Candidate | undefined)[] = [];
  const k = current.replicas;
  const room = podsFitting(capacity, worker.requests);
  const top = Math.min(worker.maxReplicas, k + maxGrowth, k + room);
  for (let to = k + 1; to <= top; to++) out.push(candidate(model, worker, k, to, build(to, ps)));
  if (
    psRole &&
    ps !== undefined &&
    ps + 1 <= psRole.maxReplicas &&
    podsFitting(capacity, psRole.requests) >= 1
  ) {
    out.push(candidate(model, psRole, ps, ps + 1, build(k, ps + 1)));
  }
  return out.filter((c): c is Candidate => c !== undefined);
}

function scaleDownCandidates(
  input: TuningInput,
  worker: RoleView,
  psRole: RoleView | undefined,
  ps: number | undefined,
  build: Build,
): Candidate[] {
  const { model, current, config } = input;
  const out: (Candidate | undefined)[] = [];
  const k = current.replicas;
  const bottom = Math.max(worker.minReplicas, 1, k - config.maxReplicaStep);
  for (let to = k - 1; to >= bottom; to--) out.push(candidate(model, worker, k, to, build(to, ps)));
  if (psRole && ps !== undefined && ps - 1 >= Math.max(psRole.minReplicas, 1)) {
    out.push(candidate(model, psRole, ps, ps - 1, build(k, ps - 1)));
  }
  return out.filter((c): c is Candidate => c !== undefined);
}

function whyNoScaleUp(
  ups: Candidate[],
  input: TuningInput,
  worker: RoleView,
  baseTp: number,
  remaining: number,
  remainingText: string,
  costs: RescaleCosts,
): { summary: string; detail?: string } {
  const { config, current } = input;
  if (ups.length === 0) {
    if (current.replicas >= worker.maxReplicas)
      return { summary: `at max ${plural(worker.maxReplicas, 'worker')}` };
    return { summary: 'no free capacity for another worker' };
  }
  const best = maxBy(ups, (c) => c.tp);
  const gain = best.tp / baseTp - 1;
  if (gain < config.minRelativeGain) {
    return {
      summary: `${describe(best)} predicts ${formatChange(gain)} (< ${formatPercent(config.minRelativeGain)} hysteresis)`,
    };
  }
  const saved = formatDuration(Math.max(0, timeSaved(remaining, baseTp, best.tp)));
  return {
    summary: `${describe(best)} predicts ${formatChange(gain)} but saves only ${saved}`,
    detail:
      `${describe(best)} saves ${saved} over ${remainingText}, ` +
      `needs > ${config.gainOverCostFactor} x ${describeCost(costs, 'up')}`,
  };
}

function whyNoScaleDown(
  downs: Candidate[],
  bestTp: number,
  remaining: number,
  podsBefore: number,
  costs: RescaleCosts,
  config: PolicyConfig,
): string {
  if (downs.length === 0) return 'at min';
  // The mildest shrink is the one that came closest to qualifying.
  const mildest = maxBy(downs, (c) => c.tp);
  if (!withinHysteresis(mildest.tp, bestTp, config.minRelativeGain)) {
    const loss = `${((1 - mildest.tp / bestTp) * 100).toFixed(1)}%`;
    return `${describe(mildest)} would lose ${loss} (>= ${formatPercent(config.minRelativeGain)})`;
  }
  if (!scaleDownPaysOff(remaining, podsBefore, podsBefore + mildest.deltaPods, costs, config)) {
    return `${describe(mildest)} frees too little before the run ends to pay for the restart (${describeCost(costs, 'down')})`;
  }
  return 'no cheaper configuration';
}

function describe(c: Candidate): string {
  return c.role === 'Worker' ? workersChange(c.from, c.to) : `${c.from} -> ${c.to} PS`;
}

function changeOf(c: Candidate): Change {
  return { kind: 'replicas', role: c.role, from: c.from, to: c.to };
}

/** Fewest added GPUs, then fewest added pods, then role name: deterministic and frugal. */
function byCheapestFirst(candidates: Candidate[]): Candidate[] {
  return [...candidates].sort(
    (a, b) =>
      a.deltaGpus - b.deltaGpus ||
      a.deltaPods - b.deltaPods ||
      (a.role < b.role ? -1 : a.role > b.role ? 1 : 0),
  );
}

function maxBy<T>(items: T[], score: (item: T) => number): T {
  let best = items[0];
  if (best === undefined) throw new Error('maxBy of an empty list');
  for (const item of items) if (score(item) > score(best)) best = item;
  return best;
}
