// A review on an alert (decideRuntime) judges a job on its own step-time samples: priors alone (the samples of
// its signature's profile) never grow it, however well they say it scales.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JobSnapshot } from '../../../lib/actuator.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { decideRuntime } from '../../../lib/decisions/runtime-review.js';
import type { ClusterCapacity, JobView, StepSample } from '../../../lib/types.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
const ONE_GPU = { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 };

const view: JobView = {
  ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'fresh' },
  uid: 'uid-fresh',
  resourceVersion: '1',
  priority: 0,
  elastic: true,
  signature: 'fresh',
  localBatchSize: 32,
  roles: [
    {
      role: 'Worker',
      replicas: 2,
      minReplicas: 1,
      maxReplicas: 16,
      containerName: 'pytorch',
      containerIndex: 0,
      requests: ONE_GPU,
      limits: ONE_GPU,
    },
  ],
  managed: true,
  state: { oomCount: 0, paused: false },
};
const snapshot = { obj: {}, view, pods: [], rawPods: [] } as unknown as JobSnapshot;
const idle: ClusterCapacity = {
  nodes: [
    {
      name: 'n1',
      allocatable: { cpuMillis: 16_000, memoryBytes: 16 * GiB, gpus: 16 },
      allocated: { cpuMillis: 2000, memoryBytes: 2 * GiB, gpus: 2 },
      schedulable: true,
    },
  ],
};
/** Earlier runs of its signature: linear scaling from 1 to 8 workers (the same step time at every size). */
const priors: StepSample[] = [1, 2, 4, 8].flatMap((replicas) =>
  Array.from({ length: 5 }, () => ({ replicas, nodes: 1, localBatchSize: 32, stepTime: 0.5 })),
);

describe('decideRuntime: a job without step-time samples', () => {
  it('is kept, however well its priors say it scales, and the reason says what is missing', () => {
    const observed = { samples: [], usage: undefined, series: undefined, samplesProcessed: 0 };
    const plan = decideRuntime(snapshot, observed, idle, DEFAULT_POLICY_CONFIG, NOW, undefined, priors);
    assert.deepEqual(plan.changes, []);
    assert.equal(
      plan.reason,
      'keep 2 workers: no step-time samples: its sidecar reports no training step yet',
    );
  });

  it('with samples of its own, the same priors do grow it (the case above is kept for lack of samples alone)', () => {
    const samples = Array.from({ length: 5 }, (_, i) => ({
      replicas: 2,
      nodes: 1,
      localBatchSize: 32,
      stepTime: 0.5,
      at: NOW - 60 * i,
    }));
    const observed = { samples, usage: undefined, series: undefined, samplesProcessed: 0 };
    const plan = decideRuntime(snapshot, observed, idle, DEFAULT_POLICY_CONFIG, NOW, undefined, priors);
    assert.ok(plan.changes.length > 0, plan.reason);
  });
});
