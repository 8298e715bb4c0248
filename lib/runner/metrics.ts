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

// The sidecar's names for a job's identity (docs/metrics-path.md), so that the two join; never `job`, which
// Prometheus keeps for its scrape job.
type JobLabel = 'namespace' | 'job_kind' | 'job_name';

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
  readonly jobWorkers: Gauge<JobLabel>;
  readonly jobDesiredWorkers: Gauge<JobLabel>;
  readonly jobLastActionTime: Gauge<JobLabel>;
  readonly #clock: () => number;

  constructor(
    options: {
      defaultMetrics?: boolean;
      /** Called with every result whose outcomes are counted (the decision log, the outcome store). */
      onOutcomes?: (trigger: Trigger, result: HandlerResult) => void;
      /** Epoch seconds, for the time of a job's last action. */
      clock?: () => number;
    } = {},
  ) {
    this.#onOutcomes = options.onOutcomes;
    this.#clock = options.clock ?? (() => Date.now() / 1000);
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
    // Per job, for the dashboard: known from the decisions that named Worker replicas (a job never resized
    // has no series yet); a job found deleted loses its series.
    const labelNames: JobLabel[] = ['namespace', 'job_kind', 'job_name'];
    this.jobWorkers = new Gauge({
      name: 'trainscaler_job_workers',
      help: "Worker replicas of the job's spec, as of trainscaler's last decision that named them",
      labelNames,
      registers,
    });
    this.jobDesiredWorkers = new Gauge({
      name: 'trainscaler_job_desired_workers',
      help: "Worker replicas trainscaler's last decision asked for (applied or held back)",
      labelNames,
      registers,
    });
    this.jobLastActionTime = new Gauge({
      name: 'trainscaler_job_last_action_timestamp_seconds',
      help: 'When trainscaler last wrote a change to the job (epoch seconds)',
      labelNames,
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
    for (const outcome of result.outcomes) this.#recordJob(outcome);
    for (const error of result.errors) {
      if (error.code === 'NOT_FOUND') this.#forgetJob(error.ref);
      const counter = NO_DECISION_CODES.has(error.code) ? this.withoutDecision : this.handlerErrors;
      counter.inc({ trigger, code: error.code });
    }
    this.#onOutcomes?.(trigger, result);
  }

  #recordJob(outcome: HandlerResult['outcomes'][number]): void {
    const labels = {
      namespace: outcome.ref.namespace,
      job_kind: outcome.ref.kind,
      job_name: outcome.ref.name,
    };
    if (outcome.applied) this.jobLastActionTime.set(labels, this.#clock());
    const change = outcome.plan.changes.find((c) => c.kind === 'replicas' && c.role === 'Worker');
    if (change?.kind !== 'replicas') return;
    this.jobDesiredWorkers.set(labels, change.to);
    this.jobWorkers.set(labels, outcome.applied ? change.to : change.from);
  }

  #forgetJob(ref: HandlerResult['errors'][number]['ref']): void {
    const labels = { namespace: ref.namespace, job_kind: ref.kind, job_name: ref.name };
    for (const gauge of [this.jobWorkers, this.jobDesiredWorkers, this.jobLastActionTime])
      gauge.remove(labels);
  }

  recordFailure(trigger: Trigger, error: unknown, seconds: number): void {
    this.handlerDuration.observe({ trigger }, seconds);
    this.handlerErrors.inc({ trigger, code: error instanceof TrainscalerError ? error.code : 'INTERNAL' });
  }
}
