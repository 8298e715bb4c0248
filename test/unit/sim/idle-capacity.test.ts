// Idle-but-wanted GPUs, the work-conservation figure of `simulate` (lib/sim/idle-capacity.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdleWhileWantedMeter, workersWorthAdding } from '../../../lib/sim/idle-capacity.js';
import type { SimulatedJobStatus } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { FIXED_APP_MODEL, GiB } from './fixed-app-model.js';

const jobUpTo = (maxReplicas: number) =>
  pytorchJobManifest({
    name: 'toy',
    namespace: 'team-a',
    app: 'toy',
    workers: 1,
    minReplicas: 1,
    maxReplicas,
    sizing: { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 },
  });
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

  it('counts nothing for a job that is not training', () => {
    assert.equal(workersWorthAdding(job, status(1e9, 'Restarting'), world), 0);
    assert.equal(workersWorthAdding(job, status(1e9, 'Pending'), world), 0);
  });
});

describe('IdleWhileWantedMeter', () => {
  it('counts min(idle, wanted), and beyond the grace period only what stayed idle through all of it', () => {
    const meter = new IdleWhileWantedMeter(60, 600);
    for (let i = 0; i < 10; i++) meter.sample(4, 2);
    assert.equal(meter.totalGpuSeconds, 10 * 2 * 60);
    assert.equal(meter.beyondGraceGpuSeconds, 0);
    meter.sample(1, 5);
    assert.equal(meter.beyondGraceGpuSeconds, 60);
    meter.sample(0, 5);
    assert.equal(meter.beyondGraceGpuSeconds, 60);
  });
});
