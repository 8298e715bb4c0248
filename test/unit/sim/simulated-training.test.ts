import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { MissingMetricsError } from '../../../lib/errors.js';
import { SimulatedCluster, type SimulatedClusterOptions } from '../../../lib/sim/simulated-cluster.js';
import { type ContainerSizing, pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import { MEASURED_RESCALE_PAUSE_SECONDS } from '../../../lib/torchelastic/recommended-rendezvous.js';
import type { JobRef } from '../../../lib/types.js';
import { FIXED_APP_MODEL, fixedStepTime, GiB } from './fixed-app-model.js';

const SIZING: ContainerSizing = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };
const ONE_NODE = [{ name: 'node-a', gpus: 4, cpuMillis: 32_000, memoryBytes: 128 * GiB }];

function refOf(name: string): JobRef {
  return { kind: 'PyTorchJob', namespace: 'team-a', name };
}

function submit(
  sim: SimulatedCluster,
  name: string,
  options: {
    workers: number;
    sizing?: ContainerSizing;
    priorityClassName?: string;
    globalBatchSize?: number;
    backoffLimit?: number;
    targetSamples?: number;
    maxRestarts?: number;
  },
): JobRef {
  sim.submitJob(
    pytorchJobManifest({
      name,
      namespace: 'team-a',
      app: 'toy',
      workers: options.workers,
      minReplicas: 1,
      maxReplicas: 8,
      sizing: options.sizing ?? SIZING,
      localBatchSize: 32,
      targetSamples: options.targetSamples ?? 10_000_000,
      ...(options.priorityClassName ? { priorityClassName: options.priorityClassName } : {}),
      ...(options.globalBatchSize ? { globalBatchSize: options.globalBatchSize } : {}),
      ...(options.backoffLimit !== undefined ? { backoffLimit: options.backoffLimit } : {}),
      ...(options.maxRestarts !== undefined ? { maxRestarts: options.maxRestarts } : {}),
    }),
  );
  return refOf(name);
}

function cluster(extra: Partial<SimulatedClusterOptions> = {}): SimulatedCluster {
  return new SimulatedCluster({ seed: 42, apps: FIXED_APP_MODEL, ...extra });
}

async function pod(sim: SimulatedCluster, name: string): Promise<V1Pod | undefined> {
  return (await sim.listPods('team-a')).find((p) => p.metadata?.name === name);
}

describe('simulated training progress', () => {
  it('trains at K * m / stepTime once every worker runs', () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 2 });
    sim.step(120);
    const before = sim.jobStatus(ref).processedSamples;
    sim.step(600);
    const expected = (2 * 32) / fixedStepTime({ replicas: 2, nodes: 1, localBatchSize: 32 });
    assert.ok(Math.abs((sim.jobStatus(ref).processedSamples - before) / 600 - expected) < 1e-6);
    assert.ok(Math.abs((sim.timeline(ref).at(-1)?.throughput ?? 0) - expected) < 1e-6);
  });

  it('keeps the global batch fixed: m = global / K', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 4, globalBatchSize: 256 });
    sim.step(300);
    const samples = await sim.stepSamples(ref, 3600);
    assert.ok(samples.every((s) => s.replicas === 4 && s.localBatchSize === 64 && s.nodes === 1));
    const truth = fixedStepTime({ replicas: 4, nodes: 1, localBatchSize: 64 });
    assert.ok(samples.every((s) => Math.abs(s.stepTime / truth - 1) <= 0.03 + 1e-9));
  });

  it('counts distinct nodes of the workers in the placement', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 6 });
    sim.step(300);
    const [sample] = await sim.stepSamples(ref, 3600);
    assert.equal(sample?.nodes, 2);
  });

  it('charges the rescale cost on a worker-count change, and completes at the exact target', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 2, targetSamples: 400_000 });
    sim.step(600);
    const rate2 = (2 * 32) / fixedStepTime({ replicas: 2, nodes: 1, localBatchSize: 32 });
    const rate1 = (1 * 32) / fixedStepTime({ replicas: 1, nodes: 1, localBatchSize: 32 });
    const processed = sim.jobStatus(ref).processedSamples;
    assert.ok(Math.abs(processed - rate2 * (600 - 20)) < 1e-6, 'trains from the pod start on');
    await sim.patchJob(
      ref,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 1 }],
      {
        dryRun: false,
      },
    );
    sim.step(600);
    // The world lost a member: the scale-down cost, as measured (3.6 s), not the scale-up's.
    const down = sim.timing.scaleDownCostSeconds;
    assert.equal(down, MEASURED_RESCALE_PAUSE_SECONDS.recommended.down);
    const after = sim.jobStatus(ref).processedSamples - processed;
    // 3.6 s is not a binary fraction: sums of it round in the last bits.
    assert.ok(Math.abs(after - rate1 * (600 - down)) < 1e-3, `${after} vs ${rate1 * (600 - down)}`);
    sim.step(3 * 3600);
    const status = sim.jobStatus(ref);
    assert.equal(status.phase, 'Succeeded');
    assert.equal(status.processedSamples, 400_000);
    const expectedEnd =
      sim.jobStatus(ref).submittedAt + 1200 + (400_000 - processed - rate1 * (600 - down)) / rate1;
    assert.ok(Math.abs((status.finishedAt ?? 0) - expectedEnd) < 1e-3);
    assert.equal(status.jctSeconds, (status.finishedAt ?? 0) - status.submittedAt);
    assert.ok((await sim.listPods('team-a')).every((p) => p.status?.phase === 'Succeeded'));
  });

  it('charges growth the scale-up cost and a lost member the scale-down cost, and tells when the pause ended', async () => {
    const sim = cluster({ timing: { scaleUpCostSeconds: 10, scaleDownCostSeconds: 40 } });
    const ref = submit(sim, 'toy', { workers: 1 });
    sim.step(600);
    const grownAt = sim.now();
    const replicas = (to: number) => [
      { op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: to },
    ];
    await sim.patchJob(ref, replicas(2), { dryRun: false });
    assert.equal(await sim.firstStepAfterPause(ref, grownAt), undefined, 'not before the world re-formed');
    sim.step(600);
    // bound at once, running after the 20 s pod start, then the 10 s pause of a world that only gained one.
    const grown = await sim.firstStepAfterPause(ref, grownAt);
    assert.equal((grown ?? 0) - grownAt, 20 + 10);
    const shrunkAt = sim.now();
    await sim.patchJob(ref, replicas(1), { dryRun: false });
    sim.step(600);
    assert.equal(((await sim.firstStepAfterPause(ref, shrunkAt)) ?? 0) - shrunkAt, 40);
    assert.equal(sim.restartsSpent(ref), 1, 'the scale-down spent a restart, the growth none');
  });

  it('an elastic job trains on at its old size while the joining pod starts; a fixed-size one stalls', async () => {
    const timing = { scaleUpCostSeconds: 10, scaleDownCostSeconds: 40 };
    const rate = (k: number) => (k * 32) / fixedStepTime({ replicas: k, nodes: 1, localBatchSize: 32 });
    const grow = async (sim: SimulatedCluster, ref: JobRef) => {
      sim.step(600);
      const before = sim.jobStatus(ref).processedSamples;
      await sim.patchJob(
        ref,
        [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 2 }],
        { dryRun: false },
      );
      sim.step(600);
      return sim.jobStatus(ref).processedSamples - before;
    };
    const elastic = cluster({ timing });
    const gained = await grow(elastic, submit(elastic, 'toy', { workers: 1 }));
    // 20 s pod start at 1 worker, the 10 s pause, then 2 workers.
    const expected = rate(1) * 20 + rate(2) * (600 - 20 - 10);
    assert.ok(Math.abs(gained - expected) < 1e-6, `${gained} vs ${expected}`);

    const fixed = cluster({ timing });
    const manifest = pytorchJobManifest({
      name: 'fixed',
      namespace: 'team-a',
      app: 'toy',
      workers: 1,
      minReplicas: 1,
      maxReplicas: 8,
      sizing: SIZING,
      localBatchSize: 32,
      targetSamples: 10_000_000,
    });
    delete (manifest.spec as { elasticPolicy?: unknown }).elasticPolicy;
    fixed.submitJob(manifest);
    const stalled = await grow(fixed, refOf('fixed'));
    // No elasticPolicy: torchrun's world is fixed, nothing trains until every worker runs.
    const expectedFixed = rate(2) * (600 - 20 - 10);
    assert.ok(Math.abs(stalled - expectedFixed) < 1e-6, `${stalled} vs ${expectedFixed}`);
  });

  it('fails an elastic job whose agents run out of maxRestarts; growth spends none', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 1, maxRestarts: 1 });
    sim.step(300);
    const resize = async (to: number) => {
      await sim.patchJob(
        ref,
        [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: to }],
        { dryRun: false },
      );
      sim.step(300);
    };
    for (const to of [2, 3, 4]) await resize(to);
    assert.equal(sim.restartsSpent(ref), 0);
    await resize(3);
    assert.equal(sim.jobStatus(ref).phase, 'Running', 'restart 1 of maxRestarts 1 is allowed');
    assert.equal(sim.restartsSpent(ref), 1);
    await resize(2);
    const status = sim.jobStatus(ref);
    assert.equal(status.phase, 'Failed');
    assert.match(
      status.failureReason ?? '',
      /^MaxRestartsExceeded: .*restart 2 of elasticPolicy\.maxRestarts 1/,
    );
  });

  it('a world of new agents only starts with a full budget (every member replaced)', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 1, maxRestarts: 0 });
    sim.step(300);
    await sim.evictPod('team-a', 'toy-worker-0', { dryRun: false });
    sim.step(300);
    assert.equal(sim.jobStatus(ref).phase, 'Running', 'the replacement agent has spent nothing');
    assert.equal(sim.restartsSpent(ref), 0);
  });

  it('makes no progress while a worker cannot be scheduled (fixed world size)', () => {
    const sim = cluster({ nodes: ONE_NODE });
    const ref = submit(sim, 'toy', { workers: 5 });
    sim.step(300);
    assert.equal(sim.jobStatus(ref).processedSamples, 0);
    assert.equal(sim.jobStatus(ref).phase, 'Pending');
  });
});

describe('simulated failures', () => {
  it('OOM-kills a container limited below the app need, and fails the job past backoffLimit', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', {
      workers: 1,
      sizing: { ...SIZING, memoryBytes: 6 * GiB },
      backoffLimit: 2,
    });
    sim.step(90);
    const killed = await pod(sim, 'toy-worker-0');
    const status = killed?.status?.containerStatuses?.[0];
    assert.equal(status?.restartCount, 1);
    assert.equal(status?.lastState?.terminated?.reason, 'OOMKilled');
    assert.equal(status?.lastState?.terminated?.exitCode, 137);
    const oomEvents = sim
      .drainEvents()
      .filter(
        (e) =>
          e.object.kind === 'Pod' &&
          (e.object as V1Pod).status?.containerStatuses?.[0]?.lastState?.terminated?.reason === 'OOMKilled',
      );
    assert.ok(oomEvents.length >= 1);
    sim.step(600);
    const final = sim.jobStatus(ref);
    assert.equal(final.phase, 'Failed');
    assert.match(final.failureReason ?? '', /BackoffLimitExceeded/);
    assert.deepEqual(await sim.listPods('team-a'), []);
    const job = await sim.getJob(ref);
    const conditions = (job.status as { conditions: Array<{ type: string; status: string }> }).conditions;
    assert.ok(conditions.some((c) => c.type === 'Failed' && c.status === 'True'));
  });

  it('restarts an OOM-killed container at its old size; a recreated pod gets the raised limit', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 1, sizing: { ...SIZING, memoryBytes: 6 * GiB } });
    sim.step(85); // killed at 80 s, back-off until 90 s
    const resources = '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources';
    await sim.patchJob(
      ref,
      [
        { op: 'replace', path: `${resources}/limits/memory`, value: '12Gi' },
        { op: 'replace', path: `${resources}/requests/memory`, value: '12Gi' },
      ],
      { dryRun: false },
    );
    sim.step(10); // restarted in place: pod resources are immutable
    const restarted = await pod(sim, 'toy-worker-0');
    assert.equal(restarted?.status?.containerStatuses?.[0]?.restartCount, 1);
    assert.equal(restarted?.spec?.containers[0]?.resources?.limits?.memory, '6Gi');
    await sim.evictPod(ref.namespace, 'toy-worker-0', { dryRun: false });
    sim.step(1200);
    const recreated = await pod(sim, 'toy-worker-0');
    assert.equal(recreated?.spec?.containers[0]?.resources?.limits?.memory, '12Gi');
    assert.equal(recreated?.status?.containerStatuses?.[0]?.restartCount, 0);
    assert.equal(sim.jobStatus(ref).phase, 'Running');
  });

  it("places a pod on its template's preferred node when it fits there, first fit otherwise", async () => {
    const nodes = ['node-a', 'node-b', 'node-c'].map((name) => ({ ...ONE_NODE[0], name })) as typeof ONE_NODE;
    const sim = cluster({ nodes });
    const ref = submit(sim, 'near', { workers: 3 });
    const affinity = '/spec/pytorchReplicaSpecs/Worker/template/spec/affinity';
    const term = (operator: string, node: string, weight: number) => ({
      weight,
      preference: { matchFields: [{ key: 'metadata.name', operator, values: [node] }] },
    });
    await sim.patchJob(
      ref,
      [
        {
          op: 'add',
          path: affinity,
          value: {
            nodeAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                term('In', 'node-c', 50),
                // A term on node labels is not a node name: ignored, not read as one.
                {
                  weight: 100,
                  preference: { matchExpressions: [{ key: 'zone', operator: 'In', values: ['x'] }] },
                },
              ],
            },
          },
        },
      ],
      { dryRun: false },
    );
    submit(sim, 'filler', { workers: 2 });
    sim.step(10);
    const on = async (name: string) => (await pod(sim, name))?.spec?.nodeName;
    assert.deepEqual(
      [await on('near-worker-0'), await on('near-worker-1'), await on('near-worker-2')],
      ['node-c', 'node-c', 'node-c'],
    );
    assert.deepEqual([await on('filler-worker-0'), await on('filler-worker-1')], ['node-a', 'node-a']);
  });

  it('preempts lower-priority pods for a higher-priority pod, and the operator recreates them Pending', async () => {
    const sim = cluster({ nodes: ONE_NODE, priorityClasses: { 'production-high': 1000 } });
    const low = submit(sim, 'low', { workers: 4 });
    sim.step(120);
    assert.equal(sim.jobStatus(low).phase, 'Running');
    sim.drainEvents();
    const high = submit(sim, 'high', { workers: 1, priorityClassName: 'production-high' });
    sim.step(10);
    const preempted = sim
      .drainEvents()
      .map((e) => e.object as V1Pod)
      .filter((p) => p.kind === 'Pod' && p.status?.reason === 'Preempted');
    assert.equal(preempted.length, 1);
    assert.equal(preempted[0]?.status?.phase, 'Failed');
    assert.equal((await pod(sim, 'high-worker-0'))?.spec?.nodeName, 'node-a');
    assert.equal((await pod(sim, 'high-worker-0'))?.spec?.priority, 1000);
    sim.step(10);
    const victimName = preempted[0]?.metadata?.name ?? '';
    const recreated = await pod(sim, victimName);
    assert.equal(recreated?.status?.phase, 'Pending');
    assert.notEqual(recreated?.metadata?.uid, preempted[0]?.metadata?.uid);
    sim.step(60);
    assert.equal(sim.jobStatus(high).phase, 'Running');
    assert.equal(sim.jobStatus(low).phase, 'Restarting');
  });

  it('fails a job whose pod stays unschedulable while its peers wait, but only queues a job with no pod running', () => {
    const sim = cluster({ nodes: ONE_NODE });
    const partial = submit(sim, 'partial', { workers: 3, sizing: { ...SIZING, gpus: 2 } });
    const queued = submit(sim, 'queued', { workers: 1, sizing: { ...SIZING, gpus: 4 } });
    sim.step(590);
    assert.equal(sim.jobStatus(partial).phase, 'Pending');
    sim.step(60);
    assert.equal(sim.jobStatus(partial).phase, 'Failed');
    assert.match(sim.jobStatus(partial).failureReason ?? '', /PendingTimeout/);
    assert.notEqual(sim.jobStatus(queued).phase, 'Failed');
    sim.step(120);
    assert.equal(sim.jobStatus(queued).phase, 'Running', 'the failed job released the GPUs');
  });

  it('replaces an evicted pod and drops an injected straggler with it', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 3 });
    sim.step(120);
    sim.injectStraggler('team-a', 'toy-worker-1', 2);
    sim.step(300);
    const series = await sim.workerStepTimes(ref, 240);
    const mean = (w: number) => {
      const s = series.find((x) => x.worker === w)?.samples ?? [];
      return s.reduce((a, b) => a + b.stepTime, 0) / s.length;
    };
    assert.ok(mean(1) / mean(0) > 1.8);
    await sim.evictPod('team-a', 'toy-worker-1', { dryRun: false });
    assert.equal((await pod(sim, 'toy-worker-1'))?.status?.reason, 'Evicted');
    sim.step(300);
    const after = await sim.workerStepTimes(ref, 120);
    const ratio = (after[1]?.samples[0]?.stepTime ?? 0) / (after[0]?.samples[0]?.stepTime ?? 1);
    assert.ok(ratio < 1.1);
  });
});

describe('simulated metrics', () => {
  it('throws MissingMetricsError before a job trained, then reports usage near the real need', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', {
      workers: 2,
      sizing: { ...SIZING, cpuMillis: 16_000, memoryBytes: 32 * GiB },
    });
    await assert.rejects(sim.stepSamples(ref, 600), MissingMetricsError);
    await assert.rejects(sim.containerUsage(ref, 600), MissingMetricsError);
    assert.equal(await sim.samplesProcessed(ref), undefined);
    sim.step(300);
    const usage = await sim.containerUsage(ref, 600);
    assert.equal(usage.length, 2);
    for (const u of usage) {
      assert.ok(u.memoryBytes >= 0.9 * 8 * GiB && u.memoryBytes <= 8 * GiB);
      assert.ok(u.cpuMillis >= 0.85 * 4000 && u.cpuMillis <= 4000);
    }
    assert.ok(((await sim.samplesProcessed(ref)) ?? 0) > 0);
  });

  it("keeps a finished job's peak usage within the window, as Prometheus keeps a deleted pod's series", async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 2, targetSamples: 20_000 });
    sim.step(1200);
    assert.equal(sim.jobStatus(ref).phase, 'Succeeded');
    const finishedAt = sim.jobStatus(ref).finishedAt ?? 0;
    const usage = await sim.containerUsage(ref, 3600);
    assert.deepEqual(usage.map((u) => u.pod).sort(), ['toy-worker-0', 'toy-worker-1']);
    for (const u of usage) assert.ok(u.memoryBytes >= 0.9 * 8 * GiB && u.memoryBytes <= 8 * GiB);
    // Outside the window the ended pods are gone, as in a max_over_time query.
    sim.step(3600);
    const since = sim.now() - finishedAt;
    await assert.rejects(sim.containerUsage(ref, since - 60), MissingMetricsError);
  });

  it('samples at most once a minute per job', async () => {
    const sim = cluster();
    const ref = submit(sim, 'toy', { workers: 1 });
    sim.step(3600);
    const samples = await sim.stepSamples(ref, 3600);
    const gaps = samples.slice(1).map((s, i) => (s.at ?? 0) - (samples[i]?.at ?? 0));
    assert.ok(gaps.every((g) => g >= 60));
    assert.ok(samples.length >= 55);
  });

  it('replays identically for the same seed and differently for another', async () => {
    const run = async (seed: number) => {
      const sim = new SimulatedCluster({ seed, apps: FIXED_APP_MODEL });
      const ref = submit(sim, 'toy', { workers: 3 });
      submit(sim, 'other', { workers: 2, sizing: { ...SIZING, memoryBytes: 6 * GiB } });
      sim.step(1800);
      return JSON.stringify({
        samples: await sim.stepSamples(ref, 3600),
        usage: await sim.containerUsage(ref, 3600),
        statuses: sim.jobStatuses(),
        pods: await sim.listPods(undefined),
        events: sim.drainEvents(),
      });
    };
    assert.equal(await run(3), await run(3));
    assert.notEqual(await run(3), await run(4));
  });
});
