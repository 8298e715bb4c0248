// A TrainingAutoscaler's own status (lib/policy-status.ts): the jobs it governs counted, Ready and Conflict, the
// generation read; written only when a reader would see a change, never in a dry run; and the schedule tick
// works it out from the lists it already holds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleSchedule } from '../../functions/schedule.js';
import type { ClusterClient, KubeObject, WriteOptions } from '../../lib/cluster/cluster-client.js';
import { ApiError, ConflictError } from '../../lib/errors.js';
import {
  CONFLICT_NAMES_SHOWN,
  type PolicyStatus,
  policyStatuses,
  writePolicyStatuses,
} from '../../lib/policy-status.js';
import { scheduledEvent } from '../fixtures/payloads.js';
import { harness, toyJob } from './functions/handler-harness.js';

const SCOPE = { namespaceAllowlist: [], ownNamespaces: ['trainscaler-system'] };
const NOW = 1_800_000_000;

function policy(name: string, spec: Record<string, unknown>, extra: Partial<KubeObject> = {}): KubeObject {
  return {
    apiVersion: 'trainscaler.io/v1alpha1',
    kind: 'TrainingAutoscaler',
    metadata: { name, namespace: 'team-a', generation: 3, resourceVersion: '10' },
    spec,
    ...extra,
  };
}

function job(name: string, labels: Record<string, string> = {}, namespace = 'team-a'): KubeObject {
  return { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', metadata: { name, namespace, labels } };
}

const condition = (s: PolicyStatus | undefined, type: string) => s?.conditions.find((c) => c.type === type);

describe('TrainingAutoscaler status', () => {
  it('counts the jobs each policy governs; a job two selectors claim is a Conflict on both, counted on neither', () => {
    const policies = [
      policy('by-team', { selector: { matchLabels: { team: 'nlp' } } }),
      policy('by-tier', { selector: { matchLabels: { tier: 'gold' } } }),
      policy('pinned', { targetRef: { kind: 'PyTorchJob', name: 'both' } }),
    ];
    const jobs = [
      job('a', { team: 'nlp' }),
      job('b', { team: 'nlp' }),
      job('shared', { team: 'nlp', tier: 'gold' }),
      // A targetRef wins over every selector: no conflict.
      job('both', { team: 'nlp', tier: 'gold' }),
      job('elsewhere', { team: 'nlp' }, 'team-b'),
    ];
    const statuses = policyStatuses({ policies, jobs, scope: SCOPE, now: NOW });
    const team = statuses.get('team-a/by-team');
    assert.equal(team?.matchedJobs, 2);
    assert.equal(statuses.get('team-a/by-tier')?.matchedJobs, 0);
    assert.equal(statuses.get('team-a/pinned')?.matchedJobs, 1);
    assert.equal(team?.observedGeneration, 3);
    for (const id of ['team-a/by-team', 'team-a/by-tier']) {
      const conflict = condition(statuses.get(id), 'Conflict');
      assert.equal(conflict?.status, 'True', id);
      assert.match(conflict?.message ?? '', /^1 job\(s\) .*: PyTorchJob team-a\/shared$/);
    }
    assert.equal(condition(statuses.get('team-a/pinned'), 'Conflict')?.status, 'False');
    assert.equal(condition(team, 'Ready')?.status, 'True');
    assert.equal(condition(team, 'Ready')?.observedGeneration, 3);
  });

  it('a policy the API server should have refused is Ready False, saying why; its namespace is held', () => {
    const policies = [
      policy('bad', { targetRef: { kind: 'PyTorchJob', name: 'x' }, minWorkers: 4, maxWorkers: 2 }),
      policy('good', { selector: { matchLabels: { team: 'nlp' } } }),
    ];
    const statuses = policyStatuses({ policies, jobs: [job('a', { team: 'nlp' })], scope: SCOPE, now: NOW });
    const ready = condition(statuses.get('team-a/bad'), 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'InvalidSpec');
    assert.match(ready?.message ?? '', /minWorkers \(4\) is greater than maxWorkers \(2\)/);
    assert.equal(
      statuses.get('team-a/good')?.matchedJobs,
      0,
      'held while a policy of its namespace is unreadable',
    );
  });

  it('names at most a few conflicting jobs, and counts the rest', () => {
    const policies = [
      policy('p1', { selector: { matchLabels: { team: 'nlp' } } }),
      policy('p2', { selector: { matchLabels: { team: 'nlp' } } }),
    ];
    const jobs = Array.from({ length: CONFLICT_NAMES_SHOWN + 3 }, (_, i) => job(`j${i}`, { team: 'nlp' }));
    const message = condition(
      policyStatuses({ policies, jobs, scope: SCOPE, now: NOW }).get('team-a/p1'),
      'Conflict',
    )?.message;
    assert.match(message ?? '', /^8 job\(s\) .* and 3 more$/);
    assert.equal(message?.split('PyTorchJob').length, CONFLICT_NAMES_SHOWN + 1);
  });

  it('writes a status only when what a reader sees changed; transition times kept; nothing in a dry run', async () => {
    const writes: { policy: string; status: Record<string, unknown> }[] = [];
    const cluster: Pick<ClusterClient, 'putTrainingAutoscalerStatus'> = {
      putTrainingAutoscalerStatus: async (current, status, _options: WriteOptions) => {
        writes.push({ policy: current.metadata.name, status });
        return { ...current, status };
      },
    };
    const p = policy('p', { selector: { matchLabels: { team: 'nlp' } } });
    const jobs = [job('a', { team: 'nlp' })];
    const first = policyStatuses({ policies: [p], jobs, scope: SCOPE, now: NOW });
    assert.deepEqual(await writePolicyStatuses(cluster, [p], first, { dryRun: true }), {
      written: [],
      failed: [],
    });
    assert.equal(writes.length, 0, 'dry run');
    await writePolicyStatuses(cluster, [p], first, { dryRun: false });
    assert.equal(writes.length, 1);
    // Read back an hour later: the same status, transition times as they were; nothing written.
    const read = { ...p, status: writes[0]?.status };
    const again = policyStatuses({ policies: [read], jobs, scope: SCOPE, now: NOW + 3600 });
    assert.deepEqual(again.get('team-a/p'), first.get('team-a/p'));
    await writePolicyStatuses(cluster, [read], again, { dryRun: false });
    assert.equal(writes.length, 1, 'unchanged: no write');
    // One more job: the count changes, Ready's transition time does not.
    const more = policyStatuses({
      policies: [read],
      jobs: [...jobs, job('b', { team: 'nlp' })],
      scope: SCOPE,
      now: NOW + 7200,
    });
    await writePolicyStatuses(cluster, [read], more, { dryRun: false });
    assert.equal(writes.length, 2);
    assert.equal(writes[1]?.status.matchedJobs, 2);
    assert.equal(condition(more.get('team-a/p'), 'Ready')?.lastTransitionTime, '2027-01-15T08:00:00Z');
  });

  it("a conflict (the policy changed since it was read) waits for the next tick; another failure is reported, the others' written", async () => {
    const a = policy('a', { selector: { matchLabels: { team: 'nlp' } } });
    const b = policy('b', { targetRef: { kind: 'PyTorchJob', name: 'x' } });
    const c = policy('c', { targetRef: { kind: 'PyTorchJob', name: 'y' } });
    const written: string[] = [];
    const cluster: Pick<ClusterClient, 'putTrainingAutoscalerStatus'> = {
      putTrainingAutoscalerStatus: async (current) => {
        if (current.metadata.name === 'a') throw new ConflictError('a');
        if (current.metadata.name === 'b') throw new ApiError('write b', 500, 'boom');
        written.push(current.metadata.name);
        return current;
      },
    };
    const statuses = policyStatuses({ policies: [a, b, c], jobs: [], scope: SCOPE, now: NOW });
    const result = await writePolicyStatuses(cluster, [a, b, c], statuses, { dryRun: false });
    assert.deepEqual(result.written, ['team-a/c']);
    assert.deepEqual(
      result.failed.map((f) => f.policy),
      ['team-a/b'],
    );
    assert.deepEqual(written, ['c']);
  });

  it('the schedule tick writes each policy status once from what it listed, and not again when nothing changed', async () => {
    const { sim, deps } = harness();
    sim.applyTrainingAutoscaler(policy('toy', { targetRef: { kind: 'PyTorchJob', name: 'toy' } }));
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    sim.step(900);
    // The simulated cluster keeps no policy status: this client does, guarded by resourceVersion.
    const stored = new Map<string, KubeObject>();
    let version = 100;
    const list = sim.listTrainingAutoscalers.bind(sim);
    const writes: Record<string, unknown>[] = [];
    const cluster = Object.assign(Object.create(null) as ClusterClient, {
      listTrainingAutoscalers: async (namespace?: string) =>
        (await list(namespace)).map((p) => stored.get(p.metadata.name) ?? p),
      putTrainingAutoscalerStatus: async (current: KubeObject, status: Record<string, unknown>) => {
        const now = stored.get(current.metadata.name);
        if ((now?.metadata.resourceVersion ?? '10') !== current.metadata.resourceVersion)
          throw new ConflictError(current.metadata.name);
        writes.push(status);
        const next = {
          ...current,
          metadata: { ...current.metadata, resourceVersion: String(++version) },
          status,
        };
        stored.set(current.metadata.name, next);
        return next;
      },
    });
    for (const [name, method] of Object.entries(methodsOf(sim)))
      if (!(name in cluster)) (cluster as unknown as Record<string, unknown>)[name] = method;
    const tick = () => handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.deepEqual((await tick()).errors, []);
    assert.equal(writes.length, 1);
    assert.equal(writes[0]?.matchedJobs, 1);
    assert.equal(writes[0]?.observedGeneration, 1);
    await tick();
    assert.equal(writes.length, 1, 'unchanged: not written again');
    await handleSchedule(scheduledEvent(), { ...deps, cluster, dryRun: true });
    assert.equal(writes.length, 1);
  });
});

/** The simulator's ClusterClient methods, bound (its fields are private: no Proxy or prototype tricks). */
function methodsOf(sim: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(sim))) {
    const method = (sim as Record<string, unknown>)[name];
    if (name !== 'constructor' && typeof method === 'function') out[name] = method.bind(sim);
  }
  return out;
}
