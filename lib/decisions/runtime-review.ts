import type { JobSnapshot } from '../actuator.js';
import type { PolicyConfig } from '../config.js';
import { MissingMetricsError } from '../errors.js';
import { type JobReading, type JobReadings, jobKey, readEach } from '../metrics/job-readings.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import { type FitCache, fitRuntimeModelCached } from '../model/fit-cache.js';
import { modelFor, type Placement, type ThroughputOracle } from '../model/throughput-model.js';
import { keptWithoutSamples, MissingSamplesError } from '../policies/missing-samples.js';
import { findRole, localBatchFor } from '../policies/placement.js';
import { explained } from '../policies/reason.js';
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

/**
 * Step samples are required (no decision on missing data: MissingSamplesError, saying whether the job's sidecar
 * reports at all); usage and per-worker series are optional.
 */
export async function observeJob(metrics: MetricsSource, ref: JobRef): Promise<RuntimeObservations> {
  const samples = await metrics.stepSamples(ref, WINDOW_SECONDS).catch(async (error: unknown) => {
    if (error instanceof MissingMetricsError && !(error instanceof MissingSamplesError))
      throw await withoutSamples(metrics, ref, error.message.replace(/^missing metrics: /, ''));
    throw error;
  });
  if (samples.length === 0) throw await withoutSamples(metrics, ref);
  const [usage, series, samplesProcessed] = await Promise.all([
    optional(() => metrics.containerUsage(ref, WINDOW_SECONDS)),
    optional(() => metrics.workerStepTimes(ref, STRAGGLER_LOOKBACK_SECONDS)),
    optional(() => metrics.samplesProcessed(ref)),
  ]);
  return { samples, usage, series, samplesProcessed };
}

/** A job's observations from a batch read, or the error its own observeJob would have thrown. */
export type JobObservation = JobReading<RuntimeObservations>;

/**
 * observeJob for many jobs in a number of metrics queries that does not grow with them (the source's batch
 * reads; job by job where it has none). Each job's entry is what observeJob would give it: its step samples
 * required (MissingMetricsError without), usage, per-worker series and progress optional (a
 * MissingMetricsError of one of them is no data), any other error the job's own.
 */
export async function observeJobs(
  metrics: MetricsSource,
  refs: readonly JobRef[],
): Promise<Map<string, JobObservation>> {
  const each = <T>(read: (ref: JobRef) => Promise<T>) => readEach(refs, read);
  const [samples, usage, series, processed] = await Promise.all([
    metrics.stepSamplesOfJobs?.(refs, WINDOW_SECONDS) ??
      each((ref) => metrics.stepSamples(ref, WINDOW_SECONDS)),
    metrics.containerUsageOfJobs?.(refs, WINDOW_SECONDS) ??
      each((ref) => metrics.containerUsage(ref, WINDOW_SECONDS)),
    metrics.workerStepTimesOfJobs?.(refs, STRAGGLER_LOOKBACK_SECONDS) ??
      each((ref) => metrics.workerStepTimes(ref, STRAGGLER_LOOKBACK_SECONDS)),
    metrics.samplesProcessedOfJobs?.(refs) ?? each((ref) => metrics.samplesProcessed(ref)),
  ]);
  const out = new Map<string, JobObservation>();
  for (const ref of refs) {
    const key = jobKey(ref);
    if (!out.has(key)) out.set(key, observationOf(ref, samples, usage, series, processed));
  }
  return out;
}

function observationOf(
  ref: JobRef,
  samples: JobReadings<StepSample[]>,
  usage: JobReadings<ContainerUsage[]>,
  series: JobReadings<WorkerStepTimes[]>,
  processed: JobReadings<number | undefined>,
): JobObservation {
  const key = jobKey(ref);
  // A job the batch answer does not hold has no step samples: MissingSamplesError, as its own read says, told
  // apart by the batch's progress reading (no extra query).
  const progress = processed.get(key);
  const missing = (detail?: string) => ({
    ok: false as const,
    error: new MissingSamplesError(
      ref,
      progress?.ok && progress.value !== undefined ? 'no-progress' : 'no-series',
      detail,
    ),
  });
  const required = samples.get(key);
  if (!required) return missing(`no step samples for ${ref.namespace}/${ref.name}`);
  if (!required.ok)
    return required.error instanceof MissingMetricsError && !(required.error instanceof MissingSamplesError)
      ? missing(required.error.message.replace(/^missing metrics: /, ''))
      : required;
  if (required.value.length === 0) return missing();
  const optional = <T>(read: JobReading<T> | undefined): JobReading<T | undefined> => {
    if (!read || read.ok) return { ok: true, value: read?.value };
    return read.error instanceof MissingMetricsError ? { ok: true, value: undefined } : read;
  };
  const u = optional(usage.get(key));
  if (!u.ok) return u;
  const s = optional(series.get(key));
  if (!s.ok) return s;
  const p = optional(processed.get(key));
  if (!p.ok) return p;
  return {
    ok: true,
    value: { samples: required.value, usage: u.value, series: s.value, samplesProcessed: p.value },
  };
}

/**
 * Which of the two a job without step samples lacks: its sidecar counts samples from its start (a series at 0
 * before the first step), so a progress reading of any value means the sidecar is there and scraped.
 */
async function withoutSamples(
  metrics: MetricsSource,
  ref: JobRef,
  detail?: string,
): Promise<MissingSamplesError> {
  const processed = await optional(() => metrics.samplesProcessed(ref));
  return new MissingSamplesError(ref, processed === undefined ? 'no-series' : 'no-progress', detail);
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
  // A review that changes nothing says why in one line (the worker count's); every policy's account is a detail.
  const details: string[] = [];
  const own = ownObservations(snapshot, observed);
  observed = own.observed;
  if (own.foreign.length > 0)
    details.push(`ignored metrics of pods the job does not own: ${own.foreign.join(', ')}`);
  if (view.state.paused) {
    return {
      ref: view.ref,
      policy: 'tuning',
      changes: [],
      reason: `paused: ${view.state.pauseReason ?? 'by trainscaler'}`,
    };
  }
  // Its own samples, or no decision: priors alone (a profile's samples) never grow a running job on a review.
  if (observed.samples.length === 0) {
    const kept = keptWithoutSamples(findRole(view, 'Worker')?.replicas, 'no-progress');
    return { ref: view.ref, policy: 'tuning', changes: [], reason: kept.reason, details: kept.details };
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
    details.push(...(plan.details ?? [plan.reason]));
  }
  const model = modelFor(fitRuntimeModelCached(fits, view, observed.samples, prior), view.signature, oracle);
  const current = currentPlacement(snapshot, observed.samples);
  const throughput = model.predict(current).throughput;
  const remainingSeconds = remainingSecondsOf(view, observed, throughput);
  const tuning = decideTuning({ job: view, model, current, capacity, remainingSeconds, config, now });
  if (tuning.changes.length > 0) return tuning;
  details.push(...(tuning.details ?? []));
  if (observed.usage) {
    const sizing = decideRightsizing({ job: view, usage: observed.usage, config, now });
    if (sizing.changes.length > 0) return sizing;
    details.push(...(sizing.details ?? [sizing.reason]));
  } else {
    details.push('right-sizing: no usage data');
  }
  return { ref: view.ref, policy: 'tuning', changes: [], ...explained(tuning.reason, details) };
}
