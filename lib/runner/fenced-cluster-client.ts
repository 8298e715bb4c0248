// Writes only while this replica leads, and only for as long as it surely still does. Leader election alone
// stops new work on losing the lease; this fence also stops a handler already in flight.
//
// It sits UNDER the retrying client (RetryingClusterClient(LeaderFencedClusterClient(KubernetesClusterClient))),
// so that every attempt of a retried write passes it, not just the first: a replica that loses its lease
// between two attempts sends no further attempt. Each admitted write carries the lease's AbortSignal and a
// time limit that ends when the lease could pass to another replica, so a request still in flight then is
// cancelled (and the API server told, through its `timeout`, to stop working on it).

import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import type {
  AuditEventInput,
  ClusterClient,
  JobIdentity,
  JobStateObject,
  JsonPatchOp,
  KubeObject,
  ReadOptions,
  WriteOptions,
} from '../cluster/cluster-client.js';
import { ForbiddenError } from '../errors.js';
import type { JobKind, JobRef } from '../types.js';

/** The right to write, as long as it lasts. */
export interface WriteLease {
  /** Aborted when the right is lost (leadership lost, or its time is up). */
  signal: AbortSignal;
  /** How long a write started now may take before another replica could hold the lease. */
  remainingMs: number;
}

export interface WriteFence {
  /** What is held, for error messages (e.g. "lease trainscaler/trainscaler-leader"). */
  readonly description: string;
  /** The right to write now, or undefined when this replica may not start a write. */
  admit(): WriteLease | undefined;
}

export class LeaderFencedClusterClient implements ClusterClient {
  constructor(
    private readonly inner: ClusterClient,
    private readonly fence: WriteFence,
  ) {}

  /**
   * Runs one write under the fence. A ForbiddenError is a TrainscalerError, not a transient failure: the
   * retrying client does not retry it, and the handler records it against the job and moves on.
   */
  private async fenced<T>(what: string, options: WriteOptions, write: (o: WriteOptions) => Promise<T>) {
    const lease = this.fence.admit();
    if (!lease || lease.remainingMs <= 0)
      throw new ForbiddenError(what, `this replica does not hold ${this.fence.description}`);
    const fencedOptions: WriteOptions = {
      ...options,
      signal: options.signal ? AbortSignal.any([options.signal, lease.signal]) : lease.signal,
      timeoutMs: Math.min(options.timeoutMs ?? Number.POSITIVE_INFINITY, lease.remainingMs),
    };
    try {
      return await write(fencedOptions);
    } catch (error) {
      if (lease.signal.aborted)
        throw new ForbiddenError(what, `${this.fence.description} was lost while the request was in flight`);
      throw error;
    }
  }

  // Reads pass unfenced, with the bounds the retrying client above gave their attempt.
  getJob(ref: JobRef, options?: ReadOptions): Promise<KubeObject> {
    return this.inner.getJob(ref, options);
  }
  listJobs(kind: JobKind, namespace?: string, options?: ReadOptions): Promise<KubeObject[]> {
    return this.inner.listJobs(kind, namespace, options);
  }
  listPods(namespace: string | undefined, labelSelector?: string, options?: ReadOptions): Promise<V1Pod[]> {
    return this.inner.listPods(namespace, labelSelector, options);
  }
  listNodes(options?: ReadOptions): Promise<V1Node[]> {
    return this.inner.listNodes(options);
  }
  getConfigMap(namespace: string, name: string, options?: ReadOptions): Promise<V1ConfigMap | undefined> {
    return this.inner.getConfigMap(namespace, name, options);
  }
  listWorkloads(
    namespace: string | undefined,
    labelSelector: string,
    options?: ReadOptions,
  ): Promise<KubeObject[]> {
    return this.inner.listWorkloads(namespace, labelSelector, options);
  }
  getLocalQueue(namespace: string, name: string, options?: ReadOptions): Promise<KubeObject> {
    return this.inner.getLocalQueue(namespace, name, options);
  }
  getClusterQueue(name: string, options?: ReadOptions): Promise<KubeObject> {
    return this.inner.getClusterQueue(name, options);
  }

  patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    return this.fenced(`patch ${ref.kind} ${ref.namespace}/${ref.name}`, options, (o) =>
      this.inner.patchJob(ref, patch, o),
    );
  }
  evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    return this.fenced(`evict pod ${namespace}/${name}`, options, (o) =>
      this.inner.evictPod(namespace, name, o),
    );
  }
  servesPodResize(options?: ReadOptions): Promise<boolean> {
    return this.inner.servesPodResize?.(options) ?? Promise.resolve(false);
  }
  resizePod(namespace: string, name: string, patch: JsonPatchOp[], options: WriteOptions): Promise<V1Pod> {
    const resize = this.inner.resizePod?.bind(this.inner);
    if (!resize) throw new Error('this cluster client cannot resize pods in place');
    return this.fenced(`resize pod ${namespace}/${name}`, options, (o) => resize(namespace, name, patch, o));
  }
  createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    const { ref } = event.involved;
    return this.fenced(`create event for ${ref.namespace}/${ref.name}`, options, (o) =>
      this.inner.createEvent(event, o),
    );
  }
  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    return this.fenced(`write configmap ${namespace}/${name}`, options, (o) =>
      this.inner.putConfigMap(namespace, name, data, resourceVersion, o),
    );
  }
  getJobState(ref: JobRef, options?: ReadOptions): Promise<JobStateObject | undefined> {
    return this.inner.getJobState(ref, options);
  }
  listJobStates(options?: ReadOptions): Promise<JobStateObject[]> {
    return this.inner.listJobStates(options);
  }
  listTrainingAutoscalers(namespace?: string, options?: ReadOptions): Promise<KubeObject[]> {
    return this.inner.listTrainingAutoscalers?.(namespace, options) ?? Promise.resolve([]);
  }
  putTrainingAutoscalerStatus(
    current: KubeObject,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<KubeObject> {
    const put = this.inner.putTrainingAutoscalerStatus?.bind(this.inner);
    if (!put) throw new Error('this cluster client cannot write TrainingAutoscaler status');
    const { namespace = '', name } = current.metadata;
    return this.fenced(`write status of TrainingAutoscaler ${namespace}/${name}`, options, (o) =>
      put(current, status, o),
    );
  }
  putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const { ref } = job;
    return this.fenced(`write state of ${ref.kind} ${ref.namespace}/${ref.name}`, options, (o) =>
      this.inner.putJobState(job, status, current, o),
    );
  }
}
