// A ClusterClient decorator that retries transient API failures (5xx, 429, timeouts, dropped connections)
// with bounded exponential backoff and full jitter. It retries only what is safe to repeat:
//  - reads;
//  - guarded job patches (the first operation pins metadata.resourceVersion): after an ambiguous failure the
//    patch may or may not have been applied, so the job is re-read and the decision id the patch writes
//    (trainscaler.io/last-decision) is looked for. Found: the write happened, report success. Not found and the
//    job still at the pinned version: nothing happened, send it again. Otherwise someone else wrote: a conflict,
//    and the actuator re-reads and recomputes.
// A job's state (its ScaledTrainingJob) is retried like a guarded write: a repeat that finds it written is a 409.
// Evictions and ConfigMap writes are passed through once: repeating them could double them. Events are
// retried only when the API server said it did not process the request (429, 503).
// Each attempt, read or write, is a separate call to the inner client, with its own AbortSignal and time limit:
// an attempt that times out is cancelled (its connection closed), not left running beside its retry; the API
// server is given the same limit (`timeout`, and a list's `timeoutSeconds`). A fence placed under this client
// (the runner's LeaderFencedClusterClient) is checked again before every write attempt.
import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import { ANNOTATION, jsonPointer } from '../adapters/annotations.js';
import { ApiError, ConflictError } from '../errors.js';
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

export interface RetryOptions {
  /** Attempts per operation, the first included. */
  maxAttempts: number;
  /** Backoff before retry n (1-based) is uniform in [0, min(maxDelayMs, baseDelayMs * 2^(n-1))]. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** An attempt that has not answered after this long counts as failed (and, for a patch, as ambiguous). */
  attemptTimeoutMs: number;
  /** Uniform [0, 1) source for the jitter; injectable so that tests are reproducible. */
  random: () => number;
  /** Called before each retry, for logs and tests. */
  onRetry?: (info: { operation: string; attempt: number; error: unknown; delayMs: number }) => void;
}

export const DEFAULT_RETRY_OPTIONS: RetryOptions = {
  maxAttempts: 6,
  baseDelayMs: 100,
  maxDelayMs: 2_000,
  attemptTimeoutMs: 10_000,
  random: Math.random,
};

class AttemptTimeoutError extends ApiError {
  constructor(what: string, ms: number) {
    super(what, undefined, `no answer within ${ms} ms`);
  }
}

/** 5xx, 429 and failures without an HTTP status (connection reset, refused, timed out) are transient. */
export function isTransient(error: unknown): boolean {
  if (!(error instanceof ApiError)) return false;
  return error.status === undefined || error.status === 429 || error.status >= 500;
}

const LAST_DECISION_PATH = jsonPointer(['metadata', 'annotations', ANNOTATION.lastDecision]);

export interface PatchIdentity {
  decisionId?: string;
  /** The record's per-attempt nonce, which tells this write from a duplicate trigger's identical one. */
  write?: string;
  guardedBy?: string;
}

/** The decision id a trainscaler patch records, and the resourceVersion it is guarded by. */
export function patchIdentity(patch: readonly JsonPatchOp[]): PatchIdentity {
  const out: PatchIdentity = {};
  const first = patch[0];
  if (first?.path === '/metadata/resourceVersion' && typeof first.value === 'string')
    out.guardedBy = first.value;
  for (const op of patch) {
    let raw: unknown;
    if (op.path === LAST_DECISION_PATH) raw = op.value;
    else if (op.path === '/metadata/annotations' && typeof op.value === 'object' && op.value !== null)
      raw = (op.value as Record<string, unknown>)[ANNOTATION.lastDecision];
    if (typeof raw !== 'string') continue;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (typeof parsed === 'object' && parsed !== null && 'id' in parsed && typeof parsed.id === 'string') {
        out.decisionId = parsed.id;
        if ('write' in parsed && typeof parsed.write === 'string') out.write = parsed.write;
      }
    } catch {
      // Not a trainscaler record: the patch is then not verifiable and is not retried after an ambiguity.
    }
  }
  return out;
}

/**
 * Whether the job carries the decision (as its last decision or in its history): 'ours' when written by this
 * attempt (same nonce), 'duplicate' when the same decision was written by another trigger.
 */
export function findDecision(
  job: KubeObject,
  decisionId: string,
  write: string | undefined,
): 'ours' | 'duplicate' | undefined {
  let found: 'ours' | 'duplicate' | undefined;
  const annotations = job.metadata.annotations ?? {};
  for (const key of [ANNOTATION.lastDecision, ANNOTATION.history]) {
    const raw = annotations[key];
    if (!raw) continue;
    try {
      const parsed: unknown = JSON.parse(raw);
      const records = Array.isArray(parsed) ? parsed : [parsed];
      for (const r of records as unknown[]) {
        if (typeof r !== 'object' || r === null || !('id' in r) || r.id !== decisionId) continue;
        if (write === undefined || ('write' in r && r.write === write)) return 'ours';
        found = 'duplicate';
      }
    } catch {
      // A corrupt annotation proves nothing either way.
    }
  }
  return found;
}

export class RetryingClusterClient implements ClusterClient {
  private readonly options: RetryOptions;

  constructor(
    private readonly inner: ClusterClient,
    options: Partial<RetryOptions> = {},
  ) {
    this.options = { ...DEFAULT_RETRY_OPTIONS, ...options };
  }

  private delayFor(attempt: number): number {
    const { baseDelayMs, maxDelayMs, random } = this.options;
    return Math.floor(random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1)));
  }

  /**
   * One attempt, failed after attemptTimeoutMs. The attempt's signal is aborted on that timeout, so a request
   * passed it is cancelled rather than left to land (a write) or to hold a connection (a read) after its retry
   * has been sent.
   */
  private async once<T>(what: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ms = this.options.attemptTimeoutMs;
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new AttemptTimeoutError(what, ms);
        controller.abort(error);
        reject(error);
      }, ms);
    });
    try {
      return await Promise.race([run(controller.signal), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The caller's write options, bounded by this attempt's signal and time limit. */
  private attemptOptions(options: WriteOptions, signal: AbortSignal): WriteOptions {
    return {
      ...options,
      signal: options.signal ? AbortSignal.any([options.signal, signal]) : signal,
      timeoutMs: Math.min(options.timeoutMs ?? Number.POSITIVE_INFINITY, this.options.attemptTimeoutMs),
    };
  }

  private async pause(operation: string, attempt: number, error: unknown): Promise<void> {
    const delayMs = this.delayFor(attempt);
    this.options.onRetry?.({ operation, attempt, error, delayMs });
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }

  /**
   * Retries a read (or any operation safe to repeat) on transient failures, bounded in attempts. Each attempt
   * is handed its own signal and time limit.
   */
  private async read<T>(what: string, run: (options: ReadOptions) => Promise<T>): Promise<T> {
    const timeoutMs = this.options.attemptTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(what, (signal) => run({ signal, timeoutMs }));
      } catch (error) {
        if (!isTransient(error) || attempt >= this.options.maxAttempts) throw error;
        await this.pause(what, attempt, error);
      }
    }
  }

  getJob(ref: JobRef): Promise<KubeObject> {
    return this.read(`get ${ref.kind} ${ref.namespace}/${ref.name}`, (o) => this.inner.getJob(ref, o));
  }

  listJobs(kind: JobKind, namespace?: string): Promise<KubeObject[]> {
    return this.read(`list ${kind}`, (o) => this.inner.listJobs(kind, namespace, o));
  }

  listPods(namespace: string | undefined, labelSelector?: string): Promise<V1Pod[]> {
    return this.read('list pods', (o) => this.inner.listPods(namespace, labelSelector, o));
  }

  listNodes(): Promise<V1Node[]> {
    return this.read('list nodes', (o) => this.inner.listNodes(o));
  }

  listWorkloads(namespace: string | undefined, labelSelector: string): Promise<KubeObject[]> {
    return this.read('list workloads', (o) => this.inner.listWorkloads(namespace, labelSelector, o));
  }

  getLocalQueue(namespace: string, name: string): Promise<KubeObject> {
    return this.read('get localqueue', (o) => this.inner.getLocalQueue(namespace, name, o));
  }

  getClusterQueue(name: string): Promise<KubeObject> {
    return this.read('get clusterqueue', (o) => this.inner.getClusterQueue(name, o));
  }

  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.read('get configmap', (o) => this.inner.getConfigMap(namespace, name, o));
  }

  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    const what = `patch ${ref.kind} ${ref.namespace}/${ref.name}`;
    const { decisionId, guardedBy, write } = patchIdentity(patch);
    // Only a guarded patch recording a decision can be verified after an ambiguous failure; a dry run stores
    // nothing to verify, so it is retried only like a read (the guard makes a repeat harmless).
    const verifiable = decisionId !== undefined && guardedBy !== undefined && !options.dryRun;
    let ambiguous = false;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(what, (signal) =>
          this.inner.patchJob(ref, patch, this.attemptOptions(options, signal)),
        );
      } catch (error) {
        const transient = isTransient(error);
        const conflict = error instanceof ConflictError;
        if (!transient && !(conflict && ambiguous)) throw error;
        if (!verifiable) {
          if (options.dryRun && transient && attempt < this.options.maxAttempts) {
            await this.pause(what, attempt, error);
            continue;
          }
          throw error;
        }
        // The request may have reached the API server: find out before deciding anything.
        ambiguous = ambiguous || transient;
        const current = await this.getJob(ref);
        const found = findDecision(current, decisionId, write);
        if (found === 'ours') return current;
        // A duplicate trigger wrote the same decision first: for this caller that is a conflict, so that it
        // re-reads and finds the decision done, instead of auditing a write it did not make.
        if (found === 'duplicate' || current.metadata.resourceVersion !== guardedBy)
          throw new ConflictError(what);
        if (attempt >= this.options.maxAttempts) throw error;
        await this.pause(what, attempt, error);
      }
    }
  }

  evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    return this.inner.evictPod(namespace, name, options);
  }

  servesPodResize(): Promise<boolean> {
    const inner = this.inner;
    if (!inner.servesPodResize) return Promise.resolve(false);
    return this.read('discover pods/resize', (o) => inner.servesPodResize?.(o) ?? Promise.resolve(false));
  }

  /**
   * Retried on transient failures like a read: the patch is pinned to the pod's resourceVersion, so a repeat
   * of a resize that did land answers 409 (and the actuator re-reads the pod), never a second resize.
   */
  async resizePod(
    namespace: string,
    name: string,
    patch: JsonPatchOp[],
    options: WriteOptions,
  ): Promise<V1Pod> {
    const resize = this.inner.resizePod?.bind(this.inner);
    if (!resize) throw new Error('this cluster client cannot resize pods in place');
    const what = `resize pod ${namespace}/${name}`;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(what, (signal) =>
          resize(namespace, name, patch, this.attemptOptions(options, signal)),
        );
      } catch (error) {
        if (!isTransient(error) || attempt >= this.options.maxAttempts) throw error;
        await this.pause(what, attempt, error);
      }
    }
  }

  /**
   * Events are created with generateName, so a repeat after an ambiguous failure would double the audit
   * record. Retried only on 429 and 503, which the API server answers before processing a request
   * (priority-and-fairness rejection, not ready); after a drop or a timeout the Event may be lost, and the
   * job's annotations remain the durable record.
   */
  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    const what = 'create event';
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(what, (signal) =>
          this.inner.createEvent(event, this.attemptOptions(options, signal)),
        );
      } catch (error) {
        const rejectedUnprocessed =
          error instanceof ApiError && (error.status === 429 || error.status === 503);
        // An Event named after its decision cannot be doubled by a retry (the second create is AlreadyExists).
        const safeToRepeat = rejectedUnprocessed || (event.decisionId !== undefined && isTransient(error));
        if (!safeToRepeat || attempt >= this.options.maxAttempts) throw error;
        await this.pause(what, attempt, error);
      }
    }
  }

  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    return this.inner.putConfigMap(namespace, name, data, resourceVersion, options);
  }

  getJobState(ref: JobRef): Promise<JobStateObject | undefined> {
    return this.read('get scaledtrainingjob', (o) => this.inner.getJobState(ref, o));
  }

  listJobStates(): Promise<JobStateObject[]> {
    return this.read('list scaledtrainingjobs', (o) => this.inner.listJobStates(o));
  }

  /** None from a client that serves none. */
  listTrainingAutoscalers(namespace?: string): Promise<KubeObject[]> {
    const list = this.inner.listTrainingAutoscalers?.bind(this.inner);
    if (!list) return Promise.resolve([]);
    return this.read(`list trainingautoscalers${namespace ? ` in ${namespace}` : ''}`, (o) =>
      list(namespace, o),
    );
  }

  /** Not retried: guarded by the resourceVersion read, a repeat of one that landed would only answer 409. */
  putTrainingAutoscalerStatus(
    current: KubeObject,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<KubeObject> {
    const put = this.inner.putTrainingAutoscalerStatus?.bind(this.inner);
    if (!put) throw new Error('this cluster client cannot write TrainingAutoscaler status');
    return put(current, status, options);
  }

  /**
   * Retried on transient failures like a read: every write it makes is guarded (a create fails once the
   * object exists, a status write once its resourceVersion moved), so a repeat of one that did land answers
   * 409, and the store re-reads and finds its decision recorded (lib/cluster/job-state.ts writeJobState).
   */
  async putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const what = `write state of ${job.ref.kind} ${job.ref.namespace}/${job.ref.name}`;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(what, (signal) =>
          this.inner.putJobState(job, status, current, this.attemptOptions(options, signal)),
        );
      } catch (error) {
        if (!isTransient(error) || attempt >= this.options.maxAttempts) throw error;
        await this.pause(what, attempt, error);
      }
    }
  }
}
