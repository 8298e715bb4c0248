import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  CLUSTER_ID_HEADER,
  createEksToken,
  EKS_TOKEN_PREFIX,
  TOKEN_LIFETIME_SECONDS,
} from '../../../lib/cluster/eks-token.js';

const CREDENTIALS = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'session/token+with=odd chars',
};
const NOW = new Date('2024-05-01T12:34:56Z');
const REGION = 'eu-west-1';

function decode(token: string): URL {
  assert.ok(token.startsWith(EKS_TOKEN_PREFIX), 'token carries the k8s-aws-v1. prefix');
  const body = token.slice(EKS_TOKEN_PREFIX.length);
  assert.match(body, /^[A-Za-z0-9_-]+$/, 'base64url alphabet, no padding');
  return new URL(Buffer.from(body, 'base64url').toString('utf8'));
}

/** RFC 3986 unreserved characters stay, everything else is %XX: SigV4's canonical query encoding. */
function uriEncode(value: string): string {
  return Array.from(Buffer.from(value, 'utf8'))
    .map((byte) => {
      const c = String.fromCharCode(byte);
      return /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/** SigV4 for a presigned GET, written from the spec with node:crypto only. */
function expectedSignature(url: URL, clusterName: string, secret: string): string {
  const params = [...url.searchParams.entries()].filter(([k]) => k !== 'X-Amz-Signature');
  const canonicalQuery = params
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonicalRequest = [
    'GET',
    '/',
    canonicalQuery,
    `host:${url.host}`,
    `${CLUSTER_ID_HEADER}:${clusterName}`,
    '',
    `host;${CLUSTER_ID_HEADER}`,
    createHash('sha256').update('').digest('hex'),
  ].join('\n');
  const amzDate = url.searchParams.get('X-Amz-Date') ?? '';
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${REGION}/sts/aws4_request`;
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), REGION), 'sts'), 'aws4_request');
  return createHmac('sha256', key).update(stringToSign).digest('hex');
}

describe('EKS bearer token (aws-iam-authenticator scheme)', () => {
  it('is a presigned STS GetCallerIdentity URL on the regional endpoint with the SigV4 query parameters', async () => {
    const { token, expiresAt } = await createEksToken({
      clusterName: 'training',
      region: REGION,
      credentials: CREDENTIALS,
      now: NOW,
    });
    const url = decode(token);
    assert.equal(url.protocol, 'https:');
    assert.equal(url.host, 'sts.eu-west-1.amazonaws.com');
    assert.equal(url.pathname, '/');
    const q = url.searchParams;
    assert.equal(q.get('Action'), 'GetCallerIdentity');
    assert.equal(q.get('Version'), '2011-06-15');
    assert.equal(q.get('X-Amz-Algorithm'), 'AWS4-HMAC-SHA256');
    assert.equal(q.get('X-Amz-Credential'), 'AKIDEXAMPLE/20240501/eu-west-1/sts/aws4_request');
    assert.equal(q.get('X-Amz-Date'), '20240501T123456Z');
    assert.equal(q.get('X-Amz-Expires'), '60');
    assert.equal(q.get('X-Amz-SignedHeaders'), 'host;x-k8s-aws-id');
    assert.equal(q.get('X-Amz-Security-Token'), CREDENTIALS.sessionToken);
    assert.match(q.get('X-Amz-Signature') ?? '', /^[0-9a-f]{64}$/);
    assert.equal(expiresAt, NOW.getTime() + TOKEN_LIFETIME_SECONDS * 1000);
  });

  it('carries the signature an independent SigV4 computation gives, cluster header included', async () => {
    const { token } = await createEksToken({
      clusterName: 'training',
      region: REGION,
      credentials: CREDENTIALS,
      now: NOW,
    });
    const url = decode(token);
    assert.equal(
      url.searchParams.get('X-Amz-Signature'),
      expectedSignature(url, 'training', CREDENTIALS.secretAccessKey),
    );
    // The cluster name is part of what was signed: the same URL does not verify for another cluster.
    assert.notEqual(
      url.searchParams.get('X-Amz-Signature'),
      expectedSignature(url, 'other', CREDENTIALS.secretAccessKey),
    );
  });

  it('accepts a credential provider and omits the session token for long-term keys', async () => {
    const { token } = await createEksToken({
      clusterName: 'gpu-prod',
      region: REGION,
      credentials: async () => ({ accessKeyId: 'AKIDLONGTERM', secretAccessKey: 'secret' }),
      now: NOW,
    });
    const url = decode(token);
    assert.equal(url.searchParams.has('X-Amz-Security-Token'), false);
    assert.equal(url.searchParams.get('X-Amz-Signature'), expectedSignature(url, 'gpu-prod', 'secret'));
  });

  it('signs a different URL for a different cluster or time', async () => {
    const base = { region: REGION, credentials: CREDENTIALS };
    const a = await createEksToken({ ...base, clusterName: 'a', now: NOW });
    const b = await createEksToken({ ...base, clusterName: 'b', now: NOW });
    const later = await createEksToken({ ...base, clusterName: 'a', now: new Date(NOW.getTime() + 1000) });
    assert.notEqual(a.token, b.token);
    assert.notEqual(a.token, later.token);
  });
});
