// `trainscaler run` warns at start-up when Prometheus or the API server does not answer (the reachable case
// runs against the real ones in test/integration/readme-walkthrough.test.ts).
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { checkApiServer, runStartupChecks } from '../../../lib/runner/startup-checks.js';

function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

describe('start-up checks', () => {
  it('warns, naming the target and the error, when neither Prometheus nor the API server answers', async () => {
    const [promPort, apiPort] = [await closedPort(), await closedPort()];
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${apiPort}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const lines: string[] = [];
    const at = (level: string) => (obj: object, msg?: string) =>
      lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
    const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const result = await runStartupChecks(
      { prometheusUrl: `http://127.0.0.1:${promPort}`, kubeConfig },
      logger,
    );
    assert.equal(result.prometheus.ok, false);
    assert.equal(result.apiServer.ok, false);
    assert.equal(lines.length, 2);
    assert.match(
      lines.find((l) => l.includes('prometheus')) ?? '',
      /^warn prometheus unreachable: .*ECONNREFUSED/,
    );
    assert.match(
      lines.find((l) => l.includes('API server')) ?? '',
      new RegExp(`^warn API server unreachable: .*127\\.0\\.0\\.1:${apiPort}`),
    );
  });

  it('logs no credential of PROMETHEUS_URL, reachable or not', async () => {
    const secret = 'pr0m-s3cret';
    const lines: string[] = [];
    const at = (level: string) => (obj: object, msg?: string) =>
      lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
    const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const kubeConfig = new KubeConfig();
    const apiPort = await closedPort();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: `https://k8s:${secret}@127.0.0.1:${apiPort}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const authorizations: (string | undefined)[] = [];
    const prometheus = createHttpServer((req, res) => {
      authorizations.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [] } }));
    });
    await new Promise<void>((resolve) => prometheus.listen(0, '127.0.0.1', resolve));
    const port = (prometheus.address() as AddressInfo).port;
    try {
      const up = await runStartupChecks(
        { prometheusUrl: `http://admin:${secret}@127.0.0.1:${port}/?token=${secret}`, kubeConfig },
        logger,
      );
      assert.equal(up.prometheus.ok, true, 'the credentials are still used');
      assert.ok(
        authorizations.every((a) => a === `Basic ${Buffer.from(`admin:${secret}`).toString('base64')}`),
      );
      const down = await runStartupChecks(
        { prometheusUrl: `http://admin:${secret}@127.0.0.1:${await closedPort()}`, kubeConfig },
        logger,
      );
      assert.equal(down.prometheus.ok, false);
    } finally {
      prometheus.closeAllConnections();
      await new Promise((resolve) => prometheus.close(resolve));
    }
    assert.equal(lines.length, 4);
    assert.match(lines[0] ?? '', /prometheus reachable .*http:\/\/\*\*\*@127\.0\.0\.1:\d+\/\?token=\*\*\*/);
    for (const line of lines) assert.ok(!line.includes(secret), `a credential is logged: ${line}`);
  });

  it('gives up on an API server that does not answer, and closes the connection', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const silent = createHttpServer(() => undefined);
    silent.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [
        {
          name: 'c',
          server: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    try {
      const started = Date.now();
      const result = await checkApiServer(kubeConfig, 200);
      assert.deepEqual(result, { ok: false, detail: 'no answer in 0.2 s' });
      assert.ok(Date.now() - started < 2_000);
      const until = Date.now() + 2_000;
      while (sockets.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
      assert.equal(sockets.size, 0, 'the request was cancelled');
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
