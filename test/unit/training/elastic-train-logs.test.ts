import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  committedSamples,
  type PhaseRecord,
  rescaleBreakdown,
  rescalePause,
  type StepRecord,
  throughputAt,
  worldChanges,
} from '../../support/elastic-train-logs.js';

const rec = (
  t: number,
  step: number,
  world: number,
  worldId: number,
  rank: number,
  ids: number[],
): StepRecord => ({
  t,
  epoch: 0,
  step,
  world,
  worldId,
  rank,
  ids,
});

describe('elastic trainer step logs', () => {
  it('times a rescale from the last step at the old size to the first at the new one', () => {
    const records = [
      rec(1, 1, 1, 1, 0, [0]),
      rec(2, 2, 1, 1, 0, [1]),
      rec(9, 3, 2, 2, 0, [2]),
      rec(9.1, 3, 2, 2, 1, [3]),
    ];
    assert.equal(rescalePause(records, 1, 2, 0), 7);
    assert.equal(rescalePause(records, 2, 1, 0), undefined);
    assert.equal(rescalePause(records, 1, 2, 9.5), undefined, 'only steps after the rescale began count');
  });

  it('counts a step re-done after a restart once, from the world that re-did it', () => {
    // world 1 logged steps 1-3 but its last checkpoint was after step 2: world 2 re-does step 3 with other ids
    const records = [
      rec(1, 1, 1, 1, 0, [4, 5]),
      rec(2, 2, 1, 1, 0, [6, 7]),
      rec(3, 3, 1, 1, 0, [8, 9]),
      rec(20, 3, 2, 2, 1, [9]),
      rec(20, 3, 2, 2, 0, [8]),
    ];
    const epoch = committedSamples(records).get(0);
    assert.deepEqual(epoch?.ids, [4, 5, 6, 7, 8, 9]);
    assert.deepEqual(epoch?.duplicates, []);
  });

  it('reports samples a world processed twice', () => {
    const epoch = committedSamples([rec(1, 1, 1, 1, 0, [1, 2]), rec(2, 2, 1, 1, 0, [2, 3])]).get(0);
    assert.deepEqual(epoch?.duplicates, [2]);
  });

  it('measures samples per second at one world size from the step logs, skipping warm-up steps', () => {
    const records = [
      rec(1, 1, 1, 1, 0, [0, 1]),
      rec(2, 2, 1, 1, 0, [2, 3]),
      rec(10, 3, 2, 2, 0, [4, 5]),
      rec(10.2, 3, 2, 2, 1, [6, 7]),
      rec(11, 4, 2, 2, 0, [8, 9]),
      rec(11, 4, 2, 2, 1, [10, 11]),
      rec(12, 5, 2, 2, 1, [12, 13]),
      rec(12.2, 5, 2, 2, 0, [14, 15]),
    ];
    // world 2: steps end at 10.2, 11, 12.2; after the first, 8 samples in 2 s
    assert.deepEqual(throughputAt(records, 2, 0), { samplesPerSecond: 4, steps: 2, seconds: 2 });
    // skipping the first step leaves 11 -> 12.2: 4 samples in 1.2 s
    assert.ok(Math.abs((throughputAt(records, 2, 0, 1)?.samplesPerSecond ?? 0) - 4 / 1.2) < 1e-9);
    assert.equal(throughputAt(records, 2, 0, 2), undefined);
    assert.equal(throughputAt(records, 1, 1.5), undefined);
    assert.ok(Math.abs((throughputAt(records, 2, 0, 0, 11)?.samplesPerSecond ?? 0) - 4 / 0.8) < 1e-9);
  });

  it('splits a pause at the phases the trainers logged, latest rank first, parts adding up to the pause', () => {
    const records = [rec(10, 1, 1, 1, 0, [0]), rec(20, 2, 2, 2, 0, [1]), rec(20.2, 2, 2, 2, 1, [2])];
    const phases: PhaseRecord[] = [
      { worldId: 1, rank: 0, stopping: 10.1, exiting: 10.5 },
      { worldId: 2, rank: 0, started: 13, imported: 15, grouped: 16, ready: 17 },
      { worldId: 2, rank: 1, started: 14, imported: 15.5, grouped: 16, ready: 17.5 },
    ];
    const parts = rescaleBreakdown(records, phases, 1, 2, 0);
    assert.ok(parts);
    const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} != ${b}`);
    close(parts.stop, 0.5);
    close(parts.rendezvous, 3.5);
    close(parts.imports, 1.5);
    close(parts.processGroup, 0.5);
    close(parts.load, 1.5);
    close(parts.firstStep, 2.5);
    const sum = Object.values(parts).reduce((a, b) => a + b, 0);
    close(sum, rescalePause(records, 1, 2, 0) ?? Number.NaN);
  });

  it('gives a phase a killed worker did not log no time, and ignores phases of other rescales', () => {
    const records = [rec(10, 1, 2, 1, 0, [0]), rec(18, 2, 1, 2, 0, [1])];
    const phases: PhaseRecord[] = [
      { worldId: 1, rank: 0, started: 1, imported: 2, grouped: 3, ready: 4 }, // before the pause: not this one
      { worldId: 2, rank: 0, started: 15, imported: 16, grouped: 16.5, ready: 17 },
    ];
    const parts = rescaleBreakdown(records, phases, 2, 1, 0);
    assert.deepEqual(parts, {
      stop: 0,
      rendezvous: 5,
      imports: 1,
      processGroup: 0.5,
      load: 0.5,
      firstStep: 1,
    });
    assert.equal(rescaleBreakdown(records, phases, 1, 2, 0), undefined);
  });
});

describe('world changes in the step logs (rank 0)', () => {
  const world1 = [rec(1, 1, 1, 10, 0, [0]), rec(2, 2, 1, 10, 0, [1]), rec(3, 3, 1, 10, 0, [2])];
  it('says what the new world resumed from: nothing redone or lost after a checkpoint at the stop', () => {
    const records = [
      ...world1,
      rec(9, 4, 2, 20, 1, [3]),
      rec(9, 4, 2, 20, 0, [4]),
      rec(10, 5, 2, 20, 0, [5]),
    ];
    assert.deepEqual(worldChanges(records), [
      { fromWorld: 1, toWorld: 2, lastStep: 3, firstStep: 4, redone: 0, lost: 0, midEpoch: true },
    ]);
  });
  it('counts steps trained again after an older checkpoint, and steps skipped', () => {
    const again = worldChanges([...world1, rec(9, 2, 2, 20, 0, [1])])[0];
    assert.deepEqual([again?.redone, again?.lost], [2, 0]);
    const skipped = worldChanges([...world1, rec(9, 6, 2, 20, 0, [5])])[0];
    assert.deepEqual([skipped?.redone, skipped?.lost], [0, 2]);
    const nextEpoch = worldChanges([...world1, { ...rec(9, 4, 2, 20, 0, [3]), epoch: 1 }])[0];
    assert.equal(nextEpoch?.midEpoch, false);
  });
});
