// The real metrics path, end to end, on this machine: three trainer processes report progress (two
// through the Python hook, one through log lines), each to its own sidecar; Prometheus scrapes the
// sidecars and evaluates the production alert rules; Alertmanager routes the alert to the alarm function's
// webhook (functions/alertmanager-http.ts), whose handler reads the job's metrics back from that
// Prometheus and acts on the simulated cluster. Worker 2 becomes a straggler part-way through: the alarm
// function must receive the straggler alert and evict that worker's pod. Prometheus runs the production scrape
// job (infra/prometheus/prometheus.yml), whose identity labels come from discovery metadata: a pod in another
// namespace exporting series labelled as bert's worker 0 must land under its own identity and change nothing.
// The rules and Alertmanager timers are replayed 30x faster (see support/time-compression.ts).
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { createAlertmanagerServer } from '../../functions/alertmanager-http.js';
import type { HandlerDeps, HandlerResult } from '../../functions/handler-deps.js';
import {
  discoveredTargets,
  startAlertmanager,
  startPrometheus,
  testPrometheusConfig,
} from '../../infra/local-stack/monitoring.js';
import {
  freePort,
  type MonitoringBinaries,
  monitoringBinaries,
  type Started,
  start,
  stop,
  waitUntil,
} from '../../infra/local-stack/processes.js';
import { compressRuleDurations } from '../../infra/local-stack/time-compression.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { PrometheusMetricsSource } from '../../lib/metrics/prometheus-metrics-source.js';
import { PROFILED_APP_MODEL } from '../../lib/sim/profiled-app-model.js';
import { SimulatedCluster } from '../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../lib/sim/training-job-manifests.js';
import type { JobRef } from '../../lib/types.js';
import { planText } from '../support/plan-text.js';
import { bundleSidecar, REPO_ROOT } from './support/sidecar-bundle.js';

const GiB = 1024 ** 3;
/** 1 minute of the production rules lasts 2 s here. */
const TIME_FACTOR = 30;
const JOB: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const WORKERS = 3;
const STRAGGLER = 2;
/** Seconds of normal training before the straggler slows down: the policy needs a baseline to compare. */
const SLOW_AFTER_SECONDS = 20;
const DECISION_DEADLINE_MS = 75_000;

interface Received {
  payload: { alerts?: { labels?: Record<string, string> }[] };
  result: HandlerResult;
}

const WEBHOOK_TOKEN = 'pipeline-webhook-token-5a4b3c2d1e';

const silentLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('metrics pipeline: trainer -> sidecar -> Prometheus -> Alertmanager -> alarm function', () => {
  let binaries: MonitoringBinaries;
  let dir: string;
  const processes: Started[] = [];
  let alarmServer: Server | undefined;
  let spoofer: Server | undefined;

  before(async () => {
    binaries = monitoringBinaries(); // fails here, clearly, when the packages are not installed
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-pipeline-'));
  });

  after(async () => {
    await Promise.all(processes.map((p) => stop(p)));
    spoofer?.closeAllConnections();
    spoofer?.close();
    if (alarmServer) {
      alarmServer.closeAllConnections();
      await new Promise((resolve) => alarmServer?.close(resolve));
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const logsOf = () => processes.map((p) => `--- ${p.name}\n${p.output().slice(-3000)}`).join('\n');

  it('a straggling worker reaches the alarm function as an alert, and its pod is evicted', {
    timeout: 110_000,
  }, async () => {
    // The cluster: a 3-worker PyTorchJob whose pods run on the simulated cluster.
    const cluster = new SimulatedCluster({ seed: 7, apps: PROFILED_APP_MODEL });
    cluster.submitJob(
      pytorchJobManifest({
        name: JOB.name,
        namespace: JOB.namespace,
        app: 'bert',
        localBatchSize: 32,
        workers: WORKERS,
        minReplicas: 1,
        maxReplicas: 8,
        sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 8 * GiB },
      }),
    );
    cluster.step(60);
    const pods = await cluster.listPods(JOB.namespace, `training.kubeflow.org/job-name=${JOB.name}`);
    assert.equal(pods.filter((p) => p.status?.phase === 'Running').length, WORKERS);

    const podOfWorker = (worker: number): V1Pod => {
      const pod = pods.find(
        (p) => p.metadata?.labels?.['training.kubeflow.org/replica-index'] === String(worker),
      );
      assert.ok(pod, `worker ${worker}'s pod`);
      return pod;
    };
    const instant = async (query: string) => {
      const response = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(query)}`);
      const body = (await response.json()) as { data: { result: { metric: Record<string, string> }[] } };
      return body.data.result;
    };

    // The alarm function, wired to a Prometheus source pointed at the Prometheus started below.
    const prometheusPort = await freePort();
    const alertmanagerPort = await freePort();
    const prometheusUrl = `http://127.0.0.1:${prometheusPort}`;
    const clock = () => Date.now() / 1000;
    const deps: HandlerDeps = {
      cluster,
      metrics: new PrometheusMetricsSource(prometheusUrl, clock, { stepSeconds: 1, timeoutMs: 5000 }),
      clock,
      // The straggler policy holds for a number of query points (5 x 15 s = the alert's `for: 1m` in
      // production); at this 1 s step and 30x faster rules that is 2 points (1 min -> 2 s).
      config: { ...DEFAULT_POLICY_CONFIG, stragglerMinSamples: 2 },
      dryRun: false,
      logger: silentLogger,
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    };
    const received: Received[] = [];
    const refused: string[] = [];
    alarmServer = createAlertmanagerServer({
      deps,
      token: async () => WEBHOOK_TOKEN,
      logger: silentLogger,
      onUnauthorized: (reason) => refused.push(reason),
      onResult: (payload, result) => received.push({ payload: payload as Received['payload'], result }),
    });
    await new Promise<void>((resolve) => alarmServer?.listen(0, '127.0.0.1', resolve));
    const webhook = `http://127.0.0.1:${(alarmServer.address() as AddressInfo).port}/alertmanager`;

    // Alertmanager with the production routing, its webhook pointed at the alarm server, and the bearer
    // token read from a file as in production (credentials_file).
    processes.push(
      await startAlertmanager(binaries, dir, {
        webhookUrl: webhook,
        webhookToken: WEBHOOK_TOKEN,
        timeFactor: TIME_FACTOR,
        port: alertmanagerPort,
      }),
    );

    // Three sidecars (the bundled artifact the image runs), with a stand-in nvidia-smi and cgroup files.
    const sidecarJs = await bundleSidecar(dir);
    const smi = join(dir, 'nvidia-smi');
    await writeFile(smi, "#!/bin/sh\necho '92, 30000, 40960'\n");
    await chmod(smi, 0o755);
    const cgroup = join(dir, 'cgroup');
    await mkdir(cgroup);
    await writeFile(join(cgroup, 'cpu.stat'), 'usage_usec 1000000\n');
    await writeFile(join(cgroup, 'memory.current'), `${3 * GiB}\n`);
    await writeFile(join(cgroup, 'memory.max'), `${8 * GiB}\n`);
    const logFile = join(dir, 'worker-1.log');
    await writeFile(logFile, '');
    const sidecars: { metrics: string; hook: string }[] = [];
    for (let worker = 0; worker < WORKERS; worker++) {
      const pod = pods.find(
        (p) => p.metadata?.labels?.['training.kubeflow.org/replica-index'] === String(worker),
      );
      const sidecar = start(`sidecar-${worker}`, process.execPath, [sidecarJs], {
        env: {
          PATH: process.env.PATH,
          TRAINSCALER_NAMESPACE: JOB.namespace,
          TRAINSCALER_JOB_KIND: JOB.kind,
          TRAINSCALER_JOB_NAME: JOB.name,
          TRAINSCALER_POD: pod?.metadata?.name ?? '',
          TRAINSCALER_ROLE: 'worker',
          TRAINSCALER_WORKER_INDEX: String(worker),
          TRAINSCALER_NODE_NAME: pod?.spec?.nodeName ?? '',
          TRAINSCALER_REPLICAS: String(WORKERS),
          TRAINSCALER_LOCAL_BATCH_SIZE: '32',
          TRAINSCALER_STEP_WINDOW_SECONDS: '3',
          TRAINSCALER_METRICS_HOST: '127.0.0.1',
          TRAINSCALER_METRICS_PORT: '0',
          TRAINSCALER_HOOK_PORT: '0',
          TRAINSCALER_NVIDIA_SMI: smi,
          TRAINSCALER_CGROUP_PATH: cgroup,
          ...(worker === 1 ? { TRAINSCALER_LOG_FILE: logFile, TRAINSCALER_LOG_POLL_MS: '100' } : {}),
        },
      });
      processes.push(sidecar);
      const line = await waitUntil(
        () => /^\{.*"msg":"listening".*$/m.exec(sidecar.output())?.[0],
        15_000,
        `sidecar ${worker} to listen`,
        logsOf,
        50,
      );
      const parsed = JSON.parse(line) as { metrics: string; hook: string };
      sidecars.push({ metrics: parsed.metrics, hook: parsed.hook });
    }

    // A pod in another namespace that exports series labelled as bert's worker 0 in team-a: very slow steps
    // and a huge memory peak. Prometheus must file them under its own identity (namespace evil, StatefulSet
    // miner), so that the alarm function never sees them as bert's.
    spoofer = createServer((_req, res) => {
      const as =
        'namespace="team-a",job_kind="PyTorchJob",job_name="bert",pod="bert-worker-0",role="worker",worker="0"';
      res.setHeader('content-type', 'text/plain; version=0.0.4');
      res.end(
        `trainscaler_step_time_seconds{${as},replicas="3",nodes="1",local_batch_size="32",node="n"} 9\n` +
          `trainscaler_cgroup_memory_working_set_bytes{${as}} ${200 * GiB}\n`,
      );
    });
    await new Promise<void>((resolve) => spoofer?.listen(0, '127.0.0.1', resolve));
    const spooferTarget = `127.0.0.1:${(spoofer.address() as AddressInfo).port}`;
    const spooferPod: V1Pod = {
      metadata: {
        name: 'miner-0',
        namespace: 'evil',
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'miner', uid: 'm', controller: true },
        ],
        labels: { app: 'miner', 'training.kubeflow.org/job-name': 'bert' },
      },
      spec: { nodeName: 'node-9', containers: [] },
      status: { phase: 'Running' },
    };

    // Prometheus with the production scrape job (its relabelling from Kubernetes discovery metadata, see
    // discoveredTargets) and the production rules, replayed faster; static timings and alerting.
    await writeFile(join(dir, 'prometheus.yml'), await testPrometheusConfig());
    await mkdir(join(dir, 'rules'));
    const rules = await readFile(join(REPO_ROOT, 'infra/prometheus/rules/trainscaler.rules.yml'), 'utf8');
    await writeFile(join(dir, 'rules/trainscaler.rules.yml'), compressRuleDurations(rules, TIME_FACTOR));
    await mkdir(join(dir, 'targets'));
    await writeFile(
      join(dir, 'targets/sidecars.json'),
      JSON.stringify([
        ...sidecars.map((s, worker) => discoveredTargets(new URL(s.metrics).host, podOfWorker(worker))),
        discoveredTargets(spooferTarget, spooferPod),
      ]),
    );
    processes.push(await startPrometheus(binaries, dir, alertmanagerPort, prometheusPort));
    await waitUntil(
      async () => ((await fetch(`${prometheusUrl}/-/ready`).catch(() => undefined))?.ok ? true : undefined),
      20_000,
      'Prometheus to be ready',
      logsOf,
    );

    // The trainers: 10 steps/s each; worker 2 three times slower after SLOW_AFTER_SECONDS.
    const trainersStartedAt = clock();
    for (let worker = 0; worker < WORKERS; worker++) {
      const hookMode = worker !== 1;
      const args = [
        join(REPO_ROOT, 'test/metrics/support/trainer.py'),
        `--mode=${hookMode ? 'hook' : 'log'}`,
        '--step-seconds=0.1',
        '--batch=32',
        '--max-seconds=100',
        ...(hookMode ? [] : [`--log-file=${logFile}`]),
        ...(worker === STRAGGLER ? [`--slow-after=${SLOW_AFTER_SECONDS}`, '--slow-factor=3'] : []),
      ];
      processes.push(
        start(`trainer-${worker}`, 'python3', args, {
          env: {
            ...process.env,
            PYTHONPATH: join(REPO_ROOT, 'infra/sidecar/python'),
            TRAINSCALER_HOOK_URL: sidecars[worker]?.hook ?? '',
            TRAINSCALER_HOOK_INTERVAL: '0.25',
          },
        }),
      );
    }

    // Every worker's step time reaches Prometheus, at the scale its sidecar was told.
    const series = await waitUntil(
      async () => {
        const response = await fetch(
          `${prometheusUrl}/api/v1/query?query=${encodeURIComponent('trainscaler_step_time_seconds{job_name="bert"}')}`,
        );
        const body = (await response.json()) as { data: { result: { metric: Record<string, string> }[] } };
        return body.data.result.length === WORKERS ? body.data.result : undefined;
      },
      20_000,
      'step times of all workers in Prometheus',
      logsOf,
    );
    assert.deepEqual(series.map((s) => s.metric.worker).sort(), ['0', '1', '2']);
    // The spoofer's series are scraped, under its own identity: nothing it claimed survives.
    const spoofed = await waitUntil(
      async () => {
        const result = await instant('{namespace="evil",__name__=~"trainscaler_.*"}');
        return result.length === 2 ? result : undefined;
      },
      20_000,
      "the spoofing pod's series in Prometheus",
      logsOf,
    );
    for (const s of spoofed) {
      const { __name__: _name, instance: _instance, job: _job, ...identity } = s.metric;
      assert.deepEqual(identity, {
        namespace: 'evil',
        job_kind: 'StatefulSet',
        job_name: 'miner',
        pod: 'miner-0',
        role: 'worker',
        worker: '0',
        node: 'node-9',
        ...(s.metric.replicas ? { replicas: '3', nodes: '1', local_batch_size: '32' } : {}),
      });
    }
    assert.equal((await instant('trainscaler_step_time_seconds{job_name="bert"}')).length, WORKERS);
    assert.equal(
      (await instant('trainscaler_cgroup_memory_working_set_bytes{job_name="bert"} > 100e9')).length,
      0,
    );
    assert.ok(series.every((s) => s.metric.replicas === '3' && s.metric.local_batch_size === '32'));

    // What a rescale cost is measured to: the first step after a pause (here the trainers' first steps),
    // read back through the rescale-pause query on this real Prometheus to the exact second each sidecar saw.
    const source = new PrometheusMetricsSource(prometheusUrl, clock, { timeoutMs: 5000 });
    const firstStep = await waitUntil(
      () => source.firstStepAfterPause(JOB, trainersStartedAt),
      20_000,
      'the first step of the world in Prometheus',
      logsOf,
    );
    assert.ok(
      firstStep > trainersStartedAt && firstStep <= clock(),
      `first step ${firstStep - trainersStartedAt} s after the trainers started`,
    );
    // The exact second, not a scrape's: no earlier resume after it, whatever the scrape times were.
    const again = await source.firstStepAfterPause(JOB, firstStep - 1e-3);
    assert.equal(again, firstStep);
    // A first start ends no pause: the pause query (valid PromQL on this Prometheus) finds none to measure.
    assert.equal(await source.pauseEndedAfter(JOB, trainersStartedAt), undefined);

    // The straggler alert travels to the alarm function, which reads the metrics back and evicts the pod.
    const eviction = await waitUntil(
      () =>
        received.find((r) =>
          r.result.outcomes.some((o) => o.plan.changes.some((c) => c.kind === 'evict-pod')),
        ),
      DECISION_DEADLINE_MS,
      'the alarm function to evict the straggler',
      () =>
        `received: ${JSON.stringify(
          received.map((r) => ({ alerts: r.payload.alerts?.map((a) => a.labels), result: r.result })),
          null,
          1,
        )}\n${logsOf()}`,
      500,
    );

    const straggler = `${JOB.name}-worker-${STRAGGLER}`;
    const alert = eviction.payload.alerts?.find((a) => a.labels?.alertname === 'TrainscalerStraggler');
    assert.ok(
      alert,
      `the straggler alert was among those received: ${JSON.stringify(eviction.payload.alerts)}`,
    );
    assert.equal(alert.labels?.namespace, JOB.namespace);
    assert.equal(alert.labels?.job_kind, JOB.kind);
    assert.equal(alert.labels?.job_name, JOB.name);
    assert.equal(alert.labels?.pod, straggler);

    assert.deepEqual(eviction.result.errors, []);
    assert.deepEqual(refused, [], 'every delivery carried the credential');
    const [outcome] = eviction.result.outcomes;
    assert.ok(outcome);
    assert.equal(outcome.plan.policy, 'straggler');
    // Its replacement prefers nodes other than the one it straggled on (the Worker template's affinity).
    const [avoid, evict] = outcome.plan.changes;
    assert.deepEqual(evict, { kind: 'evict-pod', pod: straggler });
    assert.ok(avoid?.kind === 'avoid-node' && avoid.role === 'Worker', JSON.stringify(avoid));
    assert.match(planText(outcome.plan), new RegExp(`straggling on node ${avoid.node} `));
    assert.match(planText(outcome.plan), new RegExp(`${straggler} \\(worker ${STRAGGLER}\\) straggling`));
    assert.equal(outcome.applied, true);
    assert.ok(
      cluster
        .writeLog()
        .some((w) => w.verb === 'evict' && w.target.endsWith(`${JOB.namespace}/${straggler}`)),
      `the simulated cluster saw the eviction: ${JSON.stringify(cluster.writeLog())}`,
    );
    // Only the straggler was evicted; the healthy workers kept running.
    const evicted = cluster.writeLog().filter((w) => w.verb === 'evict');
    assert.equal(evicted.length, 1);
  });
});
