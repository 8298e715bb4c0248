// What the running jobs of a submitted job's signature have used so far, for its initial configuration: the
// profile store learns only from runs that finished, and a signature's first runs often overlap.
import { hasSucceeded, readJob } from '../adapters/job-adapter.js';
import type { ClusterClient } from '../cluster/cluster-client.js';
import { MissingMetricsError } from '../errors.js';
import { type ManagementScope, managementScope } from '../management.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import type { RunningPeers } from '../policies/initial-config.js';
import { mergePeaks, type PeakUsage } from '../policies/profiles.js';
import type { JobView, RoleName } from '../types.js';

/** Peers asked for their usage per submit, the longest running first (the likeliest past their peak): one metrics query each. */
export const MAX_RUNNING_PEERS = 3;
/** How far back a peer's usage is read, as for a finished run's profile. */
const USAGE_WINDOW_SECONDS = 24 * 3600;

/**
 * The peaks of up to MAX_RUNNING_PEERS other managed jobs of the same kind, namespace and signature that have
 * not succeeded (those are in the profile), never another namespace's: the signature is the user's to set,
 * and one tenant's jobs must not size another's.
 * Undefined when none has usage to show. A peer whose manifest cannot be read or whose metrics are missing
 * is left out; any other error is the caller's.
 */
export async function runningPeersOf(
  job: JobView,
  cluster: Pick<ClusterClient, 'listJobs'>,
  metrics: Pick<MetricsSource, 'containerUsage'>,
  scope: ManagementScope,
): Promise<RunningPeers | undefined> {
  const candidates: JobView[] = [];
  for (const obj of await cluster.listJobs(job.ref.kind, job.ref.namespace)) {
    let view: JobView;
    try {
      view = readJob(obj, managementScope(scope));
    } catch {
      continue;
    }
    if (view.ref.name === job.ref.name) continue;
    if (view.managed && view.signature === job.signature && !hasSucceeded(obj)) candidates.push(view);
  }
  candidates.sort((a, b) => (a.creationTimestamp ?? 0) - (b.creationTimestamp ?? 0));
  let peaks: Partial<Record<RoleName, PeakUsage>> = {};
  let jobs = 0;
  for (const peer of candidates.slice(0, MAX_RUNNING_PEERS)) {
    const usage = await metrics.containerUsage(peer.ref, USAGE_WINDOW_SECONDS).catch((error: unknown) => {
      if (error instanceof MissingMetricsError) return [];
      throw error;
    });
    if (usage.length === 0) continue;
    jobs += 1;
    peaks = mergePeaks(peaks, usage);
  }
  return jobs > 0 ? { jobs, peaks } : undefined;
}
