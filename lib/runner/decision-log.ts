// One structured info line per decision, "keep" decisions included, rate-limited per job and policy: every
// pod event of a job re-decides (three events in 0.6 s make three identical dry-run decisions), and an alert
// repeats every few minutes, so an unchanged decision is logged once, then again only with the count of its
// repeats when it changes or when `repeatIntervalMs` has passed.

import type { HandlerResult, Logger } from '../../functions/handler-deps.js';
import type { Outcome } from '../actuator.js';

export type DecisionOutcome = 'applied' | NonNullable<Outcome['skipped']> | 'not-applied';

export function outcomeOf(outcome: Outcome): DecisionOutcome {
  return outcome.applied ? 'applied' : (outcome.skipped ?? 'not-applied');
}

/** Measured figures of a reason (rates, percentages, durations, sizes): they move on every review. */
const MEASURED = /[+-]?\d+\.\d+|[+-]?\d+(?=\s?(?:%|s\b|ms\b|min\b|h\b|samples\/s|[KMG]iB))/g;

/**
 * What makes two decisions "the same" for the log and the stored last outcome: policy, outcome, changes and
 * the reason with its measured figures blanked ("+3.1%", "last change 42 s ago" move every review without the
 * decision changing); counts such as "keep 4 workers" stay, so a job resized by someone else is news.
 */
export function decisionSignature(outcome: Outcome): string {
  const { plan } = outcome;
  return JSON.stringify([plan.policy, outcomeOf(outcome), plan.changes, plan.reason.replace(MEASURED, '#')]);
}

interface Seen {
  signature: string;
  loggedAt: number;
  repeats: number;
  last: Outcome;
  trigger: HandlerResult['trigger'];
  /** The details last logged for the job and policy: logged again only when they change. */
  details: string | undefined;
}

export interface DecisionLogOptions {
  logger: Logger;
  /** Milliseconds; a decision repeated this long is logged again with its count. */
  repeatIntervalMs?: number;
  now?: () => number;
  /** Bound on the jobs remembered (oldest forgotten first). */
  maxJobs?: number;
}

export class DecisionLog {
  readonly #logger: Logger;
  readonly #interval: number;
  readonly #now: () => number;
  readonly #maxJobs: number;
  readonly #seen = new Map<string, Seen>();

  constructor(options: DecisionLogOptions) {
    this.#logger = options.logger;
    this.#interval = options.repeatIntervalMs ?? 15 * 60_000;
    this.#now = options.now ?? Date.now;
    this.#maxJobs = options.maxJobs ?? 10_000;
  }

  record(trigger: HandlerResult['trigger'], result: HandlerResult): void {
    for (const outcome of result.outcomes) this.#recordOne(trigger, outcome);
  }

  #recordOne(trigger: HandlerResult['trigger'], outcome: Outcome): void {
    const { ref, plan } = outcome;
    const key = `${ref.kind}/${ref.namespace}/${ref.name}/${plan.policy}`;
    const signature = decisionSignature(outcome);
    const now = this.#now();
    const seen = this.#seen.get(key);
    if (seen && seen.signature === signature && now - seen.loggedAt < this.#interval) {
      seen.repeats++;
      seen.last = outcome;
      seen.trigger = trigger;
      return;
    }
    const fields: Record<string, unknown> = {
      trigger,
      job: `${ref.namespace}/${ref.name}`,
      kind: ref.kind,
      policy: plan.policy,
      outcome: outcomeOf(outcome),
      changes: plan.changes,
      reason: plan.reason,
    };
    if (outcome.decisionId) fields.decisionId = outcome.decisionId;
    // Details (advice, priors, the arithmetic) once per job and policy, not on every line that repeats them.
    const details = plan.details && plan.details.length > 0 ? plan.details.join('\n') : undefined;
    if (details !== undefined && details !== seen?.details) fields.details = plan.details;
    if (seen && seen.repeats > 0) {
      // The unchanged decision's count, on the line that ends it (or renews it after the interval).
      fields.repeatedBefore = { times: seen.repeats, since: new Date(seen.loggedAt).toISOString() };
      if (seen.signature !== signature) fields.previous = outcomeOf(seen.last);
    }
    this.#logger.info(fields, 'decision');
    this.#seen.delete(key);
    this.#seen.set(key, {
      signature,
      loggedAt: now,
      repeats: 0,
      last: outcome,
      trigger,
      details: details ?? seen?.details,
    });
    if (this.#seen.size > this.#maxJobs) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
  }
}
