import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { workerNodesOf } from '../../lib/decisions/runtime-review.js';
import type { PodView, Resources } from '../../lib/types.js';

const ONE_GPU: Resources = { cpuMillis: 1000, memoryBytes: 1024 ** 3, gpus: 1 };

function pod(index: number, nodeName: string | undefined, extra: Partial<PodView> = {}): PodView {
  return {
    name: `job-worker-${index}`,
    namespace: 'ml',
    role: 'Worker',
    index,
    phase: 'Running',
    restartCount: 0,
    requests: ONE_GPU,
    limits: ONE_GPU,
    ...(nodeName !== undefined ? { nodeName } : {}),
    ...extra,
  };
}

describe('workerNodesOf: the node of each worker by replica index, for the rebalance', () => {
  it('orders the nodes by replica index, whatever the pod order', () => {
    assert.deepEqual(workerNodesOf([pod(2, 'b'), pod(0, 'a'), pod(1, 'a')], 3), ['a', 'a', 'b']);
  });

  it('is unknown while a worker is pending, unplaced or missing', () => {
    assert.equal(workerNodesOf([pod(0, 'a'), pod(1, 'b', { phase: 'Pending' })], 2), undefined);
    assert.equal(workerNodesOf([pod(0, 'a'), pod(1, undefined)], 2), undefined);
    assert.equal(workerNodesOf([pod(0, 'a')], 2), undefined);
  });

  it('ignores pods of other roles and workers beyond the replicas (being removed)', () => {
    const master = pod(0, 'm', { role: 'Master', name: 'job-master-0' });
    assert.deepEqual(workerNodesOf([master, pod(0, 'a'), pod(1, 'a'), pod(2, 'c')], 2), ['a', 'a']);
  });
});
