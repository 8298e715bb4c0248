// The cluster code on a real Kubernetes API server (infra/cluster): CRD validation, resourceVersion
// conflicts, JSON Patch, RBAC, the Eviction API, and the Kubeflow training-operator turning patches into pods.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSubmit } from '../../../functions/submit.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type {
  ClusterClient,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../../../lib/cluster/cluster-client.js';
import { eventMessage, FULL_REASON_IN_ANNOTATION } from '../../../lib/cluster/event-message.js';
import {
  KubernetesClusterClient,
  loadKubeConfig,
  translateError,
} from '../../../lib/cluster/kubernetes-cluster-client.js';
import { capacityOf, LEAVING_OVERDUE_SECONDS, loadCapacity } from '../../../lib/cluster/load-capacity.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { ConflictError, ForbiddenError } from '../../../lib/errors.js';
import { KubernetesLeaseLock } from '../../../lib/runner/lease-lock.js';
import type { JobRef } from '../../../lib/types.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { planText } from '../../support/plan-text.js';
import { RecordedMetricsSource, wellScalingSamples } from '../support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from '../support/test-cluster.js';

let cluster: TestCluster;
let sa: KubernetesClusterClient;
const namespaces: string[] = [];

function deps(
  metrics = new Map(),
  overrides: Partial<HandlerDeps> = {},
  processed = new Map<string, number>(),
): HandlerDeps {
  const quiet = () => undefined;
  return {
    cluster: sa,
    metrics: new RecordedMetricsSource(metrics, processed),
    clock: () => Math.floor(Date.now() / 1000),
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    ...overrides,
  };
}

async function namespace(prefix: string): Promise<string> {
  const ns = await createNamespace(cluster, prefix);
  namespaces.push(ns);
  return ns;
}

async function createJob(body: Record<string, unknown>): Promise<KubeObject> {
  const plural = body.kind === 'TFJob' ? 'tfjobs' : 'pytorchjobs';
  const ns = (body as { metadata: { namespace: string } }).metadata.namespace;
  return (await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural,
    body,
  })) as KubeObject;
}

function workerReplicas(job: KubeObject): number | undefined {
  return (job.spec as { pytorchReplicaSpecs?: { Worker?: { replicas?: number } } }).pytorchReplicaSpecs
    ?.Worker?.replicas;
}

async function eventsFor(ns: string, name: string) {
  return (
    await cluster.admin.core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: `involvedObject.name=${name}`,
    })
  ).items;
}

async function runningWorkers(ns: string, job: string, count: number): Promise<V1Pod[] | undefined> {
  const pods = (await workerPods(cluster, ns, job)).filter(
    (p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp,
  );
  return pods.length === count ? pods : undefined;
}

/** Deletes the earlier tests' namespaces and waits until their pods are gone: capacity tests start from empty. */
async function clusterDrained(): Promise<void> {
  for (const ns of namespaces.splice(0)) await deleteNamespace(cluster, ns);
  await waitFor(
    'GPUs of earlier tests released',
    async () => {
      const pods = (
        await cluster.admin.core.listPodForAllNamespaces({ labelSelector: 'training.kubeflow.org/job-name' })
      ).items;
      return pods.length === 0 ? true : undefined;
    },
    120_000,
  );
}

before(async () => {
  cluster = testCluster();
  sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
});

after(async () => {
  for (const ns of namespaces) await deleteNamespace(cluster, ns);
});

describe('real API server semantics the actuator relies on', () => {
  it('a JSON Patch pinned to a stale resourceVersion is rejected with 409 -> ConflictError', async () => {
    const ns = await namespace('it-rv');
    const job = await createJob(elasticPyTorchJob({ name: 'rv', namespace: ns, workers: 1, min: 1, max: 2 }));
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'rv' };
    const pin = (rv: string | undefined): JsonPatchOp[] => [
      { op: 'replace', path: '/metadata/resourceVersion', value: rv },
      { op: 'add', path: '/metadata/labels', value: { pinned: 'yes' } },
    ];
    // Someone else writes after our read: our version is now stale.
    await new KubernetesClusterClient(cluster.admin.kc).patchJob(
      ref,
      [{ op: 'add', path: '/metadata/labels', value: { other: 'client' } }],
      { dryRun: false },
    );
    await assert.rejects(
      sa.patchJob(ref, pin(job.metadata.resourceVersion), { dryRun: false }),
      ConflictError,
    );
  });

  it('a write outside the ClusterRole fails with a ForbiddenError naming what was attempted', async () => {
    const ns = await namespace('it-rbac');
    await createJob(elasticPyTorchJob({ name: 'rbac', namespace: ns, workers: 1, min: 1, max: 2 }));
    const pod = await waitFor('worker pod', async () => (await workerPods(cluster, ns, 'rbac'))[0]);
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.saKubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const name = pod.metadata?.name ?? '';
    const error = await core.deleteNamespacedPod({ namespace: ns, name }).then(
      () => undefined,
      (e: unknown) => translateError(`delete pod ${ns}/${name}`, e),
    );
    assert.ok(error instanceof ForbiddenError, `expected ForbiddenError, got ${String(error)}`);
    assert.match(error.message, /not allowed to delete pod/);
    assert.match(error.message, /system:serviceaccount:trainscaler-system:trainscaler/);
  });

  it('as the ServiceAccount, Leases outside its own name and ConfigMaps outside its own namespace are forbidden', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.saKubeconfig);
    const forbidden = async (what: string, attempt: () => Promise<unknown>) => {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof ForbiddenError, `${what}: expected ForbiddenError, got ${String(error)}`);
    };
    const now = new Date();
    const record = {
      holderIdentity: 'x',
      leaseDurationSeconds: 15,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    };
    // A system leader Lease: taking it would stop the scheduler or controller-manager from leading.
    await forbidden('create lease in kube-system', () =>
      new KubernetesLeaseLock(kc, 'kube-system', 'trainscaler-leader').create(record),
    );
    await forbidden('get kube-system lease', () =>
      new KubernetesLeaseLock(kc, 'kube-system', 'kube-scheduler').get(),
    );
    await forbidden('get another lease in its namespace', () =>
      new KubernetesLeaseLock(kc, 'trainscaler-system', 'other').get(),
    );
    await forbidden('create configmap in kube-system', () =>
      sa.putConfigMap('kube-system', 'trainscaler-profiles', { a: '1' }, undefined, { dryRun: false }),
    );
    // Within trainscaler-system, RBAC cannot name the outcome store's ConfigMaps (one per job namespace), so any
    // ConfigMap there may be read; writes to names not trainscaler's are refused at admission by
    // infra/k8s/configmap-names-policy.yaml (test/integration/runner-as-service-account.test.ts).
    // What it does use still works: its own profile store.
    await assert.doesNotReject(() => sa.getConfigMap('trainscaler-system', 'trainscaler-profiles'));
  });
});

describe('functions on the real cluster, as the trainscaler ServiceAccount', () => {
  it('a forged "succeeded" event writes no profile: the job is re-read, running or not managed', async () => {
    const ns = await namespace('it-forged');
    await createJob(elasticPyTorchJob({ name: 'running', namespace: ns, workers: 1, min: 1, max: 2 }));
    await createJob(
      elasticPyTorchJob({
        name: 'opted-out',
        namespace: ns,
        workers: 1,
        min: 1,
        max: 2,
        annotations: { [ANNOTATION.managed]: 'false' },
      }),
    );
    const before = await sa.getConfigMap('trainscaler-system', 'trainscaler-profiles');
    for (const [name, why] of [
      ['running', /does not report the job succeeded/],
      ['opted-out', /not managed/],
    ] as const) {
      const live = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name });
      const forged = {
        type: 'MODIFIED',
        object: {
          ...live,
          metadata: { ...live.metadata, annotations: { [ANNOTATION.managed]: 'true' } },
          status: { conditions: [{ type: 'Succeeded', status: 'True', reason: 'PyTorchJobSucceeded' }] },
        },
      };
      const result = await handleClusterEvent(forged, deps());
      assert.match(result.ignored ?? '', why, name);
    }
    const after = await sa.getConfigMap('trainscaler-system', 'trainscaler-profiles');
    assert.equal(after?.metadata?.resourceVersion, before?.metadata?.resourceVersion);
  });

  it('submit: a PyTorchJob and a TFJob as users write them are configured, annotated, and an Event recorded', async () => {
    const ns = await namespace('it-submit');
    await createJob(elasticPyTorchJob({ name: 'too-wide', namespace: ns, workers: 6, min: 1, max: 4 }));
    const torch = await handleSubmit({ kind: 'PyTorchJob', namespace: ns, name: 'too-wide' }, deps());
    assert.equal(torch.outcomes[0]?.applied, true, torch.outcomes[0]?.plan.reason);
    const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'too-wide' });
    assert.equal(workerReplicas(job), 4);
    const record = JSON.parse(job.metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}');
    assert.equal(record.policy, 'initial');
    // A node preference joins the clamp only when some node has room for all 4 workers at that instant, which
    // depends on what earlier tests' pods still hold (a local CI run saw it once): it must then name that node.
    const [clamp, ...rest] = record.changes;
    assert.deepEqual(clamp, { kind: 'replicas', role: 'Worker', from: 6, to: 4 });
    for (const change of rest) {
      assert.equal(change.kind, 'prefer-node');
      assert.ok(record.reason.includes(`prefer node ${change.node}`), record.reason);
    }
    assert.ok(rest.length <= 1);
    const events = await eventsFor(ns, 'too-wide');
    assert.ok(
      // With the node preference and the torchelastic advice the reason passes an Event's 1 kB: cut there, visibly.
      events.some(
        (e) =>
          e.reason === 'TrainscalerInitial' &&
          e.message === eventMessage(record.reason, FULL_REASON_IN_ANNOTATION),
      ),
      'audit Event',
    );

    await createJob({
      apiVersion: 'kubeflow.org/v1',
      kind: 'TFJob',
      metadata: {
        name: 'ps-job',
        namespace: ns,
        annotations: {
          [ANNOTATION.managed]: 'true',
          [ANNOTATION.minReplicas]: '1',
          [ANNOTATION.maxReplicas]: '3',
        },
      },
      spec: {
        enableDynamicWorker: true,
        tfReplicaSpecs: {
          PS: {
            replicas: 1,
            template: {
              spec: {
                containers: [
                  { name: 'tensorflow', image: 'tf:2', resources: { requests: { cpu: '1', memory: '1Gi' } } },
                ],
              },
            },
          },
          Worker: {
            replicas: 5,
            template: {
              spec: {
                containers: [
                  { name: 'tensorflow', image: 'tf:2', resources: { requests: { cpu: '1', memory: '1Gi' } } },
                ],
              },
            },
          },
        },
      },
    });
    const tf = await handleSubmit({ kind: 'TFJob', namespace: ns, name: 'ps-job' }, deps());
    assert.equal(tf.outcomes[0]?.applied, true, tf.outcomes[0]?.plan.reason);
    const tfJob = await sa.getJob({ kind: 'TFJob', namespace: ns, name: 'ps-job' });
    assert.equal(
      (tfJob.spec as { tfReplicaSpecs: { Worker: { replicas: number } } }).tfReplicaSpecs.Worker.replicas,
      3,
    );
    assert.ok(tfJob.metadata.annotations?.[ANNOTATION.lastDecision]);
    assert.ok((await eventsFor(ns, 'ps-job')).some((e) => e.reason === 'TrainscalerInitial'));
  });

  it('alarm: scales a running PyTorchJob within elasticPolicy, and the operator turns it into that many pods', async () => {
    await clusterDrained();
    const ns = await namespace('it-alarm');
    // A known remaining time (target and progress): the growth rule allows more than one worker at once.
    const target = { 'trainscaler.io/target-samples': '100000000' };
    await createJob(
      elasticPyTorchJob({ name: 'grow', namespace: ns, workers: 1, min: 1, max: 3, annotations: target }),
    );
    await waitFor('1 worker running', () => runningWorkers(ns, 'grow', 1));
    const metrics = new Map([[`${ns}/grow`, wellScalingSamples(Math.floor(Date.now() / 1000))]]);
    const result = await handleAlarm(
      alertmanagerWebhook([{ namespace: ns, kind: 'PyTorchJob', name: 'grow' }]),
      deps(metrics, {}, new Map([[`${ns}/grow`, 1000]])),
    );
    const outcome = result.outcomes[0];
    assert.equal(outcome?.applied, true, outcome?.plan.reason ?? JSON.stringify(result.errors));
    const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'grow' });
    assert.equal(workerReplicas(job), 3, 'grown to elasticPolicy.maxReplicas, not past it');
    await waitFor('3 workers running', () => runningWorkers(ns, 'grow', 3));
  });

  it('dry run: the decision is computed and reported, and nothing is written', async () => {
    const ns = await namespace('it-dry');
    await createJob(elasticPyTorchJob({ name: 'dry', namespace: ns, workers: 1, min: 1, max: 3 }));
    await waitFor('1 worker running', () => runningWorkers(ns, 'dry', 1));
    // The operator writes the job's status while pods start; wait until it is quiet.
    const settled = await waitFor('job status settled', async () => {
      const first = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'dry' });
      await new Promise((r) => setTimeout(r, 1500));
      const second = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'dry' });
      return first.metadata.resourceVersion === second.metadata.resourceVersion ? second : undefined;
    });
    const metrics = new Map([[`${ns}/dry`, wellScalingSamples(Math.floor(Date.now() / 1000))]]);
    const result = await handleAlarm(
      alertmanagerWebhook([{ namespace: ns, kind: 'PyTorchJob', name: 'dry' }]),
      deps(metrics, { dryRun: true }),
    );
    assert.equal(result.outcomes[0]?.skipped, 'dry-run');
    assert.ok((result.outcomes[0]?.patch ?? []).length > 0);
    const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'dry' });
    assert.equal(job.metadata.resourceVersion, settled.metadata.resourceVersion);
    assert.equal(job.metadata.annotations?.[ANNOTATION.lastDecision], undefined);
    assert.equal((await eventsFor(ns, 'dry')).filter((e) => e.reason?.startsWith('Trainscaler')).length, 0);
  });

  it('conflict: another client writes between our read and write; we re-read, recompute, lose nothing', async () => {
    const ns = await namespace('it-conflict');
    await createJob(elasticPyTorchJob({ name: 'raced', namespace: ns, workers: 6, min: 1, max: 4 }));
    let interfered = 0;
    const admin = new KubernetesClusterClient(cluster.admin.kc);
    const interfering: ClusterClient = Object.create(sa, {
      patchJob: {
        value: async (ref: JobRef, patch: JsonPatchOp[], options: WriteOptions) => {
          if (interfered++ === 0) {
            // Another client (a person with kubectl, another controller) writes first.
            await admin.patchJob(
              ref,
              [{ op: 'add', path: '/metadata/labels', value: { team: 'other-client' } }],
              {
                dryRun: false,
              },
            );
          }
          return sa.patchJob(ref, patch, options);
        },
      },
    });
    const result = await handleSubmit(
      { kind: 'PyTorchJob', namespace: ns, name: 'raced' },
      deps(new Map(), { cluster: interfering }),
    );
    const outcome = result.outcomes[0];
    assert.equal(outcome?.applied, true);
    // At least ours; the operator's status writes can add more, each re-read and recomputed the same way.
    assert.ok((outcome?.conflicts ?? 0) >= 1, 'the 409 was met and retried');
    const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'raced' });
    assert.equal(job.metadata.labels?.team, 'other-client', "the other client's update survived");
    assert.equal(workerReplicas(job), 4, 'and ours landed');
  });

  it('OOMKilled (kwok, exit 137): memory raised within the cap, the pod recreated at the new size', async () => {
    await clusterDrained();
    const ns = await namespace('it-oom');
    await createJob(
      elasticPyTorchJob({ name: 'oom', namespace: ns, workers: 2, min: 1, max: 2, memory: '2Gi' }),
    );
    await waitFor('2 workers running', () => runningWorkers(ns, 'oom', 2));
    const podName = 'oom-worker-1';
    // kwok's OOM stage (infra/cluster/kwok/stages.yaml) kills the container like the kubelet would.
    execFileSync('kubectl', [
      '--kubeconfig',
      cluster.adminKubeconfig,
      '-n',
      ns,
      'label',
      'pod',
      podName,
      'kwok.trainscaler.io/oomkill=true',
    ]);
    const killed = await waitFor('OOMKilled in lastState', async () => {
      const pod = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: podName });
      const terminated = pod.status?.containerStatuses?.[0]?.lastState?.terminated;
      return terminated?.reason === 'OOMKilled' && terminated.exitCode === 137 ? pod : undefined;
    });
    const oldUid = killed.metadata?.uid;
    const result = await handleClusterEvent(
      { type: 'MODIFIED', object: { ...killed, kind: 'Pod', apiVersion: 'v1' } },
      deps(),
    );
    const outcome = result.outcomes[0];
    assert.equal(outcome?.applied, true, outcome?.plan.reason ?? JSON.stringify(result.errors));
    const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'oom' });
    const limits = (
      job.spec as {
        pytorchReplicaSpecs: {
          Worker: { template: { spec: { containers: { resources: { limits: Record<string, string> } }[] } } };
        };
      }
    ).pytorchReplicaSpecs.Worker.template.spec.containers[0]?.resources.limits;
    assert.equal(limits?.memory, '3Gi', '2Gi x1.5');
    const recreated = await waitFor('worker-1 recreated with 3Gi', async () => {
      const pod = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: podName });
      return pod.metadata?.uid !== oldUid && pod.spec?.containers[0]?.resources?.limits?.memory === '3Gi'
        ? pod
        : undefined;
    });
    assert.equal(recreated.status?.containerStatuses?.[0]?.restartCount ?? 0, 0);
    assert.ok(
      (await eventsFor(ns, 'oom')).some((e) => e.reason === 'TrainscalerFault' && e.type === 'Warning'),
    );
  });

  it('a node drain (cordon + Eviction API) on a full cluster: the elastic job shrinks to what fits', async () => {
    await clusterDrained();
    const ns = await namespace('it-evict');
    await createJob(elasticPyTorchJob({ name: 'victim', namespace: ns, workers: 4, min: 1, max: 4 }));
    await waitFor('victim running', () => runningWorkers(ns, 'victim', 4));
    // Another team's job, not managed by trainscaler, takes the other 12 GPUs: the cluster is full.
    await createJob(
      elasticPyTorchJob({
        name: 'filler',
        namespace: ns,
        workers: 12,
        min: 12,
        max: 12,
        annotations: { [ANNOTATION.managed]: 'false' },
      }),
    );
    await waitFor('filler holds 12 GPUs', () => runningWorkers(ns, 'filler', 12));
    const victimPod = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: 'victim-worker-3' });
    const node = victimPod.spec?.nodeName ?? '';
    const oldUid = victimPod.metadata?.uid;
    // What `kubectl drain` does: cordon the node, then evict its pods through the Eviction API.
    execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, 'cordon', node]);
    try {
      await cluster.admin.core.createNamespacedPodEviction({
        namespace: ns,
        name: 'victim-worker-3',
        body: {
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name: 'victim-worker-3', namespace: ns },
        },
      });
      const pending = await waitFor('victim-worker-3 recreated and unschedulable', async () => {
        const pod = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: 'victim-worker-3' });
        return pod.metadata?.uid !== oldUid && pod.status?.phase === 'Pending' && !pod.spec?.nodeName
          ? pod
          : undefined;
      });
      const result = await handleClusterEvent(
        { type: 'MODIFIED', object: { ...pending, kind: 'Pod', apiVersion: 'v1' } },
        deps(),
      );
      const outcome = result.outcomes[0];
      assert.equal(outcome?.applied, true, outcome?.plan.reason ?? JSON.stringify(result.errors));
      assert.match(planText(outcome.plan), /3 running \+ 0 more fit/);
      const job = await sa.getJob({ kind: 'PyTorchJob', namespace: ns, name: 'victim' });
      assert.equal(workerReplicas(job), 3);
      await waitFor('victim keeps going on 3 workers', async () => {
        const pods = await workerPods(cluster, ns, 'victim');
        const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
        return live.length === 3 && live.every((p) => p.status?.phase === 'Running') ? true : undefined;
      });
    } finally {
      execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, 'uncordon', node]);
    }
  });
  it("a pod in its graceful termination is leaving in the schedule's capacity; one stuck past it holds its room", async () => {
    const ns = await namespace('it-leaving');
    // The host node runs pods as processes and stops them as a kubelet does (SIGTERM, SIGKILL after the
    // grace period): this one takes 20 s to stop, as a trainer writing its checkpoint on SIGTERM would.
    const node = 'host-node-0';
    await cluster.admin.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'leaving', namespace: ns },
        spec: {
          nodeName: node,
          terminationGracePeriodSeconds: 30,
          tolerations: [{ key: 'trainscaler.io/host-node', operator: 'Exists', effect: 'NoSchedule' }],
          containers: [
            {
              name: 'main',
              image: 'host',
              command: ['sh', '-c', 'trap "sleep 20; exit 0" TERM; while true; do sleep 1; done'],
              resources: { requests: { cpu: '250m' } },
            },
          ],
        },
      },
    });
    const cpuOn = async (now?: number) => {
      const [nodes, pods] = await Promise.all([sa.listNodes(), sa.listPods(undefined)]);
      const { capacity } =
        now === undefined ? { capacity: capacityOf(nodes, pods) } : await loadCapacity(sa, now);
      return capacity.nodes.find((n) => n.name === node)?.allocated.cpuMillis ?? -1;
    };
    const pod = () => cluster.admin.core.readNamespacedPod({ namespace: ns, name: 'leaving' });
    await waitFor('the pod runs', async () => ((await pod()).status?.phase === 'Running' ? true : undefined));
    const held = await cpuOn(Date.now() / 1000);
    await cluster.admin.core.deleteNamespacedPod({ namespace: ns, name: 'leaving' });
    const deleting = await waitFor('deletionTimestamp set, the pod still running', async () => {
      const p = await pod();
      return p.metadata?.deletionTimestamp && p.status?.phase === 'Running' ? p : undefined;
    });
    const due = new Date(deleting.metadata?.deletionTimestamp ?? 0).getTime() / 1000;
    assert.equal(await cpuOn(Date.now() / 1000), held - 250, 'leaving: its room is free to plan with');
    assert.equal(await cpuOn(), held, 'without a clock it holds its room until gone');
    assert.equal(await cpuOn(due + LEAVING_OVERDUE_SECONDS), held, 'overdue: stuck, not leaving');
    assert.equal((await pod()).status?.phase, 'Running', 'all three read while it was still stopping');
  });
});
