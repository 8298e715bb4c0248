// The fit predicts a placement from the nodes it would span; where the pods really land is the scheduler's
// choice (first fit, other jobs' pods), so a size the job has already run at can do worse than the fit says.
// Judging such a size by what it did keeps tuning and rebalance from growing a job back to a size that was
// slow, shrinking it again, and paying a restart each way.

import type { StepSample } from '../types.js';
import type { FitWarmStart } from './fit.js';
import {
  fitThroughputModel,
  type Placement,
  type Prediction,
  type ThroughputModel,
} from './throughput-model.js';

/**
 * The model tuning and rebalance use for a running job: fitted on its samples and `prior` (its signature's
 * profile where that agrees with them: agreeingPrior), bounded by its own samples.
 */
export function fitRuntimeModel(
  samples: readonly StepSample[],
  prior: readonly StepSample[] = [],
): ThroughputModel {
  return fitRuntimeModelFrom(samples, prior).model;
}

/** fitRuntimeModel, started from an earlier fit's `warmStart` (same answer up to rounding), and its own. */
export function fitRuntimeModelFrom(
  samples: readonly StepSample[],
  prior: readonly StepSample[],
  warmStart?: FitWarmStart,
): { model: ThroughputModel; warmStart: FitWarmStart } {
  const fitted = fitThroughputModel([...samples, ...prior], warmStart ? { warmStart } : {});
  return { model: boundedByObservations(fitted, samples), warmStart: fitted.warmStart };
}

/** Relative difference under which two local batch sizes count as the same configuration. */
const SAME_BATCH = 0.01;

/**
 * The model, except that at a worker (and PS) count seen in `samples` with the same local batch it never
 * predicts a step faster than the mean observed there. Spread and the other placements are the model's.
 */
export function boundedByObservations(
  model: ThroughputModel,
  samples: readonly StepSample[],
): ThroughputModel {
  const observed = new Map<string, { total: number; count: number; localBatchSize: number }>();
  for (const s of samples) {
    if (!(s.stepTime > 0)) continue;
    const key = `${s.replicas}/${s.ps ?? 0}`;
    const entry = observed.get(key);
    if (!entry) observed.set(key, { total: s.stepTime, count: 1, localBatchSize: s.localBatchSize });
    else if (sameBatch(entry.localBatchSize, s.localBatchSize)) {
      entry.total += s.stepTime;
      entry.count += 1;
    }
  }
  return {
    sampleCount: model.sampleCount,
    distinctScales: model.distinctScales,
    predict(placement: Placement): Prediction {
      const fitted = model.predict(placement);
      const seen = observed.get(`${placement.replicas}/${placement.ps ?? 0}`);
      if (!seen || !sameBatch(seen.localBatchSize, placement.localBatchSize)) return fitted;
      const stepTime = seen.total / seen.count;
      if (!(stepTime > fitted.stepTime)) return fitted;
      return {
        ...fitted,
        stepTime,
        throughput: (placement.replicas * placement.localBatchSize) / stepTime,
      };
    },
  };
}

function sameBatch(a: number, b: number): boolean {
  return Math.abs(a - b) <= SAME_BATCH * Math.max(Math.abs(a), Math.abs(b));
}
