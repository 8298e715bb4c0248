// A BASELINE EMULATION, not trainscaler: what a user gets from a Kubernetes HorizontalPodAutoscaler (or a
// KEDA ScaledObject, which creates and drives an HPA) on a training job's Worker replicas with a
// GPU-utilisation target. `trainscaler simulate --policy threshold` replays it on the simulated cluster so
// that trainscaler can be compared with the autoscaler users already have; nothing in production uses it.
//
// The HPA facts, from https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/ ("Algorithm
// details", "Stabilization window", "Default Behavior") and the defaults in kubernetes/kubernetes
// pkg/apis/autoscaling/v2/defaults.go and pkg/controller/podautoscaler/horizontal.go:
//  - desiredReplicas = ceil(currentReplicas * currentMetricValue / desiredMetricValue);
//  - no change while that ratio is within 1 +- tolerance (0.1, --horizontal-pod-autoscaler-tolerance);
//  - stabilisation: every sync records its (unstabilised) recommendation; a scale-down goes no lower than the
//    HIGHEST recommendation of the last 300 s (scaleDown.stabilizationWindowSeconds), a scale-up no higher
//    than the LOWEST of the last 0 s (scaleUp.stabilizationWindowSeconds: no stabilisation);
//  - default rate policies: scale-up by at most max(4 pods, 100 %) per 15 s period (selectPolicy Max),
//    scale-down by up to 100 % per 15 s period; each policy counts the changes already made in its period;
//  - minReplicas and maxReplicas bound the result; a target above maxReplicas (below minReplicas) is brought
//    to the bound without reading the metric.
// (The API reference of HorizontalPodAutoscalerBehavior.scaleUp says "4 pods / double per 60 seconds"; the
// defaulting code and the HPAScalingRules.policies reference say 15 s: the code is what runs.)
//
// How often it acts: this emulation syncs once per decision interval (60 s in `simulate`), not every 15 s
// (the HPA's default --horizontal-pod-autoscaler-sync-period). A 15 s policy period never contains the
// previous 60 s sync, so one decision may grow a job from c to at most max(c + 4, 2c) workers. With a
// utilisation of at most 1 and a 0.8 target the metric itself asks for at most ceil(1.25c) <= max(c + 4, 2c),
// so the default rate policy never binds here: growth is limited by the metric and by the free GPUs.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ClusterClient } from '../../cluster/cluster-client.js';
import { MissingMetricsError } from '../../errors.js';
import type { MetricsSource } from '../../metrics/metrics-source.js';
import type { JobRef, StepSample } from '../../types.js';
import { GPU_RESOURCE } from '../training-job-manifests.js';

/**
 * Target GPU utilisation of the emulated HPA: 80 %, the HPA's own default utilisation target (80 % average
 * CPU when an HPA names no metric) and a common choice for GPU-utilisation targets.
 */
export const GPU_UTILISATION_TARGET = 0.8;

/** --horizontal-pod-autoscaler-tolerance default. */
export const HPA_DEFAULT_TOLERANCE = 0.1;

export interface HpaScalingPolicy {
  type: 'Pods' | 'Percent';
  value: number;
  periodSeconds: number;
}

export interface HpaScalingRules {
  stabilizationWindowSeconds: number;
  selectPolicy: 'Max' | 'Min' | 'Disabled';
  policies: readonly HpaScalingPolicy[];
}

export interface HpaSpec {
  minReplicas: number;
  maxReplicas: number;
  /** Desired average utilisation, 0..1. */
  targetUtilisation: number;
  tolerance: number;
  scaleUp: HpaScalingRules;
  scaleDown: HpaScalingRules;
}

/** spec.behavior when the HPA sets none (defaults.go). */
export const HPA_DEFAULT_SCALE_UP: HpaScalingRules = {
  stabilizationWindowSeconds: 0,
  selectPolicy: 'Max',
  policies: [
    { type: 'Pods', value: 4, periodSeconds: 15 },
    { type: 'Percent', value: 100, periodSeconds: 15 },
  ],
};

export const HPA_DEFAULT_SCALE_DOWN: HpaScalingRules = {
  stabilizationWindowSeconds: 300,
  selectPolicy: 'Max',
  policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }],
};

/** An HPA with the default behaviour and tolerance over [minReplicas, maxReplicas]. */
export function defaultHpaSpec(
  minReplicas: number,
  maxReplicas: number,
  targetUtilisation = GPU_UTILISATION_TARGET,
): HpaSpec {
  return {
    minReplicas,
    maxReplicas,
    targetUtilisation,
    tolerance: HPA_DEFAULT_TOLERANCE,
    scaleUp: HPA_DEFAULT_SCALE_UP,
    scaleDown: HPA_DEFAULT_SCALE_DOWN,
  };
}

/** What the HPA controller keeps per HPA between syncs (in memory, like kube-controller-manager). */
export interface HpaState {
  /** Unstabilised recommendations, for the stabilisation windows. */
  recommendations: ReadonlyArray<{ at: number; replicas: number }>;
  /** Replica changes written, for the rate policies' periods (positive counts). */
  scaleUpEvents: ReadonlyArray<{ at: number; change: number }>;
  scaleDownEvents: ReadonlyArray<{ at: number; change: number }>;
}

export const EMPTY_HPA_STATE: HpaState = { recommendations: [], scaleUpEvents: [], scaleDownEvents: [] };

export interface HpaRecommendation {
  /** The replica count the HPA would write (equal to the current count when it writes nothing). */
  replicas: number;
  /** ceil(current x metric / target), or the current count within the tolerance; before stabilisation. */
  metricReplicas: number;
  state: HpaState;
  reason: string;
}

/**
 * One HPA sync for one target: the metric recommendation with the tolerance, the stabilisation windows, the
 * rate policies and the min/max bounds, as horizontal.go computes them. Pure: `state` is not modified; the
 * returned state carries this sync's recommendation. Record the write, if one is made, with recordScaleEvent.
 */
export function hpaRecommendation(
  input: { spec: HpaSpec; currentReplicas: number; utilisation: number; now: number },
  state: HpaState,
): HpaRecommendation {
  const { spec, currentReplicas: current, now } = input;
  if (current > spec.maxReplicas)
    return { replicas: spec.maxReplicas, metricReplicas: current, state, reason: 'above maxReplicas' };
  if (current < spec.minReplicas)
    return { replicas: spec.minReplicas, metricReplicas: current, state, reason: 'below minReplicas' };
  const ratio = input.utilisation / spec.targetUtilisation;
  const withinTolerance = Math.abs(1 - ratio) <= spec.tolerance;
  const metricReplicas = withinTolerance ? current : Math.ceil(current * ratio);

  // Stabilisation (stabilizeRecommendationWithBehaviors): the window bounds include this sync's value.
  let upBound = metricReplicas;
  let downBound = metricReplicas;
  const upCutoff = now - spec.scaleUp.stabilizationWindowSeconds;
  const downCutoff = now - spec.scaleDown.stabilizationWindowSeconds;
  for (const rec of state.recommendations) {
    if (rec.at > upCutoff) upBound = Math.min(upBound, rec.replicas);
    if (rec.at > downCutoff) downBound = Math.max(downBound, rec.replicas);
  }
  let stabilised = current;
  if (stabilised < upBound) stabilised = upBound;
  if (stabilised > downBound) stabilised = downBound;
  const keepFrom = Math.min(upCutoff, downCutoff);
  const next: HpaState = {
    ...state,
    recommendations: [
      ...state.recommendations.filter((r) => r.at > keepFrom),
      { at: now, replicas: metricReplicas },
    ],
  };

  // Rate policies and bounds (convertDesiredReplicasWithBehaviorRate).
  let replicas = stabilised;
  let limit = '';
  if (stabilised > current) {
    const scaleUpLimit = Math.max(current, scaleUpLimitOf(current, state, spec.scaleUp, now));
    const maximum = Math.min(spec.maxReplicas, scaleUpLimit);
    if (stabilised > maximum) {
      replicas = maximum;
      limit = maximum === spec.maxReplicas ? 'capped at maxReplicas' : 'capped by the scale-up policy';
    }
  } else if (stabilised < current) {
    const scaleDownLimit = Math.min(current, scaleDownLimitOf(current, state, spec.scaleDown, now));
    const minimum = Math.max(spec.minReplicas, scaleDownLimit);
    if (stabilised < minimum) {
      replicas = minimum;
      limit = minimum === spec.minReplicas ? 'held at minReplicas' : 'limited by the scale-down policy';
    }
  }
  const parts = [`utilisation ${input.utilisation.toFixed(2)} vs target ${spec.targetUtilisation}`];
  parts.push(withinTolerance ? `within the ${spec.tolerance} tolerance` : `metric asks ${metricReplicas}`);
  if (stabilised !== metricReplicas) parts.push(`the stabilisation window keeps ${stabilised}`);
  if (limit) parts.push(limit);
  parts.push(replicas === current ? `stays at ${current}` : `${current} -> ${replicas}`);
  const reason = parts.join(', ');
  return { replicas, metricReplicas, state: next, reason };
}

/** Longest periodSeconds the API accepts (1800 s): events older than that never count again. */
const HPA_MAX_POLICY_PERIOD_SECONDS = 1800;

/** The state after the HPA wrote `to` replicas over `from` at `now` (for the rate policies' periods). */
export function recordScaleEvent(state: HpaState, now: number, from: number, to: number): HpaState {
  if (to === from) return state;
  const event = { at: now, change: Math.abs(to - from) };
  const young = (events: HpaState['scaleUpEvents']) =>
    events.filter((e) => e.at > now - HPA_MAX_POLICY_PERIOD_SECONDS);
  return to > from
    ? { ...state, scaleUpEvents: [...young(state.scaleUpEvents), event] }
    : { ...state, scaleDownEvents: [...young(state.scaleDownEvents), event] };
}

function changeInPeriod(events: HpaState['scaleUpEvents'], periodSeconds: number, now: number): number {
  return events.filter((e) => e.at > now - periodSeconds).reduce((sum, e) => sum + e.change, 0);
}

function periodStart(current: number, state: HpaState, periodSeconds: number, now: number): number {
  return (
    current -
    changeInPeriod(state.scaleUpEvents, periodSeconds, now) +
    changeInPeriod(state.scaleDownEvents, periodSeconds, now)
  );
}

/** calculateScaleUpLimitWithScalingRules: the most replicas the policies allow now. */
function scaleUpLimitOf(current: number, state: HpaState, rules: HpaScalingRules, now: number): number {
  if (rules.selectPolicy === 'Disabled') return current;
  const proposals = rules.policies.map((p) => {
    const start = periodStart(current, state, p.periodSeconds, now);
    return p.type === 'Pods' ? start + p.value : Math.ceil(start * (1 + p.value / 100));
  });
  if (proposals.length === 0) return current;
  return rules.selectPolicy === 'Min' ? Math.min(...proposals) : Math.max(...proposals);
}

/** calculateScaleDownLimitWithBehaviors: the fewest replicas the policies allow now. */
function scaleDownLimitOf(current: number, state: HpaState, rules: HpaScalingRules, now: number): number {
  if (rules.selectPolicy === 'Disabled') return current;
  const proposals = rules.policies.map((p) => {
    const start = periodStart(current, state, p.periodSeconds, now);
    return p.type === 'Pods' ? start - p.value : Math.trunc(start * (1 - p.value / 100));
  });
  if (proposals.length === 0) return current;
  return rules.selectPolicy === 'Min' ? Math.max(...proposals) : Math.min(...proposals);
}

// ---- the metric and the cluster side ---------------------------------------------------------------------

/**
 * GPU utilisation of a data-parallel job: the fraction of its step the GPUs compute rather than wait on
 * gradient synchronisation, 1 - syncTime / stepTime, averaged over the samples of its current world size
 * (`replicas`). Undefined when there is no such sample (the job is restarting, or its new world has not
 * stepped yet): the HPA then skips the job, as it does when a metric is missing.
 */
export function gpuUtilisation(samples: readonly StepSample[], replicas: number): number | undefined {
  const fractions = samples
    .filter((s) => s.replicas === replicas && s.syncTime !== undefined && s.stepTime > 0)
    .map((s) => Math.min(1, Math.max(0, 1 - (s.syncTime ?? 0) / s.stepTime)));
  if (fractions.length === 0) return undefined;
  return fractions.reduce((sum, f) => sum + f, 0) / fractions.length;
}

/** GPUs no pod claims: allocatable GPUs minus the GPU requests of every pod not Succeeded or Failed. */
export function freeGpus(nodes: readonly V1Node[], pods: readonly V1Pod[]): number {
  const allocatable = nodes.reduce((s, n) => s + Number(n.status?.allocatable?.[GPU_RESOURCE] ?? 0), 0);
  let claimed = 0;
  for (const pod of pods) {
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') continue;
    for (const c of pod.spec?.containers ?? []) claimed += Number(c.resources?.requests?.[GPU_RESOURCE] ?? 0);
  }
  return Math.max(0, allocatable - claimed);
}

export interface ThresholdJob {
  ref: JobRef;
  /** The Worker replicas the job asks for now (its scale). */
  replicas: number;
  spec: HpaSpec;
  state: HpaState;
}

export interface ThresholdDecision {
  ref: JobRef;
  from: number;
  to: number;
  /** Undefined when the job had no metric this interval (nothing decided, state unchanged). */
  utilisation?: number;
  state: HpaState;
  reason: string;
}

/**
 * One baseline interval over the running jobs, in the order given: read each job's utilisation, take the HPA
 * recommendation, never grow a job beyond the GPUs free at that moment (no cluster-autoscaler: pods that
 * cannot be placed would stay Pending), and patch its Worker replicas like any client would.
 */
export async function thresholdBaselineInterval(
  cluster: Pick<ClusterClient, 'listNodes' | 'listPods' | 'patchJob'> & Pick<MetricsSource, 'stepSamples'>,
  jobs: readonly ThresholdJob[],
  options: { now: number; namespace: string; metricWindowSeconds: number },
): Promise<ThresholdDecision[]> {
  let free = freeGpus(await cluster.listNodes(), await cluster.listPods(options.namespace));
  const decisions: ThresholdDecision[] = [];
  for (const job of jobs) {
    let samples: StepSample[];
    try {
      samples = await cluster.stepSamples(job.ref, options.metricWindowSeconds);
    } catch (error) {
      if (!(error instanceof MissingMetricsError)) throw error;
      samples = [];
    }
    const utilisation = gpuUtilisation(samples, job.replicas);
    if (utilisation === undefined) {
      decisions.push({
        ref: job.ref,
        from: job.replicas,
        to: job.replicas,
        state: job.state,
        reason: 'no GPU-utilisation sample of the current world: skipped',
      });
      continue;
    }
    const rec = hpaRecommendation(
      { spec: job.spec, currentReplicas: job.replicas, utilisation, now: options.now },
      job.state,
    );
    let to = rec.replicas;
    let reason = rec.reason;
    if (to > job.replicas && to - job.replicas > free) {
      to = job.replicas + free;
      reason += `; only ${free} GPU(s) free: ${to}`;
    }
    let state = rec.state;
    if (to !== job.replicas) {
      await cluster.patchJob(job.ref, [{ op: 'replace', path: workerReplicasPath(job.ref), value: to }], {
        dryRun: false,
      });
      state = recordScaleEvent(state, options.now, job.replicas, to);
      free -= to - job.replicas;
    }
    decisions.push({ ref: job.ref, from: job.replicas, to, utilisation, state, reason });
  }
  return decisions;
}

function workerReplicasPath(ref: JobRef): string {
  if (ref.kind === 'PyTorchJob') return '/spec/pytorchReplicaSpecs/Worker/replicas';
  if (ref.kind === 'TFJob') return '/spec/tfReplicaSpecs/Worker/replicas';
  return '/spec/replicas';
}
