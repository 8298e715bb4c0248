// A real elastic job, scaled by trainscaler end to end. The example PyTorchJob
// (infra/examples/elastic-trainer/pytorchjob.yaml) runs `python3 -m trainscaler_hook.launch train.py`
// (torchrun with cheaper rescales: infra/sidecar/python/trainscaler_hook/launch.py) on the test cluster's host node
// (infra/cluster/host-node-agent: its pods are real processes) under the real training-operator, at 1 worker.
//
// Grow, through the production metrics path: each pod's sidecar (its second container, podIP:9470) serves
// the trainer's real progress; a real Prometheus scrapes the pods with infra/prometheus/prometheus.yml's scrape
// job and evaluates infra/prometheus/rules; a real Alertmanager routes with infra/prometheus/alertmanager.yml to
// the alarm function's webhook (functions/alertmanager-http.ts, as `trainscaler run` serves it), which reads the
// job's metrics back from that Prometheus and decides. What makes an alert fire is real: worker-0's trainer is
// CPU-throttled (infra/local-stack/cpu-throttle.ts, a named stand-in for a CFS quota), its throughput per worker
// drops, and TrainscalerLowThroughputPerWorker fires; the review's tuning policy grows the job 1 -> 2.
// Shrink, through the schedule: a higher-priority job (a PriorityClass that does not preempt) waits for room on
// the host node; the schedule handler (functions/schedule.ts) shrinks the elastic job 2 -> 1 to admit it; the
// operator deletes worker-1, the node agent SIGTERMs it, the urgent job runs, the elastic job completes.
//
// Test-time timing, and nothing else, differs from production: the rule and Alertmanager durations are divided
// by TIME_FACTOR (infra/local-stack/time-compression.ts: `for: 10m` -> 20 s, `[5m]` -> 10 s, group_wait
// 30 s -> 1 s; expressions and thresholds untouched), the sidecars average step times over 4 s instead of 60 s,
// the metrics are read at 2 s resolution, and the cool-down is 40 s instead of 300 s.
//
// Asserted: the grow came from the alarm function on that alert, the shrink from the schedule to admit the
// urgent job, each decision's reason on the job (annotation) and in an Event; the job Succeeded; every sample
// of each epoch processed exactly once (the trainer logs sample ids); no step lost beyond the last checkpoint;
// the throughput after each resize within the model's 90% prediction interval (lib/model/prediction-interval.ts),
// or the decision's reason says why not. Pauses and figures are printed. Needs the pinned PyPI torch's venv
// (infra/local-stack/torch-python.ts; TORCH_PYTHON overrides), prometheus and prometheus-alertmanager (npm run
// setup) and a root shell (the host node); every wait is bounded.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { SchedulingV1Api, type V1Pod } from '@kubernetes/client-node';
import { createAlertmanagerServer } from '../../functions/alertmanager-http.js';
import type { HandlerDeps, HandlerResult, Outcome } from '../../functions/handler-deps.js';
import { handleSchedule } from '../../functions/schedule.js';
import { type Throttle, throttle, trainerPids } from '../../infra/local-stack/cpu-throttle.js';
import {
  EXAMPLE_LOCAL_BATCH,
  exampleJobManifest,
  followPodTargets,
  HOST_NODE,
} from '../../infra/local-stack/elastic-job.js';
import { type MonitoringStack, startMonitoring } from '../../infra/local-stack/monitoring.js';
import { monitoringBinaries, stop } from '../../infra/local-stack/processes.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { cpuToMillis } from '../../lib/adapters/quantity.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { observeJob } from '../../lib/decisions/runtime-review.js';
import { PrometheusMetricsSource } from '../../lib/metrics/prometheus-metrics-source.js';
import { fitRuntimeModel } from '../../lib/model/observed-bound.js';
import {
  placeInInterval,
  predictionInterval,
  type ThroughputInterval,
} from '../../lib/model/prediction-interval.js';
import type { JobRef } from '../../lib/types.js';
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
  type MeasuredThroughput,
  readStepLogs,
  rescalePause,
  type StepRecord,
  throughputAt,
} from '../support/elastic-train-logs.js';

const JOB = 'elastic';
const URGENT = 'urgent';
const LOCAL_BATCH = EXAMPLE_LOCAL_BATCH;
const DATASET_SIZE = 16_384;
const EPOCHS = 2;
const CHECKPOINT_EVERY = 20;
/** The trainer paces its steps to at least this long, so its speed depends little on the machine's load. */
const STEP_PACE_SECONDS = 0.1;
/** 1 minute of the production rules and Alertmanager timers lasts 2 s here. */
const TIME_FACTOR = 30;
const COOLDOWN_SECONDS = 40;
const COVERAGE = 0.9;
const WEBHOOK_TOKEN = 'training-webhook-token-7c6b5a4d3e';
/** Bounds: a rescale pause is 3-20 s here; starting a pod (warm server importing torch) takes a few seconds. */
const RESCALE_TIMEOUT_MS = 120_000;
const ALERT_TIMEOUT_MS = 150_000;
const FINISH_TIMEOUT_MS = 420_000;

let cluster: TestCluster;
let namespace: string;
let dir: string;
let ref: JobRef;
let deps: HandlerDeps;
let monitoring: MonitoringStack | undefined;
let alarmServer: Server | undefined;
let throttled: Throttle | undefined;
let priorityClass: string | undefined;
const cordoned: string[] = [];
let targets: { stop(): Promise<void> } | undefined;
const logLines: string[] = [];
const alarms: { at: number; alertnames: string[]; result: HandlerResult }[] = [];

const steps = (): StepRecord[] => readStepLogs(join(dir, 'logs'));
const now = () => Date.now() / 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const scheduling = () => cluster.admin.kc.makeApiClient(SchedulingV1Api);

/** The example manifest, with this run's namespace, log and checkpoint directories, pace and sidecar window. */
function jobManifest(): Record<string, unknown> {
  return exampleJobManifest({
    name: JOB,
    namespace,
    trainer: {
      TRAIN_LOG_DIR: join(dir, 'logs'),
      TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
      TRAIN_DATASET_SIZE: String(DATASET_SIZE),
      TRAIN_EPOCHS: String(EPOCHS),
      TRAIN_CHECKPOINT_EVERY: String(CHECKPOINT_EVERY),
      TRAIN_LOCAL_BATCH: String(LOCAL_BATCH),
      TRAIN_MIN_STEP_SECONDS: String(STEP_PACE_SECONDS),
    },
    // The production window (60 s) replayed TIME_FACTOR-ish faster, as the rules are.
    sidecarWindowSeconds: 4,
  });
}

/** What the scheduler reserves for a pod: its containers plus its native sidecars (restartPolicy Always). */
function schedulerCpuMillis(pod: V1Pod): number {
  const containers = [
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
  ];
  return containers.reduce((sum, c) => sum + cpuToMillis(String(c.resources?.requests?.cpu ?? '0')), 0);
}

/** A one-worker PyTorchJob at a higher priority that only fits on the host node once a worker leaves it. */
function urgentJob(cpuMillis: number, className: string): Record<string, unknown> {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name: URGENT, namespace },
    spec: {
      pytorchReplicaSpecs: {
        Worker: {
          replicas: 1,
          restartPolicy: 'Never',
          template: {
            spec: {
              priorityClassName: className,
              nodeSelector: { 'trainscaler.io/host-node': 'true' },
              tolerations: [{ key: 'trainscaler.io/host-node', operator: 'Exists', effect: 'NoSchedule' }],
              terminationGracePeriodSeconds: 5,
              containers: [
                {
                  name: 'pytorch',
                  image: 'host',
                  command: ['sleep', '3'],
                  resources: { requests: { cpu: `${cpuMillis}m`, memory: '16Mi' } },
                },
              ],
            },
          },
        },
      },
    },
  };
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

async function jobCondition(name: string): Promise<string | undefined> {
  const job = (await cluster.admin.custom.getNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    name,
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

function diagnostics(): string {
  const alarmText = alarms
    .map(
      (a) =>
        `  alarm at +${(a.at - startedAt).toFixed(0)} s ${a.alertnames.join(',')}: ` +
        a.result.outcomes.map((o) => `${o.applied ? 'APPLIED' : 'kept'} ${o.plan.reason}`).join(' | ') +
        (a.result.errors.length ? ` errors ${JSON.stringify(a.result.errors)}` : ''),
    )
    .join('\n');
  const processes = (monitoring?.processes ?? []).map((p) => `--- ${p.name}\n${p.output().slice(-1500)}`);
  return [
    `alarms:\n${alarmText}`,
    `log:\n${logLines.slice(-30).join('\n')}`,
    `--- worker-0\n${podLog(`${JOB}-worker-0`)}`,
    `--- worker-1\n${podLog(`${JOB}-worker-1`)}`,
    ...processes,
  ].join('\n');
}

/**
 * The model the decision at `at` used, refitted on what Prometheus held then (the same query, window and
 * resolution as the handler's), and its prediction interval at `replicas` workers on the host node.
 */
async function intervalAt(at: number, replicas: number): Promise<ThroughputInterval> {
  if (!monitoring) throw new Error('no Prometheus');
  const source = new PrometheusMetricsSource(monitoring.prometheusUrl, () => at, METRICS_OPTIONS);
  const observed = await observeJob(source, ref);
  const model = fitRuntimeModel(observed.samples);
  return predictionInterval(model, { replicas, nodes: 1, localBatchSize: LOCAL_BATCH }, COVERAGE);
}

function judge(
  what: string,
  measured: MeasuredThroughput | undefined,
  interval: ThroughputInterval,
  reason: string,
  explains: RegExp,
): string {
  assert.ok(measured, `${what}: no steps to measure`);
  const place = placeInInterval(measured.samplesPerSecond, interval);
  const figures =
    `${what}: measured ${measured.samplesPerSecond.toFixed(1)} samples/s over ${measured.steps} steps ` +
    `(${measured.seconds.toFixed(1)} s); model ${interval.expected.toFixed(1)}, ${COVERAGE * 100}% interval ` +
    `${interval.low.toFixed(1)}-${Number.isFinite(interval.high) ? interval.high.toFixed(1) : 'inf'}: ${place}`;
  if (place !== 'within') {
    assert.match(reason, explains, `${figures}, and the decision's reason does not say why: ${reason}`);
    return `${figures} (the reason says why: ${explains.source})`;
  }
  return figures;
}

const METRICS_OPTIONS = { stepSeconds: 1, maxPointsPerSeries: 11_000, timeoutMs: 10_000 };
let startedAt = now();

before(async () => {
  cluster = testCluster();
  const nodes = await cluster.admin.core.listNode({});
  assert.ok(
    nodes.items.some((n) => n.metadata?.name === HOST_NODE),
    `no host node ${HOST_NODE} in the test cluster: infra/cluster/up.sh starts it only as root (TRAINSCALER_HOST_NODE)`,
  );
  const binaries = monitoringBinaries();
  namespace = await createNamespace(cluster, 'training');
  dir = mkdtempSync(join(tmpdir(), 'trainscaler-training-'));
  ref = { kind: 'PyTorchJob', namespace, name: JOB };

  // The host node is the only room: the urgent job must wait for the elastic one to give way, and the
  // schedule must see that (its capacity counts every schedulable node). Undone in after().
  for (const node of nodes.items) {
    const name = node.metadata?.name ?? '';
    if (name === HOST_NODE || node.spec?.unschedulable) continue;
    await cluster.admin.core.patchNode({
      name,
      body: [{ op: 'add', path: '/spec/unschedulable', value: true }],
    });
    cordoned.push(name);
  }
  priorityClass = `trainscaler-test-urgent-${namespace}`;
  // preemptionPolicy Never: the scheduler waits instead of killing a worker; trainscaler makes the room.
  await scheduling().createPriorityClass({
    body: { metadata: { name: priorityClass }, value: 1000, preemptionPolicy: 'Never' },
  });

  const logger = {
    info: (o: object, m?: string) => logLines.push(`${m ?? ''} ${JSON.stringify(o)}`),
    warn: (o: object, m?: string) => logLines.push(`WARN ${m ?? ''} ${JSON.stringify(o)}`),
    error: (o: object, m?: string) => logLines.push(`ERROR ${m ?? ''} ${JSON.stringify(o)}`),
  };
  alarmServer = createAlertmanagerServer({
    deps: () => Promise.resolve(deps),
    token: async () => WEBHOOK_TOKEN,
    logger,
    onResult: (payload, result) => {
      const alertnames = ((payload as { alerts?: { labels?: Record<string, string> }[] }).alerts ?? []).map(
        (a) => a.labels?.alertname ?? '?',
      );
      alarms.push({ at: now(), alertnames, result });
      // The contention ends once the review has acted on it (the neighbour is gone).
      if (result.outcomes.some((o) => o.applied && o.ref.name === JOB)) void throttled?.stop();
    },
  });
  await new Promise<void>((r) => alarmServer?.listen(0, '127.0.0.1', r));
  const webhookUrl = `http://127.0.0.1:${(alarmServer.address() as AddressInfo).port}/alertmanager`;
  monitoring = await startMonitoring({
    binaries,
    dir,
    webhookUrl,
    webhookToken: WEBHOOK_TOKEN,
    timeFactor: TIME_FACTOR,
  });
  deps = {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    metrics: new PrometheusMetricsSource(monitoring.prometheusUrl, now, METRICS_OPTIONS),
    clock: now,
    config: { ...DEFAULT_POLICY_CONFIG, cooldownSeconds: COOLDOWN_SECONDS },
    dryRun: false,
    logger,
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    priorityClasses: { [priorityClass]: 1000 },
  };
  if (monitoring)
    targets = followPodTargets(cluster.admin.core, namespace, monitoring, (error) =>
      logLines.push(`targets: ${String(error)}`),
    );
});

after(async () => {
  await throttled?.stop();
  await targets?.stop();
  await Promise.all((monitoring?.processes ?? []).map((p) => stop(p)));
  if (alarmServer) {
    alarmServer.closeAllConnections();
    await new Promise((r) => alarmServer?.close(r));
  }
  if (namespace) {
    await deleteNamespace(cluster, namespace);
    // The node agent stops the pods' processes before the pods go: wait for that, bounded.
    await waitFor(
      'the job pods to be gone',
      async () =>
        (await cluster.admin.core.listNamespacedPod({ namespace })).items.length === 0 ? true : undefined,
      60_000,
    ).catch((error: Error) => console.log(`  cleanup: ${error.message}`));
  }
  for (const name of cordoned) {
    await cluster.admin.core
      .patchNode({ name, body: [{ op: 'replace', path: '/spec/unschedulable', value: false }] })
      .catch((error: Error) => console.log(`  cleanup: uncordon ${name}: ${error.message}`));
  }
  if (priorityClass)
    await scheduling()
      .deletePriorityClass({ name: priorityClass })
      .catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('an elastic PyTorchJob grows 1 -> 2 on a real alert and shrinks 2 -> 1 for higher-priority work, losing no sample', async () => {
  startedAt = now();
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
  await stepsAt(1, 0, 20).catch((error: Error) => {
    throw new Error(`${error.message}\n${diagnostics()}`);
  });

  // The job's throughput per worker reaches Prometheus through worker-0's sidecar, the recording rule the
  // alert compares with is evaluated, and the job's best so far is established (the alert's baseline).
  const perWorker = `trainscaler:job_samples_per_second_per_worker:avg{namespace="${namespace}",job_name="${JOB}"}`;
  const instant = async (query: string): Promise<number | undefined> => {
    const res = await fetch(`${monitoring?.prometheusUrl}/api/v1/query?query=${encodeURIComponent(query)}`, {
      signal: AbortSignal.timeout(5000),
    });
    const body = (await res.json()) as { data: { result: { value: [number, string] }[] } };
    const value = Number(body.data.result[0]?.value[1]);
    return Number.isFinite(value) ? value : undefined;
  };
  await waitFor(
    'the per-worker throughput in Prometheus',
    async () => {
      const v = await instant(perWorker);
      return v !== undefined && v > 0 ? v : undefined;
    },
    60_000,
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${diagnostics()}`);
  });
  await sleep(12_000); // a full rate window at the steady pace: the "best in the last hour" to fall below
  const baseline = (await instant(perWorker)) ?? 0;

  // Contention: worker-0's trainer is throttled (stopped 250 ms of every 300 ms), so each step takes longer.
  const pids = await waitFor(
    "worker-0's trainer process",
    async () => {
      const found = trainerPids(join(dir, 'logs'), `${JOB}-worker-0`);
      return found.length > 0 ? found : undefined;
    },
    10_000,
  );
  const throttledAt = now();
  throttled = throttle(pids, { runMs: 50, stopMs: 250, maxMs: ALERT_TIMEOUT_MS });

  // Prometheus -> Alertmanager -> the alarm function, which reviews the job and grows it.
  const grow = await waitFor(
    'the alarm function to grow the job',
    async () => {
      for (const alarm of alarms) {
        const outcome = alarm.result.outcomes.find((o) => o.applied && o.ref.name === JOB);
        if (outcome) return { alarm, outcome };
      }
      return undefined;
    },
    ALERT_TIMEOUT_MS,
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${diagnostics()}`);
  });
  await throttled.stop();
  const grownAt = grow.alarm.at;
  assert.ok(grow.alarm.alertnames.includes('TrainscalerLowThroughputPerWorker'), diagnostics());
  assert.equal(grow.outcome.plan.policy, 'tuning');
  assert.deepEqual(grow.outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
  const throttledThroughput = throughputAt(steps(), 1, throttledAt + 3, 0, grownAt);

  const up = await pauseAfter(1, 2, grownAt).catch((error: Error) => {
    throw new Error(`${error.message}\n${diagnostics()}`);
  });
  const pods = await workerPods(cluster, namespace, JOB);
  assert.deepEqual(pods.map((p) => p.metadata?.name).sort(), [`${JOB}-worker-0`, `${JOB}-worker-1`]);
  await stepsAt(2, grownAt, 60);
  // The decision's reason is on the job and in an Event.
  const afterGrow = (await deps.cluster.getJob(ref)) as { metadata: { annotations: Record<string, string> } };
  const lastGrow = JSON.parse(afterGrow.metadata.annotations[ANNOTATION.lastDecision] ?? '{}') as {
    reason?: string;
  };
  assert.equal(lastGrow.reason, grow.outcome.plan.reason);
  const events = await cluster.admin.core.listNamespacedEvent({ namespace });
  assert.ok(
    events.items.some((e) => e.reason === 'TrainscalerTuning' && e.message === grow.outcome.plan.reason),
    'an Event with the grow decision',
  );

  // Higher-priority demand: the urgent job asks for what the host node has free once one worker leaves.
  const hostNode = await cluster.admin.core.readNode({ name: HOST_NODE });
  const allocatable = cpuToMillis(String(hostNode.status?.allocatable?.cpu ?? '0'));
  const onHost = (
    await cluster.admin.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${HOST_NODE}` })
  ).items.filter((p) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed');
  const free = allocatable - onHost.reduce((sum, p) => sum + schedulerCpuMillis(p), 0);
  const perWorker1 = schedulerCpuMillis(pods.find((p) => p.metadata?.name === `${JOB}-worker-1`) as V1Pod);
  const urgentCpu = free + perWorker1 - 25;
  assert.ok(urgentCpu > free && perWorker1 > 25, `urgent ${urgentCpu}m vs free ${free}m`);
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    body: urgentJob(urgentCpu, priorityClass as string),
  });
  await waitFor(
    'the urgent pod to be unschedulable',
    async () => {
      const pod = (await workerPods(cluster, namespace, URGENT))[0];
      const scheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled');
      return scheduled?.status === 'False' && !pod?.spec?.nodeName ? true : undefined;
    },
    60_000,
  );

  // Inside the cool-down the schedule leaves the job alone, higher-priority demand or not: nothing written.
  const cooldownEnds = grownAt + COOLDOWN_SECONDS + 1;
  let early = 'skipped: the cool-down was over before the urgent job waited (a slow machine)';
  if (now() < cooldownEnds - 3) {
    // (The operator writes the job's status meanwhile, so the resourceVersion moves; trainscaler's record must not.)
    const decisionOf = async () =>
      (await deps.cluster.getJob(ref)).metadata?.annotations?.[ANNOTATION.lastDecision];
    const decisionBefore = await decisionOf();
    const result = await handleSchedule({}, deps);
    const kept = result.outcomes.find((o) => o.ref.name === JOB);
    assert.equal(kept?.applied, false, JSON.stringify(kept));
    assert.match(kept?.plan.reason ?? '', /cool-down/);
    assert.equal(await decisionOf(), decisionBefore);
    assert.equal((await workerPods(cluster, namespace, JOB)).length, 2);
    early = kept?.plan.reason ?? '';
  }
  // The schedule handler, ticking every 2 s from the end of the cool-down as the runner's cron would.
  await sleep(Math.max(0, cooldownEnds - now()) * 1000);
  const twoWorkerThroughput = throughputAt(steps(), 2, grownAt, 10, now());
  let shrink: Outcome | undefined;
  let shrunkAt = 0;
  const ticks: string[] = [];
  for (let tick = 0; tick < 30 && !shrink; tick++) {
    const result = await handleSchedule({}, deps);
    const outcome = result.outcomes.find((o) => o.ref.name === JOB);
    ticks.push(
      `${outcome?.applied ? 'APPLIED' : 'kept'} ${outcome?.plan.reason ?? JSON.stringify(result.errors)}`,
    );
    if (outcome?.applied) {
      shrink = outcome;
      shrunkAt = now();
    } else await sleep(2000);
  }
  assert.ok(shrink, `the schedule did not shrink the job:\n${ticks.join('\n')}\n${diagnostics()}`);
  assert.equal(shrink.plan.policy, 'rebalance');
  assert.deepEqual(shrink.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 1 }]);
  assert.match(shrink.plan.reason, new RegExp(`to admit ${namespace}/${URGENT}`));

  const down = await pauseAfter(2, 1, shrunkAt).catch((error: Error) => {
    throw new Error(`${error.message}\n${diagnostics()}`);
  });
  const urgentPod = await waitFor(
    'the urgent pod to run on the host node',
    async () => {
      const pod = (await workerPods(cluster, namespace, URGENT))[0];
      return pod?.spec?.nodeName === HOST_NODE ? pod : undefined;
    },
    60_000,
  );
  assert.equal(urgentPod.spec?.nodeName, HOST_NODE);
  await stepsAt(1, shrunkAt, 150);
  const oneWorkerThroughput = throughputAt(steps(), 1, shrunkAt, 10);

  const outcome = await waitFor('the job to finish', () => jobCondition(JOB), FINISH_TIMEOUT_MS).catch(
    (error: Error) => {
      throw new Error(`${error.message}\n${diagnostics()}`);
    },
  );
  assert.equal(outcome, 'Succeeded', diagnostics());
  assert.equal(await waitFor('the urgent job to finish', () => jobCondition(URGENT), 60_000), 'Succeeded');

  const records = steps();
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

  // The audit trail: both decisions, with their reasons, in the job's history and as Events.
  const final = (await deps.cluster.getJob(ref)) as { metadata: { annotations: Record<string, string> } };
  const history = JSON.parse(final.metadata.annotations[ANNOTATION.history] ?? '[]') as { reason: string }[];
  const reasons = history.map((h) => h.reason);
  // Exactly these two: nothing else changed the job (e.g. an alert fired by the resize itself).
  assert.deepEqual(reasons, [grow.outcome.plan.reason, shrink.plan.reason], diagnostics());
  assert.equal(worlds, 3, `worlds 1, 2, 1 and no other re-formation\n${diagnostics()}`);
  // The growth's own cost, measured at the shrink's review from the sidecars' exact timestamps: its pause
  // (what the policies charge a growth) and its patch-to-first-step time (reported), as the step logs show them.
  const measured = stateOfStatus((await deps.cluster.getJobState(ref))?.status).rescaleCost;
  if (measured?.upPause !== undefined) {
    assert.ok(measured.upPause <= (measured.upToFirstStep ?? 0), JSON.stringify(measured));
    // The hook posts its totals once a second: the sidecar's pause is the logs' within that.
    assert.ok(Math.abs(measured.upPause - up.pause) < 2.5, `${JSON.stringify(measured)} vs ${up.pause}`);
  }
  const finalEvents = await cluster.admin.core.listNamespacedEvent({ namespace });
  assert.ok(
    finalEvents.items.some((e) => e.reason === 'TrainscalerRebalance' && e.message === shrink?.plan.reason),
    'an Event with the shrink decision',
  );

  // Throughput after each resize against the prediction interval of the model each decision was made with.
  // A probe is the model's own admission that its scaling is priors; a shrink to admit other work is not a
  // throughput claim: either reason says why a figure may fall outside.
  const upInterval = await intervalAt(grownAt, 2);
  const downInterval = await intervalAt(shrunkAt, 1);
  const upJudged = judge('after 1 -> 2', twoWorkerThroughput, upInterval, grow.outcome.plan.reason, /probe/);
  const downJudged = judge('after 2 -> 1', oneWorkerThroughput, downInterval, shrink.plan.reason, /to admit/);

  console.log(
    `  baseline ${baseline.toFixed(1)} samples/s per worker (Prometheus); throttled ` +
      `${throttledThroughput?.samplesPerSecond.toFixed(1) ?? '?'} samples/s; alert -> grow ` +
      `${(grownAt - throttledAt).toFixed(1)} s after the throttle began (alerts: ${grow.alarm.alertnames.join(', ')})`,
  );
  console.log(`  grow (alarm function): ${grow.outcome.plan.reason}`);
  console.log(`  shrink (schedule, ${ticks.length} tick(s)): ${shrink.plan.reason}`);
  console.log(`  schedule tick inside the cool-down: ${early}`);
  console.log(`  ${upJudged}`);
  console.log(`  ${downJudged}`);
  console.log(
    `  rescale pauses (last step at the old size -> first at the new, from the step logs): ` +
      `scale-up 1->2 ${up.pause.toFixed(1)} s, scale-down 2->1 ${down.pause.toFixed(1)} s; decision -> first step ` +
      `at the new size: ${up.firstStep.toFixed(1)} s, ${down.firstStep.toFixed(1)} s; the job's measured rescale ` +
      `cost (its ScaledTrainingJob status): ${JSON.stringify(measured ?? {})}`,
  );
  console.log(
    `  ${committed.length} steps, ${worlds} worlds, ${redone} steps redone, ${EPOCHS} epochs of ${DATASET_SIZE} ` +
      `samples once each; ${alarms.length} alarm notification(s); whole run ${(now() - startedAt).toFixed(0)} s`,
  );
});
