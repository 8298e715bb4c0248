// Issue 17, point 3, on the real API server, scheduler and training-operator: a 1 master + 16 worker
// PyTorchJob on a cluster with room for the master and 11 workers (4 kwok nodes x 4 GPUs, another job holds
// 4) leaves 5 workers Pending. With no pod event to answer (they were missed, or answered by a clamped
// shrink), the schedule alone brings it to what runs within two ticks: no pod left unplaceable.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { planText } from '../../support/plan-text.js';
import { RecordedMetricsSource } from '../support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

let cluster: TestCluster;
let ns = '';

function deps(): HandlerDeps {
  const quiet = () => undefined;
  return {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    metrics: new RecordedMetricsSource(new Map()), // no step times: kwok pods train nothing
    clock: () => Math.floor(Date.now() / 1000),
    config: DEFAULT_POLICY_CONFIG, // maxReplicaStep 4: 16 -> 11 is more than one step
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
  };
}

async function create(body: Record<string, unknown>) {
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    body,
  });
}

async function getJob(name: string): Promise<KubeObject> {
  return (await cluster.admin.custom.getNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    name,
  })) as KubeObject;
}

async function pods(job: string): Promise<V1Pod[]> {
  return (
    await cluster.admin.core.listNamespacedPod({
      namespace: ns,
      labelSelector: `training.kubeflow.org/job-name=${job}`,
    })
  ).items.filter((p) => !p.metadata?.deletionTimestamp);
}

async function placement(job: string) {
  const all = await pods(job);
  const workers = all.filter((p) => p.metadata?.labels?.['training.kubeflow.org/replica-type'] === 'worker');
  return {
    master: all.filter(
      (p) => p.metadata?.labels?.['training.kubeflow.org/replica-type'] === 'master' && p.spec?.nodeName,
    ).length,
    running: workers.filter((p) => p.status?.phase === 'Running').length,
    waiting: workers.filter((p) => p.status?.phase === 'Pending' && !p.spec?.nodeName).length,
  };
}

describe('a job with pods that cannot be placed, on the real control plane', () => {
  before(async () => {
    cluster = testCluster();
    // Capacity tests start from an empty cluster: no training pod of an earlier test still holds a GPU.
    await waitFor(
      'GPUs of earlier tests released',
      async () => {
        const left = await cluster.admin.core.listPodForAllNamespaces({
          labelSelector: 'training.kubeflow.org/job-name',
        });
        return left.items.length === 0 ? true : undefined;
      },
      120_000,
    );
    ns = await createNamespace(cluster, 'stranded');
  });

  after(async () => {
    if (ns) await deleteNamespace(cluster, ns);
  });

  it('1 master + 16 workers with room for 11 converges to 11 within two schedule ticks', async () => {
    const managed = { 'trainscaler.io/managed': 'true' };
    await create(
      elasticPyTorchJob({ name: 'other', namespace: ns, workers: 4, min: 4, max: 4, annotations: managed }),
    );
    await waitFor('other running', async () => ((await placement('other')).running === 4 ? true : undefined));

    const big = elasticPyTorchJob({
      name: 'big',
      namespace: ns,
      workers: 16,
      min: 1,
      max: 16,
      annotations: managed,
    });
    const specs = (big.spec as { pytorchReplicaSpecs: Record<string, unknown> }).pytorchReplicaSpecs;
    specs.Master = { ...(specs.Worker as object), replicas: 1 };
    await create(big);
    // The scheduler places the master and 11 workers, or (it does not order a job's pods) 12 workers and
    // leaves the master waiting: then no worker trains either, and a running worker must make room.
    let seen = {};
    const stuck = await waitFor('big: 12 pods placed, 5 waiting', async () => {
      const p = await placement('big');
      seen = p;
      const masterPlaced = p.master === 1 && p.running === 11 && p.waiting === 5;
      const masterWaiting = p.master === 0 && p.running === 12 && p.waiting === 4;
      return masterPlaced || masterWaiting ? p : undefined;
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}; last seen ${JSON.stringify(seen)}`);
    });
    console.log(`stranded (API server): placed ${JSON.stringify(stuck)}`);

    let ticks = 0;
    let reason = '';
    while (ticks < 2) {
      const result = await handleSchedule(scheduledEvent(), deps());
      ticks++;
      // The tick lists every namespace: an earlier test's jobs, listed while their namespace is being deleted,
      // are gone by their read (NOT_FOUND, counted as jobs without a decision); they are not this test's.
      const othersGone = (e: { code: string; ref: { namespace: string } }) =>
        e.code === 'NOT_FOUND' && e.ref.namespace !== ns;
      assert.deepEqual(
        result.errors.filter((e) => e.code !== 'MISSING_METRICS' && !othersGone(e)),
        [],
        JSON.stringify(result.errors),
      );
      const decided = result.outcomes.find((o) => o.ref.name === 'big' && o.applied);
      if (decided) reason = planText(decided.plan);
      // The operator removes the dropped replicas; then nothing of big waits for room.
      const settled = await waitFor(
        `tick ${ticks} settled`,
        async () => {
          const job = await getJob('big');
          const replicas = (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } })
            .pytorchReplicaSpecs.Worker.replicas;
          const p = await placement('big');
          return p.running + p.waiting === replicas ? { replicas, ...p } : undefined;
        },
        60_000,
      );
      if (settled.waiting === 0 && settled.master === 1) break;
    }
    const end = await waitFor(
      'master and 11 workers placed',
      async () => {
        const p = await placement('big');
        return p.master === 1 && p.running === 11 && p.waiting === 0 ? p : undefined;
      },
      30_000,
    ).catch(async () => placement('big'));
    assert.deepEqual(end, { master: 1, running: 11, waiting: 0 }, `after ${ticks} tick(s)`);
    console.log(`stranded (API server): converged in ${ticks} tick(s): ${reason}`);
    const job = await getJob('big');
    assert.equal(
      (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
        .replicas,
      11,
    );
    assert.match(
      reason,
      /Pending, fits on no node.*11 running \+ 0 more fit in free capacity = 11: shrinking Worker from \d+ to 11/,
    );
    assert.ok(job.metadata.annotations?.[ANNOTATION.lastDecision]);
  });
});
