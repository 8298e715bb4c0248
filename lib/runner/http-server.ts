// The runner's one port: /healthz for the kubelet, /metrics for Prometheus, POST /alertmanager for
// Alertmanager's webhook (served by functions/alertmanager-http.ts, the same route the other runtimes use).
// The webhook needs the bearer token; only the leader handles alerts. The Service routes to the leader's pod
// only (it carries the trainscaler.io/leader label); a follower reached anyway (during a hand-over) answers
// 503 and closes the connection, so Alertmanager's retry opens a new one.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ALERTMANAGER_PATH, alertmanagerRequestListener } from '../../functions/alertmanager-http.js';
import type { HandlerDeps } from '../../functions/handler-deps.js';
import type { TokenSource } from '../../functions/webhook-auth.js';
import type { RunnerMetrics } from './metrics.js';

export interface RunnerHttpOptions {
  host: string;
  port: number;
  metrics: RunnerMetrics;
  isLeader: () => boolean;
  deps: HandlerDeps;
  /** The webhook's bearer token (undefined: none configured, every webhook request gets 401). */
  webhookToken: TokenSource;
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
    token: options.webhookToken,
    logger: options.deps.logger,
    available: options.isLeader,
    onResult: (_payload, result) => metrics.recordOutcomes('alarm', result),
    onUnauthorized: (reason) => metrics.webhookUnauthorized.inc({ reason }),
    onAnswer: ({ status, handled, seconds }) => {
      metrics.webhookResponses.inc({ status: String(status) });
      // Only a request that reached the handler is a handler invocation: a wrong method, a missing
      // credential, a follower's 503 or a 429 are answered before it and are no handler error.
      if (!handled) return;
      metrics.handlerDuration.observe({ trigger: 'alarm' }, seconds);
      if (status === 400 || status === 413)
        metrics.handlerErrors.inc({ trigger: 'alarm', code: 'VALIDATION' });
      else if (status >= 500) metrics.handlerErrors.inc({ trigger: 'alarm', code: `HTTP_${status}` });
    },
  });

  const onAlertmanager = (req: IncomingMessage, res: ServerResponse) => {
    options.track(new Promise<void>((resolve) => res.on('close', () => resolve())));
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
