import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  type AlertmanagerHttpOptions,
  createAlertmanagerServer,
  MAX_BODY_BYTES,
} from '../../../functions/alertmanager-http.js';
import type { HandlerDeps, HandlerResult } from '../../../functions/handler-deps.js';
import type { Unauthorized } from '../../../functions/webhook-auth.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { ConfigError, MissingMetricsError } from '../../../lib/errors.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import { PROFILED_APP_MODEL } from '../../../lib/sim/profiled-app-model.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import {
  postWebhook,
  postWebhookWithAuthorization,
  sendPartialWebhook,
  streamWebhook,
  TEST_WEBHOOK_TOKEN,
} from '../../support/webhook-request.js';
import { harness, TOY, toyJob } from '../functions/handler-harness.js';

const GiB = 1024 ** 3;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A logger that keeps every line, to find a request's details by its id. */
function recordingLogger() {
  const lines: (Record<string, unknown> & { level: string; msg?: string })[] = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    lines.push({ level, ...(obj as Record<string, unknown>), ...(msg ? { msg } : {}) });
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error') } };
}

/** Counts every call on the cluster client: a refused request must make none. */
function countingCluster(cluster: SimulatedCluster): { cluster: SimulatedCluster; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(cluster, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(key));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { cluster: proxy, calls };
}

const token = () => Promise.resolve(TEST_WEBHOOK_TOKEN);

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

/** A started server with a recording logger; `options` override the defaults. */
async function serve(options: Partial<AlertmanagerHttpOptions> & Pick<AlertmanagerHttpOptions, 'deps'>) {
  const { lines, logger } = recordingLogger();
  const server = createAlertmanagerServer({ token, logger, ...options });
  const base = await listen(server);
  return { server, url: `${base}/alertmanager`, base, lines };
}

const firing = JSON.stringify(
  alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'bert' }]),
);

/** The answer names nothing but its status and request id, and the id is the one in the header. */
function assertBareAnswer(answer: { status: number; headers: Headers; json: Record<string, unknown> }) {
  assert.deepEqual(Object.keys(answer.json).sort(), ['requestId', 'status']);
  assert.equal(answer.json.status, answer.status);
  assert.match(String(answer.json.requestId), /^[0-9a-f-]{36}$/);
  assert.equal(answer.headers.get('x-request-id'), answer.json.requestId);
  assert.equal(answer.headers.get('content-type'), 'application/json');
}

/** Polls (bounded) until `found` holds: for what the server does after the client is gone. */
async function eventually(found: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100 && !found(); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(found(), what);
}

describe('alertmanager-http', () => {
  const counted = countingCluster(clusterWithJob());
  const results: HandlerResult[] = [];
  let url: string;
  let base: string;
  let server: Server;
  let lines: ReturnType<typeof recordingLogger>['lines'];

  before(async () => {
    ({ server, url, base, lines } = await serve({
      deps: depsWith(counted.cluster, noMetrics),
      onResult: (_payload, result) => results.push(result),
    }));
  });
  after(() => close(server));

  it('answers 400 for a payload the alarm schema rejects, logs the field under the request id, reads nothing', async () => {
    const hook = alertmanagerWebhook([{ namespace: 'team-a', kind: 'Deployment', name: 'bert' }]);
    const answer = await postWebhook(url, JSON.stringify(hook));
    assert.equal(answer.status, 400);
    assertBareAnswer(answer);
    const logged = lines.find((l) => l.requestId === answer.json.requestId);
    assert.equal(logged?.field, '/alerts/0/labels/job_kind');
    assert.equal(logged?.msg, 'alertmanager webhook rejected');
    assert.equal(logged?.level, 'warn');
    const notJson = await postWebhook(url, '{"alerts": ');
    assert.equal(notJson.status, 400);
    const notJsonLogged = lines.find((l) => l.requestId === notJson.json.requestId);
    assert.equal(notJsonLogged?.field, '');
    assert.equal(notJsonLogged?.error, 'invalid input at /: request body is not JSON');
    assert.equal(results.length, 0);
    assert.deepEqual(counted.calls, []);
  });

  it('answers 200 with the status only: a job without step-time samples is kept, saying so, nothing is written', async () => {
    const answer = await postWebhook(url, firing);
    assert.equal(answer.status, 200);
    assertBareAnswer(answer);
    const result = results[0] as HandlerResult;
    assert.equal(result.trigger, 'alarm');
    assert.deepEqual(result.errors, []);
    assert.equal(result.outcomes[0]?.skipped, 'no-change');
    assert.deepEqual(result.outcomes[0]?.ref, { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' });
    assert.match(result.outcomes[0]?.plan.reason ?? '', /no step-time samples/);
    const logged = lines.find((l) => l.requestId === answer.json.requestId);
    assert.equal(logged?.msg, 'alertmanager webhook handled');
    assert.ok(!counted.cluster.writeLog().some((w) => w.verb === 'patch' || w.verb === 'evict'));
    assert.equal(results.length, 1);
  });

  it('ignores resolved alerts', async () => {
    const resolved = alertmanagerWebhook([
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'bert', status: 'resolved' },
    ]);
    const answer = await postWebhook(url, JSON.stringify(resolved));
    assert.equal(answer.status, 200);
    assert.equal(lines.find((l) => l.requestId === answer.json.requestId)?.ignored, 'no firing alert');
  });

  it('only serves POST /alertmanager', async () => {
    const get = await fetch(url, { headers: { authorization: `Bearer ${TEST_WEBHOOK_TOKEN}` } });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal((await postWebhook(`${base}/other`, firing)).status, 404);
  });
});

describe('alertmanager-http credential', () => {
  it('answers 401 to a missing, malformed or wrong credential before reading anything, and counts it', async () => {
    const counted = countingCluster(clusterWithJob());
    let depsBuilt = 0;
    const refused: Unauthorized[] = [];
    const results: HandlerResult[] = [];
    const { server, url, lines } = await serve({
      deps: async () => {
        depsBuilt++;
        return depsWith(counted.cluster, noMetrics);
      },
      onResult: (_p, r) => results.push(r),
      onUnauthorized: (reason) => refused.push(reason),
    });
    try {
      const missing = await postWebhook(url, firing, null);
      assert.equal(missing.status, 401);
      assert.equal(missing.headers.get('www-authenticate'), 'Bearer');
      assertBareAnswer(missing);
      // The refusal is logged under the request id, with why and from where (the token is not).
      const logged = lines.find((l) => l.requestId === missing.json.requestId);
      assert.equal(logged?.msg, 'webhook unauthorized');
      assert.equal(logged?.reason, 'missing');
      assert.equal(logged?.remote, '127.0.0.1');
      assert.equal((await postWebhook(url, firing, `${TEST_WEBHOOK_TOKEN}x`)).status, 401);
      assert.equal((await postWebhook(url, firing, TEST_WEBHOOK_TOKEN.slice(0, -1))).status, 401);
      assert.equal((await postWebhook(url, firing, '')).status, 401);
      const basic = await postWebhookWithAuthorization(
        url,
        firing,
        `Basic ${Buffer.from(`u:${TEST_WEBHOOK_TOKEN}`).toString('base64')}`,
      );
      assert.equal(basic.status, 401);
      assert.deepEqual(refused, ['missing', 'wrong', 'wrong', 'missing', 'missing']);
      assert.equal(depsBuilt, 0, 'no client was built');
      assert.deepEqual(counted.calls, [], 'nothing was read from the cluster');
      assert.equal(results.length, 0);
      // The token is never logged, whatever was presented.
      assert.ok(!JSON.stringify(lines).includes(TEST_WEBHOOK_TOKEN.slice(0, 12)));

      const right = await postWebhook(url, firing);
      assert.equal(right.status, 200);
      assert.equal(results.length, 1);
      assert.equal(depsBuilt, 1);
    } finally {
      await close(server);
    }
  });

  it('refuses without reading the body: a 401 arrives while the body is still being sent', async () => {
    const { server, url } = await serve({ deps: depsWith(clusterWithJob(), noMetrics) });
    try {
      // 2 MiB sent and the body never ended: an answer can only come from a server that did not wait for it.
      const answer = await streamWebhook(url, {
        token: null,
        maxBytes: 2 * 1024 * 1024,
        end: false,
        timeoutMs: 5_000,
      });
      assert.equal(answer.status, 401, JSON.stringify(answer));
    } finally {
      await close(server);
    }
  });

  it('answers 401 to every request, the right-looking ones too, when no token is configured', async () => {
    const refused: Unauthorized[] = [];
    let depsBuilt = 0;
    const { server, url } = await serve({
      token: () => Promise.resolve(undefined),
      deps: async () => {
        depsBuilt++;
        return depsWith(clusterWithJob(), noMetrics);
      },
      onUnauthorized: (reason) => refused.push(reason),
    });
    try {
      assert.equal((await postWebhook(url, firing)).status, 401);
      assert.equal((await postWebhook(url, firing, null)).status, 401);
      assert.equal((await postWebhook(url, firing, '')).status, 401);
      assert.deepEqual(refused, ['unconfigured', 'unconfigured', 'unconfigured']);
      assert.equal(depsBuilt, 0);
    } finally {
      await close(server);
    }
  });

  it('answers 503 (retried by Alertmanager) when the token cannot be read, and reads nothing', async () => {
    let depsBuilt = 0;
    const { server, url, lines } = await serve({
      token: () => Promise.reject(new Error('AccessDeniedException')),
      deps: async () => {
        depsBuilt++;
        return depsWith(clusterWithJob(), noMetrics);
      },
    });
    try {
      const answer = await postWebhook(url, firing);
      assert.equal(answer.status, 503);
      assertBareAnswer(answer);
      assert.equal(answer.headers.get('retry-after'), '10');
      const logged = lines.find((l) => l.requestId === answer.json.requestId);
      assert.equal(logged?.msg, 'webhook token unavailable');
      assert.equal(logged?.error, 'Error: AccessDeniedException');
      assert.equal(depsBuilt, 0);
    } finally {
      await close(server);
    }
  });
});

describe('alertmanager-http limits', () => {
  it('stops reading at the body limit: 413, and the rest of a large body is never taken in', async (t) => {
    const { server, url, lines } = await serve({ deps: depsWith(clusterWithJob(), noMetrics) });
    try {
      // A client that goes on sending after the answer: only closing the connection stops it.
      const answer = await streamWebhook(url, { maxBytes: 256 * 1024 * 1024, keepWriting: true });
      // The server destroys the connection after answering: the client sees the 413 and/or the reset;
      // either way it could hand over no more than the limit plus socket buffers.
      assert.ok(answer.status === 413 || answer.error !== undefined, JSON.stringify(answer));
      assert.notEqual(answer.error, 'timeout');
      assert.ok(answer.written < MAX_BODY_BYTES + 32 * 1024 * 1024, `${answer.written} bytes written`);
      t.diagnostic(`413 after the client wrote ${answer.written} bytes (${answer.status} ${answer.error})`);
      assert.ok(lines.some((l) => l.msg === 'alertmanager webhook rejected' && /over/.test(String(l.error))));
      // A body just under the limit is read (and rejected as not JSON: it is spaces).
      const under = await streamWebhook(url, { maxBytes: 3 * 1024 * 1024 });
      assert.equal(under.status, 400);
    } finally {
      await close(server);
    }
  });

  it('caps concurrent requests: beyond the cap the answer is 429 at once', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = 0;
    const deps = depsWith(clusterWithJob(), noMetrics);
    const { server, url, lines } = await serve({
      maxConcurrent: 2,
      deps: async () => {
        started++;
        await gate;
        return deps;
      },
    });
    try {
      const held = [postWebhook(url, firing), postWebhook(url, firing)];
      while (started < 2) await new Promise((r) => setTimeout(r, 10));
      const third = await Promise.race([
        postWebhook(url, firing),
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error('the request over the cap was not refused at once')),
            3_000,
          ).unref(),
        ),
      ]);
      assert.equal(third.status, 429);
      assert.equal(third.headers.get('retry-after'), '5');
      assert.equal(started, 2, 'the third request did no work');
      const busy = lines.find((l) => l.requestId === third.json.requestId);
      assert.equal(busy?.msg, 'webhook busy');
      assert.equal(busy?.active, 2);
      release();
      assert.deepEqual(
        (await Promise.all(held)).map((a) => a.status),
        [200, 200],
      );
      // Slots are given back: the next request is served.
      assert.equal((await postWebhook(url, firing)).status, 200);
    } finally {
      release();
      await close(server);
    }
  });

  it('reads a body of exactly the limit and refuses one byte more', async () => {
    const bytes = Buffer.byteLength(firing);
    const results: HandlerResult[] = [];
    const exact = await serve({
      maxBodyBytes: bytes,
      deps: depsWith(clusterWithJob(), noMetrics),
      onResult: (_p, r) => results.push(r),
    });
    const under = await serve({ maxBodyBytes: bytes - 1, deps: depsWith(clusterWithJob(), noMetrics) });
    try {
      assert.equal((await postWebhook(exact.url, firing)).status, 200);
      assert.equal(results.length, 1);
      const refused = await postWebhook(under.url, firing);
      assert.equal(refused.status, 413);
      assertBareAnswer(refused);
      const logged = under.lines.find((l) => l.requestId === refused.json.requestId);
      assert.equal(logged?.error, `request body over ${bytes - 1} bytes`);
    } finally {
      await close(exact.server);
      await close(under.server);
    }
  });

  it('closes the connection after a refusal, so the unread rest of the body is never taken in', async () => {
    const { server, url } = await serve({ deps: depsWith(clusterWithJob(), noMetrics) });
    try {
      // 1 MiB declared, 64 KiB sent: a server that kept the connection would wait for the rest.
      for (const token of [null, TEST_WEBHOOK_TOKEN]) {
        const { response, closedByServer } = await sendPartialWebhook(
          token === null ? url : url.replace('/alertmanager', '/other'),
          { token, declaredBytes: 1024 * 1024, sentBytes: 64 * 1024 },
        );
        assert.match(response, token === null ? /^HTTP\/1\.1 401 / : /^HTTP\/1\.1 404 /);
        assert.match(response, /\r\nconnection: close\r\n/i);
        assert.ok(closedByServer, 'the server closed the connection');
      }
      const over = await serve({ maxBodyBytes: 1024, deps: depsWith(clusterWithJob(), noMetrics) });
      try {
        const { response, closedByServer } = await sendPartialWebhook(over.url, {
          declaredBytes: 1024 * 1024,
          sentBytes: 64 * 1024,
        });
        assert.match(response, /^HTTP\/1\.1 413 /);
        assert.ok(closedByServer, 'the server closed the connection');
      } finally {
        await close(over.server);
      }
    } finally {
      await close(server);
    }
  });

  it('a client gone mid-body frees its slot, is logged, and gets no answer', async () => {
    const answers: number[] = [];
    const { server, url, lines } = await serve({
      maxConcurrent: 1,
      deps: depsWith(clusterWithJob(), noMetrics),
      onAnswer: ({ status }) => answers.push(status),
    });
    try {
      await sendPartialWebhook(url, { declaredBytes: 1024 * 1024, sentBytes: 64 * 1024, abort: true });
      await eventually(
        () => lines.some((l) => l.msg === 'alertmanager webhook request failed'),
        'the failed request is logged',
      );
      const failed = lines.find((l) => l.msg === 'alertmanager webhook request failed');
      assert.match(String(failed?.requestId), /^[0-9a-f-]{36}$/);
      assert.match(String(failed?.error), /aborted/);
      assert.deepEqual(answers, [], 'nothing was answered on the closed connection');
      // The one slot was given back.
      assert.equal((await postWebhook(url, firing)).status, 200);
    } finally {
      await close(server);
    }
  });
});

describe('alertmanager-http failures Alertmanager should retry', () => {
  it('answers 500 when the clients cannot be built, with the reason in the log only', async () => {
    const { server, url, lines } = await serve({
      deps: async () => {
        throw new ConfigError('PROMETHEUS_URL is not set');
      },
    });
    try {
      const answer = await postWebhook(url, firing);
      assert.equal(answer.status, 500);
      assertBareAnswer(answer);
      const logged = lines.find((l) => l.requestId === answer.json.requestId);
      assert.equal(logged?.msg, 'alertmanager webhook failed');
      assert.equal(logged?.level, 'error');
      assert.equal(logged?.error, 'ConfigError: configuration error: PROMETHEUS_URL is not set');
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
    const results: HandlerResult[] = [];
    const { server, url } = await serve({
      deps: depsWith(cluster, metrics),
      onResult: (_p, r) => results.push(r),
    });
    try {
      const answer = await postWebhook(url, firing);
      assert.equal(answer.status, 200);
      const result = results[0] as HandlerResult;
      assert.equal(result.errors[0]?.code, 'API_ERROR');
      assert.match(result.errors[0]?.message ?? '', /unreachable/);
      assert.ok(!cluster.writeLog().some((w) => w.verb === 'patch' || w.verb === 'evict'));
    } finally {
      await close(server);
    }
  });

  it('answers 503 on a follower (retry-after 5) and builds nothing, then serves once it leads', async () => {
    let leader = false;
    let depsBuilt = 0;
    const { server, url } = await serve({
      available: () => leader,
      deps: async () => {
        depsBuilt++;
        return depsWith(clusterWithJob(), noMetrics);
      },
    });
    try {
      const follower = await postWebhook(url, firing);
      assert.equal(follower.status, 503);
      assertBareAnswer(follower);
      assert.equal(follower.headers.get('retry-after'), '5');
      assert.equal(follower.headers.get('connection'), 'close');
      assert.equal(depsBuilt, 0);
      leader = true;
      assert.equal((await postWebhook(url, firing)).status, 200);
      assert.equal(depsBuilt, 1);
    } finally {
      await close(server);
    }
  });

  it('answers 500 when something fails before the body is read, instead of leaving the request hanging', async () => {
    const { server, url, lines } = await serve({
      available: () => {
        throw new Error('lease state unreadable');
      },
      deps: depsWith(clusterWithJob(), noMetrics),
    });
    try {
      const answer = await postWebhook(url, firing);
      assert.equal(answer.status, 500);
      assertBareAnswer(answer);
      const logged = lines.find((l) => l.requestId === answer.json.requestId);
      assert.equal(logged?.msg, 'alertmanager webhook request failed');
      assert.equal(logged?.error, 'Error: lease state unreadable');
    } finally {
      await close(server);
    }
  });
});

describe('alertmanager-http answers and logs', () => {
  it('reports each answer with whether it reached the handler and how long the handler took', async () => {
    const answers: { status: number; handled: boolean; seconds: number }[] = [];
    let started = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const deps = depsWith(clusterWithJob(), noMetrics);
    const { server, url, base } = await serve({
      maxBodyBytes: 64 * 1024,
      maxConcurrent: 1,
      deps: async () => {
        started++;
        await gate;
        return deps;
      },
      onAnswer: (answer) => answers.push(answer),
    });
    try {
      const sent = performance.now();
      const held = postWebhook(url, firing);
      while (started === 0) await new Promise((r) => setTimeout(r, 10));
      // Refused at once while the first holds the only slot.
      assert.equal((await postWebhook(url, firing)).status, 429);
      setTimeout(release, 200);
      assert.equal((await held).status, 200);
      const elapsed = (performance.now() - sent) / 1000;
      const handledAnswer = answers.find((a) => a.status === 200);
      assert.equal(handledAnswer?.handled, true);
      assert.ok((handledAnswer?.seconds ?? 0) >= 0.15, `${handledAnswer?.seconds} s`);
      assert.ok(
        (handledAnswer?.seconds ?? Infinity) <= elapsed,
        `${handledAnswer?.seconds} s > ${elapsed} s`,
      );
      assert.equal(answers.find((a) => a.status === 429)?.handled, false);

      answers.length = 0;
      await postWebhook(url, '{');
      await streamWebhook(url, { maxBytes: 1024 * 1024 });
      await postWebhook(url, firing, null);
      await postWebhook(`${base}/other`, firing);
      assert.deepEqual(
        answers.map(({ status, handled }) => ({ status, handled })),
        [
          { status: 400, handled: true },
          { status: 413, handled: true },
          { status: 401, handled: false },
          { status: 404, handled: false },
        ],
      );
    } finally {
      release();
      await close(server);
    }
  });

  it("logs each job's outcome under the request id, and the caller gets none of it", async () => {
    for (const dryRun of [true, false]) {
      const { sim, deps } = harness({ dryRun });
      sim.submitJob(toyJob());
      sim.step(900);
      const { server, url, lines } = await serve({ deps });
      try {
        const body = JSON.stringify(alertmanagerWebhook([TOY]));
        const answer = await postWebhook(url, body);
        assert.equal(answer.status, 200);
        assertBareAnswer(answer);
        const logged = lines.find((l) => l.requestId === answer.json.requestId);
        const outcomes = logged?.outcomes as Record<string, unknown>[];
        assert.equal(outcomes.length, 1);
        assert.deepEqual(outcomes[0]?.job, TOY);
        assert.equal(outcomes[0]?.applied, !dryRun);
        assert.equal(outcomes[0]?.skipped, dryRun ? 'dry-run' : undefined);
        assert.ok(dryRun || !('skipped' in (outcomes[0] ?? {})));
        assert.equal(typeof outcomes[0]?.reason, 'string');
        assert.ok(String(outcomes[0]?.reason).length > 0);
        assert.ok(!('ignored' in (logged ?? {})), 'a firing alert is not ignored');
      } finally {
        await close(server);
      }
    }
  });
});
