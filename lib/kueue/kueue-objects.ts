// Kueue's objects (kueue.x-k8s.io/v1beta2, Kueue v0.18) read into the few facts trainscaler's Kueue rules need:
// which Workloads a job has and whether they hold quota, what each pod of a pod set is charged, and a
// ClusterQueue's quota left. Pure: the objects are read elsewhere (lib/cluster/kueue-state.ts).
import { cpuToMillis, parseQuantity } from '../adapters/quantity.js';
import { getArray, getNumber, getObject, getPath, getString, isObject } from '../adapters/unstructured.js';
import type { KubeObject } from '../cluster/cluster-client.js';

export const KUEUE_API_VERSION = 'kueue.x-k8s.io/v1beta2';
/** On a job: the LocalQueue it is submitted to (Kueue manages it). */
export const QUEUE_NAME_LABEL = 'kueue.x-k8s.io/queue-name';
/** On a batch/v1 Job: resized through workload slices (Kueue >= 0.13 alpha, beta and on by default in 0.18). */
export const ELASTIC_JOB_ANNOTATION = 'kueue.x-k8s.io/elastic-job';
/** On a Workload: the uid of the job it was made for (Kueue's jobframework sets it). */
export const JOB_UID_LABEL = 'kueue.x-k8s.io/job-uid';
/** On a new workload slice: the Workload (namespace/name) it replaces once admitted. */
export const SLICE_REPLACEMENT_FOR = 'kueue.x-k8s.io/workload-slice-replacement-for';

/** Resource name -> amount in canonical units: cpu in millicores, everything else in base units. */
export type ResourceAmounts = Record<string, number>;

export interface WorkloadPodSet {
  name: string;
  count: number;
  /** What ONE pod of the set is charged against quota. */
  perPod: ResourceAmounts;
  /** The flavor each resource was admitted in (only once quota is reserved). */
  flavors?: Record<string, string>;
}

export interface WorkloadView {
  name: string;
  podSets: WorkloadPodSet[];
  /** QuotaReserved is True: the Workload holds quota in a ClusterQueue. */
  quotaReserved: boolean;
  admitted: boolean;
  finished: boolean;
  evicted: boolean;
  /** The ClusterQueue it is admitted to, once quota is reserved. */
  clusterQueue?: string;
  /** The LocalQueue it was submitted to. */
  queueName?: string;
  /** A workload slice waiting to replace another (a scale-up of an elastic job). */
  replacementFor?: string;
}

export interface FlavorQuota {
  name: string;
  /** Per resource: nominal quota and what the ClusterQueue's workloads have reserved of it. */
  resources: Record<string, { nominal: number; reserved: number }>;
}

export interface ClusterQueueQuota {
  name: string;
  /** Kueue admits a pod set's resources of one resource group in one flavor (tried in order). */
  resourceGroups: { covered: string[]; flavors: FlavorQuota[] }[];
}

export function amountOf(resource: string, raw: unknown): number {
  if (typeof raw !== 'string' && typeof raw !== 'number') return 0;
  return resource === 'cpu' ? cpuToMillis(raw) : parseQuantity(raw);
}

function amounts(block: unknown): ResourceAmounts {
  const out: ResourceAmounts = {};
  if (!isObject(block)) return out;
  for (const [name, raw] of Object.entries(block)) out[name] = amountOf(name, raw);
  return out;
}

function addInto(target: ResourceAmounts, add: ResourceAmounts, factor = 1): void {
  for (const [name, value] of Object.entries(add)) target[name] = (target[name] ?? 0) + value * factor;
}

/** A container's requests, its limits standing in for requests it does not set (as the API server defaults). */
function containerRequests(container: unknown): ResourceAmounts {
  return {
    ...amounts(getPath(container, ['resources', 'limits'])),
    ...amounts(getPath(container, ['resources', 'requests'])),
  };
}

/**
 * What one pod of a template requests, the way Kueue (and the scheduler) count it: the sum of its containers
 * (and of restartable init containers, which run beside them), at least the largest other init container, plus
 * the pod overhead.
 */
export function podRequests(podSpec: unknown): ResourceAmounts {
  const total: ResourceAmounts = {};
  for (const c of getArray(podSpec, ['containers']) ?? []) addInto(total, containerRequests(c));
  const inits = getArray(podSpec, ['initContainers']) ?? [];
  for (const c of inits)
    if (getString(c, ['restartPolicy']) === 'Always') addInto(total, containerRequests(c));
  for (const c of inits) {
    if (getString(c, ['restartPolicy']) === 'Always') continue;
    for (const [name, value] of Object.entries(containerRequests(c)))
      total[name] = Math.max(total[name] ?? 0, value);
  }
  addInto(total, amounts(getPath(podSpec, ['overhead'])));
  return total;
}

function conditionTrue(obj: KubeObject, type: string): boolean {
  return (getArray(obj, ['status', 'conditions']) ?? []).some(
    (c) => getString(c, ['type']) === type && getString(c, ['status']) === 'True',
  );
}

/** A Workload as the Kueue rules need it; per-pod charges from its admission when it has one. */
export function readWorkload(obj: KubeObject): WorkloadView {
  const assignments = getArray(obj, ['status', 'admission', 'podSetAssignments']) ?? [];
  const podSets = (getArray(obj, ['spec', 'podSets']) ?? []).map((ps): WorkloadPodSet => {
    const name = getString(ps, ['name']) ?? 'main';
    const specCount = getNumber(ps, ['count']) ?? 1;
    const assigned = assignments.find((a) => getString(a, ['name']) === name);
    const assignedCount = getNumber(assigned, ['count']) ?? specCount;
    const usage = getObject(assigned, ['resourceUsage']);
    // What Kueue charged, per pod, when it admitted the set; else what the template asks.
    const perPod =
      usage && assignedCount > 0
        ? Object.fromEntries(Object.entries(amounts(usage)).map(([r, v]) => [r, v / assignedCount]))
        : podRequests(getPath(ps, ['template', 'spec']));
    const set: WorkloadPodSet = { name, count: specCount, perPod };
    const flavors = getObject(assigned, ['flavors']);
    if (flavors)
      set.flavors = Object.fromEntries(
        Object.entries(flavors).filter((e): e is [string, string] => typeof e[1] === 'string'),
      );
    return set;
  });
  const view: WorkloadView = {
    name: obj.metadata.name,
    podSets,
    quotaReserved: conditionTrue(obj, 'QuotaReserved'),
    admitted: conditionTrue(obj, 'Admitted'),
    finished: conditionTrue(obj, 'Finished'),
    evicted: conditionTrue(obj, 'Evicted'),
  };
  const clusterQueue = getString(obj, ['status', 'admission', 'clusterQueue']);
  if (clusterQueue) view.clusterQueue = clusterQueue;
  const queueName = getString(obj, ['spec', 'queueName']);
  if (queueName) view.queueName = queueName;
  const replaces = obj.metadata.annotations?.[SLICE_REPLACEMENT_FOR];
  if (replaces) view.replacementFor = replaces;
  return view;
}

function createdAt(obj: KubeObject): number {
  const raw = obj.metadata.creationTimestamp;
  const ms = raw instanceof Date ? raw.getTime() : Date.parse(raw ?? '');
  return Number.isFinite(ms) ? ms : 0;
}

/**
 * The Workloads Kueue made for this job, oldest first (a scale-up slice after the one it replaces): controlled
 * by the job (kind and uid), whatever their labels say.
 */
export function workloadsOfJob(
  workloads: readonly KubeObject[],
  job: { kind: string; uid: string },
): WorkloadView[] {
  return [...workloads]
    .sort(
      (a, b) =>
        createdAt(a) - createdAt(b) ||
        (b.metadata.annotations?.[SLICE_REPLACEMENT_FOR] ? -1 : 0) -
          (a.metadata.annotations?.[SLICE_REPLACEMENT_FOR] ? -1 : 0),
    )
    .filter((w) => {
      const owner = w.metadata.ownerReferences?.find((o) => o.controller === true);
      return owner !== undefined && owner.kind === job.kind && job.uid !== '' && owner.uid === job.uid;
    })
    .map(readWorkload);
}

/** A ClusterQueue's nominal quota and its reservations (status.flavorsReservation), per flavor and resource. */
export function readClusterQueue(obj: KubeObject): ClusterQueueQuota {
  const reserved = new Map<string, ResourceAmounts>();
  for (const f of getArray(obj, ['status', 'flavorsReservation']) ?? []) {
    const byResource: ResourceAmounts = {};
    for (const r of getArray(f, ['resources']) ?? []) {
      const name = getString(r, ['name']);
      if (name) byResource[name] = amountOf(name, getPath(r, ['total']));
    }
    reserved.set(getString(f, ['name']) ?? '', byResource);
  }
  const resourceGroups = (getArray(obj, ['spec', 'resourceGroups']) ?? []).map((g) => ({
    covered: (getArray(g, ['coveredResources']) ?? []).filter((r): r is string => typeof r === 'string'),
    flavors: (getArray(g, ['flavors']) ?? []).map((f): FlavorQuota => {
      const name = getString(f, ['name']) ?? '';
      const resources: FlavorQuota['resources'] = {};
      for (const r of getArray(f, ['resources']) ?? []) {
        const resource = getString(r, ['name']);
        if (!resource) continue;
        resources[resource] = {
          nominal: amountOf(resource, getPath(r, ['nominalQuota'])),
          reserved: reserved.get(name)?.[resource] ?? 0,
        };
      }
      return { name, resources };
    }),
  }));
  return { name: obj.metadata.name, resourceGroups };
}
