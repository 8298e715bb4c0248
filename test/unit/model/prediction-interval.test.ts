import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  intervalOf,
  placeInInterval,
  predictionInterval,
  twoSidedZ,
} from '../../../lib/model/prediction-interval.js';
import { fitThroughputModel, type Placement } from '../../../lib/model/throughput-model.js';
import type { StepSample } from '../../../lib/types.js';

/** Seeded standard normals (LCG + Box-Muller): the same draws on every run. */
function normals(seed: number): () => number {
  let state = seed >>> 0;
  const uniform = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state + 0.5) / 2 ** 32;
  };
  return () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
}

/** A job whose step is 0.1 s + 0.2 s x batch/32 of compute, plus 0.03 s of sync per extra replica. */
const trueStep = (p: Placement) =>
  0.1 + (0.2 * p.localBatchSize) / 32 + (p.replicas > 1 ? 0.03 * p.replicas : 0);

function noisySamples(
  placements: Placement[],
  perPlacement: number,
  noise: number,
  seed: number,
): StepSample[] {
  const draw = normals(seed);
  return placements.flatMap((p) =>
    Array.from({ length: perPlacement }, () => ({ ...p, stepTime: trueStep(p) * (1 + noise * draw()) })),
  );
}

describe('twoSidedZ', () => {
  it('gives the normal quantiles of the usual coverages', () => {
    assert.ok(Math.abs(twoSidedZ(0.9) - 1.6449) < 1e-3);
    assert.ok(Math.abs(twoSidedZ(0.95) - 1.96) < 1e-3);
    assert.ok(Math.abs(twoSidedZ(0.6827) - 1) < 1e-3);
  });

  it('refuses a coverage outside (0, 1)', () => {
    for (const bad of [0, 1, -0.1, 1.5, Number.NaN]) assert.throws(() => twoSidedZ(bad), RangeError);
  });
});

describe('intervalOf', () => {
  const placement: Placement = { replicas: 2, nodes: 1, localBatchSize: 16 };

  it('turns the step time +- z sd into throughput bounds around the expected throughput', () => {
    const interval = intervalOf({ stepTime: 0.5, stdev: 0.05, throughput: 64 }, placement, 0.9);
    const z = twoSidedZ(0.9);
    assert.equal(interval.expected, 64);
    assert.ok(Math.abs(interval.low - 32 / (0.5 + z * 0.05)) < 1e-9);
    assert.ok(Math.abs(interval.high - 32 / (0.5 - z * 0.05)) < 1e-9);
    assert.ok(interval.low < interval.expected && interval.expected < interval.high);
    assert.deepEqual(interval.stepTime, { expected: 0.5, low: 0.5 - z * 0.05, high: 0.5 + z * 0.05 });
  });

  it('widens with coverage and with the stdev', () => {
    const p = { stepTime: 0.5, stdev: 0.05, throughput: 64 };
    const narrow = intervalOf(p, placement, 0.5);
    const wide = intervalOf(p, placement, 0.99);
    assert.ok(wide.low < narrow.low && wide.high > narrow.high);
    const unsure = intervalOf({ ...p, stdev: 0.1 }, placement, 0.5);
    assert.ok(unsure.low < narrow.low && unsure.high > narrow.high);
  });

  it('is unbounded above when the fast edge of the step time is not positive', () => {
    const interval = intervalOf({ stepTime: 0.5, stdev: 0.4, throughput: 64 }, placement, 0.9);
    assert.equal(interval.high, Number.POSITIVE_INFINITY);
    assert.equal(interval.stepTime.low, 0);
  });

  it('refuses a prediction without a positive step time or with a negative stdev', () => {
    assert.throws(() => intervalOf({ stepTime: 0, stdev: 0.1, throughput: 0 }, placement), RangeError);
    assert.throws(() => intervalOf({ stepTime: 1, stdev: -0.1, throughput: 32 }, placement), RangeError);
  });

  it('places a measurement below, within or above', () => {
    const interval = intervalOf({ stepTime: 0.5, stdev: 0.05, throughput: 64 }, placement, 0.9);
    assert.equal(placeInInterval(interval.low - 1e-6, interval), 'below');
    assert.equal(placeInInterval(interval.low, interval), 'within');
    assert.equal(placeInInterval(64, interval), 'within');
    assert.equal(placeInInterval(interval.high, interval), 'within');
    assert.equal(placeInInterval(interval.high + 1e-6, interval), 'above');
  });
});

describe('predictionInterval of a fitted model', () => {
  const seen: Placement[] = [
    { replicas: 1, nodes: 1, localBatchSize: 32 },
    { replicas: 2, nodes: 1, localBatchSize: 32 },
    { replicas: 4, nodes: 1, localBatchSize: 32 },
  ];

  it('covers about its coverage of new noisy measurements at a placement it has seen', () => {
    const model = fitThroughputModel(noisySamples(seen, 20, 0.05, 1));
    const at = seen[1] as Placement;
    const interval = predictionInterval(model, at, 0.9);
    const fresh = noisySamples([at], 400, 0.05, 99).map(
      (s) => (at.replicas * at.localBatchSize) / s.stepTime,
    );
    const covered = fresh.filter((tp) => placeInInterval(tp, interval) === 'within').length / fresh.length;
    // The fit's noise estimate has its own error: a 90% interval covers 85-97% here, never all or few.
    assert.ok(covered > 0.85 && covered < 0.97, `covered ${(covered * 100).toFixed(1)}%`);
  });

  it('is wider where the model extrapolates than where it has measurements', () => {
    const model = fitThroughputModel(noisySamples(seen, 20, 0.05, 2));
    const relWidth = (p: Placement) => {
      const i = predictionInterval(model, p, 0.9);
      return (i.high - i.low) / i.expected;
    };
    assert.ok(relWidth({ replicas: 16, nodes: 4, localBatchSize: 32 }) > relWidth(seen[1] as Placement));
  });

  it('is wide when the job was seen at one size only', () => {
    const one = fitThroughputModel(noisySamples([seen[0] as Placement], 20, 0.05, 3));
    const two = fitThroughputModel(noisySamples(seen, 20, 0.05, 3));
    const at: Placement = { replicas: 2, nodes: 1, localBatchSize: 32 };
    const width = (i: ReturnType<typeof predictionInterval>) => (i.high - i.low) / i.expected;
    assert.ok(width(predictionInterval(one, at)) > width(predictionInterval(two, at)));
  });
});
