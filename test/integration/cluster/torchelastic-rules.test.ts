// The torchelastic rules (lib/guardrails.ts) on the real control plane, as the trainscaler ServiceAccount:
// worker-0 of an elastic c10d PyTorchJob hosts the rendezvous store and is never evicted (a straggler on it is
// reported), and scale-downs stop while one of elasticPolicy.maxRestarts is left. Pods are kwok pods (they run
// no trainer); step times are RECORDED. The measured costs behind the rules are in README "A real elastic job".
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSubmit } from '../../../functions/submit.js';
import { type ActuatorDeps, actOnJob } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import { stateOfStatus } from '../../../lib/cluster/job-state.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { STRAGGLER_QUERY_STEP_SECONDS } from '../../../lib/policies/stragglers.js';
import type { JobRef, Plan, WorkerStepTimes } from '../../../lib/types.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { planText } from '../../support/plan-text.js';
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

let cluster: TestCluster;
let sa: KubernetesClusterClient;
let ns: string;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

before(async () => {
  cluster = testCluster();
  sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
  ns = await createNamespace(cluster, 'it-torchelastic');
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

async function runningJob(name: string, workers: number, maxRestarts?: number) {
  const body = elasticPyTorchJob({ name, namespace: ns, workers, min: 1, max: workers });
  const spec = body.spec as { elasticPolicy: Record<string, unknown> };
  if (maxRestarts !== undefined) spec.elasticPolicy = { ...spec.elasticPolicy, maxRestarts };
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    body,
  });
  return waitFor(`${workers} workers of ${name} running`, async () => {
    const pods = (await workerPods(cluster, ns, name)).filter((p) => p.status?.phase === 'Running');
    return pods.length === workers ? pods : undefined;
  });
}

/** Worker 0 twice as slow for its last 8 points, after 8 normal minutes. */
function worker0Straggling(job: string, now: number): WorkerStepTimes[] {
  return [0, 1, 2].map((worker) => ({
    worker,
    pod: `${job}-worker-${worker}`,
    samples: Array.from({ length: 40 }, (_, i) => ({
      at: now - (39 - i) * STRAGGLER_QUERY_STEP_SECONDS,
      stepTime: worker === 0 && i >= 32 ? 0.4 : 0.2,
    })),
  }));
}

describe('torchelastic rules on the real cluster', () => {
  it('a straggling worker-0 is reported, not evicted; a plan evicting it is refused by the guardrails', async () => {
    const running = await runningJob('store', 3);
    const uid0 = running.find((p) => p.metadata?.name === 'store-worker-0')?.metadata?.uid;
    assert.ok(uid0);
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'store' };
    const now = Math.floor(Date.now() / 1000);
    const key = `${ns}/store`;
    const deps: HandlerDeps = {
      cluster: sa,
      metrics: new RecordedMetricsSource(
        new Map([[key, wellScalingSamples(now)]]),
        new Map(),
        new Map([[key, worker0Straggling('store', now)]]),
      ),
      clock: () => now,
      config: DEFAULT_POLICY_CONFIG,
      dryRun: false,
      logger: quiet,
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    };
    const result = await handleAlarm(
      alertmanagerWebhook([{ namespace: ns, kind: 'PyTorchJob', name: 'store' }]),
      deps,
    );
    const reported = result.outcomes[0];
    assert.ok(reported, JSON.stringify(result.errors));
    assert.ok(!reported.plan.changes.some((c) => c.kind === 'evict-pod'), reported.plan.reason);
    assert.match(planText(reported.plan), /reported, not evicting: store-worker-0 is worker-0/);

    // Whatever policy made it, a plan naming worker-0 is refused before any write (the operator's status
    // updates bump the resourceVersion: compare what trainscaler writes, its annotations and the spec).
    const written = async () => {
      const obj = await sa.getJob(ref);
      return JSON.stringify([obj.metadata.annotations, obj.spec]);
    };
    const before = await written();
    const evict0 = (): Plan => ({
      ref,
      policy: 'fault',
      reason: 'forged',
      changes: [{ kind: 'evict-pod', pod: 'store-worker-0' }],
    });
    const refused = await actOnJob(ref, evict0, {
      cluster: sa,
      clock: () => now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    });
    assert.equal(refused.applied, false);
    assert.match(refused.plan.reason, /host of the job's c10d rendezvous store/);
    const pod0 = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: 'store-worker-0' });
    assert.equal(pod0.metadata?.uid, uid0, 'worker-0 untouched');
    assert.equal(pod0.metadata?.deletionTimestamp, undefined);
    assert.equal(await written(), before, 'the job was not written');
  });

  it('counts scale-downs in the state annotation and keeps the last of maxRestarts in reserve', async () => {
    await runningJob('budget', 3, 2);
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'budget' };
    let now = Math.floor(Date.now() / 1000);
    const deps: ActuatorDeps = {
      cluster: sa,
      clock: () => now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
      guardrails: { cooldownSeconds: 0 },
    };
    const shrink = (s: { view: { roles: { replicas: number }[] } }): Plan => {
      const from = s.view.roles[0]?.replicas ?? 0;
      return {
        ref,
        policy: 'rebalance',
        reason: 'room for a higher priority',
        changes: [{ kind: 'replicas', role: 'Worker', from, to: from - 1 }],
      };
    };
    const first = await actOnJob(ref, shrink, deps);
    assert.equal(first.applied, true, first.plan.reason);
    const job = await sa.getJob(ref);
    assert.equal(readJob(job).roles[0]?.replicas, 2);
    assert.equal(stateOfStatus((await sa.getJobState(ref))?.status).scaleDowns, 1);
    // The operator removes the highest index; wait until the 2 left are the running ones.
    await waitFor('budget-worker-2 gone', async () => {
      const pods = await workerPods(cluster, ns, 'budget');
      return pods.some((p) => p.metadata?.name === 'budget-worker-2') ? undefined : true;
    });
    now += 60;
    const held = await actOnJob(ref, shrink, deps);
    assert.equal(held.applied, false);
    assert.match(
      planText(held.plan),
      /1 of the job's maxRestarts 2 already spent on scale-downs.*reserve for a real failure/,
    );
    assert.equal(readJob(await sa.getJob(ref)).roles[0]?.replicas, 2);
  });

  it('on submit, sets the recommended rendezvous settings where the job allows it; the API server takes them', async () => {
    const body = elasticPyTorchJob({
      name: 'tuned',
      namespace: ns,
      workers: 1,
      min: 1,
      max: 2,
      annotations: { [ANNOTATION.tuneRendezvous]: 'true' },
    });
    await cluster.admin.custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      body,
    });
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'tuned' };
    const deps: HandlerDeps = {
      cluster: sa,
      metrics: new RecordedMetricsSource(new Map(), new Map(), new Map()),
      clock: () => Math.floor(Date.now() / 1000),
      config: DEFAULT_POLICY_CONFIG,
      dryRun: false,
      logger: quiet,
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    };
    const outcome = (await handleSubmit(ref, deps)).outcomes[0];
    assert.equal(outcome?.applied, true, outcome?.plan.reason);
    const job = await sa.getJob(ref);
    const te = readJob(job).torchElastic;
    assert.equal(te?.rdzvConf.last_call_timeout, '2');
    assert.equal(te?.monitorInterval, '1');
    assert.match(job.metadata.annotations?.[ANNOTATION.lastDecision] ?? '', /rendezvous/);
  });
});
