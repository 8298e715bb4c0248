// Statistical efficiency from measured gradient statistics: the formula by hand on a small table, then
// against the Pollux measurements (the steps it predicts at a fixed batch, beside the steps the run took).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadGradientNoiseTables } from '../../../cli/simulation-world.js';
import { APP_NAMES } from '../../../lib/sim/app-profiles.js';
import {
  advanceProgress,
  epochAt,
  type GradientStatsRow,
  gradientNoiseTable,
  gradientStatsAt,
  progressPerStep,
  StatisticalEfficiencyError,
  samplesToTarget,
  targetProgress,
} from '../../../lib/sim/statistical-efficiency.js';
import { polluxAvailable, TRACES_DIR } from '../../support/pollux-data.js';

const row = (progress: number, gradSqr: number, gradVar: number): GradientStatsRow => ({
  progress,
  iteration: progress,
  gradSqr,
  gradVar,
});

/**
 * B0 = 10. Epoch 0 ends at progress 100, epoch 1 at 300. At batch 10 the noise is 3x the signal in epoch 0 and
 * 1x in epoch 1; at batch 40, 5x and 3x. (The run at 40 reached 110 by its first epoch's end: the boundary
 * is the least of the runs'.)
 */
const TABLE = gradientNoiseTable(
  new Map([
    [40, [row(110, 1, 5), row(300, 2, 6)]],
    [10, [row(100, 1, 3), row(300, 2, 2)]],
  ]),
);

describe('statistical efficiency by hand', () => {
  it("counts progress in steps at the smallest measured batch, epoch ends the least of the runs'", () => {
    assert.deepEqual(TABLE.batches, [10, 40]);
    assert.deepEqual(TABLE.epochEnds, [100, 300]);
    assert.equal(targetProgress(TABLE), 300);
  });

  it('a step at B0 is one step of progress, whatever the noise', () => {
    assert.equal(progressPerStep(TABLE, 10, 0), 1);
    assert.equal(progressPerStep(TABLE, 10, 1), 1);
  });

  it('at 4x B0: (var + sqr) / (var / 4 + sqr) steps, with the run at 40 measured statistics', () => {
    // Epoch 0: (5 + 1) / (5/4 + 1) = 6 / 2.25; epoch 1: (6 + 2) / (6/4 + 2) = 8 / 3.5.
    assert.equal(progressPerStep(TABLE, 40, 0), 6 / 2.25);
    assert.equal(progressPerStep(TABLE, 40, 1), 8 / 3.5);
  });

  it('between measured batches, the statistics interpolate linearly; outside them, the nearest run', () => {
    // Batch 20 is a third of the way from 10 to 40: sqr 1, var 3 + (5 - 3) / 3.
    assert.deepEqual(gradientStatsAt(TABLE, 20, 0), { gradSqr: 1, gradVar: 3 + 2 / 3 });
    assert.deepEqual(gradientStatsAt(TABLE, 5, 1), { gradSqr: 2, gradVar: 2 });
    assert.deepEqual(gradientStatsAt(TABLE, 400, 1), { gradSqr: 2, gradVar: 6 });
    // Noise far above the signal: growing the batch scales progress almost linearly; far below, not at all.
    const noisy = gradientNoiseTable(new Map([[1, [row(10, 1e-9, 1)]]]));
    assert.ok(Math.abs(progressPerStep(noisy, 8, 0) - 8) < 1e-6);
    const clean = gradientNoiseTable(new Map([[1, [row(10, 1, 1e-9)]]]));
    assert.ok(Math.abs(progressPerStep(clean, 8, 0) - 1) < 1e-6);
  });

  it('the epoch at a progress: the one whose end is still ahead, the last once the target is reached', () => {
    assert.equal(epochAt(TABLE, 0), 0);
    assert.equal(epochAt(TABLE, 99.9), 0);
    assert.equal(epochAt(TABLE, 100), 1);
    assert.equal(epochAt(TABLE, 300), 1);
  });

  it('samples to the target at a fixed batch: each epoch at its own rate', () => {
    assert.equal(samplesToTarget(TABLE, 10), 300 * 10);
    const steps = 100 / (6 / 2.25) + 200 / (8 / 3.5);
    assert.ok(Math.abs(samplesToTarget(TABLE, 40) - steps * 40) < 1e-9);
    assert.ok(samplesToTarget(TABLE, 40) > samplesToTarget(TABLE, 10), 'a bigger batch needs more samples');
  });

  it('refuses a table it cannot play: no run, or epochs whose progress does not grow', () => {
    assert.throws(() => gradientNoiseTable(new Map()), StatisticalEfficiencyError);
    assert.throws(
      () => gradientNoiseTable(new Map([[8, [row(10, 1, 1), row(10, 1, 1)]]])),
      /epoch 1: progress 10 does not grow/,
    );
    assert.throws(() => gradientNoiseTable(new Map([[8, []]])), /has no epoch/);
  });
});

describe('progress over an interval', () => {
  const at40 = { table: TABLE, batch: 40, stepTime: 2, stalledUntil: 0 };

  it('within an epoch: steps at one rate, progress at that epoch per step', () => {
    const a = advanceProgress({ ...at40, progress: 0, from: 0, to: 20 });
    assert.equal(a.steps, 10);
    assert.equal(a.progress, 10 * (6 / 2.25));
    assert.equal(a.effectiveSeconds, 20);
    assert.equal(a.completedAt, undefined);
  });

  it('across an epoch end: the rate changes there', () => {
    const a = advanceProgress({ ...at40, progress: 90, from: 0, to: 100 });
    const inFirst = 10 / (6 / 2.25);
    assert.ok(Math.abs(a.steps - 50) < 1e-9);
    assert.ok(Math.abs(a.progress - (100 + (50 - inFirst) * (8 / 3.5))) < 1e-9);
  });

  it('completes at the instant the target is reached, and trains no longer', () => {
    const a = advanceProgress({ ...at40, progress: 290, from: 0, to: 100 });
    const steps = 10 / (8 / 3.5);
    assert.equal(a.progress, 300);
    assert.ok(Math.abs((a.completedAt ?? 0) - steps * 2) < 1e-9);
    assert.ok(Math.abs(a.effectiveSeconds - steps * 2) < 1e-9);
  });

  it('none before the rescale pause ends, none for a job already done', () => {
    const stalled = advanceProgress({ ...at40, stalledUntil: 15, progress: 0, from: 0, to: 20 });
    assert.equal(stalled.steps, 2.5);
    assert.equal(stalled.effectiveSeconds, 5);
    const paused = advanceProgress({ ...at40, stalledUntil: 30, progress: 0, from: 0, to: 20 });
    assert.deepEqual(paused, { progress: 0, steps: 0, effectiveSeconds: 0 });
    const done = advanceProgress({ ...at40, progress: 300, from: 0, to: 20 });
    assert.equal(done.steps, 0);
    assert.equal(done.completedAt, undefined);
  });
});

describe('against the Pollux measurements', {
  skip: !polluxAvailable() && 'no ../shared/data/pollux',
}, () => {
  it('predicts the steps each run at a fixed batch took, within 2% up to 8x B0 (yolov3: up to 2x B0)', () => {
    const tables = loadGradientNoiseTables(TRACES_DIR);
    const report: string[] = [];
    for (const app of APP_NAMES) {
      const table = tables[app];
      const b0 = table.batches[0] ?? 0;
      table.batches.forEach((batch, i) => {
        const measured = table.rows[i]?.at(-1)?.iteration ?? 0;
        const ratio = samplesToTarget(table, batch) / batch / measured;
        report.push(`${app} ${batch}: ${ratio.toFixed(3)}`);
        const within = app === 'yolov3' ? 2 : 8;
        if (batch <= within * b0) assert.ok(Math.abs(ratio - 1) < 0.02, `${app} at ${batch}: ${ratio}`);
      });
    }
    console.log(`predicted / measured steps to the target: ${report.join(', ')}`);
  });
});
