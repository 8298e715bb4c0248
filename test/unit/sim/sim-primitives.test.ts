import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import { matchesLabels, parseLabelSelector } from '../../../lib/label-selector.js';
import { mulberry32, streamSeed } from '../../../lib/sim/prng.js';
import {
  bytesToMemoryQuantity,
  cpuQuantityToMillis,
  memoryQuantityToBytes,
  parseQuantity,
} from '../../../lib/sim/quantity.js';
import { choosePreemption, firstFitNode, preferredFitNode } from '../../../lib/sim/scheduler-emulation.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { alertmanagerWebhook, eventBridgeScheduledEvent } from '../../../lib/sim/simulated-triggers.js';
import {
  pytorchJobManifest,
  statefulSetManifest,
  tfJobManifest,
} from '../../../lib/sim/training-job-manifests.js';
import { advanceTraining } from '../../../lib/sim/training-progress.js';
import { parseAlarm } from '../../../lib/triggers/alarm-payload.js';
import { parseClusterEvent } from '../../../lib/triggers/cluster-event-payload.js';
import { parseSchedule } from '../../../lib/triggers/schedule-payload.js';
import { FIXED_APP_MODEL, GiB } from './fixed-app-model.js';

const GPU = { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 1 };

describe('quantities', () => {
  it('parses what the CRD schema accepts and rejects the rest', () => {
    assert.equal(cpuQuantityToMillis('500m'), 500);
    assert.equal(cpuQuantityToMillis('2.5'), 2500);
    assert.equal(memoryQuantityToBytes('1.5Gi'), 1.5 * GiB);
    assert.equal(memoryQuantityToBytes('1e9'), 1e9);
    assert.equal(memoryQuantityToBytes('2G'), 2e9);
    assert.equal(parseQuantity('lots'), undefined);
    assert.equal(parseQuantity('1Gb'), undefined);
    assert.equal(bytesToMemoryQuantity(7.5 * GiB), '7680Mi');
  });
});

describe('label selectors', () => {
  it('ANDs equality, inequality and existence terms', () => {
    const selector = parseLabelSelector('a=1, b!=2,c,!d');
    assert.ok(matchesLabels(selector, { a: '1', b: '3', c: 'x' }));
    assert.ok(!matchesLabels(selector, { a: '1', b: '2', c: 'x' }));
    assert.ok(!matchesLabels(selector, { a: '1', c: 'x', d: 'y' }));
    assert.throws(() => parseLabelSelector('a in (1,2)'), RangeError);
  });
});

describe('scheduler emulation', () => {
  const nodes = [
    { name: 'n0', allocatable: { cpuMillis: 16_000, memoryBytes: 64 * GiB, gpus: 2 } },
    { name: 'n1', allocatable: { cpuMillis: 16_000, memoryBytes: 64 * GiB, gpus: 2 } },
  ];
  const bound = [
    { key: 'a', nodeName: 'n0', requests: GPU, priority: 100, boundAt: 0 },
    { key: 'b', nodeName: 'n0', requests: GPU, priority: 10, boundAt: 0 },
    { key: 'c', nodeName: 'n1', requests: GPU, priority: 10, boundAt: 5 },
    { key: 'd', nodeName: 'n1', requests: GPU, priority: 10, boundAt: 9 },
  ];

  it("binds where the pod's preferred node affinity weighs most among nodes that fit, first fit among equals", () => {
    const three = [...nodes, { name: 'n2', allocatable: nodes[0]?.allocatable ?? GPU }];
    const prefer = (names: string[], weight = 50) => ({ weight, operator: 'In' as const, names });
    const avoid = (names: string[], weight = 100) => ({ weight, operator: 'NotIn' as const, names });
    assert.equal(preferredFitNode(three, [], GPU, []), 'n0', 'no terms: first fit');
    assert.equal(preferredFitNode(three, [], GPU, [prefer(['n2'])]), 'n2');
    // The preferred node is full: first fit among the rest.
    assert.equal(preferredFitNode(three, bound.slice(2), GPU, [prefer(['n1'])]), 'n0');
    assert.equal(preferredFitNode(three, [], GPU, [avoid(['n0'])]), 'n1');
    // Weights add up: avoiding n2 (100) outweighs preferring it (50).
    assert.equal(preferredFitNode(three, [], GPU, [prefer(['n2']), avoid(['n2'])]), 'n0');
    assert.equal(preferredFitNode(three, bound, { ...GPU, gpus: 3 }, [prefer(['n2'])]), undefined);
  });

  it('binds first fit and preempts the lowest-priority, newest pod where fewest matter', () => {
    assert.equal(firstFitNode(nodes, bound.slice(0, 2), GPU), 'n1');
    assert.equal(firstFitNode(nodes, bound, GPU), undefined);
    assert.deepEqual(choosePreemption(nodes, bound, { requests: GPU, priority: 1000 }), {
      nodeName: 'n0',
      victims: ['b'],
    });
    const twoGpus = { ...GPU, gpus: 2 };
    assert.deepEqual(choosePreemption(nodes, bound, { requests: twoGpus, priority: 1000 }), {
      nodeName: 'n1',
      victims: ['d', 'c'],
    });
    assert.equal(choosePreemption(nodes, bound, { requests: GPU, priority: 10 }), undefined);
  });
});

describe('training progress arithmetic', () => {
  it('pays the stall first and completes at the exact instant the target is reached', () => {
    assert.deepEqual(
      advanceTraining({ processed: 0, target: 1000, throughput: 10, from: 0, to: 10, stalledUntil: 4 }),
      {
        processed: 60,
        effectiveSeconds: 6,
      },
    );
    assert.deepEqual(
      advanceTraining({ processed: 950, target: 1000, throughput: 10, from: 100, to: 110, stalledUntil: 0 }),
      {
        processed: 1000,
        effectiveSeconds: 5,
        completedAt: 105,
      },
    );
  });

  it('draws the same numbers from the same seed', () => {
    const a = mulberry32(9);
    const b = mulberry32(9);
    const c = mulberry32(10);
    const xs = [a(), a(), a()];
    assert.deepEqual([b(), b(), b()], xs);
    assert.notDeepEqual([c(), c(), c()], xs);
    assert.ok(xs.every((x) => x >= 0 && x < 1));
  });

  it('names streams: the same seed and name replay, another name or seed draws another stream', () => {
    assert.equal(streamSeed(1, 'workload-1'), streamSeed(1, 'workload-1'));
    const seeds = new Set(
      ['workload-1', 'workload-2', 'workload-10'].flatMap((n) => [1, 2].map((s) => streamSeed(s, n))),
    );
    assert.equal(seeds.size, 6);
    assert.ok([...seeds].every((s) => Number.isInteger(s) && s >= 0 && s < 2 ** 32));
  });
});

describe('simulated objects read by the production parsers and adapters', () => {
  it('manifests read as jobs with the elastic bounds and job facts', () => {
    const facts = {
      namespace: 'ns',
      app: 'toy',
      workers: 2,
      minReplicas: 1,
      maxReplicas: 6,
      sizing: GPU,
      localBatchSize: 32,
    };
    const py = readJob(pytorchJobManifest({ ...facts, name: 'py' }));
    assert.equal(py.elastic, true);
    assert.equal(py.signature, 'toy');
    assert.equal(py.localBatchSize, 32);
    assert.deepEqual([py.roles[0]?.minReplicas, py.roles[0]?.maxReplicas], [1, 6]);
    const tf = readJob(tfJobManifest({ ...facts, name: 'tf', ps: 1, psSizing: { ...GPU, gpus: 0 } }));
    assert.deepEqual(
      tf.roles.map((r) => [r.role, r.replicas, r.maxReplicas]),
      [
        ['PS', 1, 1],
        ['Worker', 2, 6],
      ],
    );
    assert.equal(tf.elastic, true);
    const sts = readJob(statefulSetManifest({ ...facts, name: 'sts' }));
    assert.equal(sts.elastic, true);
    assert.equal(sts.roles[0]?.maxReplicas, 6);
  });

  it('alert, schedule and pod watch payloads parse to the job they concern', async () => {
    const ref = { kind: 'PyTorchJob' as const, namespace: 'ns', name: 'py' };
    assert.deepEqual(
      parseAlarm(alertmanagerWebhook(ref, 0)).map((t) => t.ref),
      [ref],
    );
    assert.deepEqual(parseSchedule(eventBridgeScheduledEvent(0, 1)), { source: 'eventbridge' });
    const sim = new SimulatedCluster({ seed: 1, apps: FIXED_APP_MODEL });
    sim.submitJob(
      pytorchJobManifest({ ...ref, app: 'toy', workers: 1, minReplicas: 1, maxReplicas: 2, sizing: GPU }),
    );
    sim.step(10);
    const events = sim.drainEvents();
    const podEvent = events.find((e) => e.object.kind === 'Pod');
    assert.ok(podEvent);
    const parsed = parseClusterEvent(podEvent);
    assert.equal(parsed.subject, 'pod');
    assert.deepEqual(parsed.subject === 'pod' ? parsed.ref : undefined, ref);
    const jobEvent = events.find((e) => e.object.kind === 'PyTorchJob');
    assert.equal(parseClusterEvent(jobEvent).subject, 'job');
  });
});
