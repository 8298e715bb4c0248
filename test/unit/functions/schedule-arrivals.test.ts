// The schedule tick's inputs to the rebalance that only show on a nearly full cluster: the GPUs recently
// created managed jobs asked for (room kept for the next arrivals where a rescale is dear), and a queued job
// whose profile model fails (that job's error; the others are still placed).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { ThroughputModel } from '../../../lib/model/throughput-model.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { JobAutoscalerState } from '../../../lib/types.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { FIXED_APP_MODEL } from '../sim/fixed-app-model.js';
import { breakingSignature, GiB, harness, recordProfile, TOY, toyJob } from './handler-harness.js';

const TWO_GPUS = { gpus: 2, cpuMillis: 4000, memoryBytes: 10 * GiB };
/** 30 s each way: the regrowth hold (10 round trips, 600 s) is past the 120 s cool-down, so room is kept. */
const DEAR = { upPause: 30, upToFirstStep: 30, down: 30, measuredFor: 1 };

function workers(job: { spec?: unknown }): number | undefined {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

/**
 * Of the 16 GPUs, an unmanaged job holds 12 (6 workers of 2) and the toy 2 (one worker of 2): 2 idle, one more
 * toy worker. Both were created at the start, 15 minutes before the tick: within the hour arrivals are judged
 * on. Room kept: floor(GPUs asked / 3600 s x 600 s hold).
 */
async function tickAfter(state: Partial<JobAutoscalerState>) {
  const { sim, deps } = harness();
  const filler = toyJob({ name: 'filler', workers: 6, minReplicas: 6, maxReplicas: 6, sizing: TWO_GPUS });
  // biome-ignore lint/style/noNonNullAssertion: the manifest always carries the opt-in annotation
  delete filler.metadata.annotations![ANNOTATION.managed];
  sim.submitJob(filler);
  sim.submitJob(toyJob({ workers: 1, maxReplicas: 8, sizing: TWO_GPUS }));
  sim.step(900);
  await seedJobState(sim, TOY, { rescaleCost: DEAR, ...state });
  const result = await handleSchedule(scheduledEvent(), deps);
  assert.deepEqual(result.errors, []);
  const toy = result.outcomes.find((o) => o.ref.name === 'toy');
  return { grownTo: workers(await sim.getJob(TOY)), reason: toy?.plan.reason ?? '' };
}

describe('room kept for arrivals, from the managed jobs created in the last hour', () => {
  it("the toy's own 2 GPUs keep none: it grows into the idle pair (the unmanaged job's 12 are no arrival)", async () => {
    const { grownTo, reason } = await tickAfter({});
    assert.equal(grownTo, 2);
    assert.match(reason, /1 -> 2 workers: \+1 from idle capacity/);
  });

  it('asked for 4 workers of 2 GPUs (its recorded ask, not its replicas): 8 GPUs an hour keep 1, and it stays', async () => {
    const { grownTo, reason } = await tickAfter({ askedWorkers: 4 });
    assert.equal(grownTo, 1);
    assert.match(reason, /keep 1 worker/);
  });

  it("where the job's rescales were measured cheap (3 s each way), the same ask keeps no room: the hold is inside the cool-down", async () => {
    const cheap = { upPause: 3, upToFirstStep: 3, down: 3, measuredFor: 1 };
    const { grownTo } = await tickAfter({ askedWorkers: 4, rescaleCost: cheap });
    assert.equal(grownTo, 2);
  });
});

describe('a queued job whose profile model fails inside the rebalance', () => {
  it("is that job's error (the model answers as that job's); the running job is still weighed and the tick goes on", async () => {
    // The simulator runs a second signature, 'broken', like the toy.
    const sim = new SimulatedCluster({
      seed: 7,
      apps: { ...FIXED_APP_MODEL, knows: (app) => app === 'toy' || app === 'broken' },
    });
    const deps: HandlerDeps = { ...harness().deps, cluster: sim, metrics: sim, clock: sim.clock.now };
    await recordProfile(sim, deps, 'team-a', 'broken');
    sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
    sim.step(1200);
    sim.submitJob(toyJob({ name: 'queued', app: 'broken', workers: 4, maxReplicas: 4 }));
    sim.step(5);
    // A bug one signature's profile reaches: its model cannot answer for any placement.
    const failing = (model: ThroughputModel): ThroughputModel => ({
      ...model,
      predict: () => {
        throw new TypeError('cannot read the profile fit');
      },
    });
    const result = await handleSchedule(scheduledEvent(), breakingSignature(deps, 'broken', failing));
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code, e.message]),
      [['queued', 'INTERNAL', 'cannot read the profile fit']],
    );
    assert.ok(result.outcomes.some((o) => o.ref.name === 'big' && o.plan.policy === 'rebalance'));
  });
});
