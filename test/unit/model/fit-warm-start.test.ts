// A refit that starts from the last fit (FitOptions.warmStart) and the placement-grouped least squares must
// make the decisions a from-scratch, one-row-per-sample fit makes: checked on many random sample sets.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fitThroughputModel } from '../../../lib/model/fit.js';
import { nnls } from '../../../lib/model/nnls.js';
import type { Placement } from '../../../lib/model/throughput-model.js';
import type { StepSample } from '../../../lib/types.js';

/** Warm and cold fits may differ by rounding only (measured: not at all, in 400 sets of bench:fits). */
const WARM_TOLERANCE = 1e-9;

interface JobCase {
  placements: Placement[];
  ps: boolean;
  withSync: boolean;
  truth: { fixed: number; perSample: number; sync: number; perReplica: number };
  picks: number[];
  noise: number[];
  drop: number;
  add: number;
}

const placementArb = fc
  .record({
    replicas: fc.constantFrom(1, 2, 3, 4, 6, 8, 12, 16, 32),
    nodes: fc.constantFrom(1, 1, 2, 3, 4, 8),
    localBatchSize: fc.constantFrom(16, 32, 64, 128),
  })
  .map((p) => ({ ...p, nodes: Math.min(p.nodes, p.replicas) }));

const jobArb: fc.Arbitrary<JobCase> = fc.record({
  placements: fc.array(placementArb, { minLength: 1, maxLength: 5 }),
  ps: fc.boolean(),
  withSync: fc.boolean(),
  truth: fc.record({
    fixed: fc.double({ min: 0.02, max: 0.4, noNaN: true }),
    perSample: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
    sync: fc.double({ min: 0, max: 0.2, noNaN: true }),
    perReplica: fc.double({ min: 0, max: 0.05, noNaN: true }),
  }),
  picks: fc.array(fc.nat({ max: 99 }), { minLength: 3, maxLength: 150 }),
  noise: fc.array(fc.double({ min: -0.03, max: 0.03, noNaN: true }), { minLength: 8, maxLength: 8 }),
  drop: fc.nat({ max: 4 }),
  add: fc.integer({ min: 1, max: 4 }),
});

/** Sample i of a job: one of its placements, a step time from its truth with a little noise. */
function sampleOf(job: JobCase, i: number): StepSample {
  const p = job.placements[(job.picks[i % job.picks.length] ?? 0) % job.placements.length] as Placement;
  const sync =
    p.replicas > 1
      ? job.truth.sync * Math.log2(p.replicas) * (p.nodes > 1 ? 2 : 1) + job.truth.perReplica * p.replicas
      : 0;
  const jitter = 1 + (job.noise[i % job.noise.length] ?? 0);
  const stepTime = (job.truth.fixed + (job.truth.perSample * p.localBatchSize) / 64 + sync) * jitter;
  const s: StepSample = { ...p, stepTime, at: 60 * i };
  if (job.ps) s.ps = 1 + (i % 2);
  if (job.withSync) s.syncTime = Math.min(stepTime, sync * (2 - jitter));
  return s;
}

/** The job's samples of the last tick, and of this one: the window lost `drop` old samples and gained `add`. */
function ticks(job: JobCase): { before: StepSample[]; now: StepSample[] } {
  const n = job.picks.length;
  const before = Array.from({ length: n }, (_, i) => sampleOf(job, i));
  const added = Array.from({ length: job.add }, (_, k) => sampleOf(job, n + k));
  return { before, now: [...before.slice(Math.min(job.drop, n - 1)), ...added] };
}

const PROBES: Placement[] = [
  { replicas: 1, nodes: 1, localBatchSize: 64 },
  { replicas: 8, nodes: 2, localBatchSize: 32 },
  { replicas: 24, nodes: 6, localBatchSize: 64 },
  { replicas: 4, nodes: 1, localBatchSize: 128, ps: 2 },
];

function relative(a: number, b: number): number {
  return Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b));
}

describe('fit warm start', () => {
  it('predicts what a cold fit predicts, within 1e-9, on random sample sets and windows', () => {
    fc.assert(
      fc.property(jobArb, (job) => {
        const { before, now } = ticks(job);
        const last = fitThroughputModel(before);
        const warm = fitThroughputModel(now, { warmStart: last.warmStart });
        const cold = fitThroughputModel(now);
        for (const p of PROBES) {
          const w = warm.predict(p);
          const c = cold.predict(p);
          assert.ok(
            relative(w.throughput, c.throughput) <= WARM_TOLERANCE,
            `throughput at ${JSON.stringify(p)}`,
          );
          assert.ok(relative(w.stdev, c.stdev) <= WARM_TOLERANCE, `stdev at ${JSON.stringify(p)}`);
        }
      }),
      { numRuns: 150, seed: 41 },
    );
  });

  it('from a start that is wrong for the new samples still ends at the cold fit', () => {
    fc.assert(
      fc.property(jobArb, jobArb, (job, other) => {
        const { now } = ticks(job);
        const foreign = fitThroughputModel(ticks(other).now).warmStart;
        const warm = fitThroughputModel(now, { warmStart: { joint: [0, 1, 2, 3, 4, 5, 6], ...foreign } });
        const cold = fitThroughputModel(now);
        for (const p of PROBES)
          assert.ok(relative(warm.predict(p).throughput, cold.predict(p).throughput) <= WARM_TOLERANCE);
      }),
      { numRuns: 60, seed: 7 },
    );
  });
});

describe('placement-grouped least squares', () => {
  it('finds the parameters the one-row-per-sample fit finds, within 1e-9, at a given overlap exponent', () => {
    fc.assert(
      fc.property(jobArb, fc.constantFrom(1, 1.5, 2, 4), (job, gamma) => {
        const { now } = ticks(job);
        const grouped = fitThroughputModel(now, { gamma });
        const perSample = fitThroughputModel(now, { gamma, groupSamples: false });
        const a = [...grouped.parameters.compute, ...grouped.parameters.sync];
        const b = [...perSample.parameters.compute, ...perSample.parameters.sync];
        const scale = Math.max(...b.map(Math.abs), 1e-12);
        a.forEach((v, i) => {
          assert.ok(Math.abs(v - (b[i] ?? 0)) <= 1e-9 * scale, `parameter ${i}: ${v} vs ${b[i]}`);
        });
        for (const p of PROBES) {
          const g = grouped.predict(p);
          const s = perSample.predict(p);
          assert.ok(relative(g.throughput, s.throughput) <= 1e-9, `throughput at ${JSON.stringify(p)}`);
          assert.ok(relative(g.stdev, s.stdev) <= 1e-9, `stdev at ${JSON.stringify(p)}`);
        }
      }),
      { numRuns: 150, seed: 3 },
    );
  });
});

describe('nnls from a start', () => {
  /** Deterministic pseudo-random numbers in [-1, 1). */
  function lcg(seed: number): () => number {
    let s = seed >>> 0;
    return () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return (s / 2 ** 32) * 2 - 1;
    };
  }

  it('ends where the cold start ends, from any start, in no more steps from the right one', () => {
    const rand = lcg(41);
    for (let trial = 0; trial < 300; trial++) {
      const n = 2 + (trial % 6);
      const m = n + (trial % 5);
      const A = Array.from({ length: m }, () => Array.from({ length: n }, () => rand()));
      // Prior-like rows: full column rank, so the minimum is unique.
      for (let j = 0; j < n; j++) A.push(Array.from({ length: n }, (_, i) => (i === j ? 0.1 : 0)));
      const b = A.map(() => rand());
      const cold = nnls(A, b);
      const starts = [cold.active, [], [n + 3, -1, 0.5], Array.from({ length: n }, (_, j) => j), [0, 0, 1]];
      for (const start of starts) {
        const warm = nnls(A, b, undefined, start);
        warm.x.forEach((v, j) => {
          assert.ok(Math.abs(v - (cold.x[j] ?? 0)) <= 1e-9, `trial ${trial} start ${start} x${j}`);
        });
      }
      assert.ok(nnls(A, b, undefined, cold.active).iterations <= cold.iterations);
      if (cold.active.length > 0) assert.equal(nnls(A, b, undefined, cold.active).iterations, 0);
    }
  });

  // A 2-placement joint fit at gamma 1 where the last fit's active set holds a column that now solves to
  // 1e-19: kept, it stalls the first step (the new column is dropped at once and never retried) short of the
  // optimum; left out, the warm run ends at the optimum itself, in fewer steps than from x = 0.
  it('leaves out start columns that solve to a rounding zero, and never ends short of the optimum', () => {
    const A = [
      [38.49001794597505, 38.49001794597505, 38.49001794597505, 0, 0, 115.47005383792515, 115.47005383792515],
      [22.22222222222222, 22.22222222222222, 22.22222222222222, 0, 0, 37.33126496918458, 37.33126496918458],
      [1.1111111111111112, 0, 0, 0, 0, 0, 0],
      [0, 1.1111111111111112, 0, 0, 0, 0, 0],
      [0, 0, 3.703703703703704, 0, 0, 0, 0],
      [0, 0, 0, 3.703703703703704, 0, 0, 0],
      [0, 0, 0, 0, 11.111111111111112, 0, 0],
      [0, 0, 0, 0, 0, 1.1111111111111112, 0],
      [0, 0, 0, 0, 0, 0, 3.703703703703704],
    ];
    const b = [1.7320508075688772, 1, 0.025, 0.025, 0, 0.008333333333333335, 0.01, 0.010000000000000002, 0];
    const cold = nnls(A, b);
    const warm = nnls(A, b, undefined, [0, 1, 2, 3, 4]);
    assert.deepEqual(warm.active, cold.active);
    assert.ok(Math.abs(warm.residualNorm - cold.residualNorm) <= 1e-15);
    assert.ok(warm.iterations < cold.iterations, `${warm.iterations} steps warm, ${cold.iterations} cold`);
  });
});
