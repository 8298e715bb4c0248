// The tick's read view (lib/cluster/listed-cluster-reads.ts): each kind listed once, on first use; label
// selectors answered from the index (and any it cannot parse by the API server); kinds not served are empty,
// once; writes pass through and what they return is kept; a conflict makes the object's next read live; the
// actuator reads a job live right before writing it, and everything live after a conflict.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { actOnJob } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { ClusterClient, JobStateObject, KubeObject } from '../../../lib/cluster/cluster-client.js';
import {
  type ClusterReadSource,
  ListedClusterReads,
  listingSource,
  readView,
} from '../../../lib/cluster/listed-cluster-reads.js';
import { ConflictError, NotFoundError } from '../../../lib/errors.js';
import type { JobRef } from '../../../lib/types.js';
import { harness, TOY, toyJob } from '../functions/handler-harness.js';

/** Every call the client receives, as `method arg,arg`, recorded before it is answered. */
function recording(target: ClusterClient): { client: ClusterClient; calls: string[] } {
  const calls: string[] = [];
  const client = new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const shown = args.map((a) =>
          a === undefined ? '*' : typeof a === 'object' && a && 'name' in a ? String(a.name) : String(a),
        );
        calls.push(`${String(property)} ${shown.join(',')}`.trim());
        return (value as (...a: unknown[]) => unknown).apply(object, args);
      };
    },
  });
  return { client, calls };
}

const pod = (namespace: string, name: string, labels: Record<string, string>): V1Pod => ({
  metadata: { namespace, name, labels },
});

function source(overrides: Partial<ClusterReadSource> = {}) {
  const listed: string[] = [];
  const pods = [
    pod('a', 'p1', { 'training.kubeflow.org/job-name': 'x', role: 'worker' }),
    pod('a', 'p2', { 'training.kubeflow.org/job-name': 'x', role: 'master' }),
    pod('a', 'p3', { 'training.kubeflow.org/job-name': 'y' }),
    pod('b', 'p4', { 'training.kubeflow.org/job-name': 'x' }),
  ];
  const all: ClusterReadSource = {
    jobs: async (kind) => {
      listed.push(`jobs ${kind}`);
      if (kind === 'JobSet') throw new NotFoundError('jobsets');
      return [
        {
          apiVersion: 'kubeflow.org/v1',
          kind,
          metadata: { namespace: 'a', name: 'x', resourceVersion: '1' },
        },
      ];
    },
    pods: async () => {
      listed.push('pods');
      return pods;
    },
    nodes: async () => {
      listed.push('nodes');
      return [{ metadata: { name: 'n1' } } as V1Node];
    },
    workloads: async () => {
      listed.push('workloads');
      throw new NotFoundError('workloads');
    },
    jobStates: async () => {
      listed.push('jobStates');
      return [];
    },
    ...overrides,
  };
  return { source: all, listed };
}

const names = (items: readonly { metadata?: { name?: string } }[]) => items.map((i) => i.metadata?.name);

/** A client that must not be asked: the view answers from its lists. */
const unreachable = new Proxy({} as ClusterClient, {
  get: (_object, property) => () => {
    throw new Error(`the API server was asked: ${String(property)}`);
  },
});

describe('ListedClusterReads answers reads from one list per kind', () => {
  it('lists nothing until asked, then each kind once, shared by concurrent and later reads', async () => {
    const { source: s, listed } = source();
    const view = new ListedClusterReads(unreachable, s);
    assert.deepEqual(listed, []);
    await Promise.all([view.listPods('a', 'role=worker'), view.listPods(undefined), view.listNodes()]);
    await view.listPods('b');
    await view.listNodes();
    assert.deepEqual(listed.sort(), ['nodes', 'pods']);
  });

  it('matches the label selectors the handlers use, per namespace or cluster-wide', async () => {
    const view = new ListedClusterReads(unreachable, source().source);
    const job = 'training.kubeflow.org/job-name';
    assert.deepEqual(names(await view.listPods('a', `${job}=x`)), ['p1', 'p2']);
    assert.deepEqual(names(await view.listPods(undefined, `${job}=x`)), ['p1', 'p2', 'p4']);
    assert.deepEqual(names(await view.listPods('a', `${job}==x,role=master`)), ['p2']);
    assert.deepEqual(names(await view.listPods('a', `${job}=x,role!=master`)), ['p1']);
    assert.deepEqual(names(await view.listPods('a', 'role')), ['p1', 'p2']);
    assert.deepEqual(names(await view.listPods('a', '!role')), ['p3']);
    assert.deepEqual(names(await view.listPods('a', `${job}=z`)), []);
    assert.deepEqual(names(await view.listPods('a')), ['p1', 'p2', 'p3']);
    assert.deepEqual(names(await view.listPods('c', `${job}=x`)), []);
    assert.deepEqual(names(await view.listPods('b', `${job}=x`)), ['p4']);
    assert.deepEqual(names(await view.listPods('b', `${job}=x,role=worker`)), []);
  });

  it('passes a selector it does not understand to the API server instead of misreading it', async () => {
    const { client, calls } = recording({
      listPods: async () => [pod('a', 'from-server', {})],
      listWorkloads: async () => [],
    } as unknown as ClusterClient);
    const { source: s, listed } = source();
    const view = new ListedClusterReads(client, s);
    assert.deepEqual(names(await view.listPods('a', 'role in (worker,master)')), ['from-server']);
    await view.listWorkloads('a', 'x notin (y)');
    assert.deepEqual(calls, ['listPods a,role in (worker,master),*', 'listWorkloads a,x notin (y),*']);
    assert.deepEqual(listed, []);
  });

  it('a kind whose CRD is absent (404) is an empty list, asked once', async () => {
    const { source: s, listed } = source();
    const view = new ListedClusterReads(unreachable, s);
    assert.deepEqual(await view.listJobs('JobSet'), []);
    await assert.rejects(view.getJob({ kind: 'JobSet', namespace: 'a', name: 'x' }), NotFoundError);
    assert.deepEqual(await view.listWorkloads('a', 'kueue.x-k8s.io/job-uid=u'), []);
    assert.deepEqual(await view.listWorkloads('b', 'kueue.x-k8s.io/job-uid=v'), []);
    assert.deepEqual(listed, ['jobs JobSet', 'workloads']);
  });

  it('a list that failed otherwise is asked again by the next read, not kept as an answer', async () => {
    let fail = true;
    const { source: s } = source({
      nodes: async () => {
        if (fail) throw new Error('connection reset');
        return [{ metadata: { name: 'n2' } }];
      },
    });
    const view = new ListedClusterReads(unreachable, s);
    await assert.rejects(view.listNodes(), /connection reset/);
    fail = false;
    assert.deepEqual(names(await view.listNodes()), ['n2']);
  });

  it('reads a job, and its state, from the lists; a job not listed is not found', async () => {
    const state: JobStateObject = {
      namespace: 'a',
      name: 'pytorchjob-x',
      resourceVersion: '5',
      target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'x' },
      status: {},
    };
    const view = new ListedClusterReads(unreachable, source({ jobStates: async () => [state] }).source);
    const ref: JobRef = { kind: 'PyTorchJob', namespace: 'a', name: 'x' };
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '1');
    assert.equal(await view.getJobState(ref), state);
    assert.equal(await view.getJobState({ ...ref, name: 'y' }), undefined);
    await assert.rejects(view.getJob({ ...ref, name: 'y' }), NotFoundError);
    assert.deepEqual(names(await view.listJobs('PyTorchJob', 'b')), []);
  });
});

describe('ListedClusterReads around writes', () => {
  const ref: JobRef = { kind: 'PyTorchJob', namespace: 'a', name: 'x' };
  const job = (resourceVersion: string): KubeObject => ({
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { namespace: 'a', name: 'x', resourceVersion },
  });

  it('before a write the job is read from the API server, and that read serves the rest of the tick', async () => {
    const { client, calls } = recording({ getJob: async () => job('7') } as unknown as ClusterClient);
    const view = new ListedClusterReads(client, source().source);
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '1');
    assert.deepEqual(calls, []);
    assert.equal((await view.withLiveJobs().getJob(ref)).metadata.resourceVersion, '7');
    assert.deepEqual(calls, ['getJob x,*']);
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '7');
    assert.equal((await view.listJobs('PyTorchJob'))[0]?.metadata.resourceVersion, '7');
  });

  it('keeps what a patch returns, but not what a dry run would have written', async () => {
    let version = 8;
    const live = { patchJob: async () => job(String(version++)) } as unknown as ClusterClient;
    const view = new ListedClusterReads(live, source().source);
    await view.listJobs('PyTorchJob');
    await view.patchJob(ref, [], { dryRun: true });
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '1');
    await view.patchJob(ref, [], { dryRun: false });
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '9');
  });

  it('after a conflict on a job or its state, their next read goes to the API server', async () => {
    const written: JobStateObject = {
      namespace: 'a',
      name: 'pytorchjob-x',
      resourceVersion: '12',
      target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'x' },
      status: { lastDecisionId: 'other' },
    };
    const { client, calls } = recording({
      patchJob: async () => {
        throw new ConflictError('patch');
      },
      putJobState: async () => {
        throw new ConflictError('state');
      },
      getJob: async () => job('11'),
      getJobState: async () => written,
    } as unknown as ClusterClient);
    const view = new ListedClusterReads(client, source().source);
    const identity = { ref, uid: 'u', apiVersion: 'kubeflow.org/v1' };
    await assert.rejects(view.patchJob(ref, [], { dryRun: false }), ConflictError);
    await assert.rejects(view.putJobState(identity, {}, undefined, { dryRun: false }), ConflictError);
    assert.equal((await view.getJob(ref)).metadata.resourceVersion, '11');
    assert.equal(await view.getJobState(ref), written);
    // Read once live; from then on the fresh copy is the view's.
    await view.getJob(ref);
    await view.getJobState(ref);
    assert.deepEqual(
      calls.filter((c) => c.startsWith('get')),
      ['getJob x,*', 'getJobState x,*'],
    );
  });

  it('offers in-place resizes only where the client does', () => {
    const bare = new ListedClusterReads({} as ClusterClient, source().source);
    assert.equal(bare.resizePod, undefined);
    assert.equal(bare.servesPodResize, undefined);
    const full = new ListedClusterReads(
      { resizePod: async () => ({}), servesPodResize: async () => true } as unknown as ClusterClient,
      source().source,
    );
    assert.equal(typeof full.resizePod, 'function');
  });
});

/** A managed toy job of 2 workers that has run 2 minutes, its calls recorded, and actuator deps for it. */
function actuatorWorld<T extends object>(extra: T) {
  const { sim } = harness();
  const manifest = toyJob({ workers: 2, minReplicas: 1, maxReplicas: 8 });
  manifest.metadata.annotations = { ...manifest.metadata.annotations, [ANNOTATION.managed]: 'true' };
  sim.submitJob(manifest);
  sim.step(120);
  const { client, calls } = recording(sim);
  const deps = {
    clock: sim.clock.now,
    dryRun: false,
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    namespaceAllowlist: [],
    ...extra,
  };
  return { sim, client, calls, deps };
}

describe('the actuator through a tick view', () => {
  const world = () => actuatorWorld({});
  const toThree = () => ({
    ref: TOY,
    policy: 'tuning' as const,
    reason: 'test',
    changes: [{ kind: 'replicas' as const, role: 'Worker' as const, from: 2, to: 3 }],
  });

  it('reads the job from the API server right before patching it, its pods from the tick lists', async () => {
    const { client, calls, deps } = world();
    const view = readView({ cluster: client });
    await view.listPods(undefined);
    await view.listJobs('PyTorchJob');
    calls.length = 0;
    const outcome = await actOnJob(TOY, toThree, { ...deps, cluster: view });
    assert.equal(outcome.applied, true);
    const reads = calls.filter((c) => /^(get|list)/.test(c));
    // The job live; its policies, state, pods and Workloads from the tick's lists (each listed once, cluster-wide).
    assert.deepEqual(reads, ['getJob toy,*', 'listTrainingAutoscalers', 'listJobStates', 'listWorkloads *,']);
    assert.ok(calls.some((c) => c.startsWith('patchJob toy')));
  });

  it('after a conflict, decides on a job and pods read from the API server', async () => {
    const { client, calls, deps } = world();
    let conflicts = 1;
    const conflicting: ClusterClient = Object.assign(Object.create(client) as ClusterClient, {
      patchJob: (r: JobRef, patch: Parameters<ClusterClient['patchJob']>[1], o: { dryRun: boolean }) => {
        if (conflicts-- > 0) return Promise.reject(new ConflictError('patch'));
        return client.patchJob(r, patch, o);
      },
    });
    const view = new ListedClusterReads(conflicting, listingSource(conflicting));
    await view.listPods(undefined);
    calls.length = 0;
    const outcome = await actOnJob(TOY, toThree, { ...deps, cluster: view });
    assert.equal(outcome.applied, true);
    assert.equal(outcome.conflicts, 1);
    const reads = calls.filter((c) => /^(get|list)/.test(c));
    // First attempt: the job live, policies, pods and state from the lists. The retry: job, its namespace's
    // policies, pods, state, Workloads live.
    assert.deepEqual(reads, [
      'getJob toy,*',
      'listTrainingAutoscalers',
      'listJobStates',
      'listWorkloads *,',
      'getJob toy',
      'listTrainingAutoscalers team-a',
      'getJobState toy',
      'listPods team-a,training.kubeflow.org/job-name=toy',
      `listWorkloads team-a,kueue.x-k8s.io/job-uid=${String((await client.getJob(TOY)).metadata.uid)}`,
    ]);
  });
});

describe('the actuator deciding on the listed job first (decideOnListedFirst)', () => {
  const world = () => actuatorWorld({ decideOnListedFirst: true });
  const keep = () => ({ ref: TOY, policy: 'fault' as const, reason: 'nothing to do', changes: [] });
  const toThree = () => ({
    ref: TOY,
    policy: 'fault' as const,
    reason: 'test',
    changes: [{ kind: 'replicas' as const, role: 'Worker' as const, from: 2, to: 3 }],
  });

  it('a decision that writes nothing reads nothing from the API server beyond the tick lists', async () => {
    const { client, calls, deps } = world();
    const view = readView({ cluster: client });
    await view.listPods(undefined);
    await view.listJobs('PyTorchJob');
    calls.length = 0;
    const outcome = await actOnJob(TOY, keep, { ...deps, cluster: view });
    assert.equal(outcome.applied, false);
    assert.equal(outcome.skipped, 'no-change');
    assert.deepEqual(
      calls.filter((c) => c.startsWith('get')),
      [],
    );
    assert.ok(!calls.some((c) => /^(patch|put|create)/.test(c)), calls.join('; '));
  });

  it('a recommendation (mode Recommend) is written after the job is read live, even one that changes nothing', async () => {
    const { sim } = harness();
    sim.applyTrainingAutoscaler({
      apiVersion: 'trainscaler.io/v1alpha1',
      kind: 'TrainingAutoscaler',
      metadata: { name: 'p', namespace: TOY.namespace },
      spec: { targetRef: { kind: 'PyTorchJob', name: TOY.name }, mode: 'Recommend' },
    });
    sim.submitJob(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 8 }));
    sim.step(120);
    const { client, calls } = recording(sim);
    const view = readView({ cluster: client });
    await view.listJobs('PyTorchJob');
    calls.length = 0;
    const outcome = await actOnJob(TOY, keep, {
      clock: sim.clock.now,
      dryRun: false,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      namespaceAllowlist: [],
      decideOnListedFirst: true,
      cluster: view,
    });
    assert.equal(outcome.skipped, 'recommend');
    const written = calls.findIndex((c) => c.startsWith('putJobState'));
    assert.ok(written >= 0, calls.join('; '));
    assert.ok(
      calls.indexOf('getJob toy,*') >= 0 && calls.indexOf('getJob toy,*') < written,
      calls.join('; '),
    );
  });

  it('a decision that writes is made again on the job read live, and pins its resourceVersion', async () => {
    const { client, calls, deps } = world();
    const view = readView({ cluster: client });
    await view.listJobs('PyTorchJob');
    const listed = await view.getJob(TOY);
    // The job changes after the tick listed it: the listed copy is stale, the live one is what gets patched.
    await client.patchJob(TOY, [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }], {
      dryRun: false,
    });
    const live = await client.getJob(TOY);
    assert.notEqual(live.metadata.resourceVersion, listed.metadata.resourceVersion);
    calls.length = 0;
    const seen: Array<string | undefined> = [];
    const outcome = await actOnJob(
      TOY,
      (snapshot) => {
        seen.push(snapshot.view.resourceVersion);
        return toThree();
      },
      { ...deps, cluster: view },
    );
    assert.equal(outcome.applied, true);
    assert.equal(outcome.conflicts, 0, 'no patch was sent with the listed resourceVersion');
    // Decided on the listed job, then again on the live one: the write is the live decision's.
    assert.deepEqual(seen, [listed.metadata.resourceVersion, live.metadata.resourceVersion]);
    assert.equal(calls.filter((c) => c.startsWith('getJob')).length, 1, calls.join('; '));
    const patchAt = calls.findIndex((c) => c.startsWith('patchJob toy'));
    assert.ok(patchAt > calls.indexOf('getJob toy,*') && calls.includes('getJob toy,*'), calls.join('; '));
    assert.ok(
      outcome.patch?.some(
        (op) => op.path === '/metadata/resourceVersion' && op.value === live.metadata.resourceVersion,
      ),
    );
  });
});
