import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createAlertmanagerServer } from '../../../functions/alertmanager-http.js';
import type { HandlerDeps, HandlerResult } from '../../../functions/handler-deps.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { ConfigError, MissingMetricsError } from '../../../lib/errors.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import { PROFILED_APP_MODEL } from '../../../lib/sim/profiled-app-model.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';

const GiB = 1024 ** 3;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

function clusterWithJob(): SimulatedCluster {
  const cluster = new SimulatedCluster({ seed: 3, apps: PROFILED_APP_MODEL });
  cluster.submitJob(
    pytorchJobManifest({
      name: 'bert',
      namespace: 'team-a',
      app: 'bert',
      workers: 2,
      minReplicas: 1,
      maxReplicas: 4,
      sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 8 * GiB },
    }),
  );
  cluster.step(60);
  return cluster;
}

/** A metrics source with nothing for any job, as Prometheus is before the sidecars are scraped. */
const noMetrics: MetricsSource = {
  stepSamples: async (ref) => {
    throw new MissingMetricsError(`no step times for ${ref.name}`);
  },
  containerUsage: async (ref) => {
    throw new MissingMetricsError(`no usage for ${ref.name}`);
  },
  workerStepTimes: async (ref) => {
    throw new MissingMetricsError(`no worker step times for ${ref.name}`);
  },
  samplesProcessed: async () => undefined,
};

function depsWith(cluster: SimulatedCluster, metrics: MetricsSource): HandlerDeps {
  return {
    cluster,
    metrics,
    clock: () => 1_800_000_000,
    config: { ...DEFAULT_POLICY_CONFIG },
    dryRun: false,
    logger: silent,
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
  };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

async function post(url: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

const firing = JSON.stringify(
  alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'bert' }]),
);

describe('alertmanager-http', () => {
  const cluster = clusterWithJob();
  const results: HandlerResult[] = [];
  const server = createAlertmanagerServer({
    deps: depsWith(cluster, noMetrics),
    onResult: (_payload, result) => results.push(result),
  });
  let base: string;

  before(async () => {
    base = await listen(server);
  });
  after(() => close(server));

  it('answers 400 naming the field for a payload the alarm schema rejects, and reads nothing', async () => {
    const hook = alertmanagerWebhook([{ namespace: 'team-a', kind: 'Deployment', name: 'bert' }]);
    const answer = await post(`${base}/alertmanager`, JSON.stringify(hook));
    assert.equal(answer.status, 400);
    assert.equal(answer.json.field, '/alerts/0/labels/job_kind');
    assert.equal((await post(`${base}/alertmanager`, '{"alerts": ')).json.field, '');
    assert.equal(results.length, 0);
  });

  it('answers 200 with the result: missing metrics mean an error for the job and no write', async () => {
    const answer = await post(`${base}/alertmanager`, firing);
    assert.equal(answer.status, 200);
    const result = answer.json as unknown as HandlerResult;
    assert.equal(result.trigger, 'alarm');
    assert.deepEqual(result.outcomes, []);
    assert.equal(result.errors[0]?.code, 'MISSING_METRICS');
    assert.deepEqual(result.errors[0]?.ref, { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' });
    assert.ok(!cluster.writeLog().some((w) => w.verb === 'patch' || w.verb === 'evict'));
    assert.equal(results.length, 1);
  });

  it('ignores resolved alerts', async () => {
    const resolved = alertmanagerWebhook([
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'bert', status: 'resolved' },
    ]);
    const answer = await post(`${base}/alertmanager`, JSON.stringify(resolved));
    assert.equal(answer.status, 200);
    assert.equal(answer.json.ignored, 'no firing alert');
  });

  it('only serves POST /alertmanager', async () => {
    const get = await fetch(`${base}/alertmanager`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal((await post(`${base}/other`, firing)).status, 404);
  });
});

describe('alertmanager-http failures Alertmanager should retry', () => {
  it('answers 500 when the clients cannot be built', async () => {
    const server = createAlertmanagerServer({
      deps: async () => {
        throw new ConfigError('PROMETHEUS_URL is not set');
      },
    });
    const base = await listen(server);
    try {
      const answer = await post(`${base}/alertmanager`, firing);
      assert.equal(answer.status, 500);
      assert.match(String(answer.json.error), /PROMETHEUS_URL/);
    } finally {
      await close(server);
    }
  });

  it('reports an unreachable Prometheus per job (API_ERROR) and writes nothing', async () => {
    // A port that was just free: nothing listens there.
    const probe = createServer();
    const prometheusUrl = await listen(probe);
    await close(probe);
    const cluster = clusterWithJob();
    const metrics = new PrometheusMetricsSource(prometheusUrl, () => 1_800_000_000, { timeoutMs: 1000 });
    const server = createAlertmanagerServer({ deps: depsWith(cluster, metrics) });
    const base = await listen(server);
    try {
      const answer = await post(`${base}/alertmanager`, firing);
      assert.equal(answer.status, 200);
      const result = answer.json as unknown as HandlerResult;
      assert.equal(result.errors[0]?.code, 'API_ERROR');
      assert.match(result.errors[0]?.message ?? '', /unreachable/);
      assert.ok(!cluster.writeLog().some((w) => w.verb === 'patch' || w.verb === 'evict'));
    } finally {
      await close(server);
    }
  });
});
