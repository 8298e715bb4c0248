import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import type { JobKind, JobRef } from '../types.js';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

/** A Kubernetes object as the API returns it; adapters interpret spec/status per kind. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string | Date;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  spec?: unknown;
  status?: unknown;
}

/** RFC 6902 operation. `test` guards a value; a stale guard makes the whole patch fail. */
export interface JsonPatchOp {
  op: 'add' | 'remove' | 'replace' | 'test';
  path: string;
  value?: unknown;
}

export interface WriteOptions {
  /** Server-side dry run: validated by the API server, persisted nowhere. */
  dryRun: boolean;
  /** Cancels the request in flight (the attempt timed out, or the replica's lease is being lost). */
  signal?: AbortSignal;
  /**
   * The longest the request may take. Sent to the API server as its `timeout` parameter too, so that the
   * server gives up on a request it is still processing when the client has stopped waiting.
   */
  timeoutMs?: number;
}

/**
 * Bounds one read: its signal cancels the HTTP request, and its time limit is sent to the API server (the
 * `timeout` parameter, and a list's `timeoutSeconds`) so that the server stops working on a read the client
 * has stopped waiting for.
 */
export interface ReadOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface AuditEventInput {
  involved: { ref: JobRef; uid: string; apiVersion: string };
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** Names the Event after the decision, so that creating it twice (a retry after a lost answer) is a no-op. */
  decisionId?: string;
}

/** The job a write is about: its ref, its uid (owner references) and its apiVersion. */
export interface JobIdentity {
  ref: JobRef;
  uid: string;
  apiVersion: string;
}

/**
 * A ScaledTrainingJob (trainscaler.io/v1alpha1) as read: trainscaler's own record of one job, in the job's
 * namespace. Only trainscaler's ServiceAccount may write its status; tenants may read it.
 * `status` is as the API server returned it (validated by lib/cluster/job-state.ts before use).
 */
export interface JobStateObject {
  namespace: string;
  name: string;
  resourceVersion: string;
  /** spec.targetRef: the job it is about (immutable). */
  target: { apiVersion: string; kind: string; name: string };
  /** The uid of its controller owner reference: the job it was created for (a job recreated under the same name has another). */
  ownerUid?: string;
  status: unknown;
}

/**
 * Everything trainscaler reads from or writes to a cluster. Two implementations: the real API server
 * (KubernetesClusterClient) and the in-process SimulatedCluster used by the demo and simulations.
 * Errors are typed (NotFoundError, ConflictError, ForbiddenError, ApiError). Reads take optional ReadOptions
 * (RetryingClusterClient bounds every attempt with them); a client that ignores them is still a ClusterClient.
 */
export interface ClusterClient {
  getJob(ref: JobRef, options?: ReadOptions): Promise<KubeObject>;
  listJobs(kind: JobKind, namespace?: string, options?: ReadOptions): Promise<KubeObject[]>;
  /** JSON Patch; throws ConflictError when a `test` or resourceVersion guard fails. */
  patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject>;
  /** Pods in a namespace (or all namespaces) matching a label selector. */
  listPods(namespace: string | undefined, labelSelector?: string, options?: ReadOptions): Promise<V1Pod[]>;
  listNodes(options?: ReadOptions): Promise<V1Node[]>;
  /** Through the Eviction API, so PodDisruptionBudgets are honoured. */
  evictPod(namespace: string, name: string, options: WriteOptions): Promise<void>;
  /**
   * Whether the API server serves the `pods/resize` subresource (discovery of the core API group's resources;
   * Kubernetes 1.33+). A client without it (the simulated cluster) resizes nothing in place.
   */
  servesPodResize?(options?: ReadOptions): Promise<boolean>;
  /** JSON Patch on `pods/<name>/resize`: a running pod's container CPU and memory, in place. */
  resizePod?(namespace: string, name: string, patch: JsonPatchOp[], options: WriteOptions): Promise<V1Pod>;
  createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined>;
  /**
   * The Events about one job (involvedObject kind and name), whoever reported them; the caller keeps those it
   * trusts (cli/history.ts trainscalerEventsOf). Read by `explain` and `history` only. Absent from a client
   * that keeps none.
   */
  listJobEvents?(ref: JobRef, options?: ReadOptions): Promise<CoreV1Event[]>;
  /**
   * Kueue Workloads (kueue.x-k8s.io/v1beta2) in a namespace (or all namespaces: undefined) matching a label
   * selector ('' matches all); none when the cluster does not serve them (Kueue not installed).
   */
  listWorkloads(
    namespace: string | undefined,
    labelSelector: string,
    options?: ReadOptions,
  ): Promise<KubeObject[]>;
  /** A Kueue LocalQueue; NotFoundError when absent. */
  getLocalQueue(namespace: string, name: string, options?: ReadOptions): Promise<KubeObject>;
  /** A Kueue ClusterQueue (cluster-scoped); NotFoundError when absent. */
  getClusterQueue(name: string, options?: ReadOptions): Promise<KubeObject>;
  getConfigMap(namespace: string, name: string, options?: ReadOptions): Promise<V1ConfigMap | undefined>;
  /** Create, or replace guarded by resourceVersion when `resourceVersion` is given. */
  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap>;
  /** The job's ScaledTrainingJob (named by jobStateName); undefined when absent. */
  getJobState(ref: JobRef, options?: ReadOptions): Promise<JobStateObject | undefined>;
  /** Every ScaledTrainingJob in the cluster, in one LIST (the schedule reads them once a tick). */
  listJobStates(options?: ReadOptions): Promise<JobStateObject[]>;
  /**
   * Writes the job's state: creates its ScaledTrainingJob (owned by the job) when `current` is undefined,
   * else replaces its status guarded by `current.resourceVersion` (re-owning it first when it was created for
   * an earlier job of the same name). ConflictError when the object changed, or exists when creating.
   */
  putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject>;
  /**
   * The tenants' TrainingAutoscalers (trainscaler.io/v1alpha1, lib/training-autoscaler.ts) of a namespace, or
   * of every namespace in one LIST; as the API server returns them. Absent from a client that serves none.
   */
  listTrainingAutoscalers?(namespace?: string, options?: ReadOptions): Promise<KubeObject[]>;
  /**
   * Replaces a TrainingAutoscaler's status (only trainscaler may), guarded by the resourceVersion of `current`,
   * the object as read; its spec is left as it is. ConflictError when the object changed since.
   */
  putTrainingAutoscalerStatus?(
    current: KubeObject,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<KubeObject>;
}
