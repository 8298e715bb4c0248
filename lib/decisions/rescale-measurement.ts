// Measures what the job's last rescale cost, from its own metrics: the time from trainscaler's patch to the
// first step of the re-formed world (MetricsSource.firstStepAfterPause), recorded per direction on the job's
// state (trainscaler.io/state: rescaleCost), where tuning and rebalance read it (lib/policies/rescale-cost.ts).
import { TrainscalerError } from '../errors.js';
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
    return withMeasuredRescale(view.state, await metrics.firstStepAfterPause(view.ref, last.at));
  } catch (error) {
    if (error instanceof TrainscalerError) return view.state;
    throw error;
  }
}
