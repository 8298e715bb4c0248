// The straggler back-off counts trainscaler's own replacements of a slot, so the count must live where the
// rest of its state lives (the ScaledTrainingJob status), survive a round trip through it, and be written by the
// actuator with the eviction, never read from the job's annotations.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import { harness, replaceStraggler, runningWorkerOne, TOY, toyJob } from './functions/handler-harness.js';

function setup() {
  const { sim } = harness();
  const job = toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 });
  job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'true' };
  sim.submitJob(job);
  sim.step(60);
  const quiet = () => {};
  const deps: ActuatorDeps = {
    cluster: sim,
    clock: sim.clock.now,
    dryRun: false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
    // The cool-down is not what is tested: each replacement is a separate, allowed decision.
    guardrails: { cooldownSeconds: 0 },
  };
  return { sim, deps };
}

describe('straggler replacements in trainscaler state', () => {
  it('the actuator records each replacement of a slot in the status, counting repeats', async () => {
    const { sim, deps } = setup();
    const first = await runningWorkerOne(sim);
    assert.equal((await actOnJob(TOY, replaceStraggler(first.pod, first.node), deps)).applied, true);
    const once = stateOfStatus((await sim.getJobState(TOY))?.status);
    assert.deepEqual(
      once.stragglerReplacements?.map((r) => [r.pod, r.count]),
      [[first.pod, 1]],
    );
    sim.step(120);
    const again = await runningWorkerOne(sim);
    assert.equal(again.pod, first.pod, 'the replacement keeps the slot (pod name)');
    assert.equal((await actOnJob(TOY, replaceStraggler(again.pod, again.node), deps)).applied, true);
    const twice = stateOfStatus((await sim.getJobState(TOY))?.status);
    assert.deepEqual(
      twice.stragglerReplacements?.map((r) => [r.pod, r.count]),
      [[first.pod, 2]],
    );
  });

  it('reads back only well-formed replacements from a status', () => {
    const state = stateOfStatus({
      stragglerReplacements: [
        { pod: 'a-worker-1', at: 100, count: 2 },
        { pod: '', at: 100, count: 1 },
        { pod: 'b', at: 'soon', count: 1 },
        { pod: 'c', at: 1, count: 0 },
      ],
    });
    assert.deepEqual(state.stragglerReplacements, [{ pod: 'a-worker-1', at: 100, count: 2 }]);
    assert.equal(stateOfStatus({ stragglerReplacements: 'x' }).stragglerReplacements, undefined);
  });
});
