// What one schedule tick reports, counted on a tick with a job of each kind: stranded (reviewed by the fault
// policy), grown, kept, and without metrics. The tick line is what an operator reads first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleSchedule, hasStrandedPods, pendingDemands } from '../../../functions/schedule.js';
import type { JobSnapshot } from '../../../lib/actuator.js';
import type { JobView, PodView, Resources } from '../../../lib/types.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { GiB, harness, TOY, toyJob } from './handler-harness.js';

const MANAGED = { 'trainscaler.io/managed': 'true' };
const MASTER = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };

describe('the schedule tick line', () => {
  it('counts jobs, the managed ones, those without metrics, stranded reviews, plans, applied and changed', async () => {
    const { sim, deps, logged } = harness();
    // 4 nodes x 4 GPUs. 'steady' holds 4 at its max; toy asks a master and 16 workers: 11 fit, 5 wait.
    sim.submitJob(toyJob({ name: 'steady', workers: 4, minReplicas: 4, maxReplicas: 4, labels: MANAGED }));
    sim.step(1200);
    sim.submitJob(toyJob({ workers: 16, minReplicas: 1, maxReplicas: 16, master: MASTER, labels: MANAGED }));
    sim.step(30);
    sim.submitJob(toyJob({ name: 'fresh', workers: 1, maxReplicas: 1, labels: MANAGED })); // toy and fresh: no samples yet
    sim.step(1);
    sim.drainEvents();
    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    const byName = new Map(result.outcomes.map((o) => [o.ref.name, o]));
    const toy = byName.get('toy')?.plan;
    assert.match([toy?.reason, ...(toy?.details ?? [])].join('; '), /shrinking Worker from 16 to \d+/);
    assert.equal(byName.get('toy')?.applied, true);
    assert.equal(
      byName.get('steady')?.plan.reason,
      'keep 4 workers: no move of a worker to or from this job gains enough',
    );
    assert.equal(
      result.outcomes.filter((o) => o.ref.name === 'toy').length,
      1,
      'reviewed once, by the fault policy',
    );
    const line = logged.find((l) => l.startsWith('info schedule tick '));
    const fields = JSON.parse(line?.slice('info schedule tick '.length) ?? '{}');
    assert.deepEqual(
      {
        jobs: fields.jobs,
        managed: fields.managed,
        withoutMetrics: fields.withoutMetrics,
        stranded: fields.stranded,
        plans: fields.plans,
        applied: fields.applied,
        changed: fields.changed.length,
      },
      {
        jobs: 3,
        managed: 3,
        withoutMetrics: 2,
        stranded: 1,
        plans: 1 + result.outcomes.filter((o) => o.ref.name !== 'toy' && o.plan.changes.length > 0).length,
        applied: result.outcomes.filter((o) => o.applied).length,
        changed: result.outcomes.filter((o) => o.plan.changes.length > 0).length,
      },
    );
    assert.ok(result.outcomes.some((o) => !o.applied));
  });
});

describe("a kept job's reason names the cool-down only while it lasts", () => {
  it('says cool-down with the seconds since the last change, up to the cool-down and not at it', async () => {
    const reasonAfter = async (secondsSinceChange: number | undefined) => {
      const { sim, deps } = harness();
      // At its maximum, so the rebalance keeps it whatever the cool-down: only the reason differs.
      sim.submitJob(toyJob({ name: 'steady', workers: 4, minReplicas: 4, maxReplicas: 4, labels: MANAGED }));
      sim.step(1200);
      if (secondsSinceChange !== undefined)
        await seedJobState(
          sim,
          { ...TOY, name: 'steady' },
          { lastActionAt: sim.clock.now() - secondsSinceChange },
        );
      const result = await handleSchedule(scheduledEvent(), deps);
      assert.deepEqual(result.errors, []);
      return result.outcomes.find((o) => o.ref.name === 'steady')?.plan.reason;
    };
    const cooldown = harness().deps.config.cooldownSeconds;
    assert.ok(cooldown > 2, 'a cool-down to be inside of');
    const free = 'keep 4 workers: no move of a worker to or from this job gains enough';
    assert.equal(await reasonAfter(undefined), free, 'never changed: no cool-down');
    assert.equal(await reasonAfter(cooldown), free, 'the cool-down is over at its length');
    assert.equal(
      await reasonAfter(cooldown - 1),
      `keep 4 workers: cool-down (last change ${cooldown - 1} s ago)`,
    );
  });
});

describe('a pod without a node that is not Pending is not waiting for room', () => {
  const shape: Resources = { cpuMillis: 1, memoryBytes: 1, gpus: 1 };
  const pod = (index: number, phase: PodView['phase'], nodeName?: string): PodView => ({
    name: `toy-worker-${index}`,
    namespace: 'team-a',
    role: 'Worker',
    index,
    phase,
    restartCount: 0,
    requests: shape,
    limits: shape,
    ...(nodeName ? { nodeName } : {}),
  });
  const snapshot = (pods: PodView[]): JobSnapshot => ({
    obj: { apiVersion: 'v1', kind: 'PyTorchJob', metadata: { name: 'toy' } },
    view: { ref: TOY, roles: [{ role: 'Worker', replicas: 2 }] } as unknown as JobView,
    pods,
    rawPods: [],
  });

  it('a pod in phase Unknown (its node lost) neither strands the job nor counts as a waiting pod', () => {
    const lost = snapshot([pod(0, 'Running', 'n1'), pod(1, 'Unknown')]);
    assert.equal(hasStrandedPods(lost), false);
    assert.deepEqual(pendingDemands(lost), []);
  });
});
