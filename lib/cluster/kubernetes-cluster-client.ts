import {
  ApiException,
  AppsV1Api,
  BatchV1Api,
  type ConfigurationOptions,
  CoreV1Api,
  type CoreV1Event,
  CustomObjectsApi,
  KubeConfig,
  Observable,
  type ObservableMiddleware,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { ApiError, ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import { redactUrls } from '../redact-url.js';
import { TRAINING_AUTOSCALER_API_VERSION, TRAINING_AUTOSCALER_RESOURCE } from '../training-autoscaler.js';
import type { JobKind, JobRef } from '../types.js';
import type {
  AuditEventInput,
  ClusterClient,
  JobIdentity,
  JobStateObject,
  JsonPatchOp,
  KubeObject,
  OwnerReference,
  ReadOptions,
  WriteOptions,
} from './cluster-client.js';
import { EVENT_MESSAGE_LIMIT } from './event-message.js';
import { JOB_STATE_API_VERSION, JOB_STATE_RESOURCE, jobStateName } from './job-state.js';

const CUSTOM: Partial<Record<JobKind, { group: string; version: string; plural: string }>> = {
  PyTorchJob: { group: 'kubeflow.org', version: 'v1', plural: 'pytorchjobs' },
  TFJob: { group: 'kubeflow.org', version: 'v1', plural: 'tfjobs' },
  JobSet: { group: 'jobset.x-k8s.io', version: 'v1alpha2', plural: 'jobsets' },
  TrainJob: { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' },
};

/** A typed client-node object back to the API server's JSON (Dates as strings) with its kind. */
function asKubeObject(typed: object, apiVersion: string, kind: string): KubeObject {
  const plain = JSON.parse(JSON.stringify(typed)) as KubeObject;
  return { ...plain, apiVersion, kind };
}

const FIELD_MANAGER = 'trainscaler';
/** Kueue v0.18 stores and serves v1beta2 (v1beta1 only through its conversion webhook). */
const KUEUE = { group: 'kueue.x-k8s.io', version: 'v1beta2' };
const KUEUE_API_VERSION = `${KUEUE.group}/${KUEUE.version}`;

const STATE = {
  group: JOB_STATE_RESOURCE.group,
  version: JOB_STATE_RESOURCE.version,
  plural: JOB_STATE_RESOURCE.plural,
};

const POLICIES = {
  group: TRAINING_AUTOSCALER_RESOURCE.group,
  version: TRAINING_AUTOSCALER_RESOURCE.version,
  plural: TRAINING_AUTOSCALER_RESOURCE.plural,
};

/** A ScaledTrainingJob as the API server returns it, read into what the store needs. */
export function toJobStateObject(raw: unknown): JobStateObject {
  const obj = (raw ?? {}) as Partial<KubeObject> & {
    spec?: { targetRef?: Partial<JobStateObject['target']> };
  };
  const target = obj.spec?.targetRef ?? {};
  const owner = obj.metadata?.ownerReferences?.find((o) => o.controller === true);
  const out: JobStateObject = {
    namespace: obj.metadata?.namespace ?? '',
    name: obj.metadata?.name ?? '',
    resourceVersion: obj.metadata?.resourceVersion ?? '',
    target: { apiVersion: target.apiVersion ?? '', kind: target.kind ?? '', name: target.name ?? '' },
    status: obj.status,
  };
  if (owner) out.ownerUid = owner.uid;
  return out;
}

/** The job as the ScaledTrainingJob's controller owner: collected with it, never blocking its deletion. */
export function jobStateOwner(job: JobIdentity): OwnerReference & { blockOwnerDeletion: boolean } {
  return {
    apiVersion: job.apiVersion,
    kind: job.ref.kind,
    name: job.ref.name,
    uid: job.uid,
    controller: true,
    blockOwnerDeletion: false,
  };
}

/** Loads credentials the way kubectl does: KUBECONFIG / ~/.kube/config, or the in-cluster ServiceAccount. */
export function loadKubeConfig(options: { kubeconfig?: string; inCluster?: boolean } = {}): KubeConfig {
  const kc = new KubeConfig();
  if (options.inCluster) kc.loadFromCluster();
  else if (options.kubeconfig) kc.loadFromFile(options.kubeconfig);
  else kc.loadFromDefault();
  return kc;
}

/**
 * A Status's message, with the messages of its causes: the API server names the PodDisruptionBudget that
 * refused an eviction only there ("The disruption budget train-pdb needs 2 healthy pods and has 2 currently").
 */
function statusMessage(status: object): string | undefined {
  if (!('message' in status)) return undefined;
  const details = 'details' in status ? status.details : undefined;
  const causes =
    typeof details === 'object' && details !== null && 'causes' in details && Array.isArray(details.causes)
      ? (details.causes as unknown[]).flatMap((c) =>
          typeof c === 'object' && c !== null && 'message' in c && typeof c.message === 'string'
            ? [c.message]
            : [],
        )
      : [];
  return [String(status.message), ...causes].join(': ');
}

function messageOf(body: unknown, fallback: string): string {
  if (typeof body === 'string') {
    try {
      const parsed: unknown = JSON.parse(body);
      if (typeof parsed === 'object' && parsed !== null) return statusMessage(parsed) ?? fallback;
    } catch {
      return body.slice(0, 500);
    }
  }
  if (typeof body === 'object' && body !== null) return statusMessage(body) ?? fallback;
  return fallback;
}

/** Maps the client's exceptions onto trainscaler's typed errors, naming what was attempted. */
export function translateError(what: string, error: unknown): Error {
  if (error instanceof ApiException) {
    const detail = messageOf(error.body, error.message);
    if (error.code === 404) return new NotFoundError(what);
    if (error.code === 409) return new ConflictError(what);
    if (error.code === 403 || error.code === 401) return new ForbiddenError(what, detail);
    return new ApiError(what, error.code, detail, { cause: error });
  }
  // A connection failure quotes the request's URL: its query values are not for the logs.
  const detail = redactUrls(error instanceof Error ? error.message : String(error));
  return new ApiError(what, undefined, detail, { cause: error });
}

/**
 * Request options carrying a request's AbortSignal down to the HTTP request (fetch) and its time limit to the
 * API server (the `timeout` query parameter, which bounds the server's own work on any request that is not a
 * watch). Used for writes and reads alike.
 */
export function writeRequestOptions(
  options: ReadOptions | WriteOptions,
  base: ConfigurationOptions<ObservableMiddleware> = {},
): ConfigurationOptions<ObservableMiddleware> {
  const { signal, timeoutMs } = options;
  if (!signal && timeoutMs === undefined) return base;
  const middleware: ObservableMiddleware = {
    pre: (request) => {
      if (signal) request.setSignal(signal);
      if (timeoutMs !== undefined) request.setQueryParam('timeout', `${Math.max(1, Math.ceil(timeoutMs))}ms`);
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  return { ...base, middleware: [...(base.middleware ?? []), middleware], middlewareMergeStrategy: 'append' };
}

/** The same for a read. */
export const readRequestOptions = (options: ReadOptions = {}) => writeRequestOptions(options);

/**
 * A list's `timeoutSeconds` (whole seconds, at least 1): the API server ends the list by then, whatever it
 * is still gathering. Undefined (no limit sent) when the read has none.
 */
export function listTimeoutSeconds(options: ReadOptions = {}): number | undefined {
  return options.timeoutMs === undefined ? undefined : Math.max(1, Math.ceil(options.timeoutMs / 1000));
}

async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw translateError(what, error);
  }
}

/**
 * Objects a list asks for per page (`limit`), as kubectl and client-go's reflectors do: a list of 100,000 pods
 * is 200 responses of bounded size rather than one response the API server and this process hold whole.
 */
export const DEFAULT_LIST_PAGE_SIZE = 500;

/** One page of a list: typed lists carry the token as `_continue`, custom objects' JSON as `continue`. */
interface ListPage<T> {
  items?: T[];
  metadata?: { _continue?: string; continue?: string };
}

/**
 * Every item of a list, page by page (`limit` and `continue`). The pages are one consistent snapshot; when the
 * API server has compacted that snapshot away before the last page (HTTP 410 Gone on a continue), the list
 * starts over once, and a second expiry is an ApiError saying so.
 */
export async function listAllPages<T>(
  what: string,
  limit: number,
  page: (limit: number, continueToken: string | undefined) => Promise<ListPage<T>>,
): Promise<T[]> {
  for (let restarted = false; ; restarted = true) {
    const items: T[] = [];
    let token: string | undefined;
    try {
      do {
        const list = await call(what, () => page(limit, token));
        for (const item of list.items ?? []) items.push(item);
        token = list.metadata?._continue || list.metadata?.continue || undefined;
      } while (token !== undefined);
      return items;
    } catch (error) {
      const expired = token !== undefined && error instanceof ApiError && error.status === 410;
      if (!expired) throw error;
      if (!restarted) continue;
      throw new ApiError(
        what,
        410,
        `the list's snapshot expired twice while paging (${limit} a page): the API server compacts faster than the pages are read`,
        { cause: error },
      );
    }
  }
}

/** The real thing: a Kubernetes API server reached through @kubernetes/client-node. */
export class KubernetesClusterClient implements ClusterClient {
  private readonly core: CoreV1Api;
  private readonly apps: AppsV1Api;
  private readonly batch: BatchV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly pageSize: number;

  /** `listPageSize`: objects per page of every list (DEFAULT_LIST_PAGE_SIZE). */
  constructor(kubeConfig: KubeConfig, options: { listPageSize?: number } = {}) {
    const pageSize = options.listPageSize ?? DEFAULT_LIST_PAGE_SIZE;
    if (!Number.isInteger(pageSize) || pageSize < 1)
      throw new RangeError(`listPageSize must be a whole number of at least 1, got ${pageSize}`);
    this.pageSize = pageSize;
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.apps = kubeConfig.makeApiClient(AppsV1Api);
    this.batch = kubeConfig.makeApiClient(BatchV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async getJob(ref: JobRef, options?: ReadOptions): Promise<KubeObject> {
    const what = `get ${ref.kind} ${ref.namespace}/${ref.name}`;
    const bounded = readRequestOptions(options);
    const crd = CUSTOM[ref.kind];
    if (crd)
      return call(what, () =>
        this.custom.getNamespacedCustomObject({ ...crd, namespace: ref.namespace, name: ref.name }, bounded),
      );
    if (ref.kind === 'Job') {
      const job = await call(what, () =>
        this.batch.readNamespacedJob({ namespace: ref.namespace, name: ref.name }, bounded),
      );
      return asKubeObject(job, 'batch/v1', 'Job');
    }
    const sts = await call(what, () =>
      this.apps.readNamespacedStatefulSet({ namespace: ref.namespace, name: ref.name }, bounded),
    );
    return { ...sts, apiVersion: 'apps/v1', kind: 'StatefulSet' } as KubeObject;
  }

  async listJobs(kind: JobKind, namespace?: string, options?: ReadOptions): Promise<KubeObject[]> {
    const what = `list ${kind}${namespace ? ` in ${namespace}` : ''}`;
    const bounded = readRequestOptions(options);
    const timeoutSeconds = listTimeoutSeconds(options);
    const crd = CUSTOM[kind];
    if (crd) {
      const items = await listAllPages<KubeObject>(what, this.pageSize, (limit, _continue) =>
        namespace
          ? this.custom.listNamespacedCustomObject(
              { ...crd, namespace, timeoutSeconds, limit, _continue },
              bounded,
            )
          : this.custom.listClusterCustomObject({ ...crd, timeoutSeconds, limit, _continue }, bounded),
      );
      return items.map((item) => ({ ...item, apiVersion: `${crd.group}/${crd.version}`, kind }));
    }
    if (kind === 'Job') {
      const jobs = await listAllPages(what, this.pageSize, (limit, _continue) =>
        namespace
          ? this.batch.listNamespacedJob({ namespace, timeoutSeconds, limit, _continue }, bounded)
          : this.batch.listJobForAllNamespaces({ timeoutSeconds, limit, _continue }, bounded),
      );
      return jobs.map((item) => asKubeObject(item, 'batch/v1', 'Job'));
    }
    const list = await listAllPages(what, this.pageSize, (limit, _continue) =>
      namespace
        ? this.apps.listNamespacedStatefulSet({ namespace, timeoutSeconds, limit, _continue }, bounded)
        : this.apps.listStatefulSetForAllNamespaces({ timeoutSeconds, limit, _continue }, bounded),
    );
    return list.map((item) => ({ ...item, apiVersion: 'apps/v1', kind: 'StatefulSet' }) as KubeObject);
  }

  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    const what = `patch ${ref.kind} ${ref.namespace}/${ref.name}`;
    const headers = writeRequestOptions(options, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
    const dryRun = options.dryRun ? 'All' : undefined;
    const crd = CUSTOM[ref.kind];
    if (crd) {
      return call(what, () =>
        this.custom.patchNamespacedCustomObject(
          {
            ...crd,
            namespace: ref.namespace,
            name: ref.name,
            body: patch,
            dryRun,
            fieldManager: FIELD_MANAGER,
          },
          headers,
        ),
      );
    }
    if (ref.kind === 'Job') {
      const job = await call(what, () =>
        this.batch.patchNamespacedJob(
          { namespace: ref.namespace, name: ref.name, body: patch, dryRun, fieldManager: FIELD_MANAGER },
          headers,
        ),
      );
      return asKubeObject(job, 'batch/v1', 'Job');
    }
    const sts = await call(what, () =>
      this.apps.patchNamespacedStatefulSet(
        { namespace: ref.namespace, name: ref.name, body: patch, dryRun, fieldManager: FIELD_MANAGER },
        headers,
      ),
    );
    return { ...sts, apiVersion: 'apps/v1', kind: 'StatefulSet' } as KubeObject;
  }

  async listPods(
    namespace: string | undefined,
    labelSelector?: string,
    options?: ReadOptions,
  ): Promise<V1Pod[]> {
    const what = `list pods${namespace ? ` in ${namespace}` : ''}${labelSelector ? ` (${labelSelector})` : ''}`;
    const bounded = readRequestOptions(options);
    const timeoutSeconds = listTimeoutSeconds(options);
    return listAllPages(what, this.pageSize, (limit, _continue) =>
      namespace
        ? this.core.listNamespacedPod({ namespace, labelSelector, timeoutSeconds, limit, _continue }, bounded)
        : this.core.listPodForAllNamespaces({ labelSelector, timeoutSeconds, limit, _continue }, bounded),
    );
  }

  async listNodes(options?: ReadOptions): Promise<V1Node[]> {
    const timeoutSeconds = listTimeoutSeconds(options);
    const bounded = readRequestOptions(options);
    return listAllPages('list nodes', this.pageSize, (limit, _continue) =>
      this.core.listNode({ timeoutSeconds, limit, _continue }, bounded),
    );
  }

  async evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    await call(`evict pod ${namespace}/${name}`, () =>
      this.core.createNamespacedPodEviction(
        {
          namespace,
          name,
          body: {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name, namespace },
            ...(options.dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}),
          },
          dryRun: options.dryRun ? 'All' : undefined,
        },
        writeRequestOptions(options),
      ),
    );
  }

  private podResizeServed: Promise<boolean> | undefined;

  /**
   * Discovery of the core group (GET /api/v1, open to every authenticated user through the built-in
   * system:discovery role): whether `pods/resize` is listed. Asked once per client; a failed answer is not kept.
   */
  servesPodResize(options?: ReadOptions): Promise<boolean> {
    this.podResizeServed ??= call('discover the core API resources', () =>
      this.core.getAPIResources({}, readRequestOptions(options)),
    )
      .then((list) => list.resources.some((r) => r.name === 'pods/resize'))
      .catch((error: unknown) => {
        this.podResizeServed = undefined;
        throw error;
      });
    return this.podResizeServed;
  }

  async resizePod(
    namespace: string,
    name: string,
    patch: JsonPatchOp[],
    options: WriteOptions,
  ): Promise<V1Pod> {
    const headers = writeRequestOptions(options, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
    return call(`resize pod ${namespace}/${name}`, () =>
      this.core.patchNamespacedPodResize(
        {
          namespace,
          name,
          body: patch,
          dryRun: options.dryRun ? 'All' : undefined,
          fieldManager: FIELD_MANAGER,
        },
        headers,
      ),
    );
  }

  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    if (options.dryRun) return undefined;
    const { ref, uid, apiVersion } = event.involved;
    const now = new Date();
    const metadata = event.decisionId
      ? { name: `${ref.name.slice(0, 200)}.trainscaler.${event.decisionId}`, namespace: ref.namespace }
      : { generateName: `${ref.name.slice(0, 200)}.trainscaler.`, namespace: ref.namespace };
    const created = call(`create event for ${ref.namespace}/${ref.name}`, () =>
      this.core.createNamespacedEvent(
        {
          namespace: ref.namespace,
          body: {
            metadata,
            involvedObject: { apiVersion, kind: ref.kind, name: ref.name, namespace: ref.namespace, uid },
            reason: event.reason,
            message: event.message.slice(0, EVENT_MESSAGE_LIMIT),
            type: event.type,
            source: { component: 'trainscaler' },
            reportingComponent: 'trainscaler.io/autoscaler',
            reportingInstance: 'trainscaler',
            action: event.reason,
            // No eventTime: it is a MicroTime, which the client would serialise with milliseconds (HTTP 400).
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        },
        writeRequestOptions(options),
      ),
    );
    try {
      return await created;
    } catch (error) {
      // Named after the decision: AlreadyExists means an earlier attempt recorded it.
      if (error instanceof ConflictError && event.decisionId) return undefined;
      throw error;
    }
  }

  async listJobEvents(ref: JobRef, options?: ReadOptions): Promise<CoreV1Event[]> {
    const { namespace } = ref;
    const fieldSelector = `involvedObject.kind=${ref.kind},involvedObject.name=${ref.name}`;
    const bounded = readRequestOptions(options);
    const timeoutSeconds = listTimeoutSeconds(options);
    return listAllPages(`list events of ${namespace}/${ref.name}`, this.pageSize, (limit, _continue) =>
      this.core.listNamespacedEvent({ namespace, fieldSelector, timeoutSeconds, limit, _continue }, bounded),
    );
  }

  async listWorkloads(
    namespace: string | undefined,
    labelSelector: string,
    options?: ReadOptions,
  ): Promise<KubeObject[]> {
    const timeoutSeconds = listTimeoutSeconds(options);
    const bounded = readRequestOptions(options);
    const selector = labelSelector || undefined;
    const what = `list workloads${namespace ? ` in ${namespace}` : ''}${selector ? ` (${selector})` : ''}`;
    try {
      const items = await listAllPages<KubeObject>(what, this.pageSize, (limit, _continue) => {
        const query = {
          ...KUEUE,
          plural: 'workloads',
          labelSelector: selector,
          timeoutSeconds,
          limit,
          _continue,
        };
        return namespace
          ? this.custom.listNamespacedCustomObject({ ...query, namespace }, bounded)
          : this.custom.listClusterCustomObject(query, bounded);
      });
      return items.map((item) => ({ ...item, apiVersion: KUEUE_API_VERSION, kind: 'Workload' }));
    } catch (error) {
      // The resource is not served: Kueue is not installed, so no job is Kueue's.
      if (error instanceof NotFoundError) return [];
      throw error;
    }
  }

  async getLocalQueue(namespace: string, name: string, options?: ReadOptions): Promise<KubeObject> {
    const queue: KubeObject = await call(`get localqueue ${namespace}/${name}`, () =>
      this.custom.getNamespacedCustomObject(
        { ...KUEUE, plural: 'localqueues', namespace, name },
        readRequestOptions(options),
      ),
    );
    return { ...queue, apiVersion: KUEUE_API_VERSION, kind: 'LocalQueue' };
  }

  async getClusterQueue(name: string, options?: ReadOptions): Promise<KubeObject> {
    const queue: KubeObject = await call(`get clusterqueue ${name}`, () =>
      this.custom.getClusterCustomObject(
        { ...KUEUE, plural: 'clusterqueues', name },
        readRequestOptions(options),
      ),
    );
    return { ...queue, apiVersion: KUEUE_API_VERSION, kind: 'ClusterQueue' };
  }

  async getConfigMap(
    namespace: string,
    name: string,
    options?: ReadOptions,
  ): Promise<V1ConfigMap | undefined> {
    try {
      return await call(`get configmap ${namespace}/${name}`, () =>
        this.core.readNamespacedConfigMap({ namespace, name }, readRequestOptions(options)),
      );
    } catch (error) {
      if (error instanceof NotFoundError) return undefined;
      throw error;
    }
  }

  async putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    const body: V1ConfigMap = { metadata: { name, namespace }, data };
    const dryRun = options.dryRun ? 'All' : undefined;
    if (resourceVersion === undefined) {
      return call(`create configmap ${namespace}/${name}`, () =>
        this.core.createNamespacedConfigMap(
          { namespace, body, dryRun, fieldManager: FIELD_MANAGER },
          writeRequestOptions(options),
        ),
      );
    }
    body.metadata = { name, namespace, resourceVersion };
    return call(`replace configmap ${namespace}/${name}`, () =>
      this.core.replaceNamespacedConfigMap(
        { namespace, name, body, dryRun, fieldManager: FIELD_MANAGER },
        writeRequestOptions(options),
      ),
    );
  }

  async getJobState(ref: JobRef, options?: ReadOptions): Promise<JobStateObject | undefined> {
    const name = jobStateName(ref.kind, ref.name);
    const bounded = readRequestOptions(options);
    try {
      const raw: unknown = await call(`get scaledtrainingjob ${ref.namespace}/${name}`, () =>
        this.custom.getNamespacedCustomObject({ ...STATE, namespace: ref.namespace, name }, bounded),
      );
      return toJobStateObject(raw);
    } catch (error) {
      if (error instanceof NotFoundError) return undefined;
      throw error;
    }
  }

  async listJobStates(options?: ReadOptions): Promise<JobStateObject[]> {
    const timeoutSeconds = listTimeoutSeconds(options);
    const bounded = readRequestOptions(options);
    const items = await listAllPages<unknown>('list scaledtrainingjobs', this.pageSize, (limit, _continue) =>
      this.custom.listClusterCustomObject({ ...STATE, timeoutSeconds, limit, _continue }, bounded),
    );
    return items.map(toJobStateObject);
  }

  /**
   * The status subresource ignores everything but status, and creating ignores status: a new object is created
   * first (with its owner and target), then its status written guarded by the version just created.
   */
  async putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const { namespace } = job.ref;
    const name = jobStateName(job.ref.kind, job.ref.name);
    const what = `scaledtrainingjob ${namespace}/${name}`;
    const dryRun = options.dryRun ? 'All' : undefined;
    const spec = { targetRef: { apiVersion: job.apiVersion, kind: job.ref.kind, name: job.ref.name } };
    const owner = jobStateOwner(job);
    let resourceVersion = current?.resourceVersion;
    if (current === undefined) {
      const created: unknown = await call(`create ${what}`, () =>
        this.custom.createNamespacedCustomObject(
          {
            ...STATE,
            namespace,
            body: {
              apiVersion: JOB_STATE_API_VERSION,
              kind: JOB_STATE_RESOURCE.kind,
              metadata: { name, namespace, ownerReferences: [owner] },
              spec,
            },
            dryRun,
            fieldManager: FIELD_MANAGER,
          },
          writeRequestOptions(options),
        ),
      );
      resourceVersion = toJobStateObject(created).resourceVersion;
    } else if (current.ownerUid !== job.uid) {
      // Made for an earlier job of the same name (deleted with its dependents orphaned): this job takes it over.
      const patch: JsonPatchOp[] = [
        // Pinned as the job patches are: a stale resourceVersion makes the API server answer 409.
        { op: 'replace', path: '/metadata/resourceVersion', value: current.resourceVersion },
        { op: 'replace', path: '/metadata/ownerReferences', value: [owner] },
      ];
      const adopted: unknown = await call(`adopt ${what}`, () =>
        this.custom.patchNamespacedCustomObject(
          { ...STATE, namespace, name, body: patch, dryRun, fieldManager: FIELD_MANAGER },
          writeRequestOptions(options, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch)),
        ),
      );
      resourceVersion = toJobStateObject(adopted).resourceVersion;
    }
    const written: unknown = await call(`write status of ${what}`, () =>
      this.custom.replaceNamespacedCustomObjectStatus(
        {
          ...STATE,
          namespace,
          name,
          body: {
            apiVersion: JOB_STATE_API_VERSION,
            kind: JOB_STATE_RESOURCE.kind,
            metadata: { name, namespace, resourceVersion },
            spec,
            status,
          },
          dryRun,
          fieldManager: FIELD_MANAGER,
        },
        writeRequestOptions(options),
      ),
    );
    return toJobStateObject(written);
  }

  async listTrainingAutoscalers(namespace?: string, options?: ReadOptions): Promise<KubeObject[]> {
    const timeoutSeconds = listTimeoutSeconds(options);
    const bounded = readRequestOptions(options);
    const list: { items?: KubeObject[] } = await call(
      `list trainingautoscalers${namespace ? ` in ${namespace}` : ''}`,
      () =>
        namespace
          ? this.custom.listNamespacedCustomObject({ ...POLICIES, namespace, timeoutSeconds }, bounded)
          : this.custom.listClusterCustomObject({ ...POLICIES, timeoutSeconds }, bounded),
    );
    // A LIST's items carry no apiVersion and kind: set them, as for the job kinds.
    return (list.items ?? []).map((item) => ({
      ...item,
      apiVersion: TRAINING_AUTOSCALER_API_VERSION,
      kind: TRAINING_AUTOSCALER_RESOURCE.kind,
    }));
  }

  /** The status subresource keeps everything but status as stored: the spec sent is the one read. */
  async putTrainingAutoscalerStatus(
    current: KubeObject,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<KubeObject> {
    const { name, namespace = '', resourceVersion } = current.metadata;
    return call(`write status of trainingautoscaler ${namespace}/${name}`, () =>
      this.custom.replaceNamespacedCustomObjectStatus(
        {
          ...POLICIES,
          namespace,
          name,
          body: {
            apiVersion: TRAINING_AUTOSCALER_API_VERSION,
            kind: TRAINING_AUTOSCALER_RESOURCE.kind,
            metadata: { name, namespace, resourceVersion },
            spec: current.spec,
            status,
          },
          dryRun: options.dryRun ? 'All' : undefined,
          fieldManager: FIELD_MANAGER,
        },
        writeRequestOptions(options),
      ),
    );
  }
}
