// The runner's tick reads jobs and pods from its informers' caches (lib/runner/informer-reads.ts): no request
// at the tick. Against a local HTTP server that pages its lists as the API server does: the informers list page
// by page (limit, continue), a kind not served is an empty cache, and a kind not watched (nodes) or not yet
// listed is listed from the API server.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { describe, it } from 'node:test';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import { ListedClusterReads } from '../../../lib/cluster/listed-cluster-reads.js';
import { informerReadSource } from '../../../lib/runner/informer-reads.js';
import { INFORMER_PAGE_SIZE, startInformers } from '../../../lib/runner/informers.js';
import { listenAsApiServer } from '../../support/local-api-server.js';

const PODS = INFORMER_PAGE_SIZE * 2 + 1;

async function apiServer() {
  const requests: string[] = [];
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const plural = url.pathname.split('/').at(-1) ?? '';
    response.setHeader('content-type', 'application/json');
    if (url.searchParams.get('watch') === 'true') return response.write('');
    requests.push(
      `${plural} limit=${url.searchParams.get('limit')} continue=${url.searchParams.get('continue')}`,
    );
    if (plural === 'jobsets' || plural === 'trainjobs') {
      response.statusCode = 404;
      return response.end(JSON.stringify({ kind: 'Status', code: 404, message: 'not found' }));
    }
    const total = plural === 'pods' ? PODS : plural === 'pytorchjobs' ? 2 : 0;
    const from = Number(url.searchParams.get('continue') ?? 0);
    const to = Math.min(total, from + Number(url.searchParams.get('limit') ?? total));
    const items = Array.from({ length: to - from }, (_, i) => ({
      metadata: {
        name: `${plural}-${from + i}`,
        namespace: 'team-a',
        resourceVersion: '1',
        labels: { 'training.kubeflow.org/job-name': `pytorchjobs-${(from + i) % 2}` },
      },
    }));
    return response.end(
      JSON.stringify({
        metadata: { resourceVersion: '1', ...(to < total ? { continue: String(to) } : {}) },
        items,
      }),
    );
  });
  const { kubeConfig, close } = await listenAsApiServer(server);
  return {
    kubeConfig,
    requests,
    close,
  };
}

describe('the runner reads a tick from its informers', () => {
  it('lists pods in pages once, then answers jobs and pods from the caches; nodes from the API server', async () => {
    const api = await apiServer();
    const quiet = { info: () => {}, warn: () => {}, error: () => {} };
    const informers = startInformers(api.kubeConfig, {
      onEvent: () => {},
      logger: quiet,
      minRestartDelayMs: 5,
      maxRestartDelayMs: 20,
      maxAbsentRecheckMs: 60_000,
    });
    try {
      assert.equal(informers.list('Pod'), undefined, 'not listed yet: the tick lists it itself');
      await informers.synced;
      assert.deepEqual(
        api.requests.filter((r) => r.startsWith('pods')),
        [
          `pods limit=${INFORMER_PAGE_SIZE} continue=null`,
          `pods limit=${INFORMER_PAGE_SIZE} continue=${INFORMER_PAGE_SIZE}`,
          `pods limit=${INFORMER_PAGE_SIZE} continue=${2 * INFORMER_PAGE_SIZE}`,
        ],
      );
      assert.equal(informers.list('Pod')?.length, PODS);
      assert.deepEqual(informers.list('JobSet'), [], 'a kind not served is empty');
      assert.equal(informers.list('Node'), undefined, 'nodes are not watched');

      const asked: string[] = [];
      const live = {
        listNodes: async () => {
          asked.push('listNodes');
          return [{ metadata: { name: 'n' } }];
        },
      } as unknown as ClusterClient;
      const view = new ListedClusterReads(live, informerReadSource(informers, live));
      const before = api.requests.length;
      const job = await view.getJob({ kind: 'PyTorchJob', namespace: 'team-a', name: 'pytorchjobs-1' });
      assert.equal(job.kind, 'PyTorchJob');
      assert.equal(job.apiVersion, 'kubeflow.org/v1');
      const pods = await view.listPods('team-a', 'training.kubeflow.org/job-name=pytorchjobs-1');
      assert.equal(pods.length, (PODS - 1) / 2);
      assert.deepEqual(await view.listJobs('TrainJob'), []);
      assert.equal((await view.listNodes()).length, 1);
      assert.equal(api.requests.length, before, 'no request for what the caches hold');
      assert.deepEqual(asked, ['listNodes']);
    } finally {
      await informers.stop();
      await api.close();
    }
  });
});
