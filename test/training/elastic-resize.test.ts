// A real elastic job, really rescaled: the example PyTorchJob (infra/examples/elastic-trainer/pytorchjob.yaml)
// runs `python3 -m trainscaler_hook.launch train.py` (torchrun with cheaper rescales) on the test cluster's
// host node (infra/cluster/host-node-agent: its pods are real processes) under the real training-operator.
// trainscaler's actuator, as the trainscaler ServiceAccount and through the same guarded patch path the alarm
// function uses, grows it from 1 to 2 workers and shrinks it
// back; the operator creates / deletes the pod, the node agent starts / stops it, torchelastic re-forms the
// world. Asserted from the trainer's own step logs: a step at world size 2, the job Succeeded, every sample of
// the epoch processed exactly once, no step lost beyond the last checkpoint. The pause of each resize is
// measured from the same logs and printed. Needs Debian's python3-torch (npm run setup) and a root shell
// (the host node); every wait is bounded.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { V1EnvVar, V1Pod } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { type ActuatorDeps, actOnJob, type Outcome } from '../../lib/actuator.js';
import { readJob } from '../../lib/adapters/job-adapter.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../lib/cluster/kubernetes-cluster-client.js';
import type { JobRef, Plan } from '../../lib/types.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from '../integration/support/test-cluster.js';
import {
  committedSamples,
  readStepLogs,
  rescalePause,
  type StepRecord,
} from '../support/elastic-train-logs.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MANIFEST = join(REPO_ROOT, 'infra', 'examples', 'elastic-trainer', 'pytorchjob.yaml');
const HOST_NODE = 'host-node-0';
const JOB = 'elastic';
const DATASET_SIZE = 6_144;
const EPOCHS = 2;
const CHECKPOINT_EVERY = 20;
/** Bounds: a rescale pause is 3-20 s here; starting a pod (warm server importing torch) takes a few seconds. */
const RESCALE_TIMEOUT_MS = 120_000;
const FINISH_TIMEOUT_MS = 240_000;

let cluster: TestCluster;
let namespace: string;
let dir: string;
let ref: JobRef;
let deps: ActuatorDeps;
const logLines: string[] = [];

const steps = (): StepRecord[] => readStepLogs(join(dir, 'logs'));

/** The example manifest, with this run's namespace, log and checkpoint directories and pace. */
function jobManifest(): Record<string, unknown> {
  const job = load(readFileSync(MANIFEST, 'utf8')) as {
    metadata: { name: string; namespace?: string; annotations: Record<string, string> };
    spec: { pytorchReplicaSpecs: { Worker: { template: { spec: { containers: { env: V1EnvVar[] }[] } } } } };
  };
  job.metadata.name = JOB;
  job.metadata.namespace = namespace;
  const container = job.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0];
  assert.ok(container, 'the example manifest has a pytorch container');
  const overrides: Record<string, string> = {
    TRAIN_LOG_DIR: join(dir, 'logs'),
    TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
    TRAIN_DATASET_SIZE: String(DATASET_SIZE),
    TRAIN_EPOCHS: String(EPOCHS),
    TRAIN_CHECKPOINT_EVERY: String(CHECKPOINT_EVERY),
    TRAIN_MIN_STEP_SECONDS: '0.05',
  };
  container.env = [
    ...container.env.filter((e) => !(e.name in overrides)),
    ...Object.entries(overrides).map(([name, value]) => ({ name, value })),
  ];
  return job as unknown as Record<string, unknown>;
}

/** A hand-built Plan for the Worker role, written by the actuator exactly as the alarm function writes one. */
function resize(to: number, reason: string): Promise<Outcome> {
  return actOnJob(
    ref,
    (snapshot): Plan => {
      const from = snapshot.view.roles.find((r) => r.role === 'Worker')?.replicas ?? 0;
      return { ref, policy: 'tuning', reason, changes: [{ kind: 'replicas', role: 'Worker', from, to }] };
    },
    deps,
  );
}

async function stepsAt(world: number, after: number, count: number): Promise<void> {
  await waitFor(
    `${count} steps at world size ${world}`,
    async () => (steps().filter((r) => r.world === world && r.t >= after).length >= count ? true : undefined),
    RESCALE_TIMEOUT_MS,
  );
}

async function pauseAfter(
  from: number,
  to: number,
  after: number,
): Promise<{ pause: number; firstStep: number }> {
  return waitFor(
    `the first step at world size ${to}`,
    async () => {
      const records = steps();
      const pause = rescalePause(records, from, to, after);
      const first = records.find((r) => r.t >= after && r.world === to);
      return pause === undefined || !first ? undefined : { pause, firstStep: first.t - after };
    },
    RESCALE_TIMEOUT_MS,
  );
}

async function jobCondition(): Promise<string | undefined> {
  const job = (await cluster.admin.custom.getNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    name: JOB,
  })) as { status?: { conditions?: { type: string; status: string }[] } };
  const done = job.status?.conditions?.find(
    (c) => (c.type === 'Succeeded' || c.type === 'Failed') && c.status === 'True',
  );
  return done?.type;
}

function podLog(pod: string): string {
  const stateDir = join(dirname(cluster.adminKubeconfig), 'host-node', 'logs');
  try {
    return readFileSync(join(stateDir, `${namespace}_${pod}_pytorch.log`), 'utf8').slice(-4000);
  } catch {
    return '(no log)';
  }
}

before(async () => {
  cluster = testCluster();
  const nodes = await cluster.admin.core.listNode({ labelSelector: 'trainscaler.io/host-node=true' });
  assert.ok(
    nodes.items.some((n) => n.metadata?.name === HOST_NODE),
    `no host node ${HOST_NODE} in the test cluster: infra/cluster/up.sh starts it only as root (TRAINSCALER_HOST_NODE)`,
  );
  namespace = await createNamespace(cluster, 'training');
  dir = mkdtempSync(join(tmpdir(), 'trainscaler-training-'));
  ref = { kind: 'PyTorchJob', namespace, name: JOB };
  const logger = {
    info: (o: object, m?: string) => logLines.push(`${m ?? ''} ${JSON.stringify(o)}`),
    warn: (o: object, m?: string) => logLines.push(`WARN ${m ?? ''} ${JSON.stringify(o)}`),
    error: (o: object, m?: string) => logLines.push(`ERROR ${m ?? ''} ${JSON.stringify(o)}`),
  };
  deps = {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    clock: () => Date.now() / 1000,
    dryRun: false,
    logger,
    namespaceAllowlist: [],
    // The production cool-down (300 s) would hold the shrink for five minutes; the test's resizes are
    // ~30 s apart, and the cool-down itself is checked below with this setting.
    guardrails: { cooldownSeconds: 15 },
  };
});

after(async () => {
  if (namespace) {
    await deleteNamespace(cluster, namespace);
    // The node agent stops the pods' processes before the pods go: wait for that, bounded.
    await waitFor(
      'the job pods to be gone',
      async () => ((await workerPods(cluster, namespace, JOB)).length === 0 ? true : undefined),
      60_000,
    ).catch((error: Error) => console.log(`  cleanup: ${error.message}`));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('an elastic PyTorchJob on the host node grows 1 -> 2 and shrinks 2 -> 1 under the actuator, losing no sample', async () => {
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    body: jobManifest(),
  });
  const worker0 = await waitFor(
    'worker-0 Running on the host node',
    async () => {
      const pod = (await workerPods(cluster, namespace, JOB)).find(
        (p) => p.metadata?.name === `${JOB}-worker-0`,
      );
      return pod?.status?.phase === 'Running' ? pod : undefined;
    },
    RESCALE_TIMEOUT_MS,
  );
  assert.equal(worker0.spec?.nodeName, HOST_NODE);
  const node = await cluster.admin.core.readNode({ name: HOST_NODE });
  const gateway = node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address ?? '';
  const subnet = gateway.split('.').slice(0, 3).join('.');
  assert.ok(
    worker0.status?.podIP?.startsWith(`${subnet}.`),
    `pod IP ${worker0.status?.podIP} in ${subnet}.0/24`,
  );
  await stepsAt(1, 0, 20).catch((error: Error) => {
    throw new Error(`${error.message}\n${podLog(`${JOB}-worker-0`)}`);
  });

  // Grow: the operator creates worker-1, the node agent runs it, torchelastic re-forms the world at 2.
  const grownAt = Date.now() / 1000;
  const grow = await resize(2, 'training test: grow to 2 workers');
  assert.equal(grow.applied, true, `grow not applied: ${JSON.stringify(grow)}\n${logLines.join('\n')}`);
  const up = await pauseAfter(1, 2, grownAt).catch((error: Error) => {
    throw new Error(`${error.message}\n${podLog(`${JOB}-worker-0`)}\n${podLog(`${JOB}-worker-1`)}`);
  });
  // The cool-down guard on the same path: a shrink right after the grow is dropped, nothing written.
  const early = await resize(1, 'training test: shrink too early');
  assert.equal(early.applied, false);
  assert.match(early.plan.reason, /cool-down/);
  const pods = await workerPods(cluster, namespace, JOB);
  assert.deepEqual(pods.map((p) => p.metadata?.name).sort(), [`${JOB}-worker-0`, `${JOB}-worker-1`]);
  const ips = pods.map((p) => p.status?.podIP);
  assert.equal(new Set(ips).size, 2, `each pod has its own address: ${ips.join(', ')}`);
  await stepsAt(2, grownAt, 40);
  // Each pod's sidecar (a native sidecar container) gets the trainer's progress over the pod's own loopback
  // and serves it on podIP:9470, where Prometheus scrapes it in a cluster.
  for (const pod of pods) {
    const name = pod.metadata?.name ?? '';
    const reported = await waitFor(
      `steps on http://${pod.status?.podIP}:9470/metrics (${name}'s sidecar)`,
      async () => {
        const res = await fetch(`http://${pod.status?.podIP}:9470/metrics`, {
          signal: AbortSignal.timeout(2000),
        });
        const line = (await res.text())
          .split('\n')
          .find((l) => l.startsWith('trainscaler_steps_total{') && l.includes(`pod="${name}"`));
        const value = Number(line?.split(' ').at(-1));
        return value > 0 ? value : undefined;
      },
      30_000,
    );
    assert.ok(reported > 0);
  }
  await new Promise((r) => setTimeout(r, Math.max(0, grownAt + 16 - Date.now() / 1000) * 1000));

  // Shrink: the operator deletes the highest index, the node agent SIGTERMs it, the world re-forms at 1.
  const shrunkAt = Date.now() / 1000;
  const shrink = await resize(1, 'training test: shrink to 1 worker');
  assert.equal(shrink.applied, true, `shrink not applied: ${JSON.stringify(shrink)}\n${logLines.join('\n')}`);
  const down = await pauseAfter(2, 1, shrunkAt).catch((error: Error) => {
    throw new Error(`${error.message}\n${podLog(`${JOB}-worker-0`)}`);
  });
  await waitFor(
    'worker-1 removed (SIGTERM, then the pod deleted by the node agent)',
    async () => ((await workerPods(cluster, namespace, JOB)).length === 1 ? true : undefined),
    60_000,
  );

  const outcome = await waitFor('the job to finish', jobCondition, FINISH_TIMEOUT_MS).catch(
    (error: Error) => {
      throw new Error(`${error.message}\n${podLog(`${JOB}-worker-0`)}`);
    },
  );
  assert.equal(outcome, 'Succeeded', podLog(`${JOB}-worker-0`));
  const last: V1Pod | undefined = (await workerPods(cluster, namespace, JOB))[0];
  assert.equal(last?.status?.phase, 'Succeeded');
  // The rescales happen inside torchrun: the node agent never had to restart the container.
  assert.equal(last?.status?.containerStatuses?.[0]?.restartCount, 0);
  // The sidecar was stopped once the trainer had finished, which let the pod complete.
  assert.ok(
    last?.status?.initContainerStatuses?.[0]?.state?.terminated,
    'the sidecar stopped after the trainer',
  );

  const records = steps();
  assert.ok(
    records.some((r) => r.world === 2),
    'a step at world size 2',
  );
  const epochs = committedSamples(records);
  assert.deepEqual(
    [...epochs.keys()].sort(),
    Array.from({ length: EPOCHS }, (_, i) => i),
  );
  for (const [n, epoch] of epochs) {
    assert.deepEqual(epoch.duplicates, [], `no sample committed twice in epoch ${n}`);
    assert.deepEqual(
      [...epoch.ids].sort((a, b) => a - b),
      Array.from({ length: DATASET_SIZE }, (_, i) => i),
      `every sample of epoch ${n} exactly once`,
    );
  }
  // Steps logged by one world and done again by a later one were lost: at most the steps since a checkpoint.
  const byStep = new Map<number, Set<number>>();
  for (const r of records) byStep.set(r.step, (byStep.get(r.step) ?? new Set()).add(r.worldId));
  const redone = [...byStep.values()].filter((worlds) => worlds.size > 1).length;
  const worlds = new Set(records.map((r) => r.worldId)).size;
  assert.ok(redone <= CHECKPOINT_EVERY * (worlds - 1), `${redone} steps redone across ${worlds} worlds`);
  const committed = [...byStep.keys()].sort((a, b) => a - b);
  assert.deepEqual(
    committed,
    Array.from({ length: committed.length }, (_, i) => i + 1),
    'no step number skipped',
  );

  // The audit trail the actuator leaves: the decision's reason on the job.
  const job = readJob(await deps.cluster.getJob(ref));
  assert.equal(job.roles.find((r) => r.role === 'Worker')?.replicas, 1);
  assert.match(JSON.stringify(await deps.cluster.getJob(ref)), /training test: shrink to 1 worker/);

  console.log(
    `  rescale pauses (last step at the old size -> first at the new, from the step logs): ` +
      `scale-up 1->2 ${up.pause.toFixed(1)} s, scale-down 2->1 ${down.pause.toFixed(1)} s`,
  );
  console.log(
    `  patch -> first step at the new size: scale-up ${up.firstStep.toFixed(1)} s, scale-down ${down.firstStep.toFixed(1)} s; ` +
      `${committed.length} steps, ${worlds} worlds, ${redone} steps redone, ${EPOCHS} epochs of ${DATASET_SIZE} samples once each`,
  );
});
