import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EKSClient } from '@aws-sdk/client-eks';
import { runtimeDepsLoader } from '../../../functions/lambda.js';
import { kubeAccessFromEnv, loadKubeConfigFor, readRuntimeConfig } from '../../../functions/runtime-deps.js';
import { ConfigError } from '../../../lib/errors.js';

const BASE = { PROMETHEUS_URL: 'http://127.0.0.1:9', LOG_LEVEL: 'silent' };

function rejectsNaming(run: () => unknown, variable: string) {
  assert.throws(run, (e) => {
    assert.ok(e instanceof ConfigError, `ConfigError, got ${String(e)}`);
    assert.match(e.message, new RegExp(variable));
    return true;
  });
}

const KUBECONFIG_YAML = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;

describe('runtime configuration', () => {
  it('names the variable that is missing or malformed', () => {
    rejectsNaming(() => readRuntimeConfig({}), 'PROMETHEUS_URL');
    rejectsNaming(() => readRuntimeConfig({ PROMETHEUS_URL: 'prometheus:9090' }), 'PROMETHEUS_URL');
    rejectsNaming(() => readRuntimeConfig({ ...BASE, TRAINSCALER_DRY_RUN: 'yes' }), 'TRAINSCALER_DRY_RUN');
    rejectsNaming(
      () => readRuntimeConfig({ ...BASE, TRAINSCALER_COOLDOWN_SECONDS: '5m' }),
      'TRAINSCALER_COOLDOWN',
    );
    rejectsNaming(() => readRuntimeConfig({ ...BASE, LOG_LEVEL: 'verbose' }), 'LOG_LEVEL');
    rejectsNaming(
      () => readRuntimeConfig({ ...BASE, TRAINSCALER_NAMESPACES: 'ok,Not_OK' }),
      'TRAINSCALER_NAMESPACES',
    );
    rejectsNaming(() => readRuntimeConfig({ ...BASE, EKS_CLUSTER_NAME: 'training' }), 'AWS_REGION');
    rejectsNaming(
      () => readRuntimeConfig({ ...BASE, EKS_CLUSTER_NAME: 'bad name', AWS_REGION: 'us-east-1' }),
      'EKS_CLUSTER_NAME',
    );
  });

  it('prefers EKS (Lambda), then KUBECONFIG, then the in-cluster ServiceAccount, then ~/.kube/config', () => {
    const all = {
      EKS_CLUSTER_NAME: 'training',
      AWS_REGION: 'eu-west-1',
      KUBECONFIG: '/k',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
    };
    assert.deepEqual(kubeAccessFromEnv(all), { mode: 'eks', clusterName: 'training', region: 'eu-west-1' });
    assert.deepEqual(kubeAccessFromEnv({ ...all, EKS_CLUSTER_NAME: '' }), { mode: 'kubeconfig', path: '/k' });
    assert.deepEqual(kubeAccessFromEnv({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }), { mode: 'in-cluster' });
    assert.deepEqual(kubeAccessFromEnv({}), { mode: 'default' });
  });

  it('reads dry-run and the policy knobs', () => {
    const config = readRuntimeConfig({
      ...BASE,
      TRAINSCALER_DRY_RUN: 'true',
      TRAINSCALER_COOLDOWN_SECONDS: '60',
      TRAINSCALER_NAMESPACES: 'ml, research',
    });
    assert.equal(config.dryRun, true);
    assert.equal(config.policy.cooldownSeconds, 60);
    assert.deepEqual(config.policy.namespaceAllowlist, ['ml', 'research']);
  });

  it("reads the profile share of one namespace: a whole number up to the store's bound, 20 unset", () => {
    const share = (value?: string) =>
      readRuntimeConfig({
        ...BASE,
        ...(value !== undefined ? { TRAINSCALER_PROFILES_PER_NAMESPACE: value } : {}),
      }).profiles.perNamespace;
    assert.equal(share(), 20);
    assert.equal(share(''), 20);
    assert.equal(share('1'), 1);
    assert.equal(share('100'), 100);
    for (const bad of ['0', '101', '2.5', 'five', '-3'])
      rejectsNaming(() => share(bad), 'TRAINSCALER_PROFILES_PER_NAMESPACE');
  });
});

describe('EKS access (Lambda)', () => {
  it('builds a KubeConfig from DescribeCluster whose bearer is an EKS token for that cluster', async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          cluster: {
            name: 'training',
            status: 'ACTIVE',
            endpoint: 'https://ABC.yl4.eu-west-1.eks.amazonaws.com',
            certificateAuthority: { data: Buffer.from('CA').toString('base64') },
          },
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const eks = new EKSClient({
        region: 'eu-west-1',
        endpoint: `http://127.0.0.1:${port}`,
        credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' },
        maxAttempts: 1,
      });
      const kc = await loadKubeConfigFor({ mode: 'eks', clusterName: 'training', region: 'eu-west-1' }, eks);
      assert.equal(kc.getCurrentCluster()?.server, 'https://ABC.yl4.eu-west-1.eks.amazonaws.com');
      const opts: { headers?: Record<string, string> } = {};
      await kc.applyToHTTPSOptions(opts);
      const bearer = opts.headers?.Authorization ?? '';
      assert.match(bearer, /^Bearer k8s-aws-v1\./);
      const url = new URL(Buffer.from(bearer.slice('Bearer k8s-aws-v1.'.length), 'base64url').toString());
      assert.equal(url.host, 'sts.eu-west-1.amazonaws.com');
      assert.match(url.searchParams.get('X-Amz-Credential') ?? '', /^AKIDEXAMPLE\//);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('Lambda cold start (runtimeDepsLoader)', () => {
  it('logs a configuration error once and rejects every invocation with it', async () => {
    const lines: string[] = [];
    const deps = runtimeDepsLoader({ LOG_LEVEL: 'silent' }, (line) => lines.push(line));
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? '', /PROMETHEUS_URL/);
    for (let i = 0; i < 2; i++) {
      await assert.rejects(deps(), (e) => e instanceof ConfigError && /PROMETHEUS_URL/.test(e.message));
    }
    assert.equal(lines.length, 1);
  });

  it('retries building the clients after a failure instead of caching it for the container', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trainscaler-rt-'));
    try {
      const path = join(dir, 'kubeconfig');
      const deps = runtimeDepsLoader({ ...BASE, KUBECONFIG: path }, () => {});
      await assert.rejects(deps(), (e) => e instanceof ConfigError && e.message.includes(path));
      writeFileSync(path, KUBECONFIG_YAML);
      const built = await deps();
      assert.equal(built.dryRun, false);
      assert.equal(await deps(), built, 'built once, then reused');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
