// BASELINE `tiresias`: the Tiresias scheduler (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed
// Deep Learning", NSDI'19), its discretized two-dimensional least-attained-service policy (2D-LAS) with
// preemption, at the user's GPU count (Tiresias never resizes a job).
//  - Attained service is two-dimensional: GPUs x time the job has held them (since its last promotion).
//  - K priority queues; a job enters the highest (0) and is demoted to queue k+1 once its attained service
//    reaches thresholds[k]. Within a queue jobs are served first come first served by the time they
//    entered it (the paper's FIFO within a queue, which avoids LAS's thrashing among equals).
//  - Every pass the cluster's GPUs go to the jobs in priority order (queue, then entry time); a job that
//    does not fit is skipped and lower ones may take what is left; a running job that is not chosen is
//    preempted (checkpointed and stopped), a waiting one that is chosen is started or resumed.
//  - Starvation: a preempted job whose wait since it last ran reaches promoteKnob x the time it has held
//    GPUs since its last promotion (the paper's PROMOTEKNOB) is promoted back to queue 0, service reset.
// The parameters, from the Pollux artifact's Tiresias (petuum/adaptdl, branch osdi21-artifact,
// simulator/tiresias.py, which produced the published 4,038 s): 2 queues, one threshold of 16 GPU-hours.
// That implementation has the promotion code but switches it off (knob 0); we keep it on with knob 2 (our
// choice; the paper leaves PROMOTEKNOB to the operator), so a demoted job waits at most about twice the time it has run.
// Pure: the caller keeps the state between passes and applies the starts and preemptions.
import type { QueuedJob } from './queue.js';

export interface TiresiasParams {
  /** Attained-service thresholds in GPU-seconds between consecutive queues: K queues, K - 1 thresholds. */
  queueThresholdsGpuSeconds: readonly number[];
  /** Promote a preempted job once its wait since it last ran reaches this many times its service; 0: never. */
  promoteKnob: number;
}

export const TIRESIAS_DEFAULTS: TiresiasParams = {
  queueThresholdsGpuSeconds: [16 * 3600],
  promoteKnob: 2,
};

export interface TiresiasJobState {
  queue: number;
  /** When the job entered its current queue (FIFO order within the queue). */
  enteredQueueAt: number;
  /** Seconds it has held its GPUs since it entered queue 0 (reset on promotion). */
  serviceSeconds: number;
  /** Seconds it has waited since it last held GPUs (only counted once it has run). */
  waitingSeconds: number;
  running: boolean;
  lastCheckAt: number;
}

export interface TiresiasPass {
  state: Map<string, TiresiasJobState>;
  /** Jobs to start or resume, in priority order. */
  start: string[];
  /** Running jobs to preempt. */
  preempt: string[];
  demoted: string[];
  promoted: string[];
}

/** Attained service of a job in GPU-seconds: its GPUs x the time it held them since its last promotion. */
export function attainedService(job: QueuedJob, state: TiresiasJobState): number {
  return job.gpus * state.serviceSeconds;
}

/**
 * One scheduling pass at `now` over the unfinished jobs (running, preempted or never started); `state` holds
 * what the previous passes learnt (jobs missing from it are new arrivals) and is not modified.
 */
export function tiresiasPass(
  jobs: readonly QueuedJob[],
  state: ReadonlyMap<string, TiresiasJobState>,
  input: { now: number; capacityGpus: number; params?: TiresiasParams },
): TiresiasPass {
  const params = input.params ?? TIRESIAS_DEFAULTS;
  const thresholds = params.queueThresholdsGpuSeconds;
  const next = new Map<string, TiresiasJobState>();
  const demoted: string[] = [];
  const promoted: string[] = [];
  for (const job of jobs) {
    const previous = state.get(job.name);
    const s: TiresiasJobState = previous
      ? { ...previous }
      : {
          queue: 0,
          enteredQueueAt: job.arrival,
          serviceSeconds: 0,
          waitingSeconds: 0,
          running: false,
          lastCheckAt: input.now,
        };
    const dt = Math.max(0, input.now - s.lastCheckAt);
    s.lastCheckAt = input.now;
    if (s.running) {
      s.serviceSeconds += dt;
      const from = s.queue;
      while (s.queue < thresholds.length && attainedService(job, s) >= (thresholds[s.queue] ?? Infinity))
        s.queue += 1;
      if (s.queue !== from) {
        s.enteredQueueAt = input.now;
        demoted.push(job.name);
      }
    } else if (s.serviceSeconds > 0) {
      s.waitingSeconds += dt;
      if (
        params.promoteKnob > 0 &&
        s.queue > 0 &&
        s.waitingSeconds >= params.promoteKnob * s.serviceSeconds
      ) {
        s.queue = 0;
        s.enteredQueueAt = input.now;
        s.serviceSeconds = 0;
        s.waitingSeconds = 0;
        promoted.push(job.name);
      }
    }
    next.set(job.name, s);
  }

  const order = [...jobs].sort((a, b) => {
    const sa = next.get(a.name);
    const sb = next.get(b.name);
    return (
      (sa?.queue ?? 0) - (sb?.queue ?? 0) ||
      (sa?.enteredQueueAt ?? 0) - (sb?.enteredQueueAt ?? 0) ||
      a.arrival - b.arrival ||
      a.name.localeCompare(b.name)
    );
  });
  let free = input.capacityGpus;
  const chosen = new Set<string>();
  for (const job of order) {
    if (job.gpus > free) continue;
    chosen.add(job.name);
    free -= job.gpus;
  }
  const start: string[] = [];
  const preempt: string[] = [];
  for (const job of order) {
    const s = next.get(job.name);
    if (!s) continue;
    const run = chosen.has(job.name);
    if (run && !s.running) {
      start.push(job.name);
      s.waitingSeconds = 0;
    }
    if (!run && s.running) preempt.push(job.name);
    s.running = run;
  }
  return { state: next, start, preempt, demoted, promoted };
}
