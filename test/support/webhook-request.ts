// The one place tests build a request to an /alertmanager route, so the credential header is added once.
import { request } from 'node:http';
import { connect } from 'node:net';

export const TEST_WEBHOOK_TOKEN = 'test-webhook-token-0123456789abcdef';

export interface WebhookAnswer {
  status: number;
  headers: Headers;
  json: Record<string, unknown>;
}

/** POSTs `body` to `url`; `token: null` sends no Authorization header, a string sends `Bearer <token>`. */
export function postWebhook(
  url: string,
  body: string,
  token: string | null = TEST_WEBHOOK_TOKEN,
): Promise<WebhookAnswer> {
  return postWebhookWithAuthorization(url, body, token === null ? null : `Bearer ${token}`);
}

/** POSTs `body` with exactly this Authorization header (null: none). */
export async function postWebhookWithAuthorization(
  url: string,
  body: string,
  authorization: string | null,
): Promise<WebhookAnswer> {
  const response = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }) },
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    json: JSON.parse(text) as Record<string, unknown>,
  };
}

/**
 * Streams up to `maxBytes` of body (1 MiB chunks); resolves with the status (and/or the error that ended the
 * connection) and how many bytes the server let it write. `end: false` keeps the body open after the last
 * chunk, as a client that never finishes would; `keepWriting` goes on sending after the answer, as a hostile
 * client would, so only a server that closes the connection stops it.
 */
export function streamWebhook(
  url: string,
  options: {
    token?: string | null;
    maxBytes: number;
    end?: boolean;
    keepWriting?: boolean;
    timeoutMs?: number;
  },
): Promise<{ status?: number; error?: string; written: number; body?: string }> {
  const {
    token = TEST_WEBHOOK_TOKEN,
    maxBytes,
    end = true,
    keepWriting = false,
    timeoutMs = 15_000,
  } = options;
  let answered: { status: number; body?: string } | undefined;
  return new Promise((resolve) => {
    let written = 0;
    let done = false;
    const finish = (result: { status?: number; error?: string; body?: string }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ ...result, written });
    };
    const timer = setTimeout(() => finish({ error: 'timeout' }), timeoutMs);
    const req = request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        answered = { status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') };
        if (!keepWriting || written >= maxBytes) finish(answered);
      });
      res.on('error', () => finish({ status: res.statusCode ?? 0 }));
    });
    req.on('error', (error) => {
      // The server may close before the answer is read; give a pending 'response' a moment.
      setTimeout(() => finish({ ...answered, error: error.message }), 200);
    });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const pump = () => {
      while (!done && written < maxBytes) {
        written += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!done && end) req.end();
      if (!done && answered) finish(answered);
    };
    req.flushHeaders();
    pump();
  });
}

/**
 * Over a raw socket: declares a body of `declaredBytes`, sends only `sentBytes` of it, then either waits
 * (up to `timeoutMs`) for the server to answer and close the connection, or (`abort`) drops the connection
 * itself, as a client that goes away mid-body does. Resolves with what the server sent and whether it closed.
 */
export function sendPartialWebhook(
  url: string,
  options: {
    token?: string | null;
    declaredBytes: number;
    sentBytes: number;
    abort?: boolean;
    timeoutMs?: number;
  },
): Promise<{ response: string; closedByServer: boolean }> {
  const { token = TEST_WEBHOOK_TOKEN, declaredBytes, sentBytes, abort = false, timeoutMs = 3_000 } = options;
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    let settled = false;
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ response: Buffer.concat(received).toString('utf8'), closedByServer });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('end', () => finish(true));
    socket.on('error', () => finish(true));
    socket.on('connect', () => {
      socket.write(
        [
          `POST ${pathname} HTTP/1.1`,
          `Host: ${hostname}:${port}`,
          'Content-Type: application/json',
          `Content-Length: ${declaredBytes}`,
          ...(token === null ? [] : [`Authorization: Bearer ${token}`]),
          '',
          '',
        ].join('\r\n'),
      );
      socket.write(Buffer.alloc(sentBytes, 0x20), () => {
        if (abort) finish(false);
      });
    });
  });
}
