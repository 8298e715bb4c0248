// trainscaler's per-job state on the real control plane: the ScaledTrainingJob CRD installed by up.sh,
// trainscaler (its ServiceAccount) acting on a job and recording its state in the status; a tenant (a
// ServiceAccount bound to the built-in `edit` role in its namespace) may read that state but not write it
// (`kubectl auth can-i` says no, and a write is refused with 403); a crafted state annotation on the job
// changes nothing trainscaler reads; deleting the job deletes its state (garbage collection).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ApiException,
  AuthorizationV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, loadSnapshot } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import { JOB_STATE_RESOURCE, jobStateName, stateOfStatus } from '../../../lib/cluster/job-state.js';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import type { JobRef, Plan } from '../../../lib/types.js';
import { tenantKubeConfig } from '../support/tenant.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from '../support/test-cluster.js';

const STATE = {
  group: JOB_STATE_RESOURCE.group,
  version: JOB_STATE_RESOURCE.version,
  plural: JOB_STATE_RESOURCE.plural,
};

let cluster: TestCluster;
let sa: KubernetesClusterClient;
let ns: string;
let tenant: KubeConfig;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** `kubectl auth can-i <verb> scaledtrainingjobs[/<subresource>]` as the tenant. */
async function tenantCan(verb: string, subresource = ''): Promise<boolean> {
  const review = await tenant.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          group: JOB_STATE_RESOURCE.group,
          resource: JOB_STATE_RESOURCE.plural,
          subresource,
          verb,
          namespace: ns,
        },
      },
    },
  });
  return review.status?.allowed === true;
}

before(async () => {
  cluster = testCluster();
  sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
  ns = await createNamespace(cluster, 'it-job-state');
  tenant = await tenantKubeConfig(cluster, ns);
});

after(async () => {
  await deleteNamespace(cluster, ns);
});

describe('per-job state in a ScaledTrainingJob status only trainscaler writes', () => {
  it('trainscaler records it; the tenant reads it, cannot write it, and a crafted annotation changes nothing', async () => {
    const name = 'stateful';
    await cluster.admin.custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      body: elasticPyTorchJob({ name, namespace: ns, workers: 2, min: 1, max: 8 }),
    });
    await waitFor('2 workers running', async () => {
      const pods = (await workerPods(cluster, ns, name)).filter((p) => p.status?.phase === 'Running');
      return pods.length === 2 ? pods : undefined;
    });
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name };
    const deps: ActuatorDeps = {
      cluster: sa,
      clock: () => Date.now() / 1000,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    };
    const grow =
      (to: number) =>
      (s: { view: { roles: { replicas: number }[] } }): Plan => ({
        ref,
        policy: 'tuning',
        reason: `to ${to}`,
        changes: [{ kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 0, to }],
      });
    const outcome = await actOnJob(ref, grow(3), deps);
    assert.equal(outcome.applied, true, outcome.plan.reason);

    // Recorded as trainscaler's ServiceAccount, owned by the job.
    const job = await sa.getJob(ref);
    const stateName = jobStateName('PyTorchJob', name);
    const stored = (await cluster.admin.custom.getNamespacedCustomObject({
      ...STATE,
      namespace: ns,
      name: stateName,
    })) as {
      metadata: { ownerReferences?: { uid: string; controller?: boolean; blockOwnerDeletion?: boolean }[] };
      spec: { targetRef: object };
      status: Record<string, unknown>;
    };
    assert.deepEqual(stored.spec.targetRef, { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name });
    assert.deepEqual(
      stored.metadata.ownerReferences?.map((o) => [o.uid, o.controller, o.blockOwnerDeletion]),
      [[job.metadata.uid, true, false]],
    );
    const state = stateOfStatus(stored.status);
    assert.equal(state.lastDecisionId, outcome.decisionId);
    assert.equal(state.askedWorkers, 2);
    assert.equal(state.largestRunWorkers, 2);
    assert.ok(state.lastActionAt !== undefined);
    assert.equal(stored.status.observedWorkers, 2);
    assert.equal(job.metadata.annotations?.[ANNOTATION.state], undefined, 'nothing of it on the job');

    // The tenant: reads (aggregated into `edit`), never writes.
    await waitFor('edit aggregates read access', async () => ((await tenantCan('get')) ? true : undefined));
    assert.equal(await tenantCan('list'), true);
    assert.equal(await tenantCan('update', 'status'), false);
    assert.equal(await tenantCan('patch', 'status'), false);
    assert.equal(await tenantCan('update'), false);
    assert.equal(await tenantCan('delete'), false);
    assert.equal(await tenantCan('create'), false);
    const asTenant = tenant.makeApiClient(CustomObjectsApi);
    const seen = (await asTenant.getNamespacedCustomObject({ ...STATE, namespace: ns, name: stateName })) as {
      metadata: object;
      spec: object;
    };
    const forged = {
      ...seen,
      status: { oomCount: 0, paused: false, lastActionAt: 0, largestRunWorkers: 64 },
    };
    const refused = await asTenant
      .replaceNamespacedCustomObjectStatus({ ...STATE, namespace: ns, name: stateName, body: forged })
      .then(
        () => 200,
        (error: unknown) => (error instanceof ApiException ? error.code : -1),
      );
    assert.equal(refused, 403);

    // A crafted state annotation (the job is the tenant's to edit) changes nothing trainscaler reads.
    await cluster.admin.custom.patchNamespacedCustomObject(
      {
        group: 'kubeflow.org',
        version: 'v1',
        namespace: ns,
        plural: 'pytorchjobs',
        name,
        body: {
          metadata: { annotations: { [ANNOTATION.state]: '{"largestRunWorkers":64,"lastActionAt":0}' } },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const snapshot = await loadSnapshot(sa, ref);
    assert.equal(snapshot.view.state.largestRunWorkers, 2);
    assert.equal(snapshot.view.state.lastActionAt, state.lastActionAt);
    const held = await actOnJob(ref, grow(64), deps);
    assert.equal(held.applied, false);
    assert.match(held.plan.reason, /cool-down/);
    assert.equal(readJob(await sa.getJob(ref)).roles[0]?.replicas, 3);
  });

  it('deleting the job deletes its state (owner reference, garbage collection)', async () => {
    const name = 'stateful';
    const stateName = jobStateName('PyTorchJob', name);
    await cluster.admin.custom.deleteNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      name,
      propagationPolicy: 'Background',
    });
    await waitFor(
      'the ScaledTrainingJob collected',
      async () => {
        const found = await cluster.admin.custom
          .getNamespacedCustomObject({ ...STATE, namespace: ns, name: stateName })
          .then(
            () => true,
            (error: unknown) => !(error instanceof ApiException && error.code === 404),
          );
        return found ? undefined : true;
      },
      90_000,
    );
  });
});
