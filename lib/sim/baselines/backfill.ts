// BASELINE `backfill`: first in first out with backfilling, what a Kueue ClusterQueue with the BestEffortFIFO
// queueing strategy does: workloads are tried in arrival order, and one that does not fit is set aside so that
// later ones that fit start now. The user's GPU count, fixed; no preemption.
//
// The guarantee implemented (and tested): after a pass, no waiting job fits in the GPUs left free, and
// among the jobs started in a pass every one that arrived earlier than a started job and fits in what was
// free when its turn came was started too (arrival order decides who gets the GPUs). What is NOT guaranteed,
// as in BestEffortFIFO: the head of the queue holds no reservation, so small later jobs can delay a large
// head job indefinitely (EASY backfilling would need run-time estimates users do not give here).
import type { QueuedJob } from './queue.js';

/** The jobs to start now: every job, in arrival order, that fits in the GPUs still free when its turn comes. */
export function backfillAdmissions(queue: readonly QueuedJob[], freeGpus: number): string[] {
  const started: string[] = [];
  let free = freeGpus;
  for (const job of [...queue].sort(byArrival)) {
    if (job.gpus > free) continue;
    started.push(job.name);
    free -= job.gpus;
  }
  return started;
}

function byArrival(a: QueuedJob, b: QueuedJob): number {
  return a.arrival - b.arrival || a.name.localeCompare(b.name);
}
