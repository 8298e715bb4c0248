// Counting proxies for the scale benchmark (scale.bench.ts): they wrap the ClusterClient and MetricsSource a
// handler is given and count, per method call, the HTTP requests the production clients would make for it
// (KubernetesClusterClient, PrometheusMetricsSource), not the calls the simulator answers. The mapping is
// derived from lib/cluster/api-access.ts and from reading lib/metrics/prometheus-metrics-source.ts;
// test/unit/bench/scale-counting.test.ts drives the production clients against local HTTP servers and checks
// that the proxies count exactly the requests the servers receive.
import { type ApiAccess, CLUSTER_CLIENT_ACCESS } from '../../lib/cluster/api-access.js';
import type { ClusterClient, JobStateObject } from '../../lib/cluster/cluster-client.js';
import { MissingMetricsError } from '../../lib/errors.js';
import type { JobReadings, SinceAsk } from '../../lib/metrics/job-readings.js';
import type { MetricsSource } from '../../lib/metrics/metrics-source.js';
import type { JobKind } from '../../lib/types.js';

/** One API request as RBAC and the audit log name it: `<verb> <resource>`, e.g. `list pods`. */
export type ApiRequestKey = string;

/** Discovery of the core group (GET /api/v1): a non-resource URL, no RBAC row (api-access.ts). */
export const DISCOVERY_REQUEST: ApiRequestKey = 'get /api/v1';

const READ_VERBS: ReadonlySet<string> = new Set(['get', 'list', 'watch']);

export type PromqlMethod = keyof MetricsSource;

export interface CountSnapshot {
  apiReads: number;
  /** Objects the lists returned: what a request costs grows with them (one `list pods` of 100,000 pods). */
  apiObjectsListed: number;
  apiWrites: number;
  apiRequestsByVerbAndResource: Record<ApiRequestKey, number>;
  promqlQueries: number;
  promqlQueriesByMethod: Partial<Record<PromqlMethod, number>>;
}

/** Running totals; `onCount` lets a caller persist progress (a tick stopped at its time limit keeps its counts). */
export class RequestCounter {
  #reads = 0;
  #writes = 0;
  #promql = 0;
  #listed = 0;
  readonly #byKey = new Map<ApiRequestKey, number>();
  readonly #byMethod = new Map<PromqlMethod, number>();

  constructor(private readonly onCount?: (counter: RequestCounter) => void) {}

  api(key: ApiRequestKey): void {
    const verb = key.slice(0, key.indexOf(' '));
    if (READ_VERBS.has(verb)) this.#reads += 1;
    else this.#writes += 1;
    this.#byKey.set(key, (this.#byKey.get(key) ?? 0) + 1);
    this.onCount?.(this);
  }

  listed(objects: number): void {
    this.#listed += objects;
  }

  promql(method: PromqlMethod, queries: number): void {
    if (queries === 0) return;
    this.#promql += queries;
    this.#byMethod.set(method, (this.#byMethod.get(method) ?? 0) + queries);
    this.onCount?.(this);
  }

  snapshot(): CountSnapshot {
    return {
      apiReads: this.#reads,
      apiObjectsListed: this.#listed,
      apiWrites: this.#writes,
      apiRequestsByVerbAndResource: Object.fromEntries(
        [...this.#byKey].sort(([a], [b]) => a.localeCompare(b)),
      ),
      promqlQueries: this.#promql,
      promqlQueriesByMethod: Object.fromEntries(this.#byMethod),
    };
  }
}

/** The plural the production client addresses each kind by (lib/cluster/kubernetes-cluster-client.ts). */
const JOB_RESOURCE: Record<JobKind, string> = {
  PyTorchJob: 'pytorchjobs',
  TFJob: 'tfjobs',
  StatefulSet: 'statefulsets',
  Job: 'jobs',
  JobSet: 'jobsets',
  TrainJob: 'trainjobs',
};

const keyOf = (access: Pick<ApiAccess, 'verb' | 'resource'>): ApiRequestKey =>
  `${access.verb} ${access.resource}`;

type Method = keyof typeof CLUSTER_CLIENT_ACCESS;

/** The method's row in api-access.ts that matches: a mapping naming a request the table lacks fails here. */
function request(method: Method, match: Partial<Pick<ApiAccess, 'verb' | 'resource'>> = {}): ApiRequestKey {
  const rows: readonly ApiAccess[] = CLUSTER_CLIENT_ACCESS[method];
  const found = rows.filter(
    (row) =>
      (match.verb === undefined || row.verb === match.verb) &&
      (match.resource === undefined || row.resource === match.resource),
  );
  const [row] = found;
  if (!row || found.length !== 1)
    throw new Error(`api-access.ts has no single ${method} request matching ${JSON.stringify(match)}`);
  return keyOf(row);
}

/**
 * The requests KubernetesClusterClient makes per call. Its lists are paged (DEFAULT_LIST_PAGE_SIZE objects a
 * response, lib/cluster/kubernetes-cluster-client.ts): counted here as one request per list, whatever its
 * length (`apiObjectsListed` says how long; a list of n objects is ceil(n / 500) responses).
 */
export const PRODUCTION_API_REQUESTS = {
  getJob: (kind: JobKind) => [request('getJob', { resource: JOB_RESOURCE[kind] })],
  listJobs: (kind: JobKind) => [request('listJobs', { resource: JOB_RESOURCE[kind] })],
  patchJob: (kind: JobKind) => [request('patchJob', { resource: JOB_RESOURCE[kind] })],
  listPods: () => [request('listPods')],
  listNodes: () => [request('listNodes')],
  evictPod: () => [request('evictPod')],
  resizePod: () => [request('resizePod')],
  // A dry run records no Event: the client returns before any request.
  createEvent: (dryRun: boolean) => (dryRun ? [] : [request('createEvent')]),
  // A 404 (Kueue not installed) is still a request, answered with no Workloads.
  listWorkloads: () => [request('listWorkloads')],
  getLocalQueue: () => [request('getLocalQueue')],
  getClusterQueue: () => [request('getClusterQueue')],
  getConfigMap: () => [request('getConfigMap')],
  getJobState: () => [request('getJobState')],
  listJobStates: () => [request('listJobStates')],
  // Created then its status written; re-owned (an earlier job's) then written; or only written.
  putJobState: (current: JobStateObject | undefined, jobUid: string) => [
    ...(current === undefined
      ? [request('putJobState', { verb: 'create' })]
      : current.ownerUid !== jobUid
        ? [request('putJobState', { verb: 'patch' })]
        : []),
    request('putJobState', { verb: 'update' }),
  ],
  putConfigMap: (resourceVersion: string | undefined) => [
    request('putConfigMap', { verb: resourceVersion === undefined ? 'create' : 'update' }),
  ],
} as const;

/** The same client with each call counted as the production client's requests (counted when issued). */
/**
 * `latencyMs`: each request the production client would send waits this long before the simulator answers it (a
 * round trip to an API server; 0, the default, answers at once), so that a tick's wall time shows what its
 * requests cost when they are not free.
 */
export function countingClusterClient(
  target: ClusterClient,
  counter: () => RequestCounter,
  latencyMs = 0,
): ClusterClient {
  const counted = <T>(keys: readonly ApiRequestKey[], run: () => Promise<T>): Promise<T> => {
    for (const key of keys) counter().api(key);
    if (latencyMs <= 0 || keys.length === 0) return run();
    return new Promise((resolve) => setTimeout(resolve, latencyMs * keys.length)).then(run);
  };
  const listing = async <T>(keys: readonly ApiRequestKey[], run: () => Promise<T[]>): Promise<T[]> => {
    const items = await counted(keys, run);
    counter().listed(items.length);
    return items;
  };
  const R = PRODUCTION_API_REQUESTS;
  const client: ClusterClient = {
    getJob: (ref) => counted(R.getJob(ref.kind), () => target.getJob(ref)),
    listJobs: (kind, namespace) => listing(R.listJobs(kind), () => target.listJobs(kind, namespace)),
    patchJob: (ref, patch, options) =>
      counted(R.patchJob(ref.kind), () => target.patchJob(ref, patch, options)),
    listPods: (namespace, selector) => listing(R.listPods(), () => target.listPods(namespace, selector)),
    listNodes: () => listing(R.listNodes(), () => target.listNodes()),
    evictPod: (namespace, name, options) =>
      counted(R.evictPod(), () => target.evictPod(namespace, name, options)),
    createEvent: (event, options) =>
      counted(R.createEvent(options.dryRun), () => target.createEvent(event, options)),
    listWorkloads: (namespace, selector) =>
      listing(R.listWorkloads(), () => target.listWorkloads(namespace, selector)),
    getLocalQueue: (namespace, name) =>
      counted(R.getLocalQueue(), () => target.getLocalQueue(namespace, name)),
    getClusterQueue: (name) => counted(R.getClusterQueue(), () => target.getClusterQueue(name)),
    getConfigMap: (namespace, name) => counted(R.getConfigMap(), () => target.getConfigMap(namespace, name)),
    getJobState: (ref) => counted(R.getJobState(), () => target.getJobState(ref)),
    listJobStates: () => listing(R.listJobStates(), () => target.listJobStates()),
    putJobState: (job, status, current, options) =>
      counted(R.putJobState(current, job.uid), () => target.putJobState(job, status, current, options)),
    putConfigMap: (namespace, name, data, resourceVersion, options) =>
      counted(R.putConfigMap(resourceVersion), () =>
        target.putConfigMap(namespace, name, data, resourceVersion, options),
      ),
  };
  // The optional methods only where the target has them: a handler's behaviour depends on their presence.
  const { resizePod, servesPodResize } = target;
  if (resizePod)
    client.resizePod = (namespace, name, patch, options) =>
      counted(R.resizePod(), () => resizePod.call(target, namespace, name, patch, options));
  if (servesPodResize) {
    // The production client asks discovery once and keeps the answer (not a failure): so does the count.
    let served: Promise<boolean> | undefined;
    client.servesPodResize = () => {
      if (!served) {
        served = counted([DISCOVERY_REQUEST], () => servesPodResize.call(target)).catch((error: unknown) => {
          served = undefined;
          throw error;
        });
      }
      return served;
    };
  }
  return client;
}

/**
 * Which of the optional series the jobs export: the answer decides how many queries some methods issue
 * (PrometheusMetricsSource falls back from one series to another when the first is empty).
 */
export interface ExportedSeries {
  /** The sidecar's cgroup CPU and memory series; without them usage falls back to cAdvisor's (3 more queries). */
  sidecarUsage: boolean;
  /** trainscaler_trainer_samples (the training hook); without it progress is read from the sidecar's counter. */
  trainerSamples: boolean;
}

/** The simulated jobs: the trainscaler sidecar on every pod, no training hook. */
export const SIMULATED_JOB_SERIES: ExportedSeries = { sidecarUsage: true, trainerSamples: false };

/**
 * PromQL queries PrometheusMetricsSource issues per call, read from its code: stepSamples 3 (means, node
 * and worker counts, in parallel); containerUsage 3 (CPU, memory, role), 3 more from cAdvisor when the
 * sidecar's usage is empty; workerStepTimes 1; samplesProcessed 1, or 2 when the trainer's series is absent;
 * firstStepAfterPause and pauseEndedAfter 1 each, none when `since` is not in the past.
 */
export const PRODUCTION_PROMQL_QUERIES = {
  stepSamples: () => 3,
  containerUsage: (outcome: 'found' | 'missing' | 'failed', series: ExportedSeries) => {
    if (outcome === 'missing') return 6;
    return series.sidecarUsage ? 3 : 6;
  },
  workerStepTimes: () => 1,
  samplesProcessed: (found: boolean, series: ExportedSeries) => (found && series.trainerSamples ? 1 : 2),
  firstStepAfterPause: (now: number, since: number) => (now > since ? 1 : 0),
  pauseEndedAfter: (now: number, since: number) => (now > since ? 1 : 0),
  // The batch reads: a fixed number per call whatever the number of jobs, none for no job. Usage adds
  // cAdvisor's CPU and memory (2) when any job has no sidecar usage; the rescale reads only when a `since` is past.
  stepSamplesOfJobs: (jobs: number) => (jobs > 0 ? 3 : 0),
  containerUsageOfJobs: (jobs: number, anyWithoutSidecarUsage: boolean) =>
    jobs > 0 ? 3 + (anyWithoutSidecarUsage ? 2 : 0) : 0,
  workerStepTimesOfJobs: (jobs: number) => (jobs > 0 ? 1 : 0),
  samplesProcessedOfJobs: (jobs: number) => (jobs > 0 ? 2 : 0),
  firstStepAfterPauseOfJobs: (now: number, asks: readonly SinceAsk[]) =>
    asks.some((a) => now > a.since) ? 1 : 0,
  pauseEndedAfterOfJobs: (now: number, asks: readonly SinceAsk[]) =>
    asks.some((a) => now > a.since) ? 1 : 0,
} as const;

/** A job the production source found no sidecar usage for (then it asks cAdvisor). */
function withoutSidecarUsage(readings: JobReadings<unknown[]>, series: ExportedSeries): boolean {
  if (!series.sidecarUsage) return readings.size > 0;
  return [...readings.values()].some((r) =>
    r.ok ? r.value.length === 0 : r.error instanceof MissingMetricsError,
  );
}

/** The same metrics source with each call counted as the production source's PromQL queries. */
export function countingMetricsSource(
  target: MetricsSource,
  counter: () => RequestCounter,
  clock: () => number,
  series: ExportedSeries = SIMULATED_JOB_SERIES,
): MetricsSource {
  const Q = PRODUCTION_PROMQL_QUERIES;
  const count = (method: PromqlMethod, queries: number) => counter().promql(method, queries);
  const counted = <T>(method: PromqlMethod, queries: number, run: () => T): T => {
    count(method, queries);
    return run();
  };
  const source: MetricsSource = {
    stepSamples: (ref, window) =>
      counted('stepSamples', Q.stepSamples(), () => target.stepSamples(ref, window)),
    containerUsage: async (ref, window) => {
      try {
        const usage = await target.containerUsage(ref, window);
        count('containerUsage', Q.containerUsage(usage.length > 0 ? 'found' : 'missing', series));
        return usage;
      } catch (error) {
        const outcome = error instanceof MissingMetricsError ? 'missing' : 'failed';
        count('containerUsage', Q.containerUsage(outcome, series));
        throw error;
      }
    },
    workerStepTimes: (ref, window) =>
      counted('workerStepTimes', Q.workerStepTimes(), () => target.workerStepTimes(ref, window)),
    samplesProcessed: async (ref) => {
      try {
        const processed = await target.samplesProcessed(ref);
        count('samplesProcessed', Q.samplesProcessed(processed !== undefined, series));
        return processed;
      } catch (error) {
        count('samplesProcessed', 1);
        throw error;
      }
    },
  };
  // The batch reads only where the target has them: without, the tick reads job by job (counted above).
  const {
    stepSamplesOfJobs,
    containerUsageOfJobs,
    workerStepTimesOfJobs,
    samplesProcessedOfJobs,
    firstStepAfterPauseOfJobs,
    pauseEndedAfterOfJobs,
  } = target;
  if (stepSamplesOfJobs)
    source.stepSamplesOfJobs = (refs, window) =>
      counted('stepSamplesOfJobs', Q.stepSamplesOfJobs(refs.length), () =>
        stepSamplesOfJobs.call(target, refs, window),
      );
  if (containerUsageOfJobs)
    source.containerUsageOfJobs = async (refs, window) => {
      const readings = await containerUsageOfJobs.call(target, refs, window);
      count(
        'containerUsageOfJobs',
        Q.containerUsageOfJobs(refs.length, withoutSidecarUsage(readings, series)),
      );
      return readings;
    };
  if (workerStepTimesOfJobs)
    source.workerStepTimesOfJobs = (refs, window) =>
      counted('workerStepTimesOfJobs', Q.workerStepTimesOfJobs(refs.length), () =>
        workerStepTimesOfJobs.call(target, refs, window),
      );
  if (samplesProcessedOfJobs)
    source.samplesProcessedOfJobs = (refs) =>
      counted('samplesProcessedOfJobs', Q.samplesProcessedOfJobs(refs.length), () =>
        samplesProcessedOfJobs.call(target, refs),
      );
  if (firstStepAfterPauseOfJobs)
    source.firstStepAfterPauseOfJobs = (asks) =>
      counted('firstStepAfterPauseOfJobs', Q.firstStepAfterPauseOfJobs(clock(), asks), () =>
        firstStepAfterPauseOfJobs.call(target, asks),
      );
  if (pauseEndedAfterOfJobs)
    source.pauseEndedAfterOfJobs = (asks) =>
      counted('pauseEndedAfterOfJobs', Q.pauseEndedAfterOfJobs(clock(), asks), () =>
        pauseEndedAfterOfJobs.call(target, asks),
      );
  const { firstStepAfterPause, pauseEndedAfter } = target;
  if (firstStepAfterPause)
    source.firstStepAfterPause = (ref, since) =>
      counted('firstStepAfterPause', Q.firstStepAfterPause(clock(), since), () =>
        firstStepAfterPause.call(target, ref, since),
      );
  if (pauseEndedAfter)
    source.pauseEndedAfter = (ref, since) =>
      counted('pauseEndedAfter', Q.pauseEndedAfter(clock(), since), () =>
        pauseEndedAfter.call(target, ref, since),
      );
  return source;
}
