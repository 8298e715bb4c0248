// Records the Prometheus HTTP API answers that the unit tests of PrometheusMetricsSource replay
// (test/unit/metrics/fixtures/prometheus-responses.json). It runs the real thing: three bundled sidecars
// fed progress for a few seconds, a real Prometheus scraping them, and the real PrometheusMetricsSource
// querying it through a recording proxy, so every answer has the exact shape Prometheus gives.
// Run: npx tsx test/metrics/support/record-prometheus-responses.ts   (needs Debian's `prometheus`)
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReadyPrometheus } from '../../../infra/local-stack/monitoring.js';
import {
  monitoringBinaries,
  type Started,
  start,
  stop,
  waitUntil,
} from '../../../infra/local-stack/processes.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';
import { bundleSidecar, REPO_ROOT } from './sidecar-bundle.js';

const JOB: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const OUT = join(REPO_ROOT, 'test/unit/metrics/fixtures/prometheus-responses.json');

export interface RecordedExchange {
  path: string;
  query: string;
  params: Record<string, string>;
  status: number;
  body: unknown;
}

async function main(): Promise<void> {
  const binaries = monitoringBinaries();
  const dir = await mkdtemp(join(tmpdir(), 'trainscaler-record-'));
  const processes: Started[] = [];
  try {
    const sidecarJs = await bundleSidecar(dir);
    const cgroup = join(dir, 'cgroup');
    await mkdir(cgroup);
    await writeFile(join(cgroup, 'memory.current'), `${3 * 1024 ** 3}\n`);
    await writeFile(join(cgroup, 'memory.max'), `${8 * 1024 ** 3}\n`);
    await writeFile(join(cgroup, 'cpu.stat'), 'usage_usec 1000000\n');
    const sidecars: { metrics: string; hook: string }[] = [];
    for (let worker = 0; worker < 3; worker++) {
      const sidecar = start(`sidecar-${worker}`, process.execPath, [sidecarJs], {
        env: {
          TRAINSCALER_NAMESPACE: JOB.namespace,
          TRAINSCALER_JOB_KIND: JOB.kind,
          TRAINSCALER_JOB_NAME: JOB.name,
          TRAINSCALER_POD: `${JOB.name}-worker-${worker}`,
          TRAINSCALER_WORKER_INDEX: String(worker),
          TRAINSCALER_NODE_NAME: `gpu-node-${worker === 2 ? 1 : 0}`,
          TRAINSCALER_REPLICAS: '3',
          TRAINSCALER_LOCAL_BATCH_SIZE: '32',
          TRAINSCALER_STEP_WINDOW_SECONDS: '3',
          TRAINSCALER_METRICS_HOST: '127.0.0.1',
          TRAINSCALER_METRICS_PORT: '0',
          TRAINSCALER_HOOK_PORT: '0',
          TRAINSCALER_NVIDIA_SMI: 'off',
          TRAINSCALER_CGROUP_PATH: cgroup,
        },
      });
      processes.push(sidecar);
      const line = await waitUntil(
        () => /^\{.*"msg":"listening".*$/m.exec(sidecar.output())?.[0],
        10_000,
        'sidecar',
      );
      sidecars.push(JSON.parse(line) as { metrics: string; hook: string });
    }

    await writeFile(
      join(dir, 'prometheus.yml'),
      [
        'global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}',
        'scrape_configs:',
        '  - job_name: trainscaler-sidecars',
        '    honor_labels: true',
        `    static_configs: [{targets: [${sidecars.map((s) => `"${new URL(s.metrics).host}"`).join(', ')}]}]`,
      ].join('\n'),
    );
    const prometheus = await startReadyPrometheus(binaries, dir);
    processes.push(prometheus.started);
    const prometheusUrl = prometheus.url;

    // 12 s of progress: workers 0 and 1 at 0.1 s/step, worker 2 at 0.3 s/step; samples = steps x 32;
    // the cgroup burns half a core.
    const started = Date.now();
    const steps = [0, 0, 0];
    while (Date.now() - started < 12_000) {
      await new Promise((r) => setTimeout(r, 100));
      await writeFile(join(cgroup, 'cpu.stat'), `usage_usec ${1_000_000 + (Date.now() - started) * 500}\n`);
      for (let w = 0; w < 3; w++) {
        const every = w === 2 ? 3 : 1;
        const tick = Math.floor((Date.now() - started) / 100);
        const step = Math.floor(tick / every);
        if (step === steps[w]) continue;
        steps[w] = step;
        await fetch(`${sidecars[w]?.hook}/progress`, {
          method: 'POST',
          body: JSON.stringify({ step, samples: step * 32, at: Date.now() / 1000 }),
        });
      }
    }
    await new Promise((r) => setTimeout(r, 2000)); // let the last values be scraped

    // The source's own queries, through a proxy that keeps each exchange.
    const exchanges: RecordedExchange[] = [];
    const proxy = createServer(async (req, res) => {
      const url = new URL(req.url ?? '/', prometheusUrl);
      const upstream = await fetch(url);
      const text = await upstream.text();
      exchanges.push({
        path: url.pathname,
        query: url.searchParams.get('query') ?? '',
        params: Object.fromEntries(url.searchParams),
        status: upstream.status,
        body: JSON.parse(text) as unknown,
      });
      res.writeHead(upstream.status, { 'content-type': 'application/json' });
      res.end(text);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const source = new PrometheusMetricsSource(
      `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      () => Date.now() / 1000,
      { stepSeconds: 2, rateWindowSeconds: 5 },
    );
    await source.stepSamples(JOB, 60);
    await source.workerStepTimes(JOB, 60);
    await source.containerUsage(JOB, 60);
    await source.samplesProcessed(JOB);
    await source.stepSamples({ ...JOB, name: 'absent' }, 60).catch(() => undefined);
    await source.samplesProcessed({ ...JOB, name: 'absent' }).catch(() => undefined);
    // Prometheus's own error answer for a query it cannot parse.
    const bad = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent('sum(')}`);
    exchanges.push({
      path: '/api/v1/query',
      query: 'sum(',
      params: { query: 'sum(' },
      status: bad.status,
      body: (await bad.json()) as unknown,
    });
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));

    await mkdir(join(REPO_ROOT, 'test/unit/metrics/fixtures'), { recursive: true });
    await writeFile(
      OUT,
      `${JSON.stringify({ recordedWith: (await versionOf(prometheusUrl)) ?? 'prometheus', exchanges }, null, 1)}\n`,
    );
    console.log(`recorded ${exchanges.length} exchanges to ${OUT}`);
  } finally {
    await Promise.all(processes.map((p) => stop(p)));
    await rm(dir, { recursive: true, force: true });
  }
}

async function versionOf(url: string): Promise<string | undefined> {
  const response = await fetch(`${url}/api/v1/status/buildinfo`).catch(() => undefined);
  if (!response?.ok) return undefined;
  const body = (await response.json()) as { data?: { version?: string } };
  return body.data?.version ? `prometheus ${body.data.version}` : undefined;
}

await main();
