import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../../lib/errors.js';
import {
  type ForwardCommandOptions,
  resolveForwardSettings,
} from '../../../lib/forwarder/forward-command.js';

const options = (extra: Partial<ForwardCommandOptions> = {}): ForwardCommandOptions => ({
  bus: 'trainscaler-prod',
  ledgerConfigmap: 'trainscaler-forwarder-ledger',
  address: '0.0.0.0',
  port: 8080,
  summarySeconds: 60,
  ...extra,
});

describe('trainscaler forward settings', () => {
  it('takes the bus by name or ARN and the region from the flag or AWS_REGION', () => {
    assert.equal(resolveForwardSettings(options({ region: 'eu-west-1' }), {}).region, 'eu-west-1');
    assert.equal(resolveForwardSettings(options(), { AWS_REGION: 'us-east-2' }).region, 'us-east-2');
    const arn = 'arn:aws:events:us-east-1:123456789012:event-bus/trainscaler-prod';
    assert.equal(resolveForwardSettings(options({ bus: arn }), { AWS_REGION: 'us-east-1' }).bus, arn);
  });

  it('rejects a bad bus, a missing or malformed region, a bad ledger name, with a ConfigError', () => {
    const env = { AWS_REGION: 'us-east-1' };
    assert.throws(() => resolveForwardSettings(options({ bus: 'no spaces' }), env), ConfigError);
    assert.throws(() => resolveForwardSettings(options(), {}), /--region/);
    assert.throws(() => resolveForwardSettings(options({ region: 'mars' }), {}), ConfigError);
    assert.throws(() => resolveForwardSettings(options({ ledgerConfigmap: 'Bad_Name' }), env), ConfigError);
    assert.throws(
      () => resolveForwardSettings(options({ ledgerNamespace: 'Kube System' }), env),
      ConfigError,
    );
  });

  it('reads the cluster from --kubeconfig, never from EKS_CLUSTER_NAME, and keeps the ledger beside the pod', () => {
    const env = { AWS_REGION: 'us-east-1', EKS_CLUSTER_NAME: 'training', POD_NAMESPACE: 'ops' };
    const settings = resolveForwardSettings(options({ kubeconfig: '/k' }), env);
    assert.deepEqual(settings.kube, { mode: 'kubeconfig', path: '/k' });
    assert.equal(settings.ledgerNamespace, 'ops');
    assert.equal(
      resolveForwardSettings(options(), { AWS_REGION: 'us-east-1' }).ledgerNamespace,
      'trainscaler-system',
    );
  });
});
