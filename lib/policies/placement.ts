// Building the placements a policy compares and scoring them with the throughput model. Every policy goes
// through these helpers so that "4 workers" means the same node count and local batch everywhere; a
// comparison between two differently built placements would invent gains that are not there.

import { podsFittingOnNode } from '../cluster/capacity.js';
import type { Placement, ThroughputModel } from '../model/throughput-model.js';
import type { ClusterCapacity, JobView, Resources, RoleName, RoleView } from '../types.js';

export function findRole(job: JobView, role: RoleName): RoleView | undefined {
  return job.roles.find((r) => r.role === role);
}

/** Pods of this shape the roomiest schedulable node holds when empty; 0 when no node can hold one. */
export function podsPerNode(capacity: ClusterCapacity, request: Resources): number {
  let best = 0;
  for (const node of capacity.nodes) {
    if (!node.schedulable) continue;
    best = Math.max(best, podsFittingOnNode(node.allocatable, request));
  }
  return best;
}

/** Fewest nodes `replicas` pods span when packed densely: ceil(K / podsPerNode). */
export function nodesSpanned(replicas: number, perNode: number): number {
  if (replicas <= 0) return 0;
  // No node is known to hold one: assume the worst, one pod per node.
  if (perNode <= 0) return replicas;
  return Math.ceil(replicas / perNode);
}

/**
 * Nodes a running job spans after resizing. Adding pods never consolidates the ones already running, and
 * removing pods is not assumed to empty whole nodes, so neither direction is flattered by a denser layout.
 */
export function nodesAfterResize(
  current: { replicas: number; nodes: number },
  replicas: number,
  perNode: number,
): number {
  if (replicas === current.replicas) return current.nodes;
  const dense = nodesSpanned(replicas, perNode);
  if (replicas > current.replicas) return Math.max(current.nodes, dense);
  return Math.max(dense, Math.min(current.nodes, replicas));
}

/** Per-replica batch at K replicas: a declared global batch stays fixed, so throughput is compared honestly. */
export function localBatchFor(job: JobView, replicas: number, fallback: number): number {
  if (job.globalBatchSize !== undefined && job.globalBatchSize > 0 && replicas > 0) {
    return job.globalBatchSize / replicas;
  }
  return fallback;
}

/** Samples/s the model expects; undefined when the model gives nothing usable. */
export function expectedThroughput(model: ThroughputModel, placement: Placement): number | undefined {
  return throughputAt(placement, model.predict(placement).stepTime);
}

/** Samples/s at stepTime + one stdev: what can be counted on where the fit is unsure (extrapolation). */
export function pessimisticThroughput(model: ThroughputModel, placement: Placement): number | undefined {
  const p = model.predict(placement);
  return throughputAt(placement, p.stepTime + (Number.isFinite(p.stdev) ? Math.max(0, p.stdev) : Infinity));
}

/**
 * Samples/s at stepTime - 1 stdev, never above perfect scaling from `observed` (no job speeds up more than
 * linearly in its workers): what the job may reach where the fit is unsure, for deciding whether to measure.
 */
export function optimisticThroughput(
  model: ThroughputModel,
  placement: Placement,
  observed: { replicas: number; throughput: number },
): number | undefined {
  const p = model.predict(placement);
  const linear = (observed.throughput * placement.replicas) / observed.replicas;
  const fast = p.stepTime - (Number.isFinite(p.stdev) ? Math.max(0, p.stdev) : Infinity);
  const tp = fast > 0 ? throughputAt(placement, fast) : undefined;
  return Math.min(tp ?? linear, linear);
}

function throughputAt(placement: Placement, stepTime: number): number | undefined {
  if (!Number.isFinite(stepTime) || stepTime <= 0) return undefined;
  const tp = (placement.replicas * placement.localBatchSize) / stepTime;
  return Number.isFinite(tp) && tp > 0 ? tp : undefined;
}

/** True when `tp` is close enough to `best` that the extra resources behind `best` are not worth it. */
export function withinHysteresis(tp: number, best: number, minRelativeGain: number): boolean {
  return tp >= best || tp * (1 + minRelativeGain) > best;
}

/** Samples/s for a reason: no false precision on large rates, enough digits on small ones. */
export function formatRate(samplesPerSecond: number): string {
  const digits = samplesPerSecond >= 100 ? 0 : samplesPerSecond >= 10 ? 1 : 2;
  return `${samplesPerSecond.toFixed(digits)} samples/s`;
}

/** "400 -> 540 samples/s (+35.0%)": both rates in one unit, then the change. */
export function formatRateChange(from: number, to: number): string {
  return `${formatRate(from).replace(' samples/s', '')} -> ${formatRate(to)} (${formatChange(to / from - 1)})`;
}

/** Relative change with its sign, e.g. "+35.8%", "-4.1%". */
export function formatChange(fraction: number): string {
  const pct = (fraction * 100).toFixed(1);
  return fraction >= 0 ? `+${pct}%` : `${pct}%`;
}

/** Seconds as a person estimates them: "50 s", "19.4 min", "2.5 h". */
export function formatDuration(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
