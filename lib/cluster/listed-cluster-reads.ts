// A tick's reads of the cluster, independent of how many jobs it holds: each kind (every job kind, pods, nodes,
// Kueue Workloads, ScaledTrainingJobs, TrainingAutoscalers) is read once, cluster-wide, on first use, and indexed in memory; every
// later read of the tick (a job, its pods by label selector, its Workloads, its state) is answered from that
// index. Writes pass through to the API server; what a write returns replaces the object in the index, and a
// write that conflicts marks its object stale, so that its next read goes to the API server.
//
// Where the lists come from (ClusterReadSource): one paginated LIST per kind (Lambda, CLI), or the runner's
// informer caches (lib/runner/informers.ts), which cost no request at all.
//
// The objects are shared between the callers of one tick (and, with informers, with the cache): read-only.

import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import { ConflictError, NotFoundError } from '../errors.js';
import { type LabelRequirement, matchesLabels, parseLabelSelector } from '../label-selector.js';
import type { JobKind, JobRef } from '../types.js';
import type {
  AuditEventInput,
  ClusterClient,
  JobIdentity,
  JobStateObject,
  JsonPatchOp,
  KubeObject,
  ReadOptions,
  WriteOptions,
} from './cluster-client.js';
import { jobStateName } from './job-state.js';
import { servedOrEmpty } from './served-lists.js';

/** Every object of each kind, cluster-wide. A kind the API server does not serve: NotFoundError, or none. */
export interface ClusterReadSource {
  jobs(kind: JobKind): Promise<KubeObject[]>;
  pods(): Promise<V1Pod[]>;
  nodes(): Promise<V1Node[]>;
  workloads(): Promise<KubeObject[]>;
  jobStates(): Promise<JobStateObject[]>;
  /** Absent: listed through the client (where it serves them) once a tick. */
  trainingAutoscalers?(): Promise<KubeObject[]>;
}

/** One LIST per kind through the client (KubernetesClusterClient pages it). */
export function listingSource(live: ClusterClient): ClusterReadSource {
  return {
    jobs: (kind) => live.listJobs(kind),
    pods: () => live.listPods(undefined),
    nodes: () => live.listNodes(),
    workloads: () => live.listWorkloads(undefined, ''),
    jobStates: () => live.listJobStates(),
    trainingAutoscalers: () => live.listTrainingAutoscalers?.() ?? Promise.resolve([]),
  };
}

interface Labelled {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
}

const keyOf = (namespace: string | undefined, name: string | undefined) => `${namespace ?? ''}/${name ?? ''}`;

/** A label index entry: the value alone, or (namespace given) the value within that namespace. */
const labelled = (namespace: string | undefined, value: string) =>
  namespace === undefined ? value : `${namespace}\u0000${value}`;

/**
 * Objects by namespace/name, and by label for the selectors asked: each label key is indexed on its first use
 * (the selectors the handlers use name a job by one or two labels), so a lookup costs the matches, not a scan.
 */
class LabelIndex<T extends Labelled> {
  readonly byKey = new Map<string, T>();
  readonly #byLabel = new Map<string, Map<string, string[]>>();

  constructor(items: readonly T[]) {
    for (const item of items) this.byKey.set(keyOf(item.metadata?.namespace, item.metadata?.name), item);
  }

  /** Objects in `namespace` (all when undefined) matching every requirement. */
  select(namespace: string | undefined, requirements: readonly LabelRequirement[]): T[] {
    // The narrowest of the selector's equalities: a job's pods are asked for by its name and by labels every
    // pod of its operator carries, and walking the latter made the tick quadratic in the number of jobs.
    let narrowest: string[] | undefined;
    for (const r of requirements) {
      if (r.op !== 'equals' || !('value' in r)) continue;
      const keys = this.#labelled(r.key).get(labelled(namespace, r.value)) ?? [];
      if (narrowest === undefined || keys.length < narrowest.length) narrowest = keys;
    }
    const candidates: Iterable<T> =
      narrowest === undefined ? this.byKey.values() : narrowest.flatMap((k) => this.byKey.get(k) ?? []);
    const out: T[] = [];
    const all = [...requirements]; // once, not per candidate
    for (const item of candidates) {
      if (namespace !== undefined && item.metadata?.namespace !== namespace) continue;
      if (matchesLabels(all, item.metadata?.labels)) out.push(item);
    }
    return out;
  }

  /** Replaces one object (a write's answer); its labels are re-indexed only if they changed. */
  put(item: T): void {
    const key = keyOf(item.metadata?.namespace, item.metadata?.name);
    const before = this.byKey.get(key);
    this.byKey.set(key, item);
    if (JSON.stringify(before?.metadata?.labels ?? {}) !== JSON.stringify(item.metadata?.labels ?? {}))
      this.#byLabel.clear();
  }

  #labelled(label: string): Map<string, string[]> {
    let index = this.#byLabel.get(label);
    if (!index) {
      index = new Map();
      for (const [key, item] of this.byKey) {
        const value = item.metadata?.labels?.[label];
        if (value === undefined) continue;
        // By value, and by value within the object's namespace: jobs of one name in many namespaces (one per
        // team, or per run) share their pods' job-name label, and a lookup in one namespace walked them all.
        for (const at of [labelled(undefined, value), labelled(item.metadata?.namespace ?? '', value)]) {
          const keys = index.get(at);
          if (keys) keys.push(key);
          else index.set(at, [key]);
        }
      }
      this.#byLabel.set(label, index);
    }
    return index;
  }
}

/** What one tick has listed, shared by its views: each kind listed at most once (concurrent callers share it). */
class TickLists {
  readonly #lists = new Map<string, Promise<unknown>>();
  /** Objects whose write conflicted: read from the API server from then on. */
  readonly stale = new Set<string>();

  constructor(readonly source: ClusterReadSource) {}

  /** The kind's list, if this tick has asked for it already. */
  peek<T>(kind: string): Promise<T> | undefined {
    return this.#lists.get(kind) as Promise<T> | undefined;
  }

  once<T>(kind: string, list: () => Promise<T>): Promise<T> {
    let listed = this.#lists.get(kind) as Promise<T> | undefined;
    if (!listed) {
      listed = list();
      // A failed list is not kept: the next read of the tick asks again.
      listed.catch(() => this.#lists.delete(kind));
      this.#lists.set(kind, listed);
    }
    return listed;
  }
}

const jobKey = (kind: string, namespace: string, name: string) => `job:${kind}:${namespace}/${name}`;
const stateKey = (namespace: string, name: string) => `state:${namespace}/${name}`;

/**
 * A ClusterClient for one tick: reads from the tick's lists (see the file comment), writes through `live`.
 * A selector it cannot parse (set-based: `k in (a,b)`) is passed to the API server rather than misread.
 */
export class ListedClusterReads implements ClusterClient {
  readonly #lists: TickLists;
  readonly #liveJobs: boolean;

  constructor(
    readonly live: ClusterClient,
    source: ClusterReadSource | TickLists = listingSource(live),
    liveJobs = false,
  ) {
    this.#lists = source instanceof TickLists ? source : new TickLists(source);
    this.#liveJobs = liveJobs;
    // The optional methods only where the client has them: whether pods are resized in place depends on it.
    const { servesPodResize, resizePod, putTrainingAutoscalerStatus } = live;
    if (putTrainingAutoscalerStatus)
      this.putTrainingAutoscalerStatus = (current, status, options) =>
        putTrainingAutoscalerStatus.call(live, current, status, options);
    if (servesPodResize) this.servesPodResize = (options) => servesPodResize.call(live, options);
    if (resizePod)
      this.resizePod = async (namespace, name, patch, options) => {
        const resized = await resizePod.call(live, namespace, name, patch, options);
        if (!options.dryRun) (await this.#lists.peek<LabelIndex<V1Pod>>('pods'))?.put(resized);
        return resized;
      };
  }

  servesPodResize?: ClusterClient['servesPodResize'];
  resizePod?: ClusterClient['resizePod'];

  /** Keeps a job read or written during the tick, in the tick's list of its kind if that was listed. */
  async #keepJob(job: KubeObject, kind: JobKind): Promise<void> {
    (await this.#lists.peek<LabelIndex<KubeObject>>(`jobs:${kind}`)?.catch(() => undefined))?.put(job);
  }

  /**
   * The same view, except that a job is read from the API server (its fresh resourceVersion, which a patch
   * pins) and that read kept for the rest of the tick: the reads right before a write to the job.
   */
  withLiveJobs(): ListedClusterReads {
    return new ListedClusterReads(this.live, this.#lists, true);
  }

  #jobs(kind: JobKind): Promise<LabelIndex<KubeObject>> {
    return this.#lists.once(`jobs:${kind}`, async () => {
      const items = await servedOrEmpty(this.#lists.source.jobs(kind));
      return new LabelIndex(items);
    });
  }

  #pods(): Promise<LabelIndex<V1Pod>> {
    return this.#lists.once('pods', async () => new LabelIndex(await this.#lists.source.pods()));
  }

  #workloads(): Promise<LabelIndex<KubeObject>> {
    return this.#lists.once(
      'workloads',
      async () => new LabelIndex(await servedOrEmpty(this.#lists.source.workloads())),
    );
  }

  #states(): Promise<Map<string, JobStateObject>> {
    return this.#lists.once('states', async () => {
      const items = await servedOrEmpty(this.#lists.source.jobStates());
      return new Map(items.map((s) => [stateKey(s.namespace, s.name), s]));
    });
  }

  #policies(): Promise<LabelIndex<KubeObject>> {
    return this.#lists.once('trainingautoscalers', async () => {
      const { source } = this.#lists;
      const listed = source.trainingAutoscalers
        ? source.trainingAutoscalers()
        : (this.live.listTrainingAutoscalers?.() ?? Promise.resolve([]));
      return new LabelIndex(await servedOrEmpty(listed));
    });
  }

  /** The tick's one cluster-wide list, whichever namespace is asked (policies are read, never written here). */
  async listTrainingAutoscalers(namespace?: string): Promise<KubeObject[]> {
    return (await this.#policies()).select(namespace, []);
  }

  putTrainingAutoscalerStatus?: ClusterClient['putTrainingAutoscalerStatus'];

  async getJob(ref: JobRef, options?: ReadOptions): Promise<KubeObject> {
    const key = jobKey(ref.kind, ref.namespace, ref.name);
    if (this.#liveJobs || this.#lists.stale.has(key)) {
      const fresh = await this.live.getJob(ref, options);
      await this.#keepJob(fresh, ref.kind);
      this.#lists.stale.delete(key);
      return fresh;
    }
    const found = (await this.#jobs(ref.kind)).byKey.get(keyOf(ref.namespace, ref.name));
    if (!found) throw new NotFoundError(`${ref.kind} ${ref.namespace}/${ref.name}`);
    return found;
  }

  async listJobs(kind: JobKind, namespace?: string): Promise<KubeObject[]> {
    return (await this.#jobs(kind)).select(namespace, []);
  }

  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    const key = jobKey(ref.kind, ref.namespace, ref.name);
    try {
      const patched = await this.live.patchJob(ref, patch, options);
      if (!options.dryRun) await this.#keepJob(patched, ref.kind);
      return patched;
    } catch (error) {
      if (error instanceof ConflictError) this.#lists.stale.add(key);
      throw error;
    }
  }

  async listPods(
    namespace: string | undefined,
    labelSelector?: string,
    options?: ReadOptions,
  ): Promise<V1Pod[]> {
    const requirements = understood(labelSelector);
    if (!requirements) return this.live.listPods(namespace, labelSelector, options);
    return (await this.#pods()).select(namespace, requirements);
  }

  listNodes(): Promise<V1Node[]> {
    return this.#lists.once('nodes', () => this.#lists.source.nodes());
  }

  evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    // The pod stays listed: it holds its room until it is gone (its deletion is seen by the next tick).
    return this.live.evictPod(namespace, name, options);
  }

  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    return this.live.createEvent(event, options);
  }

  async listWorkloads(
    namespace: string | undefined,
    labelSelector: string,
    options?: ReadOptions,
  ): Promise<KubeObject[]> {
    const requirements = understood(labelSelector);
    if (!requirements) return this.live.listWorkloads(namespace, labelSelector, options);
    return (await this.#workloads()).select(namespace, requirements);
  }

  getLocalQueue(namespace: string, name: string, options?: ReadOptions): Promise<KubeObject> {
    return this.live.getLocalQueue(namespace, name, options);
  }

  getClusterQueue(name: string, options?: ReadOptions): Promise<KubeObject> {
    return this.live.getClusterQueue(name, options);
  }

  getConfigMap(namespace: string, name: string, options?: ReadOptions): Promise<V1ConfigMap | undefined> {
    return this.live.getConfigMap(namespace, name, options);
  }

  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    return this.live.putConfigMap(namespace, name, data, resourceVersion, options);
  }

  async getJobState(ref: JobRef, options?: ReadOptions): Promise<JobStateObject | undefined> {
    const states = await this.#states();
    const key = stateKey(ref.namespace, jobStateName(ref.kind, ref.name));
    if (!this.#lists.stale.has(key)) return states.get(key);
    const fresh = await this.live.getJobState(ref, options);
    if (fresh) states.set(key, fresh);
    else states.delete(key);
    this.#lists.stale.delete(key);
    return fresh;
  }

  async listJobStates(): Promise<JobStateObject[]> {
    return [...(await this.#states()).values()];
  }

  async putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const key = stateKey(job.ref.namespace, jobStateName(job.ref.kind, job.ref.name));
    try {
      const written = await this.live.putJobState(job, status, current, options);
      if (!options.dryRun) (await this.#states()).set(key, written);
      return written;
    } catch (error) {
      // Its writer re-reads it (lib/cluster/job-state.ts writeJobState): that read must see the API server's.
      if (error instanceof ConflictError) this.#lists.stale.add(key);
      throw error;
    }
  }
}

/** The selector's requirements, or undefined for one the index does not understand (the API server answers). */
function understood(selector: string | undefined): LabelRequirement[] | undefined {
  try {
    return parseLabelSelector(selector);
  } catch {
    return undefined;
  }
}

/** The reads right before a write to a job: the view's, with the job itself read from the API server. */
export function readsBeforeWrite(cluster: ClusterClient): ClusterClient {
  return cluster instanceof ListedClusterReads ? cluster.withLiveJobs() : cluster;
}

/** Every read from the API server (a retry after a conflict decides on nothing cached). */
export function liveReads(cluster: ClusterClient): ClusterClient {
  return cluster instanceof ListedClusterReads ? cluster.live : cluster;
}

/**
 * A handler's read view: from `clusterReads` (the runner's informer caches) when it answers, else one paginated
 * LIST per kind on first use.
 */
export function readView(deps: {
  cluster: ClusterClient;
  clusterReads?: () => ClusterReadSource | undefined;
}): ListedClusterReads {
  return new ListedClusterReads(deps.cluster, deps.clusterReads?.() ?? listingSource(deps.cluster));
}
