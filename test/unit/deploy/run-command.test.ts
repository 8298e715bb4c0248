import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigError } from '../../../lib/errors.js';
import { resolveRunSettings } from '../../../lib/runner/run-command.js';

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
    assert.equal(s.schedule, '*/5 * * * *');
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
