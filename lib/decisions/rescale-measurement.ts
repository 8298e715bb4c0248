// Measures what the job's last rescale cost, from its own metrics: the time from trainscaler's patch to the
// first step of the re-formed world (MetricsSource.firstStepAfterPause) and, for a growth, the pause itself
// (MetricsSource.pauseEndedAfter: the old world trains on while the new pods start), recorded per direction in
// the job's state (its ScaledTrainingJob status: rescaleCost), where tuning and rebalance read it
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
import type { JobAutoscalerState, JobRef, JobView } from '../types.js';

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

/** A reading of one job since one instant. */
const askKey = (ref: JobRef, since: number) => JSON.stringify([jobKey(ref), since]);

function answer(reading: JobReading<number | undefined>): Promise<number | undefined> {
  return reading.ok ? Promise.resolve(reading.value) : Promise.reject(reading.error);
}

/**
 * The reads measureLastRescale makes, for every job of `views` awaiting a measurement, in a bounded number of
 * metrics queries (the source's batch reads, job by job where it has none): the first steps after each job's
 * last rescale in one read, then the pauses of the jobs that grew and were seen to resume in another. Returns
 * `metrics` answering those reads (the same job, the same instant) from the batch, and any other read as before:
 * measureLastRescale on it gives each job what it gives on `metrics`, and a later read in the same tick (the
 * write's re-read) the same answer as the decision had.
 */
export async function withBatchedRescaleReads(
  metrics: MetricsSource,
  views: readonly Measured[],
): Promise<MetricsSource> {
  const { firstStepAfterPause, pauseEndedAfter } = metrics;
  if (!firstStepAfterPause) return metrics;
  const due = views.filter((v) => v.state.lastRescale && awaitsMeasurement(v.state));
  if (due.length === 0) return metrics;
  const asks = (list: readonly Measured[]): SinceAsk[] =>
    list.map((v) => ({ ref: v.ref, since: v.state.lastRescale?.at ?? 0 }));
  const firstSteps =
    (await metrics.firstStepAfterPauseOfJobs?.(asks(due))) ??
    (await readEach(asks(due), (a) => firstStepAfterPause.call(metrics, a.ref, a.since)));
  // measureLastRescale asks for the pause only of a growth whose first step it saw.
  const grew = due.filter((v) => {
    const last = v.state.lastRescale;
    const first = firstSteps.get(jobKey(v.ref));
    return last && last.to > last.from && first?.ok && first.value !== undefined;
  });
  const pauses: JobReadings<number | undefined> =
    grew.length === 0 || !pauseEndedAfter
      ? new Map()
      : ((await metrics.pauseEndedAfterOfJobs?.(asks(grew))) ??
        (await readEach(asks(grew), (a) => pauseEndedAfter.call(metrics, a.ref, a.since))));
  const batched = (readings: JobReadings<number | undefined>, list: readonly Measured[]) => {
    const out = new Map<string, JobReading<number | undefined>>();
    for (const { ref, since } of asks(list)) {
      const reading = readings.get(jobKey(ref));
      if (reading) out.set(askKey(ref, since), reading);
    }
    return out;
  };
  const firsts = batched(firstSteps, due);
  const pausesAt = batched(pauses, grew);
  const source: MetricsSource = {
    stepSamples: (ref, window) => metrics.stepSamples(ref, window),
    containerUsage: (ref, window) => metrics.containerUsage(ref, window),
    workerStepTimes: (ref, window) => metrics.workerStepTimes(ref, window),
    samplesProcessed: (ref) => metrics.samplesProcessed(ref),
    firstStepAfterPause: (ref, since) => {
      const reading = firsts.get(askKey(ref, since));
      return reading ? answer(reading) : firstStepAfterPause.call(metrics, ref, since);
    },
  };
  if (pauseEndedAfter)
    source.pauseEndedAfter = (ref, since) => {
      const reading = pausesAt.get(askKey(ref, since));
      return reading ? answer(reading) : pauseEndedAfter.call(metrics, ref, since);
    };
  return source;
}
