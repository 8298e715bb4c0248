// The schedule's rebalance places queued jobs' waiting pods itself: the capacity it is given must not hold their
// room as well, or a queued job that fits would look unplaced and running jobs would shrink for it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { capacityOf, exceptWaitingPodsOf } from '../../../lib/cluster/load-capacity.js';
import type { JobRef } from '../../../lib/types.js';

const node: V1Node = {
  metadata: { name: 'gpu-0' },
  status: { allocatable: { cpu: '32', memory: '128Gi', 'nvidia.com/gpu': '4' } },
};

const QUEUED: JobRef = { kind: 'PyTorchJob', namespace: 'ml', name: 'queued' };

function waitingPod(name: string, job: string, gated = false): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'ml',
      ownerReferences: [
        { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: job, uid: job, controller: true },
      ],
    },
    spec: {
      containers: [
        { name: 'pytorch', resources: { requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' } } },
      ],
      ...(gated ? { schedulingGates: [{ name: 'kueue.x-k8s.io/admission' }] } : {}),
    },
    status: { phase: 'Pending' },
  };
}

const freeGpus = (pods: V1Pod[], holdRoomFor?: (pod: V1Pod) => boolean) => {
  const [view] = capacityOf([node], pods, holdRoomFor ? { holdRoomFor } : {}).nodes;
  return (view?.allocatable.gpus ?? 0) - (view?.allocated.gpus ?? 0);
};

describe('exceptWaitingPodsOf', () => {
  const pods = [
    waitingPod('queued-worker-0', 'queued'),
    waitingPod('queued-worker-1', 'queued'),
    waitingPod('queued-worker-2', 'queued', true),
    waitingPod('other-worker-0', 'other'),
  ];

  it("holds no room for the named jobs' schedulable waiting pods, and room for everything else", () => {
    assert.equal(freeGpus(pods), 0);
    // The gated pod waits on its gate's controller and keeps its room; so does another job's pod.
    assert.equal(freeGpus(pods, exceptWaitingPodsOf([QUEUED])), 2);
    assert.equal(freeGpus(pods, exceptWaitingPodsOf([{ ...QUEUED, name: 'other' }])), 1);
    assert.equal(freeGpus(pods, exceptWaitingPodsOf([])), 0);
  });
});
