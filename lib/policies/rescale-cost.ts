// What a worker-count change costs a job, per direction: growing re-forms the world when the new pods have
// started (a 5-8 s pause with the recommended rendezvous), shrinking waits for the leaving agent's heartbeat
// to expire (never below 15 s on torch 1.13) and spends one of an elastic PyTorchJob's maxRestarts. Once
// the job has been rescaled by trainscaler, its own measurement (patch to the first step at the new size,
// from its metrics: lib/decisions/rescale-measurement.ts) replaces the defaults.
import type { PolicyConfig } from '../config.js';
import type { JobAutoscalerState, JobView } from '../types.js';
import { formatDuration } from './placement.js';

export interface RescaleCosts {
  /** Seconds of lost progress, patch to first step at the new size (pod start included for growth). */
  up: number;
  down: number;
  /** Whether each figure is the job's own measurement (else the configured default). */
  upMeasured: boolean;
  downMeasured: boolean;
}

type CostConfig = Pick<PolicyConfig, 'scaleUpCostSeconds' | 'scaleDownCostSeconds' | 'podStartSeconds'>;

/** The job's measured costs where it has them, else the defaults (a new pod's start added to growth). */
export function rescaleCostsOf(job: Pick<JobView, 'state'>, config: CostConfig): RescaleCosts {
  const measured = job.state.rescaleCost;
  return {
    up: measured?.up ?? config.scaleUpCostSeconds + config.podStartSeconds,
    down: measured?.down ?? config.scaleDownCostSeconds,
    upMeasured: measured?.up !== undefined,
    downMeasured: measured?.down !== undefined,
  };
}

export function describeCost(costs: RescaleCosts, direction: 'up' | 'down'): string {
  const seconds = direction === 'up' ? costs.up : costs.down;
  const measured = direction === 'up' ? costs.upMeasured : costs.downMeasured;
  return `${direction === 'up' ? 'scale-up' : 'scale-down'} cost ${formatDuration(seconds)} (${measured ? 'measured on this job' : 'default'})`;
}

/**
 * The state after measuring the job's last rescale: `firstStepAt` is the epoch second of the job's first step
 * at the new size after the patch (undefined: not seen yet, nothing changes). Each rescale is measured once;
 * the latest measurement of a direction replaces the earlier one (the job's settings may have changed).
 */
export function withMeasuredRescale(
  state: JobAutoscalerState,
  firstStepAt: number | undefined,
): JobAutoscalerState {
  const last = state.lastRescale;
  if (!last || last.from === last.to || firstStepAt === undefined || !(firstStepAt > last.at)) return state;
  if (state.rescaleCost?.measuredFor === last.at) return state;
  const direction = last.to > last.from ? 'up' : 'down';
  return {
    ...state,
    rescaleCost: { ...state.rescaleCost, [direction]: firstStepAt - last.at, measuredFor: last.at },
  };
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
