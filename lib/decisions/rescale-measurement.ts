// Measures what the job's last rescale cost, from its own metrics: the time from trainscaler's patch to the
// first step of the re-formed world (MetricsSource.firstStepAfterPause) and, for a growth, the pause itself
// (MetricsSource.pauseEndedAfter: the old world trains on while the new pods start), recorded per direction on
// the job's state (trainscaler.io/state: rescaleCost), where tuning and rebalance read it
// (lib/policies/rescale-cost.ts).
import { TrainscalerError } from '../errors.js';
import {
  type JobReading,
  type JobReadings,
  jobKey,
  readEach,
  type SinceAsk,
} from '../metrics/job-readings.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import { awaitsMeasurement, withMeasuredRescale } from '../policies/rescale-cost.js';
import type { JobAutoscalerState, JobView } from '../types.js';

/**
 * The job's state with its last rescale measured, when the metrics show the first step after it; unchanged
 * otherwise (nothing to measure, measured already, not seen yet, or the metrics unavailable: a measurement
 * never blocks a decision, the default cost then stands).
 */
export async function measureLastRescale(
  metrics: MetricsSource | undefined,
  view: Pick<JobView, 'ref' | 'state'>,
): Promise<JobAutoscalerState> {
  const last = view.state.lastRescale;
  if (!metrics?.firstStepAfterPause || !last || !awaitsMeasurement(view.state)) return view.state;
  try {
    const firstStepAt = await metrics.firstStepAfterPause(view.ref, last.at);
    const grew = last.to > last.from && firstStepAt !== undefined;
    const pause = grew ? await metrics.pauseEndedAfter?.(view.ref, last.at) : undefined;
    return withMeasuredRescale(view.state, firstStepAt, pause);
  } catch (error) {
    if (error instanceof TrainscalerError) return view.state;
    throw error;
  }
}

type Measured = Pick<JobView, 'ref' | 'state'>;

/** The rescale a measurement is of: a reading is used only for the same one. */
function rescaleKey(view: Measured): string | undefined {
  const last = view.state.lastRescale;
  return last && JSON.stringify([jobKey(view.ref), last.at, last.from, last.to]);
}

/**
 * measureLastRescale for many jobs in a bounded number of metrics queries (the source's batch reads, job by
 * job where it has none): the first steps of every job awaiting a measurement in one read, then the pauses of
 * those that grew and were seen to resume in another. Returns measureLastRescale's answer per job: a job whose
 * last rescale is not the one read here (it changed since, or was not among `views`) is measured on its own.
 */
export async function measureLastRescales(
  metrics: MetricsSource | undefined,
  views: readonly Measured[],
): Promise<(view: Measured) => Promise<JobAutoscalerState>> {
  const perJob = (view: Measured) => measureLastRescale(metrics, view);
  const firstStepAfterPause = metrics?.firstStepAfterPause;
  if (!metrics || !firstStepAfterPause) return perJob;
  const due = views.filter((v) => v.state.lastRescale && awaitsMeasurement(v.state));
  if (due.length === 0) return perJob;
  const asks = (list: readonly Measured[]): SinceAsk[] =>
    list.map((v) => ({ ref: v.ref, since: v.state.lastRescale?.at ?? 0 }));
  const firstSteps =
    (await metrics.firstStepAfterPauseOfJobs?.(asks(due))) ??
    (await readEach(asks(due), (a) => firstStepAfterPause.call(metrics, a.ref, a.since)));
  const grew = due.filter((v) => {
    const last = v.state.lastRescale;
    const first = firstSteps.get(jobKey(v.ref));
    return last && last.to > last.from && first?.ok && first.value !== undefined;
  });
  const pauseEndedAfter = metrics.pauseEndedAfter;
  const pauses: JobReadings<number | undefined> =
    grew.length === 0 || !pauseEndedAfter
      ? new Map()
      : ((await metrics.pauseEndedAfterOfJobs?.(asks(grew))) ??
        (await readEach(asks(grew), (a) => pauseEndedAfter.call(metrics, a.ref, a.since))));
  const readings = new Map<
    string,
    { first: JobReading<number | undefined>; pause?: JobReading<number | undefined> }
  >();
  for (const view of due) {
    const key = rescaleKey(view);
    const first = firstSteps.get(jobKey(view.ref));
    const pause = pauses.get(jobKey(view.ref));
    if (key && first) readings.set(key, pause ? { first, pause } : { first });
  }
  return async (view) => {
    const key = rescaleKey(view);
    const read = key === undefined ? undefined : readings.get(key);
    if (!read || !awaitsMeasurement(view.state)) return perJob(view);
    // As measureLastRescale: a failed read leaves the default cost standing; anything else is a bug, thrown.
    for (const reading of [read.first, read.pause])
      if (reading && !reading.ok) {
        if (reading.error instanceof TrainscalerError) return view.state;
        throw reading.error;
      }
    const firstStepAt = read.first.ok ? read.first.value : undefined;
    return withMeasuredRescale(view.state, firstStepAt, read.pause?.ok ? read.pause.value : undefined);
  };
}
