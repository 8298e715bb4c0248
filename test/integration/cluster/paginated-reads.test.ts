// Reads at scale, on the real control plane as the trainscaler ServiceAccount: a list with a small page size
// (limit, continue) returns every object the API server holds, and a schedule tick reads the cluster in the
// same number of requests with 2 jobs and with 5 (one LIST per kind, lib/cluster/listed-cluster-reads.ts),
// besides one GET of each job right before its (dry-run) patch.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import {
  KubernetesClusterClient,
  listAllPages,
  loadKubeConfig,
} from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { type CountSnapshot, countingClusterClient, RequestCounter } from '../../bench/scale-counting.js';
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

const quiet = () => undefined;
const PAGE = 2;

let cluster: TestCluster;
let ns = '';
const samples = new Map<string, ReturnType<typeof wellScalingSamples>>();

async function submit(name: string, workers = 1): Promise<void> {
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    body: elasticPyTorchJob({ name, namespace: ns, workers, min: 1, max: 4, memory: '256Mi', gpus: 0 }),
  });
  samples.set(
    RecordedMetricsSource.key({ namespace: ns, name }),
    wellScalingSamples(Math.floor(Date.now() / 1000)),
  );
  await waitFor(`${name} running`, async () => {
    const pods = (await workerPods(cluster, ns, name)).filter((p) => p.status?.phase === 'Running');
    return pods.length === workers ? pods : undefined;
  });
}

async function tick(): Promise<CountSnapshot> {
  const counter = new RequestCounter();
  const production = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }), {
    listPageSize: PAGE,
  });
  const deps: HandlerDeps = {
    cluster: countingClusterClient(production, () => counter),
    metrics: new RecordedMetricsSource(samples),
    clock: () => Math.floor(Date.now() / 1000),
    config: DEFAULT_POLICY_CONFIG,
    // Decided and sent as server-side dry runs: nothing is written, every read before a write still happens.
    dryRun: true,
    logger: { info: quiet, warn: quiet, error: quiet },
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
  };
  const result = await handleSchedule({}, deps);
  const ours = result.errors.filter((e) => e.ref.namespace === ns);
  assert.deepEqual(ours, []);
  return counter.snapshot();
}

describe('reads on the real API server', () => {
  before(async () => {
    cluster = testCluster();
    ns = await createNamespace(cluster, 'reads');
  });
  after(() => deleteNamespace(cluster, ns));

  it('a list in pages of 2 returns every pod the API server holds', async () => {
    await submit('first', 3);
    await submit('second', 3);
    const client = new KubernetesClusterClient(loadKubeConfig({ kubeconfig: cluster.saKubeconfig }), {
      listPageSize: PAGE,
    });
    const everyPod = await cluster.admin.core.listPodForAllNamespaces();
    const expected = everyPod.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`).sort();
    assert.ok(expected.length >= 6, `several pages of pods (${expected.length})`);
    const paged = await client.listPods(undefined);
    const got = paged.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`).sort();
    // Pods of other tests may come and go meanwhile: every pod listed whole is in the paged list, or gone since.
    for (const name of expected.filter((n) => n.startsWith(`${ns}/`))) assert.ok(got.includes(name), name);
    assert.equal(new Set(got).size, got.length, 'no pod twice');
    // The server did page: the pages, counted, are as many as the limit makes them.
    let pages = 0;
    const { core } = cluster.admin;
    const inNamespace = await listAllPages('list pods', 1, (limit, _continue) => {
      pages++;
      return core.listNamespacedPod({ namespace: ns, limit, _continue });
    });
    assert.equal(inNamespace.length, 6);
    assert.equal(pages, 6);
  });

  it("a schedule tick's reads do not grow with the jobs: the same lists, one GET per job written", async (t) => {
    const two = await tick();
    await submit('third');
    await submit('fourth');
    await submit('fifth');
    const five = await tick();
    for (const [jobs, c] of [[2, two] as const, [5, five] as const])
      t.diagnostic(`${jobs} jobs: ${c.apiReads} reads, ${JSON.stringify(c.apiRequestsByVerbAndResource)}`);
    const count = (c: CountSnapshot, key: string) => c.apiRequestsByVerbAndResource[key] ?? 0;
    const lists = (c: CountSnapshot) =>
      Object.entries(c.apiRequestsByVerbAndResource).filter(([key]) => key.startsWith('list '));
    assert.deepEqual(lists(five), lists(two));
    for (const [, n] of lists(five)) assert.equal(n, 1);
    for (const c of [two, five]) {
      assert.equal(count(c, 'get pytorchjobs'), count(c, 'patch pytorchjobs'), JSON.stringify(c));
      assert.equal(count(c, 'get scaledtrainingjobs'), 0);
      const other = c.apiReads - count(c, 'get pytorchjobs') - lists(c).length;
      // The profile store's ConfigMap, once.
      assert.equal(other, 1, JSON.stringify(c));
    }
  });
});
