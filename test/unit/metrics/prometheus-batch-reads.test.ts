// PrometheusMetricsSource's batch reads (the schedule tick's, every managed job at once) against a small HTTP
// server on 127.0.0.1 that answers as Prometheus does: a fixed number of queries whatever the number of jobs,
// no job named in any of them, each answer split per job on the identity labels, and a query Prometheus
// refuses or marks partial given to every asked job as an IncompleteMetricsError, never used as a whole answer.
// The same queries on a real Prometheus: test/metrics/batch-queries.test.ts.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { IncompleteMetricsError, MissingMetricsError } from '../../../lib/errors.js';
import { type JobReadings, jobKey } from '../../../lib/metrics/job-readings.js';
import { NAME_PARTS, PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';
import {
  matrixAnswer as matrix,
  type PrometheusAnswer,
  vectorAnswer as vector,
} from '../../support/prometheus-answers.js';

const NOW = 1_767_225_600;

const TOO_MANY_SAMPLES = {
  status: 422,
  body: {
    status: 'error',
    errorType: 'execution',
    error: 'query processing would load too many samples into memory in query execution',
  },
};

interface Query {
  path: string;
  method: string;
  query: string;
  params: URLSearchParams;
}

type Answer = PrometheusAnswer | 'hang';

const job = (name: string, namespace = 'team-a', kind: JobRef['kind'] = 'PyTorchJob'): JobRef => ({
  kind,
  namespace,
  name,
});
const identity = (ref: JobRef) => ({
  namespace: ref.namespace,
  job_kind: ref.kind === 'TrainJob' ? 'JobSet' : ref.kind,
  job_name: ref.name,
});

/** What a Prometheus holding series of `jobs` (and of a job nobody asked about) answers to each batch query. */
function prometheusOf(jobs: readonly JobRef[]): (q: Query) => Answer {
  // A job of the same name in another namespace: its series are not the asked job's.
  const all = [...jobs, job('a', 'team-z')];
  return (q) => {
    const has = (s: string) => q.query.includes(s);
    if (q.path === '/api/v1/query_range') {
      const scale = { replicas: '2', nodes: '1', local_batch_size: '32' };
      if (has('max by (namespace, job_kind, job_name, pod, worker, node)'))
        return matrix(
          all.flatMap((ref) =>
            [0, 1].map((w) => ({
              metric: { ...identity(ref), pod: `${ref.name}-worker-${w}`, worker: String(w), node: 'n1' },
              values: [[NOW - 30, String(0.5 + w)]],
            })),
          ),
        );
      return matrix(
        all.map((ref, i) => ({
          metric: { ...identity(ref), ...scale },
          values: [[NOW - 60, String(has('avg by') ? 0.1 * (i + 1) : 2)]],
        })),
      );
    }
    if (has('trainscaler_cgroup_') || has('max by (namespace, job_kind, job_name, pod, role)'))
      return vector(
        all.map((ref) => ({
          metric: { ...identity(ref), pod: `${ref.name}-worker-0`, role: 'worker' },
          value: [NOW, has('cpu') ? '0.5' : '1024'],
        })),
      );
    if (has('trainscaler_trainer_samples')) return vector([]);
    if (has('trainscaler_samples_total'))
      return vector(all.map((ref, i) => ({ metric: identity(ref), value: [NOW, String(100 * (i + 1))] })));
    return vector([]);
  };
}

describe('PrometheusMetricsSource batch reads', () => {
  const received: Query[] = [];
  let answer: (q: Query) => Answer = () => ({ status: 500, body: {} });
  let server: Server;
  let url: string;

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      const target = new URL(req.url ?? '/', 'http://x');
      const params = req.method === 'POST' ? new URLSearchParams(body) : target.searchParams;
      const q = { path: target.pathname, method: req.method ?? '', query: params.get('query') ?? '', params };
      received.push(q);
      const a = answer(q);
      if (a === 'hang') return;
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  };

  before(async () => {
    server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    received.length = 0;
  });

  const source = (timeoutMs = 5000) => new PrometheusMetricsSource(url, () => NOW, { timeoutMs });
  const everything = async (s: PrometheusMetricsSource, refs: readonly JobRef[]) => [
    await s.stepSamplesOfJobs(refs, 3600),
    await s.containerUsageOfJobs(refs, 3600),
    await s.workerStepTimesOfJobs(refs, 3600),
    await s.samplesProcessedOfJobs(refs),
    await s.firstStepAfterPauseOfJobs(refs.map((ref) => ({ ref, since: NOW - 600 }))),
    await s.pauseEndedAfterOfJobs(refs.map((ref) => ({ ref, since: NOW - 600 }))),
  ];

  it('issues the same queries for 3 jobs as for 300, naming no job, POSTed', async () => {
    const few = Array.from({ length: 3 }, (_, i) => job(`few-${i}`));
    const many = Array.from({ length: 300 }, (_, i) => job(`many-${i}`, `team-${i % 7}`));
    answer = prometheusOf(few);
    await everything(source(), few);
    const forFew = received.map((q) => `${q.path} ${q.query}`);
    received.length = 0;
    answer = prometheusOf(many);
    await everything(source(), many);
    const forMany = received.map((q) => `${q.path} ${q.query}`);
    // stepSamples 3, usage 3 (+2 cAdvisor, not needed here), per-worker 1, progress 2, rescale 1 + 1.
    assert.equal(forFew.length, 11);
    assert.deepEqual(forMany.sort(), forFew.sort());
    for (const q of received) {
      assert.equal(q.method, 'POST');
      assert.doesNotMatch(q.query, /many-|job_name=/, 'no job selected by name');
    }
  });

  it('answers each asked job with its own series and drops the jobs not asked about', async () => {
    const refs = [job('a'), job('b', 'team-b'), job('c', 'team-a', 'TrainJob')];
    answer = prometheusOf(refs);
    const [samples, usage, workers, processed] = await everything(source(), refs);
    const values = <T>(readings: JobReadings<T> | undefined) =>
      Object.fromEntries([...(readings ?? [])].map(([k, r]) => [k, r.ok ? r.value : String(r.error)]));
    assert.deepEqual(
      Object.keys(values(samples as JobReadings<unknown>)),
      refs.map(jobKey),
      'every asked job and only those',
    );
    assert.deepEqual(values(samples as JobReadings<unknown>)[jobKey(job('b', 'team-b'))], [
      { replicas: 2, nodes: 1, localBatchSize: 32, stepTime: 0.2, at: NOW - 60 },
    ]);
    assert.deepEqual(values(samples as JobReadings<unknown>)[jobKey(job('a'))], [
      { replicas: 2, nodes: 1, localBatchSize: 32, stepTime: 0.1, at: NOW - 60 },
    ]);
    // A TrainJob's series are its JobSet's.
    assert.deepEqual(values(processed as JobReadings<unknown>)[jobKey(refs[2] as JobRef)], 300);
    assert.deepEqual(values(usage as JobReadings<unknown>)[jobKey(job('a'))], [
      { pod: 'a-worker-0', role: 'Worker', cpuMillis: 500, memoryBytes: 1024 },
    ]);
    const w = values(workers as JobReadings<unknown>)[jobKey(job('a'))] as { pod: string }[];
    assert.deepEqual(
      w.map((x) => x.pod),
      ['a-worker-0', 'a-worker-1'],
    );
  });

  it('gives a job absent from the answer MissingMetricsError, as its own read does', async () => {
    const absent = job('absent');
    answer = prometheusOf([job('a')]);
    const s = source();
    const [samples, usage, workers, processed] = await everything(s, [job('a'), absent]);
    for (const readings of [samples, workers]) {
      const reading = readings?.get(jobKey(absent));
      assert.ok(reading && !reading.ok && reading.error instanceof MissingMetricsError);
    }
    // No usage from the sidecar: cAdvisor asked, in the absent job's namespace only, and it has none either.
    const cadvisor = received.filter((q) => q.query.includes('container_'));
    assert.equal(cadvisor.length, 2);
    for (const q of cadvisor) assert.match(q.query, /namespace=~"team-a",container!=""/);
    const u = usage?.get(jobKey(absent));
    assert.ok(u && !u.ok && u.error instanceof MissingMetricsError);
    assert.deepEqual(processed?.get(jobKey(absent)), { ok: true, value: undefined });
  });

  const refusals: Array<[string, Answer, IncompleteMetricsError['reason'], RegExp]> = [
    [
      'too many samples (HTTP 422), in each part too',
      TOO_MANY_SAMPLES,
      'too-many-samples',
      /HTTP 422: execution: query processing would load too many samples/,
    ],
    [
      "Prometheus's query timeout (HTTP 503)",
      {
        status: 503,
        body: { status: 'error', errorType: 'timeout', error: 'query timed out in query execution' },
      },
      'timeout',
      /HTTP 503: timeout: query timed out/,
    ],
    [
      'an overloaded Prometheus (HTTP 503 for another reason than a timeout)',
      {
        status: 503,
        body: { status: 'error', errorType: 'unavailable', error: 'too many concurrent queries' },
      },
      'refused',
      /HTTP 503: unavailable: too many concurrent queries/,
    ],
    [
      'an answer with warnings (partial)',
      {
        status: 200,
        body: {
          status: 'success',
          warnings: ['results truncated due to limit'],
          data: { resultType: 'matrix', result: [] },
        },
      },
      'truncated',
      /answered with warnings: results truncated due to limit/,
    ],
  ];
  for (const [what, refused, reason, message] of refusals) {
    it(`gives every asked job an IncompleteMetricsError for ${what}, never a partial answer`, async () => {
      const refs = [job('a'), job('b'), job('c', 'team-c')];
      const served = prometheusOf(refs);
      // Only the step time query is refused: the answers of the others stay each job's.
      answer = (q) =>
        q.query.startsWith('avg by') || (reason === 'truncated' && q.path.endsWith('_range'))
          ? refused
          : served(q);
      const readings = await source().stepSamplesOfJobs(refs, 3600);
      assert.equal(readings.size, 3);
      for (const ref of refs) {
        const r = readings.get(jobKey(ref));
        assert.ok(r && !r.ok, `${jobKey(ref)} has no samples`);
        assert.ok(r.error instanceof IncompleteMetricsError, String(r.error));
        assert.equal(r.error.reason, reason);
        assert.equal(r.error.code, 'API_ERROR');
        assert.match(r.error.message, message);
        assert.match(r.error.message, /batch step time query of 3 jobs/);
      }
      const processed = await source().samplesProcessedOfJobs(refs);
      assert.deepEqual(processed.get(jobKey(job('a'))), { ok: true, value: 100 });
    });
  }

  /** A Prometheus that refuses any query of every job for too many samples, and answers a part's (NAME_PARTS). */
  const refusingWhole =
    (jobs: readonly JobRef[], refusedPart?: string) =>
    (q: Query): Answer => {
      const part = NAME_PARTS.find((p) => q.query.includes(p.matcher));
      if (!part || (refusedPart && part.matcher === refusedPart)) return TOO_MANY_SAMPLES;
      return prometheusOf(jobs.filter((ref) => part.holds.test(ref.name)))(q);
    };
  const PARTED = [job('alpha'), job('golf'), job('lima'), job('zulu', 'team-b'), job('4th')];

  it('reads again in parts by job name when Prometheus refuses the whole for too many samples', async () => {
    answer = refusingWhole(PARTED);
    const s = source();
    const samples = await s.stepSamplesOfJobs(PARTED, 3600);
    const processed = await s.samplesProcessedOfJobs(PARTED);
    for (const ref of PARTED) {
      const r = samples.get(jobKey(ref));
      assert.ok(r?.ok && r.value.length === 1, `${ref.name}: ${String(r && !r.ok && r.error)}`);
      assert.ok(processed.get(jobKey(ref))?.ok, ref.name);
    }
    // Each read: once whole, then once per part; never a job's name.
    const stepTimeQueries = received.filter((q) => q.query.startsWith('avg by'));
    assert.equal(stepTimeQueries.length, 1 + NAME_PARTS.length);
    for (const q of received) assert.doesNotMatch(q.query, /alpha|golf|lima|zulu|4th/);
  });

  it('gives the error of a part Prometheus refuses again to the jobs of that part only', async () => {
    const refused = NAME_PARTS[1]?.matcher;
    answer = refusingWhole(PARTED, refused);
    const samples = await source().stepSamplesOfJobs(PARTED, 3600);
    const failed = PARTED.filter((ref) => !samples.get(jobKey(ref))?.ok).map((ref) => ref.name);
    assert.deepEqual(failed, ['golf']);
    const golf = samples.get(jobKey(job('golf')));
    assert.ok(golf && !golf.ok && golf.error instanceof IncompleteMetricsError);
    assert.equal(golf.error.reason, 'too-many-samples');
  });

  it('gives every asked job an IncompleteMetricsError when Prometheus does not answer in time', async () => {
    answer = () => 'hang';
    const refs = [job('a'), job('b')];
    const readings = await source(200).workerStepTimesOfJobs(refs, 3600);
    for (const ref of refs) {
      const r = readings.get(jobKey(ref));
      assert.ok(r && !r.ok && r.error instanceof IncompleteMetricsError, String(r && !r.ok && r.error));
      assert.equal(r.error.reason, 'timeout');
      assert.match(r.error.message, /no answer from .* within 200 ms/);
    }
  });

  it("keeps each job's own since: the earliest resume after it, the longest pause that ended after it", async () => {
    const early = job('early');
    const late = job('late');
    answer = (q) => {
      if (q.query.includes('max_over_time(count_values'))
        return vector(
          [
            [early, NOW - 500],
            [early, NOW - 100],
            [late, NOW - 500],
          ].map(([ref, at]) => ({
            metric: { ...identity(ref as JobRef), at: String(at) },
            value: [NOW, '1'],
          })),
        );
      return vector(
        [
          [early, NOW - 500, 30],
          [early, NOW - 100, 10],
          [late, NOW - 500, 40],
        ].map(([ref, at, pause]) => ({
          metric: { ...identity(ref as JobRef), at: String(at) },
          value: [NOW, String(pause)],
        })),
      );
    };
    const asks = [
      { ref: early, since: NOW - 600 },
      { ref: late, since: NOW - 300 },
      { ref: job('future'), since: NOW + 10 },
    ];
    const s = source();
    const firsts = await s.firstStepAfterPauseOfJobs(asks);
    assert.deepEqual(firsts.get(jobKey(early)), { ok: true, value: NOW - 500 });
    assert.deepEqual(
      firsts.get(jobKey(late)),
      { ok: true, value: undefined },
      'its only resume is before its since',
    );
    assert.deepEqual(firsts.get(jobKey(job('future'))), { ok: true, value: undefined });
    const pauses = await s.pauseEndedAfterOfJobs(asks);
    assert.deepEqual(pauses.get(jobKey(early)), { ok: true, value: 30 });
    assert.deepEqual(pauses.get(jobKey(late)), { ok: true, value: undefined });
    // One query each, over the window of the earliest since (600 s and one 15 s step).
    assert.equal(received.length, 2);
    assert.match(received[0]?.query ?? '', /\[615s:15s\]\)\)$/);
  });

  it('asks nothing for no job, nor for a since not yet past', async () => {
    const s = source();
    await everything(s, []);
    await s.firstStepAfterPauseOfJobs([{ ref: job('a'), since: NOW }]);
    await s.pauseEndedAfterOfJobs([{ ref: job('a'), since: NOW + 1 }]);
    assert.equal(received.length, 0);
  });
});
