// A JobSet resized by the actuator, as the trainscaler ServiceAccount, on the real API server, Job controller
// and JobSet v0.12.0 controller with its webhook (ElasticJobSet gate on; infra/cluster/up-controllers.sh):
// parallelism and completions of the training replicated job change together, the JobSet controller carries
// them to its running child Job, whose pods follow; the pods are found through the child Job read back to the
// JobSet. What JobSet's webhook forbids is refused before any write, and the webhook's own answers show the
// guard is neither weaker nor stricter than the controller's rules.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, loadSnapshot } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { UnsupportedChangeError } from '../../../lib/errors.js';
import type { JobRef, Plan } from '../../../lib/types.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

let cluster: TestCluster;
let ns = '';
const quiet = () => undefined;
const JOBSET = { group: 'jobset.x-k8s.io', version: 'v1alpha2', plural: 'jobsets' };

function sa(): KubernetesClusterClient {
  return new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
}

function deps(): ActuatorDeps {
  return {
    cluster: sa(),
    clock: () => Math.floor(Date.now() / 1000),
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
    guardrails: { cooldownSeconds: 0 },
  };
}

function podTemplate() {
  return {
    spec: {
      restartPolicy: 'Never',
      containers: [
        {
          name: 'trainer',
          image: 'registry.example.com/ddp:1.4',
          resources: {
            requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' },
            limits: { 'nvidia.com/gpu': '1' },
          },
        },
      ],
    },
  };
}

function jobSetManifest(name: string, replicas: number, parallelism: number) {
  return {
    apiVersion: 'jobset.x-k8s.io/v1alpha2',
    kind: 'JobSet',
    metadata: {
      name,
      annotations: {
        [ANNOTATION.managed]: 'true',
        [ANNOTATION.elastic]: 'true',
        [ANNOTATION.minReplicas]: '1',
        [ANNOTATION.maxReplicas]: '8',
      },
    },
    spec: {
      replicatedJobs: [
        {
          name: 'workers',
          replicas,
          template: {
            spec: {
              parallelism,
              completions: parallelism,
              completionMode: 'Indexed',
              backoffLimit: 0,
              template: podTemplate(),
            },
          },
        },
      ],
    },
  };
}

async function readJobSet(name: string): Promise<KubeObject> {
  return (await cluster.admin.custom.getNamespacedCustomObject({
    ...JOBSET,
    namespace: ns,
    name,
  })) as KubeObject;
}

function workersSpec(js: KubeObject): { parallelism?: number; completions?: number } {
  return (
    (js.spec as { replicatedJobs: { template: { spec: { parallelism?: number; completions?: number } } }[] })
      .replicatedJobs[0]?.template.spec ?? {}
  );
}

async function runningPods(jobSet: string): Promise<number> {
  const list = await cluster.admin.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `jobset.sigs.k8s.io/jobset-name=${jobSet}`,
  });
  return list.items.filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp).length;
}

const resize =
  (to: number) =>
  ({ view }: { view: { ref: JobRef; roles: { replicas: number }[] } }): Plan => ({
    ref: view.ref,
    policy: 'tuning',
    reason: `integration: ${view.roles[0]?.replicas} -> ${to} workers`,
    changes: [{ kind: 'replicas', role: 'Worker', from: view.roles[0]?.replicas ?? 0, to }],
  });

before(async () => {
  cluster = testCluster();
  ns = await createNamespace(cluster, 'ts-jobset');
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

describe('JobSet v0.12 (ElasticJobSet) on the real controllers', () => {
  it('grows 2 -> 4 and shrinks to 3: the child Job and its pods follow; pods found through the child Job', async () => {
    await cluster.admin.custom.createNamespacedCustomObject({
      ...JOBSET,
      namespace: ns,
      body: jobSetManifest('llm', 1, 2),
    });
    await waitFor(
      '2 running pods',
      async () => ((await runningPods('llm')) === 2 ? true : undefined),
      90_000,
    );
    const ref: JobRef = { kind: 'JobSet', namespace: ns, name: 'llm' };
    const before = await loadSnapshot(sa(), ref);
    assert.equal(before.view.roles[0]?.replicas, 2);
    assert.equal(before.rawPods.length, 2, 'the pods of the child Job, verified through it');

    assert.equal((await actOnJob(ref, resize(4), deps())).applied, true);
    const grown = workersSpec(await readJobSet('llm'));
    assert.deepEqual([grown.parallelism, grown.completions], [4, 4]);
    await waitFor(
      '4 running pods',
      async () => ((await runningPods('llm')) === 4 ? true : undefined),
      90_000,
    );

    const shrunk = await actOnJob(ref, resize(3), deps());
    assert.equal(shrunk.applied, true, JSON.stringify(shrunk.plan));
    await waitFor(
      '3 running pods',
      async () => ((await runningPods('llm')) === 3 ? true : undefined),
      90_000,
    );
    const child = await cluster.admin.kc
      .makeApiClient(BatchV1Api)
      .readNamespacedJob({ namespace: ns, name: 'llm-workers-0' });
    assert.deepEqual(
      [child.spec?.parallelism, child.spec?.completions],
      [3, 3],
      'the controller synced the child',
    );
    const live = await readJobSet('llm');
    assert.equal(
      JSON.parse(live.metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}').id,
      shrunk.decisionId,
    );
    const events = await cluster.admin.core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: 'involvedObject.kind=JobSet,involvedObject.name=llm',
    });
    assert.equal(events.items.filter((e) => e.reason === 'TrainscalerTuning').length, 2);
  });

  it('refuses a count that is no multiple of the child Jobs before writing; the webhook refuses the rest', async () => {
    await cluster.admin.custom.createNamespacedCustomObject({
      ...JOBSET,
      namespace: ns,
      body: jobSetManifest('pair', 2, 1),
    });
    const ref: JobRef = { kind: 'JobSet', namespace: ns, name: 'pair' };
    const before = await readJobSet('pair');
    await assert.rejects(
      actOnJob(ref, resize(3), deps()),
      (e: unknown) =>
        e instanceof UnsupportedChangeError && /not a multiple of the 2 child Jobs/.test(e.message),
    );
    // The JobSet controller writes its status meanwhile: the spec (generation) and annotations are what we own.
    const unchanged = await readJobSet('pair');
    assert.equal(unchanged.metadata.generation, before.metadata.generation, 'spec not written');
    assert.deepEqual(unchanged.metadata.annotations, before.metadata.annotations, 'no audit annotation');
    const path = '/spec/replicatedJobs/0';
    // The webhook's own rules, as the ServiceAccount (dry run): unequal counts and replicas are refused ...
    await assert.rejects(
      sa().patchJob(
        ref,
        [
          { op: 'replace', path: `${path}/template/spec/parallelism`, value: 2 },
          { op: 'replace', path: `${path}/template/spec/completions`, value: 3 },
        ],
        { dryRun: true },
      ),
      /completions must be equal to parallelism/,
    );
    await assert.rejects(
      sa().patchJob(ref, [{ op: 'replace', path: `${path}/replicas`, value: 3 }], { dryRun: true }),
      /immutable/,
    );
    // ... and the resize trainscaler writes is admitted.
    await sa().patchJob(
      ref,
      [
        { op: 'replace', path: `${path}/template/spec/parallelism`, value: 2 },
        { op: 'replace', path: `${path}/template/spec/completions`, value: 2 },
      ],
      { dryRun: true },
    );
  });
});
