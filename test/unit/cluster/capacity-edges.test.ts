// The rules of capacityOf that capacity-of.test.ts does not reach through GPUs alone: CPU and memory (a CPU-only
// pool is planned in them), a resize's own pods, pods that ended before they were bound, objects with parts
// missing, and loadCapacity's reading of the whole cluster.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import {
  capacityOf,
  exceptPodsOf,
  exceptWaitingPodsOf,
  loadCapacity,
  loadNodesAndPods,
  podsOf,
} from '../../../lib/cluster/load-capacity.js';
import type { ClusterCapacity, JobRef, Resources } from '../../../lib/types.js';

const GiB = 1024 ** 3;

function cpuNode(name: string): V1Node {
  return {
    metadata: { name },
    spec: {},
    status: { allocatable: { cpu: '8', memory: '32Gi' }, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

interface PodOptions {
  node?: string;
  phase?: string;
  job?: string;
  deletionAt?: number;
  requests?: Record<string, string>[];
}

function pod(name: string, o: PodOptions = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'ml',
      ...(o.deletionAt !== undefined ? { deletionTimestamp: new Date(o.deletionAt * 1000) } : {}),
      ownerReferences: [
        {
          apiVersion: 'kubeflow.org/v1',
          kind: 'PyTorchJob',
          name: o.job ?? 'train',
          uid: 'u',
          controller: true,
        },
      ],
    },
    spec: {
      ...(o.node ? { nodeName: o.node } : {}),
      containers: (o.requests ?? [{ cpu: '1', memory: '1Gi' }]).map((requests, i) => ({
        name: `c${i}`,
        resources: { requests },
      })),
    },
    status: { phase: o.phase ?? (o.node ? 'Running' : 'Pending') },
  };
}

const viewOf = (capacity: ClusterCapacity, node: string) => {
  const view = capacity.nodes.find((n) => n.name === node);
  assert.ok(view, `node ${node} listed`);
  return view;
};

describe('capacityOf: CPU and memory, not only GPUs', () => {
  it("reads a node's allocatable CPU and memory, and a node without GPUs has none", () => {
    const view = viewOf(capacityOf([cpuNode('cpu-0')], []), 'cpu-0');
    assert.deepEqual(view.allocatable, { cpuMillis: 8 * 1000, memoryBytes: 32 * GiB, gpus: 0 });
  });

  it('a node that reports no allocatable resources offers nothing (and is not misread)', () => {
    const bare: V1Node = { metadata: { name: 'bare' }, spec: {}, status: { allocatable: {} } };
    const none: V1Node = { metadata: { name: 'none' } };
    const capacity = capacityOf([bare, none], []);
    for (const name of ['bare', 'none'])
      assert.deepEqual(viewOf(capacity, name).allocatable, { cpuMillis: 0, memoryBytes: 0, gpus: 0 });
  });

  it("sums every container's CPU and memory into the node's allocated room", () => {
    const requests = [
      { cpu: '1500m', memory: '3Gi' },
      { cpu: '250m', memory: '512Mi' },
    ];
    const capacity = capacityOf([cpuNode('cpu-0')], [pod('p', { node: 'cpu-0', requests })]);
    const expected: Resources = { cpuMillis: 1500 + 250, memoryBytes: 3 * GiB + 512 * 1024 ** 2, gpus: 0 };
    assert.deepEqual(viewOf(capacity, 'cpu-0').allocated, expected);
  });

  it('holds the CPU and memory of a pod created and not yet bound, on the first node it fits', () => {
    const capacity = capacityOf(
      [cpuNode('cpu-0'), cpuNode('cpu-1')],
      [pod('big', { node: 'cpu-0', requests: [{ cpu: '7', memory: '1Gi' }] }), pod('new')],
    );
    // cpu-0 has 1 CPU left, the waiting pod asks 1: it fits there, first in name order.
    assert.deepEqual(viewOf(capacity, 'cpu-0').allocated, { cpuMillis: 8000, memoryBytes: 2 * GiB, gpus: 0 });
    assert.deepEqual(viewOf(capacity, 'cpu-1').allocated, { cpuMillis: 0, memoryBytes: 0, gpus: 0 });
  });
});

describe('capacityOf: which pods hold room (the cases beyond GPUs)', () => {
  const ref: JobRef = { kind: 'PyTorchJob', namespace: 'ml', name: 'train' };

  it('frees the bound pods of the job being resized, and only those (its size is the question)', () => {
    const pods = [pod('own-0', { node: 'cpu-0' }), pod('other-0', { node: 'cpu-0', job: 'other' })];
    const held = (resize?: (p: V1Pod) => boolean) =>
      viewOf(capacityOf([cpuNode('cpu-0')], pods, resize ? { resize } : {}), 'cpu-0').allocated.cpuMillis;
    assert.equal(held(), 2000);
    assert.equal(held(podsOf(ref)), 1000);
  });

  it('holds no room for a pod that ended before it was bound (refused, or deleted while waiting)', () => {
    const pods = ['Failed', 'Succeeded', 'Unknown'].map((phase) => pod(`ended-${phase}`, { phase }));
    const capacity = capacityOf([cpuNode('cpu-0')], pods);
    assert.deepEqual(viewOf(capacity, 'cpu-0').allocated, { cpuMillis: 0, memoryBytes: 0, gpus: 0 });
  });

  it('takes objects with parts missing as holding and offering nothing, without throwing', () => {
    const noStatus: V1Pod = { metadata: { name: 'no-status' }, spec: { containers: [] } };
    const noSpec: V1Pod = { metadata: { name: 'no-spec' }, status: { phase: 'Pending' } };
    const anonymous: V1Node = { spec: {}, status: { allocatable: { cpu: '1' } } };
    const capacity = capacityOf([cpuNode('cpu-0'), anonymous], [noStatus, noSpec]);
    assert.deepEqual(viewOf(capacity, 'cpu-0').allocated, { cpuMillis: 0, memoryBytes: 0, gpus: 0 });
    assert.equal(viewOf(capacity, '').allocatable.cpuMillis, 1000, 'a node without a name is still counted');
    const noSpecNode: V1Node = { metadata: { name: 'no-spec' }, status: { allocatable: { cpu: '1' } } };
    assert.equal(viewOf(capacityOf([noSpecNode], []), 'no-spec').schedulable, true, 'not cordoned');
  });

  it('a bound pod, a waiting pod or a node with parts missing is read, not thrown on, whatever the options', () => {
    const anonymousBound: V1Pod = {
      spec: { nodeName: 'cpu-0', containers: [] },
      status: { phase: 'Running' },
    };
    const noSpec: V1Pod = { metadata: { name: 'no-spec' }, status: { phase: 'Pending' } };
    for (const options of [
      { now: 1 },
      { preemptibleBelow: 1 },
      { holdRoomFor: exceptWaitingPodsOf([ref]) },
    ]) {
      const capacity = capacityOf([cpuNode('cpu-0')], [anonymousBound, noSpec], options);
      assert.deepEqual(viewOf(capacity, 'cpu-0').allocated, { cpuMillis: 0, memoryBytes: 0, gpus: 0 });
    }
  });

  it('a node that reports conditions but no Ready one yet is taken at its word', () => {
    const node = cpuNode('new');
    node.status = { ...node.status, conditions: [{ type: 'MemoryPressure', status: 'False' }] };
    assert.equal(viewOf(capacityOf([node], []), 'new').schedulable, true);
  });

  it("exceptPodsOf holds the room of every other job's waiting pods, and none of the decided job's", () => {
    const pods = [pod('own-0'), pod('other-0', { job: 'other' }), pod('other-1', { job: 'other' })];
    const capacity = capacityOf([cpuNode('cpu-0')], pods, { holdRoomFor: exceptPodsOf(ref) });
    assert.equal(viewOf(capacity, 'cpu-0').allocated.cpuMillis, 2000, "the two pods of 'other'");
  });

  it("asks the caller's holdRoomFor only about pods that wait unbound", () => {
    const asked: string[] = [];
    const holdRoomFor = (p: V1Pod) => {
      asked.push(p.metadata?.name ?? '');
      return true;
    };
    capacityOf(
      [cpuNode('cpu-0')],
      [
        pod('bound', { node: 'cpu-0' }),
        pod('waiting'),
        pod('bound-pending', { node: 'cpu-0', phase: 'Pending' }),
      ],
      { holdRoomFor },
    );
    assert.deepEqual(asked, ['waiting']);
  });
});

/** A cluster that serves only the reads loadCapacity makes, and records how it was asked. */
function readOnlyCluster(nodes: V1Node[], pods: V1Pod[]) {
  const podQueries: [string | undefined, string | undefined][] = [];
  const refuse = (): never => {
    throw new Error('loadCapacity writes nothing and reads nothing else');
  };
  const cluster: ClusterClient = {
    listNodes: async () => nodes,
    listPods: async (namespace, selector) => {
      podQueries.push([namespace, selector]);
      return pods;
    },
    getJob: refuse,
    listJobs: refuse,
    patchJob: refuse,
    evictPod: refuse,
    createEvent: refuse,
    listWorkloads: refuse,
    getLocalQueue: refuse,
    getClusterQueue: refuse,
    getConfigMap: refuse,
    putConfigMap: refuse,
    getJobState: refuse,
    listJobStates: refuse,
    putJobState: refuse,
  };
  return { cluster, podQueries };
}

describe('loadCapacity and loadNodesAndPods', () => {
  const NOW = Date.parse('2026-12-05T12:00:00Z') / 1000;
  const nodes = [cpuNode('cpu-1'), cpuNode('cpu-0')];
  const pods = [pod('running', { node: 'cpu-0' }), pod('leaving', { node: 'cpu-0', deletionAt: NOW - 5 })];

  it('reads every node and every pod of every namespace, unfiltered', async () => {
    const { cluster, podQueries } = readOnlyCluster(nodes, pods);
    const state = await loadNodesAndPods(cluster);
    assert.deepEqual(state, { nodes, pods });
    assert.deepEqual(podQueries, [[undefined, undefined]]);
  });

  it('computes the capacity at `now`: a pod in its graceful deletion leaves its room free', async () => {
    const { cluster } = readOnlyCluster(nodes, pods);
    const state = await loadCapacity(cluster, NOW);
    assert.equal(state.nodes, nodes);
    assert.equal(state.pods, pods);
    assert.deepEqual(state.capacity, capacityOf(nodes, pods, { now: NOW }));
    assert.equal(
      viewOf(state.capacity, 'cpu-0').allocated.cpuMillis,
      1000,
      'only the running pod holds room',
    );
    // Long after, the same deletion is stuck and its pod holds its room again.
    const late = await loadCapacity(cluster, NOW + 3600);
    assert.equal(viewOf(late.capacity, 'cpu-0').allocated.cpuMillis, 2000);
  });
});
