// A fault-injecting HTTPS proxy on 127.0.0.1 in front of the real API server.
//
// Why TLS-terminating: 409s and 5xx are HTTP answers, so the proxy must speak HTTP. It serves a throwaway
// self-signed certificate (made with openssl for 127.0.0.1) and re-originates each request to the API server
// over TLS verified with the cluster's CA, forwarding the client's headers unchanged (the ServiceAccount's
// bearer token authenticates end to end; the proxy holds no credential of its own and logs no header).
// trainscaler talks to it through a copy of the SA kubeconfig whose server and CA point at the proxy.
//
// Each request draws from a seeded PRNG: with probability `rate` it gets one fault, in the order requests
// arrive (so the sequence of faults is reproducible; which request gets which depends on timing):
//   conflict       a 409 Status without forwarding (writes only; a read gets `unavailable` instead)
//   unavailable    a 503 without forwarding
//   lost-response  forwarded, the API server's answer replaced by a 500 (a write is applied, the client
//                  cannot know)
//   drop-before    the connection destroyed without forwarding
//   drop-after     forwarded, the connection destroyed before the answer (applied, client cannot know)
//   timeout        forwarded only after `hangMs` (longer than the client's attempt timeout), then answered
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { mulberry32 } from '../../../lib/sim/prng.js';

export type ProxyFault =
  | 'conflict'
  | 'unavailable'
  | 'lost-response'
  | 'drop-before'
  | 'drop-after'
  | 'timeout';
const FAULTS: readonly ProxyFault[] = [
  'conflict',
  'unavailable',
  'lost-response',
  'drop-before',
  'drop-after',
  'timeout',
];

export interface FaultProxy {
  url: string;
  /** PEM of the proxy's self-signed certificate, the CA a client must trust. */
  caPem: string;
  requests: number;
  injected: Map<ProxyFault, number>;
  /** Every write request (not GET/HEAD) received, and whether it was passed on to the API server. */
  writes: { method: string; url: string; forwarded: boolean }[];
  /** Stop injecting (e.g. while the test reads the final state through the proxy). */
  setRate(rate: number): void;
  close(): Promise<void>;
}

function selfSignedCert(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'trainscaler-proxy-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore', timeout: 30_000 },
    );
    return {
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function status(res: ServerResponse, code: number, reason: string): void {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    message: `injected by the test proxy: ${reason}`,
    reason,
    code,
  });
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export async function startFaultProxy(options: {
  upstream: string;
  upstreamCaPem: string;
  seed: number;
  rate: number;
  hangMs: number;
  /** The faults drawn from (all by default). */
  faults?: readonly ProxyFault[];
  /** Inject faults into writes only; reads always pass. */
  writesOnly?: boolean;
}): Promise<FaultProxy> {
  const faults = options.faults ?? FAULTS;
  const upstream = new URL(options.upstream);
  const random = mulberry32(options.seed);
  let rate = options.rate;
  const { key, cert } = selfSignedCert();
  const sockets = new Set<Duplex>();
  const state = {
    requests: 0,
    injected: new Map<ProxyFault, number>(),
    writes: [] as FaultProxy['writes'],
  };

  const forward = (
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const headers = { ...req.headers, host: upstream.host };
      const out = httpsRequest(
        {
          hostname: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers,
          ca: options.upstreamCaPem,
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      out.on('timeout', () => out.destroy(new Error('upstream timeout')));
      out.on('error', reject);
      out.end(body);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    state.requests++;
    const write = req.method !== 'GET' && req.method !== 'HEAD';
    const logged = { method: req.method ?? '', url: req.url ?? '', forwarded: false };
    if (write) state.writes.push(logged);
    let fault: ProxyFault | undefined;
    if ((write || !options.writesOnly) && random() < rate) {
      fault = faults[Math.floor(random() * faults.length)] ?? 'unavailable';
      if (fault === 'conflict' && !write) fault = 'unavailable';
      state.injected.set(fault, (state.injected.get(fault) ?? 0) + 1);
    }
    if (fault === 'conflict') return status(res, 409, 'Conflict');
    if (fault === 'unavailable') return status(res, 503, 'ServiceUnavailable');
    if (fault === 'drop-before') return req.socket.destroy();
    if (fault === 'timeout') await new Promise((r) => setTimeout(r, options.hangMs));
    let answer: Awaited<ReturnType<typeof forward>>;
    try {
      logged.forwarded = true;
      answer = await forward(req, body);
    } catch {
      return status(res, 502, 'BadGateway');
    }
    if (fault === 'lost-response') return status(res, 500, 'InternalError');
    if (fault === 'drop-after') return req.socket.destroy();
    if (res.destroyed) return;
    const headers = { ...answer.headers };
    delete headers['transfer-encoding'];
    headers['content-length'] = String(answer.body.length);
    res.writeHead(answer.status, headers);
    res.end(answer.body);
  };

  const server: Server = createServer({ key, cert }, (req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    caPem: cert,
    get requests() {
      return state.requests;
    },
    injected: state.injected,
    writes: state.writes,
    setRate(r: number) {
      rate = r;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
