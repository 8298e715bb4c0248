// Issue 40 item 1: nothing one tenant does to its own job stops a trigger for the others. Written as the
// tenant acts: an opted-in PyTorchJob with a Master, whose owner patches Worker replicas to 0 while step
// samples from the last hours exist (the model has no placement at 0 workers to predict).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleSchedule } from '../../../functions/schedule.js';
import type { ClusterClient, KubeObject } from '../../../lib/cluster/cluster-client.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import type { ThroughputModel } from '../../../lib/model/throughput-model.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { breakingSignature, GiB, harness, replaceable, TOY, toyJob } from './handler-harness.js';

const MANAGED = { 'trainscaler.io/managed': 'true' };
const MASTER = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };
const OTHER = { kind: 'PyTorchJob', namespace: 'team-b', name: 'other' } as const;

function workers(job: { spec?: unknown }): number | undefined {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

/** Two tenants' jobs that have trained 20 minutes; then team-a's owner scales its Worker role to 0. */
async function workersPatchedToZero() {
  const h = harness();
  h.sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
  h.sim.submitJob(toyJob({ workers: 2, master: MASTER, labels: MANAGED }));
  h.sim.step(1200);
  await h.sim.patchJob(
    TOY,
    [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 0 }],
    { dryRun: false },
  );
  h.sim.step(10);
  return h;
}

const named = (name: string) => (o: { ref: { name: string } }) => o.ref.name === name;

describe('one job cannot stop the schedule tick for everyone', () => {
  it("a tenant's Worker replicas patched to 0 leaves that job alone and the tick serves the others", async () => {
    const { sim, deps } = await workersPatchedToZero();
    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    const toy = result.outcomes.filter(named('toy'));
    assert.equal(toy.length, 1);
    assert.equal(toy[0]?.applied, false);
    assert.match(toy[0]?.plan.reason ?? '', /keep 0 workers: scaled to 0 workers by its owner/);
    assert.equal(workers(await sim.getJob(TOY)), 0, 'trainscaler does not restart what its owner stopped');
    // The other tenant's job is rebalanced as on any tick: it grows into the idle GPUs.
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
    assert.ok((workers(await sim.getJob(OTHER)) ?? 0) > 1);
  });

  it('an alarm naming that job and another reports it as its own typed error and reviews the other', async () => {
    const { deps } = await workersPatchedToZero();
    const result = await handleAlarm(
      alertmanagerWebhook([
        { namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' },
        { namespace: 'team-b', kind: 'PyTorchJob', name: 'other' },
      ]),
      deps,
    );
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['toy', 'VALIDATION']],
    );
    assert.match(result.errors[0]?.message ?? '', /invalid input at \/replicas: predict: invalid placement/);
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
  });

  it("a model that throws inside the cluster-wide rebalance costs only its job: the others' plans are made", async () => {
    const { sim, deps, logged } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ name: 'broken', workers: 1, labels: MANAGED }));
    sim.step(1200);
    const broken = { ...TOY, name: 'broken' };
    await sim.patchJob(
      broken,
      [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1signature', value: 'broken' }],
      { dryRun: false },
    );
    // A bug one job's data reaches: its model answers at its current size, then fails at any other.
    const failing = (model: ThroughputModel): ThroughputModel => ({
      ...model,
      predict: (placement) => {
        if (placement.replicas !== 1) throw new TypeError('cannot read the fit');
        return model.predict(placement);
      },
    });
    const result = await handleSchedule(scheduledEvent(), breakingSignature(deps, 'broken', failing));
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code, e.message]),
      [['broken', 'INTERNAL', 'cannot read the fit']],
    );
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
    assert.equal(result.outcomes.filter(named('broken')).length, 0, 'no outcome for a job with an error');
    assert.ok((workers(await sim.getJob(OTHER)) ?? 0) > 1);
    assert.equal(workers(await sim.getJob(broken)), 1, 'nothing written for it');
    const line = logged.find((l) => l.startsWith('error no decision for job: unexpected error'));
    assert.match(line ?? '', /"name":"broken"/);
    assert.match(line ?? '', /"stack":"TypeError: cannot read the fit/);
  });

  it("a plain error reading one job's metrics is that job's INTERNAL error; the tick goes on", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const metrics: MetricsSource = {
      stepSamples: (ref, window) =>
        ref.name === 'toy' ? Promise.reject(new Error('unparseable series')) : sim.stepSamples(ref, window),
      containerUsage: (ref, window) => sim.containerUsage(ref, window),
      workerStepTimes: (ref, window) => sim.workerStepTimes(ref, window),
      samplesProcessed: (ref) => sim.samplesProcessed(ref),
    };
    const result = await handleSchedule(scheduledEvent(), { ...deps, metrics });
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code, e.message]),
      [['toy', 'INTERNAL', 'unparseable series']],
    );
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
  });

  it('a job whose API server read hangs is given up at its deadline; the others are written meanwhile', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    // The tick lists every job at once; it reads one again, live, only right before writing it. That read of
    // team-a's job never answers (an admission webhook, an etcd stall: what holds one object and not another).
    let hung = 0;
    const cluster: ClusterClient = Object.assign(Object.create(null), {
      ...replaceable(sim),
      getJob: (ref: Parameters<ClusterClient['getJob']>[0]) => {
        if (ref.name !== TOY.name) return sim.getJob(ref);
        hung++;
        return new Promise<never>(() => undefined);
      },
    });
    const started = performance.now();
    const result = await handleSchedule(scheduledEvent(), {
      ...deps,
      cluster,
      jobWork: { concurrency: 4, deadlineSeconds: 0.3 },
    });
    const seconds = (performance.now() - started) / 1000;
    assert.ok(hung > 0, 'the hung read was reached');
    assert.ok(seconds < 5, `the tick waited ${seconds} s`);
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [['toy', 'JOB_DEADLINE']],
    );
    assert.match(
      result.errors[0]?.message ?? '',
      /not decided within 0\.3 s; nothing written, retried next tick/,
    );
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
    assert.ok((workers(await sim.getJob(OTHER)) ?? 0) > 1);
    assert.equal(workers(await sim.getJob(TOY)), 1, 'nothing written for it');
  });

  it('under a cluster GPU budget, jobs are written one at a time: two growths never both take its last GPU', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 1, labels: MANAGED }));
    sim.step(1200);
    const gpusInUse = async () =>
      (workers(await sim.getJob(TOY)) ?? 0) + (workers(await sim.getJob(OTHER)) ?? 0);
    assert.equal(await gpusInUse(), 2);
    // Room for one more GPU: both jobs would grow into the idle cluster, and each growth's guardrail reads the
    // cluster's GPUs live right before its write.
    const result = await handleSchedule(scheduledEvent(), {
      ...deps,
      config: { ...deps.config, maxClusterGpus: 3 },
      jobWork: { concurrency: 8, deadlineSeconds: 30 },
    });
    assert.deepEqual(result.errors, []);
    assert.equal(await gpusInUse(), 3);
  });

  it("a tenant's Worker replicas set to 2^31 - 1 (no pod created: quota) costs the tick nothing unusual", async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ name: 'other', namespace: 'team-b', workers: 1, labels: MANAGED }));
    sim.submitJob(toyJob({ workers: 2, labels: MANAGED }));
    sim.step(1200);
    // The API server holds the int32 the owner wrote; the operator could create none of the pods. Sizing the
    // worker layout by the spec allocated 2^31 entries: the runner ran out of memory on every tick.
    const asWritten = (job: KubeObject): KubeObject => {
      if (job.metadata.name !== TOY.name) return job;
      const patched = structuredClone(job) as KubeObject & {
        spec: { pytorchReplicaSpecs: { Worker: { replicas: number } } };
      };
      patched.spec.pytorchReplicaSpecs.Worker.replicas = 2 ** 31 - 1;
      return patched;
    };
    const cluster: ClusterClient = Object.assign(Object.create(null), {
      ...replaceable(sim),
      getJob: async (ref: Parameters<ClusterClient['getJob']>[0]) => asWritten(await sim.getJob(ref)),
      listJobs: async (kind: Parameters<ClusterClient['listJobs']>[0], namespace?: string) =>
        (await sim.listJobs(kind, namespace)).map(asWritten),
    });
    const started = performance.now();
    const result = await handleSchedule(scheduledEvent(), { ...deps, cluster });
    assert.ok(performance.now() - started < 10_000, 'one tick, not minutes');
    assert.deepEqual(result.errors, []);
    assert.match(result.outcomes.find(named('toy'))?.plan.reason ?? '', /keep 2147483647 workers/);
    assert.equal(result.outcomes.find(named('other'))?.applied, true);
  });
});
