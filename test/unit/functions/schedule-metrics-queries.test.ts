// A schedule tick reads the metrics of all its jobs in a bounded number of PromQL queries (issue 41): at 10 and
// at 60 simulated jobs (test/bench/scale-world.ts), one handleSchedule issues the same queries, counted as the
// production source would send them (test/bench/scale-counting.ts, itself checked against
// PrometheusMetricsSource over HTTP in test/unit/bench/scale-counting.test.ts), and none per job. The second
// tick, after the first one's rescales, also measures them, still in the same queries at both sizes.
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

/** The batch reads' most: step samples 3, usage 3 + 2 (cAdvisor), per-worker 1, progress 2, rescales 1 + 1. */
const MOST_QUERIES_PER_TICK = 13;

interface Tick {
  queries: number;
  byMethod: CountSnapshot['promqlQueriesByMethod'];
  applied: number;
  errors: number;
}

/** Two ticks 5 minutes apart on a world of `jobs` jobs: the PromQL queries each issued. */
async function ticks(jobs: number): Promise<Tick[]> {
  const world = buildScaleWorld(jobs, 10 * 60);
  let counter = new RequestCounter();
  const deps: HandlerDeps = {
    cluster: countingClusterClient(world.cluster, () => counter),
    metrics: countingMetricsSource(world.metrics, () => counter, world.clock),
    clock: world.clock,
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    profiles: { namespace: PROFILES_NAMESPACE, configMapName: 'trainscaler-profiles' },
  };
  const out: Tick[] = [];
  for (const _ of [1, 2]) {
    counter = new RequestCounter();
    const result = await handleSchedule({}, deps);
    const counted = counter.snapshot();
    out.push({
      queries: counted.promqlQueries,
      byMethod: counted.promqlQueriesByMethod,
      applied: result.outcomes.filter((o) => o.applied).length,
      errors: result.errors.length,
    });
    world.step(300);
  }
  return out;
}

describe('the schedule tick reads metrics in a bounded number of queries', () => {
  it('issues the same PromQL queries at 10 and at 60 jobs, none of them per job', async () => {
    const small = await ticks(10);
    const large = await ticks(60);
    for (const [i, tick] of large.entries()) {
      const other = small[i];
      assert.ok(other);
      assert.ok(tick.applied > 0 && tick.errors === 0, `tick ${i + 1} decided (${JSON.stringify(tick)})`);
      assert.equal(tick.queries, other.queries, `tick ${i + 1}: ${JSON.stringify([other, tick])}`);
      assert.deepEqual(tick.byMethod, other.byMethod);
      assert.ok(tick.queries <= MOST_QUERIES_PER_TICK, `tick ${i + 1}: ${tick.queries} queries`);
      const perJob = Object.keys(tick.byMethod).filter((m) => !m.endsWith('OfJobs'));
      assert.deepEqual(perJob, [], 'no per-job read');
    }
    // The second tick measured the first one's rescales (in the batch).
    assert.equal(large[1]?.byMethod.firstStepAfterPauseOfJobs, 1);
  });
});
