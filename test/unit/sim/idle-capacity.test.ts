// Idle-but-wanted GPUs, the work-conservation figure of `simulate` (lib/sim/idle-capacity.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SimulatedPlacement } from '../../../lib/sim/app-model.js';
import { IdleWhileWantedMeter, meanIdleBeside, workersWorthAdding } from '../../../lib/sim/idle-capacity.js';
import type { SimulatedJobStatus } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { FIXED_APP_MODEL, fixedStepTime, GiB } from './fixed-app-model.js';

const jobOf = (workers: number, maxReplicas: number) =>
  pytorchJobManifest({
    name: 'toy',
    namespace: 'team-a',
    app: 'toy',
    workers,
    minReplicas: 1,
    maxReplicas,
    sizing: { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 },
  });
const jobUpTo = (maxReplicas: number) => jobOf(1, maxReplicas);
const job = jobUpTo(8);
const status = (remaining: number, phase: SimulatedJobStatus['phase'] = 'Running'): SimulatedJobStatus => ({
  ref: { kind: 'PyTorchJob', namespace: 'team-a', name: 'toy' },
  app: 'toy',
  phase,
  submittedAt: 0,
  jctSeconds: null,
  processedSamples: 0,
  targetSamples: remaining,
});
const world = { apps: FIXED_APP_MODEL, gpusPerNode: 4, rescaleCostSeconds: 30 };

describe('workersWorthAdding', () => {
  // Local batch 32: step 0.142 s at 1 worker, 0.152 s at 2, 0.162 s at 3 (one node). The second worker saves
  // R x (0.142/32 - 0.152/64) = R x 0.0020625 s, the third R x 0.0006875 s.
  it('counts the workers whose saving over the rest of the run beats the rescale cost, step by step', () => {
    assert.equal(workersWorthAdding(job, status(15_000), world), 1); // 30.9 s, then 10.3 s (+5.2 s for a 4th)
    // The second worker alone saves 28.9 s, less than the 30 s rescale; one rescale to 3 saves 38.5 s.
    assert.equal(workersWorthAdding(job, status(14_000), world), 2);
    assert.equal(workersWorthAdding(job, status(7_000), world), 0); // 14.4 s with 2, 21.7 s with 4 (a node)
    // Up to the node's 4 GPUs; a fifth worker spans a second node (+0.05 s a step) and is slower on its own
    // (160 / 0.232 s = 690 samples/s against 128 / 0.172 s = 744), so a job that may not go past 5 stops at 4.
    assert.equal(workersWorthAdding(jobUpTo(5), status(1e9), world), 3);
  });

  it('steps over a node boundary when filling the next node pays', () => {
    // 6 workers on two nodes: 192 / 0.242 s = 793 samples/s > 744 at 4, and 7, 8 faster still.
    assert.equal(workersWorthAdding(job, status(1e9), world), 7);
  });

  it('times the job where it runs and its new workers where the free GPUs are', () => {
    const on = (perNode: number[], room: number[]) => ({ perNode, room });
    const four = jobOf(4, 8);
    // 4 workers on one node (744 samples/s): one empty node takes 4 more (8 on 2 nodes, 977), as packed.
    assert.equal(workersWorthAdding(four, status(1e9), world), 4);
    assert.equal(workersWorthAdding(four, status(1e9), world, on([4, 0, 0, 0, 0], [0, 4, 0, 0, 0])), 4);
    // One free GPU on each of four nodes: 5 workers on 2 nodes 690, 6 on 3 657, 8 on 5 621: none pays.
    assert.equal(workersWorthAdding(four, status(1e9), world, on([4, 0, 0, 0, 0], [0, 1, 1, 1, 1])), 0);
    // 1 + 1 + 2, the 2 first (fewest nodes): 6 on 2 nodes pays (793), 7 on 3 (742) and 8 on 4 (707) do not.
    // Taken in node order instead, no step would pay.
    assert.equal(workersWorthAdding(four, status(1e9), world, on([4, 0, 0, 0, 0], [0, 1, 1, 2, 0])), 2);
    // Its own nodes first: 3 workers on the second node grow to 4 there (592 -> 744), not onto the first.
    const three = jobOf(3, 4);
    assert.equal(workersWorthAdding(three, status(1e9), world, on([0, 3], [1, 1])), 1);
    // No more than the room: one worker on a node with 3 free GPUs takes those 3 (packed: 7).
    assert.equal(workersWorthAdding(job, status(1e9), world, on([1, 0, 0], [3, 0, 0])), 3);
    // While the bound pods are not the spec's count (a resize under way), packed as without placement.
    assert.equal(workersWorthAdding(job, status(1e9), world, on([0, 0, 0], [3, 0, 0])), 7);
    // The world is asked at the exact per-node placement: an app whose uneven placements step 0.1 s slower
    // (a measured table has a row per placement) takes 4 more on an empty node, and nothing from 2 free GPUs.
    const uneven = {
      ...world,
      apps: {
        ...FIXED_APP_MODEL,
        stepTime: (_app: string, p: SimulatedPlacement) =>
          fixedStepTime(p) + (p.perNode && new Set(p.perNode).size > 1 ? 0.1 : 0),
      },
    };
    assert.equal(workersWorthAdding(four, status(1e9), uneven, on([4, 0], [0, 4])), 4);
    assert.equal(workersWorthAdding(four, status(1e9), uneven, on([4, 0], [0, 2])), 0);
    assert.equal(workersWorthAdding(four, status(1e9), world, on([4, 0], [0, 2])), 2);
  });

  it('counts nothing for a job that is not training', () => {
    assert.equal(workersWorthAdding(job, status(1e9, 'Restarting'), world), 0);
    assert.equal(workersWorthAdding(job, status(1e9, 'Pending'), world), 0);
  });
});

describe('IdleWhileWantedMeter', () => {
  const one = (wanted: number, workers = 4) => [{ key: 'a', workers, wanted }];

  it('counts min(idle, wanted), and beyond the grace period only what stayed idle through all of it', () => {
    const meter = new IdleWhileWantedMeter(60, 600);
    for (let i = 0; i < 10; i++) meter.sample(4, one(2));
    assert.equal(meter.totalGpuSeconds, 10 * 2 * 60);
    assert.equal(meter.beyondGraceGpuSeconds, 0);
    meter.sample(1, one(5));
    assert.equal(meter.beyondGraceGpuSeconds, 60);
    meter.sample(0, one(5));
    assert.equal(meter.beyondGraceGpuSeconds, 60);
  });

  it('sums what every running job wants', () => {
    const meter = new IdleWhileWantedMeter(60, 120);
    meter.sample(10, [
      { key: 'a', workers: 4, wanted: 2 },
      { key: 'b', workers: 8, wanted: 3 },
    ]);
    assert.equal(meter.totalGpuSeconds, 5 * 60);
  });

  it('files GPUs idle beyond the grace period under what the jobs wanting them did through it, by what each wants', () => {
    // Grace 120 s at 60 s samples: three samples. 'up' grows 4 -> 8, 'down' shrinks 8 -> 6, 'still' stays at 2.
    const meter = new IdleWhileWantedMeter(60, 120);
    const at = (up: number, down: number) => [
      { key: 'up', workers: up, wanted: 2 },
      { key: 'down', workers: down, wanted: 1 },
      { key: 'still', workers: 2, wanted: 1 },
    ];
    meter.sample(8, at(4, 8));
    meter.sample(8, at(8, 8));
    assert.deepEqual(meter.beside, { growing: 0, shrunk: 0, leftAlone: 0 });
    meter.sample(8, at(8, 6));
    // 4 GPUs (what the three want) idle through all three samples: 4 x 60 GPU-s, shared 2 : 1 : 1.
    assert.equal(meter.beyondGraceGpuSeconds, 240);
    assert.deepEqual(meter.beside, { growing: 120, shrunk: 60, leftAlone: 60 });
    // The growth has left the three-sample window: 'up' counts as left alone again; 'down' is shrunk for one
    // more sample, then left alone too.
    meter.sample(8, at(8, 6));
    assert.deepEqual(meter.beside, { growing: 120, shrunk: 60 + 60, leftAlone: 60 + 120 + 60 });
    meter.sample(8, at(8, 6));
    assert.deepEqual(meter.beside, { growing: 120, shrunk: 120, leftAlone: 240 + 240 });
  });

  it('counts a job shrunk and grown again within the period as growing, and forgets a job that finished', () => {
    const meter = new IdleWhileWantedMeter(60, 120);
    meter.sample(4, one(4, 8));
    meter.sample(4, one(4, 4));
    meter.sample(4, one(4, 6));
    assert.deepEqual(meter.beside, { growing: 240, shrunk: 0, leftAlone: 0 });
    // 'a' finishes while 'b' wants the GPUs; a job of the same name then starts afresh at 8 workers: it was
    // not grown from 6.
    meter.sample(4, [{ key: 'b', workers: 1, wanted: 4 }]);
    meter.sample(4, one(4, 8));
    assert.deepEqual(meter.beside, { growing: 240, shrunk: 0, leftAlone: 480 });
    // A sample in which no job wants a GPU files nothing.
    meter.sample(4, one(0, 8));
    assert.deepEqual(meter.beside, { growing: 240, shrunk: 0, leftAlone: 480 });
  });
});

describe('meanIdleBeside', () => {
  it('means several splits key by key, and gives zeros for none', () => {
    assert.deepEqual(
      meanIdleBeside([
        { growing: 1, shrunk: 0, leftAlone: 2 },
        { growing: 3, shrunk: 1, leftAlone: 0 },
      ]),
      { growing: 2, shrunk: 0.5, leftAlone: 1 },
    );
    assert.deepEqual(meanIdleBeside([]), { growing: 0, shrunk: 0, leftAlone: 0 });
  });
});
