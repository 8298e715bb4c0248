// The straggler back-off counts trainscaler's own replacements of a slot, so the count must live where the
// rest of its state lives (the ScaledTrainingJob status), survive a round trip through it, and be written by the
// actuator with the eviction, never read from the job's annotations.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import type { Change, Plan } from '../../lib/types.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

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

async function workerOne(sim: ReturnType<typeof setup>['sim']) {
  const found = (await sim.listPods('team-a')).find(
    (p) => p.spec?.nodeName && p.metadata?.name?.endsWith('-worker-1'),
  );
  assert.ok(found?.metadata?.name && found.spec?.nodeName);
  return { pod: found.metadata.name, node: found.spec.nodeName };
}

const replace = (pod: string, node: string) => (): Plan => ({
  ref: TOY,
  policy: 'straggler',
  reason: `worker 1 slow; evicting ${pod}`,
  changes: [{ kind: 'avoid-node', role: 'Worker', node } as Change, { kind: 'evict-pod', pod }],
});

describe('straggler replacements in trainscaler state', () => {
  it('the actuator records each replacement of a slot in the status, counting repeats', async () => {
    const { sim, deps } = setup();
    const first = await workerOne(sim);
    assert.equal((await actOnJob(TOY, replace(first.pod, first.node), deps)).applied, true);
    const once = stateOfStatus((await sim.getJobState(TOY))?.status);
    assert.deepEqual(
      once.stragglerReplacements?.map((r) => [r.pod, r.count]),
      [[first.pod, 1]],
    );
    sim.step(120);
    const again = await workerOne(sim);
    assert.equal(again.pod, first.pod, 'the replacement keeps the slot (pod name)');
    assert.equal((await actOnJob(TOY, replace(again.pod, again.node), deps)).applied, true);
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
