import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProgressTracker } from '../../../../infra/sidecar/src/progress-tracker.js';

const shape = { replicas: '4', nodes: '2', local_batch_size: '32' };
const T0 = 1_800_000_000;

describe('ProgressTracker', () => {
  it('gives the mean step time over the recent window, not since the start', () => {
    const tracker = new ProgressTracker(10, shape);
    // 0.5 s/step for 20 s, then 2 s/step for 10 s.
    let at = T0;
    let step = 0;
    for (; at < T0 + 20; at += 0.5) tracker.observe({ step: step++, at });
    for (; at <= T0 + 30; at += 2) tracker.observe({ step: step++, at });
    const mean = tracker.meanStepTime(T0 + 30);
    assert.ok(mean !== undefined && Math.abs(mean - 2) < 0.2, `expected ~2 s, got ${mean}`);
  });

  it('has no step time before two reports, and none once the trainer stalls', () => {
    const tracker = new ProgressTracker(10, shape);
    tracker.observe({ step: 5, at: T0 });
    assert.equal(tracker.meanStepTime(T0), undefined);
    tracker.observe({ step: 6, at: T0 + 1 });
    assert.equal(tracker.meanStepTime(T0 + 1), 1);
    assert.equal(tracker.meanStepTime(T0 + 5), 1, 'a short pause keeps the value');
    assert.equal(tracker.meanStepTime(T0 + 12), undefined, 'no progress for longer than the window');
  });

  it('keeps a value for steps longer than the window (anchor before the window)', () => {
    const tracker = new ProgressTracker(10, shape);
    tracker.observe({ step: 1, at: T0 });
    tracker.observe({ step: 2, at: T0 + 15 });
    assert.equal(tracker.meanStepTime(T0 + 16), 15);
    assert.equal(tracker.meanStepTime(T0 + 40), 15, 'idle 25 s < 2 x 15 s step: not a stall yet');
    assert.equal(tracker.meanStepTime(T0 + 46), undefined);
  });

  it('counts steps and derives samples from the local batch size when the trainer gives none', () => {
    const tracker = new ProgressTracker(60, shape);
    assert.deepEqual(tracker.observe({ step: 100, at: T0 }), { steps: 0, samples: 0, restarted: false });
    assert.deepEqual(tracker.observe({ step: 110, at: T0 + 1 }), {
      steps: 10,
      samples: 320,
      restarted: false,
    });
    assert.deepEqual(tracker.observe({ step: 110, at: T0 + 2 }), { steps: 0, samples: 0, restarted: false });
  });

  it('uses cumulative samples when given, and never counts backwards', () => {
    const tracker = new ProgressTracker(60, { ...shape, local_batch_size: '' });
    tracker.observe({ step: 1, samples: 50, at: T0 });
    assert.equal(tracker.observe({ step: 2, samples: 120, at: T0 + 1 }).samples, 70);
    const restart = tracker.observe({ step: 0, samples: 0, at: T0 + 2 });
    assert.deepEqual(restart, { steps: 0, samples: 0, restarted: true });
    assert.equal(tracker.meanStepTime(T0 + 2), undefined, 'the window starts again after a restart');
    assert.equal(tracker.observe({ step: 3, samples: 90, at: T0 + 3 }).samples, 90);
    assert.equal(tracker.meanStepTime(T0 + 3), 1 / 3);
  });

  it('starts a new window when the scale changes, and reports the new scale', () => {
    const tracker = new ProgressTracker(60, shape);
    tracker.observe({ step: 0, at: T0 });
    tracker.observe({ step: 10, at: T0 + 10 });
    assert.equal(tracker.meanStepTime(T0 + 10), 1);
    tracker.observe({ step: 11, at: T0 + 12, shape: { replicas: '8', nodes: '4' } });
    assert.deepEqual(tracker.shape, { replicas: '8', nodes: '4', local_batch_size: '32' });
    assert.equal(tracker.meanStepTime(T0 + 12), undefined);
    tracker.observe({ step: 14, at: T0 + 15 });
    assert.equal(tracker.meanStepTime(T0 + 15), 1);
  });

  it('keeps a bounded window at a high report rate, and follows a rate change', () => {
    const tracker = new ProgressTracker(60, shape);
    for (let i = 0; i < 200_000; i++) tracker.observe({ step: i, at: T0 + i / 1000 });
    assert.ok(tracker.windowPoints <= 122, `${tracker.windowPoints} points kept for a 60 s window`);
    const mean = tracker.meanStepTime(T0 + 200);
    assert.ok(mean !== undefined && Math.abs(mean - 0.001) < 1e-6);
    for (let i = 0; i < 120; i++) tracker.observe({ step: 200_000 + i, at: T0 + 200 + i * 0.5 });
    const later = tracker.meanStepTime(T0 + 260);
    assert.ok(later !== undefined && Math.abs(later - 0.5) < 0.01, `got ${later}`);
  });

  it('rejects reports that are not counts', () => {
    const tracker = new ProgressTracker(60, shape);
    assert.throws(() => tracker.observe({ step: -1, at: T0 }), RangeError);
    assert.throws(() => tracker.observe({ step: Number.NaN, at: T0 }), RangeError);
  });
});

describe('ProgressTracker: the first step of the current world', () => {
  it('is the first step ever, then the first after a pause, a restart or nothing else', () => {
    const tracker = new ProgressTracker(60, shape);
    assert.equal(tracker.resumedAt, undefined);
    tracker.observe({ step: 10, at: T0 });
    assert.equal(tracker.resumedAt, T0, 'a new worker: its first step');
    for (let i = 1; i <= 20; i++) tracker.observe({ step: 10 + i, at: T0 + i * 0.05 });
    tracker.observe({ step: 30, at: T0 + 1.5 }); // a 0.5 s hiccup: a slow step, not a pause
    assert.equal(tracker.resumedAt, T0);
    tracker.observe({ step: 30, at: T0 + 10 }); // the same total again: no progress
    tracker.observe({ step: 31, at: T0 + 21.5 }); // 20 s without a step: a re-formed world
    assert.equal(tracker.resumedAt, T0 + 21.5);
    tracker.observe({ step: 25, at: T0 + 30 }); // back to an older checkpoint: a restart
    assert.equal(tracker.resumedAt, T0 + 30);
  });

  it('does not take the steps of a slow trainer for pauses', () => {
    const tracker = new ProgressTracker(600, shape);
    for (let i = 0; i < 10; i++) tracker.observe({ step: i, at: T0 + 5 * i });
    assert.equal(tracker.resumedAt, T0 + 5, 'the second step sets the pace (no step time before it)');
    tracker.observe({ step: 10, at: T0 + 45 + 14 }); // 14 s for a 5 s step: not over 3 step times
    assert.equal(tracker.resumedAt, T0 + 5);
    tracker.observe({ step: 11, at: T0 + 59 + 45 }); // over 3 x 14 s
    assert.equal(tracker.resumedAt, T0 + 104);
  });
});
