import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, ConflictError, NotFoundError } from '../../../lib/errors.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import {
  pytorchJobManifest,
  statefulSetManifest,
  tfJobManifest,
} from '../../../lib/sim/training-job-manifests.js';
import type { JobRef } from '../../../lib/types.js';
import { FIXED_APP_MODEL, GiB } from './fixed-app-model.js';

const SIZING = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };
const REF: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'toy' };

function clusterWithJob(workers = 4): SimulatedCluster {
  const sim = new SimulatedCluster({ seed: 7, apps: FIXED_APP_MODEL });
  sim.submitJob(
    pytorchJobManifest({
      name: 'toy',
      namespace: 'team-a',
      app: 'toy',
      workers,
      minReplicas: 1,
      maxReplicas: 8,
      sizing: SIZING,
    }),
  );
  return sim;
}

/** TFJob `tf`: 2 workers of SIZING and one parameter server of `psSizing`. */
function tfJobWithOnePs(psSizing: typeof SIZING) {
  return tfJobManifest({
    name: 'tf',
    namespace: 'team-a',
    app: 'toy',
    workers: 2,
    minReplicas: 1,
    maxReplicas: 4,
    sizing: SIZING,
    ps: 1,
    psSizing,
  });
}

async function podNames(
  sim: SimulatedCluster,
  selector = 'training.kubeflow.org/job-name=toy',
): Promise<string[]> {
  return (await sim.listPods('team-a', selector)).map((p) => p.metadata?.name ?? '');
}

describe('SimulatedCluster placement reads (the idle meter)', () => {
  it("gives a job's bound training pods and the room for more pods of a shape, node by node", () => {
    const sim = clusterWithJob(6);
    assert.deepEqual(sim.trainingPodsPerNode(REF), [0, 0, 0, 0]); // created at the next sub-step
    sim.step(10);
    assert.deepEqual(sim.trainingPodsPerNode(REF), [4, 2, 0, 0]); // first fit
    assert.deepEqual(sim.roomPerNode(SIZING), [0, 2, 4, 4]);
    // Every dimension must fit: 12 cores a pod leave room for two on an empty 32-core node.
    assert.deepEqual(sim.roomPerNode({ ...SIZING, cpuMillis: 12_000 }), [0, 2, 2, 2]);
  });

  it('counts training pods only: a parameter server holds room but is not where the job trains', () => {
    const sim = new SimulatedCluster({ seed: 7, apps: FIXED_APP_MODEL });
    sim.submitJob(tfJobWithOnePs({ gpus: 0, cpuMillis: 30_000, memoryBytes: 4 * GiB }));
    sim.step(10);
    const ref: JobRef = { kind: 'TFJob', namespace: 'team-a', name: 'tf' };
    assert.deepEqual(sim.trainingPodsPerNode(ref), [0, 2, 0, 0]);
    assert.deepEqual(sim.roomPerNode(SIZING), [0, 2, 4, 4]);
  });
});

describe('SimulatedCluster operator emulation', () => {
  it('creates one pod per replica with the training-operator names and labels', async () => {
    const sim = clusterWithJob(3);
    sim.step(10);
    assert.deepEqual(await podNames(sim), ['toy-worker-0', 'toy-worker-1', 'toy-worker-2']);
    const [pod] = await sim.listPods('team-a', 'training.kubeflow.org/replica-index=0');
    assert.equal(pod?.metadata?.labels?.['training.kubeflow.org/replica-type'], 'worker');
    assert.equal(pod?.metadata?.ownerReferences?.[0]?.kind, 'PyTorchJob');
    assert.equal(pod?.spec?.containers[0]?.resources?.limits?.['nvidia.com/gpu'], '1');
  });

  it('deletes the highest indices first when replicas are patched down, and adds pods when patched up', async () => {
    const sim = clusterWithJob(4);
    sim.step(60);
    sim.drainEvents();
    await sim.patchJob(
      REF,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 2 }],
      {
        dryRun: false,
      },
    );
    sim.step(10);
    const deleted = sim
      .drainEvents()
      .filter((e) => e.type === 'DELETED')
      .map((e) => e.object.metadata?.name);
    assert.deepEqual(deleted, ['toy-worker-3', 'toy-worker-2']);
    assert.deepEqual(await podNames(sim), ['toy-worker-0', 'toy-worker-1']);
    await sim.patchJob(
      REF,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 5 }],
      {
        dryRun: false,
      },
    );
    sim.step(10);
    assert.equal((await podNames(sim)).length, 5);
  });

  it('names TFJob and StatefulSet pods like their controllers', async () => {
    const sim = new SimulatedCluster({ seed: 1, apps: FIXED_APP_MODEL });
    sim.submitJob(tfJobWithOnePs({ gpus: 0, cpuMillis: 2000, memoryBytes: 4 * GiB }));
    sim.submitJob(
      statefulSetManifest({
        name: 'sts',
        namespace: 'team-a',
        app: 'toy',
        workers: 2,
        minReplicas: 1,
        maxReplicas: 4,
        sizing: SIZING,
      }),
    );
    sim.step(10);
    assert.deepEqual(await podNames(sim, 'training.kubeflow.org/job-name=tf'), [
      'tf-ps-0',
      'tf-worker-0',
      'tf-worker-1',
    ]);
    assert.deepEqual(await podNames(sim, 'training.kubeflow.org/replica-type=ps'), ['tf-ps-0']);
    const sts = await sim.listPods('team-a', 'training.example.com/job=sts');
    assert.deepEqual(
      sts.map((p) => [p.metadata?.name, p.metadata?.labels?.['apps.kubernetes.io/pod-index']]),
      [
        ['sts-0', '0'],
        ['sts-1', '1'],
      ],
    );
    assert.equal(sts[0]?.metadata?.ownerReferences?.[0]?.kind, 'StatefulSet');
  });

  it('rejects malformed label selectors with HTTP 400', async () => {
    const sim = clusterWithJob(1);
    await assert.rejects(
      sim.listPods('team-a', 'a in (b)'),
      (e: unknown) => e instanceof ApiError && e.status === 400,
    );
  });
});

describe('SimulatedCluster pod lists share one frozen copy per pod version', () => {
  const phases = async (sim: SimulatedCluster) =>
    (await sim.listPods('team-a')).map(
      (p) => `${p.metadata?.name}:${p.status?.phase}:${p.spec?.nodeName ?? '-'}`,
    );

  it('lists each pod as it is now: a change since the last list is seen, and the earlier copy stays as it was', async () => {
    const sim = clusterWithJob(2);
    const before = await sim.listPods('team-a');
    const shown = before.map((p) => `${p.metadata?.name}:${p.status?.phase}:${p.spec?.nodeName ?? '-'}`);
    assert.deepEqual(await phases(sim), shown, 'nothing changed: the same pods');
    sim.step(120);
    const after = await phases(sim);
    assert.ok(
      after.every((p) => p.includes(':Running:gpu-')),
      after.join(', '),
    );
    assert.notDeepEqual(after, shown);
    // What a reader holds never changes under it.
    assert.deepEqual(
      before.map((p) => `${p.metadata?.name}:${p.status?.phase}:${p.spec?.nodeName ?? '-'}`),
      shown,
    );
    assert.ok(
      (await sim.listPods('team-a')).every(
        (p, i) => p.metadata?.resourceVersion !== before[i]?.metadata?.resourceVersion,
      ),
    );
  });

  it('hands out read-only pods: a reader that writes to one throws, and the next list is unchanged', async () => {
    const sim = clusterWithJob(2);
    sim.step(120);
    const [pod] = await sim.listPods('team-a');
    assert.ok(pod?.status && pod.metadata?.labels);
    const status = pod.status;
    const labels = pod.metadata.labels;
    assert.throws(() => {
      status.phase = 'Failed';
    }, TypeError);
    assert.throws(() => {
      labels.tampered = 'yes';
    }, TypeError);
    const [again] = await sim.listPods('team-a');
    assert.equal(again?.status?.phase, 'Running');
    assert.equal(again?.metadata?.labels?.tampered, undefined);
  });
});

describe('SimulatedCluster job, node and ScaledTrainingJob lists share one frozen copy per version', () => {
  const replicasOf = (job: { spec?: unknown } | undefined) =>
    (job?.spec as { pytorchReplicaSpecs?: { Worker?: { replicas?: number } } } | undefined)
      ?.pytorchReplicaSpecs?.Worker?.replicas;
  const lastActionOf = (state: { status: unknown } | undefined) =>
    (state?.status as { lastActionAt?: number } | undefined)?.lastActionAt;

  it('hands out the same read-only copy while an object is unchanged, and a new one once it changes', async () => {
    const sim = clusterWithJob(2);
    const [job] = await sim.listJobs('PyTorchJob');
    const [again] = await sim.listJobs('PyTorchJob');
    assert.equal(again, job, 'unchanged: the same copy');
    assert.ok(job && Object.isFrozen(job.spec));
    assert.throws(() => {
      (job.metadata as { name: string }).name = 'renamed';
    }, TypeError);
    await sim.patchJob(
      REF,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 }],
      {
        dryRun: false,
      },
    );
    const [patched] = await sim.listJobs('PyTorchJob');
    assert.notEqual(patched, job);
    assert.equal(replicasOf(patched), 3);
    assert.equal(replicasOf(job), 2, 'what a reader holds never changes under it');
    sim.step(120); // Running: a status written by the simulator is a new version too
    const [running] = await sim.listJobs('PyTorchJob');
    assert.notEqual(running?.metadata.resourceVersion, patched?.metadata.resourceVersion);
    assert.notEqual(running, patched);

    const nodes = await sim.listNodes();
    assert.equal((await sim.listNodes())[0], nodes[0]);
    assert.ok(Object.isFrozen(nodes[0]?.status));

    const identity = { ref: REF, apiVersion: 'kubeflow.org/v1', uid: 'u-1' };
    const created = await sim.putJobState(identity, { lastActionAt: 1 }, undefined, { dryRun: false });
    const [state] = await sim.listJobStates();
    assert.equal((await sim.listJobStates())[0], state);
    await sim.putJobState(identity, { lastActionAt: 2 }, created, { dryRun: false });
    const [rewritten] = await sim.listJobStates();
    assert.notEqual(rewritten, state);
    assert.equal(lastActionOf(rewritten), 2);
    assert.equal(lastActionOf(state), 1);
  });
});

describe('SimulatedCluster JSON Patch semantics', () => {
  it('bumps resourceVersion and generation on a real write and records it', async () => {
    const sim = clusterWithJob(2);
    const before = await sim.getJob(REF);
    const after = await sim.patchJob(
      REF,
      [
        { op: 'replace', path: '/metadata/resourceVersion', value: before.metadata.resourceVersion },
        { op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
      ],
      { dryRun: false },
    );
    assert.ok(Number(after.metadata.resourceVersion) > Number(before.metadata.resourceVersion));
    assert.equal(after.metadata.generation, (before.metadata.generation ?? 0) + 1);
    assert.deepEqual(await sim.getJob(REF), after);
    assert.equal(sim.writeLog().filter((w) => w.verb === 'patch').length, 1);
  });

  it('rejects a stale resourceVersion guard with a conflict and leaves the job unchanged', async () => {
    const sim = clusterWithJob(2);
    const before = await sim.getJob(REF);
    const stale = [
      { op: 'replace' as const, path: '/metadata/resourceVersion', value: '1' },
      { op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
    ];
    await assert.rejects(sim.patchJob(REF, stale, { dryRun: false }), ConflictError);
    await assert.rejects(
      sim.patchJob(REF, [{ op: 'test', path: '/metadata/resourceVersion', value: '1' }], { dryRun: false }),
      ConflictError,
    );
    assert.deepEqual(await sim.getJob(REF), before);
  });

  it('turns a failed test op into a conflict', async () => {
    const sim = clusterWithJob(2);
    const patch = [
      { op: 'test' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 7 },
      { op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
    ];
    await assert.rejects(sim.patchJob(REF, patch, { dryRun: false }), ConflictError);
  });

  it('answers 422 for an op on a missing parent, and applies nothing of the patch', async () => {
    const sim = clusterWithJob(2);
    const before = await sim.getJob(REF);
    const patch = [
      { op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
      { op: 'add' as const, path: '/spec/nothing/here', value: 1 },
    ];
    await assert.rejects(
      sim.patchJob(REF, patch, { dryRun: false }),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
    assert.deepEqual(await sim.getJob(REF), before);
  });

  it('answers 422 for an invalid quantity or a request above its limit', async () => {
    const sim = clusterWithJob(2);
    const resources = '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources';
    const is422 = (e: unknown) => e instanceof ApiError && e.status === 422;
    await assert.rejects(
      sim.patchJob(REF, [{ op: 'replace', path: `${resources}/limits/memory`, value: 'lots' }], {
        dryRun: false,
      }),
      is422,
    );
    await assert.rejects(
      sim.patchJob(REF, [{ op: 'replace', path: `${resources}/requests/memory`, value: '64Gi' }], {
        dryRun: false,
      }),
      is422,
    );
  });

  it('validates a dry run and returns the result without storing it or bumping resourceVersion', async () => {
    const sim = clusterWithJob(2);
    const before = await sim.getJob(REF);
    const result = await sim.patchJob(
      REF,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 6 }],
      { dryRun: true },
    );
    assert.equal(
      (result.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
        .replicas,
      6,
    );
    assert.equal(result.metadata.resourceVersion, before.metadata.resourceVersion);
    assert.deepEqual(await sim.getJob(REF), before);
    assert.equal(sim.writeLog().filter((w) => w.verb === 'patch').length, 0);
    await assert.rejects(
      sim.patchJob(REF, [{ op: 'add', path: '/spec/nothing/here', value: 1 }], { dryRun: true }),
      ApiError,
    );
  });

  it('throws NotFoundError for a missing job and fails the next write when told to', async () => {
    const sim = clusterWithJob(1);
    await assert.rejects(sim.getJob({ ...REF, name: 'nope' }), NotFoundError);
    sim.failNextWrite(new ApiError('patch', 503, 'etcd leader changed'));
    const patch = [{ op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 2 }];
    await assert.rejects(sim.patchJob(REF, patch, { dryRun: false }), /etcd leader changed/);
    await sim.patchJob(REF, patch, { dryRun: false });
  });
});

describe('SimulatedCluster ConfigMaps and events', () => {
  it('creates, replaces with the current resourceVersion, and conflicts on a stale one or a second create', async () => {
    const sim = clusterWithJob(1);
    const created = await sim.putConfigMap('ns', 'profiles', { a: '1' }, undefined, { dryRun: false });
    await assert.rejects(
      sim.putConfigMap('ns', 'profiles', { a: '2' }, undefined, { dryRun: false }),
      ConflictError,
    );
    const replaced = await sim.putConfigMap('ns', 'profiles', { a: '2' }, created.metadata?.resourceVersion, {
      dryRun: false,
    });
    await assert.rejects(
      sim.putConfigMap('ns', 'profiles', { a: '3' }, created.metadata?.resourceVersion, { dryRun: false }),
      ConflictError,
    );
    assert.deepEqual((await sim.getConfigMap('ns', 'profiles'))?.data, { a: '2' });
    assert.equal(
      (await sim.getConfigMap('ns', 'profiles'))?.metadata?.resourceVersion,
      replaced.metadata?.resourceVersion,
    );
    assert.equal(await sim.getConfigMap('ns', 'missing'), undefined);
  });

  it('stores events only outside dry runs', async () => {
    const sim = clusterWithJob(1);
    const input = {
      involved: { ref: REF, uid: 'u', apiVersion: 'kubeflow.org/v1' },
      type: 'Normal' as const,
      reason: 'Scaled',
      message: 'workers 1 -> 2',
    };
    await sim.createEvent(input, { dryRun: true });
    assert.equal(sim.recordedEvents().length, 0);
    await sim.createEvent(input, { dryRun: false });
    assert.deepEqual(
      sim.recordedEvents().map((e) => [e.reason, e.involvedObject.name]),
      [['Scaled', 'toy']],
    );
  });

  it('lists nodes with allocatable quantities as strings', async () => {
    const sim = clusterWithJob(1);
    const nodes = await sim.listNodes();
    assert.equal(nodes.length, 4);
    assert.deepEqual(nodes[0]?.status?.allocatable, {
      cpu: '32',
      memory: '128Gi',
      'nvidia.com/gpu': '4',
      pods: '110',
    });
  });
});
