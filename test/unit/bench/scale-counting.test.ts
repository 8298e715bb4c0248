// The scale benchmark's counting proxies count what the production clients send: each proxy is put around
// the production client itself (KubernetesClusterClient, PrometheusMetricsSource), driven against an HTTP
// server on 127.0.0.1, and its count per call must equal the requests the server received.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient } from '../../../lib/cluster/kubernetes-cluster-client.js';
import type { JobReadings } from '../../../lib/metrics/job-readings.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { JobKind, JobRef } from '../../../lib/types.js';
import {
  countingClusterClient,
  countingMetricsSource,
  DISCOVERY_REQUEST,
  type ExportedSeries,
  RequestCounter,
} from '../../bench/scale-counting.js';
import { FIXED_APP_MODEL } from '../sim/fixed-app-model.js';

interface Listening {
  url: string;
  server: Server;
}

async function listen(server: Server): Promise<Listening> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server };
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `<verb> <resource>` of a request to the API server, as the audit log and RBAC name it. */
function requestKey(method: string, path: string, watch: boolean): string {
  if (method === 'GET' && path === '/api/v1') return DISCOVERY_REQUEST;
  const parts = path.split('/').filter(Boolean);
  let rest = parts.slice(parts[0] === 'api' ? 2 : 3);
  if (rest[0] === 'namespaces') rest = rest.slice(2);
  const [resource = '', name, subresource] = rest;
  const verbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch' };
  const verb = method === 'GET' ? (watch ? 'watch' : name ? 'get' : 'list') : (verbs[method] ?? method);
  return `${verb} ${subresource ? `${resource}/${subresource}` : resource}`;
}

const tally = (keys: readonly string[]) => {
  const out: Record<string, number> = {};
  for (const k of [...keys].sort()) out[k] = (out[k] ?? 0) + 1;
  return out;
};

describe('countingClusterClient counts the requests KubernetesClusterClient sends', () => {
  const received: string[] = [];
  let api: Listening;
  let production: KubernetesClusterClient;

  before(async () => {
    api = await listen(
      createServer((request, response) => {
        const url = new URL(request.url ?? '/', 'http://127.0.0.1');
        const key = requestKey(
          request.method ?? 'GET',
          url.pathname,
          url.searchParams.get('watch') === 'true',
        );
        received.push(key);
        request.resume();
        response.setHeader('content-type', 'application/json');
        if (key === DISCOVERY_REQUEST)
          return response.end(JSON.stringify({ kind: 'APIResourceList', groupVersion: 'v1', resources: [] }));
        // Kueue absent and a job gone: 404s are requests too.
        if (key === 'list workloads' || url.pathname.endsWith('/gone')) {
          response.statusCode = 404;
          return response.end(JSON.stringify({ kind: 'Status', code: 404, message: 'not found' }));
        }
        if (key.startsWith('list '))
          return response.end(JSON.stringify({ metadata: {}, items: [{}, {}, {}] }));
        response.end(JSON.stringify({ metadata: { name: 'x', namespace: 'team-a', resourceVersion: '2' } }));
      }),
    );
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: api.url, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    production = new KubernetesClusterClient(kubeConfig);
  });
  after(() => close(api.server));

  const KINDS: JobKind[] = ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob'];
  const ref = (kind: JobKind, name = 'train'): JobRef => ({ kind, namespace: 'team-a', name });
  const write = { dryRun: false };
  const event = (dryRun: boolean) => (c: ClusterClient) =>
    c.createEvent(
      {
        involved: { ref: ref('PyTorchJob'), uid: 'u', apiVersion: 'kubeflow.org/v1' },
        type: 'Normal',
        reason: 'TrainscalerTuning',
        message: 'm',
      },
      { dryRun },
    );
  const calls: Record<string, (c: ClusterClient) => Promise<unknown>> = {
    getJob: (c) => Promise.all(KINDS.map((kind) => c.getJob(ref(kind)))),
    'getJob of a job gone (404)': (c) => c.getJob(ref('PyTorchJob', 'gone')).catch(() => undefined),
    // Three items each: one request a list, whatever its length (the client sends no `limit`).
    listJobs: (c) => Promise.all(KINDS.flatMap((kind) => [c.listJobs(kind), c.listJobs(kind, 'team-a')])),
    // TrainJobs are never patched (lib/adapters/job-adapter.ts), nor listed in api-access.ts as patched.
    patchJob: (c) =>
      Promise.all(
        KINDS.filter((k) => k !== 'TrainJob').map((kind) =>
          c.patchJob(ref(kind), [{ op: 'test', path: '/spec', value: {} }], write),
        ),
      ),
    listPods: (c) => Promise.all([c.listPods(undefined), c.listPods('team-a', 'a=b')]),
    listNodes: (c) => c.listNodes(),
    evictPod: (c) => c.evictPod('team-a', 'train-worker-0', write),
    resizePod: (c) => c.resizePod?.('team-a', 'train-worker-0', [], write) ?? Promise.resolve(),
    'servesPodResize, asked twice': async (c) => {
      await c.servesPodResize?.();
      await c.servesPodResize?.();
    },
    createEvent: event(false),
    'createEvent in a dry run': event(true),
    'listWorkloads without Kueue (404)': (c) => c.listWorkloads('team-a', 'kueue.x-k8s.io/job-uid=u'),
    getLocalQueue: (c) => c.getLocalQueue('team-a', 'lq'),
    getClusterQueue: (c) => c.getClusterQueue('cq'),
    getConfigMap: (c) => c.getConfigMap('trainscaler-system', 'trainscaler-profiles'),
    getJobState: (c) => c.getJobState(ref('PyTorchJob')),
    listJobStates: (c) => c.listJobStates(),
    'putJobState: create, re-own, write': (c) => {
      const job = { ref: ref('PyTorchJob'), uid: 'u1', apiVersion: 'kubeflow.org/v1' };
      const current = {
        namespace: 'team-a',
        name: 'x',
        resourceVersion: '2',
        target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'train' },
        status: {},
      };
      return Promise.all([
        c.putJobState(job, {}, undefined, write).catch(() => undefined),
        c.putJobState(job, {}, { ...current, ownerUid: 'u0' }, write).catch(() => undefined),
        c.putJobState(job, {}, { ...current, ownerUid: 'u1' }, write).catch(() => undefined),
      ]);
    },
    putConfigMap: (c) =>
      Promise.all([
        c.putConfigMap('trainscaler-system', 'p', {}, undefined, write),
        c.putConfigMap('trainscaler-system', 'p', {}, '7', write),
      ]),
  };
  for (const [what, call] of Object.entries(calls)) {
    it(what, async () => {
      received.length = 0;
      const counter = new RequestCounter();
      await call(countingClusterClient(production, () => counter));
      const counted = counter.snapshot();
      assert.ok(received.length > 0 || what.includes('dry run'), 'the call reached the server');
      assert.deepEqual(counted.apiRequestsByVerbAndResource, tally(received));
      const reads = received.filter((k) => /^(get|list|watch) /.test(k)).length;
      assert.equal(counted.apiReads, reads);
      assert.equal(counted.apiWrites, received.length - reads);
      // Every list answers three objects (none on a 404).
      const lists = received.filter((k) => k.startsWith('list ') && k !== 'list workloads').length;
      assert.equal(counted.apiObjectsListed, 3 * lists);
    });
  }

  it('has the optional methods where its target has them, and only there', () => {
    const counter = () => new RequestCounter();
    const simulated = new SimulatedCluster({ seed: 1, apps: FIXED_APP_MODEL });
    assert.equal(countingClusterClient(simulated, counter).servesPodResize, undefined);
    assert.equal(countingClusterClient(simulated, counter).resizePod, undefined);
    assert.equal(typeof countingClusterClient(production, counter).servesPodResize, 'function');
    assert.equal(typeof countingClusterClient(production, counter).resizePod, 'function');
  });
});

interface PrometheusScenario {
  stepTimes: boolean;
  sidecarUsage: boolean;
  cadvisorUsage: boolean;
  trainerSamples: boolean;
  sidecarSamples: boolean;
}

const NOW = 1_767_225_600;
const optional = (answer: Promise<number | undefined> | undefined) =>
  answer ?? Promise.reject(new Error('absent'));
/** A batch answer as compared: each job's value or error, in order. */
const batch = async (answer: Promise<JobReadings<unknown>> | undefined) => {
  if (!answer) throw new Error('absent');
  return [...(await answer)].map(([key, r]) => [key, r.ok ? r.value : String(r.error)]);
};

describe('countingMetricsSource counts the PromQL queries PrometheusMetricsSource sends', () => {
  let queries = 0;
  let scenario: PrometheusScenario;
  let prometheus: Listening;

  before(async () => {
    prometheus = await listen(
      createServer(async (request, response) => {
        queries += 1;
        const url = new URL(request.url ?? '/', 'http://127.0.0.1');
        // The batch reads POST their query (a form), the per-job reads put it in the URL.
        let form = '';
        for await (const chunk of request) form += String(chunk);
        const query =
          (request.method === 'POST' ? new URLSearchParams(form) : url.searchParams).get('query') ?? '';
        const labels = {
          namespace: 'team-a',
          job_kind: 'PyTorchJob',
          job_name: 'train',
          replicas: '2',
          nodes: '1',
          local_batch_size: '32',
          pod: 'train-worker-0',
          worker: '0',
        };
        const has = (series: string) => query.includes(series);
        response.setHeader('content-type', 'application/json');
        if (url.pathname === '/api/v1/query_range') {
          const values = [[NOW - 60, '0.5']];
          const result = scenario.stepTimes ? [{ metric: labels, values }] : [];
          return response.end(JSON.stringify({ status: 'success', data: { resultType: 'matrix', result } }));
        }
        const present =
          (has('trainscaler_cgroup_') && scenario.sidecarUsage) ||
          (has('container_') && scenario.cadvisorUsage) ||
          (has('trainscaler_trainer_samples') && scenario.trainerSamples) ||
          (has('trainscaler_samples_total') && scenario.sidecarSamples) ||
          has('trainscaler_resumed_timestamp_seconds');
        const result = present
          ? [
              {
                metric: { ...labels, pod: 'train-worker-0', role: 'worker', at: String(NOW - 60) },
                value: [NOW, '5'],
              },
            ]
          : [];
        response.end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result } }));
      }),
    );
  });
  after(() => close(prometheus.server));

  const job: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'train' };
  const jobs: JobRef[] = [job, { ...job, name: 'other' }, { ...job, namespace: 'team-b' }];
  const since = (at: number) => jobs.map((ref) => ({ ref, since: at }));
  const all: PrometheusScenario = {
    stepTimes: true,
    sidecarUsage: true,
    cadvisorUsage: true,
    trainerSamples: true,
    sidecarSamples: true,
  };
  const none: PrometheusScenario = {
    stepTimes: false,
    sidecarUsage: false,
    cadvisorUsage: false,
    trainerSamples: false,
    sidecarSamples: false,
  };
  const exporting = (s: PrometheusScenario): ExportedSeries => ({
    sidecarUsage: s.sidecarUsage,
    trainerSamples: s.trainerSamples,
  });
  const cases: Array<[string, PrometheusScenario, (m: MetricsSource) => Promise<unknown>]> = [
    ['stepSamples', all, (m) => m.stepSamples(job, 3600)],
    ['stepSamples without series', none, (m) => m.stepSamples(job, 3600)],
    ['containerUsage from the sidecar', all, (m) => m.containerUsage(job, 3600)],
    ['containerUsage from cAdvisor', { ...all, sidecarUsage: false }, (m) => m.containerUsage(job, 3600)],
    ['containerUsage without series', none, (m) => m.containerUsage(job, 3600)],
    ['workerStepTimes', all, (m) => m.workerStepTimes(job, 3600)],
    ["samplesProcessed from the trainer's series", all, (m) => m.samplesProcessed(job)],
    [
      "samplesProcessed from the sidecar's counter",
      { ...all, trainerSamples: false },
      (m) => m.samplesProcessed(job),
    ],
    ['samplesProcessed without series', none, (m) => m.samplesProcessed(job)],
    [
      'firstStepAfterPause since a past rescale',
      all,
      (m) => optional(m.firstStepAfterPause?.(job, NOW - 600)),
    ],
    ['firstStepAfterPause since now', all, (m) => optional(m.firstStepAfterPause?.(job, NOW))],
    ['pauseEndedAfter since a past rescale', all, (m) => optional(m.pauseEndedAfter?.(job, NOW - 600))],
    ['pauseEndedAfter since now', all, (m) => optional(m.pauseEndedAfter?.(job, NOW + 1))],
    // The batch reads: as many queries for 3 jobs as for 1, cAdvisor's when a job has no sidecar usage.
    ['stepSamplesOfJobs', all, (m) => batch(m.stepSamplesOfJobs?.(jobs, 3600))],
    ['stepSamplesOfJobs of no job', all, (m) => batch(m.stepSamplesOfJobs?.([], 3600))],
    ['containerUsageOfJobs from the sidecar', all, (m) => batch(m.containerUsageOfJobs?.(jobs, 3600))],
    [
      'containerUsageOfJobs from cAdvisor',
      { ...all, sidecarUsage: false },
      (m) => batch(m.containerUsageOfJobs?.(jobs, 3600)),
    ],
    ['containerUsageOfJobs without series', none, (m) => batch(m.containerUsageOfJobs?.(jobs, 3600))],
    ['workerStepTimesOfJobs', all, (m) => batch(m.workerStepTimesOfJobs?.(jobs, 3600))],
    ['samplesProcessedOfJobs', all, (m) => batch(m.samplesProcessedOfJobs?.(jobs))],
    ['samplesProcessedOfJobs without series', none, (m) => batch(m.samplesProcessedOfJobs?.(jobs))],
    [
      'firstStepAfterPauseOfJobs since a past rescale',
      all,
      (m) => batch(m.firstStepAfterPauseOfJobs?.(since(NOW - 600))),
    ],
    ['firstStepAfterPauseOfJobs since now', all, (m) => batch(m.firstStepAfterPauseOfJobs?.(since(NOW)))],
    [
      'pauseEndedAfterOfJobs since a past rescale',
      all,
      (m) => batch(m.pauseEndedAfterOfJobs?.(since(NOW - 600))),
    ],
    ['pauseEndedAfterOfJobs since now', all, (m) => batch(m.pauseEndedAfterOfJobs?.(since(NOW + 1)))],
  ];
  for (const [what, given, call] of cases) {
    it(what, async () => {
      scenario = given;
      queries = 0;
      const counter = new RequestCounter();
      const clock = () => NOW;
      const production = new PrometheusMetricsSource(prometheus.url, clock);
      const counting = countingMetricsSource(production, () => counter, clock, exporting(given));
      // The counting source answers as the production one: same result, or the same error.
      const outcome = (p: Promise<unknown>) =>
        p.then(
          (value) => ({ value }),
          (error: unknown) => ({ error: String(error) }),
        );
      const counted = await outcome(call(counting));
      const sent = queries;
      queries = 0;
      assert.deepEqual(counted, await outcome(call(production)));
      assert.equal(counter.snapshot().promqlQueries, sent);
    });
  }
});
