import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SimulatedAppModel, SimulatedPlacement } from '../../../lib/sim/app-model.js';
import {
  buildMeasuredAppTable,
  canonicalPlacement,
  type MeasuredAppTable,
  measuredStep,
} from '../../../lib/sim/measured-step-times.js';
import {
  type MeasuredRow,
  PolluxTraceError,
  parsePlacementsCsv,
  parseScalabilityCsv,
} from '../../../lib/sim/pollux-traces.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { replicasPerNode } from '../../../lib/sim/training-progress.js';
import { FIXED_APP_MODEL, GiB } from './fixed-app-model.js';

// A toy application whose tables can be checked by hand. Step time = base + 0.01 s per sample of local
// batch, sync = 0.1 x base; placements measured at local batch 10 and 20, scalability at 10 and 20 too.
function row(placement: string, localBatchSize: number, base: number): string {
  return `${placement},${localBatchSize},${base + 0.01 * localBatchSize},${0.1 * base}`;
}
const PLACEMENTS_CSV = [
  'placement,local_bsz,step_time,sync_time',
  row('1', 10, 1),
  row('1', 20, 1),
  row('4', 10, 1.2),
  row('4', 20, 1.2),
  // 2 nodes x 2 replicas measured twice, as different per-node splits: the exact one wins when known.
  row('13', 10, 2),
  row('13', 20, 2),
  row('22', 10, 3),
  row('22', 20, 3),
  row('44', 10, 4),
  row('44', 20, 4),
  row('1111', 10, 5),
  row('1111', 20, 5),
  row('4444', 10, 8),
  row('4444', 20, 8),
].join('\n');
const SCALABILITY_CSV = [
  'num_nodes,num_replicas,local_bsz,step_time,sync_time',
  // 6 nodes: 6 and 8 replicas at local batch 10 and 20; 24 replicas measured at 10 only.
  '6,6,10,6.1,0.6',
  '6,6,20,6.2,0.6',
  '6,8,10,7.1,0.7',
  '6,8,20,7.2,0.7',
  '6,24,10,12.1,1.2',
  '16,64,10,30.1,3',
].join('\n');

function toyTable(maxLocalBatchSize?: number): MeasuredAppTable {
  return buildMeasuredAppTable({
    app: 'toy',
    placements: parsePlacementsCsv(PLACEMENTS_CSV, 'placements.csv'),
    scalability: parseScalabilityCsv(SCALABILITY_CSV, 'scalability.csv'),
    ...(maxLocalBatchSize !== undefined ? { maxLocalBatchSize } : {}),
  });
}

function close(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} != ${expected}`);
}

describe('measured step times (Pollux tables)', () => {
  const table = toyTable();

  it('uses the exact per-node placement, linear in local batch between its measured batches', () => {
    const at15 = measuredStep(table, { replicas: 4, nodes: 2, localBatchSize: 15, perNode: [2, 2] });
    assert.equal(at15.source, 'placement');
    close(at15.stepTime, 3 + 0.15, 'step of 22 at m=15');
    close(at15.syncTime, 0.3, 'sync of 22');
    // A rotation is the same measurement (the artifact's key is the smallest rotation).
    const rotated = measuredStep(table, { replicas: 4, nodes: 2, localBatchSize: 10, perNode: [3, 1] });
    assert.equal(rotated.source, 'placement');
    close(rotated.stepTime, 2.1, 'step of 31 = 13');
  });

  it('without a per-node placement, interpolates the (nodes, replicas, local batch) group means', () => {
    const step = measuredStep(table, { replicas: 4, nodes: 2, localBatchSize: 20 });
    assert.equal(step.source, 'interpolated');
    // Mean of 13 (2.2) and 22 (3.2).
    close(step.stepTime, 2.7, 'mean of the 2-node 4-replica group');
  });

  it('interpolates in replicas at a measured node count', () => {
    const step = measuredStep(table, { replicas: 7, nodes: 6, localBatchSize: 10 });
    close(step.stepTime, (6.1 + 7.1) / 2, 'halfway between 6 and 8 replicas');
    close(step.syncTime, 0.65, 'sync halfway');
  });

  it('interpolates between node counts at the same replicas per node', () => {
    // 5 nodes, 8 replicas = 1.6 per node: halfway between 4 nodes x 6.4 replicas and 6 nodes x 9.6.
    // 4-node column: 6.4 is 20% of the way from 4 ('1111', 5.1) to 16 ('4444', 8.1): 5.7.
    // 6-node column: 9.6 is 10% of the way from 8 (7.1) to 24 (12.1): 7.6.
    const step = measuredStep(table, { replicas: 8, nodes: 5, localBatchSize: 10 });
    close(step.stepTime, 0.5 * 5.7 + 0.5 * 7.6, '5 nodes between the 4- and 6-node columns');
  });

  it('takes the nearest measured value beyond the measured node counts', () => {
    const step = measuredStep(table, { replicas: 80, nodes: 20, localBatchSize: 10 });
    close(step.stepTime, 30.1, 'clamped to 16 nodes x 4');
  });

  it('accumulates gradients above the largest local batch: k micro-batches, one sync', () => {
    const capped = toyTable(8);
    // m = 20 with cap 8: k = 3 micro-batches of 20/3; T(20/3) is below the smallest measured batch (10):
    // flat at T(10) = 1.1, S = 0.1. Step = 1.1 + 2 x (1.1 - 0.1) = 3.1.
    const step = measuredStep(capped, { replicas: 1, nodes: 1, localBatchSize: 20, perNode: [1] });
    close(step.stepTime, 3.1, 'accumulated step');
    close(step.syncTime, 0.1, 'one sync per step');
    // m = 40 with the measured maximum 20 as the cap: 2 x 20, T(20) = 1.2, S = 0.1.
    const twice = measuredStep(table, { replicas: 1, nodes: 1, localBatchSize: 40, perNode: [1] });
    close(twice.stepTime, 1.2 + (1.2 - 0.1), 'two micro-batches of 20');
  });

  it("caps the micro-batch at the configuration's own largest measured batch", () => {
    // 6 nodes x 24 replicas is measured at local batch 10 only: m = 20 runs as 2 x 10 there.
    const step = measuredStep(table, { replicas: 24, nodes: 6, localBatchSize: 20 });
    close(step.stepTime, 12.1 + (12.1 - 1.2), '2 micro-batches of 10');
  });

  it('keeps the smallest measured batch time below it (no extrapolation)', () => {
    const step = measuredStep(table, { replicas: 1, nodes: 1, localBatchSize: 2, perNode: [1] });
    close(step.stepTime, 1.1, 'flat below local batch 10');
  });

  it('rejects a per-node placement that disagrees with the counts', () => {
    assert.throws(
      () => measuredStep(table, { replicas: 4, nodes: 2, localBatchSize: 10, perNode: [3, 2] }),
      RangeError,
    );
    assert.throws(() => measuredStep(table, { replicas: 1, nodes: 2, localBatchSize: 10 }), RangeError);
  });

  it('canonicalises a placement to its smallest rotation, zeros dropped', () => {
    assert.equal(canonicalPlacement([0, 2, 1, 1]), '112');
    assert.equal(canonicalPlacement([2, 1, 2, 1]), '1212');
    assert.equal(canonicalPlacement([12]), undefined);
  });
});

describe('Pollux trace parsers', () => {
  it('names the file and line of a bad row', () => {
    assert.throws(
      () =>
        parsePlacementsCsv('placement,local_bsz,step_time,sync_time\n1,8,0.1,0.01\n1x,8,0.1,0.01', 'p.csv'),
      (e: unknown) => e instanceof PolluxTraceError && /p\.csv:3/.test(e.message),
    );
    assert.throws(
      () =>
        parseScalabilityCsv('num_nodes,num_replicas,local_bsz,step_time,sync_time\n4,2,8,0.1,0.01', 's.csv'),
      (e: unknown) => e instanceof PolluxTraceError && /s\.csv:2/.test(e.message),
    );
  });

  it('reads rows as measured', () => {
    const rows: MeasuredRow[] = parseScalabilityCsv(SCALABILITY_CSV, 's.csv');
    assert.deepEqual(rows[0], { nodes: 6, replicas: 6, localBatchSize: 10, stepTime: 6.1, syncTime: 0.6 });
  });
});

describe('the per-node placement the simulator passes', () => {
  it('counts replicas per node in the cluster node order', () => {
    assert.deepEqual(replicasPerNode(['a', 'b', 'c'], ['c', 'a', 'c', undefined]), [1, 2]);
  });

  it('reaches the app model from where the scheduler placed the pods', () => {
    const seen: SimulatedPlacement[] = [];
    const spy: SimulatedAppModel = {
      ...FIXED_APP_MODEL,
      stepTime: (app, placement) => {
        seen.push(placement);
        return FIXED_APP_MODEL.stepTime(app, placement);
      },
    };
    const sim = new SimulatedCluster({
      seed: 1,
      apps: spy,
      nodes: [
        { name: 'node-a', gpus: 4, cpuMillis: 32_000, memoryBytes: 128 * GiB },
        { name: 'node-b', gpus: 4, cpuMillis: 32_000, memoryBytes: 128 * GiB },
      ],
    });
    sim.submitJob(
      pytorchJobManifest({
        name: 'toy',
        namespace: 'team-a',
        app: 'toy',
        workers: 6,
        minReplicas: 1,
        maxReplicas: 8,
        sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB },
        localBatchSize: 32,
        targetSamples: 10_000_000,
      }),
    );
    sim.step(120);
    const last = seen.at(-1);
    assert.equal(last?.replicas, 6);
    assert.equal(last?.nodes, 2);
    // First fit fills node-a (4 GPUs) before node-b.
    assert.deepEqual(last?.perNode, [4, 2]);
  });
});
