// The rescale cost measured end to end on the simulated cluster: the actuator remembers each worker-count
// change it writes, a later read of the job measures patch -> first step at the new size from the job's
// metrics, the decision sees it and the next write keeps it on the job's ScaledTrainingJob status.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob, type JobSnapshot } from '../../lib/actuator.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import type { JobAutoscalerState, Plan } from '../../lib/types.js';
import { recordedState } from '../support/job-states.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

function resize(to: number, seen: JobAutoscalerState[]) {
  return (s: JobSnapshot): Plan => {
    seen.push(structuredClone(s.view.state));
    return {
      ref: TOY,
      policy: 'tuning',
      reason: `to ${to}`,
      changes: [{ kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 0, to }],
    };
  };
}

describe('measured rescale cost, stored on the job', () => {
  it('records the patch, measures it from the metrics at the next review, and keeps it with the next write', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 4 }));
    sim.step(300);
    const base: ActuatorDeps = {
      cluster: sim,
      clock: sim.clock.now,
      dryRun: false,
      logger: deps.logger,
      namespaceAllowlist: [],
      guardrails: { cooldownSeconds: 0 },
      metrics: sim,
    };
    const state = async () => stateOfStatus(await recordedState(sim, TOY));
    const seen: JobAutoscalerState[] = [];
    const grownAt = sim.now();
    assert.equal((await actOnJob(TOY, resize(2, seen), base)).applied, true);
    assert.deepEqual((await state()).lastRescale, { at: grownAt, from: 1, to: 2 });
    sim.step(600);
    const shrunkAt = sim.now();
    assert.equal((await actOnJob(TOY, resize(1, seen), base)).applied, true);
    // Pod start (20 s, while the old world trains on) + the scale-up pause, as the simulated job's first step
    // shows it (epoch seconds near 1.8e9 carry about 1e-7 s of rounding); recorded, not charged as a cost.
    const up = 20 + sim.timing.scaleUpCostSeconds;
    assert.ok(Math.abs((seen[1]?.rescaleCost?.upToFirstStep ?? 0) - up) < 1e-3, 'the decision saw it');
    const afterShrink = await state();
    assert.ok(Math.abs((afterShrink.rescaleCost?.upToFirstStep ?? 0) - up) < 1e-3, 'the write kept it');
    // What the growth cost: its pause only (the sidecars' last step before it to the first after it).
    const pause = afterShrink.rescaleCost?.upPause ?? 0;
    assert.ok(Math.abs(pause - sim.timing.scaleUpCostSeconds) < 1e-3, `pause ${pause}`);
    assert.deepEqual(afterShrink.lastRescale, { at: shrunkAt, from: 2, to: 1 });
    sim.step(600);
    assert.equal((await actOnJob(TOY, resize(2, seen), base)).applied, true);
    const measured = (await state()).rescaleCost;
    assert.ok(Math.abs((measured?.down ?? 0) - sim.timing.scaleDownCostSeconds) < 1e-3);
    assert.ok(Math.abs((measured?.upToFirstStep ?? 0) - up) < 1e-3, 'each direction kept apart');
  });

  it('measures nothing without a metrics source, and nothing for a resize that restarted nothing', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 4 }));
    const base: ActuatorDeps = {
      cluster: sim,
      clock: sim.clock.now,
      dryRun: false,
      logger: deps.logger,
      namespaceAllowlist: [],
      guardrails: { cooldownSeconds: 0 },
    };
    const seen: JobAutoscalerState[] = [];
    // Not placed yet: a queued job's resize restarts nothing, so there is no pause to measure.
    assert.equal((await actOnJob(TOY, resize(2, seen), { ...base, metrics: sim })).applied, true);
    assert.equal(stateOfStatus(await recordedState(sim, TOY)).lastRescale, undefined);
    sim.step(300);
    assert.equal((await actOnJob(TOY, resize(1, seen), base)).applied, true);
    sim.step(600);
    await actOnJob(TOY, resize(2, seen), base);
    assert.equal(seen[2]?.rescaleCost, undefined, 'no source, no measurement');
  });
});
