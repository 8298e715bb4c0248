// Kueue's rules (lib/kueue/kueue-guard.ts) on both sides of each: a Kueue-managed job is changed only in ways
// Kueue v0.18 does not answer with a suspension, and grown only within its ClusterQueue's free quota. The
// objects are shaped as Kueue writes them (test/fixtures/kueue.ts); the actuator tests drive the real
// read -> decide -> guard -> patch path over an in-memory store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreV1Event, V1ConfigMap, V1Node, V1Pod } from '@kubernetes/client-node';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { hasStrandedPods } from '../../../functions/schedule.js';
import { actOnJob, loadSnapshot } from '../../../lib/actuator.js';
import { kueueFactsOf, readJob } from '../../../lib/adapters/job-adapter.js';
import { readPod } from '../../../lib/adapters/pod-view.js';
import type { ClusterClient, JsonPatchOp, KubeObject } from '../../../lib/cluster/cluster-client.js';
import { kueueJobOf } from '../../../lib/cluster/kueue-state.js';
import { ConflictError, NotFoundError } from '../../../lib/errors.js';
import { applyKueueRules, type KueueJob } from '../../../lib/kueue/kueue-guard.js';
import { readClusterQueue, readWorkload, withOwnReservations } from '../../../lib/kueue/kueue-objects.js';
import type { Change, JobRef, Plan } from '../../../lib/types.js';
import { indexedJob, jobSet, podOfJob, trainJob } from '../../fixtures/batch-jobs.js';
import { pytorchJob, statefulSet } from '../../fixtures/jobs.js';
import { clusterQueue, kueueJob, localQueue, workloadOf } from '../../fixtures/kueue.js';
import { MemoryJobStates } from '../../support/job-states.js';

const GiB = 2 ** 30;

class KueueStore implements ClusterClient {
  readonly jobs = new Map<string, KubeObject>();
  workloads: KubeObject[] = [];
  readonly queues = new Map<string, KubeObject>();
  readonly patches: JsonPatchOp[][] = [];
  readonly reads: string[] = [];
  pods: V1Pod[] = [];

  put(obj: KubeObject): void {
    this.jobs.set(`${obj.kind}/${obj.metadata.name}`, structuredClone(obj));
  }
  async getJob(ref: JobRef): Promise<KubeObject> {
    const obj = this.jobs.get(`${ref.kind}/${ref.name}`);
    if (!obj) throw new NotFoundError(ref.name);
    return structuredClone(obj);
  }
  async listJobs(): Promise<KubeObject[]> {
    return [...this.jobs.values()];
  }
  async patchJob(ref: JobRef, patch: JsonPatchOp[]): Promise<KubeObject> {
    const current = await this.getJob(ref);
    if (patch[0]?.value !== current.metadata.resourceVersion) throw new ConflictError(ref.name);
    this.patches.push(patch);
    const next = fastJsonPatch.applyPatch(current, patch as Operation[], true, false).newDocument;
    next.metadata.resourceVersion = String(Number(current.metadata.resourceVersion) + 1);
    this.put(next);
    return next;
  }
  async listPods(): Promise<V1Pod[]> {
    return this.pods;
  }
  async listNodes(): Promise<V1Node[]> {
    return [];
  }
  async evictPod(): Promise<void> {}
  async createEvent(): Promise<CoreV1Event | undefined> {
    return undefined;
  }
  async listWorkloads(namespace: string, selector: string): Promise<KubeObject[]> {
    this.reads.push(`workloads ${namespace} ${selector}`);
    const [key, value] = selector.split('=');
    return this.workloads.filter((w) => w.metadata.labels?.[key ?? ''] === value);
  }
  async getLocalQueue(namespace: string, name: string): Promise<KubeObject> {
    this.reads.push(`localqueue ${namespace}/${name}`);
    const q = this.queues.get(`LocalQueue/${name}`);
    if (!q) throw new NotFoundError(`LocalQueue ${namespace}/${name}`);
    return q;
  }
  async getClusterQueue(name: string): Promise<KubeObject> {
    this.reads.push(`clusterqueue ${name}`);
    const q = this.queues.get(`ClusterQueue/${name}`);
    if (!q) throw new NotFoundError(`ClusterQueue ${name}`);
    return q;
  }
  async getConfigMap(): Promise<V1ConfigMap | undefined> {
    return undefined;
  }
  readonly states = new MemoryJobStates();
  getJobState(ref: JobRef) {
    return this.states.getJobState(ref);
  }
  listJobStates() {
    return this.states.listJobStates();
  }
  putJobState(...args: Parameters<ClusterClient['putJobState']>) {
    return this.states.putJobState(...args);
  }
  async putConfigMap(): Promise<never> {
    throw new Error('not used');
  }
}

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const deps = (cluster: ClusterClient) => ({
  cluster,
  clock: () => 1_800_000_000,
  dryRun: false,
  logger: quiet,
  namespaceAllowlist: [],
  guardrails: { cooldownSeconds: 0, maxReplicaStep: 8 },
});
const JOB_REF: JobRef = { kind: 'Job', namespace: 'team-a', name: 'ddp' };
const workers = (from: number, to: number): Change => ({ kind: 'replicas', role: 'Worker', from, to });
const decide =
  (...changes: Change[]) =>
  (): Plan => ({ ref: JOB_REF, policy: 'tuning', changes, reason: 'test' });

/** The rules applied to the objects as trainscaler would read them. */
function rule(
  job: KubeObject,
  workloads: KubeObject[],
  cq: KubeObject | undefined,
  ...changes: Change[]
): Plan {
  const view = readJob(job);
  const facts = kueueFactsOf(job);
  const kueue: KueueJob = {
    managedBy: 'label',
    elasticSlices: facts.elasticSlices,
    suspended: facts.suspended,
    podSetOf: facts.podSetOf,
    workloads: workloads.map(readWorkload),
  };
  const plan: Plan = { ref: view.ref, policy: 'tuning', changes, reason: 'test' };
  const quota = cq ? readClusterQueue(cq) : { problem: 'ClusterQueue trainscaler-cq not found' };
  return applyKueueRules({ plan, job: view, kueue, quota }).plan;
}

describe('Kueue objects', () => {
  it('charges a pod what Kueue admitted it with, else what its template asks (limits standing in)', () => {
    const job = indexedJob();
    const admitted = readWorkload(workloadOf(job, { count: 4, admitted: true, gpusPerPod: 2 }));
    assert.deepEqual(admitted.podSets[0]?.perPod, { cpu: 4000, memory: 16 * GiB, 'nvidia.com/gpu': 2 });
    assert.equal(admitted.podSets[0]?.flavors?.['nvidia.com/gpu'], 'default-flavor');
    assert.equal(admitted.quotaReserved, true);
    const pending = readWorkload(workloadOf(job, { count: 4 }));
    assert.deepEqual(pending.podSets[0]?.perPod, { cpu: 4000, memory: 16 * GiB, 'nvidia.com/gpu': 1 });
    assert.equal(pending.quotaReserved, false);
  });

  it('counts at least what the job’s own admitted Workloads hold when the ClusterQueue status trails', () => {
    const job = indexedJob();
    const slice = readWorkload(workloadOf(job, { count: 4, admitted: true }));
    const pending = readWorkload(workloadOf(job, { count: 8, name: 'pending' }));
    // The status still shows the old 2-GPU slice while the new 4-pod slice is admitted.
    const trailing = withOwnReservations(readClusterQueue(clusterQueue(6, 2)), [slice, pending]);
    assert.deepEqual(trailing.resourceGroups[0]?.flavors[0]?.resources['nvidia.com/gpu'], {
      nominal: 6,
      reserved: 4,
    });
    // A status that already counts more (other jobs) is kept; a Workload holding no quota adds nothing.
    const ahead = withOwnReservations(readClusterQueue(clusterQueue(6, 5)), [slice, pending]);
    assert.equal(ahead.resourceGroups[0]?.flavors[0]?.resources['nvidia.com/gpu']?.reserved, 5);
  });

  it('reads a ClusterQueue as nominal quota and reservations per flavor', () => {
    const quota = readClusterQueue(clusterQueue(8, 3));
    assert.deepEqual(quota.resourceGroups[0]?.flavors[0]?.resources['nvidia.com/gpu'], {
      nominal: 8,
      reserved: 3,
    });
    assert.deepEqual(quota.resourceGroups[0]?.flavors[0]?.resources.memory, {
      nominal: 256 * GiB,
      reserved: 48 * GiB,
    });
  });
});

describe('what each kind tells Kueue’s rules', () => {
  it('its suspend flag and the pod set its workers are counted in, as Kueue’s integration names them', () => {
    const pt = pytorchJob();
    assert.deepEqual(kueueFactsOf(pt).podSetOf, { Worker: 'worker' });
    assert.equal(kueueFactsOf(pt).suspended, false);
    (pt.spec as { runPolicy?: { suspend?: boolean } }).runPolicy = { suspend: true };
    assert.equal(kueueFactsOf(pt).suspended, true);
    assert.deepEqual(kueueFactsOf(jobSet()).podSetOf, { Worker: 'workers' });
    assert.deepEqual(kueueFactsOf(trainJob()).podSetOf, { Worker: 'node' });
    assert.equal(kueueFactsOf(statefulSet()).suspended, false);
    // Kueue's stopping annotation: a Job it is still stopping is not suspended yet.
    const stopping = kueueJob(indexedJob(), { suspend: true });
    assert.equal(kueueFactsOf(stopping).suspended, true);
    stopping.metadata.annotations = { ...stopping.metadata.annotations, 'kueue.x-k8s.io/stopping': 'true' };
    assert.equal(kueueFactsOf(stopping).suspended, false);
  });

  it('workload slices only for a batch/v1 Job annotated elastic-job "true"', () => {
    assert.equal(kueueFactsOf(kueueJob(indexedJob(), { elastic: true })).elasticSlices, true);
    assert.equal(kueueFactsOf(kueueJob(indexedJob())).elasticSlices, false);
    const js = jobSet();
    js.metadata.annotations = { ...js.metadata.annotations, 'kueue.x-k8s.io/elastic-job': 'true' };
    assert.equal(kueueFactsOf(js).elasticSlices, false);
  });
});

describe('which jobs Kueue manages', () => {
  it('a queue-name label, or a Workload the job controls; not a Workload that only carries its uid label', async () => {
    const store = new KueueStore();
    const plain = indexedJob();
    const view = readJob(plain);
    assert.equal(await kueueJobOf(store, plain, view), undefined);
    assert.equal(view.kueue, undefined);
    // Labelled: managed before Kueue has even made its Workload.
    const labelled = kueueJob(plain);
    assert.match(readJob(labelled).kueue ?? '', /queue-name=trainscaler-lq/);
    assert.ok(await kueueJobOf(store, labelled, readJob(labelled)));
    // No label (manageJobsWithoutQueueName, a default LocalQueue): its controlled Workload says so.
    store.workloads = [workloadOf(plain, { count: 4, admitted: true })];
    assert.match((await kueueJobOf(store, plain, view))?.managedBy ?? '', /Workload job-ddp/);
    // The uid label copied onto a Workload owned by something else proves nothing.
    store.workloads = [workloadOf(plain, { count: 4, admitted: true, ownerUid: 'someone-else' })];
    assert.equal(await kueueJobOf(store, plain, view), undefined);
    // A finished Workload of an old run: not Kueue's any more.
    store.workloads = [workloadOf(plain, { count: 4, finished: true })];
    assert.equal(await kueueJobOf(store, plain, view), undefined);
  });
});

describe('an elastic Job (workload slices) once admitted', () => {
  const job = kueueJob(indexedJob({ parallelism: 4 }), { elastic: true });
  const admitted = workloadOf(job, { count: 4, admitted: true });

  it('shrinks in place whatever the quota', () => {
    assert.deepEqual(rule(job, [admitted], undefined, workers(4, 2)).changes, [workers(4, 2)]);
  });

  it('grows when the new slice fits in the free quota; not when it does not, and says by how much', () => {
    assert.deepEqual(rule(job, [admitted], clusterQueue(8, 4), workers(4, 8)).changes, [workers(4, 8)]);
    const held = rule(job, [admitted], clusterQueue(8, 5), workers(4, 8));
    assert.deepEqual(held.changes, []);
    assert.match(
      [held.reason, ...(held.details ?? [])].join('; '),
      /Worker 4 -> 8 not attempted: the new workload slice needs 4 more nvidia.com\/gpu in flavor default-flavor, ClusterQueue trainscaler-cq has 3 free/,
    );
  });

  it('does not grow while an earlier scale-up slice still waits, nor with the quota unknown', () => {
    const waiting = workloadOf(job, {
      name: 'job-ddp-slice2',
      count: 6,
      replacementFor: 'team-a/job-ddp-3f1c2',
      created: '2026-11-30T10:05:00Z',
    });
    const held = rule(job, [admitted, waiting], clusterQueue(8, 4), workers(4, 5));
    assert.deepEqual(held.changes, []);
    assert.match(
      [held.reason, ...(held.details ?? [])].join('; '),
      /slice job-ddp-slice2 from an earlier scale-up still waits/,
    );
    assert.match(rule(job, [admitted], undefined, workers(4, 5)).reason, /free quota is unknown/);
  });

  it('holds back a pod template change (only counts may change in a slice) and passes an eviction', () => {
    const memory: Change = {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'limits',
      from: 16 * GiB,
      to: 20 * GiB,
    };
    const evict: Change = { kind: 'evict-pod', pod: 'ddp-1-abcde' };
    const held = rule(job, [admitted], clusterQueue(8, 4), memory, evict);
    assert.deepEqual(held.changes, [evict]);
    assert.match([held.reason, ...(held.details ?? [])].join('; '), /only in count/);
  });
});

describe('a Job Kueue manages without workload slices', () => {
  const running = kueueJob(indexedJob({ parallelism: 4 }));
  const admitted = workloadOf(running, { count: 4, admitted: true });

  it('is not resized while admitted, in either direction; an eviction still passes', () => {
    for (const change of [workers(4, 2), workers(4, 6)]) {
      const held = rule(running, [admitted], clusterQueue(16, 4), change);
      assert.deepEqual(held.changes, []);
      assert.match([held.reason, ...(held.details ?? [])].join('; '), /Kueue would suspend and requeue it/);
    }
    const evict: Change = { kind: 'evict-pod', pod: 'ddp-0-abcde' };
    assert.deepEqual(rule(running, [admitted], clusterQueue(16, 4), evict).changes, [evict]);
  });

  it('is resized while suspended before admission; not while suspended with quota still reserved', () => {
    const suspended = kueueJob(indexedJob({ parallelism: 4 }), { suspend: true });
    const pending = workloadOf(suspended, { count: 4 });
    assert.deepEqual(rule(suspended, [pending], clusterQueue(8, 0), workers(4, 6)).changes, [workers(4, 6)]);
    // Admitted, not yet resumed: Kueue would drop the admission and requeue it (ensureOneWorkload), even for a shrink.
    const reserved = workloadOf(suspended, { count: 4, admitted: true });
    const held = rule(suspended, [reserved], clusterQueue(16, 4), workers(4, 2));
    assert.deepEqual(held.changes, []);
    assert.match([held.reason, ...(held.details ?? [])].join('; '), /suspended but admitted \(holds quota\)/);
  });

  it('before admission grows only to what the free quota admits; shrinks with the quota unknown', () => {
    const suspended = kueueJob(indexedJob({ parallelism: 4 }), { suspend: true });
    const pending = workloadOf(suspended, { count: 4 });
    const held = rule(suspended, [pending], clusterQueue(8, 3), workers(4, 6));
    assert.deepEqual(held.changes, []);
    assert.match(
      [held.reason, ...(held.details ?? [])].join('; '),
      /would need (.*, )?6 nvidia.com\/gpu(, .*)? to be admitted/,
    );
    assert.match(
      [held.reason, ...(held.details ?? [])].join('; '),
      /default-flavor: .*5 nvidia.com\/gpu.* free/,
    );
    assert.deepEqual(rule(suspended, [pending], undefined, workers(4, 2)).changes, [workers(4, 2)]);
    // No Workload yet (just created): the job's own pod requests stand in.
    assert.deepEqual(rule(suspended, [], clusterQueue(8, 2), workers(4, 6)).changes, [workers(4, 6)]);
    assert.deepEqual(rule(suspended, [], clusterQueue(8, 3), workers(4, 6)).changes, []);
  });
});

describe('the actuator applies the rules to what it read', () => {
  function cluster(reservedGpus: number, options: { elastic?: boolean } = { elastic: true }) {
    const store = new KueueStore();
    const job = kueueJob(indexedJob({ parallelism: 4 }), options);
    store.put(job);
    store.workloads = [workloadOf(job, { count: 4, admitted: true })];
    store.queues.set('LocalQueue/trainscaler-lq', localQueue());
    store.queues.set('ClusterQueue/trainscaler-cq', clusterQueue(8, reservedGpus));
    return store;
  }

  it('writes a scale-up of an elastic Job that fits; writes nothing for one that does not', async () => {
    const fits = cluster(4);
    const applied = await actOnJob(JOB_REF, decide(workers(4, 6)), deps(fits));
    assert.equal(applied.applied, true);
    assert.deepEqual(
      fits.patches[0]?.filter((op) => op.path.startsWith('/spec')),
      [
        { op: 'replace', path: '/spec/parallelism', value: 6 },
        { op: 'replace', path: '/spec/completions', value: 6 },
      ],
    );
    assert.ok(fits.reads.includes('clusterqueue trainscaler-cq'));
    const full = cluster(7);
    const held = await actOnJob(JOB_REF, decide(workers(4, 6)), deps(full));
    assert.equal(held.applied, false);
    assert.equal(held.skipped, 'kueue');
    assert.match(
      [held.plan.reason, ...(held.plan.details ?? [])].join('; '),
      /needs 2 more nvidia.com\/gpu .* has 1 free/,
    );
    assert.equal(full.patches.length, 0);
  });

  it('writes nothing to a running non-elastic Kueue job; the same job outside Kueue is resized', async () => {
    const kueued = cluster(0, {});
    const held = await actOnJob(JOB_REF, decide(workers(4, 2)), deps(kueued));
    assert.equal(held.skipped, 'kueue');
    assert.equal(kueued.patches.length, 0);
    const plain = new KueueStore();
    plain.put(indexedJob({ parallelism: 4 }));
    assert.equal((await actOnJob(JOB_REF, decide(workers(4, 2)), deps(plain))).applied, true);
  });

  it('marks the snapshot Kueue-managed, and a gated scale-up pod as neither lost nor stranded', async () => {
    const store = cluster(4);
    const job = await store.getJob(JOB_REF);
    const placed = podOfJob(job, 0);
    const gated = podOfJob(job, 5);
    gated.spec = {
      ...gated.spec,
      containers: gated.spec?.containers ?? [],
      schedulingGates: [{ name: 'kueue.x-k8s.io/elastic-job' }],
    };
    delete gated.spec.nodeName;
    gated.status = { phase: 'Pending' };
    store.pods = [placed, gated];
    const snapshot = await loadSnapshot(store, JOB_REF);
    assert.match(snapshot.view.kueue ?? '', /queue-name/);
    assert.equal(readPod(gated).schedulingGated, true);
    assert.equal(hasStrandedPods(snapshot), false);
    store.pods = [placed, { ...gated, spec: { ...gated.spec, schedulingGates: [] } }];
    assert.equal(hasStrandedPods(await loadSnapshot(store, JOB_REF)), true);
  });
});
