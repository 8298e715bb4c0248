// KubernetesClusterClient's lists come in pages (`limit`, then `continue`), against an HTTP server on 127.0.0.1
// that pages as the API server does: typed lists (pods, nodes, Jobs) and custom objects (PyTorchJobs,
// ScaledTrainingJobs, Workloads). A continue answered 410 Gone (the snapshot compacted away) restarts the
// list once; a second 410 is a clear error.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULT_LIST_PAGE_SIZE,
  KubernetesClusterClient,
  listAllPages,
} from '../../../lib/cluster/kubernetes-cluster-client.js';
import { ApiError } from '../../../lib/errors.js';
import { listenAsApiServer } from '../../support/local-api-server.js';

const OBJECTS = 7;
const PAGE = 3;

interface Served {
  path: string;
  limit: string | null;
  continue: string | null;
}

describe('KubernetesClusterClient pages its lists', () => {
  const served: Served[] = [];
  /** Continue tokens to answer 410 Gone, once each. */
  let expire: string[] = [];
  let server: Server;
  let close: () => Promise<void>;
  let client: KubernetesClusterClient;

  before(async () => {
    server = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://127.0.0.1');
      const limit = url.searchParams.get('limit');
      const token = url.searchParams.get('continue');
      served.push({ path: url.pathname, limit, continue: token });
      response.setHeader('content-type', 'application/json');
      if (token !== null && expire.includes(token)) {
        expire.splice(expire.indexOf(token), 1);
        response.statusCode = 410;
        return response.end(
          JSON.stringify({ kind: 'Status', code: 410, reason: 'Expired', message: 'expired' }),
        );
      }
      const from = token === null ? 0 : Number(token);
      const to = Math.min(OBJECTS, from + Number(limit ?? OBJECTS));
      const items = Array.from({ length: to - from }, (_, i) => ({
        metadata: { name: `o${from + i}`, namespace: 'team-a' },
        ...(url.pathname.includes('pods') ? { spec: { containers: [] } } : {}),
      }));
      response.end(
        JSON.stringify({
          kind: 'List',
          apiVersion: 'v1',
          metadata: { resourceVersion: '100', ...(to < OBJECTS ? { continue: String(to) } : {}) },
          items,
        }),
      );
    });
    const listening = await listenAsApiServer(server);
    close = listening.close;
    client = new KubernetesClusterClient(listening.kubeConfig, { listPageSize: PAGE });
  });
  after(() => close());
  beforeEach(() => {
    served.length = 0;
    expire = [];
  });

  const names = (items: readonly { metadata?: { name?: string } }[]) => items.map((i) => i.metadata?.name);
  const all = Array.from({ length: OBJECTS }, (_, i) => `o${i}`);

  const lists: Record<string, (c: KubernetesClusterClient) => Promise<{ metadata?: { name?: string } }[]>> = {
    'pods (typed)': (c) => c.listPods(undefined),
    'pods of a namespace by selector': (c) => c.listPods('team-a', 'a=b'),
    'nodes (typed)': (c) => c.listNodes(),
    'batch Jobs (typed)': (c) => c.listJobs('Job'),
    'PyTorchJobs (custom objects)': (c) => c.listJobs('PyTorchJob'),
    'Workloads cluster-wide (custom objects)': (c) => c.listWorkloads(undefined, ''),
    'ScaledTrainingJobs (custom objects)': async (c) =>
      (await c.listJobStates()).map((s) => ({ metadata: { name: s.name } })),
  };

  for (const [what, list] of Object.entries(lists)) {
    it(`${what}: every object, in pages of the limit asked`, async () => {
      assert.deepEqual(names(await list(client)), all);
      assert.deepEqual(
        served.map((s) => [s.limit, s.continue]),
        [
          [String(PAGE), null],
          [String(PAGE), '3'],
          [String(PAGE), '6'],
        ],
      );
    });
  }

  it('a continue answered 410 Gone restarts the list once, from its first page', async () => {
    expire = ['6'];
    assert.deepEqual(names(await client.listPods(undefined)), all);
    assert.deepEqual(
      served.map((s) => s.continue),
      [null, '3', '6', null, '3', '6'],
    );
  });

  it('a second 410 is an error that says the snapshot expired twice', async () => {
    expire = ['3', '3'];
    await assert.rejects(client.listPods(undefined), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, 410);
      assert.match(
        error.message,
        /list pods failed with HTTP 410: the list's snapshot expired twice while paging/,
      );
      return true;
    });
    assert.equal(served.length, 4);
  });

  it('a 410 on the first page is not a paging problem: no restart', async () => {
    let calls = 0;
    await assert.rejects(
      listAllPages('list pods', PAGE, async () => {
        calls++;
        throw new ApiException(410, 'Gone', { message: 'expired' }, {});
      }),
      (error: unknown) => error instanceof ApiError && error.status === 410 && !/twice/.test(error.message),
    );
    assert.equal(calls, 1);
  });

  it('refuses a page size that is not a whole number of at least 1', () => {
    for (const listPageSize of [0, -1, 1.5, Number.NaN])
      assert.throws(() => new KubernetesClusterClient(new KubeConfig(), { listPageSize }), RangeError);
    assert.equal(DEFAULT_LIST_PAGE_SIZE, 500);
  });
});
