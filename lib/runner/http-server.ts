// The runner's one port: /healthz for the kubelet, /metrics for Prometheus, POST /alertmanager for
// Alertmanager's webhook (served by functions/alertmanager-http.ts, the same route the other runtimes use).
// Only the leader handles alerts; a follower answers 503 and closes the connection, so Alertmanager's retry
// opens a new one, which the Service may route to the leader.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ALERTMANAGER_PATH, alertmanagerRequestListener } from '../../functions/alertmanager-http.js';
import type { HandlerDeps } from '../../functions/handler-deps.js';
import type { RunnerMetrics } from './metrics.js';

export interface RunnerHttpOptions {
  host: string;
  port: number;
  metrics: RunnerMetrics;
  isLeader: () => boolean;
  deps: HandlerDeps;
  /** Registers work that shutdown must wait for. */
  track: (work: Promise<unknown>) => void;
}

export interface RunnerHttpServer {
  server: Server;
  /** http://host:port */
  url: string;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
  res.end(body);
}

export async function startHttpServer(options: RunnerHttpOptions): Promise<RunnerHttpServer> {
  const { metrics } = options;
  const alertmanager = alertmanagerRequestListener({
    deps: options.deps,
    onResult: (_payload, result) => metrics.recordOutcomes('alarm', result),
  });

  const onAlertmanager = (req: IncomingMessage, res: ServerResponse) => {
    if (!options.isLeader()) {
      req.resume();
      return send(res, 503, 'not the leader\n', { connection: 'close', 'retry-after': '5' });
    }
    const started = performance.now();
    const finished = new Promise<void>((resolve) => {
      res.on('close', () => {
        const seconds = (performance.now() - started) / 1000;
        metrics.handlerDuration.observe({ trigger: 'alarm' }, seconds);
        // The route answers 400 for bad input, 413 for an oversized body and 500 for a failed handler.
        if (res.statusCode === 400) metrics.handlerErrors.inc({ trigger: 'alarm', code: 'VALIDATION' });
        else if (res.statusCode !== 200)
          metrics.handlerErrors.inc({ trigger: 'alarm', code: `HTTP_${res.statusCode}` });
        resolve();
      });
    });
    options.track(finished);
    alertmanager(req, res);
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === ALERTMANAGER_PATH) return onAlertmanager(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return send(res, 405, 'method not allowed\n', { allow: 'GET' });
    if (path === '/healthz') {
      // Liveness of the process, leader or not: a follower is healthy and must not be restarted.
      return send(res, 200, `ok ${options.isLeader() ? 'leader' : 'follower'}\n`);
    }
    if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => send(res, 200, text, { 'content-type': metrics.registry.contentType }),
        (error: unknown) => send(res, 500, `${String(error)}\n`),
      );
      return;
    }
    send(res, 404, 'not found\n');
  });
  // Bounded request lifetimes: a slow client must not hold a handler slot or block shutdown forever.
  server.requestTimeout = 60_000;
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    server,
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
