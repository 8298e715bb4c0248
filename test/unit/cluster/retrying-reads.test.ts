// Reads under RetryingClusterClient as a hung API server meets them: a real HTTP server on 127.0.0.1 that
// accepts every connection and never answers. Every read attempt must be cancelled when its time is up (its
// connection closed by the client, not left open beside its retry) and must tell the server its limit.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterClient, ReadOptions } from '../../../lib/cluster/cluster-client.js';
import {
  KubernetesClusterClient,
  listTimeoutSeconds,
} from '../../../lib/cluster/kubernetes-cluster-client.js';
import { RetryingClusterClient } from '../../../lib/cluster/retrying-cluster-client.js';
import { ApiError } from '../../../lib/errors.js';

/** An API server that takes every request and answers none; it counts the connections still open. */
class SilentApiServer {
  readonly requests: IncomingMessage[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: Server = createServer((request) => {
    this.requests.push(request);
  });

  constructor() {
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  get openConnections(): number {
    return this.sockets.size;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Waits (bounded) until the client has closed every connection; returns how many are still open. */
  async settled(withinMs: number): Promise<number> {
    const until = Date.now() + withinMs;
    while (this.openConnections > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    return this.openConnections;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function kubeConfigFor(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'silent', server, skipTLSVerify: true }],
    users: [{ name: 'reader', token: 'not-a-secret' }],
    contexts: [{ name: 'silent', cluster: 'silent', user: 'reader' }],
    currentContext: 'silent',
  });
  return kc;
}

const ATTEMPTS = 3;
const ATTEMPT_MS = 100;

describe('reads against an API server that never answers', () => {
  const api = new SilentApiServer();
  let client: RetryingClusterClient;
  before(async () => {
    const inner = new KubernetesClusterClient(kubeConfigFor(await api.listen()));
    client = new RetryingClusterClient(inner, {
      maxAttempts: ATTEMPTS,
      baseDelayMs: 1,
      maxDelayMs: 2,
      attemptTimeoutMs: ATTEMPT_MS,
      random: () => 0.5,
    });
  });
  after(() => api.close());

  it('listPods gives up after its attempts with every connection closed by the client', async () => {
    const sent = api.requests.length;
    const started = Date.now();
    await assert.rejects(client.listPods('team-a', 'app=x'), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, undefined);
      assert.match(error.message, /no answer within 100 ms/);
      return true;
    });
    assert.ok(Date.now() - started < 5_000, 'bounded by the retry budget');
    // At most one request per attempt (on a loaded machine an attempt may time out before its request is out).
    const requests = api.requests.length - sent;
    assert.ok(requests >= 1 && requests <= ATTEMPTS, `${requests} requests`);
    assert.equal(await api.settled(2_000), 0, 'no attempt left running beside its retry');
  });

  it('each list attempt tells the server its limit (timeoutSeconds, and timeout)', async () => {
    const sent = api.requests.length;
    await assert.rejects(client.listNodes(), ApiError);
    const urls = api.requests.slice(sent).map((r) => new URL(r.url ?? '', 'http://x'));
    assert.ok(urls.length >= 1);
    for (const url of urls) {
      assert.equal(url.pathname, '/api/v1/nodes');
      assert.equal(url.searchParams.get('timeoutSeconds'), '1');
      assert.equal(url.searchParams.get('timeout'), `${ATTEMPT_MS}ms`);
    }
    assert.equal(await api.settled(2_000), 0);
  });

  it('a get is cancelled the same way (job, ConfigMap, discovery)', async () => {
    await assert.rejects(client.getJob({ kind: 'PyTorchJob', namespace: 'team-a', name: 'j' }), ApiError);
    await assert.rejects(client.servesPodResize(), ApiError);
    await assert.rejects(client.getConfigMap('team-a', 'cm'), ApiError);
    const gets = api.requests.slice(-1).map((r) => new URL(r.url ?? '', 'http://x'));
    for (const url of gets) assert.equal(url.searchParams.get('timeout'), `${ATTEMPT_MS}ms`);
    assert.equal(await api.settled(2_000), 0);
  });
});

/** A client that records the options each read was given, failing transiently until `failures` run out. */
function recordingReads(failures: number) {
  const seen: { method: string; options: ReadOptions | undefined }[] = [];
  let left = failures;
  const read =
    <T>(method: string, value: T) =>
    async (...args: unknown[]): Promise<T> => {
      seen.push({ method, options: args.at(-1) as ReadOptions | undefined });
      if (left-- > 0) throw new ApiError(method, 503, 'busy');
      return value;
    };
  const never = () => Promise.reject(new Error('not a read'));
  const client: ClusterClient = {
    getJob: read('getJob', { apiVersion: 'v1', kind: 'Job', metadata: { name: 'j' } }),
    listJobs: read('listJobs', []),
    listPods: read('listPods', []),
    listNodes: read('listNodes', []),
    listWorkloads: read('listWorkloads', []),
    getLocalQueue: read('getLocalQueue', { apiVersion: 'v1', kind: 'LocalQueue', metadata: { name: 'q' } }),
    getClusterQueue: read('getClusterQueue', {
      apiVersion: 'v1',
      kind: 'ClusterQueue',
      metadata: { name: 'c' },
    }),
    getConfigMap: read('getConfigMap', undefined),
    servesPodResize: read('servesPodResize', true),
    getJobState: read('getJobState', undefined),
    listJobStates: read('listJobStates', []),
    putJobState: never,
    patchJob: never,
    evictPod: never,
    createEvent: never,
    putConfigMap: never,
  };
  return { client, seen };
}

describe('every read attempt gets its own signal and time limit', () => {
  const options = { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, attemptTimeoutMs: 4_000, random: () => 0 };

  it('passes a fresh, unaborted signal and the attempt limit to every read method, attempt by attempt', async () => {
    const { client, seen } = recordingReads(1);
    const retrying = new RetryingClusterClient(client, options);
    await retrying.getJob({ kind: 'Job', namespace: 'n', name: 'j' });
    assert.equal(seen.length, 2, 'the 503 was retried');
    const [first, second] = seen.map((s) => s.options);
    assert.ok(first?.signal && second?.signal && first.signal !== second.signal);
    assert.equal(first.signal.aborted, false);
    assert.equal(first.timeoutMs, 4_000);
    assert.equal(second.timeoutMs, 4_000);
    const all = recordingReads(0);
    const each = new RetryingClusterClient(all.client, options);
    await each.listJobs('Job', 'n');
    await each.listPods('n', 'a=b');
    await each.listNodes();
    await each.listWorkloads('n', 'a=b');
    await each.getLocalQueue('n', 'q');
    await each.getClusterQueue('c');
    await each.getConfigMap('n', 'cm');
    assert.equal(await each.servesPodResize(), true);
    assert.deepEqual(
      all.seen.map((s) => [s.method, s.options?.signal instanceof AbortSignal, s.options?.timeoutMs]),
      [
        ['listJobs', true, 4_000],
        ['listPods', true, 4_000],
        ['listNodes', true, 4_000],
        ['listWorkloads', true, 4_000],
        ['getLocalQueue', true, 4_000],
        ['getClusterQueue', true, 4_000],
        ['getConfigMap', true, 4_000],
        ['servesPodResize', true, 4_000],
      ],
    );
  });

  it('aborts the attempt it gave up on, with the time-out as the reason', async () => {
    let signal: AbortSignal | undefined;
    const hung: ClusterClient = {
      ...recordingReads(0).client,
      listPods: (_ns, _sel, o) => {
        signal = o?.signal;
        return new Promise(() => {});
      },
    };
    const retrying = new RetryingClusterClient(hung, { ...options, maxAttempts: 1, attemptTimeoutMs: 20 });
    await assert.rejects(retrying.listPods(undefined), /list pods failed: no answer within 20 ms/);
    assert.equal(signal?.aborted, true);
    assert.match(String(signal?.reason), /no answer within 20 ms/);
  });

  it('a list time limit is whole seconds, at least one; none when the read has none', () => {
    assert.equal(listTimeoutSeconds({ timeoutMs: 150 }), 1);
    assert.equal(listTimeoutSeconds({ timeoutMs: 1_000 }), 1);
    assert.equal(listTimeoutSeconds({ timeoutMs: 1_001 }), 2);
    assert.equal(listTimeoutSeconds({ timeoutMs: 10_000 }), 10);
    assert.equal(listTimeoutSeconds({}), undefined);
    assert.equal(listTimeoutSeconds(), undefined);
  });
});
