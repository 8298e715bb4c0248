import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import {
  containerArgv,
  containerEnv,
  expandReferences,
  UnsupportedEnvError,
} from '../../../infra/cluster/host-node-agent/container-env.js';

const pod: V1Pod = {
  metadata: {
    name: 'job-worker-1',
    namespace: 'team-a',
    uid: 'u-1',
    labels: { 'training.kubeflow.org/replica-index': '1' },
    annotations: { note: 'x' },
  },
  spec: { nodeName: 'host-node-0', serviceAccountName: 'default', containers: [] },
  status: { podIP: '10.247.1.3', hostIP: '10.247.1.1' },
};

test('literal values, the operator env and $(VAR) references resolve as a kubelet resolves them', () => {
  const container: V1Container = {
    name: 'pytorch',
    env: [
      { name: 'PET_RDZV_ENDPOINT', value: 'job-worker-0:23456' },
      { name: 'ME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      {
        name: 'INDEX',
        valueFrom: { fieldRef: { fieldPath: "metadata.labels['training.kubeflow.org/replica-index']" } },
      },
      { name: 'ENDPOINT', value: '$(IP):23456' },
      { name: 'LATER', value: '$(NOT_YET)-$$(ME)' },
      { name: 'NOT_YET', value: 'n' },
    ],
  };
  const env = containerEnv(pod, container, { MARKER: 'm' });
  assert.equal(env.PET_RDZV_ENDPOINT, 'job-worker-0:23456');
  assert.equal(env.ME, 'job-worker-1');
  assert.equal(env.HOSTNAME, 'job-worker-1');
  assert.equal(env.INDEX, '1');
  assert.equal(env.ENDPOINT, '10.247.1.3:23456');
  // A reference to a variable defined later stays as written; $$ escapes.
  assert.equal(env.LATER, '$(NOT_YET)-$(ME)');
  assert.equal(env.MARKER, 'm');
  assert.ok(env.PATH?.includes('/usr/bin'));
});

test('the pod cannot override the agent marker', () => {
  const env = containerEnv(pod, { name: 'c', env: [{ name: 'MARKER', value: 'mine' }] }, { MARKER: 'agent' });
  assert.equal(env.MARKER, 'agent');
});

test('unsupported sources are refused with a typed error', () => {
  const cases: V1Container[] = [
    { name: 'c', env: [{ name: 'S', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] },
    { name: 'c', env: [{ name: 'C', valueFrom: { configMapKeyRef: { name: 'c', key: 'k' } } }] },
    { name: 'c', env: [{ name: 'R', valueFrom: { resourceFieldRef: { resource: 'limits.cpu' } } }] },
    { name: 'c', env: [{ name: 'F', valueFrom: { fieldRef: { fieldPath: 'spec.unknown' } } }] },
    { name: 'c', envFrom: [{ configMapRef: { name: 'c' } }] },
  ];
  for (const container of cases) assert.throws(() => containerEnv(pod, container), UnsupportedEnvError);
});

test('argv is command + args with references expanded; no command is refused (no image entrypoint)', () => {
  const env = { DIR: '/data' };
  assert.deepEqual(
    containerArgv({ name: 'c', command: ['torchrun'], args: ['$(DIR)/train.py', '$$(DIR)'] }, env),
    ['torchrun', '/data/train.py', '$(DIR)'],
  );
  assert.throws(() => containerArgv({ name: 'c', args: ['x'] }, env), UnsupportedEnvError);
  assert.equal(expandReferences('$(A)$(B)', { A: '1' }), '1$(B)');
});
