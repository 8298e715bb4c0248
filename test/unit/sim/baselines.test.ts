import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backfillAdmissions } from '../../../lib/sim/baselines/backfill.js';
import { fcfsAdmissions } from '../../../lib/sim/baselines/manual.js';
import type { QueuedJob } from '../../../lib/sim/baselines/queue.js';
import {
  TIRESIAS_DEFAULTS,
  type TiresiasJobState,
  type TiresiasParams,
  tiresiasPass,
} from '../../../lib/sim/baselines/tiresias.js';
import { mulberry32 } from '../../../lib/sim/prng.js';

const job = (name: string, gpus: number, arrival: number): QueuedJob => ({ name, gpus, arrival });

describe('manual baseline (strict FCFS)', () => {
  it('starts from the head while the head fits, and nothing overtakes a head that does not', () => {
    const queue = [job('a', 2, 0), job('b', 8, 1), job('c', 1, 2)];
    assert.deepEqual(fcfsAdmissions(queue, 4), ['a']);
    assert.deepEqual(fcfsAdmissions(queue, 11), ['a', 'b', 'c']);
    assert.deepEqual(fcfsAdmissions([job('b', 8, 1), job('c', 1, 2)], 7), []);
  });
});

describe('backfill baseline (FIFO with backfilling, Kueue BestEffortFIFO)', () => {
  it('starts a later job that fits now while the head waits for its GPUs', () => {
    const queue = [job('head', 8, 0), job('small', 1, 5)];
    assert.deepEqual(backfillAdmissions(queue, 7), ['small']);
  });

  it('gives free GPUs in arrival order: an earlier job that fits is never passed over for a later one', () => {
    // Listed out of order on purpose: 'early' (arrival 1) comes before 'late' (arrival 2) whatever the list.
    const queue = [job('head', 8, 0), job('late', 3, 2), job('early', 2, 1)];
    assert.deepEqual(backfillAdmissions(queue, 4), ['early']);
    assert.deepEqual(backfillAdmissions(queue, 5), ['early', 'late']);
  });

  it('on random queues: no waiting job fits in what is left, and every earlier job skipped did not fit', () => {
    const random = mulberry32(13);
    for (let trial = 0; trial < 300; trial++) {
      const queue = Array.from({ length: 1 + Math.floor(random() * 12) }, (_, i) =>
        job(`j${i}`, 1 + Math.floor(random() * 16), Math.floor(random() * 100)),
      );
      const free = Math.floor(random() * 32);
      const started = new Set(backfillAdmissions(queue, free));
      const order = [...queue].sort((a, b) => a.arrival - b.arrival || a.name.localeCompare(b.name));
      let left = free;
      for (const j of order) {
        if (started.has(j.name)) {
          left -= j.gpus;
          assert.ok(left >= 0, `trial ${trial}: over-committed`);
        } else {
          // Skipped at its turn only because it did not fit in what was then free.
          assert.ok(j.gpus > left, `trial ${trial}: ${j.name} (${j.gpus}) fit in ${left} at its turn`);
        }
      }
      const waiting = queue.filter((j) => !started.has(j.name));
      assert.ok(
        waiting.every((j) => j.gpus > left),
        `trial ${trial}: a waiting job fits in ${left}`,
      );
    }
  });
});

describe('tiresias baseline (discretized 2D-LAS with preemption)', () => {
  const params: TiresiasParams = { queueThresholdsGpuSeconds: [4 * 3600], promoteKnob: 0 };

  /** Runs passes at the given times over the same jobs, returning the last pass. */
  function passes(jobs: QueuedJob[], times: number[], capacityGpus: number, p = params) {
    let state: ReadonlyMap<string, TiresiasJobState> = new Map();
    let last = tiresiasPass(jobs, state, { now: times[0] ?? 0, capacityGpus, params: p });
    for (const now of times) {
      last = tiresiasPass(jobs, state, { now, capacityGpus, params: p });
      state = last.state;
    }
    return last;
  }

  it('demotes by attained service, GPUs x time: 4 GPUs for 1 h reach 4 GPU-h, 1 GPU for 1 h does not', () => {
    const jobs = [job('wide', 4, 0), job('narrow', 1, 0)];
    const before = passes(jobs, [0, 3599], 8);
    assert.equal(before.state.get('wide')?.queue, 0);
    const after = passes(jobs, [0, 3600], 8);
    assert.deepEqual(after.demoted, ['wide']);
    assert.equal(after.state.get('wide')?.queue, 1);
    assert.equal(after.state.get('narrow')?.queue, 0);
    // A job that waits attains nothing.
    const waiting = passes([job('hog', 8, 0), job('queued', 4, 1)], [0, 7200], 8);
    assert.equal(waiting.state.get('queued')?.serviceSeconds, 0);
  });

  it('preempts a demoted job for a new arrival in the top queue, and resumes it when GPUs free up', () => {
    const long = job('long', 8, 0);
    let state: ReadonlyMap<string, TiresiasJobState> = new Map();
    let pass = tiresiasPass([long], state, { now: 0, capacityGpus: 8, params });
    assert.deepEqual(pass.start, ['long']);
    state = pass.state;
    pass = tiresiasPass([long], state, { now: 1800, capacityGpus: 8, params });
    assert.equal(pass.state.get('long')?.queue, 1, '8 GPUs x 0.5 h = 4 GPU-h');
    state = pass.state;
    const fresh = job('fresh', 2, 1900);
    pass = tiresiasPass([long, fresh], state, { now: 1900, capacityGpus: 8, params });
    assert.deepEqual(pass.preempt, ['long']);
    assert.deepEqual(pass.start, ['fresh']);
    state = pass.state;
    // 'fresh' finishes: 'long' is resumed.
    pass = tiresiasPass([long], state, { now: 2500, capacityGpus: 8, params });
    assert.deepEqual(pass.start, ['long']);
    assert.deepEqual(pass.preempt, []);
  });

  it('serves a queue first come first served by entry and lets a smaller lower job use what is left', () => {
    const jobs = [job('a', 6, 0), job('b', 4, 1), job('c', 2, 2)];
    const pass = tiresiasPass(jobs, new Map(), { now: 2, capacityGpus: 8, params });
    assert.deepEqual(pass.start, ['a', 'c']);
  });

  it('promotes a starving demoted job back to the top queue after PROMOTEKNOB x its service', () => {
    const p: TiresiasParams = { queueThresholdsGpuSeconds: [4 * 3600], promoteKnob: 2 };
    const long = job('long', 8, 0);
    let state: ReadonlyMap<string, TiresiasJobState> = tiresiasPass([long], new Map(), {
      now: 0,
      capacityGpus: 8,
      params: p,
    }).state;
    state = tiresiasPass([long], state, { now: 1800, capacityGpus: 8, params: p }).state;
    // A stream of top-queue jobs (each under the threshold: 8 GPUs x 1,700 s) keeps 'long' preempted.
    const blocker = (i: number) => job(`blocker-${i}`, 8, 1800 + 1700 * i);
    let pass = tiresiasPass([long, blocker(0)], state, { now: 1800, capacityGpus: 8, params: p });
    assert.deepEqual(pass.preempt, ['long']);
    pass = tiresiasPass([long, blocker(1)], pass.state, { now: 3500, capacityGpus: 8, params: p });
    pass = tiresiasPass([long, blocker(2)], pass.state, { now: 5200, capacityGpus: 8, params: p });
    assert.deepEqual(pass.start, ['blocker-2']);
    // Waited 3,599 s after 1,800 s of service: not yet 2 x 1,800.
    pass = tiresiasPass([long, blocker(2)], pass.state, { now: 1800 + 3599, capacityGpus: 8, params: p });
    assert.deepEqual(pass.promoted, []);
    pass = tiresiasPass([long, blocker(2)], pass.state, { now: 1800 + 3600, capacityGpus: 8, params: p });
    assert.deepEqual(pass.promoted, ['long']);
    assert.equal(pass.state.get('long')?.queue, 0);
    assert.equal(pass.state.get('long')?.serviceSeconds, 0);
  });

  it("defaults to the Pollux artifact's two queues split at 16 GPU-hours", () => {
    assert.deepEqual(TIRESIAS_DEFAULTS.queueThresholdsGpuSeconds, [16 * 3600]);
  });
});
