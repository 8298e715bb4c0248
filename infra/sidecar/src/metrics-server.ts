// GET /metrics for Prometheus and GET /healthz for the kubelet; the only port reachable from outside the pod.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import type { DrainCoordinator } from './drain.js';
import { sendJson } from './http-util.js';

export function createMetricsServer(registry: Registry, drain: DrainCoordinator): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendJson(res, 405, { error: 'only GET' });
    } else if (path === '/metrics') {
      registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        })
        .catch((error: unknown) => sendJson(res, 500, { error: String(error) }));
    } else if (path === '/healthz') {
      sendJson(res, 200, { status: 'ok', draining: drain.draining });
    } else {
      sendJson(res, 404, { error: `no route ${path}` });
    }
  });
}
