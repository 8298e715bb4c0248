// Shared pieces of the reliability tests: the "one decision" every duplicate trigger makes, a counting
// ClusterClient, a seeded fault-injecting ClusterClient for the SimulatedCluster, and bounded trigger retries.
import assert from 'node:assert/strict';
import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, type JobSnapshot, type Outcome } from '../../../lib/actuator.js';
import type {
  AuditEventInput,
  ClusterClient,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../../../lib/cluster/cluster-client.js';
import { ApiError, ConflictError, TrainscalerError } from '../../../lib/errors.js';
import { mulberry32 } from '../../../lib/sim/prng.js';
import type { JobKind, JobRef, Plan } from '../../../lib/types.js';

/** The decision of the tests: one more worker than observed, by the tuning policy (so the cool-down applies). */
export function addOneWorker(snapshot: JobSnapshot): Plan {
  const worker = snapshot.view.roles.find((r) => r.role === 'Worker');
  const from = worker?.replicas ?? 0;
  return {
    ref: snapshot.view.ref,
    policy: 'tuning',
    reason: `reliability test: ${from} -> ${from + 1} workers`,
    changes: [{ kind: 'replicas', role: 'Worker', from, to: from + 1 }],
  };
}

/** Every trigger but the one applied lost the race on the pinned resourceVersion and then met the cool-down. */
export function assertStoppedByPinThenCooldown(outcomes: readonly Outcome[]): void {
  const losers = outcomes.filter((o) => !o.applied);
  assert.ok(losers.length > 0, 'some triggers lost');
  for (const o of losers) {
    assert.equal(o.skipped, 'no-change');
    assert.match(o.plan.reason, /cool-down/);
  }
  // A loser that never conflicted read after the winner's write: it met the cool-down without re-reading.
  assert.ok(
    losers.some((o) => (o.conflicts ?? 0) > 0),
    'the resourceVersion pin turned racing patches into conflicts',
  );
}

/** Passes everything through and counts the job patches the API server accepted. */
export class CountingClusterClient implements ClusterClient {
  patchesApplied = 0;
  eventsCreated = 0;
  constructor(private readonly inner: ClusterClient) {}
  getJob(ref: JobRef) {
    return this.inner.getJob(ref);
  }
  listJobs(kind: JobKind, namespace?: string) {
    return this.inner.listJobs(kind, namespace);
  }
  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions) {
    const out = await this.inner.patchJob(ref, patch, options);
    this.patchesApplied++;
    return out;
  }
  listPods(namespace: string | undefined, labelSelector?: string): Promise<V1Pod[]> {
    return this.inner.listPods(namespace, labelSelector);
  }
  listNodes(): Promise<V1Node[]> {
    return this.inner.listNodes();
  }
  evictPod(namespace: string, name: string, options: WriteOptions) {
    return this.inner.evictPod(namespace, name, options);
  }
  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    const out = await this.inner.createEvent(event, options);
    this.eventsCreated++;
    return out;
  }
  getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    return this.inner.getConfigMap(namespace, name);
  }
  listWorkloads(namespace: string, labelSelector: string) {
    return this.inner.listWorkloads(namespace, labelSelector);
  }
  getLocalQueue(namespace: string, name: string) {
    return this.inner.getLocalQueue(namespace, name);
  }
  getClusterQueue(name: string) {
    return this.inner.getClusterQueue(name);
  }
  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ) {
    return this.inner.putConfigMap(namespace, name, data, resourceVersion, options);
  }
  getJobState(ref: JobRef) {
    return this.inner.getJobState(ref);
  }
  listJobStates() {
    return this.inner.listJobStates();
  }
  putJobState(...args: Parameters<ClusterClient['putJobState']>) {
    return this.inner.putJobState(...args);
  }
}

export type FaultKind = 'conflict' | 'unavailable' | 'lost-response' | 'drop-before' | 'timeout';
export const FAULT_KINDS: readonly FaultKind[] = [
  'conflict',
  'unavailable',
  'lost-response',
  'drop-before',
  'timeout',
];

/**
 * The SimulatedCluster's counterpart of the fault proxy: each call fails with probability `rate` (seeded),
 * before reaching the cluster (409 on writes, 503, a dropped connection), after it (the write applied but the
 * response lost: 500), or by answering too late (applied after `hangMs`, like a request stuck in a proxy).
 */
export class FaultyClusterClient implements ClusterClient {
  readonly injected = new Map<FaultKind, number>();
  calls = 0;
  private readonly random: () => number;
  constructor(
    private readonly inner: ClusterClient,
    options: { seed: number; rate: number; hangMs: number },
  ) {
    this.random = mulberry32(options.seed);
    this.rate = options.rate;
    this.hangMs = options.hangMs;
  }
  private readonly rate: number;
  private readonly hangMs: number;

  private pick(write: boolean): FaultKind | undefined {
    this.calls++;
    if (this.random() >= this.rate) return undefined;
    const kinds = write ? FAULT_KINDS : FAULT_KINDS.filter((k) => k !== 'conflict');
    const kind = kinds[Math.floor(this.random() * kinds.length)] ?? 'unavailable';
    this.injected.set(kind, (this.injected.get(kind) ?? 0) + 1);
    return kind;
  }

  private async faulty<T>(what: string, write: boolean, run: () => Promise<T>): Promise<T> {
    const fault = this.pick(write);
    if (fault === 'conflict') throw new ConflictError(what);
    if (fault === 'unavailable') throw new ApiError(what, 503, 'injected: service unavailable');
    if (fault === 'drop-before') throw new ApiError(what, undefined, 'injected: socket hang up');
    if (fault === 'lost-response') {
      await run();
      throw new ApiError(what, 500, 'injected: response lost after the write');
    }
    if (fault === 'timeout') {
      await new Promise((resolve) => setTimeout(resolve, this.hangMs));
      return run();
    }
    return run();
  }

  getJob(ref: JobRef) {
    return this.faulty('get job', false, () => this.inner.getJob(ref));
  }
  listJobs(kind: JobKind, namespace?: string) {
    return this.faulty('list jobs', false, () => this.inner.listJobs(kind, namespace));
  }
  patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    return this.faulty('patch job', true, () => this.inner.patchJob(ref, patch, options));
  }
  listPods(namespace: string | undefined, labelSelector?: string) {
    return this.faulty('list pods', false, () => this.inner.listPods(namespace, labelSelector));
  }
  listNodes() {
    return this.faulty('list nodes', false, () => this.inner.listNodes());
  }
  evictPod(namespace: string, name: string, options: WriteOptions) {
    return this.inner.evictPod(namespace, name, options);
  }
  createEvent(event: AuditEventInput, options: WriteOptions) {
    return this.inner.createEvent(event, options);
  }
  getConfigMap(namespace: string, name: string) {
    return this.inner.getConfigMap(namespace, name);
  }
  listWorkloads(namespace: string, labelSelector: string) {
    return this.inner.listWorkloads(namespace, labelSelector);
  }
  getLocalQueue(namespace: string, name: string) {
    return this.inner.getLocalQueue(namespace, name);
  }
  getClusterQueue(name: string) {
    return this.inner.getClusterQueue(name);
  }
  putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ) {
    return this.inner.putConfigMap(namespace, name, data, resourceVersion, options);
  }
  getJobState(ref: JobRef) {
    return this.faulty('get job state', false, () => this.inner.getJobState(ref));
  }
  listJobStates() {
    return this.faulty('list job states', false, () => this.inner.listJobStates());
  }
  putJobState(...args: Parameters<ClusterClient['putJobState']>) {
    return this.faulty('put job state', true, () => this.inner.putJobState(...args));
  }
}

/**
 * A trigger delivered until it is handled, as the runner's work queue requeues a failed item: typed errors
 * (API failures that outlived the client's retries, conflicts that outlived the actuator's) are retried, at
 * most `attempts` times; anything else is a bug and propagates.
 */
export async function deliverUntilHandled(
  ref: JobRef,
  deps: ActuatorDeps,
  attempts = 10,
): Promise<{ outcome: Outcome; requeues: number }> {
  for (let requeues = 0; ; requeues++) {
    try {
      return { outcome: await actOnJob(ref, addOneWorker, deps), requeues };
    } catch (error) {
      if (!(error instanceof TrainscalerError) || requeues + 1 >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 + 20 * requeues));
    }
  }
}

export interface ChangeTally {
  intended: number;
  applied: number;
  lost: number;
  doubled: number;
}

/** Compares each job's final worker count and decision history with the one +1 intended for it. */
export function tally(jobs: { initial: number; final: number; decisions: number }[]): ChangeTally {
  const t: ChangeTally = { intended: jobs.length, applied: 0, lost: 0, doubled: 0 };
  for (const j of jobs) {
    const delta = j.final - j.initial;
    if (delta === 1 && j.decisions === 1) t.applied++;
    else if (delta < 1) t.lost++;
    else t.doubled++;
  }
  return t;
}
