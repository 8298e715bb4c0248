// What the queue-based BASELINES (manual, backfill, tiresias) see of a job: the GPUs the user asked for and
// when it arrived. None of them resizes a job: each runs it at the user's size or not at all.

export interface QueuedJob {
  name: string;
  /** GPUs the user asked for (one worker per GPU), capped at the cluster's GPUs. */
  gpus: number;
  /** Arrival, in seconds since the start of the workload. */
  arrival: number;
}
