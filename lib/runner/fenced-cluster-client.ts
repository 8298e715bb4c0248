// Writes only while this replica leads. Leader election alone stops new work on losing the lease; this
// also stops a handler already in flight from writing after the lease may have passed to another replica.

import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import type {
  AuditEventInput,
  ClusterClient,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../cluster/cluster-client.js';
import { ForbiddenError } from '../errors.js';
import type { JobKind, JobRef } from '../types.js';

export class LeaderFencedClusterClient implements ClusterClient {
  constructor(
    private readonly inner: ClusterClient,
    private readonly isLeader: () => boolean,
    private readonly lease: string,
  ) {}

  private fence(what: string): void {
    // A ForbiddenError is a TrainscalerError: the handler records it against the job and moves on.
    if (!this.isLeader()) throw new ForbiddenError(what, `this replica does not hold ${this.lease}`);
  }

  getJob(ref: JobRef): Promise<KubeObject> {
    return this.inner.getJob(ref);
  }
  listJobs(kind: JobKind, namespace?: string): Promise<KubeObject[]> {
    return this.inner.listJobs(kind, namespace);
  }
  listPods(namespace: string | undefined, labelSelector?: string): Promise<V1Pod[]> {
    return this.inner.listPods(namespace, labelSelector);
  }
  listNodes(): Promise<V1Node[]> {
    return this.inner.listNodes();
  }
  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.inner.getConfigMap(namespace, name);
  }

  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    this.fence(`patch ${ref.kind} ${ref.namespace}/${ref.name}`);
    return this.inner.patchJob(ref, patch, options);
  }
  async evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    this.fence(`evict pod ${namespace}/${name}`);
    return this.inner.evictPod(namespace, name, options);
  }
  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    this.fence(`create event for ${event.involved.ref.namespace}/${event.involved.ref.name}`);
    return this.inner.createEvent(event, options);
  }
  async putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    this.fence(`write configmap ${namespace}/${name}`);
    return this.inner.putConfigMap(namespace, name, data, resourceVersion, options);
  }
}
