// A plan's CPU/memory changes reach the job's running pods in place (pods/resize) where the cluster allows it.
// The job's pod template is still patched first (the actuator's guarded write): the operator recreates pods
// from it, so a pod resized only in place would come back at the old size after any restart or eviction, and
// new pods would start too small. Then each running pod of the changed role is resized in place, or, where
// that is impossible (no pods/resize served, the node cannot resize, a memory limit would go down without
// RestartContainer, the QoS class would change, the kubelet answered Infeasible), the old path stays: an OOM-
// killed pod is evicted to be recreated at the new size, any other pod keeps its size until it is recreated.
import type { V1Pod } from '@kubernetes/client-node';
import { type PodResizePlan, planPodResize, type ResizeTarget } from './adapters/pod-resize.js';
import type { ClusterClient } from './cluster/cluster-client.js';
import { ConflictError, TrainscalerError } from './errors.js';
import { plural } from './policies/placement.js';
import { SUMMARY_LIMIT } from './policies/reason.js';
import type { Change, JobView, Plan, PodView, RoleName } from './types.js';

/** Per role, the changed fields' new values. */
export function resizeTargetsOf(changes: readonly Change[]): Map<RoleName, ResizeTarget> {
  const targets = new Map<RoleName, ResizeTarget>();
  for (const change of changes) {
    if (change.kind !== 'resources') continue;
    const target = targets.get(change.role) ?? {};
    target[change.field] = { ...target[change.field], [change.resource]: change.to };
    targets.set(change.role, target);
  }
  return targets;
}

export interface PodsOfJob {
  view: JobView;
  pods: PodView[];
  rawPods: V1Pod[];
}

/** Pure: what to do with each pod of each role the plan resizes. */
export function planPodResizes(job: PodsOfJob, plan: Plan, served: boolean): PodResizePlan[] {
  const targets = resizeTargetsOf(plan.changes);
  if (targets.size === 0) return [];
  const plans: PodResizePlan[] = [];
  job.rawPods.forEach((raw, i) => {
    const pod = job.pods[i];
    const target = pod && targets.get(pod.role);
    const role = pod && job.view.roles.find((r) => r.role === pod.role);
    if (!target || !role) return;
    plans.push(planPodResize(raw, role.containerName, target, served));
  });
  return plans;
}

/**
 * The plan as it will be written: evictions made only to recreate a pod at its new size are dropped for the
 * pods resized in place, and the reason says which pods change how.
 */
export function withPodResizes(plan: Plan, resizes: readonly PodResizePlan[]): Plan {
  if (resizes.length === 0) return plan;
  const inPlace = new Set(resizes.filter((r) => r.action === 'in-place').map((r) => r.pod));
  const changes = plan.changes.filter(
    (c) => !(c.kind === 'evict-pod' && c.toResize === true && inPlace.has(c.pod)),
  );
  const evicted = new Set(changes.flatMap((c) => (c.kind === 'evict-pod' ? [c.pod] : [])));
  const notes: string[] = [];
  const inPlaceNames = resizes.filter((r) => r.action === 'in-place');
  if (inPlaceNames.length > 0) {
    const restarting = inPlaceNames.filter((r) => r.action === 'in-place' && r.restartsContainer);
    notes.push(
      `resized in place (pods/resize): ${inPlaceNames.map((r) => r.pod).join(', ')}${restarting.length > 0 ? ` (container restarts per resizePolicy: ${restarting.map((r) => r.pod).join(', ')})` : ''}`,
    );
  }
  for (const r of resizes) {
    if (r.action !== 'fallback') continue;
    const then = evicted.has(r.pod)
      ? 'evicted to be recreated at the new size'
      : 'keeps its size until recreated';
    notes.push(`${r.pod} not in place: ${r.why}; ${then}`);
  }
  if (notes.length === 0) return { ...plan, changes };
  // The one-line reason says how the pods get their new size when that fits; which pods and why are details.
  const fallbacks = resizes.filter((r) => r.action === 'fallback').length;
  const how = [
    inPlaceNames.length > 0 ? `${plural(inPlaceNames.length, 'pod')} resized in place` : '',
    fallbacks > 0 ? `${plural(fallbacks, 'pod')} not in place` : '',
  ].filter((x) => x !== '');
  const told = `${plan.reason}; ${how.join(', ')}`;
  return {
    ...plan,
    changes,
    reason: told.length <= SUMMARY_LIMIT ? told : plan.reason,
    details: [...(plan.details ?? []), ...notes],
  };
}

export interface PodResizeResult {
  pod: string;
  /** 'resized' in place; 'failed' with the API server's answer; 'gone' when the pod changed identity. */
  result: 'resized' | 'unchanged' | 'failed' | 'gone';
  detail?: string;
}

const MAX_RESIZE_ATTEMPTS = 3;

/**
 * Sends each in-place resize, pinned to the pod's resourceVersion. On 409 the pod is re-read (same name and
 * uid) and the resize re-planned from what it holds now, at most MAX_RESIZE_ATTEMPTS times: a kubelet status
 * update bumps the version without touching the spec, and a resize already done is then a no-op.
 */
export async function sendPodResizes(
  cluster: ClusterClient,
  job: PodsOfJob,
  plan: Plan,
  resizes: readonly PodResizePlan[],
  relist: () => Promise<PodsOfJob>,
): Promise<PodResizeResult[]> {
  const results: PodResizeResult[] = [];
  const resize = cluster.resizePod?.bind(cluster);
  for (const first of resizes) {
    if (first.action !== 'in-place') continue;
    let current: PodResizePlan = first;
    for (let attempt = 1; ; attempt++) {
      if (current.action !== 'in-place' || !resize) {
        results.push({
          pod: first.pod,
          result: 'unchanged',
          detail: 'why' in current ? current.why : undefined,
        });
        break;
      }
      try {
        await resize(job.view.ref.namespace, current.pod, current.patch, { dryRun: false });
        results.push({ pod: first.pod, result: 'resized' });
        break;
      } catch (error) {
        if (!(error instanceof ConflictError) || attempt >= MAX_RESIZE_ATTEMPTS) {
          const detail = error instanceof TrainscalerError ? error.message : String(error);
          results.push({ pod: first.pod, result: 'failed', detail });
          break;
        }
        const fresh = await relist();
        const index = fresh.rawPods.findIndex((p) => p.metadata?.uid === first.uid);
        if (index < 0) {
          results.push({ pod: first.pod, result: 'gone' });
          break;
        }
        const pod = fresh.pods[index];
        const raw = fresh.rawPods[index];
        const replanned =
          pod && raw ? planPodResizes({ view: fresh.view, pods: [pod], rawPods: [raw] }, plan, true) : [];
        current = replanned[0] ?? { action: 'none', pod: first.pod, why: 'no longer in the plan' };
      }
    }
  }
  return results;
}
