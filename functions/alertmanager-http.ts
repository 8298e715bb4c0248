// Alertmanager's webhook over plain node:http: POST /alertmanager -> handleAlarm. For running the alarm
// function outside Lambda (in the cluster, in the metrics integration test). Answers: 200 with the handler's
// result, 400 with the offending field for bad input (Alertmanager does not retry a 4xx), 5xx for failures
// it should retry.
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { ValidationError } from '../lib/errors.js';
import { handleAlarm } from './alarm.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';

export const ALERTMANAGER_PATH = '/alertmanager';

/** Alertmanager caps a notification with max_alerts; 1,000 alerts of labels stay well under this. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface AlertmanagerHttpOptions {
  /** Built once and reused, or per request (e.g. lazily on the first one). */
  deps: HandlerDeps | (() => Promise<HandlerDeps>);
  /** Sees each valid payload and what the handler made of it (tests, audit logs). */
  onResult?: (payload: unknown, result: HandlerResult) => void;
}

class PayloadTooLargeError extends Error {}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        chunks.length = 0;
        reject(new PayloadTooLargeError(`request body over ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ValidationError('', 'request body is not JSON');
  }
}

export function alertmanagerRequestListener(options: AlertmanagerHttpOptions): RequestListener {
  const deps =
    typeof options.deps === 'function' ? options.deps : () => Promise.resolve(options.deps as HandlerDeps);
  return (req, res) => {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(text);
    };
    const path = (req.url ?? '/').split('?')[0];
    if (path !== ALERTMANAGER_PATH) return send(404, { error: `no route ${path}` });
    if (req.method !== 'POST') return send(405, { error: 'use POST' }, { allow: 'POST' });
    readBody(req)
      .then(async (text) => {
        const payload = parse(text);
        const result = await handleAlarm(payload, await deps());
        options.onResult?.(payload, result);
        send(200, result);
      })
      .catch((error: unknown) => {
        if (error instanceof ValidationError) send(400, { error: error.message, field: error.field });
        else if (error instanceof PayloadTooLargeError) send(413, { error: error.message });
        else send(500, { error: error instanceof Error ? error.message : String(error) });
      });
  };
}

/** An unstarted server; the caller listens (e.g. `server.listen(8080)`) and closes it. */
export function createAlertmanagerServer(options: AlertmanagerHttpOptions): Server {
  return createServer(alertmanagerRequestListener(options));
}
