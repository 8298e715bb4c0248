// What a worker-count change costs a job: the time it trains not at all, per direction. Growing an elastic
// job loses only the re-rendezvous pause: its new pods start and warm up while the old world trains on (the
// end-to-end training test: 6.2 s from the decision to the first step at the new size, of which 2.8 s paused).
// Shrinking pauses from the patch on (the leaving agent stops at once) and spends one of an elastic
// PyTorchJob's maxRestarts. The defaults are the pauses `npm run bench:rescale` measured
// (lib/torchelastic/recommended-rendezvous.ts); once trainscaler has rescaled the job, its own measurements
// (lib/decisions/rescale-measurement.ts) replace them: a shrink's patch to first step at the new size, a
// growth's pause (its sidecars' last step before it to the first after it). A growth's patch-to-first-step
// time, pods' start included, is recorded and reported, not charged.
import type { PolicyConfig } from '../config.js';
import type { JobAutoscalerState, JobView } from '../types.js';
import { formatDuration } from './placement.js';

export interface RescaleCosts {
  /** Seconds without progress: the pause of a growth (the job's measured pause, else the configured default). */
  up: number;
  upMeasured: boolean;
  /** Seconds without progress of a shrink: the job's measurement, else the configured default. */
  down: number;
  downMeasured: boolean;
  /** The job's last growth, patch to first step at the new size (pods' start included), when measured. */
  upToFirstStep?: number;
}

type CostConfig = Pick<PolicyConfig, 'scaleUpCostSeconds' | 'scaleDownCostSeconds'>;

/** The job's measured shrink cost where it has one, else the defaults. */
export function rescaleCostsOf(job: Pick<JobView, 'state'>, config: CostConfig): RescaleCosts {
  const measured = job.state.rescaleCost;
  return {
    up: measured?.upPause ?? config.scaleUpCostSeconds,
    upMeasured: measured?.upPause !== undefined,
    down: measured?.down ?? config.scaleDownCostSeconds,
    downMeasured: measured?.down !== undefined,
    ...(measured?.upToFirstStep !== undefined ? { upToFirstStep: measured.upToFirstStep } : {}),
  };
}

export function describeCost(costs: RescaleCosts, direction: 'up' | 'down'): string {
  if (direction === 'down')
    return `scale-down cost ${formatDuration(costs.down)} (${costs.downMeasured ? 'measured on this job' : 'default'})`;
  const last =
    costs.upToFirstStep === undefined
      ? ''
      : `; its last growth took ${formatDuration(costs.upToFirstStep)} from the patch to the first step at the new size`;
  const source = costs.upMeasured ? 'measured on this job' : 'default';
  return `scale-up cost ${formatDuration(costs.up)} (the re-rendezvous pause, ${source}: the job trains on while new pods start${last})`;
}

/**
 * The state after measuring the job's last rescale: `firstStepAt` is the epoch second of the job's first step
 * at the new size after the patch (undefined: not seen yet, nothing changes). Each rescale is measured once;
 * the latest measurement of a direction replaces the earlier one (the job's settings may have changed).
 */
export function withMeasuredRescale(
  state: JobAutoscalerState,
  firstStepAt: number | undefined,
  pauseSeconds?: number,
): JobAutoscalerState {
  const last = state.lastRescale;
  if (!last || last.from === last.to || firstStepAt === undefined || !(firstStepAt > last.at)) return state;
  if (state.rescaleCost?.measuredFor === last.at) return state;
  const rescaleCost = { ...state.rescaleCost, measuredFor: last.at };
  if (last.to < last.from) rescaleCost.down = firstStepAt - last.at;
  else {
    rescaleCost.upToFirstStep = firstStepAt - last.at;
    // A pause longer than the whole rescale is not this rescale's (an older pause still exported).
    if (pauseSeconds !== undefined && pauseSeconds > 0 && pauseSeconds <= firstStepAt - last.at)
      rescaleCost.upPause = pauseSeconds;
  }
  return { ...state, rescaleCost };
}

/** Whether the last rescale still waits for its measurement. */
export function awaitsMeasurement(state: JobAutoscalerState): boolean {
  const last = state.lastRescale;
  return last !== undefined && last.from !== last.to && state.rescaleCost?.measuredFor !== last.at;
}

/**
 * Worker scale-downs an elastic PyTorchJob may still take: each spends one of its elasticPolicy.maxRestarts
 * (measured) and the last is kept in reserve for a real failure, as the guardrail does (lib/guardrails.ts).
 * Infinity for a job without such a budget.
 */
export function scaleDownsLeft(job: Pick<JobView, 'state' | 'torchElastic'>): number {
  const max = job.torchElastic?.maxRestarts;
  if (max === undefined) return Number.POSITIVE_INFINITY;
  return Math.max(0, max - 1 - (job.state.scaleDowns ?? 0));
}

export function restartBudgetNote(job: Pick<JobView, 'state' | 'torchElastic'>): string {
  const max = job.torchElastic?.maxRestarts;
  return `${job.state.scaleDowns ?? 0} of maxRestarts ${max ?? '-'} spent on scale-downs, the last kept in reserve`;
}
