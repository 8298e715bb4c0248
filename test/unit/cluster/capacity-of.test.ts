// Free capacity is what every policy plans growth into: a pod counted as holding room that it does not hold
// idles GPUs, and room counted free that is not makes growth that stays Pending (or a queued job's start that
// shrinks running jobs for nothing). Each case below is one rule of capacityOf, podsOf, exceptPodsOf or
// exceptWaitingPodsOf.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1NodeCondition, V1Pod } from '@kubernetes/client-node';
import {
  capacityOf,
  capacityReading,
  exceptPodsOf,
  exceptWaitingPodsOf,
  LEAVING_OVERDUE_SECONDS,
  podsOf,
} from '../../../lib/cluster/load-capacity.js';
import type { ClusterCapacity, JobRef } from '../../../lib/types.js';

function gpuNode(name: string, ready?: V1NodeCondition['status'], cordoned = false): V1Node {
  return {
    metadata: { name },
    spec: cordoned ? { unschedulable: true } : {},
    status: {
      allocatable: { cpu: '32', memory: '128Gi', 'nvidia.com/gpu': '4' },
      ...(ready ? { conditions: [{ type: 'Ready', status: ready }] } : {}),
    },
  };
}

interface PodOptions {
  node?: string;
  phase?: string;
  priority?: number;
  job?: string;
  kind?: string;
  namespace?: string;
  containers?: number;
  /** Seconds since the epoch of its deletionTimestamp. */
  deletionAt?: number;
  /** Held back by a scheduling gate (Kueue's admission). */
  gated?: boolean;
}

function gpuPod(name: string, o: PodOptions = {}): V1Pod {
  const container = (i: number) => ({
    name: `c${i}`,
    resources: { requests: { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' } },
  });
  return {
    metadata: {
      name,
      namespace: o.namespace ?? 'ml',
      ...(o.deletionAt !== undefined ? { deletionTimestamp: new Date(o.deletionAt * 1000) } : {}),
      ownerReferences: [
        {
          apiVersion: 'kubeflow.org/v1',
          kind: o.kind ?? 'PyTorchJob',
          name: o.job ?? 'train',
          uid: `${o.kind}/${o.job}`,
          controller: true,
        },
      ],
    },
    spec: {
      ...(o.node ? { nodeName: o.node } : {}),
      ...(o.priority !== undefined ? { priority: o.priority } : {}),
      containers: Array.from({ length: o.containers ?? 1 }, (_, i) => container(i)),
      ...(o.gated ? { schedulingGates: [{ name: 'kueue.x-k8s.io/admission' }] } : {}),
    },
    status: { phase: o.phase ?? (o.node ? 'Running' : 'Pending') },
  };
}

const freeGpusOn = (capacity: ClusterCapacity, node = 'gpu-0') => {
  const view = capacity.nodes.find((n) => n.name === node);
  return (view?.allocatable.gpus ?? 0) - (view?.allocated.gpus ?? 0);
};

describe('capacityOf: which pods hold room', () => {
  const node = gpuNode('gpu-0', 'True');

  it('frees the room of finished pods and keeps that of running ones', () => {
    const pods = [
      gpuPod('done', { node: 'gpu-0', phase: 'Succeeded' }),
      gpuPod('crashed', { node: 'gpu-0', phase: 'Failed' }),
      gpuPod('running', { node: 'gpu-0' }),
    ];
    assert.equal(freeGpusOn(capacityOf([node], pods)), 3);
  });

  it('counts a pod bound and still Pending (pulling its image) once, on its node', () => {
    assert.equal(freeGpusOn(capacityOf([node], [gpuPod('pulling', { node: 'gpu-0', phase: 'Pending' })])), 3);
  });

  it('sums every container of a pod, as the scheduler reserves the whole pod', () => {
    assert.equal(freeGpusOn(capacityOf([node], [gpuPod('sidecar', { node: 'gpu-0', containers: 2 })])), 2);
  });

  it('with preemptibleBelow, frees the room of lower-priority pods only, bound or waiting', () => {
    const pods = [
      gpuPod('low', { node: 'gpu-0', priority: 50 }),
      gpuPod('no-priority', { node: 'gpu-0' }),
      gpuPod('same', { node: 'gpu-0', priority: 100 }),
      gpuPod('waiting-low', { priority: 50 }),
      gpuPod('waiting-same', { priority: 100 }),
    ];
    assert.equal(freeGpusOn(capacityOf([node], pods)), 0);
    // The scheduler preempts below, never at, the preemptor's priority.
    assert.equal(freeGpusOn(capacityOf([node], pods, { preemptibleBelow: 100 })), 2);
  });

  it('takes a pod without a priority as priority 0', () => {
    const pods = [gpuPod('no-priority', { node: 'gpu-0' }), gpuPod('waiting', {})];
    assert.equal(freeGpusOn(capacityOf([node], pods, { preemptibleBelow: 1 })), 4);
    assert.equal(freeGpusOn(capacityOf([node], pods, { preemptibleBelow: 0 })), 2);
  });
});

describe('capacityOf: which nodes take pods', () => {
  const schedulable = (nodes: V1Node[]) =>
    Object.fromEntries(capacityOf(nodes, []).nodes.map((n) => [n.name, n.schedulable]));

  it('takes ready and not-yet-reporting nodes; not NotReady, unreachable or cordoned ones', () => {
    assert.deepEqual(
      schedulable([
        gpuNode('ready', 'True'),
        gpuNode('no-condition'),
        gpuNode('not-ready', 'False'),
        gpuNode('unreachable', 'Unknown'),
        gpuNode('cordoned', 'True', true),
      ]),
      { cordoned: false, 'no-condition': true, 'not-ready': false, ready: true, unreachable: false },
    );
  });

  it('reads the Ready condition among the others a kubelet reports', () => {
    const node = gpuNode('gpu-0');
    node.status = {
      ...node.status,
      conditions: [
        { type: 'MemoryPressure', status: 'False' },
        { type: 'DiskPressure', status: 'False' },
        { type: 'Ready', status: 'True' },
      ],
    };
    assert.deepEqual(schedulable([node]), { 'gpu-0': true });
  });

  it('lists the nodes by name, the order every first-fit placement walks', () => {
    const names = capacityOf([gpuNode('gpu-2'), gpuNode('gpu-0'), gpuNode('gpu-1')], []).nodes.map(
      (n) => n.name,
    );
    assert.deepEqual(names, ['gpu-0', 'gpu-1', 'gpu-2']);
  });
});

describe("podsOf and exceptPodsOf: a job's own pods, never another's of the same name", () => {
  const ref: JobRef = { kind: 'PyTorchJob', namespace: 'ml', name: 'train' };
  const own = gpuPod('own');
  const otherNamespace = gpuPod('tenant-b', { namespace: 'team-b' });
  const otherKind = gpuPod('tf', { kind: 'TFJob' });
  const otherName = gpuPod('other', { job: 'train-2' });

  it('matches kind, namespace and name together', () => {
    const of = podsOf(ref);
    assert.deepEqual([own, otherNamespace, otherKind, otherName].map(of), [true, false, false, false]);
  });

  it('owns no pod that names no job', () => {
    const bare: V1Pod = { metadata: { name: 'bare', namespace: 'ml' }, spec: { containers: [] } };
    assert.equal(podsOf(ref)(bare), false);
  });

  it("holds room for every waiting pod but the decided job's own", () => {
    const node = gpuNode('gpu-0', 'True');
    const pods = [own, otherNamespace];
    assert.equal(freeGpusOn(capacityOf([node], pods)), 2);
    assert.equal(freeGpusOn(capacityOf([node], pods, { holdRoomFor: exceptPodsOf(ref) })), 3);
  });
});

// A rebalance shortly after another must not count a donor's terminating pods as held: the queued job it shrank
// them for would look unplaced again, and a second donor would be shrunk for it.
describe('capacityOf: pods being deleted', () => {
  const NOW = Date.parse('2026-12-05T12:00:00Z') / 1000;
  const node = gpuNode('gpu-0');
  const bound = (name: string, deletionAt?: number) =>
    gpuPod(name, { node: 'gpu-0', ...(deletionAt !== undefined ? { deletionAt } : {}) });
  const freeGpus = (pods: V1Pod[], now?: number) =>
    freeGpusOn(capacityOf([node], pods, now === undefined ? {} : { now }));

  it('counts a pod in its graceful termination as leaving', () => {
    const pods = [bound('a'), bound('b', NOW + 25), bound('c', NOW - 10)];
    assert.equal(freeGpus(pods, NOW), 3);
  });

  it('holds the room of one whose deletion is overdue (stuck), and of every pod without a clock', () => {
    const stuck = [bound('a'), bound('b', NOW - LEAVING_OVERDUE_SECONDS)];
    assert.equal(freeGpus(stuck, NOW), 2);
    assert.equal(freeGpus([bound('a'), bound('b', NOW + 25)]), 2);
  });
});

// The schedule's rebalance places queued jobs' waiting pods itself: the capacity it is given must not hold their
// room as well, or a queued job that fits would look unplaced and running jobs would shrink for it.
describe('exceptWaitingPodsOf', () => {
  const QUEUED: JobRef = { kind: 'PyTorchJob', namespace: 'ml', name: 'queued' };
  const node = gpuNode('gpu-0');
  const pods = [
    gpuPod('queued-worker-0', { job: 'queued' }),
    gpuPod('queued-worker-1', { job: 'queued' }),
    gpuPod('queued-worker-2', { job: 'queued', gated: true }),
    gpuPod('other-worker-0', { job: 'other' }),
  ];
  const freeGpus = (holdRoomFor?: (pod: V1Pod) => boolean) =>
    freeGpusOn(capacityOf([node], pods, holdRoomFor ? { holdRoomFor } : {}));

  it("holds no room for the named jobs' schedulable waiting pods, and room for everything else", () => {
    assert.equal(freeGpus(), 0);
    // The gated pod waits on its gate's controller and keeps its room; so does another job's pod.
    assert.equal(freeGpus(exceptWaitingPodsOf([QUEUED])), 2);
    assert.equal(freeGpus(exceptWaitingPodsOf([{ ...QUEUED, name: 'other' }])), 1);
    assert.equal(freeGpus(exceptWaitingPodsOf([])), 0);
  });

  it('matches kind, namespace and name of every job it names, not only the first', () => {
    const others: JobRef[] = [
      { ...QUEUED, name: 'other' },
      { ...QUEUED, kind: 'TFJob' },
      { ...QUEUED, namespace: 'team-b' },
    ];
    assert.equal(freeGpus(exceptWaitingPodsOf(others)), 1);
    assert.equal(freeGpus(exceptWaitingPodsOf([...others, QUEUED])), 3);
  });
});

describe('capacityReading: one pass over the bound pods, any choice of pending pods held', () => {
  const nodes = [gpuNode('gpu-0'), gpuNode('gpu-1')];
  const pods = [
    gpuPod('a-0', { job: 'a', node: 'gpu-0' }),
    gpuPod('a-1', { job: 'a' }),
    gpuPod('b-0', { job: 'b', containers: 3 }),
    gpuPod('c-0', { job: 'c', containers: 2 }),
    gpuPod('low-0', { job: 'low', node: 'gpu-1', priority: -1 }),
    gpuPod('done-0', { job: 'done', node: 'gpu-1', phase: 'Succeeded' }),
  ];
  // Worked out by hand: bound pods first (a-0 on gpu-0; low-0 on gpu-1 unless preemptible; done-0 finished),
  // then the held pending pods in list order, each on the first node by name with room (a-1: 1 GPU, b-0: 3,
  // c-0: 2). GPUs allocated on [gpu-0, gpu-1].
  const choices: Array<[string, ((pod: V1Pod) => boolean) | undefined, [number, number], [number, number]]> =
    [
      ['every pending pod held', undefined, [4, 4], [4, 3]],
      ["all but a's", exceptPodsOf({ kind: 'PyTorchJob', namespace: 'ml', name: 'a' }), [4, 3], [4, 2]],
      ["all but b's", exceptPodsOf({ kind: 'PyTorchJob', namespace: 'ml', name: 'b' }), [4, 1], [4, 0]],
      [
        "all but c's",
        exceptWaitingPodsOf([{ kind: 'PyTorchJob', namespace: 'ml', name: 'c' }]),
        [2, 4],
        [2, 3],
      ],
      ['none held', () => false, [1, 1], [1, 0]],
    ];
  const allocated = (capacity: ClusterCapacity) => capacity.nodes.map((n) => n.allocated.gpus);

  it('holds each choice of pending pods first-fit on the bound pods, asked in any order', () => {
    for (const preemptible of [false, true]) {
      const reading = capacityReading(nodes, pods, preemptible ? { preemptibleBelow: 0 } : {});
      for (const [what, holdRoomFor, bound, withPreemption] of [...choices, ...choices.toReversed()])
        assert.deepEqual(allocated(reading(holdRoomFor)), preemptible ? withPreemption : bound, what);
    }
  });

  it('hands out a capacity of its own each time: a policy that reserves in one does not shrink the next', () => {
    const reading = capacityReading(nodes, pods);
    for (const holdRoomFor of [() => false, undefined]) {
      const first = reading(holdRoomFor);
      const before = structuredClone(first);
      const node = first.nodes[0];
      assert.ok(node);
      // The nodes nothing was placed on are shared, frozen: changing one throws rather than reach the next.
      try {
        node.allocated.gpus += 4;
      } catch (error) {
        assert.ok(error instanceof TypeError, String(error));
      }
      first.nodes.pop();
      assert.deepEqual(reading(holdRoomFor), before);
    }
  });
});
