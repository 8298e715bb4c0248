// BASELINE `manual`: strict first come first served, what a plain Kubernetes queue with a StrictFIFO policy
// (Kueue's StrictFIFO ClusterQueue) gives: the head of the queue waits until its GPUs are free and nothing
// overtakes it.
import type { QueuedJob } from './queue.js';

/** The jobs to start now, in queue order: from the head, while the head fits in the free GPUs. */
export function fcfsAdmissions(queue: readonly QueuedJob[], freeGpus: number): string[] {
  const started: string[] = [];
  let free = freeGpus;
  for (const job of queue) {
    if (job.gpus > free) break;
    started.push(job.name);
    free -= job.gpus;
  }
  return started;
}
