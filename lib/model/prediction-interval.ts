// The range a new measurement of a placement's throughput should fall in, from one prediction of the model.
// `predict` gives a step time and one standard deviation that already combines measurement noise, parameter
// uncertainty and the distance from placements seen (fit.ts); reading it as a normal error on the step time
// gives a two-sided interval on the step time, and so on throughput = replicas x batch / step time. It says
// what a measured figure after a resize should be checked against: outside it, the model was wrong there.
import type { Placement, Prediction, ThroughputModel } from './throughput-model.js';

export interface ThroughputInterval {
  /** Central probability the interval is meant to cover, e.g. 0.9. */
  coverage: number;
  /** Samples per second at the predicted step time. */
  expected: number;
  /** Samples per second at step time + z sd. */
  low: number;
  /** Samples per second at step time - z sd; Infinity when that step time is not positive. */
  high: number;
  /** The step-time interval behind it, seconds. */
  stepTime: { expected: number; low: number; high: number };
}

/** erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): enough to place an interval's edges. */
function erf(x: number): number {
  const sign = x < 0 ? -1 : 1;
  const a = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * a);
  const poly =
    t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign * (1 - poly * Math.exp(-a * a));
}

/** z such that a normal variable lies within +-z sd with probability `coverage` (bisection on erf). */
export function twoSidedZ(coverage: number): number {
  if (!(coverage > 0 && coverage < 1)) throw new RangeError(`coverage must be in (0, 1), got ${coverage}`);
  let lo = 0;
  let hi = 10;
  for (let i = 0; i < 80; i++) {
    const mid = (lo + hi) / 2;
    if (erf(mid / Math.SQRT2) < coverage) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The interval of one prediction at `placement` (the prediction must be the model's for that placement). */
export function intervalOf(prediction: Prediction, placement: Placement, coverage = 0.9): ThroughputInterval {
  const { stepTime, stdev } = prediction;
  if (!(stepTime > 0 && stdev >= 0)) {
    throw new RangeError(`prediction needs stepTime > 0 and stdev >= 0, got ${stepTime} / ${stdev}`);
  }
  const z = twoSidedZ(coverage);
  const samplesPerStep = placement.replicas * placement.localBatchSize;
  const slow = stepTime + z * stdev;
  const fast = stepTime - z * stdev;
  return {
    coverage,
    expected: samplesPerStep / stepTime,
    low: samplesPerStep / slow,
    high: fast > 0 ? samplesPerStep / fast : Number.POSITIVE_INFINITY,
    stepTime: { expected: stepTime, low: Math.max(0, fast), high: slow },
  };
}

/** The model's prediction interval of throughput (samples/s) at a placement. */
export function predictionInterval(
  model: ThroughputModel,
  placement: Placement,
  coverage = 0.9,
): ThroughputInterval {
  return intervalOf(model.predict(placement), placement, coverage);
}

/** Where a measured throughput lies against an interval: 'within', 'below' or 'above'. */
export function placeInInterval(
  measured: number,
  interval: ThroughputInterval,
): 'within' | 'below' | 'above' {
  if (measured < interval.low) return 'below';
  if (measured > interval.high) return 'above';
  return 'within';
}
