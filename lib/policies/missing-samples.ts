// A job with no step-time samples is never grown on its own account: nothing says it has a sidecar, that its
// training runs, or that it is elastic at all, so a write would be made blind (issue 46). What it lacks is
// told apart, because the fixes differ: no series of its sidecar at all (no sidecar, or Prometheus does not
// scrape it) vs. a sidecar that reports but no training step yet (a job still starting, or stuck).

import { MissingMetricsError } from '../errors.js';
import type { JobRef } from '../types.js';

export type MissingSamples = 'no-series' | 'no-progress';

/** What the job lacks, as a reason says it (short: it goes into one-line summaries). */
export function describeMissingSamples(missing: MissingSamples): string {
  return missing === 'no-series'
    ? 'no step-time samples: no sidecar series for this job'
    : 'no step-time samples: its sidecar reports no training step yet';
}

/** What a person can do about it, for a decision's details. */
export function missingSamplesAdvice(missing: MissingSamples): string {
  return missing === 'no-series'
    ? 'trainscaler grows only jobs whose speed it has measured: add the trainscaler sidecar to the pod template and let Prometheus scrape it (docs/metrics-path.md)'
    : 'trainscaler grows only jobs whose speed it has measured: the sidecar is scraped but the trainer has reported no step (still starting, stuck, or the hook is not called)';
}

/**
 * No step-time samples of the job: a MissingMetricsError (callers that only know that still treat it as such)
 * saying which of the two it is.
 */
export class MissingSamplesError extends MissingMetricsError {
  constructor(
    ref: JobRef,
    readonly missing: MissingSamples,
    detail?: string,
  ) {
    super(
      `${describeMissingSamples(missing)} (${ref.kind} ${ref.namespace}/${ref.name})${detail ? `: ${detail}` : ''}`,
    );
  }
}

/** The keep decision of a job left alone for lack of samples: one line, and what to do about it as details. */
export function keptWithoutSamples(
  workers: number | undefined,
  missing: MissingSamples,
): { reason: string; details: string[] } {
  const what = workers === undefined ? 'keep' : `keep ${workers === 1 ? '1 worker' : `${workers} workers`}`;
  return { reason: `${what}: ${describeMissingSamples(missing)}`, details: [missingSamplesAdvice(missing)] };
}
