// The throughput model's public surface. Implementation: fit.ts (fitting), forms.ts (model forms),
// nnls.ts (non-negative least squares).
export interface Placement {
  replicas: number;
  nodes: number;
  ps?: number;
  localBatchSize: number;
}

export interface Prediction {
  /** Seconds per optimizer step. */
  stepTime: number;
  /** One standard deviation of stepTime, seconds; larger where the fit extrapolates. */
  stdev: number;
  /** Samples per second = replicas * localBatchSize / stepTime. */
  throughput: number;
}

export interface ThroughputModel {
  predict(placement: Placement): Prediction;
  /** How many samples the fit used, and how many distinct scales (replica counts) they covered. */
  readonly sampleCount: number;
  readonly distinctScales: number;
}

/**
 * Replaces a job's fitted model by another answer for the same questions (simulation only: the world's truth,
 * to measure what the model's errors cost). `signature` names the job's kind of training (its profile key).
 */
export type ThroughputOracle = (signature: string, fitted: ThroughputModel) => ThroughputModel;

/** The model a decision uses: the fitted one, or the oracle's answer in its place when there is an oracle. */
export function modelFor(
  fitted: ThroughputModel,
  signature: string,
  oracle: ThroughputOracle | undefined,
): ThroughputModel {
  return oracle ? oracle(signature, fitted) : fitted;
}

export type { FitOptions, FittedParameters, FittedThroughputModel } from './fit.js';
export { evaluateStepTime, evaluateSyncTime, fitThroughputModel } from './fit.js';
export type { FormName } from './forms.js';
