import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cachedToken, checkCredential } from '../../../functions/webhook-auth.js';
import { ConfigError } from '../../../lib/errors.js';
import { resolveRunSettings, webhookTokenFromFile } from '../../../lib/runner/run-command.js';

const base = { address: '127.0.0.1', port: 8080 };

describe('trainscaler run settings', () => {
  it('takes identity and lease namespace from the downward API variables in a pod', () => {
    const s = resolveRunSettings(base, {
      PROMETHEUS_URL: 'http://prometheus:9090',
      POD_NAME: 'trainscaler-7d9f-abcde',
      POD_NAMESPACE: 'ops',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
    });
    assert.equal(s.identity, 'trainscaler-7d9f-abcde');
    assert.equal(s.namespace, 'ops');
    assert.equal(s.leaseName, 'trainscaler-leader');
    assert.equal(s.schedule, '* * * * *');
    assert.deepEqual(s.config.kube, { mode: 'in-cluster' });
    assert.equal(s.config.dryRun, false);
  });

  it('lets flags win over the environment, and an explicit kubeconfig over EKS', () => {
    const s = resolveRunSettings(
      {
        ...base,
        kubeconfig: 'config/kc.yaml',
        prometheusUrl: 'http://127.0.0.1:9090',
        dryRun: true,
        identity: 'laptop',
      },
      {
        PROMETHEUS_URL: 'http://other:9090',
        EKS_CLUSTER_NAME: 'prod',
        AWS_REGION: 'us-east-1',
        TRAINSCALER_DRY_RUN: 'false',
      },
    );
    assert.deepEqual(s.config.kube, { mode: 'kubeconfig', path: 'config/kc.yaml' });
    assert.equal(s.config.prometheusUrl, 'http://127.0.0.1:9090');
    assert.equal(s.config.dryRun, true);
    assert.equal(s.identity, 'laptop');
  });

  it('binds 127.0.0.1 unless told otherwise; the in-cluster manifest sets 0.0.0.0 (infra/k8s/config.env)', () => {
    const env = { PROMETHEUS_URL: 'http://prometheus:9090' };
    assert.equal(resolveRunSettings({ port: 8080 }, env).address, '127.0.0.1');
    assert.equal(
      resolveRunSettings({ port: 8080 }, { ...env, TRAINSCALER_ADDRESS: '0.0.0.0' }).address,
      '0.0.0.0',
    );
    assert.equal(
      resolveRunSettings({ port: 8080, address: '::1' }, { ...env, TRAINSCALER_ADDRESS: '0.0.0.0' }).address,
      '::1',
    );
    const configEnv = readFileSync(new URL('../../../infra/k8s/config.env', import.meta.url), 'utf8');
    assert.match(configEnv, /^TRAINSCALER_ADDRESS=0\.0\.0\.0$/m);
  });

  it('fails with a ConfigError naming what is missing', () => {
    assert.throws(
      () => resolveRunSettings(base, {}),
      (e) => e instanceof ConfigError && /PROMETHEUS_URL/.test(e.message),
    );
  });
});

describe('trainscaler run webhook token', () => {
  const env = { PROMETHEUS_URL: 'http://prometheus:9090', KUBERNETES_SERVICE_HOST: '10.0.0.1' };

  it('takes the token file from --webhook-token-file over TRAINSCALER_WEBHOOK_TOKEN_FILE, and POD_NAME for the label', () => {
    const fromEnv = resolveRunSettings(base, {
      ...env,
      TRAINSCALER_WEBHOOK_TOKEN_FILE: '/var/run/a',
      POD_NAME: 'p-1',
    });
    assert.equal(fromEnv.webhookTokenFile, '/var/run/a');
    assert.equal(fromEnv.podName, 'p-1');
    const fromFlag = resolveRunSettings(
      { ...base, webhookTokenFile: '/var/run/b' },
      { ...env, TRAINSCALER_WEBHOOK_TOKEN_FILE: '/var/run/a' },
    );
    assert.equal(fromFlag.webhookTokenFile, '/var/run/b');
    assert.equal(resolveRunSettings(base, env).webhookTokenFile, undefined);
  });

  it('reads the token file at start-up (trimmed), refuses a missing or empty one, and keeps the last token on a failed re-read', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'trainscaler-token-'));
    try {
      const file = join(dir, 'token');
      await writeFile(file, '  s3cret-token\n');
      const source = await webhookTokenFromFile(file, () => undefined);
      assert.equal(await source(), 's3cret-token');
      await assert.rejects(
        webhookTokenFromFile(join(dir, 'absent'), () => undefined),
        ConfigError,
      );
      await writeFile(join(dir, 'empty'), '\n');
      await assert.rejects(
        webhookTokenFromFile(join(dir, 'empty'), () => undefined),
        /is empty/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('cachedToken', () => {
  it('reloads after the TTL (rotation), shares one load, and serves the last token when a refresh fails', async () => {
    let now = 0;
    let loads = 0;
    let next: () => Promise<string | undefined> = async () => 'one';
    const source = cachedToken(
      () => {
        loads++;
        return next();
      },
      1_000,
      () => now,
    );
    assert.deepEqual(await Promise.all([source(), source()]), ['one', 'one']);
    assert.equal(loads, 1);
    now = 999;
    assert.equal(await source(), 'one');
    next = async () => 'two';
    now = 1_000;
    assert.equal(await source(), 'two', 'rotated token picked up after the TTL');
    next = async () => {
      throw new Error('throttled');
    };
    now = 2_500;
    assert.equal(await source(), 'two', 'last token kept');
    const never = cachedToken(() => Promise.reject(new Error('denied')), 1_000);
    await assert.rejects(never(), /denied/);
  });
});

describe('checkCredential', () => {
  it('accepts exactly `Bearer <token>`', () => {
    assert.equal(checkCredential('tok', 'Bearer tok'), undefined);
    assert.equal(checkCredential('tok', 'bearer tok'), undefined);
    assert.equal(checkCredential('tok', 'Bearer tok2'), 'wrong');
    assert.equal(checkCredential('tok', 'Bearer to'), 'wrong');
    assert.equal(checkCredential('tok', 'Bearer'), 'missing');
    assert.equal(checkCredential('tok', 'Basic dG9r'), 'missing');
    assert.equal(checkCredential('tok', 'tok'), 'missing');
    assert.equal(checkCredential('tok', undefined), 'missing');
    assert.equal(checkCredential(undefined, 'Bearer tok'), 'unconfigured');
    assert.equal(checkCredential('', 'Bearer '), 'unconfigured');
  });
});
