// The arithmetic of training progress, kept apart from the cluster bookkeeping so it can be checked by
// hand: throughput = K * m / stepTime, no progress while the job pays a rescale cost, and completion at
// the exact instant the target is reached (not at the end of a simulation step).
import type { Placement } from '../model/throughput-model.js';
import type { SimulatedAppModel } from './app-model.js';

export interface TrainingWorld {
  /** Data-parallel replicas (K). */
  replicas: number;
  /** Distinct nodes the replicas run on. */
  nodes: number;
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

export function placementOf(world: TrainingWorld): Placement {
  const placement: Placement = {
    replicas: world.replicas,
    nodes: world.nodes,
    localBatchSize: world.localBatchSize,
  };
  if (world.ps > 0) placement.ps = world.ps;
  return placement;
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
