// One info line per decision, "keep" ones included, rate-limited per job and policy (lib/runner/decision-log.ts),
// on real handler results from the simulated cluster.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerResult } from '../../../functions/handler-deps.js';
import type { Outcome } from '../../../lib/actuator.js';
import { DecisionLog } from '../../../lib/runner/decision-log.js';
import { RunnerMetrics } from '../../../lib/runner/metrics.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { harness, TOY, toyJob } from '../functions/handler-harness.js';

function collector() {
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    lines.push({ level, msg: msg ?? '', fields: obj as Record<string, unknown> });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

const keep = (reason: string): Outcome => ({
  ref: TOY,
  plan: { ref: TOY, policy: 'tuning', changes: [], reason },
  applied: false,
  skipped: 'no-change',
});
const result = (...outcomes: Outcome[]): HandlerResult => ({ trigger: 'alarm', outcomes, errors: [] });

describe('decision log', () => {
  it('logs a keep decision once, counts its repeats, and logs the count when the decision changes', () => {
    let now = 0;
    const { lines, logger } = collector();
    const log = new DecisionLog({ logger, now: () => now, repeatIntervalMs: 60_000 });
    log.record('alarm', result(keep('gain +3.1% too small')));
    now += 200;
    log.record('alarm', result(keep('gain +3.4% too small'))); // the same decision, figures moved
    now += 200;
    log.record('alarm', result(keep('gain +2.9% too small')));
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.msg, 'decision');
    assert.equal(lines[0]?.fields.outcome, 'no-change');
    assert.equal(lines[0]?.fields.reason, 'gain +3.1% too small');
    log.record('alarm', result(keep('cool-down: last change 12 s ago')));
    assert.equal(lines.length, 2);
    assert.deepEqual((lines[1]?.fields.repeatedBefore as { times: number } | undefined)?.times, 2);
    // other jobs are logged on their own
    log.record('alarm', result({ ...keep('x'), ref: { ...TOY, name: 'other' } }));
    assert.equal(lines.length, 3);
    // after the interval an unchanged decision is logged again with its count
    now += 30_000;
    log.record('alarm', result(keep('cool-down: last change 40 s ago')));
    assert.equal(lines.length, 3);
    now += 60_000;
    log.record('alarm', result(keep('cool-down: last change 100 s ago')));
    assert.equal(lines.length, 4);
    assert.equal((lines[3]?.fields.repeatedBefore as { times: number } | undefined)?.times, 1);
  });

  it("logs a decision's details once per job and policy, and again only when they change", () => {
    let now = 0;
    const { lines, logger } = collector();
    const log = new DecisionLog({ logger, now: () => now, repeatIntervalMs: 60_000 });
    const advised = (reason: string, details: string[]): Outcome => {
      const o = keep(reason);
      return { ...o, plan: { ...o.plan, details } };
    };
    log.record('alarm', result(advised('keep 2 workers: a', ['long advice'])));
    log.record('alarm', result(advised('keep 3 workers: b', ['long advice'])));
    now += 120_000;
    log.record('alarm', result(advised('keep 3 workers: b', ['long advice'])));
    log.record('alarm', result(advised('keep 4 workers: c', ['other advice'])));
    assert.deepEqual(
      lines.map((l) => [l.fields.reason, l.fields.details]),
      [
        ['keep 2 workers: a', ['long advice']],
        ['keep 3 workers: b', undefined],
        ['keep 3 workers: b', undefined],
        ['keep 4 workers: c', ['other advice']],
      ],
    );
  });

  it('a count is not a measured figure: the same keep at another size is a new decision', () => {
    const { lines, logger } = collector();
    const log = new DecisionLog({ logger });
    log.record('schedule', result(keep('keep 5 workers: cool-down (last change 13 s ago)')));
    log.record('schedule', result(keep('keep 5 workers: cool-down (last change 29 s ago)')));
    log.record('schedule', result(keep('keep 6 workers: cool-down (last change 44 s ago)')));
    assert.deepEqual(
      lines.map((l) => l.fields.reason),
      [
        'keep 5 workers: cool-down (last change 13 s ago)',
        'keep 6 workers: cool-down (last change 44 s ago)',
      ],
    );
  });

  it('dry run: pod events repeating the same decision make one line', async () => {
    const { sim, deps } = harness({ dryRun: true });
    const { lines, logger } = collector();
    deps.logger = logger;
    const log = new DecisionLog({ logger });
    const metrics = new RunnerMetrics({ defaultMetrics: false, onOutcomes: (t, r) => log.record(t, r) });
    // 6 workers on a cluster with room for fewer: every pod event of the job decides the same shrink
    sim.submitJob(toyJob({ workers: 20, maxReplicas: 20, labels: { 'trainscaler.io/managed': 'true' } }));
    sim.step(30);
    const events = sim.drainEvents().filter((e) => JSON.stringify(e).includes('toy-worker-1'));
    assert.ok(events.length >= 3, `pod events: ${events.length}`);
    let dryRuns = 0;
    for (const event of events.slice(0, 3)) {
      const r = await handleClusterEvent(event, deps);
      dryRuns += r.outcomes.filter((o) => o.skipped === 'dry-run').length;
      metrics.recordOutcomes('cluster-event', r);
    }
    assert.equal(dryRuns, 3, 'three identical dry-run decisions');
    const decisionLines = lines.filter((l) => l.msg === 'decision');
    assert.equal(decisionLines.length, 1, JSON.stringify(lines.map((l) => l.msg)));
    assert.equal(decisionLines[0]?.fields.outcome, 'dry-run');
    const actuatorLines = lines.filter((l) => l.msg === 'dry run: decision not written');
    assert.deepEqual(
      actuatorLines.map((l) => l.level),
      ['debug', 'debug', 'debug'],
      'the actuator line is debug',
    );
  });

  it('a job deleted before its review is one debug line and not a handler error', async () => {
    const { sim, deps } = harness();
    const { lines, logger } = collector();
    deps.logger = logger;
    const metrics = new RunnerMetrics({ defaultMetrics: false });
    sim.submitJob(toyJob());
    sim.step(900);
    const r = await handleAlarm(
      alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'gone' }]),
      deps,
    );
    metrics.recordOutcomes('alarm', r);
    assert.equal(r.errors[0]?.code, 'NOT_FOUND');
    assert.deepEqual(
      lines.map((l) => `${l.level} ${l.msg}`),
      ['debug job gone before its review'],
    );
    const text = await metrics.registry.metrics();
    assert.doesNotMatch(text, /trainscaler_handler_errors_total\{/);
    assert.match(text, /trainscaler_jobs_without_decision_total\{trigger="alarm",code="NOT_FOUND"\} 1/);
  });

  it('a change the job’s kind forbids (refused before any write) is no decision, not a handler error', async () => {
    const metrics = new RunnerMetrics({ defaultMetrics: false });
    const ref = { kind: 'TrainJob' as const, namespace: 'team-a', name: 'mnist' };
    metrics.recordOutcomes('cluster-event', {
      trigger: 'cluster-event',
      outcomes: [],
      errors: [{ ref, code: 'UNSUPPORTED_CHANGE', message: 'TrainJob cannot change /spec/trainer: ...' }],
    });
    const text = await metrics.registry.metrics();
    assert.doesNotMatch(text, /trainscaler_handler_errors_total\{/);
    assert.match(
      text,
      /trainscaler_jobs_without_decision_total\{trigger="cluster-event",code="UNSUPPORTED_CHANGE"\} 1/,
    );
  });
});
