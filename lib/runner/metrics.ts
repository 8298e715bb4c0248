// What the runner exposes on /metrics. Its own registry (not prom-client's global one) so that two runners
// in one process, as in the leader-election test, keep separate counts.

import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { HandlerResult } from '../../functions/handler-deps.js';
import { TrainscalerError } from '../errors.js';

export type Trigger = HandlerResult['trigger'];

/**
 * Per-job codes that are not trainscaler failing: the job was deleted before its review, it has no metrics
 * yet (a job just started), or its kind's API forbids the change a policy asked for (a running Job's
 * resources, any TrainJob change), which is refused before any write. Counted apart from handler errors,
 * which should alert someone.
 */
export const NO_DECISION_CODES: ReadonlySet<string> = new Set([
  'NOT_FOUND',
  'MISSING_METRICS',
  'UNSUPPORTED_CHANGE',
]);

export class RunnerMetrics {
  readonly registry = new Registry();
  readonly decisions: Counter<'policy' | 'outcome'>;
  readonly handlerErrors: Counter<'trigger' | 'code'>;
  readonly withoutDecision: Counter<'trigger' | 'code'>;
  readonly #onOutcomes: ((trigger: Trigger, result: HandlerResult) => void) | undefined;
  readonly handlerDuration: Histogram<'trigger'>;
  readonly leader: Gauge;
  readonly queueDepth: Gauge;
  readonly droppedEvents: Counter;
  readonly webhookUnauthorized: Counter<'reason'>;
  readonly webhookResponses: Counter<'status'>;

  constructor(
    options: {
      defaultMetrics?: boolean;
      /** Called with every result whose outcomes are counted (the decision log, the outcome store). */
      onOutcomes?: (trigger: Trigger, result: HandlerResult) => void;
    } = {},
  ) {
    this.#onOutcomes = options.onOutcomes;
    const registers = [this.registry];
    this.decisions = new Counter({
      name: 'trainscaler_decisions_total',
      help: 'Decisions by policy and outcome (applied, or why not: no-change, dry-run, not-managed, ...)',
      labelNames: ['policy', 'outcome'],
      registers,
    });
    this.handlerErrors = new Counter({
      name: 'trainscaler_handler_errors_total',
      help: 'Handler failures by trigger and error code: per-job errors and failed invocations',
      labelNames: ['trigger', 'code'],
      registers,
    });
    this.withoutDecision = new Counter({
      name: 'trainscaler_jobs_without_decision_total',
      help: 'Jobs a trigger named but that got no decision, not by failure: deleted (NOT_FOUND), no metrics yet, a change its kind forbids',
      labelNames: ['trigger', 'code'],
      registers,
    });
    this.handlerDuration = new Histogram({
      name: 'trainscaler_handler_duration_seconds',
      help: 'Wall time of one handler invocation',
      labelNames: ['trigger'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.leader = new Gauge({
      name: 'trainscaler_leader',
      help: '1 while this replica holds the leader lease',
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'trainscaler_queue_depth',
      help: 'Handler calls waiting in the work queue',
      registers,
    });
    this.droppedEvents = new Counter({
      name: 'trainscaler_dropped_events_total',
      help: 'Watch events dropped because the work queue was full',
      registers,
    });
    this.webhookUnauthorized = new Counter({
      name: 'trainscaler_webhook_unauthorized_total',
      help: 'Webhook requests refused with 401 before reading them: credential missing, wrong, or none configured',
      labelNames: ['reason'],
      registers,
    });
    this.webhookResponses = new Counter({
      name: 'trainscaler_webhook_responses_total',
      help: 'Webhook answers by HTTP status (429: over the concurrency cap, 413: body over the limit)',
      labelNames: ['status'],
      registers,
    });
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  recordResult(trigger: Trigger, result: HandlerResult, seconds: number): void {
    this.handlerDuration.observe({ trigger }, seconds);
    this.recordOutcomes(trigger, result);
  }

  /** Decisions and per-job errors of a result whose duration is recorded elsewhere. */
  recordOutcomes(trigger: Trigger, result: HandlerResult): void {
    for (const outcome of result.outcomes) {
      this.decisions.inc({
        policy: outcome.plan.policy,
        outcome: outcome.applied ? 'applied' : (outcome.skipped ?? 'not-applied'),
      });
    }
    for (const error of result.errors) {
      const counter = NO_DECISION_CODES.has(error.code) ? this.withoutDecision : this.handlerErrors;
      counter.inc({ trigger, code: error.code });
    }
    this.#onOutcomes?.(trigger, result);
  }

  recordFailure(trigger: Trigger, error: unknown, seconds: number): void {
    this.handlerDuration.observe({ trigger }, seconds);
    this.handlerErrors.inc({ trigger, code: error instanceof TrainscalerError ? error.code : 'INTERNAL' });
  }
}
