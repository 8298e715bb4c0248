import type { ContainerUsage, JobRef, StepSample, WorkerStepTimes } from '../types.js';
import type { JobReadings, SinceAsk } from './job-readings.js';

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
  /**
   * Seconds without progress of the pause the job's workers ended after `since` (its last step before it to its
   * first after it), when its metrics show one. Optional: without it a growth is charged the default pause.
   */
  pauseEndedAfter?(ref: JobRef, since: number): Promise<number | undefined>;
  /*
   * Batch reads: the same readings for many jobs at once, in a number of queries that does not grow with the
   * jobs (the schedule tick reads every managed job). Each answers every asked job (jobKey) with the value
   * its per-job read would give or the error it would throw; a job the answer does not hold is its
   * MissingMetricsError. Optional: without them the tick reads job by job (lib/decisions/runtime-review.ts).
   */
  stepSamplesOfJobs?(refs: readonly JobRef[], windowSeconds: number): Promise<JobReadings<StepSample[]>>;
  containerUsageOfJobs?(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<ContainerUsage[]>>;
  workerStepTimesOfJobs?(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<WorkerStepTimes[]>>;
  samplesProcessedOfJobs?(refs: readonly JobRef[]): Promise<JobReadings<number | undefined>>;
  firstStepAfterPauseOfJobs?(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>>;
  pauseEndedAfterOfJobs?(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>>;
}
