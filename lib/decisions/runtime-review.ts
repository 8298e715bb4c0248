import type { JobSnapshot } from '../actuator.js';
import type { PolicyConfig } from '../config.js';
import { MissingMetricsError } from '../errors.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import { fitRuntimeModel } from '../model/observed-bound.js';
import type { Placement } from '../model/throughput-model.js';
import { findRole, localBatchFor } from '../policies/placement.js';
import { decideRightsizing } from '../policies/rightsizing.js';
import { decideOnStragglers } from '../policies/stragglers.js';
import { decideTuning } from '../policies/tuning.js';
import type { ClusterCapacity, ContainerUsage, JobRef, Plan, StepSample, WorkerStepTimes } from '../types.js';

/** What the metrics say about a running job; fetched once per trigger, reused across conflict retries. */
export interface RuntimeObservations {
  samples: StepSample[];
  usage: ContainerUsage[] | undefined;
  series: WorkerStepTimes[] | undefined;
  samplesProcessed: number | undefined;
}

const WINDOW_SECONDS = 6 * 3600;

async function optional<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof MissingMetricsError) return undefined;
    throw error;
  }
}

/** Step samples are required (no decision on missing data); usage and per-worker series are optional. */
export async function observeJob(metrics: MetricsSource, ref: JobRef): Promise<RuntimeObservations> {
  const samples = await metrics.stepSamples(ref, WINDOW_SECONDS);
  if (samples.length === 0) throw new MissingMetricsError(`no step samples for ${ref.namespace}/${ref.name}`);
  const [usage, series, samplesProcessed] = await Promise.all([
    optional(() => metrics.containerUsage(ref, WINDOW_SECONDS)),
    optional(() => metrics.workerStepTimes(ref, 1800)),
    optional(() => metrics.samplesProcessed(ref)),
  ]);
  return { samples, usage, series, samplesProcessed };
}

/** Where the job runs now, as the model needs it. */
export function currentPlacement(snapshot: JobSnapshot, samples: readonly StepSample[]): Placement {
  const worker = findRole(snapshot.view, 'Worker');
  const replicas = worker?.replicas ?? 1;
  const nodes = new Set(
    snapshot.pods
      .filter((p) => p.role === 'Worker' && p.phase === 'Running' && p.nodeName)
      .map((p) => p.nodeName),
  ).size;
  const last = samples[samples.length - 1];
  const fallbackBatch = snapshot.view.localBatchSize ?? last?.localBatchSize ?? 1;
  const placement: Placement = {
    replicas,
    nodes: Math.max(1, Math.min(nodes || 1, replicas)),
    localBatchSize: localBatchFor(snapshot.view, replicas, fallbackBatch),
  };
  const ps = findRole(snapshot.view, 'PS');
  if (ps) placement.ps = ps.replicas;
  return placement;
}

/** Seconds to the job's declared target at the given throughput; undefined when either is unknown. */
export function remainingSecondsOf(
  view: JobSnapshot['view'],
  observed: RuntimeObservations,
  throughput: number,
): number | undefined {
  return view.targetSamples !== undefined && observed.samplesProcessed !== undefined && throughput > 0
    ? Math.max(0, view.targetSamples - observed.samplesProcessed) / throughput
    : undefined;
}

/**
 * One review of a running job, in order of urgency: replace a transient straggler, then change the worker
 * count if the model says it pays, then right-size CPU/memory. The first plan with changes wins; otherwise
 * the no-change plan carries every policy's reason so that "why nothing" is answerable too.
 */
export function decideRuntime(
  snapshot: JobSnapshot,
  observed: RuntimeObservations,
  capacity: ClusterCapacity,
  config: PolicyConfig,
  now: number,
): Plan {
  const { view, pods } = snapshot;
  const reasons: string[] = [];
  if (view.state.paused) {
    return {
      ref: view.ref,
      policy: 'tuning',
      changes: [],
      reason: `paused: ${view.state.pauseReason ?? 'by trainscaler'}`,
    };
  }
  if (observed.series && observed.series.length > 1) {
    const plan = decideOnStragglers({ job: view, series: observed.series, pods, config, now });
    if (plan.changes.length > 0) return plan;
    reasons.push(plan.reason);
  }
  const model = fitRuntimeModel(observed.samples);
  const current = currentPlacement(snapshot, observed.samples);
  const throughput = model.predict(current).throughput;
  const remainingSeconds = remainingSecondsOf(view, observed, throughput);
  const tuning = decideTuning({ job: view, model, current, capacity, remainingSeconds, config, now });
  if (tuning.changes.length > 0) return tuning;
  reasons.push(tuning.reason);
  if (observed.usage) {
    const sizing = decideRightsizing({ job: view, usage: observed.usage, config, now });
    if (sizing.changes.length > 0) return sizing;
    reasons.push(sizing.reason);
  } else {
    reasons.push('right-sizing: no usage data');
  }
  return { ref: view.ref, policy: 'tuning', changes: [], reason: reasons.join('; ') };
}
