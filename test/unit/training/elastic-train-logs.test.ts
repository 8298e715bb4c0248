import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { committedSamples, rescalePause, type StepRecord } from '../../support/elastic-train-logs.js';

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
});
