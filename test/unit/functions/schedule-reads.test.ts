// A schedule tick's API reads do not grow with the number of jobs: one LIST per kind (lib/cluster/
// listed-cluster-reads.ts), plus one GET of each job right before a write to it. Counted with the scale
// benchmark's proxies (test/bench/scale-counting.ts: the requests the production client would send) on the
// simulated cluster of test/bench/scale-world.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import {
  type CountSnapshot,
  countingClusterClient,
  countingMetricsSource,
  RequestCounter,
} from '../../bench/scale-counting.js';
import { buildScaleWorld, PROFILES_NAMESPACE } from '../../bench/scale-world.js';

interface TickCount {
  counts: CountSnapshot;
  applied: number;
  errors: number;
}

/** Handler deps on the scale world whose every request is counted by whichever counter `counter()` gives. */
function countedDeps(world: ReturnType<typeof buildScaleWorld>, counter: () => RequestCounter): HandlerDeps {
  return {
    cluster: countingClusterClient(world.cluster, counter),
    metrics: countingMetricsSource(world.metrics, counter, world.clock),
    clock: world.clock,
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    profiles: { namespace: PROFILES_NAMESPACE, configMapName: 'trainscaler-profiles' },
  };
}

async function oneTick(jobs: number): Promise<TickCount> {
  const world = buildScaleWorld(jobs);
  const counter = new RequestCounter();
  const deps = countedDeps(world, () => counter);
  const result = await handleSchedule({}, deps);
  return {
    counts: counter.snapshot(),
    applied: result.outcomes.filter((o) => o.applied).length,
    errors: result.errors.length,
  };
}

const count = (c: CountSnapshot, key: string) => c.apiRequestsByVerbAndResource[key] ?? 0;

describe('a schedule tick reads the cluster in a number of requests independent of N', () => {
  it('N=10 and N=60: one LIST per kind, and one GET per job written, right before its patch', async () => {
    const small = await oneTick(10);
    const large = await oneTick(60);
    for (const tick of [small, large]) {
      assert.equal(tick.errors, 0);
      assert.ok(tick.applied > 0, 'the tick writes plans: the reads before writes are exercised');
      // Every job written was read once from the API server for its resourceVersion, and no job otherwise.
      assert.equal(count(tick.counts, 'get pytorchjobs'), count(tick.counts, 'patch pytorchjobs'));
    }
    const without = (c: CountSnapshot) => c.apiReads - count(c, 'get pytorchjobs');
    assert.equal(without(large.counts), without(small.counts), JSON.stringify(large.counts));
    // The lists: 6 job kinds, pods, nodes, Workloads, ScaledTrainingJobs; and the profile store's ConfigMap.
    assert.equal(without(large.counts), 11);
    for (const key of ['list pods', 'list workloads', 'list scaledtrainingjobs', 'list nodes'])
      assert.equal(count(large.counts, key), 1, key);
    assert.equal(count(large.counts, 'get scaledtrainingjobs'), 0);
  });

  it('a tick that writes nothing reads only the lists and the profile store: no job, not even one with waiting pods', async () => {
    const world = buildScaleWorld(60);
    let counter = new RequestCounter();
    const deps = countedDeps(world, () => counter);
    await handleSchedule({}, deps);
    // 30 s on: the jobs just written cool down, no sample is new; the pods the first tick's growths asked for
    // are still being placed, so jobs have pods waiting for room (their faults are reviewed, and left alone).
    world.step(30);
    counter = new RequestCounter();
    const second = await handleSchedule({}, deps);
    const counts = counter.snapshot();
    assert.equal(second.errors.length, 0);
    assert.equal(counts.apiWrites, 0, JSON.stringify(counts.apiRequestsByVerbAndResource));
    const reviewed = second.outcomes.filter((o) => o.plan.policy === 'fault');
    assert.ok(reviewed.length > 0, 'jobs with waiting pods were reviewed: the case is exercised');
    assert.equal(count(counts, 'get pytorchjobs'), 0);
    // The lists of the first test, and the profile store's ConfigMap.
    assert.equal(counts.apiReads, 11, JSON.stringify(counts.apiRequestsByVerbAndResource));
  });
});
