// An indexed batch/v1 Job resized by the actuator, as the trainscaler ServiceAccount, on the real API server
// and kube-controller-manager (Job controller) with kwok nodes: parallelism and completions change together,
// the Job controller creates (and later removes) the pods of the new indices, the write is audited (annotation
// and Event), and what the API server forbids (a NonIndexed Job's completions, a running Job's pod template)
// is refused before any write, leaving the Job as it was.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, type V1Job } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { UnsupportedChangeError } from '../../../lib/errors.js';
import type { Change, JobRef, Plan } from '../../../lib/types.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

let cluster: TestCluster;
let batch: BatchV1Api;
let ns = '';
const quiet = () => undefined;

function deps(): ActuatorDeps {
  return {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    clock: () => Math.floor(Date.now() / 1000),
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
    guardrails: { cooldownSeconds: 0 },
  };
}

function jobManifest(name: string, completionMode: 'Indexed' | 'NonIndexed', size: number): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      annotations: {
        [ANNOTATION.managed]: 'true',
        [ANNOTATION.elastic]: 'true',
        [ANNOTATION.minReplicas]: '1',
        [ANNOTATION.maxReplicas]: '8',
      },
    },
    spec: {
      parallelism: size,
      completions: size,
      completionMode,
      backoffLimit: 6,
      template: {
        spec: {
          restartPolicy: 'Never',
          // kwok nodes carry this taint; kwok plays the kubelet and keeps the pods Running.
          tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
          containers: [
            {
              name: 'trainer',
              image: 'registry.example.com/ddp:1.4',
              resources: {
                requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' },
                limits: { 'nvidia.com/gpu': '1' },
              },
            },
          ],
        },
      },
    },
  };
}

const resize =
  (to: number, extra: Change[] = []) =>
  ({ view }: { view: { ref: JobRef; roles: { replicas: number }[] } }): Plan => ({
    ref: view.ref,
    policy: 'tuning',
    reason: `integration: ${view.roles[0]?.replicas} -> ${to} workers`,
    changes: [{ kind: 'replicas', role: 'Worker', from: view.roles[0]?.replicas ?? 0, to }, ...extra],
  });

async function runningPods(job: string): Promise<number> {
  const list = await cluster.admin.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `batch.kubernetes.io/job-name=${job}`,
  });
  return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp).length;
}

before(async () => {
  cluster = testCluster();
  batch = cluster.admin.kc.makeApiClient(BatchV1Api);
  ns = await createNamespace(cluster, 'ts-indexed-job');
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

describe('indexed batch/v1 Job on the real API server and Job controller', () => {
  it('grows 2 -> 4 and shrinks to 3: parallelism and completions together, pods follow, audited', async () => {
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest('ddp', 'Indexed', 2) });
    await waitFor('2 running pods', async () => ((await runningPods('ddp')) === 2 ? true : undefined));
    const ref: JobRef = { kind: 'Job', namespace: ns, name: 'ddp' };

    const grown = await actOnJob(ref, resize(4), deps());
    assert.equal(grown.applied, true);
    let live = await batch.readNamespacedJob({ namespace: ns, name: 'ddp' });
    assert.deepEqual([live.spec?.parallelism, live.spec?.completions], [4, 4]);
    await waitFor('4 running pods', async () => ((await runningPods('ddp')) === 4 ? true : undefined));

    const shrunk = await actOnJob(ref, resize(3), deps());
    assert.equal(shrunk.applied, true);
    live = await batch.readNamespacedJob({ namespace: ns, name: 'ddp' });
    assert.deepEqual([live.spec?.parallelism, live.spec?.completions], [3, 3]);
    await waitFor('3 running pods', async () => ((await runningPods('ddp')) === 3 ? true : undefined));

    const decision = JSON.parse(live.metadata?.annotations?.[ANNOTATION.lastDecision] ?? '{}');
    assert.equal(decision.id, shrunk.decisionId);
    assert.deepEqual(decision.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
    const events = await cluster.admin.core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: 'involvedObject.kind=Job,involvedObject.name=ddp',
    });
    const ours = events.items.filter((e) => e.reason === 'TrainscalerTuning');
    assert.equal(ours.length, 2, 'one Event per decision');
    assert.ok(ours.every((e) => e.involvedObject.uid === live.metadata?.uid));
  });

  it('refuses what the API forbids before writing: a NonIndexed Job, a running Job’s resources', async () => {
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest('plain', 'NonIndexed', 2) });
    const plain = await batch.readNamespacedJob({ namespace: ns, name: 'plain' });
    await assert.rejects(
      actOnJob({ kind: 'Job', namespace: ns, name: 'plain' }, resize(3), deps()),
      (e: unknown) => e instanceof UnsupportedChangeError && /completionMode is NonIndexed/.test(e.message),
    );
    const memory: Change = {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'requests',
      from: 1024 ** 3,
      to: 2 * 1024 ** 3,
    };
    const before = await batch.readNamespacedJob({ namespace: ns, name: 'ddp' });
    await assert.rejects(
      actOnJob({ kind: 'Job', namespace: ns, name: 'ddp' }, resize(4, [memory]), deps()),
      (e: unknown) => e instanceof UnsupportedChangeError && /pod template is immutable/.test(e.message),
    );
    const [plainAfter, ddpAfter] = await Promise.all([
      batch.readNamespacedJob({ namespace: ns, name: 'plain' }),
      batch.readNamespacedJob({ namespace: ns, name: 'ddp' }),
    ]);
    // The Job controller writes status meanwhile: the spec (generation) and annotations are what we own.
    for (const [now, earlier, what] of [
      [plainAfter, plain, 'nothing written'],
      [ddpAfter, before, 'no partial write'],
    ] as const) {
      assert.equal(now.metadata?.generation, earlier.metadata?.generation, what);
      assert.deepEqual(now.metadata?.annotations, earlier.metadata?.annotations, what);
    }
  });

  it('the API server itself refuses a NonIndexed completions change (what the guard stands in front of)', async () => {
    // As the ServiceAccount, bypassing the adapter: the API server's own answer, so the guard is not stricter
    // than needed nor weaker than the server.
    const client = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
    await assert.rejects(
      client.patchJob(
        { kind: 'Job', namespace: ns, name: 'plain' },
        [
          { op: 'replace', path: '/spec/parallelism', value: 3 },
          { op: 'replace', path: '/spec/completions', value: 3 },
        ],
        { dryRun: true },
      ),
      /HTTP 422.*completions.*immutable/s,
    );
    await assert.rejects(
      client.patchJob(
        { kind: 'Job', namespace: ns, name: 'ddp' },
        [
          { op: 'replace', path: '/spec/parallelism', value: 5 },
          { op: 'replace', path: '/spec/completions', value: 6 },
        ],
        { dryRun: true },
      ),
      /HTTP 422.*in tandem/s,
    );
  });
});
