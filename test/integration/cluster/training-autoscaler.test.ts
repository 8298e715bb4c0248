// The tenants' policy object on the real control plane: the TrainingAutoscaler CRD (applied here from this
// tree, as up.sh does), a tenant (a ServiceAccount bound to the built-in `edit` role in its namespace) creating
// the example policies, the API server's defaults and CEL rules refusing what makes no sense with the CRD's
// messages, the status written by trainscaler's ServiceAccount and refused to the tenant (SelfSubjectAccessReview
// and an attempted write), and `kubectl get tsa` showing the printer columns.
// Needs TRAINSCALER_KUBECONFIG (bash infra/cluster/with-cluster.sh ... starts the cluster).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiException, AuthorizationV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { KubernetesClusterClient, loadKubeConfig } from '../../../lib/cluster/kubernetes-cluster-client.js';
import {
  parseTrainingAutoscalers,
  TRAINING_AUTOSCALER_API_VERSION,
  TRAINING_AUTOSCALER_RESOURCE,
} from '../../../lib/training-autoscaler.js';
import { tenantKubeConfig } from '../support/tenant.js';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../support/test-cluster.js';

const skip = process.env.TRAINSCALER_KUBECONFIG
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (bash infra/cluster/with-cluster.sh starts the cluster)';
const CRD = 'infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml';
const RBAC = 'infra/k8s/trainingautoscalers-rbac.yaml';
const EXAMPLE = 'infra/examples/training-autoscaler.yaml';
const POLICIES = {
  group: TRAINING_AUTOSCALER_RESOURCE.group,
  version: TRAINING_AUTOSCALER_RESOURCE.version,
  plural: TRAINING_AUTOSCALER_RESOURCE.plural,
};

let cluster: TestCluster;
let ns = '';
let tenant: KubeConfig;
let tenantKubeconfigFile = '';

const kubectl = (kubeconfig: string, ...args: string[]) =>
  execFileSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', timeout: 60_000 });

/** `kubectl auth can-i <verb> trainingautoscalers[/<subresource>]` as the tenant. */
async function tenantCan(verb: string, subresource = ''): Promise<boolean> {
  const review = await tenant.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: { ...POLICIES, resource: POLICIES.plural, subresource, verb, namespace: ns },
      },
    },
  });
  return review.status?.allowed === true;
}

/** kubectl's table cut at its header's column starts (an empty cell prints as blanks, so no split on spaces). */
function tableOf(text: string): { header: string[]; rows: string[][] } {
  const [head = '', ...lines] = text.trimEnd().split('\n');
  const starts = [...head.matchAll(/\S+/g)].map((m) => m.index);
  const cut = (line: string) => starts.map((start, i) => line.slice(start, starts[i + 1]).trim());
  return { header: cut(head), rows: lines.map(cut) };
}

function policy(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: TRAINING_AUTOSCALER_API_VERSION,
    kind: 'TrainingAutoscaler',
    metadata: { name },
    spec,
  };
}

/** The API server's answer to the tenant creating `body`: its HTTP code and message (201 when created). */
async function tenantCreates(body: object): Promise<{ code: number; message: string }> {
  try {
    await tenant
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({ ...POLICIES, namespace: ns, body });
    return { code: 201, message: '' };
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    const parsed = JSON.parse(String(error.body)) as { message?: string };
    return { code: error.code, message: parsed.message ?? String(error.body) };
  }
}

describe('TrainingAutoscaler on the real control plane', { skip }, () => {
  before(async () => {
    cluster = testCluster();
    // The manifests under test (up.sh applied them when the cluster started, maybe from an older tree).
    kubectl(cluster.adminKubeconfig, 'apply', '--server-side', '--force-conflicts', '-f', CRD);
    kubectl(cluster.adminKubeconfig, 'apply', '-f', RBAC);
    kubectl(
      cluster.adminKubeconfig,
      'wait',
      '--for',
      'condition=established',
      '--timeout',
      '60s',
      'crd/trainingautoscalers.trainscaler.io',
    );
    ns = await createNamespace(cluster, 'it-tsa');
    tenant = await tenantKubeConfig(cluster, ns);
    tenantKubeconfigFile = join(mkdtempSync(join(tmpdir(), 'it-tsa-')), 'kubeconfig');
    writeFileSync(tenantKubeconfigFile, tenant.exportConfig(), { mode: 0o600 });
    // The edit role's aggregation (the controller-manager's clusterrole-aggregation controller) takes a moment.
    await waitFor('the edit role to grant TrainingAutoscalers', async () =>
      (await tenantCan('create')) ? true : undefined,
    );
  });

  after(async () => {
    if (ns) await deleteNamespace(cluster, ns);
    if (tenantKubeconfigFile) rmSync(join(tenantKubeconfigFile, '..'), { recursive: true, force: true });
  });

  it('a tenant with the edit role creates the example policies; the API server fills in the defaults', async () => {
    const out = kubectl(tenantKubeconfigFile, 'apply', '-n', ns, '-f', EXAMPLE);
    assert.match(out, /trainingautoscaler\.trainscaler\.io\/bert-pretrain created/);
    assert.match(out, /trainingautoscaler\.trainscaler\.io\/llama-finetune created/);
    // trainscaler's ServiceAccount lists them (its grant: list) and the parser accepts what the server stored.
    const sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
    const listed = await sa.listTrainingAutoscalers?.(ns);
    const { policies, invalid } = parseTrainingAutoscalers(listed ?? []);
    assert.deepEqual(invalid, []);
    const bert = policies.find((p) => p.name === 'bert-pretrain');
    assert.deepEqual(bert?.actions, {
      resize: true,
      rightsize: true,
      replaceStragglers: true,
      yieldForRebalance: true,
      tuneRendezvous: false,
    });
    const llama = policies.find((p) => p.name === 'llama-finetune');
    assert.equal(llama?.actions.rightsize, false, 'the fields set are kept');
    assert.equal(llama?.actions.resize, true, 'the unset ones defaulted');
    // A policy that sets nothing but its target gets the documented defaults from the API server itself.
    assert.equal(
      (await tenantCreates(policy('bare', { targetRef: { kind: 'TFJob', name: 'x' } }))).code,
      201,
    );
    const bare = (await cluster.admin.custom.getNamespacedCustomObject({
      ...POLICIES,
      namespace: ns,
      name: 'bare',
    })) as {
      spec: Record<string, unknown>;
    };
    assert.equal(bare.spec.mode, 'Recommend');
    assert.equal(bare.spec.minWorkers, 1);
    assert.equal(bare.spec.maxStep, undefined, "unset: the operator's TRAINSCALER_MAX_REPLICA_STEP");
    assert.equal(bare.spec.cooldownSeconds, undefined, "unset: the operator's TRAINSCALER_COOLDOWN_SECONDS");
  });

  it('CEL refuses what makes no sense, each with its message', async () => {
    const target = { kind: 'PyTorchJob', name: 'bert' };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'min-over-max',
        { targetRef: target, minWorkers: 5, maxWorkers: 2 },
        /minWorkers is greater than maxWorkers; no worker count satisfies both/,
      ],
      [
        'step-zero',
        { targetRef: target, maxStep: 0 },
        /maxStep must be at least 1 worker: a step of 0 allows no change at all/,
      ],
      [
        'unknown-kind',
        { targetRef: { kind: 'Deployment', name: 'web' } },
        /trainscaler does not support kind Deployment: targetRef.kind must be one of PyTorchJob, TFJob, StatefulSet, Job, JobSet, TrainJob/,
      ],
      [
        'wrong-api-version',
        { targetRef: { ...target, apiVersion: 'kubeflow.org/v2' } },
        /targetRef.apiVersion kubeflow.org\/v2 is not the one trainscaler reads PyTorchJob at \(kubeflow.org\/v1\)/,
      ],
      [
        'both',
        { targetRef: target, selector: { matchLabels: { app: 'bert' } } },
        /set targetRef \(one job\) or selector \(every supported job of the namespace whose labels match\), not both/,
      ],
      [
        'neither',
        { minWorkers: 1 },
        /set targetRef \(one job by kind and name\) or selector .*: the policy applies to no job without one/,
      ],
      [
        'in-without-values',
        { selector: { matchExpressions: [{ key: 'app', operator: 'In' }] } },
        /operators In and NotIn need values; Exists and DoesNotExist take none/,
      ],
      [
        'bad-mode',
        { targetRef: target, mode: 'Yolo' },
        /Unsupported value: "Yolo": supported values: "Off", "Recommend", "Auto"/,
      ],
    ];
    const wrong: string[] = [];
    for (const [name, spec, message] of cases) {
      const answer = await tenantCreates(policy(name, spec));
      if (answer.code !== 422 || !message.test(answer.message))
        wrong.push(`${name}: ${answer.code} ${answer.message}`);
    }
    assert.deepEqual(wrong, []);
    const left = (await cluster.admin.custom.listNamespacedCustomObject({ ...POLICIES, namespace: ns })) as {
      items: { metadata: { name: string } }[];
    };
    assert.deepEqual(left.items.map((i) => i.metadata.name).sort(), [
      'bare',
      'bert-pretrain',
      'llama-finetune',
    ]);
  });

  it('the tenant may create Events (the edit role): `history` marks what only an Event says', async () => {
    const can = async (verb: string) => {
      const review = await tenant.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: { group: '', resource: 'events', verb, namespace: ns } } },
      });
      return review.status?.allowed === true;
    };
    // So an Event that looks like trainscaler's proves nothing (cli/history.ts UNCONFIRMED_MARK); the status does.
    assert.equal(await can('create'), true, 'kubectl auth can-i create events');
    assert.equal(await can('list'), true);
  });

  it('the status is trainscaler’s: its ServiceAccount writes it, the tenant reads it and is refused a write', async () => {
    assert.equal(await tenantCan('create'), true);
    assert.equal(await tenantCan('patch'), true);
    assert.equal(await tenantCan('delete'), true);
    assert.equal(
      await tenantCan('update', 'status'),
      false,
      'kubectl auth can-i update trainingautoscalers --subresource=status',
    );
    assert.equal(await tenantCan('patch', 'status'), false);

    const sa = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }));
    const [current] = ((await sa.listTrainingAutoscalers?.(ns)) ?? []).filter(
      (p) => p.metadata.name === 'bert-pretrain',
    );
    assert.ok(current);
    const status = {
      observedGeneration: current.metadata.generation ?? 1,
      matchedJobs: 3,
      conditions: [
        {
          type: 'Valid',
          status: 'True',
          reason: 'Parsed',
          message: 'the policy holds together',
          lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        },
      ],
    };
    await sa.putTrainingAutoscalerStatus?.(current, status, { dryRun: false });

    const tenantApi = tenant.makeApiClient(CustomObjectsApi);
    const read = (await tenantApi.getNamespacedCustomObject({
      ...POLICIES,
      namespace: ns,
      name: 'bert-pretrain',
    })) as {
      metadata: { resourceVersion: string };
      spec: object;
      status: { matchedJobs?: number };
    };
    assert.equal(read.status.matchedJobs, 3, 'the tenant reads the status');
    const refused = await tenantApi
      .replaceNamespacedCustomObjectStatus({
        ...POLICIES,
        namespace: ns,
        name: 'bert-pretrain',
        body: {
          ...read,
          apiVersion: TRAINING_AUTOSCALER_API_VERSION,
          kind: 'TrainingAutoscaler',
          status: { matchedJobs: 99 },
        },
      })
      .then(
        () => 0,
        (e: unknown) => (e instanceof ApiException ? e.code : -1),
      );
    assert.equal(refused, 403);
    // A write of the whole object by the tenant (its edit right) leaves the status as trainscaler wrote it.
    await tenantApi.replaceNamespacedCustomObject({
      ...POLICIES,
      namespace: ns,
      name: 'bert-pretrain',
      body: {
        ...read,
        apiVersion: TRAINING_AUTOSCALER_API_VERSION,
        kind: 'TrainingAutoscaler',
        status: { matchedJobs: 99 },
      },
    });
    const afterWrite = (await tenantApi.getNamespacedCustomObject({
      ...POLICIES,
      namespace: ns,
      name: 'bert-pretrain',
    })) as {
      status: { matchedJobs?: number };
    };
    assert.equal(afterWrite.status.matchedJobs, 3);
  });

  it('kubectl get tsa shows target, selector, min, max, mode and jobs; -o wide the kind, step and cool-down', () => {
    const table = tableOf(kubectl(tenantKubeconfigFile, 'get', 'tsa', '-n', ns));
    assert.deepEqual(table.header, ['NAME', 'TARGET', 'SELECTOR', 'MIN', 'MAX', 'MODE', 'JOBS', 'AGE']);
    const row = (name: string) => table.rows.find((r) => r[0] === name)?.slice(0, -1);
    assert.deepEqual(row('bert-pretrain'), [
      'bert-pretrain',
      '',
      '{"app":"bert-pretrain"}',
      '2',
      '16',
      'Recommend',
      '3',
    ]);
    assert.deepEqual(row('llama-finetune'), ['llama-finetune', 'llama-finetune', '', '1', '8', 'Auto', '']);
    const wide = tableOf(kubectl(tenantKubeconfigFile, 'get', 'trainingautoscalers', '-n', ns, '-o', 'wide'));
    assert.deepEqual(wide.header, [
      'NAME',
      'TARGET',
      'SELECTOR',
      'MIN',
      'MAX',
      'MODE',
      'JOBS',
      'KIND',
      'STEP',
      'COOLDOWN',
      'AGE',
    ]);
    assert.deepEqual(wide.rows.find((r) => r[0] === 'bert-pretrain')?.slice(7, 10), ['', '4', '300']);
    assert.deepEqual(wide.rows.find((r) => r[0] === 'llama-finetune')?.slice(7, 10), ['PyTorchJob', '', '']);
  });
});
