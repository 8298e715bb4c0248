// `trainscaler run` as its ServiceAccount, end to end on the real control plane: an alert reaches the webhook,
// the alarm handler decides to grow a running PyTorchJob, the patch lands, the decision is stored in the outcome
// ConfigMap of the job's namespace, and `trainscaler explain` shows it. Every request of the runner goes with
// the trainscaler ServiceAccount's token (kubeconfig-sa, bound by infra/k8s/rbac.yaml as applied here), under
// infra/k8s/configmap-names-policy.yaml: what the README walkthrough (run as cluster admin) cannot catch, a
// 403 on the outcome store, fails here. Recorded step times stand in for Prometheus (kwok pods run no trainer).
// Needs TRAINSCALER_KUBECONFIG (npm run test:integration starts the cluster).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { explainJob, renderExplanation } from '../../cli/explain.js';
import { readJobHistory, renderHistory } from '../../cli/history.js';
import { managedJobStatuses } from '../../cli/status.js';
import { buildClusterClient } from '../../functions/runtime-deps.js';
import { KubernetesClusterClient } from '../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { outcomesConfigMapName, outcomesKey, parseJobOutcomes } from '../../lib/decisions/outcome-store.js';
import { type Runner, startRunner } from '../../lib/runner/runner.js';
import type { JobRef } from '../../lib/types.js';
import { alertmanagerWebhook } from '../fixtures/payloads.js';
import { postWebhook, TEST_WEBHOOK_TOKEN } from '../support/webhook-request.js';
import { RecordedMetricsSource, wellScalingSamples } from './support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from './support/test-cluster.js';

const skip = process.env.TRAINSCALER_KUBECONFIG
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (npm run test:integration starts the cluster)';
const OWN = 'trainscaler-system';
const POLICY = 'infra/k8s/configmap-names-policy.yaml';

describe('trainscaler run as its ServiceAccount: alert -> decision -> patch -> outcome -> explain', {
  skip,
}, () => {
  let cluster: TestCluster;
  let ns = '';
  let runner: Runner | undefined;
  const sa = new KubeConfig();
  const warnings: string[] = [];
  const kubectl = (...args: string[]) =>
    execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });

  before(async () => {
    cluster = testCluster();
    sa.loadFromFile(cluster.saKubeconfig);
    // The manifests under test (up.sh applied rbac.yaml when the cluster started, maybe from an older tree).
    kubectl('apply', '-f', 'infra/k8s/rbac.yaml');
    kubectl('apply', '-f', POLICY);
    ns = await createNamespace(cluster, 'it-sa-run');
  });

  after(async () => {
    await runner?.stop();
    if (ns) {
      await cluster.admin.core
        .deleteNamespacedConfigMap({ namespace: OWN, name: outcomesConfigMapName(ns) })
        .catch(() => undefined);
      await deleteNamespace(cluster, ns);
    }
    kubectl('delete', '--ignore-not-found', '-f', POLICY);
  });

  it('the admission policy lets the ServiceAccount write no ConfigMap of trainscaler-system but its own', async () => {
    const core = sa.makeApiClient(CoreV1Api);
    const refusal = await waitFor('the policy to refuse a ConfigMap not trainscaler’s', async () => {
      const error = await core
        .createNamespacedConfigMap({
          namespace: OWN,
          body: { metadata: { name: 'not-trainscalers' } },
          dryRun: 'All',
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      return error && /trainscaler writes no ConfigMap but/.test(String(error)) ? String(error) : undefined;
    });
    assert.match(refusal, /trainscaler-configmap-names/);
    // Its own names pass (server-side dry run: nothing stored).
    await core.createNamespacedConfigMap({
      namespace: OWN,
      body: { metadata: { name: outcomesConfigMapName(ns) } },
      dryRun: 'All',
    });
  });

  it('grows a job on an alert, stores the outcome, and explain shows it', async () => {
    const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'grow' };
    await cluster.admin.custom.createNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: ns,
      plural: 'pytorchjobs',
      body: elasticPyTorchJob({
        name: ref.name,
        namespace: ns,
        workers: 1,
        min: 1,
        max: 3,
        // A known remaining time: the growth rule may add more than one worker at once.
        annotations: { 'trainscaler.io/target-samples': '100000000' },
      }),
    });
    await waitFor('1 worker running', async () => {
      const pods = await workerPods(cluster, ns, ref.name);
      return pods.length === 1 && pods.every((p) => p.status?.phase === 'Running') ? true : undefined;
    });

    const key = RecordedMetricsSource.key(ref);
    const clock = () => Math.floor(Date.now() / 1000);
    const note = (msg: string) => (obj: object, text?: string) => {
      if (msg === 'warn' || msg === 'error') warnings.push(`${text ?? ''} ${JSON.stringify(obj)}`);
    };
    runner = await startRunner({
      kubeConfig: sa,
      deps: {
        cluster: buildClusterClient(sa),
        metrics: new RecordedMetricsSource(
          new Map([[key, wellScalingSamples(clock())]]),
          new Map([[key, 1000]]),
        ),
        clock,
        config: DEFAULT_POLICY_CONFIG,
        dryRun: false,
        logger: { info: note('info'), warn: note('warn'), error: note('error') },
        profiles: { namespace: OWN, configMapName: 'trainscaler-profiles' },
      },
      // As `trainscaler run` wires it (lib/runner/run-command.ts): fenced writes, the outcome store beside the
      // profiles, the default Lease (the only one the ServiceAccount may hold).
      fencedCluster: (fence) => buildClusterClient(sa, fence),
      outcomeStoreNamespace: OWN,
      identity: `it-sa-run-${process.pid}`,
      namespace: OWN,
      host: '127.0.0.1',
      port: 0,
      // No tick during the test, and the job created before the runner is not taken for a new submission.
      schedule: '0 0 1 1 *',
      submitGraceMs: 0,
      webhookToken: async () => TEST_WEBHOOK_TOKEN,
    });
    await waitFor('the runner to lead', async () => (runner?.isLeader() ? true : undefined), 60_000);

    const alert = JSON.stringify(
      alertmanagerWebhook([{ namespace: ns, kind: 'PyTorchJob', name: ref.name }]),
    );
    const answer = await postWebhook(`${runner.url}/alertmanager`, alert);
    assert.equal(answer.status, 200, JSON.stringify(answer.json));

    const saClient = new KubernetesClusterClient(sa);
    const grown = await waitFor('the patch to grow the job', async () => {
      const job = await saClient.getJob(ref);
      const replicas = (job.spec as { pytorchReplicaSpecs?: { Worker?: { replicas?: number } } })
        .pytorchReplicaSpecs?.Worker?.replicas;
      return replicas !== undefined && replicas > 1 ? replicas : undefined;
    });
    assert.equal(grown, 3, 'grown to elasticPolicy.maxReplicas');

    const stored = await waitFor('the outcome stored', async () => {
      const cm = await cluster.admin.core
        .readNamespacedConfigMap({ namespace: OWN, name: outcomesConfigMapName(ns) })
        .catch(() => undefined);
      const outcomes = parseJobOutcomes(cm?.data?.[outcomesKey(ref)]);
      return outcomes.tuning;
    });
    assert.equal(stored.outcome, 'applied');
    assert.equal(stored.trigger, 'alarm');
    assert.deepEqual(
      warnings.filter((w) => /outcomes|forbidden|403/i.test(w)),
      [],
      'no refused write on the way',
    );

    // explain, with the ServiceAccount's credentials too (what it reads: api-access.ts EXPLAIN_ACCESS).
    const explained = await explainJob(saClient, OWN, ref);
    const tuning = explained.find((p) => p.policy === 'tuning');
    assert.equal(tuning?.source, 'outcome-store');
    const text = renderExplanation(ref, explained);
    assert.match(text, /^tuning: applied on alarm, since /m);
    assert.match(text, /^ {2}- Worker replicas 1 -> 3$/m);

    // history, as the ServiceAccount too (HISTORY_ACCESS): trainscaler's Event about the decision, with the
    // changes its ScaledTrainingJob's status keeps; nothing from the job's annotations.
    // The Event is confirmed by the status (the decision it is named after), so it is not marked unconfirmed.
    const history = await waitFor("trainscaler's Event", async () => {
      const records = await readJobHistory(saClient, ref);
      return records.some((r) => r.policy === 'TrainscalerTuning') ? records : undefined;
    });
    assert.deepEqual(
      history.map((r) => [r.source, r.policy]),
      [['job-state', 'TrainscalerTuning']],
    );
    assert.match(renderHistory(ref, history), /^ {2}- Worker replicas 1 -> 3$/m);
    assert.doesNotMatch(renderHistory(ref, history), /\(unconfirmed/);

    // status, from trainscaler's records (the ScaledTrainingJob's status, the outcome store).
    const rows = await managedJobStatuses(saClient, OWN);
    const row = rows.find((r) => r.namespace === ns && r.name === ref.name);
    assert.equal(row?.workers, 3);
    assert.equal(row?.desiredWorkers, 3);
    assert.equal(row?.mode, 'Auto');
    assert.equal(row?.lastAction?.summary, 'Worker 1 -> 3');
  });
});
