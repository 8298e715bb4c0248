// The handlers under a TrainingAutoscaler on the real control plane, as trainscaler's ServiceAccount: an
// alert on an elastic PyTorchJob under a Recommend policy writes the recommendation into the job's
// ScaledTrainingJob status and leaves the job's replicas as they were; the policy switched to Auto with
// maxWorkers 2 grows the job to 2, not to the 3 its elasticPolicy allows; `kubectl get stj` shows it.
// Needs TRAINSCALER_KUBECONFIG (bash infra/cluster/with-cluster.sh ... starts the cluster).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { handleAlarm } from '../../../functions/alarm.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { jobStateName } from '../../../lib/cluster/job-state.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { TRAINING_AUTOSCALER_RESOURCE } from '../../../lib/training-autoscaler.js';
import type { JobRef } from '../../../lib/types.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { RecordedMetricsSource, wellScalingSamples } from '../support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from '../support/test-cluster.js';

const skip = process.env.TRAINSCALER_KUBECONFIG
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (bash infra/cluster/with-cluster.sh starts the cluster)';
const CRDS = [
  'infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml',
  'infra/k8s/crds/trainscaler.io_scaledtrainingjobs.yaml',
];
const POLICIES = {
  group: TRAINING_AUTOSCALER_RESOURCE.group,
  version: TRAINING_AUTOSCALER_RESOURCE.version,
  plural: TRAINING_AUTOSCALER_RESOURCE.plural,
};

let cluster: TestCluster;
let sa: KubernetesClusterClient;
let ns = '';

const kubectl = (...args: string[]) =>
  execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });

function workerReplicas(job: KubeObject): number | undefined {
  return (job.spec as { pytorchReplicaSpecs?: { Worker?: { replicas?: number } } }).pytorchReplicaSpecs
    ?.Worker?.replicas;
}

async function stateStatus(name: string): Promise<Record<string, unknown> | undefined> {
  const state = await sa.getJobState({ kind: 'PyTorchJob', namespace: ns, name });
  return state?.status as Record<string, unknown> | undefined;
}

describe('handlers under a TrainingAutoscaler on the real control plane', { skip }, () => {
  before(async () => {
    cluster = testCluster();
    // The manifests under test (up.sh applied them when the cluster started, maybe from an older tree).
    for (const crd of CRDS) kubectl('apply', '--server-side', '--force-conflicts', '-f', crd);
    kubectl('apply', '-f', 'infra/k8s/trainingautoscalers-rbac.yaml');
    for (const crd of ['trainingautoscalers', 'scaledtrainingjobs'])
      kubectl('wait', '--for', 'condition=established', '--timeout', '60s', `crd/${crd}.trainscaler.io`);
    sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
    ns = await createNamespace(cluster, 'it-policy');
  });

  after(async () => {
    if (ns) await deleteNamespace(cluster, ns);
  });

  it('Recommend records the recommendation and leaves the job; Auto with maxWorkers 2 grows it to 2', async () => {
    const name = 'grow';
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name };
    // A known remaining time (target and progress): unbounded, the growth rule takes it to its maximum, 3.
    const job = elasticPyTorchJob({
      name,
      namespace: ns,
      workers: 1,
      min: 1,
      max: 3,
      annotations: { 'trainscaler.io/target-samples': '100000000' },
    });
    // Opted in by the policy alone.
    delete (job.metadata.annotations as Record<string, string>)['trainscaler.io/managed'];
    await cluster.admin.custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      body: job,
    });
    await waitFor('1 worker running', async () => {
      const pods = (await workerPods(cluster, ns, name)).filter((p) => p.status?.phase === 'Running');
      return pods.length === 1 ? pods : undefined;
    });
    await cluster.admin.custom.createNamespacedCustomObject({
      ...POLICIES,
      namespace: ns,
      body: {
        apiVersion: `${POLICIES.group}/${POLICIES.version}`,
        kind: TRAINING_AUTOSCALER_RESOURCE.kind,
        metadata: { name: 'grow-policy' },
        spec: { targetRef: { kind: 'PyTorchJob', name }, mode: 'Recommend' },
      },
    });
    const quiet = () => undefined;
    const deps = (): HandlerDeps => ({
      cluster: sa,
      metrics: new RecordedMetricsSource(
        new Map([[`${ns}/${name}`, wellScalingSamples(Math.floor(Date.now() / 1000))]]),
        new Map([[`${ns}/${name}`, 1000]]),
      ),
      clock: () => Math.floor(Date.now() / 1000),
      config: DEFAULT_POLICY_CONFIG,
      dryRun: false,
      logger: { info: quiet, warn: quiet, error: quiet },
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    });
    const alert = alertmanagerWebhook([{ namespace: ns, kind: 'PyTorchJob', name }]);

    const original = await sa.getJob(ref);
    const recommended = await handleAlarm(alert, deps());
    assert.deepEqual(recommended.errors, []);
    assert.equal(recommended.outcomes[0]?.skipped, 'recommend', recommended.outcomes[0]?.plan.reason);
    const job1 = await sa.getJob(ref);
    assert.equal(workerReplicas(job1), 1, 'the job is not written');
    assert.equal(job1.metadata.annotations?.['trainscaler.io/last-decision'], undefined);
    const status = await stateStatus(name);
    assert.deepEqual(status?.recommendation && { ...(status.recommendation as object), at: 0 }, {
      workers: 3,
      reason: recommended.outcomes[0]?.plan.reason,
      at: 0,
    });
    assert.deepEqual(status?.policy, {
      name: 'grow-policy',
      mode: 'Recommend',
      minWorkers: 1,
      maxWorkers: 3,
    });
    assert.equal(status?.desiredWorkers, 3);
    assert.ok(Array.isArray(status?.conditions) && status.conditions.length === 3);
    // Only the job's own controller wrote it since (its status), never its spec or annotations.
    assert.equal(job1.metadata.generation, original.metadata.generation);

    // `kubectl get stj` shows it as a tenant sees it: min, max, current, desired, mode.
    const table = kubectl('get', 'stj', '-n', ns, jobStateName('PyTorchJob', name));
    const [head = '', row = ''] = table.trimEnd().split('\n');
    const cells = row.split(/\s+/);
    const at = (column: string) => cells[head.split(/\s{2,}/).indexOf(column)];
    assert.equal(at('TARGET'), name, table);
    assert.equal(at('MIN'), '1', table);
    assert.equal(at('MAX'), '3', table);
    assert.equal(at('DESIRED'), '3', table);
    assert.equal(at('MODE'), 'Recommend', table);

    // Switched to Auto, bounded at 2 workers.
    await cluster.admin.custom.patchNamespacedCustomObject(
      {
        ...POLICIES,
        namespace: ns,
        name: 'grow-policy',
        body: { spec: { mode: 'Auto', maxWorkers: 2 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const applied = await handleAlarm(alert, deps());
    assert.deepEqual(applied.errors, []);
    assert.equal(applied.outcomes[0]?.applied, true, applied.outcomes[0]?.plan.reason);
    assert.equal(workerReplicas(await sa.getJob(ref)), 2, 'grown to the policy maximum, not past it');
    const grown = await stateStatus(name);
    assert.deepEqual(grown?.policy, { name: 'grow-policy', mode: 'Auto', minWorkers: 1, maxWorkers: 2 });
    assert.equal(grown?.desiredWorkers, 2);
    assert.equal(
      grown?.recommendation,
      undefined,
      'under Auto there is no recommendation, only the decision',
    );
  });

  it("each policy's status, from the schedule tick: jobs governed, Ready, Conflict, the generation read; no rewrite when unchanged", async () => {
    const create = (plural: string, group: string, body: object) =>
      cluster.admin.custom.createNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: ns,
        plural,
        body,
      });
    for (const [name, labels] of [
      ['shared', { team: 'nlp', tier: 'gold' }],
      ['solo', { team: 'vision' }],
    ] as const) {
      const job = elasticPyTorchJob({ name, namespace: ns, workers: 1, min: 1, max: 2 });
      delete (job.metadata.annotations as Record<string, string>)['trainscaler.io/managed'];
      await create('pytorchjobs', 'kubeflow.org', { ...job, metadata: { ...job.metadata, labels } });
    }
    const policy = (name: string, spec: object) =>
      cluster.admin.custom.createNamespacedCustomObject({
        ...POLICIES,
        namespace: ns,
        body: {
          apiVersion: `${POLICIES.group}/${POLICIES.version}`,
          kind: TRAINING_AUTOSCALER_RESOURCE.kind,
          metadata: { name },
          spec: { mode: 'Recommend', ...spec },
        },
      });
    await policy('by-team', { selector: { matchLabels: { team: 'nlp' } } });
    await policy('by-tier', { selector: { matchLabels: { tier: 'gold' } } });
    await policy('solo', { selector: { matchLabels: { team: 'vision' } } });
    const quiet = () => undefined;
    const deps: HandlerDeps = {
      cluster: sa,
      metrics: new RecordedMetricsSource(new Map(), new Map()),
      clock: () => Math.floor(Date.now() / 1000),
      config: DEFAULT_POLICY_CONFIG,
      dryRun: false,
      logger: { info: quiet, warn: quiet, error: quiet },
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    };
    const read = async (name: string) =>
      (await cluster.admin.custom.getNamespacedCustomObject({ ...POLICIES, namespace: ns, name })) as {
        metadata: { resourceVersion: string; generation: number };
        status?: {
          matchedJobs?: number;
          observedGeneration?: number;
          conditions?: { type: string; status: string; message: string }[];
        };
      };
    const condition = async (name: string, type: string) =>
      (await read(name)).status?.conditions?.find((c) => c.type === type);

    await handleSchedule(scheduledEvent(), deps);
    assert.equal((await read('solo')).status?.matchedJobs, 1);
    assert.equal((await read('solo')).status?.observedGeneration, 1);
    assert.equal((await condition('solo', 'Ready'))?.status, 'True');
    assert.equal((await condition('solo', 'Conflict'))?.status, 'False');
    for (const name of ['by-team', 'by-tier']) {
      assert.equal((await read(name)).status?.matchedJobs, 0, name);
      const conflict = await condition(name, 'Conflict');
      assert.equal(conflict?.status, 'True', name);
      assert.match(conflict?.message ?? '', new RegExp(`PyTorchJob ${ns}/shared`));
    }
    // `kubectl get tsa` shows the count.
    const table = kubectl('get', 'tsa', '-n', ns, 'solo');
    const [head = '', row = ''] = table.trimEnd().split('\n');
    // Columns by position: TARGET and MAX are empty for a selector policy without maxWorkers.
    assert.equal(row.slice(head.indexOf('JOBS')).trim().split(/\s+/)[0], '1', table);

    // A tick that finds nothing changed writes nothing.
    const before = (await read('solo')).metadata.resourceVersion;
    await handleSchedule(scheduledEvent(), deps);
    assert.equal((await read('solo')).metadata.resourceVersion, before, 'not rewritten');

    // The tenant narrows by-tier to another tier: generation 2, read on the next tick; the conflict is gone.
    await cluster.admin.custom.patchNamespacedCustomObject(
      {
        ...POLICIES,
        namespace: ns,
        name: 'by-tier',
        body: { spec: { selector: { matchLabels: { tier: 'silver' } } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await handleSchedule(scheduledEvent(), deps);
    assert.equal((await read('by-tier')).status?.observedGeneration, 2);
    assert.equal((await condition('by-tier', 'Conflict'))?.status, 'False');
    assert.equal((await read('by-team')).status?.matchedJobs, 1);
  });
});
