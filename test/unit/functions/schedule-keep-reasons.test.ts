// Why the schedule tick left a job alone, as its keep outcome says it: paused (by whom), under Kueue, without a
// Worker role.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleSchedule } from '../../../functions/schedule.js';
import type { JobAutoscalerState } from '../../../lib/types.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { GiB, harness, TOY, toyJob } from './handler-harness.js';

type Harness = ReturnType<typeof harness>;

async function keptReason(
  setup: (h: Harness) => Promise<void> | void,
): Promise<{ reason: string; details: string[] }> {
  const h = harness();
  await setup(h);
  const result = await handleSchedule(scheduledEvent(), h.deps);
  assert.deepEqual(result.errors, []);
  const outcome = result.outcomes.find((o) => o.ref.name === 'toy');
  assert.equal(outcome?.applied, false);
  assert.equal(outcome?.skipped, 'no-change');
  return { reason: outcome?.plan.reason ?? '', details: outcome?.plan.details ?? [] };
}

/** The toy job after 20 minutes of training, with trainscaler's recorded state for it. */
const running =
  (state: Partial<JobAutoscalerState> = {}, job = toyJob({ workers: 2, maxReplicas: 8 })) =>
  async ({ sim }: Harness) => {
    sim.submitJob(job);
    sim.step(1200);
    if (Object.keys(state).length > 0) await seedJobState(sim, TOY, state);
  };

describe('the keep reason of a job the schedule tick left alone', () => {
  it('paused, naming who paused it, or trainscaler when no reason was recorded', async () => {
    const named = await keptReason(running({ paused: true, pauseReason: 'restart budget spent' }));
    assert.equal(named.reason, 'keep 2 workers: paused (restart budget spent)');
    const unnamed = await keptReason(running({ paused: true }));
    assert.equal(unnamed.reason, 'keep 2 workers: paused (by trainscaler)');
  });

  it("under Kueue: the cluster-wide rebalance leaves it to Kueue's priorities and preemption", async () => {
    const queued = toyJob({
      workers: 2,
      maxReplicas: 8,
      labels: { 'kueue.x-k8s.io/queue-name': 'team-a-lq' },
    });
    const { reason, details } = await keptReason(running({}, queued));
    assert.equal(reason, 'keep 2 workers: managed by Kueue (label kueue.x-k8s.io/queue-name=team-a-lq)');
    assert.deepEqual(details, ["the cluster-wide rebalance leaves it to Kueue's priorities and preemption"]);
  });

  it('a job with a Master and no Worker role is kept, saying so', async () => {
    const masterOnly = toyJob({ master: { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB } });
    const spec = masterOnly.spec as { pytorchReplicaSpecs: Record<string, unknown> };
    delete spec.pytorchReplicaSpecs.Worker;
    const { reason } = await keptReason(running({}, masterOnly));
    assert.match(reason, /^no Worker role: /);
  });
});
