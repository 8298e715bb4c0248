import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { jobOfPod, readPod } from '../adapters/pod-view.js';
import { cpuToMillis, parseQuantity } from '../adapters/quantity.js';
import { jobKey } from '../metrics/job-readings.js';
import type { ClusterCapacity, JobRef, NodeView, Resources } from '../types.js';
import { addResources, ShrinkingCapacity, ZERO_RESOURCES } from './capacity.js';
import type { ClusterClient } from './cluster-client.js';

function allocatableOf(node: V1Node): Resources {
  const a = node.status?.allocatable ?? {};
  return {
    cpuMillis: a.cpu ? cpuToMillis(a.cpu) : 0,
    memoryBytes: a.memory ? parseQuantity(a.memory) : 0,
    gpus: a['nvidia.com/gpu'] ? parseQuantity(a['nvidia.com/gpu']) : 0,
  };
}

// A tick reads the same pod objects in every capacity pass it makes (they are replaced, never changed, when the
// cluster changes), and parsing quantities was most of a pass at 100,000 pods.
const requestsOfPod = new WeakMap<V1Pod, Resources>();

function podRequests(pod: V1Pod): Resources {
  const known = requestsOfPod.get(pod);
  if (known) return known;
  // Sum over all containers: the scheduler reserves the whole pod, not just the training container.
  const requests = (pod.spec?.containers ?? []).reduce(
    (acc, c) => addResources(acc, readPod({ ...pod, spec: { ...pod.spec, containers: [c] } }).requests),
    ZERO_RESOURCES,
  );
  requestsOfPod.set(pod, requests);
  return requests;
}

export interface CapacityOptions {
  /** Pods of lower priority count as free: the scheduler preempts them for a pod of this priority. */
  preemptibleBelow?: number;
  /**
   * Pending pods already claim what they will be bound to; this says which to hold room for. Callers leave
   * out the pods of the job they decide for, whose own pending pods are the question, not the answer.
   */
  holdRoomFor?: (pod: V1Pod) => boolean;
  /**
   * Pods whose requests count as free even when bound: the pods of a job whose whole size is being decided
   * (its bound master would otherwise be counted once as allocated and once more by the policy).
   */
  resize?: (pod: V1Pod) => boolean;
  /**
   * Seconds since the epoch. With it, a bound pod being deleted counts as leaving (its room as free) until its
   * deletion is LEAVING_OVERDUE_SECONDS late; without it, it holds its room until it is gone.
   */
  now?: number;
}

/**
 * A pod whose deletion is this late is stuck (a finalizer, an unreachable node), not leaving. Until then its
 * room is the rebalance's to give: a donor's pods terminate for up to their grace period (30 s by default),
 * and a rebalance run meanwhile, counting them as held, would shrink a second donor for the same queued job.
 */
export const LEAVING_OVERDUE_SECONDS = 60;

function leaving(pod: V1Pod, now: number | undefined): boolean {
  const deletion = pod.metadata?.deletionTimestamp;
  if (now === undefined || deletion === undefined || deletion === null) return false;
  const at = new Date(deletion).getTime() / 1000;
  return Number.isFinite(at) && now - at < LEAVING_OVERDUE_SECONDS;
}

function isPendingUnbound(pod: V1Pod): boolean {
  return pod.status?.phase === 'Pending' && !pod.spec?.nodeName;
}

/**
 * Free capacity as the scheduler sees it: allocatable minus the requests of pods bound and not finished; with
 * `now`, as it will be once the pods being deleted are gone.
 */
export function capacityOf(nodes: V1Node[], pods: V1Pod[], options: CapacityOptions = {}): ClusterCapacity {
  return capacityReading(nodes, pods, options)(options.holdRoomFor);
}

/**
 * One pass over the bound pods, then the capacity as held by any choice of pending pods: a tick that asks for
 * the capacity once per stranded job pays for the pending pods each time, not for every pod in the cluster.
 */
export function capacityReading(
  nodes: V1Node[],
  pods: V1Pod[],
  options: Omit<CapacityOptions, 'holdRoomFor'> = {},
): (holdRoomFor?: (pod: V1Pod) => boolean) => ClusterCapacity {
  const { preemptibleBelow, resize = () => false, now } = options;
  const preempted = (pod: V1Pod) =>
    preemptibleBelow !== undefined && (pod.spec?.priority ?? 0) < preemptibleBelow;
  const allocated = new Map<string, Resources>();
  const pending: V1Pod[] = [];
  for (const pod of pods) {
    if (isPendingUnbound(pod)) {
      // Pods created but not yet bound (a scale-up a moment ago) would otherwise be promised twice.
      if (!preempted(pod)) pending.push(pod);
      continue;
    }
    const node = pod.spec?.nodeName;
    const phase = pod.status?.phase;
    if (!node || phase === 'Succeeded' || phase === 'Failed' || resize(pod) || leaving(pod, now)) continue;
    if (preempted(pod)) continue;
    allocated.set(node, addResources(allocated.get(node) ?? ZERO_RESOURCES, podRequests(pod)));
  }
  const views: NodeView[] = nodes
    .map((node) => {
      const name = node.metadata?.name ?? '';
      // Unknown is a node whose kubelet stopped reporting: the node controller taints it unreachable and the
      // scheduler places nothing there, so its free room would be promised to growth that stays Pending. A
      // node with no Ready condition yet is taken at its word.
      const readiness = node.status?.conditions?.find((c) => c.type === 'Ready')?.status;
      const ready = readiness !== 'False' && readiness !== 'Unknown';
      // Frozen: every capacity handed out below shares these nodes (copy on write), so no caller's change can
      // reach the next caller's capacity.
      return Object.freeze({
        name,
        allocatable: Object.freeze(allocatableOf(node)),
        allocated: Object.freeze({ ...(allocated.get(name) ?? ZERO_RESOURCES) }),
        schedulable: ready && node.spec?.unschedulable !== true,
      });
    })
    .sort((a, b) => a.name.localeCompare(b.name));
  return (holdRoomFor = () => true) => {
    const held = pending.filter(holdRoomFor);
    if (held.length === 0) return { nodes: [...views] };
    const placing = new ShrinkingCapacity({ nodes: views });
    for (const pod of held) placing.place(podRequests(pod));
    return placing.snapshot();
  };
}

export interface ClusterState {
  capacity: ClusterCapacity;
  nodes: V1Node[];
  pods: V1Pod[];
}

/** Every node and every pod, for a caller that decides which pending pods hold room (capacityOf's options). */
export async function loadNodesAndPods(cluster: ClusterClient): Promise<Omit<ClusterState, 'capacity'>> {
  const [nodes, pods] = await Promise.all([cluster.listNodes(), cluster.listPods(undefined)]);
  return { nodes, pods };
}

/** `now` (seconds since the epoch): pods being deleted count as leaving (see CapacityOptions.now). */
export async function loadCapacity(cluster: ClusterClient, now: number): Promise<ClusterState> {
  const { nodes, pods } = await loadNodesAndPods(cluster);
  return { capacity: capacityOf(nodes, pods, { now }), nodes, pods };
}

/** Whether a pod belongs to `ref`'s job. */
export function podsOf(ref: JobRef): (pod: V1Pod) => boolean {
  return (pod) => {
    const owner = jobOfPod(pod);
    return (
      owner !== undefined &&
      owner.kind === ref.kind &&
      owner.namespace === ref.namespace &&
      owner.name === ref.name
    );
  };
}

/**
 * Holds room for every pending pod except the schedulable ones of these jobs: the pods a rebalance places
 * itself (PendingDemand counts them; gated pods wait on their gate's controller and keep their room).
 */
export function exceptWaitingPodsOf(refs: readonly JobRef[]): (pod: V1Pod) => boolean {
  // A set, not one test per job: a tick asks this of every pending pod with every queued job in `refs`.
  const own = new Set(refs.map(jobKey));
  return (pod) => {
    if ((pod.spec?.schedulingGates?.length ?? 0) > 0) return true;
    const owner = jobOfPod(pod);
    return owner === undefined || !own.has(jobKey(owner));
  };
}

/** Holds room for every pending pod except those of `ref`'s job. */
export function exceptPodsOf(ref: JobRef): (pod: V1Pod) => boolean {
  const own = podsOf(ref);
  return (pod) => !own(pod);
}
