// infra/grafana/trainscaler-dashboard.json against a real Prometheus holding the project's own series: the
// runner's real RunnerMetrics registry after a few recorded handler results, and three GPU workers' real
// sidecar exporters (ProgressTracker, GpuReader on a stand-in nvidia-smi, a pause and resume), scraped at
// 1 s through infra/prometheus/prometheus.yml's production scrape job (identity relabelled from pod
// metadata) with the production rules loaded. Every target expression of every panel, and the template
// variable's query, must parse and return data: a panel that shows nothing fails here, not on a screen.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { dump, load } from 'js-yaml';
import type { Registry } from 'prom-client';
import type { HandlerResult } from '../../functions/handler-deps.js';
import {
  discoveredTargets,
  startReadyPrometheus,
  testPrometheusConfig,
} from '../../infra/local-stack/monitoring.js';
import { monitoringBinaries, type Started, stop, waitUntil } from '../../infra/local-stack/processes.js';
import { DrainCoordinator } from '../../infra/sidecar/src/drain.js';
import { GpuReader } from '../../infra/sidecar/src/gpu.js';
import { createSidecarMetrics } from '../../infra/sidecar/src/metrics.js';
import { ProgressTracker } from '../../infra/sidecar/src/progress-tracker.js';
import { RunnerMetrics } from '../../lib/runner/metrics.js';
import type { JobRef } from '../../lib/types.js';
import { REPO_ROOT } from './support/sidecar-bundle.js';

const DASHBOARD = join(REPO_ROOT, 'infra/grafana/trainscaler-dashboard.json');
const BERT: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const GPT: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'gpt' };
/** Grafana's variables as a dashboard user would have them: all namespaces, a short rate window. */
const GRAFANA_VARIABLES: Record<string, string> = {
  $__rate_interval: '30s',
  $__range: '5m',
  $namespace: '.*',
};

interface Target {
  panel: string;
  expr: string;
}

/** Every panel's target expressions, nested rows included. */
function dashboardTargets(dashboard: unknown): Target[] {
  const targets: Target[] = [];
  const visit = (panels: unknown) => {
    if (!Array.isArray(panels)) return;
    for (const panel of panels as { title?: string; targets?: { expr?: string }[]; panels?: unknown }[]) {
      for (const target of panel.targets ?? [])
        targets.push({ panel: panel.title ?? '?', expr: target.expr ?? '' });
      visit(panel.panels);
    }
  };
  visit((dashboard as { panels?: unknown }).panels);
  return targets;
}

function substitute(expr: string): string {
  let out = expr;
  for (const [name, value] of Object.entries(GRAFANA_VARIABLES)) out = out.replaceAll(name, value);
  return out;
}

function resized(ref: JobRef, applied: boolean, from: number, to: number): HandlerResult {
  return {
    trigger: 'schedule',
    errors: [],
    outcomes: [
      {
        ref,
        applied,
        plan: {
          ref,
          policy: 'rebalance',
          reason: 'grow',
          changes: [{ kind: 'replicas', role: 'Worker', from, to }],
        },
      },
    ],
  };
}

function serve(registry: () => Registry): Promise<Server> {
  const server = createServer((_req, res) => {
    const r = registry();
    r.metrics().then(
      (text) => res.writeHead(200, { 'content-type': r.contentType }).end(text),
      (error: Error) => res.writeHead(500).end(error.message),
    );
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const address = (server: Server) => `127.0.0.1:${(server.address() as AddressInfo).port}`;

/** A training-operator pod as Kubernetes discovery would describe it. */
function workerPod(job: string, index: number): V1Pod {
  return {
    metadata: {
      namespace: BERT.namespace,
      name: `${job}-worker-${index}`,
      labels: {
        'training.kubeflow.org/replica-type': 'Worker',
        'training.kubeflow.org/replica-index': String(index),
      },
      ownerReferences: [
        { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: job, uid: `uid-${job}`, controller: true },
      ],
    },
    spec: { nodeName: `gpu-node-${index}`, containers: [] },
    status: { phase: 'Running' },
  };
}

async function query(prometheusUrl: string, expr: string): Promise<{ error?: string; count: number }> {
  const response = await fetch(`${prometheusUrl}/api/v1/query?${new URLSearchParams({ query: expr })}`);
  const body = (await response.json()) as { status: string; error?: string; data?: { result?: unknown[] } };
  if (body.status !== 'success') return { error: body.error ?? `HTTP ${response.status}`, count: 0 };
  return { count: body.data?.result?.length ?? 0 };
}

describe('Grafana dashboard against a real Prometheus with recorded series', () => {
  const servers: Server[] = [];
  const processes: Started[] = [];
  const timers: NodeJS.Timeout[] = [];
  let dir = '';
  let prometheusUrl = '';

  before(async () => {
    const binaries = monitoringBinaries();
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-dashboard-'));
    const now = () => Date.now() / 1000;

    // The runner: real RunnerMetrics, fed the results a few handler invocations would give it.
    const runner = new RunnerMetrics();
    runner.leader.set(1);
    runner.queueDepth.set(0);
    runner.droppedEvents.inc(0);
    runner.webhookResponses.inc({ status: '429' });
    runner.webhookUnauthorized.inc({ reason: 'missing' });
    let tick = 0;
    const recordTick = () => {
      tick += 1;
      runner.recordResult('schedule', resized(BERT, true, 2 + (tick % 2), 3 - (tick % 2)), 0.05 + tick / 100);
      runner.recordResult('schedule', resized(GPT, false, 2, 4), 0.04); // held back: could grow
      runner.recordOutcomes('alarm', {
        trigger: 'alarm',
        outcomes: [],
        errors: [{ ref: GPT, code: 'MISSING_METRICS', message: 'no series yet' }],
      });
      runner.recordFailure('alarm', new Error('api server unreachable'), 0.2);
    };
    recordTick();
    timers.push(setInterval(recordTick, 1000));
    servers.push(await serve(() => runner.registry));

    // Three sidecars of PyTorchJob bert: real exporters; each GPU's utilisation comes from a stand-in
    // nvidia-smi (the real GpuReader parses its output), worker 2 idle and slow.
    const groups: ReturnType<typeof discoveredTargets>[] = [];
    for (const index of [0, 1, 2]) {
      const smi = join(dir, `nvidia-smi-${index}`);
      await writeFile(smi, `#!/bin/sh\necho "${index === 2 ? 12 : 85}, 30000, 81920"\n`);
      await chmod(smi, 0o755);
      const tracker = new ProgressTracker(60, { replicas: '3', nodes: '3', local_batch_size: '32' });
      const metrics = createSidecarMetrics({
        identity: {
          namespace: BERT.namespace,
          job_kind: 'PyTorchJob',
          job_name: BERT.name,
          pod: `bert-worker-${index}`,
          role: 'worker',
          worker: String(index),
        },
        nodeName: `gpu-node-${index}`,
        tracker,
        gpus: new GpuReader(smi, 0, () => {}),
        cgroupPath: undefined,
        drain: new DrainCoordinator(undefined),
        clock: now,
        log: () => {},
      });
      const stepSeconds = index === 2 ? 0.5 : 0.25;
      let step = 0;
      const report = (at: number) => {
        step += 1;
        metrics.record(tracker.observe({ step, samples: step * 32, at }));
      };
      // A first world, a 12 s pause (a rescale), then the resumed world up to now and on.
      const t0 = now();
      for (let at = t0 - 40; at < t0 - 20; at += stepSeconds) report(at);
      for (let at = t0 - 8; at < t0; at += stepSeconds) report(at);
      timers.push(setInterval(() => report(now()), stepSeconds * 1000));
      const server = await serve(() => metrics.registry);
      servers.push(server);
      groups.push(discoveredTargets(address(server), workerPod(BERT.name, index)));
    }

    // Prometheus: the production sidecar scrape job and rules, and the runner scraped with honor_labels
    // (its per-job series carry `namespace` and `job` labels of their own, as the chart's PodMonitor keeps).
    const config = load(await testPrometheusConfig()) as { scrape_configs: unknown[] };
    config.scrape_configs.push({
      job_name: 'trainscaler-runner',
      honor_labels: true,
      static_configs: [{ targets: [address(servers[0] as Server)] }],
    });
    await mkdir(join(dir, 'targets'), { recursive: true });
    await mkdir(join(dir, 'rules'), { recursive: true });
    await writeFile(join(dir, 'prometheus.yml'), dump(config));
    await writeFile(join(dir, 'targets/alertmanagers.json'), '[]');
    await writeFile(join(dir, 'targets/sidecars.json'), JSON.stringify(groups));
    await writeFile(
      join(dir, 'rules/trainscaler.rules.yml'),
      await readFile(join(REPO_ROOT, 'infra/prometheus/rules/trainscaler.rules.yml'), 'utf8'),
    );
    const prometheus = await startReadyPrometheus(binaries, dir);
    processes.push(prometheus.started);
    prometheusUrl = prometheus.url;
    const logs = () => processes.map((p) => `--- ${p.name}\n${p.output().slice(-3000)}`).join('\n');
    // Enough scrapes for rates and increases (>= 2 samples in a 30 s window), and the recording rules'
    // first evaluations on them.
    await waitUntil(
      async () =>
        (await query(prometheusUrl, 'trainscaler:worker_pace:ratio')).count === 3 &&
        (await query(prometheusUrl, 'count_over_time(trainscaler_job_workers[1m]) >= 8')).count > 0
          ? true
          : undefined,
      60_000,
      'the series and recording rules to have a few samples',
      logs,
      500,
    );
  });

  after(async () => {
    for (const timer of timers) clearInterval(timer);
    for (const process of processes) await stop(process);
    for (const server of servers) server.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('every panel has a query and no panel queries the same thing twice', async () => {
    const targets = dashboardTargets(JSON.parse(await readFile(DASHBOARD, 'utf8')));
    assert.ok(targets.length >= 15, `${targets.length} targets`);
    assert.deepEqual(
      targets.filter((t) => t.expr.trim() === '').map((t) => t.panel),
      [],
    );
    assert.equal(new Set(targets.map((t) => t.expr)).size, targets.length);
  });

  it('every target expression parses and returns series', async () => {
    const targets = dashboardTargets(JSON.parse(await readFile(DASHBOARD, 'utf8')));
    const failures: string[] = [];
    for (const { panel, expr } of targets) {
      const result = await query(prometheusUrl, substitute(expr));
      if (result.error) failures.push(`${panel}: ${expr}: ${result.error}`);
      else if (result.count === 0) failures.push(`${panel}: ${expr}: no series`);
    }
    assert.deepEqual(failures, []);
  });

  it("the namespace variable's query finds the jobs' namespaces", async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as {
      templating: { list: { name: string; definition?: string }[] };
    };
    const variable = dashboard.templating.list.find((v) => v.name === 'namespace');
    const match = /^label_values\((\w+), (\w+)\)$/.exec(variable?.definition ?? '');
    assert.ok(match, variable?.definition);
    const [, metric = '', label = ''] = match;
    const response = await fetch(
      `${prometheusUrl}/api/v1/label/${label}/values?${new URLSearchParams({ 'match[]': metric })}`,
    );
    const body = (await response.json()) as { data: string[] };
    assert.deepEqual(body.data, [BERT.namespace]);
  });
});
