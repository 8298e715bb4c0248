// Work conservation, measured: GPUs that no bound pod holds while a running elastic job is below its
// maximum worker count and so could take them. Sampled every decision interval; the benchmark prints the
// GPU-hours per policy (a policy that leaves growth to alerts or long ticks shows it here).
import type { V1Pod } from '@kubernetes/client-node';
import { readJob, roleOf } from '../adapters/job-adapter.js';
import type { KubeObject } from '../cluster/cluster-client.js';

/** GPUs idle and wanted at one instant: min(unheld GPUs, headroom of running elastic jobs below max). */
export function idleGpusWhileJobsCouldGrow(
  clusterGpus: number,
  pods: readonly V1Pod[],
  jobs: readonly KubeObject[],
  running: (job: KubeObject) => boolean,
): number {
  let held = 0;
  for (const pod of pods) {
    const phase = pod.status?.phase;
    if (!pod.spec?.nodeName || phase === 'Succeeded' || phase === 'Failed') continue;
    held += Number(pod.spec.containers[0]?.resources?.requests?.['nvidia.com/gpu'] ?? 0);
  }
  let headroom = 0;
  for (const job of jobs) {
    if (!running(job)) continue;
    const view = readJob(job);
    const worker = roleOf(view, 'Worker');
    if (!view.elastic || !worker) continue;
    headroom += Math.max(0, worker.maxReplicas - worker.replicas);
  }
  return Math.max(0, Math.min(clusterGpus - held, headroom));
}
