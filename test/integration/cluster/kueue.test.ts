// Kueue v0.18.1 (the real controller and webhooks, started by infra/cluster/up.sh) managing indexed Jobs that
// trainscaler resizes as its ServiceAccount: an elastic Job grows through a new workload slice that Kueue
// admits against quota (new pods ungated), a growth that does not fit the ClusterQueue's free quota is not
// attempted and the reason says why, a shrink updates the admitted Workload in place, a running non-elastic
// Job is not touched, and a queued one is resized before admission. Nothing trainscaler does suspends a job.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, type V1Job } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { readWorkload, workloadsOfJob } from '../../../lib/kueue/kueue-objects.js';
import type { JobRef, Plan } from '../../../lib/types.js';
import { planText } from '../../support/plan-text.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

const KUEUE = { group: 'kueue.x-k8s.io', version: 'v1beta2' };
const FLAVOR = process.env.TRAINSCALER_KUEUE_FLAVOR ?? 'default-flavor';
const GPU_QUOTA = 6;
let cluster: TestCluster;
let batch: BatchV1Api;
let ns = '';
let cq = '';
const quiet = () => undefined;
const SLOW = 180_000;
/** Suspensions counted once Kueue had admitted and resumed each job. */
let elasticBaseline = 0;
let fixedBaseline = 0;

function deps(): ActuatorDeps {
  return {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    clock: () => Math.floor(Date.now() / 1000),
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
    guardrails: { cooldownSeconds: 0, maxReplicaStep: 8 },
  };
}

function job(name: string, size: number, elastic: boolean): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      labels: { 'kueue.x-k8s.io/queue-name': 'lq' },
      annotations: {
        [ANNOTATION.managed]: 'true',
        [ANNOTATION.elastic]: 'true',
        [ANNOTATION.minReplicas]: '1',
        [ANNOTATION.maxReplicas]: '8',
        ...(elastic ? { 'kueue.x-k8s.io/elastic-job': 'true' } : {}),
      },
    },
    spec: {
      parallelism: size,
      completions: size,
      completionMode: 'Indexed',
      backoffLimit: 6,
      template: {
        spec: {
          restartPolicy: 'Never',
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
  (to: number) =>
  ({ view }: { view: { ref: JobRef; roles: { replicas: number }[] } }): Plan => ({
    ref: view.ref,
    policy: 'tuning',
    reason: `integration: ${view.roles[0]?.replicas} -> ${to} workers`,
    changes: [{ kind: 'replicas', role: 'Worker', from: view.roles[0]?.replicas ?? 0, to }],
  });

const ref = (name: string): JobRef => ({ kind: 'Job', namespace: ns, name });

async function runningPods(name: string): Promise<number> {
  const list = await cluster.admin.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `batch.kubernetes.io/job-name=${name}`,
  });
  return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp).length;
}

async function workloads(name: string) {
  const live = await batch.readNamespacedJob({ namespace: ns, name });
  const list: { items: KubeObject[] } = await cluster.admin.custom.listNamespacedCustomObject({
    ...KUEUE,
    plural: 'workloads',
    namespace: ns,
  });
  const items = list.items.map((w) => ({ ...w, kind: 'Workload' }));
  return workloadsOfJob(items, { kind: 'Job', uid: live.metadata?.uid ?? '' });
}

/** The admitted, unfinished Workload's count, once it is `count`. */
async function admittedAt(name: string, count: number): Promise<true | undefined> {
  const admitted = (await workloads(name)).filter((w) => w.admitted && !w.finished);
  return admitted.length === 1 && admitted[0]?.podSets[0]?.count === count ? true : undefined;
}

/** Suspensions of the job so far: the Job controller's Suspended Events (and Kueue's Stopped), counted. */
async function suspensions(name: string): Promise<number> {
  const events = await cluster.admin.core.listNamespacedEvent({
    namespace: ns,
    fieldSelector: `involvedObject.kind=Job,involvedObject.name=${name}`,
  });
  return events.items
    .filter((e) => e.reason === 'Suspended' || e.reason === 'Stopped')
    .reduce((n, e) => n + (e.count ?? 1), 0);
}

/**
 * No suspension since `baseline` (taken once Kueue had admitted and resumed the job: Kueue creates every job
 * suspended, which the Job controller records as one Suspended Event): the spec is not suspended, no new
 * Suspended/Stopped Event, and none of the namespace's Workloads is evicted.
 */
async function assertNotSuspendedSince(name: string, baseline: number): Promise<void> {
  const live = await batch.readNamespacedJob({ namespace: ns, name });
  assert.notEqual(live.spec?.suspend, true, `${name} is suspended`);
  assert.equal(await suspensions(name), baseline, `${name} was suspended after Kueue admitted it`);
  const list: { items: KubeObject[] } = await cluster.admin.custom.listNamespacedCustomObject({
    ...KUEUE,
    plural: 'workloads',
    namespace: ns,
  });
  for (const w of list.items)
    assert.equal(readWorkload(w).evicted, false, `Workload ${w.metadata.name} evicted`);
}

before(async () => {
  cluster = testCluster();
  batch = cluster.admin.kc.makeApiClient(BatchV1Api);
  ns = await createNamespace(cluster, 'ts-kueue');
  cq = `ts-kueue-${Date.now().toString(36)}`;
  await cluster.admin.custom.createClusterCustomObject({
    ...KUEUE,
    plural: 'clusterqueues',
    body: {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'ClusterQueue',
      metadata: { name: cq },
      spec: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
        resourceGroups: [
          {
            coveredResources: ['cpu', 'memory', 'nvidia.com/gpu'],
            flavors: [
              {
                name: FLAVOR,
                resources: [
                  { name: 'cpu', nominalQuota: '64' },
                  { name: 'memory', nominalQuota: '256Gi' },
                  { name: 'nvidia.com/gpu', nominalQuota: String(GPU_QUOTA) },
                ],
              },
            ],
          },
        ],
      },
    },
  });
  await cluster.admin.custom.createNamespacedCustomObject({
    ...KUEUE,
    plural: 'localqueues',
    namespace: ns,
    body: {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'LocalQueue',
      metadata: { name: 'lq' },
      spec: { clusterQueue: cq },
    },
  });
  await waitFor('ClusterQueue active', async () => {
    const q: KubeObject = await cluster.admin.custom.getClusterCustomObject({
      ...KUEUE,
      plural: 'clusterqueues',
      name: cq,
    });
    const conditions = (q.status as { conditions?: { type: string; status: string }[] } | undefined)
      ?.conditions;
    return conditions?.some((c) => c.type === 'Active' && c.status === 'True') ? true : undefined;
  });
});

after(async () => {
  await deleteNamespace(cluster, ns);
  await cluster.admin.custom
    .deleteClusterCustomObject({ ...KUEUE, plural: 'clusterqueues', name: cq })
    .catch(() => undefined);
});

describe(`Kueue v0.18.1: a ClusterQueue of ${GPU_QUOTA} GPUs`, () => {
  it('elastic Job: a scale-up that fits is admitted as a new slice; one that does not is not attempted; a shrink stays admitted', async () => {
    await batch.createNamespacedJob({ namespace: ns, body: job('elastic', 2, true) });
    await waitFor(
      'Kueue admits 2 pods, they run',
      async () =>
        (await admittedAt('elastic', 2)) && (await runningPods('elastic')) === 2 ? true : undefined,
      SLOW,
    );
    elasticBaseline = await suspensions('elastic');

    const grown = await actOnJob(ref('elastic'), resize(4), deps());
    assert.equal(grown.applied, true, grown.plan.reason);
    await waitFor(
      'the 4-pod slice admitted and 4 pods running',
      async () =>
        (await admittedAt('elastic', 4)) && (await runningPods('elastic')) === 4 ? true : undefined,
      SLOW,
    );
    await assertNotSuspendedSince('elastic', elasticBaseline);

    // 4 of 6 GPUs reserved: +4 does not fit.
    const before = await batch.readNamespacedJob({ namespace: ns, name: 'elastic' });
    const held = await actOnJob(ref('elastic'), resize(8), deps());
    assert.equal(held.applied, false);
    assert.equal(held.skipped, 'kueue');
    assert.match(
      planText(held.plan),
      new RegExp(`needs 4 more nvidia.com/gpu in flavor ${FLAVOR}, ClusterQueue ${cq} has 2 free`),
    );
    const unchanged = await batch.readNamespacedJob({ namespace: ns, name: 'elastic' });
    assert.equal(unchanged.metadata?.generation, before.metadata?.generation, 'nothing written');
    assert.deepEqual(unchanged.metadata?.annotations, before.metadata?.annotations, 'nothing written');

    const shrunk = await actOnJob(ref('elastic'), resize(3), deps());
    assert.equal(shrunk.applied, true, shrunk.plan.reason);
    await waitFor(
      'the admitted Workload at 3, 3 pods running',
      async () =>
        (await admittedAt('elastic', 3)) && (await runningPods('elastic')) === 3 ? true : undefined,
      SLOW,
    );
    await assertNotSuspendedSince('elastic', elasticBaseline);
  });

  it('a running non-elastic Job is not resized (Kueue would suspend it); a queued one is, before admission', async () => {
    await batch.createNamespacedJob({ namespace: ns, body: job('fixed', 1, false) });
    await waitFor(
      'fixed admitted and running',
      async () => ((await admittedAt('fixed', 1)) && (await runningPods('fixed')) === 1 ? true : undefined),
      SLOW,
    );
    fixedBaseline = await suspensions('fixed');
    const before = await batch.readNamespacedJob({ namespace: ns, name: 'fixed' });
    const held = await actOnJob(ref('fixed'), resize(2), deps());
    assert.equal(held.skipped, 'kueue');
    assert.match(planText(held.plan), /Kueue would suspend and requeue it/);
    const after = await batch.readNamespacedJob({ namespace: ns, name: 'fixed' });
    assert.equal(after.metadata?.generation, before.metadata?.generation, 'nothing written');
    await assertNotSuspendedSince('fixed', fixedBaseline);

    // 3 + 1 of 6 GPUs reserved: a 4-pod Job waits, suspended, for quota.
    await batch.createNamespacedJob({ namespace: ns, body: job('queued', 4, false) });
    await waitFor(
      'queued has a pending Workload',
      async () => {
        const [w] = await workloads('queued');
        return w && !w.quotaReserved ? true : undefined;
      },
      SLOW,
    );
    const tooBig = await actOnJob(ref('queued'), resize(5), deps());
    assert.equal(tooBig.skipped, 'kueue');
    assert.match(tooBig.plan.reason, /not attempted: the job would need .*5 nvidia.com\/gpu/);
    const fitted = await actOnJob(ref('queued'), resize(2), deps());
    assert.equal(fitted.applied, true, fitted.plan.reason);
    await waitFor(
      'queued admitted at 2 and running',
      async () => ((await admittedAt('queued', 2)) && (await runningPods('queued')) === 2 ? true : undefined),
      SLOW,
    );
    await assertNotSuspendedSince('fixed', fixedBaseline);
    await assertNotSuspendedSince('elastic', elasticBaseline);
  });
});
