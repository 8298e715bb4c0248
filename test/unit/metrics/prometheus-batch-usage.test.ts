// PrometheusMetricsSource's batch reads against a small HTTP server on 127.0.0.1 answering as Prometheus does:
// containerUsageOfJobs where some jobs have no sidecar cgroup series (one cAdvisor query pair for those jobs'
// namespaces only, split per job by its pods' names and namespace), and which query a refusal came from, named
// in every asked job's error.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { IncompleteMetricsError, MissingMetricsError } from '../../../lib/errors.js';
import { jobKey } from '../../../lib/metrics/job-readings.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';
import {
  type PrometheusAnswer as Answer,
  matrixAnswer as matrix,
  vectorAnswer as vector,
} from '../../support/prometheus-answers.js';

const NOW = 1_767_225_600;

const job = (name: string, namespace = 'team-a'): JobRef => ({ kind: 'PyTorchJob', namespace, name });
const identity = (ref: JobRef) => ({ namespace: ref.namespace, job_kind: ref.kind, job_name: ref.name });

/** Has sidecar cgroup series. */
const WITH_SIDECAR = job('a');
/** Reports steps (its roles) but no cgroup series: read from cAdvisor. */
const CADVISOR_ONLY = job('b');
/** Neither cgroup nor cAdvisor series. */
const NO_USAGE = job('d', 'team-c');

const OVERLOADED: Answer = {
  status: 503,
  body: { status: 'error', errorType: 'unavailable', error: 'too many concurrent queries' },
};

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

/** A Prometheus on 127.0.0.1 answering each POSTed query with `answer`, for the duration of `body`. */
async function withPrometheus<T>(
  answer: (query: string, range: boolean) => Answer,
  body: (source: PrometheusMetricsSource) => Promise<T>,
): Promise<T> {
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    req.on('end', () => {
      const a = answer(new URLSearchParams(text).get('query') ?? '', (req.url ?? '').includes('query_range'));
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return await body(new PrometheusMetricsSource(url, () => NOW, { timeoutMs: 5000 }));
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('containerUsageOfJobs: jobs without the sidecar cgroup series', () => {
  /** Reads every job's usage from a Prometheus answering with `answer`; the cAdvisor queries it was sent. */
  const usageOf = async (refs: readonly JobRef[], answer: (query: string) => Answer) => {
    const queries: string[] = [];
    const read = await withPrometheus(
      (query, range) => {
        queries.push(query);
        return range ? matrix([]) : answer(query);
      },
      (s) => s.containerUsageOfJobs(refs, 600),
    );
    return { read, cadvisorQueries: queries.filter((q) => q.includes('container_')) };
  };

  it("gives each job its own pods' cAdvisor usage, in its namespace only, and the sidecar's where it has them", async () => {
    const { read, cadvisorQueries } = await usageOf(
      [WITH_SIDECAR, CADVISOR_ONLY, NO_USAGE],
      prometheus(cadvisorSeries),
    );
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
    const asked = cadvisorQueries;
    assert.equal(asked.length, 2, 'one CPU and one memory query for every job without cgroup series');
    for (const q of asked) assert.match(q, /namespace=~"team-a\|team-c"/);
  });

  it('gives the jobs that needed cAdvisor its refusal, and the others their sidecar usage', async () => {
    const refusal = { status: 400, body: { status: 'error', errorType: 'bad_data', error: 'parse error' } };
    const { read } = await usageOf(
      [WITH_SIDECAR, CADVISOR_ONLY, NO_USAGE],
      prometheus(() => refusal),
    );
    assert.equal(read.get(jobKey(WITH_SIDECAR))?.ok, true);
    const b = read.get(jobKey(CADVISOR_ONLY));
    const d = read.get(jobKey(NO_USAGE));
    assert.equal(b?.ok, false);
    assert.ok(!b?.ok && !(b.error instanceof MissingMetricsError), 'the refusal, not "no series"');
    assert.deepEqual(d, b);
  });

  it('asks cAdvisor nothing when every job has its cgroup series', async () => {
    const { read, cadvisorQueries } = await usageOf([WITH_SIDECAR], prometheus(cadvisorSeries));
    assert.equal(read.get(jobKey(WITH_SIDECAR))?.ok, true);
    assert.deepEqual(cadvisorQueries, []);
  });
});

describe('a batch query Prometheus refuses', () => {
  type Read = (s: PrometheusMetricsSource, refs: readonly JobRef[]) => Promise<Map<string, unknown>>;
  const since = (refs: readonly JobRef[]) => refs.map((ref) => ({ ref, since: NOW - 600 }));
  const cases: Array<[string, string, Read, { cgroup?: boolean }?]> = [
    ['step time query', 'avg by (namespace', (s, r) => s.stepSamplesOfJobs(r, 600)],
    ['node count query', 'local_batch_size) (count by', (s, r) => s.stepSamplesOfJobs(r, 600)],
    [
      'worker count query',
      'replicas, local_batch_size) (trainscaler_step',
      (s, r) => s.stepSamplesOfJobs(r, 600),
    ],
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
      const pods = refs.map((ref) => ({
        metric: { ...identity(ref), pod: `${ref.name}-worker-0`, role: 'worker' },
        value: [NOW, '1'],
      }));
      const readings = await withPrometheus(
        (query, range) => {
          if (query.includes(marker)) return OVERLOADED;
          if (range) return matrix([]);
          const cgroup = query.includes('trainscaler_cgroup_') && options?.cgroup !== false;
          return vector(cgroup ? pods : []);
        },
        (s) => read(s, refs),
      );
      for (const ref of refs) {
        const r = readings.get(jobKey(ref)) as { ok: boolean; error?: unknown } | undefined;
        assert.ok(
          r && !r.ok && r.error instanceof IncompleteMetricsError,
          `${ref.name}: ${String(r?.error)}`,
        );
        assert.match(r.error.message, new RegExp(`batch ${label} of \\d+ jobs`));
      }
    });
  }
});

describe("samplesProcessedOfJobs: the trainer's count first, else the sidecars'", () => {
  const [a, b, c] = [job('a'), job('b'), job('c')];
  const sums = (values: Array<[JobRef, number]>) =>
    vector(values.map(([ref, v]) => ({ metric: identity(ref), value: [NOW, String(v)] })));

  it("a job whose trainer reports needs nothing else; one without takes the sidecars' count, or none", async () => {
    const read = await withPrometheus(
      (q) =>
        q.includes('trainscaler_trainer_samples')
          ? sums([[a, 500]])
          : sums([
              [a, 7],
              [b, 300],
            ]),
      (s) => s.samplesProcessedOfJobs([a, b, c]),
    );
    assert.deepEqual(read.get(jobKey(a)), { ok: true, value: 500 });
    assert.deepEqual(read.get(jobKey(b)), { ok: true, value: 300 });
    assert.deepEqual(read.get(jobKey(c)), { ok: true, value: undefined });
  });

  it("the sidecars' count refused: only the jobs that needed it get the error", async () => {
    const read = await withPrometheus(
      (q) => (q.includes('trainscaler_trainer_samples') ? sums([[a, 500]]) : OVERLOADED),
      (s) => s.samplesProcessedOfJobs([a, b]),
    );
    assert.deepEqual(read.get(jobKey(a)), { ok: true, value: 500 });
    const r = read.get(jobKey(b));
    assert.ok(r && !r.ok && r.error instanceof IncompleteMetricsError, String(r && !r.ok && r.error));
  });

  it("the trainer's count refused: every job gets that error, whatever the sidecars counted", async () => {
    const read = await withPrometheus(
      (q) => (q.includes('trainscaler_trainer_samples') ? OVERLOADED : sums([[a, 7]])),
      (s) => s.samplesProcessedOfJobs([a]),
    );
    const r = read.get(jobKey(a));
    assert.ok(r && !r.ok && r.error instanceof IncompleteMetricsError);
  });
});

describe('the pause reads: a job whose since is not yet past is not asked about', () => {
  for (const [name, read] of [
    [
      'firstStepAfterPauseOfJobs',
      (
        s: PrometheusMetricsSource,
        asks: Parameters<PrometheusMetricsSource['firstStepAfterPauseOfJobs']>[0],
      ) => s.firstStepAfterPauseOfJobs(asks),
    ],
    [
      'pauseEndedAfterOfJobs',
      (s: PrometheusMetricsSource, asks: Parameters<PrometheusMetricsSource['pauseEndedAfterOfJobs']>[0]) =>
        s.pauseEndedAfterOfJobs(asks),
    ],
  ] as const) {
    it(`${name}: the refusal counts only the jobs asked about, and the one not yet due has no pause`, async () => {
      const asks = [
        { ref: job('a'), since: NOW - 600 },
        { ref: job('b'), since: NOW - 60 },
        { ref: job('later'), since: NOW + 60 },
      ];
      const readings = await withPrometheus(
        () => OVERLOADED,
        (s) => read(s, asks),
      );
      for (const ref of [job('a'), job('b')]) {
        const r = readings.get(jobKey(ref));
        assert.ok(r && !r.ok && r.error instanceof IncompleteMetricsError);
        assert.match(r.error.message, / of 2 jobs/);
      }
      assert.deepEqual(readings.get(jobKey(job('later'))), { ok: true, value: undefined });
    });
  }
});
