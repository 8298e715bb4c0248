// In-place right-sizing on the real API server (kube-apiserver 1.33.13), as the trainscaler ServiceAccount.
// What is proven here: discovery lists pods/resize; the ServiceAccount may patch pods/resize and nothing else of
// a pod; a kwok pod (kwok reports no status.containerStatuses[].resources, as a kubelet without in-place
// resize would not) falls back to the template-only path; once the pod's status reports its container
// resources (the test writes that status as admin, playing the kubelet's part: kwok does not), the actuator
// patches the template and resizes the running pod in place (same uid, no restart); the API server itself
// refuses a QoS class change and a memory limit decrease without RestartContainer, the two rules
// lib/adapters/pod-resize.ts checks before sending. NOT proven here: the kubelet actuating the resize
// (PodResizePending / PodResizeInProgress, status resources following the spec): no kubelet runs here.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { actOnJob, type Decide } from '../../../lib/actuator.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { ApiError } from '../../../lib/errors.js';
import type { JobRef } from '../../../lib/types.js';
import { planText } from '../../support/plan-text.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

const GiB = 1024 ** 3;
let cluster: TestCluster;
let ns = '';
let sa: KubernetesClusterClient;

const quiet = () => undefined;

function memoryTo(ref: JobRef, bytes: number): Decide {
  return (s) => {
    const role = s.view.roles.find((r) => r.role === 'Worker');
    return {
      ref,
      policy: 'rightsizing',
      reason: 'test: worker memory',
      changes: [
        {
          kind: 'resources',
          role: 'Worker',
          resource: 'memory',
          field: 'requests',
          from: role?.requests.memoryBytes ?? 0,
          to: bytes,
        },
        {
          kind: 'resources',
          role: 'Worker',
          resource: 'memory',
          field: 'limits',
          from: role?.limits.memoryBytes ?? 0,
          to: bytes,
        },
      ],
    };
  };
}

async function workerPod(job: string): Promise<V1Pod> {
  const pod = await waitFor(`a running pod of ${job}`, async () =>
    (
      await cluster.admin.core.listNamespacedPod({
        namespace: ns,
        labelSelector: `training.kubeflow.org/job-name=${job}`,
      })
    ).items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp),
  );
  return pod;
}

/** What a kubelet with in-place resize reports: each running container's resources in its status. */
async function reportContainerResources(pod: V1Pod): Promise<void> {
  const statuses = (pod.status?.containerStatuses ?? []).map((s) => ({
    ...s,
    resources: pod.spec?.containers.find((c) => c.name === s.name)?.resources,
  }));
  await cluster.admin.core.patchNamespacedPodStatus(
    { name: pod.metadata?.name ?? '', namespace: ns, body: { status: { containerStatuses: statuses } } },
    setHeaderOptions('Content-Type', 'application/merge-patch+json'),
  );
}

const deps = () => ({
  cluster: sa,
  clock: () => Math.floor(Date.now() / 1000),
  dryRun: false,
  logger: { info: quiet, warn: quiet, error: quiet },
  namespaceAllowlist: [],
});

before(async () => {
  cluster = testCluster();
  ns = await createNamespace(cluster, 'resize');
  sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

describe('pods/resize on the real API server, as the trainscaler ServiceAccount', () => {
  it('discovery lists pods/resize, and RBAC lets the ServiceAccount patch it but not the pod', async () => {
    assert.equal(await sa.servesPodResize(), true);
    const canI = (...what: string[]) =>
      execFileSync(
        'kubectl',
        ['--kubeconfig', cluster.saKubeconfig, 'auth', 'can-i', 'patch', ...what, '-n', ns],
        { encoding: 'utf8' },
      ).trim();
    assert.equal(canI('pods', '--subresource=resize'), 'yes');
    // kubectl answers "no" with exit status 1.
    assert.throws(
      () => canI('pods'),
      (e: unknown) =>
        typeof e === 'object' && e !== null && 'stdout' in e && String(e.stdout).trim() === 'no',
    );
  });

  it('a kwok pod (no status resources) keeps the template-only path; reported, it is resized in place', async () => {
    const name = 'resize-a';
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name };
    await cluster.admin.custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      body: elasticPyTorchJob({ name, namespace: ns, workers: 1, min: 1, max: 2, memory: '2Gi', gpus: 0 }),
    });
    const pod = await workerPod(name);
    assert.equal(
      pod.status?.containerStatuses?.some((s) => s.resources !== undefined),
      false,
      'kwok reports no container resources',
    );

    const first = await actOnJob(ref, memoryTo(ref, 3 * GiB), deps());
    assert.equal(first.applied, true);
    assert.match(
      planText(first.plan),
      /not in place: its node kwok-node-\d does not report container resources/,
    );
    assert.equal(first.podResizes, undefined);
    const unchanged = await workerPod(name);
    assert.equal(unchanged.spec?.containers[0]?.resources?.limits?.memory, '2Gi', 'the pod keeps its size');

    // Play the kubelet's part: report the running container's resources (what makes the API server accept).
    await reportContainerResources(unchanged);
    const second = await actOnJob(ref, memoryTo(ref, 4 * GiB), {
      ...deps(),
      guardrails: { cooldownSeconds: 0 },
    });
    assert.equal(second.applied, true, second.plan.reason);
    assert.deepEqual(second.podResizes, [{ pod: unchanged.metadata?.name, result: 'resized' }]);
    const resized = await workerPod(name);
    assert.equal(resized.metadata?.uid, unchanged.metadata?.uid, 'the same pod: not recreated');
    assert.equal(resized.spec?.containers[0]?.resources?.limits?.memory, '4Gi');
    assert.equal(resized.spec?.containers[0]?.resources?.requests?.memory, '4Gi');
    assert.equal(resized.spec?.containers[0]?.resources?.requests?.cpu, '1', 'only the changed fields');
    const job = (await cluster.admin.custom.getNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      name,
    })) as {
      spec: {
        pytorchReplicaSpecs: {
          Worker: { template: { spec: { containers: { resources: { limits: { memory: string } } }[] } } };
        };
      };
    };
    assert.equal(
      job.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]?.resources.limits.memory,
      '4Gi',
      'the template is in step',
    );
    const events = await cluster.admin.core.listNamespacedEvent({ namespace: ns });
    assert.ok(
      events.items.some(
        (e) => e.reason === 'TrainscalerRightsizing' && /resized in place/.test(e.message ?? ''),
      ),
      'the audit Event names the in-place resize',
    );

    // A stale resourceVersion: 409, nothing written.
    await assert.rejects(
      sa.resizePod(
        ns,
        resized.metadata?.name ?? '',
        [
          { op: 'replace', path: '/metadata/resourceVersion', value: unchanged.metadata?.resourceVersion },
          { op: 'replace', path: '/spec/containers/0/resources/requests/memory', value: '5Gi' },
        ],
        { dryRun: false },
      ),
      (e: unknown) => e instanceof Error && e.name === 'ConflictError',
    );

    // The API server's own rules, the ones checked before sending.
    const pinned = (ops: { op: 'replace' | 'add'; path: string; value: string }[]) => [
      { op: 'replace' as const, path: '/metadata/resourceVersion', value: resized.metadata?.resourceVersion },
      ...ops,
    ];
    await assert.rejects(
      sa.resizePod(
        ns,
        resized.metadata?.name ?? '',
        pinned([
          { op: 'replace', path: '/spec/containers/0/resources/limits/memory', value: '3Gi' },
          { op: 'replace', path: '/spec/containers/0/resources/requests/memory', value: '3Gi' },
        ]),
        { dryRun: true },
      ),
      (e: unknown) =>
        e instanceof ApiError && e.status === 422 && /memory limits cannot be decreased/.test(e.message),
    );
    await assert.rejects(
      sa.resizePod(
        ns,
        resized.metadata?.name ?? '',
        pinned([{ op: 'add', path: '/spec/containers/0/resources/limits/cpu', value: '1' }]),
        { dryRun: true },
      ),
      (e: unknown) => e instanceof ApiError && e.status === 422 && /QOS Class may not change/.test(e.message),
      'a cpu limit equal to the request makes the Burstable pod Guaranteed',
    );
  });
});
