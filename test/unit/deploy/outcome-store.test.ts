// The last outcome of every policy per job (lib/decisions/outcome-store.ts) and `trainscaler explain` over
// it, on the simulated cluster's ConfigMaps (API-server conflict semantics): a repeated "keep" writes
// nothing, not the job and not the ConfigMap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainJob, renderExplanation } from '../../../cli/explain.js';
import { readJobHistory } from '../../../cli/history.js';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { OutcomeStore, outcomesConfigMapName } from '../../../lib/decisions/outcome-store.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { harness, TOY, toyJob } from '../functions/handler-harness.js';

const STORE_NS = 'trainscaler-system';
const alarm = alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' }]);

describe('outcome store and explain', () => {
  it('stores keep decisions once per change, never on the job, and explain shows every policy', async () => {
    const { sim, deps } = harness();
    const store = new OutcomeStore({ cluster: sim, namespace: STORE_NS, dryRun: false, clock: deps.clock });
    // A job at its max cannot grow: every alarm decides "keep".
    sim.submitJob(toyJob({ workers: 4, maxReplicas: 4, labels: { 'trainscaler.io/managed': 'true' } }));
    sim.step(1200);
    const version = (await sim.getJob(TOY)).metadata.resourceVersion;
    for (let i = 0; i < 5; i++) {
      const result = await handleAlarm(alarm, deps);
      assert.equal(result.outcomes[0]?.applied, false, result.outcomes[0]?.plan.reason);
      await store.record('alarm', result);
      sim.step(60);
    }
    assert.equal(store.writes, 1, 'five identical keeps, one write');
    const afterKeeps = (await sim.getJob(TOY)).metadata.resourceVersion;
    assert.equal(afterKeeps, version, 'the job was not written');

    const tick = await handleSchedule(scheduledEvent(), deps);
    await store.record('schedule', tick);
    assert.equal(store.writes, 2, 'the rebalance keep is a new outcome');
    await store.record('schedule', await handleSchedule(scheduledEvent(), deps));
    assert.equal(store.writes, 2, 'and unchanged on the next tick');

    const explained = await explainJob(sim, STORE_NS, TOY);
    assert.deepEqual(
      explained.map((p) => [p.policy, p.outcome]),
      [
        ['rebalance', 'no-change'],
        ['tuning', 'no-change'],
      ],
    );
    const text = renderExplanation(TOY, explained);
    assert.match(text, /^tuning: no-change on alarm, since /m);
    assert.match(text, /^rebalance: no-change on schedule, since .*\n {2}reason: keep 4 workers: /m);
    const cm = await sim.getConfigMap(STORE_NS, outcomesConfigMapName('team-a'));
    assert.deepEqual(Object.keys(cm?.data ?? {}), ['PyTorchJob.toy']);

    // A fresh process (a new leader) reads once and writes nothing for what is already stored.
    const restarted = new OutcomeStore({
      cluster: sim,
      namespace: STORE_NS,
      dryRun: false,
      clock: deps.clock,
    });
    await restarted.record('alarm', await handleAlarm(alarm, deps));
    assert.equal(restarted.writes, 0);
  });

  it('an alert on a job without step-time samples leaves a keep that explain shows; --verbose adds what to do', async () => {
    const { sim, deps } = harness();
    const store = new OutcomeStore({ cluster: sim, namespace: STORE_NS, dryRun: false, clock: deps.clock });
    sim.submitJob(toyJob({ workers: 2, labels: { 'trainscaler.io/managed': 'true' } }));
    sim.step(10); // not started: no series of it at all
    await store.record('alarm', await handleAlarm(alarm, deps));
    const explained = await explainJob(sim, STORE_NS, TOY);
    const brief = renderExplanation(TOY, explained);
    assert.match(
      brief,
      /^tuning: no-change on alarm, since .*\n {2}reason: keep 2 workers: no step-time samples: no sidecar series for this job$/m,
    );
    assert.doesNotMatch(brief, /detail:/);
    const verbose = renderExplanation(TOY, explained, { verbose: true });
    assert.match(
      verbose,
      /^ {2}detail: trainscaler grows only jobs whose speed it has measured: add the trainscaler sidecar/m,
    );
  });

  it("explain and history read the job's ScaledTrainingJob and trainscaler's Events, not its annotations", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, labels: { 'trainscaler.io/managed': 'true' } }));
    sim.step(1200);
    const applied = await handleAlarm(alarm, deps);
    assert.equal(applied.outcomes[0]?.applied, true, applied.outcomes[0]?.plan.reason);
    const explained = await explainJob(sim, STORE_NS, TOY); // nothing in the store: from the status
    assert.equal(explained.length, 1);
    assert.equal(explained[0]?.outcome, 'applied');
    assert.equal(explained[0]?.source, 'job-state');
    assert.deepEqual(explained[0]?.changes, applied.outcomes[0]?.plan.changes);
    const history = await readJobHistory(sim, TOY);
    assert.deepEqual(
      history.map((r) => [r.source, r.policy, r.changes.length > 0]),
      [['job-state', 'TrainscalerTuning', true]],
      'the Event, confirmed by the status and with its changes',
    );
    // The job's owner rewrites the annotations trainscaler used to read: neither command shows it.
    const forged = JSON.stringify([{ id: 'forged', at: 1, policy: 'forged', reason: 'x', changes: [] }]);
    await sim.patchJob(
      TOY,
      [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1history', value: forged }],
      { dryRun: false },
    );
    assert.deepEqual(await explainJob(sim, STORE_NS, TOY), explained);
    assert.deepEqual(await readJobHistory(sim, TOY), history);
    await assert.rejects(explainJob(sim, STORE_NS, { ...TOY, name: 'ghost' }), /not found/i);
    await assert.rejects(readJobHistory(sim, { ...TOY, name: 'ghost' }), /not found/i);
  });

  it('dry run stores nothing', async () => {
    const { sim, deps } = harness({ dryRun: true });
    const store = new OutcomeStore({ cluster: sim, namespace: STORE_NS, dryRun: true, clock: deps.clock });
    sim.submitJob(toyJob({ workers: 4, maxReplicas: 4, labels: { 'trainscaler.io/managed': 'true' } }));
    sim.step(1200);
    await store.record('alarm', await handleAlarm(alarm, deps));
    assert.equal(await sim.getConfigMap(STORE_NS, outcomesConfigMapName('team-a')), undefined);
  });
});
