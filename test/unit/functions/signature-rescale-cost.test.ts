// A finished run's measured rescale pauses go into its signature's profile; the next run of the signature is
// charged their median until trainscaler has measured its own, and the decision says so.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { loadProfile, recordRun } from '../../../lib/decisions/profile-store.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { JobAutoscalerState } from '../../../lib/types.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { harness, TOY, toyJob } from './handler-harness.js';

const OWNER = { namespace: TOY.namespace, signature: 'toy' };

async function finishedRun(state: Partial<JobAutoscalerState>) {
  const { sim, deps } = harness();
  sim.submitJob(toyJob({ targetSamples: 200_000 }));
  sim.step(3600);
  assert.equal(sim.jobStatus(TOY).phase, 'Succeeded');
  await seedJobState(sim, TOY, state);
  const job = await sim.getJob(TOY);
  await handleClusterEvent({ type: 'MODIFIED', object: job }, deps);
  return (await loadProfile(sim, deps.profiles, OWNER)).profile;
}

describe("a finished run's measured rescale pauses, kept in its signature's profile", () => {
  it('records the pauses measured on the run (its ScaledTrainingJob status)', async () => {
    const profile = await finishedRun({
      rescaleCost: { upPause: 7, upToFirstStep: 20, down: 9, measuredFor: 5 },
    });
    assert.deepEqual(profile?.rescaleCosts, { up: [7], down: [9] });
  });

  it('records none for a run that was never measured', async () => {
    const profile = await finishedRun({});
    assert.ok(profile, 'the run is recorded');
    assert.equal(profile.rescaleCosts, undefined);
  });
});

/** The tuning decision of one alarm on a one-worker toy job after 15 minutes of samples, reason and details. */
/** Earlier finished runs of the signature, each with the scale-up pause it measured. */
async function recordEarlierUps(sim: SimulatedCluster, deps: HandlerDeps, ups: number[]): Promise<void> {
  for (const up of ups)
    await recordRun(
      sim,
      deps.profiles,
      { ...OWNER, samples: [], usage: [], rescaleCost: { up } },
      100,
      false,
    );
}

async function alarmDecision(setup: (sim: SimulatedCluster, deps: HandlerDeps) => Promise<void>) {
  const { sim, deps } = harness();
  await setup(sim, deps);
  sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
  sim.step(900);
  const result = await handleAlarm(
    alertmanagerWebhook([{ namespace: TOY.namespace, kind: TOY.kind, name: TOY.name }]),
    deps,
  );
  assert.deepEqual(result.errors, []);
  const plan = result.outcomes[0]?.plan;
  return [plan?.reason, ...(plan?.details ?? [])].join('; ');
}

describe("the next run of the signature is charged the earlier runs' median until measured", () => {
  it('names the earlier runs as the source of the scale-up cost', async () => {
    const text = await alarmDecision((sim, deps) => recordEarlierUps(sim, deps, [40, 50, 45]));
    assert.match(
      text,
      /scale-up cost 45 s \(the re-rendezvous pause, median of 3 earlier runs of its signature; not yet measured on this job/,
    );
  });

  it('without a profile, from the launch in the pod spec (the simulated job runs trainscaler launcher)', async () => {
    const text = await alarmDecision(async () => {});
    assert.match(
      text,
      /scale-up cost 3 s \(the re-rendezvous pause, trainscaler's launcher with the recommended rendezvous settings, from its launch; not yet measured on this job/,
    );
  });

  it("the schedule's rebalance too, per direction", async () => {
    const { sim, deps } = harness();
    await recordEarlierUps(sim, deps, [40, 50, 45]);
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    sim.step(900);
    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    const plan = result.outcomes.find((o) => o.plan.policy === 'rebalance')?.plan;
    assert.match(
      [plan?.reason, ...(plan?.details ?? [])].join('; '),
      /2 x scale-up cost 45 s \(the re-rendezvous pause, median of 3 earlier runs of its signature; not yet measured on this job/,
    );
  });
});
