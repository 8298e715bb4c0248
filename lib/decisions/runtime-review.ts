import type { JobSnapshot } from '../actuator.js';
import type { PolicyConfig } from '../config.js';
import { MissingMetricsError } from '../errors.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import { type FitCache, fitRuntimeModelCached } from '../model/fit-cache.js';
import { modelFor, type Placement, type ThroughputOracle } from '../model/throughput-model.js';
import { findRole, localBatchFor } from '../policies/placement.js';
import { decideRightsizing } from '../policies/rightsizing.js';
import { decideOnStragglers, STRAGGLER_LOOKBACK_SECONDS } from '../policies/stragglers.js';
import { decideTuning } from '../policies/tuning.js';
import type {
  ClusterCapacity,
  ContainerUsage,
  JobRef,
  Plan,
  PodView,
  StepSample,
  WorkerStepTimes,
} from '../types.js';

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
    optional(() => metrics.workerStepTimes(ref, STRAGGLER_LOOKBACK_SECONDS)),
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

/**
 * The node of each Worker pod by replica index, when all `replicas` of them run on a node; undefined
 * otherwise (a pod pending or restarting: the layout is in flux and the rebalance packs densely instead).
 */
export function workerNodesOf(pods: readonly PodView[], replicas: number): string[] | undefined {
  // Sized by the pods, never by `replicas` alone: that is the job's spec, which its owner may set to 2^31 - 1.
  const running = pods.filter((p) => p.role === 'Worker' && p.phase === 'Running' && p.nodeName);
  if (replicas <= 0 || running.length < replicas) return undefined;
  const nodes = new Map<number, string>();
  for (const pod of running)
    if (pod.index >= 0 && pod.index < replicas) nodes.set(pod.index, pod.nodeName ?? '');
  if (nodes.size !== replicas) return undefined;
  return [...nodes.entries()].sort(([a], [b]) => a - b).map(([, node]) => node);
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
 * Only the job's own pods may drive a decision. A series names a pod in its labels, which whoever exports
 * it controls; snapshot.pods are the live pods the job owns (owner reference, checked by loadSnapshot), so
 * a series or usage figure naming any other pod is dropped before the policies see it: no eviction, no
 * right-sizing from someone else's numbers. A per-worker series without a pod label is matched by replica
 * index to the job's own pods by the straggler policy.
 */
export function ownObservations(
  snapshot: JobSnapshot,
  observed: RuntimeObservations,
): { observed: RuntimeObservations; foreign: string[] } {
  const own = new Set(snapshot.pods.map((p) => p.name));
  const foreign = new Set<string>();
  const keep = (pod: string | undefined) => {
    if (pod === undefined || own.has(pod)) return true;
    foreign.add(pod);
    return false;
  };
  // Nothing left is no data, as when the metrics had none (MissingMetricsError -> undefined).
  const nonEmpty = <T>(list: T[] | undefined) => (list && list.length > 0 ? list : undefined);
  const kept: RuntimeObservations = {
    ...observed,
    usage: nonEmpty(observed.usage?.filter((u) => keep(u.pod))),
    series: nonEmpty(observed.series?.filter((s) => keep(s.pod))),
  };
  return { observed: kept, foreign: [...foreign].sort() };
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
  oracle?: ThroughputOracle,
  prior: readonly StepSample[] = [],
  fits?: FitCache,
): Plan {
  const { view, pods } = snapshot;
  const reasons: string[] = [];
  const own = ownObservations(snapshot, observed);
  observed = own.observed;
  if (own.foreign.length > 0)
    reasons.push(`ignored metrics of pods the job does not own: ${own.foreign.join(', ')}`);
  if (view.state.paused) {
    return {
      ref: view.ref,
      policy: 'tuning',
      changes: [],
      reason: `paused: ${view.state.pauseReason ?? 'by trainscaler'}`,
    };
  }
  if (observed.series && observed.series.length > 1) {
    // The remaining run at the job's latest measured pace: what replacing its bottleneck can save.
    const last = observed.samples[observed.samples.length - 1];
    const pace = last ? (last.replicas * last.localBatchSize) / last.stepTime : 0;
    const remainingSeconds = remainingSecondsOf(view, observed, pace);
    const plan = decideOnStragglers({
      job: view,
      series: observed.series,
      pods,
      config,
      now,
      ...(remainingSeconds !== undefined ? { remainingSeconds } : {}),
    });
    if (plan.changes.length > 0) return plan;
    reasons.push(plan.reason);
  }
  const model = modelFor(fitRuntimeModelCached(fits, view, observed.samples, prior), view.signature, oracle);
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
