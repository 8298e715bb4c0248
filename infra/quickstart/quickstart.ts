// `npm run quickstart`: trainscaler growing a real job on a real alert, on this machine. On the test control plane
// (infra/cluster, started by with-cluster.sh) it starts Prometheus and Alertmanager with infra/prometheus's
// rules and routes, the example elastic PyTorchJob with its sidecar on the host node (the PyPI torch of npm run setup), and
// trainscaler's runner (what `trainscaler run` starts: leader election, informers, schedule, webhook) in this
// process; then it tells what happens in plain lines and stops everything it started, on success, error or
// Ctrl-C. Every wait is bounded.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { managedJobStatuses, renderStatusTable } from '../../cli/status.js';
import { buildClusterClient } from '../../functions/runtime-deps.js';
import type { Outcome } from '../../lib/actuator.js';
import { loadKubeConfig } from '../../lib/cluster/kubernetes-cluster-client.js';
import { type Throttle, throttle, trainerPids } from '../local-stack/cpu-throttle.js';
import {
  EXAMPLE_MANIFEST,
  exampleJobManifest,
  followPodTargets,
  HOST_NODE,
} from '../local-stack/elastic-job.js';
import { startMonitoring } from '../local-stack/monitoring.js';
import { freePort, monitoringBinaries, stop, waitUntil } from '../local-stack/processes.js';
import { deleteNamespace, firingAlert, promQueries, workersAfter } from './observe.js';
import { OWN_NAMESPACE, startQuickstartRunner } from './runner.js';
import { changeText, decisionText, type Print, type Throughput, throughputText } from './story.js';
import { RATE_WINDOW_MS, SIDECAR_WINDOW_SECONDS, TIME_FACTOR } from './timing.js';

const JOB = 'elastic';
const ALERT = 'TrainscalerLowThroughputPerWorker';
/** Bounds: a pod starts in seconds (the warm server imports torch once); the compressed alert needs ~40 s. */
const START_TIMEOUT_MS = 180_000;
const ALERT_TIMEOUT_MS = 180_000;
const RESIZE_TIMEOUT_MS = 120_000;
const LEADER_TIMEOUT_MS = 60_000;

export interface QuickstartOptions {
  adminKubeconfig: string;
  /** trainscaler's ServiceAccount (infra/k8s/rbac.yaml): the runner acts with exactly its rights. */
  saKubeconfig: string;
  print: Print;
  /** Aborted on Ctrl-C: the current wait ends and everything started is stopped. */
  signal: AbortSignal;
}

export interface QuickstartResult {
  before: Throughput;
  contended?: Throughput;
  alert: { name: string; summary: string };
  decision: Outcome;
  after: Throughput;
}

class Aborted extends Error {}

/** Resolves after `ms`, or rejects as soon as `signal` is aborted. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Aborted('interrupted'));
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted('interrupted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export async function runQuickstart(options: QuickstartOptions): Promise<QuickstartResult> {
  const { print, signal } = options;
  const admin = loadKubeConfig({ kubeconfig: options.adminKubeconfig });
  const core = admin.makeApiClient(CoreV1Api);
  const custom = admin.makeApiClient(CustomObjectsApi);
  const dir = mkdtempSync(join(tmpdir(), 'trainscaler-quickstart-'));
  const namespace = `quickstart-${Date.now().toString(36)}`;
  const cleanups: { what: string; run: () => Promise<unknown> }[] = [];
  const outcomes: { trigger: string; outcome: Outcome }[] = [];
  const logFile = join(dir, 'trainscaler.log');
  let throttled: Throttle | undefined;
  let ok = false;

  /** Polls `probe` every 500 ms until it returns a value; bounded, and ends on Ctrl-C. */
  const until = <T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>) =>
    waitUntil(
      async () => {
        if (signal.aborted) throw new Aborted('interrupted');
        return probe().catch(() => undefined);
      },
      timeoutMs,
      what,
      () => `trainscaler's log: ${logFile}`,
      500,
    );

  try {
    const binaries = monitoringBinaries();
    const nodes = (await core.listNode({})).items;
    if (!nodes.some((n) => n.metadata?.name === HOST_NODE))
      throw new Error(
        `the test cluster has no ${HOST_NODE}: infra/cluster/up.sh starts it only as root (npm run setup installs the rest)`,
      );
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    cleanups.push({
      what: `namespace ${namespace} (the job and its pods)`,
      run: () => deleteNamespace(core, namespace),
    });

    // trainscaler's runner on a port chosen now, so that Alertmanager can be told where to send alerts.
    const token = `quickstart-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
    const port = await freePort();
    const monitoring = await startMonitoring({
      binaries,
      dir,
      webhookUrl: `http://127.0.0.1:${port}/alertmanager`,
      webhookToken: token,
      timeFactor: TIME_FACTOR,
    });
    cleanups.push({
      what: 'Prometheus and Alertmanager',
      run: () => Promise.all(monitoring.processes.map((p) => stop(p))),
    });
    print(
      `Prometheus ${monitoring.prometheusUrl} and Alertmanager ${monitoring.alertmanagerUrl} started with ` +
        'infra/prometheus (scrape job, rules, routes)',
    );
    const targets = followPodTargets(core, namespace, monitoring, () => undefined);
    cleanups.push({ what: 'the Prometheus target follower', run: () => targets.stop() });

    const sa = loadKubeConfig({ kubeconfig: options.saKubeconfig });
    const runner = await startQuickstartRunner({
      kubeConfig: sa,
      prometheusUrl: monitoring.prometheusUrl,
      namespace,
      port,
      token,
      logFile,
      onOutcomes: (trigger, result) => {
        for (const outcome of result.outcomes) {
          if (outcome.ref.namespace !== namespace || outcome.ref.name !== JOB) continue;
          // The staged contention ends once trainscaler has acted on it: the neighbour is gone.
          if (outcome.applied) void throttled?.stop();
          if (outcome.applied || trigger === 'alarm') print(decisionText(trigger, outcome));
          outcomes.push({ trigger, outcome });
        }
      },
    });
    cleanups.push({ what: "trainscaler's runner (its lease released)", run: () => runner.stop() });
    await until('the runner to lead (another trainscaler holds the Lease?)', LEADER_TIMEOUT_MS, async () =>
      runner.isLeader() ? true : undefined,
    );
    print(
      `trainscaler's runner started (as \`trainscaler run\`, with trainscaler's ServiceAccount), leading, ` +
        `managing namespace ${namespace} only; webhook ${runner.url}/alertmanager; its log: ${logFile}`,
    );

    await custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      plural: 'pytorchjobs',
      namespace,
      body: exampleJobManifest({
        name: JOB,
        namespace,
        trainer: {
          TRAIN_LOG_DIR: join(dir, 'logs'),
          TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
          // Long enough never to finish during the demo: it is stopped with the rest.
          TRAIN_EPOCHS: '1000',
          // Paced steps: the throughput depends little on the machine's load.
          TRAIN_MIN_STEP_SECONDS: '0.1',
        },
        sidecarWindowSeconds: SIDECAR_WINDOW_SECONDS,
      }),
    });
    print(
      `PyTorchJob ${namespace}/${JOB} created from ${relative(process.cwd(), EXAMPLE_MANIFEST)}: 1 worker (elastic 1-3), ` +
        'torchrun + the trainscaler sidecar',
    );
    await until(`worker-0 running on ${HOST_NODE}`, START_TIMEOUT_MS, async () => {
      const pod = await core.readNamespacedPod({ namespace, name: `${JOB}-worker-0` });
      return pod.status?.phase === 'Running' ? true : undefined;
    });
    print(`worker-0 is running on ${HOST_NODE} (a real python3 process training with torch)`);

    const prom = promQueries(monitoring, namespace, JOB);
    await until('the job throughput in Prometheus', START_TIMEOUT_MS, async () => {
      const t = await prom.throughput();
      return t && t.samplesPerSecond > 0 ? t : undefined;
    });
    // A full rate window at the steady pace: the job's best so far, the alert's baseline.
    await sleep(RATE_WINDOW_MS, signal);
    const before = await until('the job throughput', 30_000, prom.throughput);
    print(`throughput: ${throughputText(before)}, as Prometheus records it from the sidecar`);

    const pids = await until("worker-0's trainer process", 10_000, async () => {
      const found = trainerPids(join(dir, 'logs'), `${JOB}-worker-0`);
      return found.length > 0 ? found : undefined;
    });
    throttled = throttle(pids, { runMs: 50, stopMs: 250, maxMs: ALERT_TIMEOUT_MS });
    cleanups.push({ what: 'the CPU throttle', run: () => throttled?.stop() ?? Promise.resolve() });
    const throttledAt = Date.now();
    print(
      "contention begins: worker-0's trainer gets 50 ms of CPU in every 300 ms (the staged noisy neighbour)",
    );

    let contended: Throughput | undefined;
    const alert = await until(`the ${ALERT} alert`, ALERT_TIMEOUT_MS, async () => {
      if (!contended && Date.now() - throttledAt > RATE_WINDOW_MS) {
        contended = await prom.throughput();
        if (contended) print(`throughput: ${throughputText(contended)} under contention`);
      }
      return firingAlert(monitoring, namespace, JOB);
    });
    print(`alert firing: ${alert.name}\n${alert.summary}`);

    const decision = await until('trainscaler to resize the job', ALERT_TIMEOUT_MS, async () => {
      return outcomes.find(
        (o) => o.outcome.applied && o.outcome.plan.changes.some((c) => c.kind === 'replicas'),
      )?.outcome;
    });
    const size = workersAfter(decision);
    const decidedAt = Date.now();
    print('contention ends (trainscaler has acted; the throttle is lifted)');

    await until(`${size} workers running`, RESIZE_TIMEOUT_MS, async () => {
      const pods = await core.listNamespacedPod({
        namespace,
        labelSelector: `training.kubeflow.org/job-name=${JOB},training.kubeflow.org/replica-type=worker`,
      });
      const running = pods.items.filter((p) => p.status?.phase === 'Running');
      return running.length === size ? true : undefined;
    });
    await until(`training at world size ${size}`, RESIZE_TIMEOUT_MS, async () => {
      return (await prom.workersTraining()) >= size ? true : undefined;
    });
    print(
      `the job runs at its new size: ${size} workers training together (world size ${size}), ` +
        `${((Date.now() - decidedAt) / 1000).toFixed(0)} s after the decision`,
    );
    await sleep(RATE_WINDOW_MS, signal);
    const after = await until('the job throughput at the new size', 30_000, async () => {
      const t = await prom.throughput();
      return t && t.workers === size ? t : undefined;
    });
    print(`throughput: ${throughputText(after)}`);

    const statuses = await managedJobStatuses(buildClusterClient(sa), OWN_NAMESPACE);
    const table = renderStatusTable(
      statuses.filter((s) => s.namespace === namespace),
      Math.floor(Date.now() / 1000),
    );
    print(`trainscaler status:\n${table.trimEnd()}`);
    print(
      `in short: ${before.samplesPerSecond.toFixed(0)} samples/s -> ` +
        `${contended ? `${contended.samplesPerSecond.toFixed(0)} under contention -> ` : ''}` +
        `alert ${alert.name} -> trainscaler: ${changeText(decision)} -> ` +
        `${after.samplesPerSecond.toFixed(0)} samples/s at ${after.workers} workers`,
    );
    ok = true;
    return { before, ...(contended ? { contended } : {}), alert, decision, after };
  } finally {
    print(
      signal.aborted
        ? 'interrupted: stopping everything the quick start started'
        : 'stopping everything the quick start started',
    );
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup.run();
        print(`stopped: ${cleanup.what}`);
      } catch (error) {
        print(`could not stop ${cleanup.what}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (ok || signal.aborted) rmSync(dir, { recursive: true, force: true });
    else print(`kept for a look: ${dir} (trainscaler.log, prometheus and the trainer's logs)`);
  }
}
