// PrometheusMetricsSource's batch reads against a small HTTP server on 127.0.0.1 answering as Prometheus does:
// containerUsageOfJobs where some jobs have no sidecar cgroup series (one cAdvisor query pair for those jobs'
// namespaces only, split per job by its pods' names and namespace), and which query a refusal came from, named
// in every asked job's error.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { IncompleteMetricsError, MissingMetricsError } from '../../../lib/errors.js';
import { jobKey } from '../../../lib/metrics/job-readings.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';

const NOW = 1_767_225_600;

const job = (name: string, namespace = 'team-a'): JobRef => ({ kind: 'PyTorchJob', namespace, name });
const identity = (ref: JobRef) => ({ namespace: ref.namespace, job_kind: ref.kind, job_name: ref.name });

/** Has sidecar cgroup series. */
const WITH_SIDECAR = job('a');
/** Reports steps (its roles) but no cgroup series: read from cAdvisor. */
const CADVISOR_ONLY = job('b');
/** Neither cgroup nor cAdvisor series. */
const NO_USAGE = job('d', 'team-c');

const vector = (result: unknown[]) => ({
  status: 200,
  body: { status: 'success', data: { resultType: 'vector', result } },
});
const matrix = (result: unknown[]) => ({
  status: 200,
  body: { status: 'success', data: { resultType: 'matrix', result } },
});
const OVERLOADED: Answer = {
  status: 503,
  body: { status: 'error', errorType: 'unavailable', error: 'too many concurrent queries' },
};

type Answer = { status: number; body: unknown };

/** Prometheus's answers: `cadvisor` decides what the cAdvisor queries get. */
function prometheus(cadvisor: (query: string) => Answer) {
  return (query: string): Answer => {
    if (query.includes('container_cpu_usage_seconds_total') || query.includes('container_memory_working_set'))
      return cadvisor(query);
    const cpu = query.includes('trainscaler_cgroup_cpu');
    if (cpu || query.includes('trainscaler_cgroup_memory'))
      return vector([
        {
          metric: { ...identity(WITH_SIDECAR), pod: 'a-worker-0', role: 'worker' },
          value: [NOW, cpu ? '0.5' : '1024'],
        },
      ]);
    if (query.includes('trainscaler_step_time_seconds'))
      return vector(
        [WITH_SIDECAR, CADVISOR_ONLY, NO_USAGE].flatMap((ref) =>
          ['worker-0', 'worker-1'].map((p) => ({
            metric: { ...identity(ref), pod: `${ref.name}-${p}`, role: 'worker' },
            value: [NOW, '0.5'],
          })),
        ),
      );
    return vector([]);
  };
}

/** cAdvisor's series: the job's two pods, a pod of the same name in another namespace, another job's pod. */
function cadvisorSeries(query: string): Answer {
  const cpu = query.includes('container_cpu_usage_seconds_total');
  const series = (namespace: string, pod: string, cores: number, bytes: number) => ({
    metric: { namespace, pod },
    value: [NOW, String(cpu ? cores : bytes)],
  });
  return vector([
    series('team-a', 'b-worker-0', 0.25, 2048),
    series('team-a', 'b-worker-1', 0.75, 4096),
    series('team-z', 'b-worker-0', 9, 9999),
    series('team-a', 'other-worker-0', 9, 9999),
  ]);
}

describe('containerUsageOfJobs: jobs without the sidecar cgroup series', () => {
  const queries: string[] = [];
  let answer: (query: string) => Answer = () => ({ status: 500, body: {} });
  let rangeAnswer: (query: string) => Answer = () => matrix([]);
  let server: Server;
  let source: PrometheusMetricsSource;

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        const target = new URL(req.url ?? '/', 'http://x');
        const params = req.method === 'POST' ? new URLSearchParams(body) : target.searchParams;
        const query = params.get('query') ?? '';
        queries.push(query);
        const a = target.pathname.endsWith('query_range') ? rangeAnswer(query) : answer(query);
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(a.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    source = new PrometheusMetricsSource(url, () => NOW, { timeoutMs: 5000 });
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    queries.length = 0;
    rangeAnswer = () => matrix([]);
  });

  const cadvisorQueries = () => queries.filter((q) => q.includes('container_'));

  it("gives each job its own pods' cAdvisor usage, in its namespace only, and the sidecar's where it has them", async () => {
    answer = prometheus(cadvisorSeries);
    const read = await source.containerUsageOfJobs([WITH_SIDECAR, CADVISOR_ONLY, NO_USAGE], 600);
    assert.deepEqual(read.get(jobKey(WITH_SIDECAR)), {
      ok: true,
      value: [{ pod: 'a-worker-0', role: 'Worker', cpuMillis: 500, memoryBytes: 1024 }],
    });
    assert.deepEqual(read.get(jobKey(CADVISOR_ONLY)), {
      ok: true,
      value: [
        { pod: 'b-worker-0', role: 'Worker', cpuMillis: 250, memoryBytes: 2048 },
        { pod: 'b-worker-1', role: 'Worker', cpuMillis: 750, memoryBytes: 4096 },
      ],
    });
    const none = read.get(jobKey(NO_USAGE));
    assert.equal(none?.ok, false);
    assert.ok(!none?.ok && none.error instanceof MissingMetricsError);
    assert.match(
      String(!none?.ok && none.error),
      /no container usage \(sidecar cgroup or cAdvisor series\) for PyTorchJob team-c\/d/,
    );
    const asked = cadvisorQueries();
    assert.equal(asked.length, 2, 'one CPU and one memory query for every job without cgroup series');
    for (const q of asked) assert.match(q, /namespace=~"team-a\|team-c"/);
  });

  it('gives the jobs that needed cAdvisor its refusal, and the others their sidecar usage', async () => {
    const refusal = { status: 400, body: { status: 'error', errorType: 'bad_data', error: 'parse error' } };
    answer = prometheus(() => refusal);
    const read = await source.containerUsageOfJobs([WITH_SIDECAR, CADVISOR_ONLY, NO_USAGE], 600);
    assert.equal(read.get(jobKey(WITH_SIDECAR))?.ok, true);
    const b = read.get(jobKey(CADVISOR_ONLY));
    const d = read.get(jobKey(NO_USAGE));
    assert.equal(b?.ok, false);
    assert.ok(!b?.ok && !(b.error instanceof MissingMetricsError), 'the refusal, not "no series"');
    assert.deepEqual(d, b);
  });

  it('asks cAdvisor nothing when every job has its cgroup series', async () => {
    answer = prometheus(cadvisorSeries);
    const read = await source.containerUsageOfJobs([WITH_SIDECAR], 600);
    assert.equal(read.get(jobKey(WITH_SIDECAR))?.ok, true);
    assert.deepEqual(cadvisorQueries(), []);
  });
});

describe('a batch query Prometheus refuses', () => {
  type Read = (s: PrometheusMetricsSource, refs: readonly JobRef[]) => Promise<Map<string, unknown>>;
  const since = (refs: readonly JobRef[]) => refs.map((ref) => ({ ref, since: NOW - 600 }));
  const cases: Array<[string, string, Read, { cgroup?: boolean }?]> = [
    ['step time query', 'avg by (namespace', (s, r) => s.stepSamplesOfJobs(r, 600)],
    ['node count query', 'local_batch_size) (count by', (s, r) => s.stepSamplesOfJobs(r, 600)],
    ['worker count query', 'replicas, local_batch_size) (trainscaler_step', (s, r) => s.stepSamplesOfJobs(r, 600)],
    ['CPU usage query', 'trainscaler_cgroup_cpu', (s, r) => s.containerUsageOfJobs(r, 600)],
    ['memory usage query', 'trainscaler_cgroup_memory', (s, r) => s.containerUsageOfJobs(r, 600)],
    ['role query', 'pod, role) (trainscaler_step_time', (s, r) => s.containerUsageOfJobs(r, 600)],
    ['CPU usage query', 'container_cpu_usage', (s, r) => s.containerUsageOfJobs(r, 600), { cgroup: false }],
    ['memory usage query', 'container_memory', (s, r) => s.containerUsageOfJobs(r, 600), { cgroup: false }],
    ['per-worker step time query', 'pod, worker, node)', (s, r) => s.workerStepTimesOfJobs(r, 600)],
    ['progress query', 'sum by (', (s, r) => s.samplesProcessedOfJobs(r)],
    ['rescale pause query', 'count_values without (', (s, r) => s.firstStepAfterPauseOfJobs(since(r))],
    ['rescale pause length query', 'group_left(at)', (s, r) => s.pauseEndedAfterOfJobs(since(r))],
  ];
  const refs = [job('a'), job('b'), job('c', 'team-c')];

  for (const [label, marker, read, options] of cases) {
    it(`${label} (${marker}): every asked job's error names it`, async () => {
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        req.on('end', () => {
          const query = new URLSearchParams(body).get('query') ?? '';
          const range = (req.url ?? '').includes('query_range');
          const cgroup = query.includes('trainscaler_cgroup_') && options?.cgroup !== false;
          const pods = refs.map((ref) => ({
            metric: { ...identity(ref), pod: `${ref.name}-worker-0`, role: 'worker' },
            value: [NOW, '1'],
          }));
          const a = query.includes(marker) ? OVERLOADED : range ? matrix([]) : vector(cgroup ? pods : []);
          res.writeHead(a.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(a.body));
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        const readings = await read(new PrometheusMetricsSource(url, () => NOW, { timeoutMs: 5000 }), refs);
        for (const ref of refs) {
          const r = readings.get(jobKey(ref)) as { ok: boolean; error?: unknown } | undefined;
          assert.ok(
            r && !r.ok && r.error instanceof IncompleteMetricsError,
            `${ref.name}: ${String(r?.error)}`,
          );
          assert.match(r.error.message, new RegExp(`batch ${label} of \\d+ jobs`));
        }
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  }
});
