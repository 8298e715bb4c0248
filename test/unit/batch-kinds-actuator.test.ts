// The actuator on the new kinds, against an in-memory object store (a test double of the API server's
// storage: objects by kind and name, JSON Patch with the resourceVersion pin): the pods a JobSet or TrainJob
// owns are found through its child Jobs read back to it (labels are no proof), a resize of an indexed Job or
// a JobSet is one guarded patch plus its Event, and a change the kind's API forbids is refused before any
// write.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { type ActuatorDeps, actOnJob, loadSnapshot } from '../../lib/actuator.js';
import type {
  AuditEventInput,
  ClusterClient,
  JsonPatchOp,
  KubeObject,
} from '../../lib/cluster/cluster-client.js';
import { childJobsOf } from '../../lib/cluster/owner-chain.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { ConflictError, NotFoundError, UnsupportedChangeError } from '../../lib/errors.js';
import { placedReplicasOf } from '../../lib/guardrails.js';
import { decideOnFault } from '../../lib/policies/faults.js';
import type { Change, JobRef, Plan } from '../../lib/types.js';
import { childJob, indexedJob, jobSet, podOfJob, trainJob, trainJobSet } from '../fixtures/batch-jobs.js';
import { MemoryJobStates } from '../support/job-states.js';

class ObjectStore implements ClusterClient {
  readonly objects = new Map<string, KubeObject>();
  readonly pods: V1Pod[] = [];
  readonly patches: { ref: JobRef; patch: JsonPatchOp[] }[] = [];
  readonly events: AuditEventInput[] = [];
  readonly gets: string[] = [];

  put(obj: KubeObject): void {
    this.objects.set(`${obj.kind}/${obj.metadata.namespace}/${obj.metadata.name}`, structuredClone(obj));
  }
  async getJob(ref: JobRef): Promise<KubeObject> {
    this.gets.push(`${ref.kind}/${ref.name}`);
    const obj = this.objects.get(`${ref.kind}/${ref.namespace}/${ref.name}`);
    if (!obj) throw new NotFoundError(`${ref.kind} ${ref.name}`);
    return structuredClone(obj);
  }
  async listJobs(): Promise<KubeObject[]> {
    return [];
  }
  async patchJob(ref: JobRef, patch: JsonPatchOp[]): Promise<KubeObject> {
    const current = await this.getJob(ref);
    const pin = patch[0];
    if (pin?.path === '/metadata/resourceVersion' && pin.value !== current.metadata.resourceVersion)
      throw new ConflictError(ref.name);
    this.patches.push({ ref, patch });
    const next = fastJsonPatch.applyPatch(current, patch as Operation[], true, false).newDocument;
    next.metadata.resourceVersion = String(Number(current.metadata.resourceVersion) + 1);
    this.put(next);
    return next;
  }
  async listPods(namespace: string | undefined, labelSelector?: string): Promise<V1Pod[]> {
    const wanted = (labelSelector ?? '').split(',').filter(Boolean);
    return this.pods.filter(
      (p) =>
        (!namespace || p.metadata?.namespace === namespace) &&
        wanted.every((kv) => {
          const [k = '', v] = kv.split('=');
          return p.metadata?.labels?.[k] === v;
        }),
    );
  }
  async listNodes() {
    return [];
  }
  async evictPod(): Promise<void> {}
  async createEvent(event: AuditEventInput) {
    this.events.push(event);
    return undefined;
  }
  async getConfigMap() {
    return undefined;
  }
  async listWorkloads(): Promise<KubeObject[]> {
    return [];
  }
  async getLocalQueue(): Promise<never> {
    throw new Error('not used');
  }
  async getClusterQueue(): Promise<never> {
    throw new Error('not used');
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

function deps(cluster: ClusterClient): ActuatorDeps {
  return {
    cluster,
    clock: () => 1_800_000_000,
    dryRun: false,
    logger: quiet,
    namespaceAllowlist: [],
    guardrails: { cooldownSeconds: 0, maxReplicaStep: 8 },
  };
}

const plan =
  (changes: Change[]) =>
  ({ view }: { view: { ref: JobRef } }): Plan => ({
    ref: view.ref,
    policy: 'tuning',
    changes,
    reason: 'test',
  });

function ref(obj: KubeObject): JobRef {
  return { kind: obj.kind as JobRef['kind'], namespace: 'team-a', name: obj.metadata.name };
}

describe('pods of a JobSet or TrainJob: through child Jobs read back to the job', () => {
  it('keeps pods of Jobs the JobSet controls; drops a labelled impostor and pods of another JobSet’s Job', async () => {
    const store = new ObjectStore();
    const js = jobSet();
    store.put(js);
    const own = childJob(js, 'workers', 0, 'child-0');
    store.put(own);
    store.pods.push(podOfJob(own, 0), podOfJob(own, 1));
    // Same labels, but its Job is controlled by a JobSet of the same name with another uid (an older run).
    const stale = childJob(
      { ...js, metadata: { ...js.metadata, uid: 'old-run' } },
      'workers',
      1,
      'child-old',
    );
    store.put(stale);
    store.pods.push(podOfJob(stale, 0));
    // Labels copied by hand, owned by a Job nobody created.
    const ghost = childJob(js, 'workers', 2, 'ghost');
    store.pods.push(podOfJob(ghost, 0));
    const snapshot = await loadSnapshot(store, ref(js));
    assert.deepEqual(
      snapshot.rawPods.map((p) => p.metadata?.name),
      ['llm-workers-0-0-x7k2p', 'llm-workers-0-1-x7k2p'],
    );
    assert.deepEqual(
      snapshot.pods.map((p) => p.index),
      [0, 1],
    );
  });

  it('a TrainJob’s pods count only when its JobSet is controlled by it', async () => {
    const store = new ObjectStore();
    const tj = trainJob();
    store.put(tj);
    const js = trainJobSet(tj);
    const own = childJob(js, 'node', 0, 'node-0');
    store.put(own);
    store.pods.push(podOfJob(own, 0), podOfJob(own, 1), podOfJob(own, 2));
    assert.equal((await loadSnapshot(store, ref(tj))).rawPods.length, 0, 'no JobSet: no pods');
    store.put({ ...js, metadata: { ...js.metadata, ownerReferences: [] } });
    assert.equal((await loadSnapshot(store, ref(tj))).rawPods.length, 0, 'a JobSet it does not control');
    store.put(js);
    assert.equal((await loadSnapshot(store, ref(tj))).rawPods.length, 3);
  });

  it('reads each child Job once, and nothing for kinds that own their pods', async () => {
    const store = new ObjectStore();
    const js = jobSet();
    const own = childJob(js, 'workers', 0, 'child-0');
    store.put(own);
    const pods = [podOfJob(own, 0), podOfJob(own, 1)];
    assert.deepEqual(
      [...(await childJobsOf({ ref: ref(js), uid: 'jobset-uid-1' }, pods, (r) => store.getJob(r)))],
      ['child-0'],
    );
    assert.deepEqual(store.gets, ['Job/llm-workers-0']);
    store.gets.length = 0;
    const job = indexedJob();
    await childJobsOf({ ref: ref(job), uid: 'job-uid-1' }, [podOfJob(job, 0)], (r) => store.getJob(r));
    assert.deepEqual(store.gets, []);
  });
});

describe('which JobSet pods a shrink would restart (the guardrails’ placed replicas)', () => {
  it('counts per child Job: a shrink keeps every placed pod only above groups x (highest placed index + 1)', async () => {
    const store = new ObjectStore();
    const js = jobSet({ replicas: 2, parallelism: 3 });
    store.put(js);
    for (const [i, uid] of ['c0', 'c1'].entries()) {
      const child = childJob(js, 'workers', i, uid);
      store.put(child);
      store.pods.push(podOfJob(child, 0), podOfJob(child, 1));
    }
    const unplaced = podOfJob(childJob(js, 'workers', 1, 'c1'), 2);
    delete unplaced.spec?.nodeName;
    store.pods.push(unplaced);
    let snapshot = await loadSnapshot(store, ref(js));
    // Placed: completion indices 0 and 1 in both child Jobs -> 2 per Job, 4 in all: 6 -> 4 restarts nothing.
    assert.deepEqual(placedReplicasOf(snapshot.pods), { Worker: 4 });
    const placed = podOfJob(childJob(js, 'workers', 0, 'c0'), 2);
    store.pods.push(placed);
    snapshot = await loadSnapshot(store, ref(js));
    // Index 2 placed in child Job 0: only 3 per Job (6) keeps it.
    assert.deepEqual(placedReplicasOf(snapshot.pods), { Worker: 6 });
  });

  it('one child Job: the completion index', async () => {
    const store = new ObjectStore();
    const js = jobSet({ parallelism: 3 });
    store.put(js);
    const child = childJob(js, 'workers', 0, 'c0');
    store.put(child);
    store.pods.push(podOfJob(child, 0), podOfJob(child, 2));
    const snapshot = await loadSnapshot(store, ref(js));
    assert.deepEqual(
      snapshot.pods.map((p) => p.index),
      [0, 2],
    );
  });
});

describe('actOnJob on the new kinds', () => {
  it('resizes an indexed Job: one patch of parallelism and completions, pinned, and its Event', async () => {
    const store = new ObjectStore();
    const job = indexedJob();
    store.put(job);
    store.pods.push(podOfJob(job, 0), podOfJob(job, 1), podOfJob(job, 2), podOfJob(job, 3));
    const outcome = await actOnJob(
      ref(job),
      plan([{ kind: 'replicas', role: 'Worker', from: 4, to: 6 }]),
      deps(store),
    );
    assert.equal(outcome.applied, true);
    assert.equal(store.patches.length, 1);
    const live = await store.getJob(ref(job));
    assert.deepEqual(
      [
        (live.spec as { parallelism: number }).parallelism,
        (live.spec as { completions: number }).completions,
      ],
      [6, 6],
    );
    assert.match(live.metadata.annotations?.['trainscaler.io/last-decision'] ?? '', /"to":6/);
    assert.deepEqual(
      store.events.map((e) => [e.involved.ref.kind, e.involved.apiVersion, e.reason]),
      [['Job', 'batch/v1', 'TrainscalerTuning']],
    );
  });

  it('resizes a JobSet’s replicated job', async () => {
    const store = new ObjectStore();
    const js = jobSet({ parallelism: 2 });
    store.put(js);
    const outcome = await actOnJob(
      ref(js),
      plan([{ kind: 'replicas', role: 'Worker', from: 2, to: 4 }]),
      deps(store),
    );
    assert.equal(outcome.applied, true);
    const live = (await store.getJob(ref(js))).spec as { replicatedJobs: { template: { spec: object } }[] };
    assert.deepEqual(live.replicatedJobs[1]?.template.spec, {
      ...(js.spec as typeof live).replicatedJobs[1]?.template.spec,
      parallelism: 4,
      completions: 4,
    });
  });

  it('a change the API forbids: a clear error, nothing written, no Event', async () => {
    const store = new ObjectStore();
    const job = indexedJob({ completionMode: 'NonIndexed' });
    store.put(job);
    const tj = trainJob();
    store.put(tj);
    await assert.rejects(
      actOnJob(ref(job), plan([{ kind: 'replicas', role: 'Worker', from: 4, to: 6 }]), deps(store)),
      (e: unknown) => e instanceof UnsupportedChangeError && /only Indexed/.test(e.message),
    );
    await assert.rejects(
      actOnJob(ref(tj), plan([{ kind: 'pause', reason: 'crash loop' }]), deps(store)),
      (e: unknown) => e instanceof UnsupportedChangeError && /TrainJob cannot change/.test(e.message),
    );
    assert.equal(store.patches.length, 0);
    assert.equal(store.events.length, 0);
    assert.deepEqual((await store.getJob(ref(job))).metadata.annotations, job.metadata.annotations);
  });
});

describe('a policy meeting what the kind forbids: a reason, not an error', () => {
  it('an OOM kill in a running indexed Job: no memory raise attempted, nothing written, the refusal as reason', async () => {
    const store = new ObjectStore();
    const job = indexedJob();
    store.put(job);
    const killed = podOfJob(job, 1);
    killed.status = {
      phase: 'Running',
      containerStatuses: [
        {
          name: 'trainer',
          image: 'i',
          imageID: '',
          ready: true,
          restartCount: 1,
          lastState: { terminated: { reason: 'OOMKilled', exitCode: 137 } },
        },
      ],
    };
    killed.spec = {
      ...killed.spec,
      containers: [{ name: 'trainer', resources: { limits: { memory: '16Gi' } } }],
    };
    store.pods.push(podOfJob(job, 0), killed);
    const outcome = await actOnJob(
      ref(job),
      ({ view, pods }) =>
        decideOnFault({
          job: view,
          pods,
          capacity: { nodes: [] },
          config: DEFAULT_POLICY_CONFIG,
          now: 1_800_000_000,
        }),
      deps(store),
    );
    assert.equal(outcome.applied, false);
    assert.equal(outcome.skipped, 'no-change');
    assert.deepEqual(outcome.plan.changes, []);
    assert.match(
      [outcome.plan.reason, ...(outcome.plan.details ?? [])].join('; '),
      /ddp-1-x7k2p OOMKilled .* memory not raised: Job cannot change \/spec: a running Job's pod template is immutable/,
    );
    assert.equal(store.patches.length, 0);
    assert.equal(store.events.length, 0);
  });
});
