// PrometheusMetricsSource against a small HTTP server on 127.0.0.1 that replays answers recorded from a
// real Prometheus (fixtures/prometheus-responses.json, made by test/metrics/support/record-prometheus-
// responses.ts: three sidecars, worker 2 three times slower, two nodes, half a core of CPU, 3 GiB working set).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ApiError, MissingMetricsError } from '../../../lib/errors.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
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
