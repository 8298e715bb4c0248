// What a worker-count change costs a job: the time it trains not at all, per direction. Growing an elastic
// job loses only the re-rendezvous pause: its new pods start and warm up while the old world trains on (the
// end-to-end training test: 6.2 s from the decision to the first step at the new size, of which 2.8 s paused).
// Shrinking pauses from the patch on (the leaving agent stops at once) and spends one of an elastic
// PyTorchJob's maxRestarts. Once trainscaler has rescaled the job, its own measurements
// (lib/decisions/rescale-measurement.ts) are its cost: a shrink's patch to first step at the new size, a
// growth's pause (its sidecars' last step before it to the first after it). Before that: the median of what
// earlier runs of its signature measured, else an estimate from how it is launched (launcher or plain torchrun
// and its rendezvous settings, lib/torchelastic/launch-cost.ts), else the configured default (the launcher's
// measured pauses, lib/torchelastic/recommended-rendezvous.ts). A growth's patch-to-first-step time, pods'
// start included, is recorded and reported, not charged.
import type { PolicyConfig } from '../config.js';
import { launchCostEstimate } from '../torchelastic/launch-cost.js';
import type { JobAutoscalerState, JobView } from '../types.js';
import { formatDuration } from './placement.js';

/**
 * Where a rescale cost comes from, best first: measured on this job, measured on earlier runs of its
 * signature, estimated from how the job is launched, the configured default.
 */
export type CostSource = 'measured' | 'signature' | 'launch' | 'default';

export interface RescaleCosts {
  /** Seconds without progress: the pause of a growth. */
  up: number;
  upSource: CostSource;
  /** Why that figure, for the reason (e.g. "measured on this job"). */
  upFrom: string;
  /** Seconds without progress of a shrink. */
  down: number;
  downSource: CostSource;
  downFrom: string;
  /** The job's last growth, patch to first step at the new size (pods' start included), when measured. */
  upToFirstStep?: number;
}

type CostConfig = Pick<PolicyConfig, 'scaleUpCostSeconds' | 'scaleDownCostSeconds'>;
type CostJob = Pick<JobView, 'state'> & Partial<Pick<JobView, 'torchElastic' | 'signatureRescaleCost'>>;

const NOT_YET = 'not yet measured on this job';

/** One direction's cost from the best source the job has. */
function costOf(
  job: CostJob,
  direction: 'up' | 'down',
  configured: number,
): { seconds: number; source: CostSource; from: string } {
  const measured = direction === 'up' ? job.state.rescaleCost?.upPause : job.state.rescaleCost?.down;
  if (measured !== undefined) return { seconds: measured, source: 'measured', from: 'measured on this job' };
  const signature = job.signatureRescaleCost;
  const earlier = direction === 'up' ? signature?.up : signature?.down;
  if (earlier !== undefined) {
    const runs = (direction === 'up' ? signature?.upRuns : signature?.downRuns) ?? 1;
    const what = runs === 1 ? 'measured on an earlier run' : `median of ${runs} earlier runs`;
    return { seconds: earlier, source: 'signature', from: `${what} of its signature; ${NOT_YET}` };
  }
  const launch = job.torchElastic?.launch;
  const estimate = launch ? launchCostEstimate(launch)?.[direction] : undefined;
  if (estimate)
    return {
      seconds: estimate.seconds,
      source: 'launch',
      from: `${estimate.basis}, from its launch; ${NOT_YET}`,
    };
  const why = launch?.unknownWhy ? `; launch not recognised: ${launch.unknownWhy}` : '';
  return { seconds: configured, source: 'default', from: `default${why}` };
}

/** The job's rescale costs, each direction from its best source (CostSource). */
export function rescaleCostsOf(job: CostJob, config: CostConfig): RescaleCosts {
  const up = costOf(job, 'up', config.scaleUpCostSeconds);
  const down = costOf(job, 'down', config.scaleDownCostSeconds);
  const upToFirstStep = job.state.rescaleCost?.upToFirstStep;
  return {
    up: up.seconds,
    upSource: up.source,
    upFrom: up.from,
    down: down.seconds,
    downSource: down.source,
    downFrom: down.from,
    ...(upToFirstStep !== undefined ? { upToFirstStep } : {}),
  };
}

export function describeCost(costs: RescaleCosts, direction: 'up' | 'down'): string {
  if (direction === 'down') return `scale-down cost ${formatDuration(costs.down)} (${costs.downFrom})`;
  const last =
    costs.upToFirstStep === undefined
      ? ''
      : `; its last growth took ${formatDuration(costs.upToFirstStep)} from the patch to the first step at the new size`;
  return `scale-up cost ${formatDuration(costs.up)} (the re-rendezvous pause, ${costs.upFrom}: the job trains on while new pods start${last})`;
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
