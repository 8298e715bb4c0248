// A decision's reason is one line a person reads at a glance: in `kubectl get events` (which cuts long
// messages), in `explain`, in `history`, in the log. It says what changed (or why nothing did) and the one
// number that justified it, in at most SUMMARY_LIMIT characters; everything else (advice, pauses, priors, the
// rest of the arithmetic) goes to the plan's details, shown by `explain --verbose`, kept in the decision
// record and logged once per job.

import type { Plan } from '../types.js';

export const SUMMARY_LIMIT = 120;

/** "4 -> 5 workers", "2 -> 1 worker": the count after the change decides the noun. */
export function workersChange(from: number, to: number, noun = 'worker'): string {
  return `${from} -> ${to} ${to === 1 ? noun : `${noun}s`}`;
}

/** The text on one line (newlines and runs of spaces as one space), cut at a word to the limit with "…". */
export function oneLine(text: string, limit = SUMMARY_LIMIT): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= limit) return flat;
  const cut = flat.slice(0, limit - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > limit / 2 ? cut.slice(0, space) : cut).replace(/[;,:]$/, '')}…`;
}

/** A reason and its details; no `details` field when there are none (the Plan type change is additive). */
export function explained(
  summary: string,
  details: readonly (string | undefined)[] = [],
): Pick<Plan, 'reason' | 'details'> {
  const kept = details.filter((d): d is string => d !== undefined && d !== '');
  return kept.length > 0 ? { reason: summary, details: kept } : { reason: summary };
}

/**
 * The plan with a one-line reason of at most SUMMARY_LIMIT characters: the policies write one; this is the
 * actuator's guarantee for any that does not (its first clause stays the summary, the rest goes to details).
 */
export function summarized(plan: Plan): Plan {
  const { reason } = plan;
  if (reason.length <= SUMMARY_LIMIT && !/[\r\n]/.test(reason)) return plan;
  const [first = '', ...rest] = reason.split('; ');
  const summary = oneLine(first);
  const moved = summary === first ? rest.filter((r) => r !== '') : [reason];
  return { ...plan, reason: summary, details: [...moved, ...(plan.details ?? [])] };
}
