// The Lambda route of Alertmanager's webhook (functions/lambda.ts), invoked with API Gateway HTTP API v2
// events: the credential is checked before anything else, and the answer carries a status and an id only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAlertmanagerWebhook } from '../../../functions/lambda.js';
import { httpApiEvent } from '../../fixtures/http-api-event.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { TEST_WEBHOOK_TOKEN } from '../../support/webhook-request.js';
import { harness, toyJob } from './handler-harness.js';

const firing = JSON.stringify(
  alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' }]),
);

function setup(token: () => Promise<string | undefined> = async () => TEST_WEBHOOK_TOKEN) {
  const { sim, deps } = harness();
  sim.submitJob(toyJob());
  sim.step(900);
  const lines: Record<string, unknown>[] = [];
  let depsBuilt = 0;
  const handler = createAlertmanagerWebhook({
    token,
    deps: async () => {
      depsBuilt++;
      return deps;
    },
    log: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
  });
  return { sim, handler, lines, depsBuilt: () => depsBuilt };
}

function bodyOf(result: { body: string }) {
  return JSON.parse(result.body) as Record<string, unknown>;
}

describe('Lambda alertmanagerWebhook (HTTP API v2 events)', () => {
  it('answers 401 to a missing or wrong credential, reads and writes nothing, and emits the metric', async () => {
    const { sim, handler, lines, depsBuilt } = setup();
    const marks = sim.writeLog().length;
    for (const authorization of [
      undefined,
      `Bearer ${TEST_WEBHOOK_TOKEN}-`,
      'Bearer wrong',
      TEST_WEBHOOK_TOKEN,
    ]) {
      const result = await handler(
        httpApiEvent(firing, authorization === undefined ? {} : { authorization }),
      );
      assert.equal(result.statusCode, 401, String(authorization));
      assert.equal(result.headers['www-authenticate'], 'Bearer');
      assert.deepEqual(bodyOf(result), { status: 401, requestId: 'C3Xk2gZtoAMEVxw=' });
    }
    assert.equal(depsBuilt(), 0);
    assert.equal(sim.writeLog().length, marks);
    // CloudWatch embedded metric format: one count per refusal, by reason.
    const metrics = lines.filter((l) => l.trainscaler_webhook_unauthorized_total === 1);
    assert.deepEqual(
      metrics.map((l) => l.reason),
      ['missing', 'wrong', 'wrong', 'missing'],
    );
    const emf = metrics[0]?._aws as { CloudWatchMetrics: { Metrics: { Name: string }[] }[] };
    assert.equal(emf.CloudWatchMetrics[0]?.Metrics[0]?.Name, 'trainscaler_webhook_unauthorized_total');
    assert.ok(!JSON.stringify(lines).includes(TEST_WEBHOOK_TOKEN));
  });

  it('handles the alert with the right credential (also base64-encoded), answering a status and the request id only', async () => {
    const { sim, handler, lines, depsBuilt } = setup();
    const marks = sim.writeLog().length;
    const result = await handler(
      httpApiEvent(firing, {
        authorization: `Bearer ${TEST_WEBHOOK_TOKEN}`,
        base64: true,
        requestId: 'req-1',
      }),
    );
    assert.equal(result.statusCode, 200);
    assert.deepEqual(bodyOf(result), { status: 200, requestId: 'req-1' });
    assert.equal(result.headers['x-request-id'], 'req-1');
    assert.equal(depsBuilt(), 1);
    assert.ok(sim.writeLog().length > marks, 'the alarm handler acted');
    const logged = lines.find((l) => l.requestId === 'req-1' && l.msg === 'alertmanager webhook handled');
    assert.equal((logged?.outcomes as { applied: boolean }[] | undefined)?.[0]?.applied, true);

    const bad = await handler(httpApiEvent('{"alerts":', { authorization: `Bearer ${TEST_WEBHOOK_TOKEN}` }));
    assert.equal(bad.statusCode, 400);
    assert.deepEqual(Object.keys(bodyOf(bad)).sort(), ['requestId', 'status']);
  });

  it('answers 401 to everything when no token is configured', async () => {
    const { handler, depsBuilt } = setup(async () => undefined);
    const result = await handler(httpApiEvent(firing, { authorization: `Bearer ${TEST_WEBHOOK_TOKEN}` }));
    assert.equal(result.statusCode, 401);
    assert.equal((await handler(httpApiEvent(firing, { authorization: 'Bearer ' }))).statusCode, 401);
    assert.equal(depsBuilt(), 0);
  });

  it('answers 503 when the token cannot be read (Alertmanager retries), and 413 for a body over the limit', async () => {
    const failing = setup(() => Promise.reject(new Error('ParameterNotFound')));
    assert.equal(
      (await failing.handler(httpApiEvent(firing, { authorization: 'Bearer x' }))).statusCode,
      503,
    );
    assert.equal(failing.depsBuilt(), 0);
    const { handler, depsBuilt } = setup();
    const huge = ' '.repeat(4 * 1024 * 1024 + 1);
    const result = await handler(httpApiEvent(huge, { authorization: `Bearer ${TEST_WEBHOOK_TOKEN}` }));
    assert.equal(result.statusCode, 413);
    const huge64 = await handler(
      httpApiEvent(huge, { authorization: `Bearer ${TEST_WEBHOOK_TOKEN}`, base64: true }),
    );
    assert.equal(huge64.statusCode, 413);
    assert.equal(depsBuilt(), 0);
  });
});
