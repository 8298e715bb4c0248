// Issue 40 item 3: pods of jobs trainscaler does not manage may churn as fast as their owner likes; each event
// costs at most the reads that say the job is unmanaged (the job, and the TrainingAutoscalers of its namespace,
// which may opt it in), never a cluster-wide LIST of nodes and pods.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { countingClient, GiB, harness, toyJob, writesSince } from './handler-harness.js';

/** A running job's pods, as the watch delivered them; its pod events, each one a trigger. */
function podEventsOf(sim: SimulatedCluster, name: string) {
  const events = sim.drainEvents().filter((e) => {
    const object = (e as { object?: { kind?: string; metadata?: { name?: string } } }).object;
    return object?.kind === 'Pod' && object.metadata?.name?.startsWith(`${name}-`);
  });
  assert.ok(events.length > 0, `pod events of ${name}`);
  return events;
}

function unmanaged(namespace: string) {
  const job = toyJob({ name: 'churn', namespace, workers: 2 });
  delete job.metadata.annotations?.[ANNOTATION.managed];
  delete job.metadata.labels?.[ANNOTATION.managed];
  return job;
}

async function deliver(sim: SimulatedCluster, deps: HandlerDeps, name: string) {
  const { cluster, calls } = countingClient(sim);
  const mark = sim.writeLog().length;
  const results = [];
  for (const event of podEventsOf(sim, name))
    results.push(await handleClusterEvent(event, { ...deps, cluster }));
  return {
    results,
    calls: Object.fromEntries(calls),
    writes: writesSince(sim, mark),
    events: results.length,
  };
}

describe('pod events of unmanaged jobs cost no cluster-wide read', () => {
  it("a job that did not opt in: one GET of the job and one LIST of its namespace's policies per event, no write", async () => {
    const { sim, deps } = harness();
    sim.submitJob(unmanaged('team-a'));
    sim.step(60);
    const namespaces: (string | undefined)[] = [];
    const listPolicies = sim.listTrainingAutoscalers.bind(sim);
    sim.listTrainingAutoscalers = (namespace?: string) => {
      namespaces.push(namespace);
      return listPolicies(namespace);
    };
    const { results, calls, writes, events } = await deliver(sim, deps, 'churn');
    assert.deepEqual(calls, { getJob: events, listTrainingAutoscalers: events });
    assert.deepEqual(new Set(namespaces), new Set(['team-a']), 'never cluster-wide');
    assert.deepEqual(writes, []);
    for (const r of results) {
      assert.match(r.ignored ?? '', /^not managed: not opted in/);
      assert.deepEqual([r.outcomes, r.errors], [[], []]);
    }
  });

  it('a namespace outside TRAINSCALER_NAMESPACES, or a system one: no read at all, even when opted in', async () => {
    for (const namespace of ['team-b', 'kube-system']) {
      const { sim, deps } = harness();
      const allowlisted: HandlerDeps = {
        ...deps,
        config: { ...DEFAULT_POLICY_CONFIG, namespaceAllowlist: ['team-a'] },
      };
      sim.submitJob(toyJob({ name: 'churn', namespace, workers: 2 })); // opted in by its own label
      sim.step(60);
      const { results, calls, writes } = await deliver(sim, allowlisted, 'churn');
      assert.deepEqual(calls, {}, namespace);
      assert.deepEqual(writes, []);
      for (const r of results) assert.match(r.ignored ?? '', /^not managed: namespace /);
    }
  });

  it('a managed job is still reviewed on its pod events: its OOM kill raises its memory', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 2, sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 6 * GiB } }));
    let raised = 0;
    let listedNodes = 0;
    for (let i = 0; i < 10 && raised === 0; i++) {
      sim.step(10);
      const { cluster, calls } = countingClient(sim);
      for (const event of sim.drainEvents()) {
        const result = await handleClusterEvent(event, { ...deps, cluster });
        raised += result.outcomes.filter((o) => o.applied).length;
      }
      listedNodes += calls.get('listNodes') ?? 0;
    }
    assert.equal(raised, 1);
    assert.ok(listedNodes > 0, 'the capacity a fault decision needs is read for a managed job');
  });
});
