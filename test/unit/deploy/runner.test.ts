import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { Handler, HandlerDeps, HandlerResult } from '../../../functions/handler-deps.js';
import { KubernetesClusterClient } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import { type Runner, startRunner } from '../../../lib/runner/runner.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { postWebhook, TEST_WEBHOOK_TOKEN } from '../../support/webhook-request.js';
import { MemoryLease } from './memory-lease.js';

const silent = { info() {}, warn() {}, error() {} };

/** Clients pointing at loopback ports nothing listens on: the stub handlers never reach them. */
function offlineDeps(): { kubeConfig: KubeConfig; deps: HandlerDeps } {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:9', skipTLSVerify: false }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const clock = () => 1_800_000_000;
  return {
    kubeConfig,
    deps: {
      cluster: new KubernetesClusterClient(kubeConfig),
      metrics: new PrometheusMetricsSource('http://127.0.0.1:9', clock),
      clock,
      config: DEFAULT_POLICY_CONFIG,
      dryRun: true,
      logger: silent,
      profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    },
  };
}

const scheduled: Handler = async (): Promise<HandlerResult> => ({
  trigger: 'schedule',
  outcomes: [
    {
      ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'bert' },
      plan: {
        ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'bert' },
        policy: 'rebalance',
        changes: [],
        reason: '',
      },
      applied: false,
      skipped: 'dry-run',
    },
  ],
  errors: [],
});

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function start(lock: MemoryLease, identity: string, onSchedule: () => void): Promise<Runner> {
  const { kubeConfig, deps } = offlineDeps();
  return startRunner({
    kubeConfig,
    deps,
    identity,
    namespace: 'trainscaler-system',
    host: '127.0.0.1',
    port: 0,
    schedule: '* * * * * *',
    timing: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
    lock,
    webhookToken: async () => TEST_WEBHOOK_TOKEN,
    handlers: {
      schedule: async (payload, d) => {
        onSchedule();
        return scheduled(payload, d);
      },
    },
  });
}

describe('runner (in-memory lease, offline cluster)', () => {
  it('serves healthz on every replica, runs the schedule and webhooks only on the leader, hands over on stop', async () => {
    const lock = new MemoryLease();
    const ticks = { a: 0, b: 0 };
    const a = await start(lock, 'a', () => ticks.a++);
    await waitFor('a to lead', () => a.isLeader());
    const b = await start(lock, 'b', () => ticks.b++);
    try {
      const health = await fetch(`${b.url}/healthz`);
      assert.equal(health.status, 200);
      assert.equal(await health.text(), 'ok follower\n');
      assert.equal(await (await fetch(`${a.url}/healthz`)).text(), 'ok leader\n');

      await waitFor('a scheduled tick', () => ticks.a > 0, 3_000);
      assert.equal(ticks.b, 0, 'the follower runs no schedule');

      const metrics = await (await fetch(`${a.url}/metrics`)).text();
      assert.match(metrics, /^trainscaler_leader 1$/m);
      assert.match(metrics, /^trainscaler_decisions_total\{policy="rebalance",outcome="dry-run"\} [1-9]/m);
      assert.match(metrics, /^trainscaler_handler_duration_seconds_count\{trigger="schedule"\} [1-9]/m);
      assert.match(await (await fetch(`${b.url}/metrics`)).text(), /^trainscaler_leader 0$/m);

      const body = JSON.stringify(
        alertmanagerWebhook([{ namespace: 'ml', kind: 'PyTorchJob', name: 'bert', status: 'resolved' }]),
      );
      const toFollower = await postWebhook(`${b.url}/alertmanager`, body);
      assert.equal(toFollower.status, 503);
      assert.equal(toFollower.headers.get('connection'), 'close');
      // The credential is checked first, on the follower too.
      assert.equal((await postWebhook(`${b.url}/alertmanager`, body, null)).status, 401);
      const bad = await postWebhook(`${a.url}/alertmanager`, '{');
      assert.equal(bad.status, 400);
      const ok = await postWebhook(`${a.url}/alertmanager`, body);
      assert.equal(ok.status, 200);
      assert.deepEqual(Object.keys(ok.json).sort(), ['requestId', 'status']);
      assert.equal((await postWebhook(`${a.url}/alertmanager`, body, null)).status, 401);
      assert.equal((await postWebhook(`${a.url}/alertmanager`, body, 'not-the-token')).status, 401);
      // A GET is a wrong method, not a failed handler.
      assert.equal((await fetch(`${a.url}/alertmanager`)).status, 405);
      const after = await (await fetch(`${a.url}/metrics`)).text();
      assert.match(after, /^trainscaler_handler_errors_total\{trigger="alarm",code="VALIDATION"\} 1$/m);
      assert.doesNotMatch(after, /trainscaler_handler_errors_total\{trigger="alarm",code="HTTP_/);
      assert.match(after, /^trainscaler_webhook_unauthorized_total\{reason="missing"\} 1$/m);
      assert.match(after, /^trainscaler_webhook_unauthorized_total\{reason="wrong"\} 1$/m);
      assert.match(after, /^trainscaler_webhook_responses_total\{status="405"\} 1$/m);
      assert.match(after, /^trainscaler_handler_duration_seconds_count\{trigger="alarm"\} 2$/m);
      assert.match(
        await (await fetch(`${b.url}/metrics`)).text(),
        /^trainscaler_webhook_unauthorized_total\{reason="missing"\} 1$/m,
      );

      await a.stop();
      assert.equal(lock.record?.holderIdentity, '', 'released on stop');
      await waitFor('b to take over', () => b.isLeader(), 3_000);
      const before = ticks.a;
      await waitFor('b scheduled tick', () => ticks.b > 0, 3_000);
      assert.equal(ticks.a, before, 'the stopped runner does nothing more');
      await assert.rejects(fetch(`${a.url}/healthz`), 'the stopped runner closed its port');
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});

describe('runner without a webhook token', () => {
  it('answers 401 to every webhook request and warns at start-up', async () => {
    const warnings: string[] = [];
    const { kubeConfig, deps } = offlineDeps();
    const runner = await startRunner({
      kubeConfig,
      deps: {
        ...deps,
        logger: { ...silent, warn: (_obj: object, msg?: string) => warnings.push(msg ?? '') },
      },
      identity: 'solo',
      namespace: 'trainscaler-system',
      host: '127.0.0.1',
      port: 0,
      timing: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
      lock: new MemoryLease(),
    });
    try {
      await waitFor('it to lead', () => runner.isLeader());
      assert.ok(
        warnings.some((w) => /no webhook token configured/.test(w)),
        warnings.join('\n'),
      );
      const body = JSON.stringify(
        alertmanagerWebhook([{ namespace: 'ml', kind: 'PyTorchJob', name: 'bert' }]),
      );
      assert.equal((await postWebhook(`${runner.url}/alertmanager`, body)).status, 401);
      assert.equal((await postWebhook(`${runner.url}/alertmanager`, body, '')).status, 401);
      assert.match(
        await (await fetch(`${runner.url}/metrics`)).text(),
        /^trainscaler_webhook_unauthorized_total\{reason="unconfigured"\} 2$/m,
      );
    } finally {
      await runner.stop();
    }
  });
});
