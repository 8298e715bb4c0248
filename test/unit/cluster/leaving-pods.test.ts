// A rebalance shortly after another must not count a donor's terminating pods as held: the queued job it shrank
// them for would look unplaced again, and a second donor would be shrunk for it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { capacityOf, LEAVING_OVERDUE_SECONDS } from '../../../lib/cluster/load-capacity.js';

const NOW = Date.parse('2026-12-05T12:00:00Z') / 1000;

const node: V1Node = {
  metadata: { name: 'gpu-0' },
  status: { allocatable: { cpu: '32', memory: '128Gi', 'nvidia.com/gpu': '4' } },
};

function gpuPod(name: string, deletionAt?: number): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'ml',
      ...(deletionAt !== undefined ? { deletionTimestamp: new Date(deletionAt * 1000) } : {}),
    },
    spec: {
      nodeName: 'gpu-0',
      containers: [
        { name: 'pytorch', resources: { requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' } } },
      ],
    },
    status: { phase: 'Running' },
  };
}

const freeGpus = (pods: V1Pod[], now?: number) => {
  const [view] = capacityOf([node], pods, now === undefined ? {} : { now }).nodes;
  return (view?.allocatable.gpus ?? 0) - (view?.allocated.gpus ?? 0);
};

describe('capacityOf: pods being deleted', () => {
  it('counts a pod in its graceful termination as leaving', () => {
    const pods = [gpuPod('a'), gpuPod('b', NOW + 25), gpuPod('c', NOW - 10)];
    assert.equal(freeGpus(pods, NOW), 3);
  });

  it('holds the room of one whose deletion is overdue (stuck), and of every pod without a clock', () => {
    const stuck = [gpuPod('a'), gpuPod('b', NOW - LEAVING_OVERDUE_SECONDS)];
    assert.equal(freeGpus(stuck, NOW), 2);
    assert.equal(freeGpus([gpuPod('a'), gpuPod('b', NOW + 25)]), 2);
  });
});
