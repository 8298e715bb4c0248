// The handlers under a TrainingAutoscaler, through the simulated cluster: Off leaves the job alone, Recommend
// decides as Auto would and writes only the ScaledTrainingJob status, Auto acts within the policy's bounds,
// step, cool-down and actions, and a conflict or an unreadable policy leaves the job alone with an error
// naming the policies.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { ApiError } from '../../../lib/errors.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { countingClient, harness, replaceable, TOY, toyJob, writesSince } from './handler-harness.js';

const alarm = alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' }]);

function policy(name: string, spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: 'trainscaler.io/v1alpha1',
    kind: 'TrainingAutoscaler',
    metadata: { name, namespace: 'team-a' },
    spec: { targetRef: { kind: 'PyTorchJob', name: 'toy' }, ...spec },
  };
}

function workers(job: KubeObject): number | undefined {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

/** A toy job with 15 minutes of samples at `at` workers, under `policies` (none: opted in by annotation). */
function running(policies: KubeObject[], at = 1, job: KubeObject = toyJob({ workers: at, maxReplicas: 8 })) {
  const h = harness();
  for (const p of policies) h.sim.applyTrainingAutoscaler(p);
  h.sim.submitJob(job);
  h.sim.step(900);
  return h;
}

describe('handlers under a TrainingAutoscaler', () => {
  it('Off: the job is not managed, whatever its annotation says; the reason names the policy', async () => {
    const { sim, deps } = running([policy('off', { mode: 'Off' })]);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarm, deps);
    assert.deepEqual(result.errors, []);
    assert.equal(result.outcomes[0]?.skipped, 'not-managed');
    assert.match(result.outcomes[0]?.plan.reason ?? '', /TrainingAutoscaler team-a\/off is in mode Off/);
    const tick = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(tick.errors, []);
    assert.deepEqual(writesSince(sim, mark), []);
    assert.equal(workers(await sim.getJob(TOY)), 1);
    assert.equal(await sim.getJobState(TOY), undefined);
  });

  it('Auto opts a job in without the annotation (the policy stands in for it)', async () => {
    const job = toyJob({ workers: 1, maxReplicas: 8 });
    delete job.metadata.annotations?.[ANNOTATION.managed];
    const without = running([], 1, structuredClone(job));
    assert.equal((await handleAlarm(alarm, without.deps)).outcomes[0]?.skipped, 'not-managed');
    const { sim, deps } = running([policy('auto', { mode: 'Auto' })], 1, job);
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.ok(outcome?.applied, outcome?.plan.reason);
    assert.equal(workers(await sim.getJob(TOY)), 2);
  });

  it('Recommend: decides as Auto would, writes nothing to the job, records the recommendation once', async () => {
    const auto = running([policy('p', { mode: 'Auto' })]);
    const applied = (await handleAlarm(alarm, auto.deps)).outcomes[0];
    assert.ok(applied?.applied, applied?.plan.reason);

    const { sim, deps } = running([policy('p', { mode: 'Recommend' })]);
    const before = await sim.getJob(TOY);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarm, deps);
    assert.deepEqual(result.errors, []);
    const [outcome] = result.outcomes;
    assert.equal(outcome?.skipped, 'recommend');
    assert.equal(outcome?.applied, false);
    assert.deepEqual(outcome?.plan.changes, applied.plan.changes);
    // No patch, eviction, resize or Event: the job is as it was.
    assert.deepEqual(writesSince(sim, mark), []);
    assert.equal((await sim.getJob(TOY)).metadata.resourceVersion, before.metadata.resourceVersion);
    assert.equal(workers(await sim.getJob(TOY)), 1);
    const state = await sim.getJobState(TOY);
    const status = state?.status as Record<string, unknown>;
    assert.deepEqual(status.recommendation, {
      workers: 2,
      reason: outcome?.plan.reason,
      at: sim.clock.now(),
    });
    assert.equal(status.desiredWorkers, 2);
    assert.deepEqual(status.policy, { name: 'p', mode: 'Recommend', minWorkers: 1, maxWorkers: 8 });
    const conditions = status.conditions as { type: string; status: string; reason: string }[];
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.reason]),
      [
        ['Active', 'True', 'Recommend'],
        ['AbleToScale', 'True', 'ReadyForNewScale'],
        ['ScalingLimited', 'False', 'DesiredWithinRange'],
      ],
    );
    // The same recommendation again: no cool-down started (nothing was done), and no second status write.
    const again = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.equal(again?.skipped, 'recommend');
    assert.deepEqual(again?.plan.changes, outcome?.plan.changes);
    assert.equal((await sim.getJobState(TOY))?.resourceVersion, state?.resourceVersion);
  });

  it('Recommend whose status write fails: the recommendation is still the answer, the failure logged by job', async () => {
    const h = running([policy('p', { mode: 'Recommend' })]);
    const mark = h.sim.writeLog().length;
    const failing = Object.assign(replaceable(h.sim), {
      putJobState: () => Promise.reject(new ApiError('update ScaledTrainingJob', 500, 'etcd is down')),
    }) as unknown as HandlerDeps['cluster'];
    const result = await handleAlarm(alarm, { ...h.deps, cluster: failing });
    assert.deepEqual(result.errors, []);
    assert.equal(result.outcomes[0]?.skipped, 'recommend');
    assert.deepEqual(writesSince(h.sim, mark), []);
    const line = h.logged.find((l) => l.startsWith('error could not record the recommendation'));
    assert.match(line ?? '', /"name":"toy".*etcd is down/);
  });

  it('Recommend in a dry run writes no status either', async () => {
    const h = harness({ dryRun: true });
    h.sim.applyTrainingAutoscaler(policy('p', { mode: 'Recommend' }));
    h.sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    h.sim.step(900);
    assert.equal((await handleAlarm(alarm, h.deps)).outcomes[0]?.skipped, 'recommend');
    assert.equal(await h.sim.getJobState(TOY), undefined);
  });

  it("Auto: grows within the policy's maxWorkers, never beyond", async () => {
    const free = running([policy('p', { mode: 'Auto' })], 2);
    assert.ok((await handleAlarm(alarm, free.deps)).outcomes[0]?.applied);
    assert.ok((workers(await free.sim.getJob(TOY)) ?? 0) > 2, 'grows past 2 without the bound');

    const { sim, deps } = running([policy('p', { mode: 'Auto', maxWorkers: 2 })], 2);
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.equal(outcome?.applied, false, outcome?.plan.reason);
    assert.equal(workers(await sim.getJob(TOY)), 2);
  });

  it("Auto: the policy's minWorkers raises the job's own minimum", async () => {
    // The toy's own minimum is 1; the policy's 3 makes a job at 1 worker grow towards it.
    const { sim, deps } = running([policy('p', { mode: 'Auto', minWorkers: 3, maxStep: 4 })], 1);
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.ok(outcome?.applied, outcome?.plan.reason);
    assert.ok((workers(await sim.getJob(TOY)) ?? 0) >= 3, outcome?.plan.reason);
  });

  it("Auto: the policy's cool-down replaces the operator's", async () => {
    const grownTwice = async (spec: Record<string, unknown>) => {
      const { sim, deps } = running([policy('p', { mode: 'Auto', ...spec })], 1);
      assert.ok((await handleAlarm(alarm, deps)).outcomes[0]?.applied);
      sim.step(900); // past the operator's 120 s
      const second = (await handleAlarm(alarm, deps)).outcomes[0];
      return { applied: second?.applied, reason: second?.plan.reason ?? '' };
    };
    assert.equal((await grownTwice({})).applied, true);
    const held = await grownTwice({ cooldownSeconds: 3600 });
    assert.equal(held.applied, false);
    assert.match(held.reason, /cool-down/);
  });

  it("Auto: the policy's maxStep bounds one change", async () => {
    const { sim, deps } = running([policy('p', { mode: 'Auto', minWorkers: 4, maxStep: 1 })], 1);
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.ok(outcome?.applied, outcome?.plan.reason);
    assert.equal(workers(await sim.getJob(TOY)), 2);
  });

  it('Auto: a change the policy does not allow is dropped, and the reason says which action', async () => {
    const { sim, deps } = running([policy('p', { mode: 'Auto', actions: { resize: false } })]);
    const mark = sim.writeLog().length;
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.equal(outcome?.applied, false);
    assert.deepEqual(outcome?.plan.changes, []);
    assert.match(outcome?.plan.reason ?? '', /TrainingAutoscaler team-a\/p does not allow resize/);
    assert.deepEqual(writesSince(sim, mark), []);
    assert.equal(workers(await sim.getJob(TOY)), 1);
  });

  it('Recommend: a disallowed action is not recommended either; the conditions say why', async () => {
    const { sim, deps } = running([policy('p', { mode: 'Recommend', actions: { resize: false } })]);
    const outcome = (await handleAlarm(alarm, deps)).outcomes[0];
    assert.equal(outcome?.skipped, 'recommend');
    assert.deepEqual(outcome?.plan.changes, []);
    const status = (await sim.getJobState(TOY))?.status as Record<string, unknown>;
    assert.equal((status.recommendation as { workers: number }).workers, 1);
    const conditions = status.conditions as { type: string; status: string; reason: string }[];
    assert.deepEqual(
      conditions.filter((c) => c.type !== 'Active').map((c) => [c.type, c.status, c.reason]),
      [
        ['AbleToScale', 'False', 'ResizeNotAllowed'],
        ['ScalingLimited', 'True', 'ActionNotAllowed'],
      ],
    );
  });

  it('two policies claiming the job: left alone, and the error names both (alarm and tick)', async () => {
    const job = toyJob({ workers: 1, maxReplicas: 8 });
    job.metadata.labels = { ...job.metadata.labels, team: 'vision' };
    const bySelector = (name: string) => {
      const p = policy(name, { mode: 'Auto' });
      p.spec = { selector: { matchLabels: { team: 'vision' } }, mode: 'Auto' };
      return p;
    };
    const { sim, deps } = running([bySelector('one'), bySelector('two')], 1, job);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarm, deps);
    assert.deepEqual(result.outcomes, []);
    assert.equal(result.errors[0]?.code, 'CONFIG');
    assert.match(result.errors[0]?.message ?? '', /team-a\/one, team-a\/two/);
    const tick = await handleSchedule(scheduledEvent(), deps);
    assert.match(tick.errors.map((e) => e.message).join('\n'), /team-a\/one, team-a\/two/);
    assert.deepEqual(writesSince(sim, mark), []);
    assert.equal(workers(await sim.getJob(TOY)), 1);
  });

  it('a policy of the namespace that cannot be read holds the job, and the error names it', async () => {
    const broken = policy('broken', { mode: 'Auto', minWorkers: 4, maxWorkers: 2 });
    broken.spec = { selector: { matchLabels: { app: 'toy' } }, minWorkers: 4, maxWorkers: 2 };
    const { sim, deps } = running([broken]);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarm, deps);
    assert.equal(result.errors[0]?.code, 'CONFIG');
    assert.match(
      result.errors[0]?.message ?? '',
      /team-a\/broken.*minWorkers \(4\) is greater than maxWorkers \(2\)/,
    );
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it("the rebalance moves none of a job's workers that its policy would not let move", async () => {
    // big holds all 16 GPUs of the 4 x 4 cluster; without a policy it gives workers to queued (handlers.test.ts).
    const shared = async (spec: Record<string, unknown> | undefined) => {
      const { sim, deps } = harness();
      if (spec) {
        const p = policy('big', spec);
        p.spec = { targetRef: { kind: 'PyTorchJob', name: 'big' }, ...spec };
        sim.applyTrainingAutoscaler(p);
      }
      sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
      // trainscaler last changed big 600 s ago: past the operator's cool-down (120 s).
      await seedJobState(sim, { ...TOY, name: 'big' }, { lastActionAt: sim.clock.now() });
      sim.step(600);
      sim.submitJob(toyJob({ name: 'queued', workers: 6, maxReplicas: 6 }));
      sim.step(30);
      const result = await handleSchedule(scheduledEvent(), deps);
      assert.deepEqual(result.errors, []);
      const big = result.outcomes.find((o) => o.ref.name === 'big');
      return { big: workers(await sim.getJob({ ...TOY, name: 'big' })), reason: big?.plan.reason ?? '' };
    };
    assert.ok(((await shared(undefined)).big ?? 16) < 16, 'gives workers without a policy');
    assert.ok(((await shared({ mode: 'Auto' })).big ?? 16) < 16, 'and under Auto');
    for (const [spec, why] of [
      [{ mode: 'Recommend' }, /team-a\/big is in mode Recommend: the rebalance moves none of its workers/],
      [{ mode: 'Auto', actions: { yieldForRebalance: false } }, /does not allow yieldForRebalance/],
      [{ mode: 'Auto', cooldownSeconds: 3600 }, /cool-down of TrainingAutoscaler team-a\/big/],
    ] as const) {
      const held = await shared(spec);
      assert.equal(held.big, 16, JSON.stringify(spec));
      assert.match(held.reason, why);
    }
  });

  it('the tick lists the TrainingAutoscalers once, whatever the number of jobs, and obeys them', async () => {
    const { sim, deps } = harness();
    sim.applyTrainingAutoscaler(policy('p', { mode: 'Recommend' }));
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    sim.submitJob(toyJob({ name: 'other', workers: 1, maxReplicas: 8 }));
    sim.step(900);
    const { cluster, calls } = countingClient(sim);
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.deepEqual(result.errors, []);
    assert.equal(calls.get('listTrainingAutoscalers'), 1);
    assert.equal(workers(await sim.getJob(TOY)), 1);
    const toy = result.outcomes.find((o) => o.ref.name === 'toy');
    assert.ok(toy === undefined || toy.applied === false);
  });
});
