import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { renderHosts } from '../../../infra/cluster/host-node-agent/hosts-file.js';
import {
  type ContainerState,
  podPhase,
  podStatus,
  restartBackoffMs,
  restartPolicyOf,
  restarts,
  terminationOf,
} from '../../../infra/cluster/host-node-agent/pod-status.js';

const at = '2026-01-01T00:00:00.000Z';
const ok = terminationOf(0, undefined, at, at);
const failed = terminationOf(1, undefined, at, at);

test('restartPolicy decides what an exit does; the default is Always', () => {
  assert.equal(restartPolicyOf({ spec: { containers: [] } }), 'Always');
  assert.equal(restartPolicyOf({ spec: { containers: [], restartPolicy: 'OnFailure' } }), 'OnFailure');
  assert.equal(restarts('OnFailure', 1), true);
  assert.equal(restarts('OnFailure', 0), false);
  assert.equal(restarts('Never', 137), false);
  assert.equal(restarts('Always', 0), true);
});

test('back-off doubles from 1 s and stops at 20 s', () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 10].map(restartBackoffMs),
    [1000, 2000, 4000, 8000, 16000, 20000, 20000],
  );
});

test('a signal death reports 128 + signal, like a kubelet', () => {
  assert.deepEqual(terminationOf(null, 9, at, at), {
    exitCode: 137,
    signal: 9,
    reason: 'Error',
    startedAt: at,
    finishedAt: at,
  });
  assert.equal(ok.reason, 'Completed');
  assert.equal(failed.reason, 'Error');
});

test('phase: Pending before any start, Running while restarting, Succeeded only when every container exited 0', () => {
  const c = (s: Partial<ContainerState>): ContainerState => ({ name: 'c', restartCount: 0, ...s });
  assert.equal(podPhase([c({ waiting: { reason: 'ContainerCreating' } })]), 'Pending');
  assert.equal(
    podPhase([c({ waiting: { reason: 'CrashLoopBackOff' }, restartCount: 2, lastTerminated: failed })]),
    'Running',
  );
  assert.equal(podPhase([c({ running: { startedAt: at } }), c({ terminated: ok })]), 'Running');
  assert.equal(podPhase([c({ terminated: ok }), c({ terminated: ok })]), 'Succeeded');
  assert.equal(podPhase([c({ terminated: ok }), c({ terminated: failed })]), 'Failed');
  assert.equal(podPhase([]), 'Pending');
});

test('status: Ready only with every container running; podIP, restarts and last exit reported', () => {
  const pod: V1Pod = {
    metadata: { uid: 'u' },
    spec: {
      containers: [
        { name: 'pytorch', image: 'host' },
        { name: 'sidecar', image: 'host' },
      ],
    },
  };
  const running: ContainerState = {
    name: 'pytorch',
    restartCount: 1,
    running: { startedAt: at },
    lastTerminated: failed,
  };
  const waiting: ContainerState = {
    name: 'sidecar',
    restartCount: 0,
    waiting: { reason: 'ContainerCreating' },
  };
  const partial = podStatus(pod, [running, waiting], { podIP: '10.247.0.2', hostIP: '10.247.0.1' }, at);
  assert.equal(partial.phase, 'Running');
  assert.equal(partial.podIP, '10.247.0.2');
  assert.equal(partial.conditions.find((c) => c.type === 'Ready')?.status, 'False');
  assert.equal(partial.containerStatuses[0]?.restartCount, 1);
  assert.deepEqual(partial.containerStatuses[0]?.lastState, { terminated: failed });
  const ready = podStatus(
    pod,
    [running, { ...waiting, running: { startedAt: at }, waiting: undefined }],
    { hostIP: 'h' },
    at,
  );
  assert.equal(ready.conditions.find((c) => c.type === 'Ready')?.status, 'True');
  assert.equal(ready.podIP, undefined);
});

test('the job hosts file has localhost and one line per pod, sorted', () => {
  assert.equal(
    renderHosts([
      { ip: '10.0.0.3', name: 'j-worker-1' },
      { ip: '10.0.0.2', name: 'j-worker-0' },
    ]),
    '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n10.0.0.2\tj-worker-0\n10.0.0.3\tj-worker-1\n',
  );
});

test('sidecars keep the pod Running until they stop, and their exit codes do not decide the phase', () => {
  const c = (s: Partial<ContainerState>): ContainerState => ({ name: 'c', restartCount: 0, ...s });
  const sigterm = terminationOf(null, 15, at, at);
  assert.equal(podPhase([c({ terminated: ok })], [c({ running: { startedAt: at } })]), 'Running');
  assert.equal(podPhase([c({ terminated: ok })], [c({ terminated: sigterm })]), 'Succeeded');
  assert.equal(podPhase([c({ terminated: failed })], [c({ terminated: ok })]), 'Failed');
  const pod: V1Pod = {
    metadata: { uid: 'u' },
    spec: {
      initContainers: [{ name: 'sidecar', image: 's', restartPolicy: 'Always' }],
      containers: [{ name: 'main', image: 'm' }],
    },
  };
  const status = podStatus(pod, [c({ name: 'main', running: { startedAt: at } })], { hostIP: 'h' }, at, [
    c({ name: 'sidecar', waiting: { reason: 'ContainerCreating' } }),
  ]);
  assert.equal(status.conditions.find((x) => x.type === 'Ready')?.status, 'False');
  assert.equal(status.initContainerStatuses?.[0]?.image, 's');
});
