// Alertmanager's webhook over plain node:http: POST /alertmanager -> handleAlarm. Served by the runner
// (lib/runner/http-server.ts) and used by the metrics pipeline test; the Lambda route (functions/lambda.ts)
// shares the credential check and handleAlertBody.
//
// Checks in order, each before anything more of the request is used: route (404), method (405), credential
// (401: nothing of the body is read), availability (503 on a follower), concurrency (429), body size (413:
// the request stream is destroyed at the limit), JSON and schema (400), handler (200, or 500 to be retried).
// The caller gets only the status and a request id; what happened is logged under that id.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { ValidationError } from '../lib/errors.js';
import { handleAlarm } from './alarm.js';
import type { HandlerDeps, HandlerResult, Logger } from './handler-deps.js';
import { checkCredential, type TokenSource, type Unauthorized } from './webhook-auth.js';

export const ALERTMANAGER_PATH = '/alertmanager';

/** Alertmanager caps a notification with max_alerts; 1,000 alerts of labels stay well under this. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Each request lists nodes and pods: a handful at once is plenty for grouped, rate-limited alerts. */
export const MAX_CONCURRENT_REQUESTS = 4;

export interface AlertmanagerHttpOptions {
  /** Built once and reused, or per request (e.g. lazily on the first one). */
  deps: HandlerDeps | (() => Promise<HandlerDeps>);
  /** The expected bearer token; undefined from it means none is configured and every request gets 401. */
  token: TokenSource;
  /** Where each request's details go, under its request id. */
  logger: Logger;
  maxBodyBytes?: number;
  maxConcurrent?: number;
  /** False on a runner that is not the leader: 503, and the connection is closed so a retry reconnects. */
  available?: () => boolean;
  /** Sees each valid payload and what the handler made of it (tests, audit logs). */
  onResult?: (payload: unknown, result: HandlerResult) => void;
  onUnauthorized?: (reason: Unauthorized) => void;
  /** Every answer, with whether the request reached the handler (then `seconds` is its wall time). */
  onAnswer?: (answer: { status: number; handled: boolean; seconds: number }) => void;
}

/** What the caller sees: the status and a request id, never error text, plans or patches. */
export function answerBody(status: number, requestId: string): string {
  return JSON.stringify({ status, requestId });
}

/**
 * Parses and handles one notification body; returns the status to answer and logs the details. Shared by
 * the node:http route and the Lambda route.
 */
export async function handleAlertBody(
  text: string,
  deps: () => Promise<HandlerDeps>,
  logger: Logger,
  requestId: string,
  onResult?: (payload: unknown, result: HandlerResult) => void,
): Promise<number> {
  try {
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      throw new ValidationError('', 'request body is not JSON');
    }
    const result = await handleAlarm(payload, await deps());
    onResult?.(payload, result);
    logger.info(
      {
        requestId,
        ...(result.ignored ? { ignored: result.ignored } : {}),
        outcomes: result.outcomes.map((o) => ({
          job: o.ref,
          applied: o.applied,
          ...(o.skipped ? { skipped: o.skipped } : {}),
          reason: o.plan.reason,
        })),
        errors: result.errors,
      },
      'alertmanager webhook handled',
    );
    return 200;
  } catch (error) {
    if (error instanceof ValidationError) {
      logger.warn({ requestId, field: error.field, error: error.message }, 'alertmanager webhook rejected');
      return 400;
    }
    logger.error(
      { requestId, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) },
      'alertmanager webhook failed',
    );
    return 500;
  }
}

class PayloadTooLargeError extends Error {}

/** The body up to `limit` bytes; past it the stream is detached and rejected, and nothing more is buffered. */
function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        chunks.length = 0;
        reject(new PayloadTooLargeError(`request body over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function alertmanagerRequestListener(options: AlertmanagerHttpOptions): RequestListener {
  const deps =
    typeof options.deps === 'function' ? options.deps : () => Promise.resolve(options.deps as HandlerDeps);
  const maxBody = options.maxBodyBytes ?? MAX_BODY_BYTES;
  const maxConcurrent = options.maxConcurrent ?? MAX_CONCURRENT_REQUESTS;
  const { logger } = options;
  let active = 0;

  return (req, res) => {
    const requestId = randomUUID();
    const started = performance.now();
    let handled = false;
    const send = (status: number, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': requestId, ...headers });
      res.end(answerBody(status, requestId));
      options.onAnswer?.({ status, handled, seconds: (performance.now() - started) / 1000 });
    };
    // An answer given without reading the whole body: with `connection: close` node:http destroys the socket
    // once the answer is sent, so the unread rest is neither read nor taken for the next request.
    const refuse = (status: number, headers: Record<string, string> = {}) =>
      send(status, { connection: 'close', ...headers });

    // A server's request always has a url (only a client's IncomingMessage has none).
    const path = String(req.url).split('?')[0];
    if (path !== ALERTMANAGER_PATH) return refuse(404);
    if (req.method !== 'POST') return refuse(405, { allow: 'POST' });

    options
      .token()
      .then(
        (expected) => checkCredential(expected, req.headers.authorization),
        (error: unknown) => {
          logger.error({ requestId, error: String(error) }, 'webhook token unavailable');
          return 'unavailable' as const;
        },
      )
      .then(async (denied) => {
        if (denied === 'unavailable') return refuse(503, { 'retry-after': '10' });
        if (denied) {
          options.onUnauthorized?.(denied);
          logger.warn(
            { requestId, reason: denied, remote: req.socket.remoteAddress },
            'webhook unauthorized',
          );
          return refuse(401, { 'www-authenticate': 'Bearer' });
        }
        if (options.available && !options.available()) return refuse(503, { 'retry-after': '5' });
        if (active >= maxConcurrent) {
          logger.warn({ requestId, active }, 'webhook busy');
          return refuse(429, { 'retry-after': '5' });
        }
        active++;
        try {
          handled = true;
          let text: string;
          try {
            text = await readBody(req, maxBody);
          } catch (error) {
            if (!(error instanceof PayloadTooLargeError)) throw error;
            logger.warn({ requestId, error: error.message }, 'alertmanager webhook rejected');
            return refuse(413);
          }
          send(await handleAlertBody(text, deps, logger, requestId, options.onResult));
        } finally {
          active--;
        }
      })
      .catch((error: unknown) => {
        // A request stream that failed (client gone): nothing left to answer if the socket is closed.
        logger.warn({ requestId, error: String(error) }, 'alertmanager webhook request failed');
        if (!res.headersSent && !res.destroyed) refuse(500);
      });
  };
}

/** An unstarted server; the caller listens (e.g. `server.listen(8080)`) and closes it. */
export function createAlertmanagerServer(options: AlertmanagerHttpOptions): Server {
  return createServer(alertmanagerRequestListener(options));
}
