// PrometheusMetricsSource against a small HTTP server on 127.0.0.1 that replays answers recorded from a
// real Prometheus (fixtures/prometheus-responses.json, made by test/metrics/support/record-prometheus-
// responses.ts: three sidecars, worker 2 three times slower, two nodes, half a core of CPU, 3 GiB working set).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { isAxiosError } from 'axios';
import { pino } from 'pino';
import { ApiError, MissingMetricsError } from '../../../lib/errors.js';
import { PrometheusMetricsSource, scrubbedCause } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';

interface Exchange {
  path: string;
  query: string;
  params: Record<string, string>;
  status: number;
  body: unknown;
}
const recording = JSON.parse(
  readFileSync(new URL('./fixtures/prometheus-responses.json', import.meta.url), 'utf8'),
) as { exchanges: Exchange[] };
const exchanges = recording.exchanges;
const badQuery = exchanges.find((e) => e.status === 400);

const JOB: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const ABSENT: JobRef = { ...JOB, name: 'absent' };
/** The recording's clock: where its queries ended. */
const RECORDED_END = Number(exchanges.find((e) => e.path === '/api/v1/query_range')?.params.end);

interface Received {
  path: string;
  params: URLSearchParams;
}

async function serve(listener: RequestListener): Promise<{ url: string; server: Server }> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** Replays the recorded answer for the same path and PromQL; an unrecorded query is a loud 599. */
function replay(received: Received[]): RequestListener {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    received.push({ path: url.pathname, params: url.searchParams });
    const match = exchanges.find((e) => e.path === url.pathname && e.query === url.searchParams.get('query'));
    res.writeHead(match?.status ?? 599, { 'content-type': 'application/json' });
    res.end(JSON.stringify(match?.body ?? { status: 'error', error: `unrecorded query ${url.search}` }));
  };
}

describe('PrometheusMetricsSource on recorded Prometheus answers', () => {
  const received: Received[] = [];
  let server: Server;
  let source: PrometheusMetricsSource;

  before(async () => {
    const started = await serve(replay(received));
    server = started.server;
    source = new PrometheusMetricsSource(started.url, () => RECORDED_END, {
      stepSeconds: 2,
      rateWindowSeconds: 5,
    });
  });
  after(() => close(server));

  it('turns the step time series into model samples, counting the nodes the workers report', async () => {
    received.length = 0;
    const samples = await source.stepSamples(JOB, 60);
    assert.equal(samples.length, 5);
    for (const s of samples) {
      assert.equal(s.replicas, 3);
      assert.equal(s.nodes, 2, 'two distinct node labels among the three workers');
      assert.equal(s.localBatchSize, 32);
      // Mean of 0.1, 0.1 and 0.3 s per step.
      assert.ok(s.stepTime > 0.15 && s.stepTime < 0.19, `step time ${s.stepTime}`);
    }
    const times = samples.map((s) => s.at ?? 0);
    assert.deepEqual(
      times,
      [...times].sort((a, b) => a - b),
    );
    assert.ok(times.every((t) => t <= RECORDED_END && t > RECORDED_END - 60));
    // All three range queries over the same window, at the same end (their points are joined by time).
    const ranges = received.filter((r) => r.path === '/api/v1/query_range');
    assert.equal(ranges.length, 3);
    for (const r of ranges) {
      assert.equal(Number(r.params.get('end')), RECORDED_END);
      assert.equal(Number(r.params.get('end')) - Number(r.params.get('start')), 60);
      assert.equal(r.params.get('step'), '2');
    }
  });

  it('gives each worker its own step time series, with its pod', async () => {
    const workers = await source.workerStepTimes(JOB, 60);
    assert.deepEqual(workers.map((w) => [w.worker, w.pod]).sort(), [
      [0, 'bert-worker-0'],
      [1, 'bert-worker-1'],
      [2, 'bert-worker-2'],
    ]);
    const mean = (i: number) => {
      const s = workers.find((w) => w.worker === i)?.samples ?? [];
      return s.reduce((sum, x) => sum + x.stepTime, 0) / s.length;
    };
    assert.ok(mean(2) > 2.5 * mean(0), `worker 2 (${mean(2)}) is the slow one vs ${mean(0)}`);
  });

  it('reads container usage from the sidecars cgroup series', async () => {
    const usage = await source.containerUsage(JOB, 60);
    assert.deepEqual(
      usage.map((u) => u.pod),
      ['bert-worker-0', 'bert-worker-1', 'bert-worker-2'],
    );
    for (const u of usage) {
      assert.equal(u.role, 'Worker');
      assert.equal(u.memoryBytes, 3 * 1024 ** 3);
      assert.ok(Math.abs(u.cpuMillis - 500) <= 15, `half a core, got ${u.cpuMillis} m`);
    }
  });

  it("reads the job's progress from the trainers' own counts", async () => {
    const processed = await source.samplesProcessed(JOB);
    assert.ok(processed !== undefined && processed > 0 && processed % 32 === 0, `got ${processed}`);
  });

  it('makes no decision on missing data: MissingMetricsError, or undefined for optional progress', async () => {
    await assert.rejects(source.stepSamples(ABSENT, 60), (error: unknown) => {
      assert.ok(error instanceof MissingMetricsError);
      assert.match(error.message, /PyTorchJob team-a\/absent/);
      return true;
    });
    assert.equal(await source.samplesProcessed(ABSENT), undefined);
  });

  it('quotes label values, so a name cannot change the query', async () => {
    received.length = 0;
    await source.samplesProcessed({ ...JOB, name: 'x"} or vector(1) #' }).catch(() => undefined);
    const query = received[0]?.params.get('query') ?? '';
    assert.ok(query.includes('job_name="x\\"} or vector(1) #"'), query);
  });

  it('reads back every label value as sent: quotes, backslashes and newlines escaped', async () => {
    const hostile: JobRef = { kind: 'PyTorchJob', namespace: 'ns\\"\n', name: 'a\\b"c\nd' };
    received.length = 0;
    await source.samplesProcessed(hostile).catch(() => undefined);
    const query = received[0]?.params.get('query') ?? '';
    // PromQL string literals unquote like JSON for these escapes (a raw newline is refused by both).
    const label = (name: string) => {
      const quoted = new RegExp(`${name}=("(?:[^"\\\\\n]|\\\\.)*")`).exec(query)?.[1];
      assert.ok(quoted, `a ${name} matcher in ${query}`);
      return JSON.parse(quoted) as string;
    };
    assert.equal(label('namespace'), hostile.namespace);
    assert.equal(label('job_name'), hostile.name);
  });
});

describe('PrometheusMetricsSource failures', () => {
  it('reports an unreachable Prometheus as an ApiError naming it', async () => {
    const { server, url } = await serve(() => undefined);
    await close(server); // the port is free again: nothing listens there
    const source = new PrometheusMetricsSource(url, () => RECORDED_END, { timeoutMs: 2000 });
    await assert.rejects(source.stepSamples(JOB, 600), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, undefined);
      assert.match(error.message, /Prometheus .*query failed: .*unreachable \(ECONNREFUSED\)/);
      return true;
    });
  });

  it('gives up on a Prometheus that does not answer, within the timeout', async () => {
    const { server, url } = await serve(() => undefined); // accepts, never answers
    try {
      const source = new PrometheusMetricsSource(url, () => RECORDED_END, { timeoutMs: 200 });
      const started = Date.now();
      await assert.rejects(source.samplesProcessed(JOB), /no answer from .* within 200 ms/);
      assert.ok(Date.now() - started < 2000);
    } finally {
      await close(server);
    }
  });

  it("passes on Prometheus's own reason when it refuses a query", async () => {
    assert.ok(badQuery, 'the recording holds a refused query');
    const { server, url } = await serve((_req, res) => {
      res.writeHead(badQuery.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(badQuery.body));
    });
    try {
      const source = new PrometheusMetricsSource(url, () => RECORDED_END);
      await assert.rejects(source.workerStepTimes(JOB, 600), (error: unknown) => {
        assert.ok(error instanceof ApiError);
        assert.equal(error.status, 400);
        assert.match(error.message, /bad_data: invalid parameter "query"/);
        return true;
      });
    } finally {
      await close(server);
    }
  });

  it('rejects an answer that is not a Prometheus success of the expected type', async () => {
    const answers: [number, string][] = [
      [503, 'Service Unavailable'],
      [200, JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [] } })],
      [200, JSON.stringify({ status: 'error', errorType: 'timeout', error: 'query timed out' })],
    ];
    let next = 0;
    const { server, url } = await serve((_req, res) => {
      const [status, body] = answers[next++] ?? [500, ''];
      res.writeHead(status, { 'content-type': status === 503 ? 'text/plain' : 'application/json' });
      res.end(body);
    });
    try {
      const source = new PrometheusMetricsSource(url, () => RECORDED_END);
      await assert.rejects(
        source.workerStepTimes(JOB, 600),
        (e: unknown) => e instanceof ApiError && e.status === 503,
      );
      await assert.rejects(source.workerStepTimes(JOB, 600), /expected a matrix result, got vector/);
      await assert.rejects(source.workerStepTimes(JOB, 600), /query timed out/);
    } finally {
      await close(server);
    }
  });

  it('asks for no more points than Prometheus allows over a long window', async () => {
    const steps: number[] = [];
    const spans: number[] = [];
    const { server, url } = await serve((req, res) => {
      const params = new URL(req.url ?? '/', 'http://x').searchParams;
      steps.push(Number(params.get('step')));
      spans.push(Number(params.get('end')) - Number(params.get('start')));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'success', data: { resultType: 'matrix', result: [] } }));
    });
    try {
      const source = new PrometheusMetricsSource(url, () => RECORDED_END, { stepSeconds: 1 });
      await source.stepSamples(JOB, 7 * 24 * 3600).catch(() => undefined);
      assert.deepEqual(steps, [605, 605, 605]);
      // Per-worker step times keep their resolution (the straggler policy counts points) and shorten the window.
      await source.workerStepTimes(JOB, 7 * 24 * 3600).catch(() => undefined);
      await source.workerStepTimes(JOB, 300).catch(() => undefined);
      assert.deepEqual(steps.slice(3), [1, 1]);
      assert.deepEqual(spans.slice(3), [1000, 300]);
    } finally {
      await close(server);
    }
  });
});

// Answers written for one case each (the recording holds one healthy job only): scales that change inside the
// window, labels missing or malformed, NaN and infinite readings, and answers that are not Prometheus successes.
type Metric = Record<string, string>;
const matrix = (result: { metric: Metric; values: [number, string][] }[]) => ({
  status: 'success',
  data: { resultType: 'matrix', result },
});
const vector = (result: { metric: Metric; value: string }[]) => ({
  status: 'success',
  data: {
    resultType: 'vector',
    result: result.map((r) => ({ metric: r.metric, value: [RECORDED_END, r.value] })),
  },
});
const EMPTY = { '/api/v1/query_range': matrix([]), '/api/v1/query': vector([]) } as Record<string, unknown>;

/** Answers each query with the first rule whose PromQL fragment it contains, else an empty result. */
async function scripted(
  rules: [fragment: string, body: unknown, status?: number][],
  options: ConstructorParameters<typeof PrometheusMetricsSource>[2] = {},
) {
  const received: Received[] = [];
  const { server, url } = await serve((req, res) => {
    const at = new URL(req.url ?? '/', 'http://x');
    received.push({ path: at.pathname, params: at.searchParams });
    const query = at.searchParams.get('query') ?? '';
    const rule = rules.find(([fragment]) => query.includes(fragment));
    res.writeHead(rule?.[2] ?? 200, { 'content-type': 'application/json' });
    res.end(typeof rule?.[1] === 'string' ? rule[1] : JSON.stringify(rule ? rule[1] : EMPTY[at.pathname]));
  });
  const source = new PrometheusMetricsSource(url, () => RECORDED_END, options);
  return { source, received, url, [Symbol.asyncDispose]: () => close(server) };
}

const T1 = RECORDED_END - 30;
const T2 = RECORDED_END - 20;
const T3 = RECORDED_END - 10;
const T4 = RECORDED_END;
const SEL = 'namespace="team-a",job_kind="PyTorchJob",job_name="bert"';
const MEANS = 'avg by (replicas, nodes, local_batch_size)';
const NODE_COUNTS = 'count by (replicas, local_batch_size) (count by';
const WORKER_COUNTS = 'count by (replicas, local_batch_size) (trainscaler_step_time_seconds';

describe('PrometheusMetricsSource step samples across scales', () => {
  it('joins each mean with the node and worker counts of its own scale, at its own time', async () => {
    await using prom = await scripted([
      [
        MEANS,
        matrix([
          // At 3 replicas until T3; the nodes come from the node count, the replicas from the label even
          // where fewer workers report (T2).
          {
            metric: { replicas: '3', local_batch_size: '32' },
            values: [
              [T2, '0.2'],
              [T3, '0.3'],
              [T4, 'NaN'],
            ],
          },
          // Rescaled to 4 (the old series lingers): same batch size, other replicas, other node count.
          {
            metric: { replicas: '4', nodes: '', local_batch_size: '32' },
            values: [
              [T1, '0.25'],
              [T2, '0.26'],
            ],
          },
          // Replicas unknown: the workers reporting at that scale are counted.
          {
            metric: { local_batch_size: '64' },
            values: [
              [T1, '0.5'],
              [T2, '0'],
              [T3, '+Inf'],
            ],
          },
          // More nodes than replicas cannot be: capped.
          { metric: { replicas: '2', nodes: '5', local_batch_size: '16' }, values: [[T1, '0.1']] },
          // Unknown or malformed batch size: no sample.
          { metric: { replicas: '3', nodes: '1' }, values: [[T1, '0.7']] },
          { metric: { replicas: '3', nodes: '1', local_batch_size: '' }, values: [[T1, '0.7']] },
          { metric: { replicas: '3', nodes: '1', local_batch_size: '0' }, values: [[T1, '0.7']] },
          { metric: { replicas: '3', nodes: '1', local_batch_size: '2.5' }, values: [[T1, '0.7']] },
          // Scale unknown and not counted: no sample.
          { metric: { nodes: '1', local_batch_size: '128' }, values: [[T1, '0.7']] },
          { metric: { replicas: '5', local_batch_size: '128' }, values: [[T1, '0.7']] },
          { metric: { replicas: '-1', nodes: '1', local_batch_size: '8' }, values: [[T1, '0.7']] },
        ]),
      ],
      [
        NODE_COUNTS,
        matrix([
          {
            metric: { replicas: '3', local_batch_size: '32' },
            values: [
              [T2, '2'],
              [T3, '2'],
            ],
          },
          {
            metric: { replicas: '4', local_batch_size: '32' },
            values: [
              [T1, '3'],
              [T2, '4'],
            ],
          },
          { metric: { local_batch_size: '64' }, values: [[T1, '3']] },
        ]),
      ],
      [
        WORKER_COUNTS,
        matrix([
          {
            metric: { replicas: '3', local_batch_size: '32' },
            values: [
              [T2, '2'],
              [T3, '3'],
            ],
          },
          {
            metric: { local_batch_size: '64' },
            values: [
              [T1, '6'],
              [T2, '6'],
              [T3, '6'],
            ],
          },
        ]),
      ],
    ]);
    const samples = await prom.source.stepSamples(JOB, 60);
    assert.deepEqual(samples, [
      { replicas: 4, nodes: 3, localBatchSize: 32, stepTime: 0.25, at: T1 },
      { replicas: 6, nodes: 3, localBatchSize: 64, stepTime: 0.5, at: T1 },
      { replicas: 2, nodes: 2, localBatchSize: 16, stepTime: 0.1, at: T1 },
      { replicas: 3, nodes: 2, localBatchSize: 32, stepTime: 0.2, at: T2 },
      { replicas: 4, nodes: 4, localBatchSize: 32, stepTime: 0.26, at: T2 },
      { replicas: 3, nodes: 2, localBatchSize: 32, stepTime: 0.3, at: T3 },
    ]);
    assert.deepEqual(prom.received.map((r) => r.params.get('query')).sort(), [
      `avg by (replicas, nodes, local_batch_size) (trainscaler_step_time_seconds{${SEL},role="worker"})`,
      `count by (replicas, local_batch_size) (count by (replicas, local_batch_size, node) (trainscaler_step_time_seconds{${SEL},role="worker",node!=""}))`,
      `count by (replicas, local_batch_size) (trainscaler_step_time_seconds{${SEL},role="worker"})`,
    ]);
  });

  it('makes no sample of series without a known scale or a finite positive step time', async () => {
    await using prom = await scripted([
      [
        MEANS,
        matrix([
          { metric: { replicas: '3', nodes: '1' }, values: [[T1, '0.7']] },
          {
            metric: { replicas: '3', nodes: '1', local_batch_size: '32' },
            values: [
              [T1, 'NaN'],
              [T2, '0'],
            ],
          },
        ]),
      ],
    ]);
    await assert.rejects(prom.source.stepSamples(JOB, 90), (error: unknown) => {
      assert.ok(error instanceof MissingMetricsError);
      assert.equal(
        error.message,
        'missing metrics: no trainscaler_step_time_seconds series with a known scale for PyTorchJob team-a/bert in the last 90 s',
      );
      return true;
    });
  });
});

describe('PrometheusMetricsSource per-worker step times', () => {
  it("joins a replaced pod's series across nodes in time order, keeping each sample's node", async () => {
    await using prom = await scripted(
      [
        [
          'max by (pod, worker, node)',
          matrix([
            {
              metric: { pod: 'bert-worker-0', worker: '0', node: 'n-b' },
              values: [
                [T3, '0.1'],
                [T4, '0.12'],
              ],
            },
            {
              metric: { pod: 'bert-worker-0', worker: '0', node: 'n-a' },
              values: [
                [T1, '0.2'],
                [T2, 'NaN'],
              ],
            },
            {
              metric: { pod: 'bert-worker-1', worker: '1' },
              values: [
                [T1, '0.3'],
                [T2, '0'],
              ],
            },
            // Nothing finite and positive: no entry for this worker.
            {
              metric: { pod: 'bert-worker-2', worker: '2', node: 'n-a' },
              values: [
                [T1, '+Inf'],
                [T2, '-1'],
              ],
            },
            { metric: { worker: '3' }, values: [[T1, '0.4']] },
            // Without a worker label, pods are still told apart.
            { metric: { pod: 'ss-0' }, values: [[T1, '0.5']] },
            { metric: { pod: 'ss-1' }, values: [[T1, '0.6']] },
          ]),
        ],
      ],
      { stepSeconds: 60, maxPointsPerSeries: 100 },
    );
    const workers = await prom.source.workerStepTimes(JOB, 7200);
    assert.deepEqual(workers, [
      {
        worker: 0,
        pod: 'bert-worker-0',
        samples: [
          { at: T1, stepTime: 0.2, node: 'n-a' },
          { at: T3, stepTime: 0.1, node: 'n-b' },
          { at: T4, stepTime: 0.12, node: 'n-b' },
        ],
      },
      { worker: 1, pod: 'bert-worker-1', samples: [{ at: T1, stepTime: 0.3 }] },
      { worker: 3, samples: [{ at: T1, stepTime: 0.4 }] },
      { worker: 0, pod: 'ss-0', samples: [{ at: T1, stepTime: 0.5 }] },
      { worker: 0, pod: 'ss-1', samples: [{ at: T1, stepTime: 0.6 }] },
    ]);
    const [sent] = prom.received;
    assert.equal(sent?.path, '/api/v1/query_range');
    assert.equal(
      sent?.params.get('query'),
      `max by (pod, worker, node) (trainscaler_step_time_seconds{${SEL},role="worker"})`,
    );
    // The straggler step (15 s) under a coarser model step, and the window cut to 100 points of it.
    assert.equal(sent?.params.get('step'), '15');
    assert.equal(Number(sent?.params.get('end')) - Number(sent?.params.get('start')), 1500);
  });

  it('is MissingMetricsError when no worker has a usable step time', async () => {
    await using prom = await scripted([
      ['max by (pod, worker, node)', matrix([{ metric: { pod: 'p', worker: '0' }, values: [[T1, 'NaN']] }])],
    ]);
    await assert.rejects(prom.source.workerStepTimes(JOB, 600), (error: unknown) => {
      assert.ok(error instanceof MissingMetricsError);
      assert.equal(error.message, 'missing metrics: no per-worker step times for PyTorchJob team-a/bert');
      return true;
    });
  });
});

describe('PrometheusMetricsSource container usage', () => {
  it("reads each pod's role and usage from the sidecar series, a missing or non-finite reading as 0", async () => {
    await using prom = await scripted([
      [
        'trainscaler_cgroup_cpu_usage_seconds_total',
        vector([
          { metric: { pod: 'bert-ps-0', role: 'ps' }, value: '0.25' },
          { metric: { pod: 'bert-worker-0', role: 'worker' }, value: '1.2346' },
          { metric: { pod: 'bert-master-0', role: 'master' }, value: 'NaN' },
        ]),
      ],
      [
        'trainscaler_cgroup_memory_working_set_bytes',
        vector([
          { metric: { pod: 'bert-ps-0', role: 'ps' }, value: '1000' },
          { metric: { pod: 'bert-chief-0', role: 'chief' }, value: '+Inf' },
          { metric: { pod: 'bert-evaluator-0', role: 'evaluator' }, value: '2048' },
          { metric: { role: 'worker' }, value: '5' },
        ]),
      ],
    ]);
    assert.deepEqual(await prom.source.containerUsage(JOB, 600), [
      { pod: 'bert-chief-0', role: 'Chief', cpuMillis: 0, memoryBytes: 0 },
      { pod: 'bert-evaluator-0', role: 'Evaluator', cpuMillis: 0, memoryBytes: 2048 },
      { pod: 'bert-master-0', role: 'Master', cpuMillis: 0, memoryBytes: 0 },
      { pod: 'bert-ps-0', role: 'PS', cpuMillis: 250, memoryBytes: 1000 },
      { pod: 'bert-worker-0', role: 'Worker', cpuMillis: 1235, memoryBytes: 0 },
    ]);
    assert.deepEqual(
      prom.received.map((r) => r.params.get('query')),
      [
        `max by (pod, role) (max_over_time(rate(trainscaler_cgroup_cpu_usage_seconds_total{${SEL}}[60s])[600s:]))`,
        `max by (pod, role) (max_over_time(trainscaler_cgroup_memory_working_set_bytes{${SEL}}[600s]))`,
        `max by (pod, role) (trainscaler_step_time_seconds{${SEL}})`,
      ],
      'the sidecar answered: cAdvisor is not asked',
    );
  });

  it("falls back to cAdvisor for the job's pods, the roles from the step time series", async () => {
    await using prom = await scripted(
      [
        [
          'container_cpu_usage_seconds_total',
          vector([
            { metric: { pod: 'bert-ps-0' }, value: '0.5' },
            { metric: { pod: 'bert-worker-0' }, value: '2' },
          ]),
        ],
        [
          'container_memory_working_set_bytes',
          vector([
            { metric: { pod: 'bert-ps-0' }, value: '100' },
            { metric: { pod: 'bert-worker-0' }, value: '200' },
            { metric: {}, value: '300' },
          ]),
        ],
        [
          'max by (pod, role) (trainscaler_step_time_seconds',
          vector([
            { metric: { pod: 'bert-ps-0', role: 'ps' }, value: '0.1' },
            { metric: { pod: 'bert-evaluator-0', role: 'evaluator' }, value: '0.1' },
          ]),
        ],
      ],
      { rateWindowSeconds: 30 },
    );
    assert.deepEqual(await prom.source.containerUsage(JOB, 600), [
      { pod: 'bert-ps-0', role: 'PS', cpuMillis: 500, memoryBytes: 100 },
      { pod: 'bert-worker-0', role: 'Worker', cpuMillis: 2000, memoryBytes: 200 },
    ]);
    const pods =
      'namespace="team-a",pod=~"bert-(worker|master|ps|chief|evaluator)-[0-9]+",container!="",container!="POD"';
    assert.deepEqual(prom.received.map((r) => r.params.get('query')).slice(3), [
      `max by (pod) (max_over_time(rate(container_cpu_usage_seconds_total{${pods}}[30s])[600s:]))`,
      `max by (pod) (max_over_time(container_memory_working_set_bytes{${pods}}[600s]))`,
      `max by (pod, role) (trainscaler_step_time_seconds{${SEL}})`,
    ]);
  });

  it('is MissingMetricsError when neither the sidecar nor cAdvisor has a reading', async () => {
    await using prom = await scripted([]);
    await assert.rejects(prom.source.containerUsage(JOB, 600), (error: unknown) => {
      assert.ok(error instanceof MissingMetricsError);
      assert.equal(
        error.message,
        'missing metrics: no container usage (sidecar cgroup or cAdvisor series) for PyTorchJob team-a/bert',
      );
      return true;
    });
    assert.equal(prom.received.length, 6, 'three sidecar queries, then three cAdvisor ones');
  });
});

describe('PrometheusMetricsSource progress', () => {
  it("falls back to the sidecars' counts when the trainers report none or no number", async () => {
    for (const trainer of [vector([]), vector([{ metric: {}, value: 'NaN' }])]) {
      await using prom = await scripted([
        ['trainscaler_trainer_samples', trainer],
        ['trainscaler_samples_total', vector([{ metric: {}, value: '640' }])],
      ]);
      assert.equal(await prom.source.samplesProcessed(JOB), 640);
      assert.deepEqual(
        prom.received.map((r) => [r.path, r.params.get('query'), r.params.get('time')]),
        [
          ['/api/v1/query', `sum(trainscaler_trainer_samples{${SEL}})`, String(RECORDED_END)],
          ['/api/v1/query', `sum(trainscaler_samples_total{${SEL}})`, String(RECORDED_END)],
        ],
      );
    }
  });

  it("takes the trainers' count, zero included, without asking for the sidecars'", async () => {
    await using prom = await scripted([
      ['trainscaler_trainer_samples', vector([{ metric: {}, value: '0' }])],
    ]);
    assert.equal(await prom.source.samplesProcessed(JOB), 0);
    assert.equal(prom.received.length, 1);
  });
});

describe('PrometheusMetricsSource bad answers', () => {
  it('names the query that failed', async () => {
    const cases: [fragment: string, call: (s: PrometheusMetricsSource) => Promise<unknown>, what: string][] =
      [
        [MEANS, (s) => s.stepSamples(JOB, 60), 'step time query'],
        [NODE_COUNTS, (s) => s.stepSamples(JOB, 60), 'node count query'],
        [WORKER_COUNTS, (s) => s.stepSamples(JOB, 60), 'worker count query'],
        ['max by (pod, worker, node)', (s) => s.workerStepTimes(JOB, 60), 'per-worker step time query'],
        ['cpu_usage_seconds_total', (s) => s.containerUsage(JOB, 60), 'CPU usage query'],
        ['memory_working_set_bytes', (s) => s.containerUsage(JOB, 60), 'memory usage query'],
        ['max by (pod, role) (trainscaler_step_time', (s) => s.containerUsage(JOB, 60), 'role query'],
        ['trainscaler_trainer_samples', (s) => s.samplesProcessed(JOB), 'progress query'],
      ];
    for (const [fragment, call, what] of cases) {
      await using prom = await scripted([[fragment, { status: 'error', error: 'boom' }, 422]]);
      await assert.rejects(call(prom.source), (error: unknown) => {
        assert.ok(error instanceof ApiError);
        // No errorType in the answer: "error".
        assert.equal(error.message, `Prometheus ${what} failed with HTTP 422: error: boom`);
        return true;
      });
    }
  });

  it('rejects malformed JSON, a null body and a failure without a reason as an ApiError', async () => {
    const cases: [body: string, status: number, message: (url: string) => string][] = [
      [
        '{"status": "succ',
        200,
        (url) => `failed with HTTP 200: unexpected response from ${url}/api/v1/query`,
      ],
      ['null', 200, (url) => `failed with HTTP 200: unexpected response from ${url}/api/v1/query`],
      [
        '{"status": "error"}',
        200,
        (url) => `failed with HTTP 200: unexpected response from ${url}/api/v1/query`,
      ],
      ['{"status": "success"}', 200, () => 'failed with HTTP 200: expected a vector result, got none'],
      [
        '{"status": "success", "data": {"resultType": "vector", "result": {}}}',
        200,
        () => 'failed with HTTP 200: expected a vector result, got vector',
      ],
      ['null', 500, () => 'failed with HTTP 500: Request failed with status code 500'],
    ];
    for (const [body, status, message] of cases) {
      await using prom = await scripted([['', body, status]]);
      await assert.rejects(prom.source.samplesProcessed(JOB), (error: unknown) => {
        assert.ok(error instanceof ApiError, String(error));
        assert.equal(error.status, status);
        assert.equal(error.message, `Prometheus progress query ${message(prom.url)}`);
        return true;
      });
    }
  });

  it("keeps the HTTP client's error as the cause", async () => {
    await using prom = await scripted([['', { status: 'error', errorType: 'execution', error: 'x' }, 503]]);
    await assert.rejects(prom.source.samplesProcessed(JOB), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.ok(isAxiosError(error.cause), String(error.cause));
      assert.equal(error.cause.response?.status, 503);
      return true;
    });
  });

  it('reports a Prometheus URL that is no URL as an ApiError', async () => {
    const source = new PrometheusMetricsSource('http://[::1:9090', () => RECORDED_END);
    await assert.rejects(source.samplesProcessed(JOB), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, undefined);
      assert.match(error.message, /^Prometheus progress query failed: TypeError: Invalid URL/);
      return true;
    });
  });
});

describe('PrometheusMetricsSource: the first step after a rescale', () => {
  const answer = (value: string | undefined) => ({
    status: 'success',
    data: { resultType: 'vector', result: value === undefined ? [] : [{ metric: {}, value: [0, value] }] },
  });

  it("asks for the earliest resume of the job's workers after the patch, and reads the exact second", async () => {
    const received: Received[] = [];
    let body = answer('1000031.25');
    const { url, server } = await serve((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      received.push({ path: u.pathname, params: u.searchParams });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    try {
      const source = new PrometheusMetricsSource(url, () => 1_000_100);
      assert.equal(await source.firstStepAfterPause(JOB, 1_000_000), 1_000_031.25);
      assert.equal(received[0]?.path, '/api/v1/query');
      assert.equal(
        received[0]?.params.get('query'),
        'min(min_over_time((trainscaler_resumed_timestamp_seconds{namespace="team-a",job_kind="PyTorchJob",job_name="bert",role="worker"} > 1000000)[115s:15s]))',
      );
      body = answer(undefined);
      assert.equal(await source.firstStepAfterPause(JOB, 1_000_000), undefined, 'no worker resumed yet');
      body = answer('999999');
      assert.equal(await source.firstStepAfterPause(JOB, 1_000_000), undefined, 'never one before the patch');
      received.length = 0;
      assert.equal(await source.firstStepAfterPause(JOB, 1_000_100), undefined);
      assert.equal(received.length, 0, 'a patch not in the past asks nothing');

      // The pause itself: each worker's resume after the patch less its last step before the pause.
      body = answer('2.75');
      assert.equal(await source.pauseEndedAfter(JOB, 1_000_000), 2.75);
      const worker = '{namespace="team-a",job_kind="PyTorchJob",job_name="bert",role="worker"}';
      assert.equal(
        received[0]?.params.get('query'),
        `max((trainscaler_resumed_timestamp_seconds${worker} > 1000000) - trainscaler_paused_timestamp_seconds${worker})`,
      );
      body = answer(undefined);
      assert.equal(await source.pauseEndedAfter(JOB, 1_000_000), undefined, 'no worker resumed from a pause');
      body = answer('-3');
      assert.equal(await source.pauseEndedAfter(JOB, 1_000_000), undefined, 'no negative pause');
    } finally {
      await close(server);
    }
  });
});

describe('PrometheusMetricsSource with credentials in its URL', () => {
  const PASSWORD = 's3cret-pw';
  const BASIC = Buffer.from(`user:${PASSWORD}`).toString('base64');

  /** Everything an error can put in front of a person: its text, a deep print (Node's), a pino line. */
  function everythingShown(error: unknown): string {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    logger.error({ err: error, error: String(error) }, 'query failed');
    return [String(error), inspect(error, { depth: Number.POSITIVE_INFINITY }), ...lines].join('\n');
  }

  function assertHidden(error: unknown): void {
    assert.ok(error instanceof ApiError, String(error));
    const shown = everythingShown(error);
    assert.ok(!shown.includes(PASSWORD), `the password is shown:\n${shown}`);
    assert.ok(!shown.includes(BASIC), 'the basic-auth header is shown');
  }

  it('still sends the credentials, and names Prometheus without them when it refuses', async () => {
    const authorizations: (string | undefined)[] = [];
    const { server, url } = await serve((req, res) => {
      authorizations.push(req.headers.authorization);
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('null');
    });
    try {
      const source = new PrometheusMetricsSource(
        url.replace('http://', `http://user:${PASSWORD}@`),
        () => RECORDED_END,
      );
      await assert.rejects(source.samplesProcessed(JOB), (error: unknown) => {
        assertHidden(error);
        assert.ok(error instanceof ApiError && isAxiosError(error.cause));
        assert.equal(error.cause.response?.status, 500, 'the cause keeps what Prometheus answered');
        return true;
      });
      assert.deepEqual(authorizations, [`Basic ${BASIC}`]);
    } finally {
      await close(server);
    }
  });

  it('hides them when Prometheus is unreachable, silent, answers garbage, or the URL is malformed', async () => {
    const silent = await serve(() => undefined);
    const garbage = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status": "succ');
    });
    const gone = await serve(() => undefined);
    await close(gone.server);
    const withSecret = (url: string) => url.replace('http://', `http://user:${PASSWORD}@`);
    try {
      const cases: [url: string, message: RegExp][] = [
        [withSecret(gone.url), /http:\/\/\*\*\*@127\.0\.0\.1:\d+ unreachable \(ECONNREFUSED\)/],
        [withSecret(silent.url), /no answer from http:\/\/\*\*\*@127\.0\.0\.1:\d+ within 200 ms/],
        [
          withSecret(garbage.url),
          /unexpected response from http:\/\/\*\*\*@127\.0\.0\.1:\d+\/api\/v1\/query/,
        ],
        [`http://user:${PASSWORD}@[::1:9090`, /Invalid URL/],
      ];
      for (const [url, message] of cases) {
        const source = new PrometheusMetricsSource(url, () => RECORDED_END, { timeoutMs: 200 });
        await assert.rejects(source.samplesProcessed(JOB), (error: unknown) => {
          assertHidden(error);
          assert.match(String(error), message);
          return true;
        });
      }
    } finally {
      await close(silent.server);
      await close(garbage.server);
    }
  });

  it("keeps an error that is not the HTTP client's as a plain cause, its URLs hidden", () => {
    const cause = scrubbedCause(new TypeError(`bad http://u:${PASSWORD}@h/x?token=t0k`));
    assert.equal(cause.message, 'TypeError: bad http://***@h/x?token=***');
    assert.ok(!isAxiosError(cause));
  });
});
