// Two `trainscaler run` runners in one process against the real test API server: one Lease, one leader;
// the other takes over when the leader stops (at once when it releases the Lease, after the lease duration
// when it just disappears), and at no sampled instant do both lead. The leader's informers feed real watch
// events to the (stubbed) handlers; the follower's handlers never run.
// Needs TRAINSCALER_KUBECONFIG; runs as the trainscaler ServiceAccount when kubeconfig-sa sits beside it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { Handler, HandlerResult } from '../../../functions/handler-deps.js';
import { buildClusterClient, buildRuntimeDeps, readRuntimeConfig } from '../../../functions/runtime-deps.js';
import { type Runner, startRunner } from '../../../lib/runner/runner.js';

const kubeconfig = process.env.TRAINSCALER_KUBECONFIG;
const skip = kubeconfig
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (start the test API server: infra/cluster/up.sh)';
const NAMESPACE = 'trainscaler-system';
const LEASE_DURATION_MS = 15_000;
const RETRY_PERIOD_MS = 5_000;
const suffix = `${process.pid}-${Date.now().toString(36)}`;

interface Calls {
  schedule: number;
  submit: string[];
  clusterEvent: string[];
}

function recordingHandlers(calls: Calls) {
  const empty = (trigger: HandlerResult['trigger']): HandlerResult => ({ trigger, outcomes: [], errors: [] });
  const nameOf = (payload: unknown) => {
    const object = (payload as { object?: { kind?: string; metadata?: { name?: string } } }).object;
    return `${object?.kind}/${object?.metadata?.name}`;
  };
  const schedule: Handler = async () => {
    calls.schedule += 1;
    return empty('schedule');
  };
  const submit: Handler = async (payload) => {
    calls.submit.push(nameOf(payload));
    return empty('submit');
  };
  const clusterEvent: Handler = async (payload) => {
    calls.clusterEvent.push(nameOf(payload));
    return empty('cluster-event');
  };
  return { schedule, submit, clusterEvent };
}

async function sleep(ms: number) {
  await new Promise((r) => setTimeout(r, ms));
}

/** Polls every 100 ms; also checks that no two runners lead at once at any sample. */
async function waitFor(
  what: string,
  runners: Runner[],
  check: () => boolean,
  timeoutMs: number,
): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    assert.ok(runners.filter((r) => r.isLeader()).length <= 1, 'two runners lead at once');
    if (check()) return Date.now() - started;
    await sleep(100);
  }
  assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

describe('leader election of `trainscaler run` on the test API server', { skip }, () => {
  const admin = new KubeConfig();
  let runnerConfig: KubeConfig;
  const leases: string[] = [];
  const testNamespace = `trainscaler-it-${suffix}`;

  before(async () => {
    admin.loadFromFile(kubeconfig ?? '');
    const saPath = join(dirname(kubeconfig ?? ''), 'kubeconfig-sa');
    runnerConfig = new KubeConfig();
    runnerConfig.loadFromFile(existsSync(saPath) ? saPath : (kubeconfig ?? ''));
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: testNamespace } } });
  });

  after(async () => {
    const coordination = admin.makeApiClient(CoordinationV1Api);
    for (const name of leases)
      await coordination.deleteNamespacedLease({ name, namespace: NAMESPACE }).catch(() => undefined);
    await admin
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: testNamespace })
      .catch(() => undefined);
  });

  async function startPair(leaseName: string) {
    leases.push(leaseName);
    const config = readRuntimeConfig({
      PROMETHEUS_URL: 'http://127.0.0.1:9',
      LOG_LEVEL: 'silent',
      TRAINSCALER_DRY_RUN: 'true',
    });
    const calls = {
      a: { schedule: 0, submit: [], clusterEvent: [] },
      b: { schedule: 0, submit: [], clusterEvent: [] },
    } as Record<'a' | 'b', Calls>;
    const start = (id: 'a' | 'b') =>
      startRunner({
        kubeConfig: runnerConfig,
        deps: buildRuntimeDeps(config, runnerConfig),
        fencedCluster: (fence) => buildClusterClient(runnerConfig, fence),
        identity: `it-${id}-${suffix}`,
        namespace: NAMESPACE,
        leaseName,
        host: '127.0.0.1',
        port: 0,
        schedule: '* * * * * *',
        handlers: recordingHandlers(calls[id]),
      });
    const a = await start('a');
    const runners: Runner[] = [a];
    await waitFor('the first runner to lead', runners, () => a.isLeader(), RETRY_PERIOD_MS * 2);
    const b = await start('b');
    runners.push(b);
    return { a, b, runners, calls };
  }

  async function holder(leaseName: string): Promise<string | undefined> {
    const lease = await admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: leaseName, namespace: NAMESPACE });
    return lease.spec?.holderIdentity;
  }

  it('has one leader, whose informers and schedule drive the handlers; a released lease passes at once', async (t) => {
    const leaseName = `trainscaler-leader-it1-${suffix}`;
    const { a, b, runners, calls } = await startPair(leaseName);
    try {
      // Two renewal periods: the follower must stay a follower while the leader renews.
      const until = Date.now() + 2 * RETRY_PERIOD_MS;
      while (Date.now() < until) {
        assert.equal(a.isLeader(), true, 'a keeps leading');
        assert.equal(b.isLeader(), false, 'b keeps following');
        await sleep(100);
      }
      assert.equal(await holder(leaseName), a.identity);
      const lease = await admin
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ name: leaseName, namespace: NAMESPACE });
      assert.equal(lease.spec?.leaseDurationSeconds, 15);
      assert.ok(calls.a.schedule > 0, 'the leader runs the schedule');
      assert.equal(
        calls.b.schedule + calls.b.submit.length + calls.b.clusterEvent.length,
        0,
        'the follower runs nothing',
      );

      // A job submitted now reaches the leader's submit handler through its PyTorchJob informer.
      await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: 'kubeflow.org',
        version: 'v1',
        plural: 'pytorchjobs',
        namespace: testNamespace,
        body: {
          apiVersion: 'kubeflow.org/v1',
          kind: 'PyTorchJob',
          metadata: { name: 'it-job', namespace: testNamespace },
          spec: {
            pytorchReplicaSpecs: {
              Master: {
                replicas: 1,
                restartPolicy: 'OnFailure',
                template: {
                  spec: {
                    containers: [
                      {
                        name: 'pytorch',
                        image: 'registry.invalid/it:1',
                        resources: { requests: { cpu: '100m' } },
                      },
                    ],
                  },
                },
              },
            },
          },
        },
      });
      await waitFor(
        'the submit handler',
        runners,
        () => calls.a.submit.includes('PyTorchJob/it-job'),
        15_000,
      );
      await waitFor(
        'a cluster event of the job pod',
        runners,
        () => calls.a.clusterEvent.some((c) => c.startsWith('Pod/it-job-')),
        30_000,
      );
      assert.equal(calls.b.submit.length + calls.b.clusterEvent.length, 0);

      const stoppedAt = Date.now();
      await a.stop();
      const takeover = await waitFor('b to take over', runners, () => b.isLeader(), LEASE_DURATION_MS);
      assert.ok(takeover < LEASE_DURATION_MS, `took over in ${takeover} ms`);
      assert.equal(await holder(leaseName), b.identity);
      const scheduledByA = calls.a.schedule;
      await waitFor('b to run the schedule', runners, () => calls.b.schedule > 0, 5_000);
      assert.equal(calls.a.schedule, scheduledByA, 'the stopped runner runs nothing more');
      t.diagnostic(`released lease taken over ${Date.now() - stoppedAt} ms after stop began`);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('takes over a lease that is not released only after it expires', async (t) => {
    const leaseName = `trainscaler-leader-it2-${suffix}`;
    const { a, b, runners } = await startPair(leaseName);
    try {
      await sleep(1_000);
      assert.equal(b.isLeader(), false);
      await a.stop({ release: false }); // as if the process died: the Lease still names a
      assert.equal(await holder(leaseName), a.identity);
      const takeover = await waitFor(
        'b to take over the expired lease',
        runners,
        () => b.isLeader(),
        LEASE_DURATION_MS + RETRY_PERIOD_MS * 1.2 + 3_000,
      );
      // b saw the lease change no earlier than one retry period before a stopped renewing.
      assert.ok(
        takeover >= LEASE_DURATION_MS - RETRY_PERIOD_MS * 1.2 - 1_000,
        `not before expiry (${takeover} ms)`,
      );
      assert.equal(await holder(leaseName), b.identity);
      t.diagnostic(`unreleased lease taken over ${takeover} ms after the leader stopped`);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});
