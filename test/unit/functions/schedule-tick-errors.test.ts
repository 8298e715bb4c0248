// Each per-job step of the schedule tick reports its own failure as that job's, and the tick goes on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import { ApiError } from '../../../lib/errors.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { GiB, harness, replaceable, TOY, toyJob } from './handler-harness.js';

const MANAGED = { 'trainscaler.io/managed': 'true' };

/** The simulator, refusing every write to the job named `name` as an API server under load would. */
function refusingWritesTo(sim: ReturnType<typeof harness>['sim'], name: string): ClusterClient {
  return Object.assign(replaceable(sim), {
    patchJob: (...args: Parameters<ClusterClient['patchJob']>) =>
      args[0].name === name
        ? Promise.reject(new ApiError(`patch ${name}`, 503, 'unavailable'))
        : sim.patchJob(...args),
  }) as unknown as ClusterClient;
}

describe('schedule tick: per-job failures', () => {
  it("a rebalance plan whose write fails is that job's API_ERROR; the other job's plan is written", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster: refusingWritesTo(sim, 'toy') });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['toy', 'API_ERROR']],
    );
    assert.equal(result.outcomes.find((o) => o.ref.name === 'other')?.applied, true);
  });

  it("a stranded job's fault review whose write fails is that job's API_ERROR", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', workers: 4, maxReplicas: 4, labels: MANAGED }));
    sim.step(60);
    const master = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };
    sim.submitJob(toyJob({ workers: 16, minReplicas: 1, maxReplicas: 16, master, labels: MANAGED }));
    sim.step(30);
    sim.drainEvents();
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster: refusingWritesTo(sim, 'toy') });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['toy', 'API_ERROR']],
    );
    assert.ok(result.outcomes.some((o) => o.ref.name === 'other'));
  });

  it("a job whose model cannot be built is that job's error; the others are rebalanced", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ name: 'broken', workers: 1, labels: MANAGED }));
    sim.step(1200);
    await sim.patchJob(
      { ...TOY, name: 'broken' },
      [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1signature', value: 'broken' }],
      { dryRun: false },
    );
    const oracle: HandlerDeps['throughputOracle'] = (signature, model) => {
      if (signature === 'broken') throw new RangeError('no model for this signature');
      return model;
    };
    const result = await handleSchedule(scheduledEvent(), { ...deps, throughputOracle: oracle });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['broken', 'INTERNAL']],
    );
    assert.equal(result.outcomes.find((o) => o.ref.name === 'other')?.applied, true);
  });

  it('a profile store it cannot read is logged with the reason, and the running job fits without it', async () => {
    const { sim, deps, logged } = harness();
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const cluster = Object.assign(replaceable(sim), {
      getConfigMap: () => Promise.reject(new ApiError('get ConfigMap profiles', 403, 'forbidden by RBAC')),
    }) as unknown as ClusterClient;
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.deepEqual(result.errors, []);
    const warning = logged.find((l) => l.startsWith('warn profile store unreadable: fitting without it'));
    assert.match(warning ?? '', /forbidden by RBAC/);
  });
});
