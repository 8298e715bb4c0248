// Why the schedule tick left a job alone, as its keep outcome says it: paused (by whom), under Kueue, without a
// Worker role; and which jobs it reviews at all, reading each signature's profile model once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { profileKey } from '../../../lib/decisions/profile-store.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { JobAutoscalerState } from '../../../lib/types.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { GiB, harness, PROFILE_SAMPLES, recordProfile, replaceable, TOY, toyJob } from './handler-harness.js';

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

describe('which jobs the tick reviews, and what it reads once', () => {
  it('a job with one pod Succeeded and the others running is still rebalanced (only an all-Succeeded job is done)', async () => {
    const h = harness();
    await running()(h);
    // The pod list says worker 1 exited 0 while worker 0 trains on.
    const listed = Object.assign(replaceable(h.sim), {
      listPods: async (...args: Parameters<SimulatedCluster['listPods']>) =>
        (await h.sim.listPods(...args)).map((p) =>
          p.metadata?.name?.endsWith('worker-1') ? { ...p, status: { ...p.status, phase: 'Succeeded' } } : p,
        ),
    }) as unknown as HandlerDeps['cluster'];
    const result = await handleSchedule(scheduledEvent(), { ...h.deps, cluster: listed });
    assert.deepEqual(result.errors, []);
    assert.equal(
      result.outcomes.filter((o) => o.ref.name === 'toy' && o.plan.policy === 'rebalance').length,
      1,
    );
  });

  it("warns of a queued job's unreadable profile, naming whose, and values the job without it", async () => {
    const h = harness();
    await h.sim.putConfigMap(
      h.deps.profiles.namespace,
      h.deps.profiles.configMapName,
      { [profileKey({ namespace: 'team-a', signature: 'toy' })]: '{not json' },
      undefined,
      { dryRun: false },
    );
    h.sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
    h.sim.step(1200);
    h.sim.submitJob(toyJob({ name: 'queued', workers: 4, maxReplicas: 4 }));
    h.sim.step(5);
    const result = await handleSchedule(scheduledEvent(), h.deps);
    assert.deepEqual(result.errors, []);
    const warned = h.logged.filter((l) => l.includes('is unreadable'));
    assert.ok(warned.length >= 1, h.logged.join('\n'));
    assert.match(
      warned[0] ?? '',
      /^warn profile for .*toy.* is unreadable: .*"profile":\{"namespace":"team-a","signature":"toy"\}/,
    );
  });

  it("fits a signature's profile model once a tick, however many of its jobs are queued, and none for unmanaged jobs", async () => {
    const h = harness();
    await recordProfile(h.sim, h.deps, 'team-a', 'toy');
    h.sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
    h.sim.step(1200);
    for (const name of ['queued-1', 'queued-2', 'queued-3'])
      h.sim.submitJob(toyJob({ name, workers: 4, maxReplicas: 4 }));
    // Another tenant's job, not opted in, has a profile too: trainscaler values no job it does not manage.
    await recordProfile(h.sim, h.deps, 'team-b', 'toy');
    const unmanaged = toyJob({ name: 'theirs', namespace: 'team-b', workers: 4, maxReplicas: 4 });
    // biome-ignore lint/style/noNonNullAssertion: the manifest always carries the opt-in annotation
    delete unmanaged.metadata.annotations![ANNOTATION.managed];
    h.sim.submitJob(unmanaged);
    h.sim.step(5);
    let profileFits = 0;
    const result = await handleSchedule(scheduledEvent(), {
      ...h.deps,
      // The profile's fit has the profile's 3 samples; a running job's fit has its own many.
      throughputOracle: (_signature, model) => {
        if (model.sampleCount === PROFILE_SAMPLES.length) profileFits++;
        return model;
      },
    });
    assert.deepEqual(result.errors, []);
    assert.equal(profileFits, 1);
  });
});

describe('a job with stranded pods', () => {
  it('whose fault review changes nothing is still weighed by the rebalance', async () => {
    const h = harness();
    h.sim.submitJob(toyJob({ name: 'big', workers: 15, minReplicas: 15, maxReplicas: 15 }));
    h.sim.step(60);
    // Two workers at least: one is placed, the other waits for a GPU the big job holds.
    h.sim.submitJob(toyJob({ workers: 2, minReplicas: 2, maxReplicas: 4 }));
    h.sim.step(600);
    const result = await handleSchedule(scheduledEvent(), h.deps);
    assert.deepEqual(result.errors, []);
    const toy = result.outcomes.filter((o) => o.ref.name === 'toy');
    assert.deepEqual(
      toy.map((o) => [o.plan.policy, o.plan.changes.length]),
      [
        ['fault', 0],
        ['rebalance', 0],
      ],
    );
    assert.match(toy[0]?.plan.reason ?? '', /toy-worker-1 Pending, fits on no node/);
  });
});
