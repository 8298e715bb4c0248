// The schedule tick's parts that the rebalance tests do not reach: which jobs it reads and skips, which pods
// wait, why a job is kept, and what one tick reports.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { handleSchedule, hasStrandedPods, pendingDemands } from '../../../functions/schedule.js';
import type { JobSnapshot } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import { recordRun } from '../../../lib/decisions/profile-store.js';
import { ApiError, NotFoundError } from '../../../lib/errors.js';
import type { JobView, PodView, Resources } from '../../../lib/types.js';
import { scheduledEvent } from '../../fixtures/payloads.js';
import { countingClient, GiB, harness, recordProfile, replaceable, TOY, toyJob } from './handler-harness.js';

const MANAGED = { 'trainscaler.io/managed': 'true' };
const SHAPE: Resources = { cpuMillis: 4000, memoryBytes: 1, gpus: 1 };

function pod(
  role: PodView['role'],
  index: number,
  phase: PodView['phase'],
  more: Partial<PodView> = {},
): PodView {
  return {
    name: `toy-${role.toLowerCase()}-${index}`,
    namespace: 'team-a',
    role,
    index,
    phase,
    restartCount: 0,
    requests: SHAPE,
    limits: SHAPE,
    ...more,
  };
}

function snapshotOf(pods: PodView[], roles: PodView['role'][] = ['Worker']): JobSnapshot {
  const view = { ref: TOY, roles: roles.map((role) => ({ role, replicas: 4 })) } as unknown as JobView;
  return {
    obj: { apiVersion: 'v1', kind: 'PyTorchJob', metadata: { name: 'toy' } },
    view,
    pods,
    rawPods: [],
  };
}

const on = (node: string) => ({ nodeName: node });

describe('pendingDemands: the waiting pods of each role', () => {
  it('counts the unbound, ungated Pending pods of a role, the placed ones beside them, one pod as the shape', () => {
    const big: Resources = { cpuMillis: 8000, memoryBytes: 2, gpus: 2 };
    const demands = pendingDemands(
      snapshotOf(
        [
          pod('Worker', 0, 'Running', on('n1')),
          pod('Worker', 1, 'Pending', on('n2')), // bound, starting: placed
          pod('Worker', 2, 'Pending', { requests: big }),
          pod('Worker', 3, 'Pending'),
          pod('Worker', 4, 'Pending', { schedulingGated: true }), // waits on purpose: placed by Kueue later
          pod('Worker', 5, 'Succeeded', on('n1')),
          pod('Worker', 6, 'Failed'),
          pod('Master', 0, 'Running', on('n1')),
        ],
        ['Master', 'Worker'],
      ),
    );
    assert.equal(demands.length, 1, 'the Master waits for nothing');
    const [worker] = demands;
    assert.equal(worker?.role, 'Worker');
    assert.equal(worker?.pods, 2);
    assert.equal(worker?.placed, 3, 'running, bound and gated pods; finished ones are gone');
    assert.deepEqual(worker?.demand, big);
  });

  it('has no demand for a role whose pods are all placed, finished or gated', () => {
    const snapshot = snapshotOf([
      pod('Worker', 0, 'Running', on('n1')),
      pod('Worker', 1, 'Failed'),
      pod('Worker', 2, 'Succeeded'),
      pod('Worker', 3, 'Pending', { schedulingGated: true }),
    ]);
    assert.deepEqual(pendingDemands(snapshot), []);
  });
});

describe('hasStrandedPods: some pods run while others wait for room', () => {
  it('is true only for a job with both a placed pod and an unbound, ungated Pending one', () => {
    const running = pod('Worker', 0, 'Running', on('n1'));
    const waiting = pod('Worker', 1, 'Pending');
    assert.equal(hasStrandedPods(snapshotOf([running, waiting])), true);
    assert.equal(hasStrandedPods(snapshotOf([pod('Worker', 0, 'Pending', on('n1')), waiting])), true);
    assert.equal(hasStrandedPods(snapshotOf([waiting])), false, 'queued: nothing runs yet');
    assert.equal(hasStrandedPods(snapshotOf([running])), false);
    assert.equal(hasStrandedPods(snapshotOf([running, { ...waiting, schedulingGated: true }])), false);
    assert.equal(hasStrandedPods(snapshotOf([running, { ...waiting, phase: 'Failed' }])), false);
    const done = pod('Worker', 0, 'Succeeded', on('n1'));
    assert.equal(hasStrandedPods(snapshotOf([done, waiting])), false, 'a finished pod holds nothing');
    assert.equal(hasStrandedPods(snapshotOf([{ ...done, phase: 'Failed' }, waiting])), false);
  });
});

function workers(job: { spec?: unknown }): number | undefined {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

describe('schedule tick', () => {
  it('reads every supported kind; a kind without its CRD has no jobs; any other list error fails the tick', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const listing = (failure: Error): HandlerDeps => ({
      ...deps,
      cluster: Object.assign(replaceable(sim), {
        listJobs: (kind: Parameters<ClusterClient['listJobs']>[0], namespace?: string) =>
          kind === 'TFJob' ? Promise.reject(failure) : sim.listJobs(kind, namespace),
      }) as unknown as ClusterClient,
    });
    const result = await handleSchedule(scheduledEvent(), listing(new NotFoundError('tfjobs.kubeflow.org')));
    assert.deepEqual(result.errors, []);
    assert.equal(result.outcomes.find((o) => o.ref.name === 'toy')?.applied, true);
    await assert.rejects(
      handleSchedule(scheduledEvent(), listing(new ApiError('list TFJob', 500, 'etcd timeout'))),
      ApiError,
    );
  });

  it('reports one line per tick: jobs read, managed, without metrics, waiting, stranded, plans, what changed', async () => {
    const { sim, deps, logged } = harness();
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    const unmanaged = toyJob({ name: 'mine', namespace: 'team-b', workers: 1 });
    delete unmanaged.metadata.annotations?.[ANNOTATION.managed];
    delete unmanaged.metadata.labels?.[ANNOTATION.managed];
    sim.submitJob(unmanaged);
    sim.step(1200);
    sim.submitJob(toyJob({ name: 'fresh', workers: 1, labels: MANAGED })); // no step samples yet
    sim.step(1);
    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    assert.deepEqual(
      result.outcomes.map((o) => o.ref.name).sort(),
      ['fresh', 'toy'],
      'an unmanaged job gets no outcome',
    );
    const line = logged.filter((l) => l.startsWith('info schedule tick '));
    assert.equal(line.length, 1);
    const fields = JSON.parse(line[0]?.slice('info schedule tick '.length) ?? '{}');
    const changed = result.outcomes.filter((o) => o.plan.changes.length > 0);
    assert.deepEqual(fields, {
      trigger: 'schedule',
      jobs: 3,
      managed: 2,
      withoutMetrics: 1,
      pendingDemands: 0,
      stranded: 0,
      plans: changed.length,
      applied: result.outcomes.filter((o) => o.applied).length,
      changed: changed.map((o) => `team-a/${o.ref.name}: ${o.plan.reason}`),
      errors: 0,
    });
    assert.ok(changed.length >= 1);
  });

  it('skips a finished job, and says why each job it leaves alone is kept', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 16, labels: MANAGED }));
    sim.submitJob(toyJob({ name: 'rigid', workers: 2, minReplicas: 2, maxReplicas: 2, labels: MANAGED }));
    const rigid = { ...TOY, name: 'rigid' };
    await sim.patchJob(rigid, [{ op: 'remove', path: '/spec/elasticPolicy' }], { dryRun: false });
    sim.submitJob(toyJob({ name: 'done', workers: 1, targetSamples: 1000, labels: MANAGED }));
    sim.step(1200);
    const first = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(first.errors, []);
    const reasonOf = (result: typeof first, name: string) =>
      result.outcomes.find((o) => o.ref.name === name)?.plan.reason ?? '';
    assert.equal(first.outcomes.find((o) => o.ref.name === 'toy')?.applied, true);
    assert.equal(first.trigger, 'schedule');
    assert.deepEqual(
      first.outcomes.find((o) => o.ref.name === 'rigid'),
      {
        ref: rigid,
        plan: { ref: rigid, policy: 'rebalance', changes: [], reason: 'keep 2 workers: not elastic' },
        applied: false,
        skipped: 'no-change',
      },
    );
    assert.equal(
      first.outcomes.filter((o) => o.ref.name === 'done').length,
      0,
      'a finished job is not reviewed',
    );
    sim.step(10);
    const second = await handleSchedule(scheduledEvent(), deps);
    assert.match(reasonOf(second, 'toy'), /^keep \d+ workers: cool-down \(last change 1\d s ago\)$/);
  });

  it('a plan made on a job its owner changes before the write is not applied: the next tick recomputes', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    let reads = 0;
    const cluster = Object.assign(replaceable(sim), {
      getJob: async (ref: Parameters<ClusterClient['getJob']>[0]) => {
        const job = await sim.getJob(ref);
        // Right after the tick's read, the owner edits the job (any field: the version moves).
        if (++reads === 1)
          await sim.patchJob(ref, [{ op: 'add', path: '/metadata/annotations/team', value: 'vision' }], {
            dryRun: false,
          });
        return job;
      },
    }) as unknown as ClusterClient;
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.deepEqual(result.errors, []);
    const outcome = result.outcomes.find((o) => o.ref.name === 'toy');
    assert.equal(outcome?.applied, false);
    assert.equal(outcome?.plan.reason, 'job changed since the rebalance snapshot; the next tick recomputes');
    assert.equal(workers(await sim.getJob(TOY)), 1);
  });

  it('a queued job is valued by its own namespace profile; a profile store it cannot read is only a warning', async () => {
    const { sim, deps, logged } = harness();
    await recordProfile(sim, deps, 'team-a', 'toy');
    sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16, labels: MANAGED }));
    sim.step(1200);
    sim.submitJob(toyJob({ name: 'queued', workers: 4, maxReplicas: 4, labels: MANAGED }));
    sim.step(5);
    const read = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(read.errors, []);
    assert.deepEqual(
      logged.filter((l) => l.startsWith('warn')),
      [],
    );
    const unreadable: HandlerDeps = {
      ...deps,
      cluster: Object.assign(replaceable(sim), {
        getConfigMap: () => Promise.reject(new ApiError('get ConfigMap', 403, 'forbidden')),
      }) as unknown as ClusterClient,
    };
    const blind = await handleSchedule(scheduledEvent(), unreadable);
    assert.deepEqual(
      blind.errors.map((e) => [e.ref.name, e.code]),
      [['queued', 'API_ERROR']],
      "the queued job's value needs the store; the running job fits without it",
    );
    assert.ok(logged.some((l) => l.startsWith('warn profile store unreadable: fitting without it')));
  });

  describe('a job without step-time samples', () => {
    /** The simulator's metrics, except that `toy` has no step time (and a sidecar counting, when `reports`). */
    const withoutSamples = (sim: ReturnType<typeof harness>['sim'], reports: boolean) =>
      Object.assign(replaceable(sim), {
        stepSamples: (ref: typeof TOY, window: number) =>
          ref.name === 'toy' ? Promise.resolve([]) : sim.stepSamples(ref, window),
        samplesProcessed: (ref: typeof TOY) =>
          ref.name === 'toy' ? Promise.resolve(reports ? 0 : undefined) : sim.samplesProcessed(ref),
      }) as unknown as HandlerDeps['metrics'];

    it('is never grown beside idle GPUs: kept, the reason saying what is missing', async () => {
      const { sim, deps } = harness();
      sim.submitJob(toyJob({ workers: 2, maxReplicas: 16, labels: MANAGED }));
      sim.step(1200);
      const mark = sim.writeLog().length;
      for (const reports of [false, true]) {
        const result = await handleSchedule(scheduledEvent(), {
          ...deps,
          metrics: withoutSamples(sim, reports),
        });
        assert.deepEqual(result.errors, []);
        const outcome = result.outcomes.find((o) => o.ref.name === 'toy');
        assert.equal(outcome?.skipped, 'no-change');
        assert.equal(
          outcome?.plan.reason,
          reports
            ? 'keep 2 workers: no step-time samples: its sidecar reports no training step yet'
            : 'keep 2 workers: no step-time samples: no sidecar series for this job',
        );
        assert.ok((outcome?.plan.details ?? []).length > 0, 'what to do about it, in the details');
      }
      assert.deepEqual(
        sim
          .writeLog()
          .slice(mark)
          .filter((w) => w.target === 'PyTorchJob team-a/toy'),
        [],
      );
    });

    it("is grown by one worker on its signature's profile, and the reason says so", async () => {
      const { sim, deps } = harness();
      const samples = [1, 2, 4].map((replicas) => ({
        replicas,
        nodes: 1,
        localBatchSize: 32,
        stepTime: 0.2,
      }));
      await recordRun(
        sim,
        deps.profiles,
        { namespace: 'team-a', signature: 'toy', samples, usage: [] },
        0,
        false,
      );
      sim.submitJob(toyJob({ workers: 2, maxReplicas: 16, labels: MANAGED }));
      sim.step(1200);
      const result = await handleSchedule(scheduledEvent(), { ...deps, metrics: withoutSamples(sim, false) });
      assert.deepEqual(result.errors, []);
      const outcome = result.outcomes.find((o) => o.ref.name === 'toy');
      assert.equal(outcome?.applied, true);
      assert.match(outcome?.plan.reason ?? '', /^2 -> 3 workers: \+1 on priors \(no samples yet\)/);
    });
  });

  it("a typed error reading one job's metrics is reported with its code; a missing series is no error", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const metrics = Object.assign(replaceable(sim), {
      stepSamples: (ref: typeof TOY, window: number) =>
        ref.name === 'toy'
          ? Promise.reject(new ApiError('Prometheus query', 503, 'unavailable'))
          : sim.stepSamples(ref, window),
    }) as unknown as HandlerDeps['metrics'];
    const result = await handleSchedule(scheduledEvent(), { ...deps, metrics });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['toy', 'API_ERROR']],
    );
    assert.equal(result.outcomes.find((o) => o.ref.name === 'other')?.applied, true);
  });

  it("a queued job whose profile's model fails is left out of the rebalance; the running job is still reviewed", async () => {
    const { sim, deps } = harness();
    await recordProfile(sim, deps, 'team-a', 'q');
    // big holds every GPU: the queued job has no pod placed, and the rebalance values it by its profile.
    sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16, labels: MANAGED }));
    sim.step(600);
    sim.submitJob(toyJob({ name: 'queued', workers: 4, maxReplicas: 4, labels: MANAGED }));
    const queued = { ...TOY, name: 'queued' };
    await sim.patchJob(
      queued,
      [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1signature', value: 'q' }],
      { dryRun: false },
    );
    sim.step(5);
    const failing: HandlerDeps['throughputOracle'] = (signature, model) =>
      signature === 'q'
        ? {
            ...model,
            predict: () => {
              throw new RangeError('profile fit diverged');
            },
          }
        : model;
    const result = await handleSchedule(scheduledEvent(), { ...deps, throughputOracle: failing });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code, e.message]),
      [['queued', 'INTERNAL', 'profile fit diverged']],
    );
    assert.deepEqual(
      result.outcomes.map((o) => o.ref.name),
      ['big'],
    );
    const healthy = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(healthy.errors, []);
    assert.ok(healthy.outcomes.some((o) => o.ref.name === 'queued' || o.plan.reason.includes('queued')));
  });

  it("reads the profile store only for managed jobs: an unmanaged job's queued pods cost no read of it", async () => {
    const { sim, deps } = harness();
    await recordProfile(sim, deps, 'team-b', 'toy');
    // An unmanaged job whose pods fit on no node (8 GPUs each, nodes of 4): all wait, none placed.
    const queued = toyJob({
      name: 'mine',
      namespace: 'team-b',
      workers: 2,
      sizing: { gpus: 8, cpuMillis: 4000, memoryBytes: 10 * GiB },
    });
    delete queued.metadata.annotations?.[ANNOTATION.managed];
    delete queued.metadata.labels?.[ANNOTATION.managed];
    sim.submitJob(queued);
    sim.step(5);
    const { cluster, calls } = countingClient(sim);
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.deepEqual([result.errors, result.outcomes], [[], []]);
    assert.equal(calls.get('getConfigMap') ?? 0, 0);
  });
});
