// Two `trainscaler run` runners in one process against the real test API server: one Lease, one leader;
// the other takes over when the leader stops (at once when it releases the Lease, after the lease duration
// when it just disappears), and at no sampled instant do both lead. The leader's informers feed real watch
// events to the (stubbed) handlers; the follower's handlers never run. With a pod each (kwok pods standing
// in for the runners' pods, POD_NAME given to each runner, each runner authenticated with a token bound to its
// pod as in a Deployment), the leader labels its pod and a Service selecting that label has, in the
// EndpointSlices the real controller-manager maintains, the leader only; infra/k8s/leader-label-policy.yaml
// lets a runner change that label of its own pod and nothing else.
// Needs TRAINSCALER_KUBECONFIG; runs as the trainscaler ServiceAccount when kubeconfig-sa sits beside it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { Handler, HandlerResult } from '../../../functions/handler-deps.js';
import { buildClusterClient, buildRuntimeDeps, readRuntimeConfig } from '../../../functions/runtime-deps.js';
import { LEADER_LABEL } from '../../../lib/runner/leader-pod-label.js';
import { type Runner, startRunner } from '../../../lib/runner/runner.js';
import { TEST_WEBHOOK_TOKEN } from '../../support/webhook-request.js';

const kubeconfig = process.env.TRAINSCALER_KUBECONFIG;
const skip = kubeconfig
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (start the test API server: infra/cluster/up.sh)';
const NAMESPACE = 'trainscaler-system';
const LEASE_DURATION_MS = 15_000;
const RETRY_PERIOD_MS = 5_000;
const suffix = `${process.pid}-${Date.now().toString(36)}`;
const testLeaseName = (test: number) => `trainscaler-leader-it${test}-${suffix}`;
const TEST_LEASE_ROLE = `trainscaler-leader-it-${suffix}`;

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
    // rbac.yaml lets the ServiceAccount use the Lease trainscaler-leader only; these tests use Leases of
    // their own (so that runs never meet), granted here the way an operator would grant a renamed Lease.
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: NAMESPACE,
      body: {
        metadata: { name: TEST_LEASE_ROLE },
        rules: [
          {
            apiGroups: ['coordination.k8s.io'],
            resources: ['leases'],
            resourceNames: [1, 2, 3].map(testLeaseName),
            verbs: ['get', 'update'],
          },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: NAMESPACE,
      body: {
        metadata: { name: TEST_LEASE_ROLE },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: TEST_LEASE_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: 'trainscaler', namespace: NAMESPACE }],
      },
    });
  });

  after(async () => {
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac
      .deleteNamespacedRoleBinding({ name: TEST_LEASE_ROLE, namespace: NAMESPACE })
      .catch(() => undefined);
    await rbac.deleteNamespacedRole({ name: TEST_LEASE_ROLE, namespace: NAMESPACE }).catch(() => undefined);
    const coordination = admin.makeApiClient(CoordinationV1Api);
    for (const name of leases)
      await coordination.deleteNamespacedLease({ name, namespace: NAMESPACE }).catch(() => undefined);
    await admin
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: testNamespace })
      .catch(() => undefined);
  });

  async function startPair(
    leaseName: string,
    pods: { a?: string; b?: string } = {},
    configs: { a?: KubeConfig; b?: KubeConfig } = {},
  ) {
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
        kubeConfig: configs[id] ?? runnerConfig,
        deps: buildRuntimeDeps(config, configs[id] ?? runnerConfig),
        fencedCluster: (fence) => buildClusterClient(configs[id] ?? runnerConfig, fence),
        identity: `it-${id}-${suffix}`,
        namespace: NAMESPACE,
        leaseName,
        host: '127.0.0.1',
        port: 0,
        schedule: '* * * * * *',
        handlers: recordingHandlers(calls[id]),
        webhookToken: async () => TEST_WEBHOOK_TOKEN,
        ...(pods[id] ? { podName: pods[id] } : {}),
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
    const leaseName = testLeaseName(1);
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
          metadata: {
            name: 'it-job',
            namespace: testNamespace,
            annotations: { 'trainscaler.io/managed': 'true' },
          },
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
    const leaseName = testLeaseName(2);
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

  it('routes the Service to the leader only: the leader labels its pod, a stale label is removed, hand-over moves it', async (t) => {
    const core = admin.makeApiClient(CoreV1Api);
    const discovery = admin.makeApiClient(DiscoveryV1Api);
    const app = `trainscaler-it-${suffix}`;
    const service = `trainscaler-it-${suffix}`;
    const podName = (id: string) => `trainscaler-it-${id}-${suffix}`;
    const createPod = (id: string, labels: Record<string, string> = {}) =>
      core.createNamespacedPod({
        namespace: NAMESPACE,
        body: {
          metadata: { name: podName(id), labels: { 'app.kubernetes.io/name': app, ...labels } },
          spec: {
            serviceAccountName: 'trainscaler',
            containers: [
              {
                name: 'trainscaler',
                image: 'registry.invalid/trainscaler:it',
                ports: [{ name: 'http', containerPort: 8080 }],
                resources: { requests: { cpu: '10m' } },
              },
            ],
          },
        },
      });
    const leaseName = testLeaseName(3);
    /** A kubeconfig authenticated as the ServiceAccount with a token bound to this pod, as the kubelet mounts. */
    const podConfig = async (id: string): Promise<KubeConfig> => {
      const pod = await core.readNamespacedPod({ name: podName(id), namespace: NAMESPACE });
      const request = await core.createNamespacedServiceAccountToken({
        name: 'trainscaler',
        namespace: NAMESPACE,
        body: {
          spec: {
            audiences: [],
            expirationSeconds: 3600,
            boundObjectRef: {
              apiVersion: 'v1',
              kind: 'Pod',
              name: podName(id),
              uid: pod.metadata?.uid ?? '',
            },
          },
        },
      });
      const cluster = admin.getCurrentCluster();
      assert.ok(cluster);
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [cluster],
        users: [{ name: `pod-${id}`, token: request.status?.token ?? '' }],
        contexts: [{ name: 'pod', cluster: cluster.name, user: `pod-${id}` }],
        currentContext: 'pod',
      });
      return config;
    };
    const policy = 'infra/k8s/leader-label-policy.yaml';
    const kubectl = (...args: string[]) =>
      execFileSync('kubectl', ['--kubeconfig', kubeconfig ?? '', ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    let runners: Runner[] = [];
    try {
      kubectl('apply', '-f', policy);
      await core.createNamespacedService({
        namespace: NAMESPACE,
        body: {
          metadata: { name: service },
          spec: {
            selector: { 'app.kubernetes.io/name': app, [LEADER_LABEL]: 'true' },
            ports: [{ name: 'http', port: 8080, targetPort: 'http' }],
          },
        },
      });
      // b's pod carries a label a previous container left behind: b must remove it as a follower.
      await createPod('a');
      await createPod('b', { [LEADER_LABEL]: 'true' });
      for (const id of ['a', 'b']) {
        const deadline = Date.now() + 30_000;
        const ready = async () => {
          const pod = await core.readNamespacedPod({ name: podName(id), namespace: NAMESPACE });
          return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
        };
        while (!(await ready())) {
          assert.ok(Date.now() < deadline, `pod ${id} Ready (kwok) within 30 s`);
          await sleep(200);
        }
      }

      /** Names of the ready pods behind the Service, from its EndpointSlices. */
      const endpoints = async () => {
        const slices = await discovery.listNamespacedEndpointSlice({
          namespace: NAMESPACE,
          labelSelector: `kubernetes.io/service-name=${service}`,
        });
        return slices.items
          .flatMap((slice) => slice.endpoints ?? [])
          .filter((e) => e.conditions?.ready !== false)
          .map((e) => e.targetRef?.name ?? '')
          .sort();
      };
      const labelOf = async (id: string) =>
        (await core.readNamespacedPod({ name: podName(id), namespace: NAMESPACE })).metadata?.labels?.[
          LEADER_LABEL
        ];
      const waitForEndpoints = async (what: string, expected: string[]) => {
        const deadline = Date.now() + 30_000;
        let seen: string[] = [];
        while (Date.now() < deadline) {
          seen = await endpoints();
          if (JSON.stringify(seen) === JSON.stringify(expected)) return;
          await sleep(200);
        }
        assert.fail(`${what}: endpoints ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`);
      };

      const configs = { a: await podConfig('a'), b: await podConfig('b') };
      // The policy admits nothing else from a runner's pod identity: not another pod's label, not another label.
      const asA = configs.a.makeApiClient(CoreV1Api);
      const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
      const denied = async (name: string, labels: Record<string, string | null>) => {
        const error = await asA
          .patchNamespacedPod({ name, namespace: NAMESPACE, body: { metadata: { labels } } }, mergePatch)
          .then(
            () => undefined,
            (e: { code?: number; body?: unknown }) => e,
          );
        assert.ok(error, `patch of ${name} ${JSON.stringify(labels)} was admitted`);
        assert.match(String(error.body), /ValidatingAdmissionPolicy 'trainscaler-leader-label'/);
      };
      // Policies take effect once the API server has loaded them: retry the first denial briefly.
      // (b's pod carries the stale label; a may not remove it.)
      const policyDeadline = Date.now() + 15_000;
      for (;;) {
        try {
          await denied(podName('b'), { [LEADER_LABEL]: null });
          break;
        } catch (error) {
          if (Date.now() > policyDeadline) throw error;
          await core.patchNamespacedPod(
            {
              name: podName('b'),
              namespace: NAMESPACE,
              body: { metadata: { labels: { [LEADER_LABEL]: 'true' } } },
            },
            mergePatch,
          );
          await sleep(300);
        }
      }
      await denied(podName('a'), { 'app.kubernetes.io/name': 'hijacked' });
      await denied(podName('a'), { [LEADER_LABEL]: 'yes' });

      const pair = await startPair(leaseName, { a: podName('a'), b: podName('b') }, configs);
      runners = pair.runners;
      assert.equal(pair.a.isLeader(), true);
      await waitForEndpoints('the leader a only', [podName('a')]);
      assert.equal(await labelOf('a'), 'true');
      assert.equal(await labelOf('b'), undefined, 'the follower removed its stale label');
      // Stays so while a renews.
      const until = Date.now() + 2 * RETRY_PERIOD_MS;
      while (Date.now() < until) {
        assert.deepEqual(await endpoints(), [podName('a')]);
        await sleep(500);
      }

      const stoppedAt = Date.now();
      await pair.a.stop();
      assert.equal(await labelOf('a'), undefined, 'a unlabelled its pod on shutdown');
      await waitFor('b to take over', runners, () => pair.b.isLeader(), LEASE_DURATION_MS);
      await waitForEndpoints('the new leader b only', [podName('b')]);
      t.diagnostic(
        `Service endpoints moved to the new leader ${Date.now() - stoppedAt} ms after a's stop began`,
      );
    } finally {
      for (const r of runners) await r.stop();
      await core.deleteNamespacedService({ name: service, namespace: NAMESPACE }).catch(() => undefined);
      try {
        kubectl('delete', '--ignore-not-found', '-f', policy);
      } catch {}
      for (const id of ['a', 'b'])
        await core
          .deleteNamespacedPod({ name: podName(id), namespace: NAMESPACE, gracePeriodSeconds: 0 })
          .catch(() => undefined);
    }
  });
});
