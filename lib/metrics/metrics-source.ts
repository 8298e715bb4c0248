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
}
