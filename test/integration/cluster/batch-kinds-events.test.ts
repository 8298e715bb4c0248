// Cluster events of the new kinds, end to end on the real control plane, as the trainscaler ServiceAccount:
// the runner's informers (lib/runner/informers.ts) list and watch JobSets and batch/v1 Jobs with the RBAC
// infra/k8s/rbac.yaml grants, the event router sends a new JobSet to submit and never its child Jobs, an
// OOM kill of a JobSet pod (kwok's OOM stage, infra/cluster/kwok/stages.yaml) reaches the cluster-event
// handler as the JobSet's, which answers with a reason (a running JobSet's pod template is immutable: no
// memory raise is attempted) and writes nothing; an indexed Job that completes (condition Complete) reaches
// it as a finished run and updates its signature's profile; an Alertmanager alert naming a JobSet goes through
// the alarm function (schema, trigger, tuning, guardrails) to a resize of its child Jobs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, type V1Job, type V1Pod, type V1PodTemplateSpec } from '@kubernetes/client-node';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSubmit } from '../../../functions/submit.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { profileKey } from '../../../lib/decisions/profile-store.js';
import { EventRouter, type RoutedTask } from '../../../lib/runner/event-router.js';
import { type InformerSet, startInformers } from '../../../lib/runner/informers.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { planText } from '../../support/plan-text.js';
import { RecordedMetricsSource, wellScalingSamples } from '../support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

const JOBSET = { group: 'jobset.x-k8s.io', version: 'v1alpha2', plural: 'jobsets' };
const quiet = () => undefined;
const logger = { info: quiet, warn: quiet, error: quiet };

let cluster: TestCluster;
let ns = '';
let informers: InformerSet | undefined;
const routed: RoutedTask[] = [];
const samples = new Map<string, ReturnType<typeof wellScalingSamples>>();
const processed = new Map<string, number>();

function deps(): HandlerDeps {
  return {
    cluster: new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig })),
    metrics: new RecordedMetricsSource(samples, processed),
    clock: () => Math.floor(Date.now() / 1000),
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger,
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
  };
}

const podSpec = (labels: Record<string, string> = {}) => ({
  metadata: { labels },
  spec: {
    // OnFailure: an OOM-killed container restarts in its pod, as the kubelet does it.
    restartPolicy: 'OnFailure',
    tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
    nodeSelector: { type: 'kwok' },
    containers: [
      {
        name: 'trainer',
        image: 'registry.example.com/ddp:1.4',
        resources: { requests: { cpu: '100m', memory: '1Gi' }, limits: { memory: '1Gi' } },
      },
    ],
  },
});

const managed = { [ANNOTATION.managed]: 'true', [ANNOTATION.elastic]: 'true', [ANNOTATION.maxReplicas]: '4' };

async function podsOf(selector: string): Promise<V1Pod[]> {
  const list = await cluster.admin.core.listNamespacedPod({ namespace: ns, labelSelector: selector });
  return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp);
}

function task(key: string, accept: (t: RoutedTask) => boolean = () => true): Promise<RoutedTask> {
  return waitFor(`routed task ${key}`, async () => routed.find((t) => t.key === key && accept(t)));
}

describe('JobSet and indexed Job events through the runner’s informers, as the ServiceAccount', () => {
  before(async () => {
    cluster = testCluster();
    ns = await createNamespace(cluster, 'it-kinds-events');
    const router = new EventRouter();
    informers = startInformers(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }), {
      onEvent: (event) => routed.push(...router.route(event)),
      logger,
      minRestartDelayMs: 200,
      maxRestartDelayMs: 1000,
    });
    await waitFor('the informers’ first lists (RBAC list + watch on every kind)', async () => {
      const synced = await Promise.race([
        informers?.synced.then(() => true),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
      ]);
      return synced;
    });
  });

  after(async () => {
    await informers?.stop();
    if (ns) await deleteNamespace(cluster, ns);
  });

  it('a new JobSet is submitted (not its child Jobs); an OOM kill of its pod is the JobSet’s, answered with a reason and no write', async () => {
    const body = {
      apiVersion: 'jobset.x-k8s.io/v1alpha2',
      kind: 'JobSet',
      metadata: { name: 'llm', namespace: ns, annotations: managed },
      spec: {
        replicatedJobs: [
          {
            name: 'workers',
            replicas: 1,
            template: {
              spec: {
                parallelism: 2,
                completions: 2,
                completionMode: 'Indexed',
                backoffLimit: 6,
                template: podSpec(),
              },
            },
          },
        ],
      },
    };
    await cluster.admin.custom.createNamespacedCustomObject({ ...JOBSET, namespace: ns, body });
    const submitted = await task(`submit:JobSet/${ns}/llm`);
    const submit = await handleSubmit(submitted.payload, deps());
    assert.deepEqual(submit.errors, []);
    assert.deepEqual(
      submit.outcomes.map((o) => o.ref),
      [{ kind: 'JobSet', namespace: ns, name: 'llm' }],
    );

    const running = await waitFor('2 JobSet pods running', async () => {
      const pods = await podsOf('jobset.sigs.k8s.io/jobset-name=llm');
      return pods.length === 2 ? pods : undefined;
    });
    // The child Job exists and was watched, but is the JobSet's part: no task of its own.
    assert.ok(
      !routed.some((t) => t.key.includes(`Job/${ns}/llm-workers-`)),
      JSON.stringify(routed.map((t) => t.key)),
    );
    const before = (await cluster.admin.custom.getNamespacedCustomObject({
      ...JOBSET,
      namespace: ns,
      name: 'llm',
    })) as KubeObject;

    const victim = running[0]?.metadata?.name ?? '';
    execFileSync('kubectl', [
      '--kubeconfig',
      cluster.adminKubeconfig,
      '-n',
      ns,
      'label',
      'pod',
      victim,
      'kwok.trainscaler.io/oomkill=true',
    ]);
    const oom = await task(`pods:JobSet/${ns}/llm`, (t) => {
      const pod = t.payload.object as V1Pod;
      return (
        pod.metadata?.name === victim &&
        pod.status?.containerStatuses?.[0]?.lastState?.terminated?.reason === 'OOMKilled'
      );
    });
    const result = await handleClusterEvent(oom.payload, deps());
    assert.deepEqual(result.errors, [], 'a reason, not an error');
    const outcome = result.outcomes[0];
    assert.ok(outcome);
    assert.deepEqual(outcome.ref, { kind: 'JobSet', namespace: ns, name: 'llm' });
    assert.equal(outcome.applied, false);
    assert.deepEqual(outcome.plan.changes, []);
    assert.match(
      planText(outcome.plan),
      new RegExp(
        `${victim} OOMKilled .*memory not raised: JobSet cannot change /spec: a running JobSet's pod template is immutable`,
      ),
    );
    const afterOom = (await cluster.admin.custom.getNamespacedCustomObject({
      ...JOBSET,
      namespace: ns,
      name: 'llm',
    })) as KubeObject;
    assert.equal(afterOom.metadata.annotations?.[ANNOTATION.lastDecision], undefined, 'nothing written');
    assert.deepEqual(afterOom.spec, before.spec);
    const events = await cluster.admin.core.listNamespacedEvent({ namespace: ns });
    assert.ok(!events.items.some((e) => e.reason?.startsWith('Trainscaler')), 'no audit Event');
  });

  it('an indexed Job that completes reaches the cluster-event handler once, and its run updates the profile', async () => {
    const batch = cluster.admin.kc.makeApiClient(BatchV1Api);
    const signature = `it-kinds-events-${ns}`;
    const job: V1Job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: 'ddp',
        namespace: ns,
        annotations: { ...managed, [ANNOTATION.signature]: signature },
      },
      spec: {
        parallelism: 1,
        completions: 1,
        completionMode: 'Indexed',
        // kwok's pod-complete stage turns pods so labelled Succeeded.
        template: podSpec({ 'kwok.trainscaler.io/complete': 'true' }) as V1PodTemplateSpec,
      },
    };
    await batch.createNamespacedJob({ namespace: ns, body: job });
    samples.set(
      RecordedMetricsSource.key({ namespace: ns, name: 'ddp' }),
      wellScalingSamples(Math.floor(Date.now() / 1000)),
    );
    await task(`submit:Job/${ns}/ddp`);
    const done = await task(`job:Job/${ns}/ddp`);
    const result = await handleClusterEvent(done.payload, deps());
    assert.deepEqual(result.errors, []);
    assert.equal(result.ignored, `profile of ${signature} updated`);
    const profiles = await cluster.admin.core.readNamespacedConfigMap({
      namespace: 'trainscaler-system',
      name: 'trainscaler-profiles',
    });
    assert.ok(
      Object.keys(profiles.data ?? {}).includes(profileKey({ namespace: ns, signature })),
      "the profile is stored, under the job's namespace",
    );
    assert.equal(routed.filter((t) => t.key === `job:Job/${ns}/ddp`).length, 1, 'once');
  });

  it('an Alertmanager alert naming a JobSet grows it through its child Jobs, in a multiple of them', async () => {
    // 2 child Jobs x 1 pod; a known remaining time lets the growth rule add more than one worker at once.
    const annotations = { ...managed, 'trainscaler.io/target-samples': '100000000' };
    const body = {
      apiVersion: 'jobset.x-k8s.io/v1alpha2',
      kind: 'JobSet',
      metadata: { name: 'grow', namespace: ns, annotations },
      spec: {
        replicatedJobs: [
          {
            name: 'workers',
            replicas: 2,
            template: {
              spec: {
                parallelism: 1,
                completions: 1,
                completionMode: 'Indexed',
                backoffLimit: 6,
                template: podSpec(),
              },
            },
          },
        ],
      },
    };
    await cluster.admin.custom.createNamespacedCustomObject({ ...JOBSET, namespace: ns, body });
    await waitFor('2 JobSet pods running', async () =>
      (await podsOf('jobset.sigs.k8s.io/jobset-name=grow')).length === 2 ? true : undefined,
    );
    const key = RecordedMetricsSource.key({ namespace: ns, name: 'grow' });
    // Observed at 1 and 2 workers, one per node (as the scheduler spreads them here), scaling linearly.
    const now = Math.floor(Date.now() / 1000);
    samples.set(
      key,
      Array.from({ length: 20 }, (_, i) => ({
        replicas: i < 10 ? 1 : 2,
        nodes: i < 10 ? 1 : 2,
        localBatchSize: 64,
        stepTime: 0.2 * (1 + 0.01 * (i % 3)),
        syncTime: i < 10 ? 0 : 0.002,
        at: now - 3600 + i * 60,
      })),
    );
    processed.set(key, 1000);
    const result = await handleAlarm(
      alertmanagerWebhook([{ namespace: ns, kind: 'JobSet', name: 'grow' }]),
      deps(),
    );
    assert.deepEqual(result.errors, []);
    const outcome = result.outcomes[0];
    assert.equal(outcome?.applied, true, outcome?.plan.reason);
    const live = (await cluster.admin.custom.getNamespacedCustomObject({
      ...JOBSET,
      namespace: ns,
      name: 'grow',
    })) as {
      spec: {
        replicatedJobs: {
          replicas: number;
          template: { spec: { parallelism: number; completions: number } };
        }[];
      };
    };
    const workers = live.spec.replicatedJobs[0];
    assert.ok(workers);
    assert.equal(workers.replicas, 2, 'replicas is immutable');
    assert.equal(workers.template.spec.parallelism, workers.template.spec.completions);
    const total = workers.replicas * workers.template.spec.parallelism;
    assert.ok(total > 2 && total <= 4, `grown within max-replicas 4 to ${total}`);
    await waitFor(`${total} JobSet pods running`, async () =>
      (await podsOf('jobset.sigs.k8s.io/jobset-name=grow')).length === total ? true : undefined,
    );
  });
});
