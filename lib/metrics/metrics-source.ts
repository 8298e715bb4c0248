import type { ContainerUsage, JobRef, StepSample, WorkerStepTimes } from '../types.js';

/**
 * Where step times and resource usage come from: Prometheus in production, the simulated cluster in
 * the demo. Implementations throw MissingMetricsError rather than return invented data.
 */
export interface MetricsSource {
  /** Observed step times of the job across the scales it has run at, newest last. */
  stepSamples(ref: JobRef, windowSeconds: number): Promise<StepSample[]>;
  /** Peak usage per pod of the training container over the window. */
  containerUsage(ref: JobRef, windowSeconds: number): Promise<ContainerUsage[]>;
  /** Per-worker step times over the window, for straggler detection. */
  workerStepTimes(ref: JobRef, windowSeconds: number): Promise<WorkerStepTimes[]>;
  /** Samples processed so far, when the job reports it. */
  samplesProcessed(ref: JobRef): Promise<number | undefined>;
  /**
   * Epoch seconds of the job's first training step after `since` that ended a pause in its progress (the
   * first step of a world re-formed after a rescale), when its metrics show one; undefined while none is
   * seen. Optional: a source without it leaves rescale costs at their defaults.
   */
  firstStepAfterPause?(ref: JobRef, since: number): Promise<number | undefined>;
}
