// reapplyState (lib/cluster/job-state.ts) field by field: a decision whose status write lost a race carries onto
// the other write's status only what it changed itself; every field it left alone stays as the other write
// left it, and an instant it moved keeps the later of the two.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reapplyState } from '../../../lib/cluster/job-state.js';
import type { JobAutoscalerState } from '../../../lib/types.js';

const mine: JobAutoscalerState = {
  oomCount: 1,
  paused: false,
  pauseReason: 'mine',
  scaleDowns: 1,
  lastActionAt: 100,
  lastDecisionId: 'mine',
  largestRunWorkers: 4,
  askedWorkers: 3,
  lastRescale: { at: 100, from: 3, to: 4 },
  rescaleCost: { down: 5, measuredFor: 100 },
  stragglerReplacements: [{ pod: 'w-1', at: 100, count: 1 }],
};

const theirs: JobAutoscalerState = {
  oomCount: 4,
  paused: true,
  pauseReason: 'theirs',
  scaleDowns: 5,
  lastActionAt: 90,
  lastDecisionId: 'theirs',
  largestRunWorkers: 2,
  askedWorkers: 6,
  lastRescale: { at: 90, from: 5, to: 4 },
  rescaleCost: { down: 9, measuredFor: 90 },
  stragglerReplacements: [{ pod: 'w-2', at: 90, count: 2 }],
};

describe('reapplyState, every field', () => {
  it('a decision that changed none of them leaves all as the other write left them, even older or smaller ones', () => {
    assert.deepEqual(reapplyState(theirs, mine, structuredClone(mine)), theirs);
  });

  it('an instant or a largest run this decision moved takes the later or larger of the two', () => {
    const after: JobAutoscalerState = { ...mine, lastActionAt: 200, largestRunWorkers: 8 };
    const out = reapplyState({ ...theirs, lastActionAt: 150, largestRunWorkers: 6 }, mine, after);
    assert.equal(out.lastActionAt, 200);
    assert.equal(out.largestRunWorkers, 8);
    const later = reapplyState({ ...theirs, lastActionAt: 250, largestRunWorkers: 9 }, mine, after);
    assert.equal(later.lastActionAt, 250);
    assert.equal(later.largestRunWorkers, 9);
  });

  it('the fields it set are taken as set', () => {
    const after: JobAutoscalerState = {
      ...mine,
      paused: true,
      pauseReason: 'diverging',
      lastDecisionId: 'next',
      lastRescale: { at: 300, from: 4, to: 2 },
      rescaleCost: { down: 7, measuredFor: 300 },
      stragglerReplacements: [{ pod: 'w-1', at: 300, count: 2 }],
    };
    const out = reapplyState(theirs, mine, after);
    assert.equal(out.pauseReason, 'diverging');
    assert.equal(out.lastDecisionId, 'next');
    assert.deepEqual(out.lastRescale, after.lastRescale);
    assert.deepEqual(out.rescaleCost, after.rescaleCost);
    assert.deepEqual(out.stragglerReplacements, after.stragglerReplacements);
  });
});
