// The arithmetic of training progress, kept apart from the cluster bookkeeping so it can be checked by
// hand: throughput = K * m / stepTime, no progress while the job pays a rescale cost, and completion at
// the exact instant the target is reached (not at the end of a simulation step).
import type { SimulatedAppModel, SimulatedPlacement } from './app-model.js';

export interface TrainingWorld {
  /** Data-parallel replicas (K). */
  replicas: number;
  /** Distinct nodes the replicas run on. */
  nodes: number;
  /** Replicas on each of those nodes, in the cluster's node order (a measured world looks the placement up). */
  perNode?: number[];
  ps: number;
  /** Per-replica batch (m). */
  localBatchSize: number;
  /** >= 1: the slowest replica's slowdown (straggler, CPU throttling); synchronous training waits for it. */
  slowdown: number;
}

/** m = global / K when the job keeps a global batch fixed, else its declared local batch, else the app's default. */
export function localBatchSizeFor(
  job: { globalBatchSize?: number; localBatchSize?: number },
  replicas: number,
  defaultLocalBatchSize: number,
): number {
  if (job.globalBatchSize !== undefined) return job.globalBatchSize / Math.max(1, replicas);
  return job.localBatchSize ?? defaultLocalBatchSize;
}

export function placementOf(world: TrainingWorld): SimulatedPlacement {
  const placement: SimulatedPlacement = {
    replicas: world.replicas,
    nodes: world.nodes,
    localBatchSize: world.localBatchSize,
  };
  if (world.ps > 0) placement.ps = world.ps;
  if (world.perNode) placement.perNode = world.perNode;
  return placement;
}

/** How many of `podNodes` run on each node, in `nodeOrder`, nodes without one left out. */
export function replicasPerNode(
  nodeOrder: readonly string[],
  podNodes: ReadonlyArray<string | undefined>,
): number[] {
  const counts = new Map<string, number>();
  for (const node of podNodes) if (node !== undefined) counts.set(node, (counts.get(node) ?? 0) + 1);
  return nodeOrder.flatMap((node) => {
    const count = counts.get(node);
    return count ? [count] : [];
  });
}

/** True seconds per step of the world, slowdown included. */
export function worldStepTime(apps: SimulatedAppModel, app: string, world: TrainingWorld): number {
  return apps.stepTime(app, placementOf(world)) * world.slowdown;
}

/** Samples per second: K * m / stepTime. */
export function worldThroughput(apps: SimulatedAppModel, app: string, world: TrainingWorld): number {
  return (world.replicas * world.localBatchSize) / worldStepTime(apps, app, world);
}

export interface TrainingAdvance {
  processed: number;
  /** Seconds of the interval in which the job trained (the rest went to the rescale cost). */
  effectiveSeconds: number;
  /** When the target was reached inside the interval. */
  completedAt?: number;
}

/** Progress over [from, to) at `throughput`, none before `stalledUntil`. */
export function advanceTraining(input: {
  processed: number;
  target: number;
  throughput: number;
  from: number;
  to: number;
  stalledUntil: number;
}): TrainingAdvance {
  const start = Math.max(input.from, input.stalledUntil);
  const effectiveSeconds = Math.max(0, input.to - start);
  if (effectiveSeconds === 0 || input.throughput <= 0)
    return { processed: input.processed, effectiveSeconds };
  const remaining = input.target - input.processed;
  const secondsToFinish = remaining / input.throughput;
  if (secondsToFinish <= effectiveSeconds) {
    return {
      processed: input.target,
      effectiveSeconds: secondsToFinish,
      completedAt: start + secondsToFinish,
    };
  }
  return { processed: input.processed + input.throughput * effectiveSeconds, effectiveSeconds };
}
