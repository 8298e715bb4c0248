// Issue 7 on the SimulatedCluster (fast, no Kubernetes needed): duplicate triggers and injected API faults
// produce exactly the intended writes, none lost, none doubled. The same properties on the real API server
// are in api-server.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { RetryingClusterClient } from '../../lib/cluster/retrying-cluster-client.js';
import type { JobRef } from '../../lib/types.js';
import { harness, TOY, toyJob } from '../unit/functions/handler-harness.js';
import {
  addOneWorker,
  assertStoppedByPinThenCooldown,
  CountingClusterClient,
  deliverUntilHandled,
  FaultyClusterClient,
  tally,
} from './support/scenarios.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

function workers(job: { spec?: unknown }): number {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

function decisions(job: { metadata: { annotations?: Record<string, string> } }): number {
  const raw = job.metadata.annotations?.[ANNOTATION.history];
  return raw ? (JSON.parse(raw) as unknown[]).length : 0;
}

describe('duplicate triggers (SimulatedCluster)', () => {
  // No duplicate check finds them (the decision id covers the version read): the resourceVersion pin makes all
  // but one patch conflict, and on the re-read the cool-down the winner recorded stops the other 99.
  it('100 concurrent duplicates of one decision make exactly one patch and one Event (pin, then cool-down)', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1, minReplicas: 1, maxReplicas: 8 }));
    const counting = new CountingClusterClient(sim);
    const deps: ActuatorDeps = {
      cluster: counting,
      clock: sim.clock.now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    };
    const mark = sim.writeLog().length;
    const outcomes = await Promise.all(Array.from({ length: 100 }, () => actOnJob(TOY, addOneWorker, deps)));
    const patches = sim
      .writeLog()
      .slice(mark)
      .filter((w) => w.verb === 'patch' && w.target.includes('toy'));
    const skipped = outcomes.filter((o) => !o.applied).map((o) => o.skipped);
    console.log(
      `duplicates (simulated): 100 triggers -> ${patches.length} patch, ${counting.eventsCreated} Event, ` +
        `${skipped.length} skipped (${[...new Set(skipped)].join(', ')})`,
    );
    assert.equal(patches.length, 1);
    assert.equal(outcomes.filter((o) => o.applied).length, 1);
    assert.equal(counting.eventsCreated, 1);
    assertStoppedByPinThenCooldown(outcomes);
    const job = await sim.getJob(TOY);
    assert.equal(workers(job), 2);
    assert.equal(decisions(job), 1);
  });
});

describe('injected API faults (SimulatedCluster, 20% of calls, seeded)', () => {
  it('applies every intended change exactly once through 409s, 5xx, drops, lost responses and timeouts', async () => {
    const { sim } = harness();
    const refs: JobRef[] = Array.from({ length: 20 }, (_, i) => ({ ...TOY, name: `job-${i}` }));
    for (const ref of refs)
      sim.submitJob(toyJob({ name: ref.name, workers: 1, minReplicas: 1, maxReplicas: 8 }));
    const faulty = new FaultyClusterClient(sim, { seed: 42, rate: 0.2, hangMs: 60 });
    let retries = 0;
    const cluster = new RetryingClusterClient(faulty, {
      attemptTimeoutMs: 30,
      baseDelayMs: 5,
      maxDelayMs: 50,
      random: () => 0.5,
      onRetry: () => {
        retries++;
      },
    });
    const deps: ActuatorDeps = {
      cluster,
      clock: sim.clock.now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    };
    // Five duplicate deliveries of each job's trigger, all at once.
    const runs = await Promise.all(
      refs.flatMap((ref) => Array.from({ length: 5 }, () => deliverUntilHandled(ref, deps))),
    );
    // Let any write still "in flight" in the faulty client land before counting.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const jobs = await Promise.all(refs.map((ref) => sim.getJob(ref)));
    const t = tally(jobs.map((j) => ({ initial: 1, final: workers(j), decisions: decisions(j) })));
    const requeues = runs.reduce((sum, r) => sum + r.requeues, 0);
    console.log(
      `faults (simulated): ${faulty.calls} calls, injected ${[...faulty.injected].map(([k, v]) => `${k} ${v}`).join(', ')}; ` +
        `${retries} client retries, ${requeues} trigger requeues; intended ${t.intended}, applied ${t.applied}, ` +
        `lost ${t.lost}, doubled ${t.doubled}`,
    );
    assert.ok([...faulty.injected.values()].reduce((a, b) => a + b, 0) > 0, 'faults were injected');
    assert.deepEqual(t, { intended: 20, applied: 20, lost: 0, doubled: 0 });
    assert.equal(runs.filter((r) => r.outcome.applied).length, 20, 'one applied outcome per job');
    const events = sim.recordedEvents().filter((e) => e.reason === 'TrainscalerTuning');
    assert.equal(events.length, 20, 'one audit Event per write');
  });
});
