// The schedule tick's metrics, read for every managed job at once (MetricsSource batch reads: a bounded
// number of PromQL queries whatever the number of jobs) before its per-job loop, which then takes each job's
// entry. A job the batch did not cover (not managed when listed, or changed since) is read on its own, so
// each job's observations and rescale measurement are exactly what the per-job reads would give it.
import { readJob, refOf } from '../adapters/job-adapter.js';
import type { KubeObject } from '../cluster/cluster-client.js';
import { type JobStateLookup, trustedStateOf } from '../cluster/job-state.js';
import type { ManagementScope } from '../management.js';
import { type JobReading, jobKey, settle } from '../metrics/job-readings.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import type { JobAutoscalerState, JobRef, JobView } from '../types.js';
import { measureLastRescale, withBatchedRescaleReads } from './rescale-measurement.js';
import { type JobObservation, observeJob, observeJobs, type RuntimeObservations } from './runtime-review.js';

export interface TickMetrics {
  /** observeJob's answer for the job: its observations, or the error it would throw. */
  observe(ref: JobRef): Promise<RuntimeObservations>;
  /** measureLastRescale's answer for the job. */
  measure(view: Pick<JobView, 'ref' | 'state'>): Promise<JobAutoscalerState>;
  /** The metrics, answering the rescale reads from the batch: for the writes' re-reads (actOnJob). */
  source: MetricsSource;
}

/** The managed jobs among `listed` as the tick will see them; a job that cannot be read is left to the loop. */
function managedViews(
  listed: readonly KubeObject[],
  states: JobStateLookup,
  read: (obj: KubeObject) => JobView,
): Pick<JobView, 'ref' | 'state'>[] {
  const views: Pick<JobView, 'ref' | 'state'>[] = [];
  for (const obj of listed) {
    try {
      const view = read(obj);
      if (view.managed) views.push({ ref: refOf(obj), state: trustedStateOf(obj, states(refOf(obj))) });
    } catch {
      // Malformed: its own review reports why (loadSnapshot), with no metrics read for it.
    }
  }
  return views;
}

/** One batch read of every managed job's observations and rescale measurement. */
export async function readTickMetrics(
  metrics: MetricsSource,
  listed: readonly KubeObject[],
  scope: ManagementScope,
  states: JobStateLookup,
  /** readJob(obj, scope), where the tick keeps each job's reading for its own review (it must not change it). */
  read: (obj: KubeObject) => JobView = (obj) => readJob(obj, scope),
): Promise<TickMetrics> {
  const views = managedViews(listed, states, read);
  const [observed, measured] = await Promise.all([
    settle(() =>
      observeJobs(
        metrics,
        views.map((v) => v.ref),
      ),
    ),
    settle(() => withBatchedRescaleReads(metrics, views)),
  ]);
  // A batch that failed as a whole (a bug: its reads settle per job) leaves each job to its own reads.
  const source = measured.ok ? measured.value : metrics;
  const entryOf = (ref: JobRef): JobObservation | undefined =>
    observed.ok ? observed.value.get(jobKey(ref)) : { ok: false, error: observed.error };
  return {
    observe: async (ref) => {
      const entry: JobReading<RuntimeObservations> | undefined = entryOf(ref);
      if (!entry) return observeJob(metrics, ref);
      if (!entry.ok) throw entry.error;
      return entry.value;
    },
    measure: (view) => measureLastRescale(source, view),
    source,
  };
}
