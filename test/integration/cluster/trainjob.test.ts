// A TrainJob on the real Kubeflow Trainer v2.3.0 controller and webhook (and the JobSet v0.12.0 controller it
// runs on; infra/cluster/up-controllers.sh, runtime `torch-distributed` as upstream ships it). What Trainer
// v2.3 permits for a resize is nothing: spec.trainer (numNodes, resourcesPerNode) is immutable by CEL even
// while suspended, so suspend -> change -> resume is not available either, and the JobSet it creates is
// controlled by it. trainscaler reads the TrainJob (its size and its pods, through that JobSet and its child
// Job), refuses every change before writing, and holds no right to write it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, loadSnapshot } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { ForbiddenError, UnsupportedChangeError } from '../../../lib/errors.js';
import type { JobRef, Plan } from '../../../lib/types.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

let cluster: TestCluster;
let ns = '';
const quiet = () => undefined;
const TRAINJOB = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' };
const JOBSET = { group: 'jobset.x-k8s.io', version: 'v1alpha2', plural: 'jobsets' };

function sa(): KubernetesClusterClient {
  return new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
}

function deps(): ActuatorDeps {
  return {
    cluster: sa(),
    clock: () => Math.floor(Date.now() / 1000),
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
    guardrails: { cooldownSeconds: 0 },
  };
}

function trainJobManifest(name: string, numNodes: number) {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: { name, annotations: { [ANNOTATION.managed]: 'true' } },
    spec: {
      runtimeRef: { name: 'torch-distributed' },
      trainer: {
        image: 'registry.example.com/mnist:2.0',
        numNodes,
        resourcesPerNode: {
          requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' },
          limits: { 'nvidia.com/gpu': '1' },
        },
      },
    },
  };
}

async function read(spec: typeof TRAINJOB, name: string): Promise<KubeObject> {
  return (await cluster.admin.custom.getNamespacedCustomObject({
    ...spec,
    namespace: ns,
    name,
  })) as KubeObject;
}

async function runningPods(name: string): Promise<number> {
  const list = await cluster.admin.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `jobset.sigs.k8s.io/jobset-name=${name}`,
  });
  return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp).length;
}

before(async () => {
  cluster = testCluster();
  ns = await createNamespace(cluster, 'ts-trainjob');
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

describe('TrainJob (Kubeflow Trainer v2.3.0) on the real controllers', () => {
  it('is read with its pods, found through the JobSet and Job it controls', async () => {
    await cluster.admin.custom.createNamespacedCustomObject({
      ...TRAINJOB,
      namespace: ns,
      body: trainJobManifest('mnist', 2),
    });
    await waitFor(
      '2 running pods',
      async () => ((await runningPods('mnist')) === 2 ? true : undefined),
      120_000,
    );
    const snapshot = await loadSnapshot(sa(), { kind: 'TrainJob', namespace: ns, name: 'mnist' });
    assert.equal(snapshot.view.managed, true);
    assert.deepEqual(
      snapshot.view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas, r.requests.gpus]),
      [['Worker', 2, 2, 2, 1]],
    );
    assert.equal(snapshot.rawPods.length, 2);
    // The JobSet Trainer created is its, not trainscaler's, even were it opted in.
    const child = await read(JOBSET, 'mnist');
    child.metadata.annotations = { ...child.metadata.annotations, [ANNOTATION.managed]: 'true' };
    const childView = readJob(child);
    assert.equal(childView.managed, false);
    assert.match(childView.unmanagedReason ?? '', /controlled by TrainJob mnist/);
  });

  it('refuses a resize before writing; the ServiceAccount may not write a TrainJob at all', async () => {
    const ref: JobRef = { kind: 'TrainJob', namespace: ns, name: 'mnist' };
    const before = await read(TRAINJOB, 'mnist');
    // A worker-count change never gets this far: the view's bounds are its fixed size, so the guardrails make
    // it a no-op. A memory raise (what an OOM kill asks for) passes them and is refused by the kind.
    const plan = ({ view }: { view: { ref: JobRef } }): Plan => ({
      ref: view.ref,
      policy: 'fault',
      reason: 'integration: OOM-killed, raise memory',
      changes: [
        {
          kind: 'resources',
          role: 'Worker',
          resource: 'memory',
          field: 'requests',
          from: 1024 ** 3,
          to: 2 * 1024 ** 3,
        },
      ],
    });
    await assert.rejects(
      actOnJob(ref, plan, deps()),
      (e: unknown) => e instanceof UnsupportedChangeError && /spec\.trainer immutable/.test(e.message),
    );
    const grow = ({ view }: { view: { ref: JobRef } }): Plan => ({
      ref: view.ref,
      policy: 'tuning',
      reason: 'integration: 2 -> 3 nodes',
      changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }],
    });
    assert.equal((await actOnJob(ref, grow, deps())).skipped, 'no-change');
    const after = await read(TRAINJOB, 'mnist');
    assert.equal(after.metadata.generation, before.metadata.generation, 'spec not written');
    assert.deepEqual(after.metadata.annotations, before.metadata.annotations, 'no audit annotation');
    await assert.rejects(
      sa().patchJob(ref, [{ op: 'replace', path: '/spec/suspend', value: true }], { dryRun: true }),
      ForbiddenError,
    );
  });

  it('Trainer v2.3 refuses numNodes changes even while suspended (so no suspend -> change -> resume path)', async () => {
    // As the admin, who may write TrainJobs: the API's own answer, which is why trainscaler does not try.
    const patch = (body: object) =>
      cluster.admin.custom.patchNamespacedCustomObject(
        { ...TRAINJOB, namespace: ns, name: 'mnist', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    await patch({ spec: { suspend: true } });
    await waitFor('the JobSet suspended', async () => {
      const jobSet = await read(JOBSET, 'mnist');
      return (jobSet.spec as { suspend?: boolean }).suspend === true ? true : undefined;
    });
    await assert.rejects(patch({ spec: { trainer: { numNodes: 3 } } }), /field is immutable/);
    const live = await read(TRAINJOB, 'mnist');
    assert.equal((live.spec as { trainer: { numNodes: number } }).trainer.numNodes, 2);
  });
});
