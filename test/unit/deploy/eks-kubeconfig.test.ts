import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EKSClient } from '@aws-sdk/client-eks';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  describeEksCluster,
  EksTokenSource,
  eksKubeConfig,
  REFRESH_MARGIN_MS,
} from '../../../lib/cluster/eks-kubeconfig.js';
import { TOKEN_LIFETIME_SECONDS } from '../../../lib/cluster/eks-token.js';
import { ApiError, ConfigError } from '../../../lib/errors.js';

const CREDENTIALS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' };
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  authorization: string | undefined;
}

type Reply = (req: IncomingMessage) => { status: number; body: unknown };

/** A self-signed certificate for 127.0.0.1 (openssl), so the TLS path of the KubeConfig is exercised. */
function selfSignedCert(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'trainscaler-eks-'));
  try {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'].concat([
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'k'),
        '-out',
        join(dir, 'c'),
      ]),
      { stdio: 'ignore' },
    );
    return { cert: readFileSync(join(dir, 'c'), 'utf8'), key: readFileSync(join(dir, 'k'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A loopback HTTP(S) server that records requests and answers with `reply`. */
async function recordingServer(reply: Reply, tls?: { cert: string; key: string }) {
  const seen: Seen[] = [];
  const handler = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    seen.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    req.resume();
    const { status, body } = reply(req);
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const server: Server = tls ? createHttpsServer(tls, handler) : createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return {
    seen,
    url,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

function countingMint() {
  let n = 0;
  const mint = async (input: { now?: Date }) => {
    n += 1;
    const at = input.now?.getTime() ?? 0;
    return { token: `token-${n}`, expiresAt: at + TOKEN_LIFETIME_SECONDS * 1000 };
  };
  return { mint, count: () => n };
}

describe('EksTokenSource', () => {
  it('reuses a token until it is within the refresh margin of expiry, then mints the next', async () => {
    let now = 1_000_000;
    const { mint, count } = countingMint();
    const tokens = new EksTokenSource({
      clusterName: 'c',
      region: 'us-east-1',
      credentials: CREDENTIALS,
      clock: () => now,
      mint,
    });
    assert.equal(await tokens.token(), 'token-1');
    now += TOKEN_LIFETIME_SECONDS * 1000 - REFRESH_MARGIN_MS - 1;
    assert.equal(await tokens.token(), 'token-1');
    now += 1;
    assert.equal(await tokens.token(), 'token-2');
    assert.equal(count(), 2);
  });

  it('lets concurrent callers share one signing', async () => {
    const { mint, count } = countingMint();
    const tokens = new EksTokenSource({
      clusterName: 'c',
      region: 'us-east-1',
      credentials: CREDENTIALS,
      mint,
    });
    const all = await Promise.all([tokens.token(), tokens.token(), tokens.token()]);
    assert.deepEqual(all, ['token-1', 'token-1', 'token-1']);
    assert.equal(count(), 1);
  });
});

function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const noOpenssl = opensslAvailable() ? false : 'openssl is not installed (needed to make a test certificate)';

describe('eksKubeConfig', { skip: noOpenssl }, () => {
  const tls = noOpenssl ? { cert: '', key: '' } : selfSignedCert();
  const namespaces = () => ({
    status: 200,
    body: { kind: 'NamespaceList', apiVersion: 'v1', metadata: {}, items: [] },
  });

  it('sends the current token as a bearer on API calls and the refreshed one after the margin', async () => {
    const server = await recordingServer(namespaces, tls);
    try {
      let now = 5_000_000;
      const { mint } = countingMint();
      const tokens = new EksTokenSource({
        clusterName: 'c',
        region: 'us-east-1',
        credentials: CREDENTIALS,
        clock: () => now,
        mint,
      });
      const kc = eksKubeConfig(
        {
          name: 'c',
          endpoint: server.url,
          certificateAuthorityData: Buffer.from(tls.cert).toString('base64'),
        },
        tokens,
      );
      const core = kc.makeApiClient(CoreV1Api);
      await core.listNamespace();
      now += TOKEN_LIFETIME_SECONDS * 1000;
      await core.listNamespace();
      assert.deepEqual(
        server.seen.map((s) => s.authorization),
        ['Bearer token-1', 'Bearer token-2'],
      );
    } finally {
      await server.close();
    }
  });

  it('refuses a server whose certificate the cluster CA did not sign', async () => {
    const server = await recordingServer(namespaces, tls);
    try {
      const other = selfSignedCert();
      const kc = eksKubeConfig(
        {
          name: 'c',
          endpoint: server.url,
          certificateAuthorityData: Buffer.from(other.cert).toString('base64'),
        },
        { token: async () => 'tok' },
      );
      await assert.rejects(kc.makeApiClient(CoreV1Api).listNamespace());
      assert.equal(server.seen.length, 0, 'no request reached the server');
    } finally {
      await server.close();
    }
  });

  it('carries the CA from DescribeCluster into the TLS options', async () => {
    const kc = eksKubeConfig(
      {
        name: 'c',
        endpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com',
        certificateAuthorityData: Buffer.from(CA_PEM).toString('base64'),
      },
      { token: async () => 'tok' },
    );
    const opts: { headers?: Record<string, string>; ca?: Buffer | string } = {};
    await kc.applyToHTTPSOptions(opts);
    assert.equal(opts.headers?.Authorization, 'Bearer tok');
    assert.equal(String(opts.ca), CA_PEM);
    assert.equal(kc.getCurrentCluster()?.skipTLSVerify, false);
    assert.equal(kc.getCurrentCluster()?.server, 'https://ABC.gr7.us-east-1.eks.amazonaws.com');
  });
});

describe('describeEksCluster', () => {
  let server: Awaited<ReturnType<typeof recordingServer>>;
  let status = 'ACTIVE';
  before(async () => {
    server = await recordingServer((req) => {
      if (req.url === '/clusters/missing')
        return {
          status: 404,
          body: { __type: 'ResourceNotFoundException', message: 'No cluster found for name: missing.' },
        };
      const ready = status === 'ACTIVE';
      return {
        status: 200,
        body: {
          cluster: {
            name: 'training',
            status,
            ...(ready
              ? {
                  endpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com',
                  certificateAuthority: { data: 'Q0E=' },
                }
              : {}),
          },
        },
      };
    });
  });
  after(() => server.close());
  const eks = () =>
    new EKSClient({ region: 'us-east-1', endpoint: server.url, credentials: CREDENTIALS, maxAttempts: 1 });

  it('reads endpoint and CA with a signed DescribeCluster request', async () => {
    status = 'ACTIVE';
    const info = await describeEksCluster(eks(), 'training');
    assert.deepEqual(info, {
      name: 'training',
      endpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com',
      certificateAuthorityData: 'Q0E=',
    });
    const last = server.seen.at(-1);
    assert.equal(last?.method, 'GET');
    assert.equal(last?.url, '/clusters/training');
    assert.match(
      last?.authorization ?? '',
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/eks\//,
    );
  });

  it('fails with a ConfigError while the cluster has no endpoint yet', async () => {
    status = 'CREATING';
    await assert.rejects(describeEksCluster(eks(), 'training'), (e) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /'training'.*CREATING/);
      return true;
    });
  });

  it('wraps AWS errors in an ApiError naming the call', async () => {
    await assert.rejects(describeEksCluster(eks(), 'missing'), (e) => {
      assert.ok(e instanceof ApiError);
      assert.match(e.message, /eks:DescribeCluster missing.*ResourceNotFoundException/);
      return true;
    });
  });
});
