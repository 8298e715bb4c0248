// The leadership fence (lib/runner/fenced-cluster-client.ts) under the retrying client: no write attempt
// leaves a replica without its lease, whether the lease is lost before a write, between two attempts of a
// retried write, or while a request is in flight. A counting client stands in for the API server's door:
// it counts the write requests that would have been sent, and the writes that completed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob } from '../../../lib/actuator.js';
import type { ClusterClient, JsonPatchOp, WriteOptions } from '../../../lib/cluster/cluster-client.js';
import { RetryingClusterClient } from '../../../lib/cluster/retrying-cluster-client.js';
import { ApiError, ConflictError, ForbiddenError, NotFoundError } from '../../../lib/errors.js';
import {
  LeaderFencedClusterClient,
  type WriteFence,
  type WriteLease,
} from '../../../lib/runner/fenced-cluster-client.js';
import { LeaderElector } from '../../../lib/runner/leader-election.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { JobRef } from '../../../lib/types.js';
import { harness, TOY, toyJob } from '../functions/handler-harness.js';
import { MemoryLease } from './memory-lease.js';

const quiet = { info() {}, warn() {}, error() {} };

/** A fence flipped by the test: the lease is held until lose() is called. */
class ManualFence implements WriteFence {
  readonly description = 'lease test/leader';
  private controller = new AbortController();
  held = true;
  remainingMs = 8_000;
  admit(): WriteLease | undefined {
    return this.held ? { signal: this.controller.signal, remainingMs: this.remainingMs } : undefined;
  }
  lose(): void {
    this.held = false;
    this.controller.abort(new Error('lease lost'));
  }
}

type Hook = (options: WriteOptions) => Promise<void> | void;

/**
 * The simulated API server behind a door that counts write requests sent and completed. `beforeWrite` runs
 * when a write request is sent (a test makes it fail, or hang until aborted).
 */
function countingDoor(sim: SimulatedCluster, beforeWrite: Hook = () => {}) {
  const counts = { sent: 0, completed: 0, signals: [] as AbortSignal[], timeouts: [] as number[] };
  const write =
    <A extends unknown[], T>(run: (...args: A) => Promise<T>) =>
    async (options: WriteOptions, ...args: A): Promise<T> => {
      counts.sent++;
      if (options.signal) counts.signals.push(options.signal);
      if (options.timeoutMs !== undefined) counts.timeouts.push(options.timeoutMs);
      await beforeWrite(options);
      const out = await run(...args);
      counts.completed++;
      return out;
    };
  const client: ClusterClient = {
    getJob: (ref) => sim.getJob(ref),
    listJobs: (kind, ns) => sim.listJobs(kind, ns),
    listPods: (ns, selector) => sim.listPods(ns, selector),
    listNodes: () => sim.listNodes(),
    getConfigMap: (ns, name) => sim.getConfigMap(ns, name),
    listWorkloads: (ns, selector) => sim.listWorkloads(ns, selector),
    getLocalQueue: (ns, name) => sim.getLocalQueue(ns, name),
    getClusterQueue: (name) => sim.getClusterQueue(name),
    patchJob: (ref, patch, options) => write(() => sim.patchJob(ref, patch, options))(options),
    evictPod: (ns, name, options) => write(() => sim.evictPod(ns, name, options))(options),
    createEvent: (event, options) => write(() => sim.createEvent(event, options))(options),
    putConfigMap: (ns, name, data, rv, options) =>
      write(() => sim.putConfigMap(ns, name, data, rv, options))(options),
    getJobState: (ref) => sim.getJobState(ref),
    listJobStates: () => sim.listJobStates(),
    putJobState: (job, status, current, options) =>
      write(() => sim.putJobState(job, status, current, options))(options),
    listTrainingAutoscalers: (ns) => sim.listTrainingAutoscalers(ns),
    putTrainingAutoscalerStatus: (current, _status, options) => write(async () => current)(options),
  };
  return { client, counts };
}

/** The runner's stack: retries over the fence over the API server. */
function stack(door: ClusterClient, fence: WriteFence, onRetry?: () => void) {
  return new RetryingClusterClient(new LeaderFencedClusterClient(door, fence), {
    ...(onRetry ? { onRetry } : {}),
    maxAttempts: 6,
    baseDelayMs: 5,
    maxDelayMs: 5,
    attemptTimeoutMs: 1_000,
    random: () => 1,
  });
}

const addTwoWorkers = (s: { view: { roles: { replicas: number }[] } }) => {
  const from = s.view.roles[0]?.replicas ?? 1;
  return {
    ref: TOY,
    policy: 'tuning' as const,
    reason: 'more',
    changes: [{ kind: 'replicas' as const, role: 'Worker' as const, from, to: from + 2 }],
  };
};

function actuatorDeps(cluster: ClusterClient, sim: SimulatedCluster): ActuatorDeps {
  return { cluster, clock: sim.clock.now, dryRun: false, logger: quiet, namespaceAllowlist: [] };
}

const workersOf = async (sim: SimulatedCluster) =>
  (
    sim.getJob(TOY).then((j) => j.spec) as Promise<{ pytorchReplicaSpecs: { Worker: { replicas: number } } }>
  ).then((s) => s.pytorchReplicaSpecs.Worker.replicas);

describe('LeaderFencedClusterClient', () => {
  it('sends no write of any kind without the lease, and still reads', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const policy = {
      apiVersion: 'trainscaler.io/v1alpha1',
      kind: 'TrainingAutoscaler',
      metadata: { name: 'p', namespace: 'team-a' },
      spec: { targetRef: { kind: 'PyTorchJob', name: 'toy' } },
    };
    sim.applyTrainingAutoscaler(policy);
    const { client, counts } = countingDoor(sim);
    const fence = new ManualFence();
    fence.lose();
    const fenced = new LeaderFencedClusterClient(client, fence);
    const off = { dryRun: false };
    const patch: JsonPatchOp[] = [
      { op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
    ];
    const involved = { ref: TOY, uid: 'u', apiVersion: 'kubeflow.org/v1' };
    const writes: [string, () => Promise<unknown>][] = [
      ['patch', () => fenced.patchJob(TOY, patch, off)],
      ['evict', () => fenced.evictPod('team-a', 'toy-worker-0', off)],
      ['event', () => fenced.createEvent({ involved, type: 'Normal', reason: 'R', message: 'm' }, off)],
      ['configmap', () => fenced.putConfigMap('trainscaler-system', 'p', {}, undefined, off)],
      ['state', () => fenced.putJobState(involved, {}, undefined, off)],
      ['policy status', () => fenced.putTrainingAutoscalerStatus(policy, {}, off)],
    ];
    const messages: string[] = [];
    for (const [what, write] of writes) {
      await assert.rejects(write, (e: unknown) => {
        assert.ok(e instanceof ForbiddenError, what);
        messages.push(e.message);
        return true;
      });
    }
    const refused = ': this replica does not hold lease test/leader';
    assert.deepEqual(messages, [
      `not allowed to patch PyTorchJob team-a/toy${refused}`,
      `not allowed to evict pod team-a/toy-worker-0${refused}`,
      `not allowed to create event for team-a/toy${refused}`,
      `not allowed to write configmap trainscaler-system/p${refused}`,
      `not allowed to write state of PyTorchJob team-a/toy${refused}`,
      `not allowed to write status of TrainingAutoscaler team-a/p${refused}`,
    ]);
    assert.equal(counts.sent, 0);
    assert.deepEqual(
      (await fenced.listTrainingAutoscalers('team-a')).map((p) => p.metadata.name),
      ['p'],
    );
    assert.equal((await fenced.getJob(TOY)).metadata.name, 'toy');
    assert.equal(await fenced.getJobState(TOY), undefined);
    assert.deepEqual(await fenced.listJobStates(), []);
  });

  it('reads pass through whatever the lease; a ConfigMap write passes with it', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const { client, counts } = countingDoor(sim);
    const fence = new ManualFence();
    const fenced = new LeaderFencedClusterClient(client, fence);
    const written = await fenced.putConfigMap('trainscaler-system', 'p', { a: '1' }, undefined, {
      dryRun: false,
    });
    assert.equal(written.data?.a, '1');
    assert.equal(counts.completed, 1);
    fence.lose();
    assert.equal((await fenced.getConfigMap('trainscaler-system', 'p'))?.data?.a, '1');
    assert.equal((await fenced.listJobs('PyTorchJob')).length, 1);
    assert.ok((await fenced.listNodes()).length > 0);
    assert.ok(Array.isArray(await fenced.listPods('team-a')));
  });

  it('refuses a write when the lease has no time left for it', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const { client, counts } = countingDoor(sim);
    const fence = new ManualFence();
    fence.remainingMs = 0;
    const outcome = actOnJob(TOY, addTwoWorkers, actuatorDeps(stack(client, fence), sim));
    await assert.rejects(outcome, ForbiddenError);
    assert.equal(counts.sent, 0);
  });

  it('bounds each write by the lease: its signal and the smaller of its time limits', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const { client, counts } = countingDoor(sim);
    const fence = new ManualFence();
    fence.remainingMs = 700;
    const outcome = await actOnJob(TOY, addTwoWorkers, actuatorDeps(stack(client, fence), sim));
    assert.equal(outcome.applied, true);
    assert.equal(counts.sent, 3, 'the patch, the job state and its audit Event');
    assert.deepEqual(
      counts.timeouts,
      [700, 700, 700],
      'the lease (700 ms) is shorter than the attempt (1000 ms)',
    );
    fence.remainingMs = 5_000;
    // No such pod: the request is still sent, with its limits.
    const caller = new AbortController();
    await assert.rejects(
      new LeaderFencedClusterClient(client, fence).evictPod('team-a', 'x', {
        dryRun: true,
        timeoutMs: 300,
        signal: caller.signal,
      }),
      NotFoundError,
      "the API server's own answer passes unchanged while the lease holds",
    );
    assert.equal(counts.timeouts.at(-1), 300, "the caller's shorter limit is kept");
    assert.ok(counts.signals.every((s) => !s.aborted));
    caller.abort();
    assert.equal(counts.signals.at(-1)?.aborted, true, "the caller's signal still cancels the request");
    assert.equal(counts.signals.filter((x) => x.aborted).length, 1, 'the lease is still held');
    fence.lose();
    assert.ok(
      counts.signals.every((s) => s.aborted),
      'every signal a write was sent with aborts when the lease is lost',
    );
  });

  it('a lease lost between two attempts of a retried patch: the retry is never sent', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const fence = new ManualFence();
    const { client, counts } = countingDoor(sim, () => {
      // The first attempt is answered 503 (not processed).
      if (counts.sent === 1) throw new ApiError('patch', 503, 'unavailable');
    });
    // The lease is lost in the backoff before the retry.
    const cluster = stack(client, fence, () => fence.lose());
    const outcome = actOnJob(TOY, addTwoWorkers, actuatorDeps(cluster, sim));
    await assert.rejects(outcome, ForbiddenError);
    assert.equal(counts.sent, 1, 'only the attempt sent while leading');
    assert.equal(counts.completed, 0);
    assert.equal(await workersOf(sim), 1, 'nothing written');
  });

  it('a lease lost while a request is in flight aborts it: no write completes and none is retried', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const fence = new ManualFence();
    const { client, counts } = countingDoor(
      sim,
      (options) =>
        // The API server has not answered yet; the request ends only when its signal aborts.
        new Promise<void>((_, reject) => {
          options.signal?.addEventListener('abort', () =>
            reject(new ApiError('patch', undefined, 'aborted')),
          );
          setTimeout(() => fence.lose(), 10);
        }),
    );
    const outcome = actOnJob(TOY, addTwoWorkers, actuatorDeps(stack(client, fence), sim));
    await assert.rejects(outcome, (e: unknown) => {
      assert.ok(e instanceof ForbiddenError);
      assert.equal(
        e.message,
        'not allowed to patch PyTorchJob team-a/toy: lease test/leader was lost while the request was in flight',
      );
      return true;
    });
    assert.equal(counts.sent, 1);
    assert.equal(counts.completed, 0);
    assert.equal(await workersOf(sim), 1);
  });
});

describe('LeaderElector as the write fence', () => {
  function elector() {
    const clock = { now: 0 };
    const e = new LeaderElector({
      lock: new MemoryLease(),
      identity: 'a',
      clock: () => clock.now,
      timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 5_000 },
    });
    return { e, clock };
  }

  it('admits writes only until renewDeadline after the renewal was sent, for the time left until then', async () => {
    const { e, clock } = elector();
    assert.equal(e.admit(), undefined, 'not before leading');
    clock.now = 1_000;
    await e.tick();
    clock.now = 4_000;
    assert.equal(e.admit()?.remainingMs, 7_000, 'renewed at 1 s: may write until 11 s');
    clock.now = 10_999;
    assert.equal(e.admit()?.remainingMs, 1);
    clock.now = 11_000;
    assert.equal(e.admit(), undefined, 'renewDeadline passed');
    assert.equal(e.description, 'lease test/trainscaler-leader');
  });

  it('aborts admitted writes when another replica is seen holding the lease, and admits none after', async () => {
    const lease = new MemoryLease();
    const clock = { now: 0 };
    const make = (identity: string) =>
      new LeaderElector({ lock: lease, identity, clock: () => clock.now, random: () => 0 });
    const a = make('a');
    await a.tick();
    const admitted = a.admit();
    assert.ok(admitted);
    // a stalls; b takes over after the lease duration; a then sees b on the Lease.
    const b = make('b');
    await b.tick();
    clock.now = 16_000;
    await b.tick();
    assert.equal(b.isLeader(), true);
    assert.equal(
      admitted.signal.aborted,
      false,
      'a has not looked yet (its deadline timer runs in real time)',
    );
    await a.tick();
    assert.equal(admitted.signal.aborted, true);
    assert.equal(a.admit(), undefined);
  });

  it('aborts the signal of every admitted write when leadership ends', async () => {
    const { e } = elector();
    await e.tick();
    const lease = e.admit();
    assert.ok(lease && !lease.signal.aborted);
    await e.stop();
    assert.equal(lease.signal.aborted, true);
  });
});

describe('RetryingClusterClient: the job state', () => {
  it('reads retried on transient failures; a state write retried on transient failures, never on a conflict', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    const failures: Error[] = [new ApiError('get', 503, 'busy'), new ApiError('list', undefined, 'reset')];
    const writeFailures: Error[] = [new ApiError('put', 500, 'lost'), new ConflictError('state')];
    let puts = 0;
    const flaky: ClusterClient = Object.assign(Object.create(null) as ClusterClient, {
      getJobState: async (ref: JobRef) => {
        const f = failures.shift();
        if (f) throw f;
        return sim.getJobState(ref);
      },
      listJobStates: async () => {
        const f = failures.shift();
        if (f) throw f;
        return sim.listJobStates();
      },
      putJobState: async (...args: Parameters<ClusterClient['putJobState']>) => {
        puts++;
        const f = writeFailures.shift();
        if (f) throw f;
        return sim.putJobState(...args);
      },
    });
    const retrying = new RetryingClusterClient(flaky, { baseDelayMs: 1, maxDelayMs: 2, maxAttempts: 3 });
    assert.equal(await retrying.getJobState(TOY), undefined);
    assert.deepEqual(await retrying.listJobStates(), []);
    const job = await sim.getJob(TOY);
    const identity = { ref: TOY, uid: job.metadata.uid ?? '', apiVersion: job.apiVersion };
    await assert.rejects(retrying.putJobState(identity, {}, undefined, { dryRun: false }), ConflictError);
    assert.equal(puts, 2, 'the 500 retried once; the 409 handed back');
    const written = await retrying.putJobState(identity, { oomCount: 1 }, undefined, { dryRun: false });
    assert.deepEqual(written.status, { oomCount: 1 });
    failures.push(new ApiError('get', 403, 'no'));
    await assert.rejects(retrying.getJobState(TOY), ApiError);
  });
});

describe('LeaderFencedClusterClient: reads and in-place resizes', () => {
  /** Records each call's method, arguments and options; answers with a marker per method. */
  function recorder() {
    const calls: { method: string; args: unknown[] }[] = [];
    const answer =
      (method: string) =>
      async (...args: unknown[]): Promise<never> => {
        calls.push({ method, args });
        return `${method} answer` as never;
      };
    const client: ClusterClient = {
      getJob: answer('getJob'),
      listJobs: answer('listJobs'),
      listPods: answer('listPods'),
      listNodes: answer('listNodes'),
      getConfigMap: answer('getConfigMap'),
      listWorkloads: answer('listWorkloads'),
      getLocalQueue: answer('getLocalQueue'),
      getClusterQueue: answer('getClusterQueue'),
      servesPodResize: answer('servesPodResize'),
      resizePod: answer('resizePod'),
      patchJob: answer('patchJob'),
      evictPod: answer('evictPod'),
      createEvent: answer('createEvent'),
      putConfigMap: answer('putConfigMap'),
      getJobState: answer('getJobState'),
      listJobStates: answer('listJobStates'),
      putJobState: answer('putJobState'),
      listTrainingAutoscalers: answer('listTrainingAutoscalers'),
      putTrainingAutoscalerStatus: answer('putTrainingAutoscalerStatus'),
    };
    return { client, calls };
  }

  it("passes every read through unfenced, with its arguments and its attempt's bounds", async () => {
    const { client, calls } = recorder();
    const fence = new ManualFence();
    fence.lose();
    const fenced = new LeaderFencedClusterClient(client, fence);
    const o = { signal: new AbortController().signal, timeoutMs: 250 };
    const answers = [
      await fenced.getJob(TOY, o),
      await fenced.listJobs('TFJob', 'ns', o),
      await fenced.listPods('ns', 'a=b', o),
      await fenced.listNodes(o),
      await fenced.getConfigMap('ns', 'cm', o),
      await fenced.listWorkloads('ns', 'c=d', o),
      await fenced.getLocalQueue('ns', 'lq', o),
      await fenced.getClusterQueue('cq', o),
      await fenced.servesPodResize(o),
    ];
    assert.deepEqual(
      calls.map((c) => [c.method, ...c.args]),
      [
        ['getJob', TOY, o],
        ['listJobs', 'TFJob', 'ns', o],
        ['listPods', 'ns', 'a=b', o],
        ['listNodes', o],
        ['getConfigMap', 'ns', 'cm', o],
        ['listWorkloads', 'ns', 'c=d', o],
        ['getLocalQueue', 'ns', 'lq', o],
        ['getClusterQueue', 'cq', o],
        ['servesPodResize', o],
      ],
    );
    assert.deepEqual(
      answers,
      calls.map((c) => `${c.method} answer`),
    );
    const { servesPodResize: _, ...cannot } = client;
    assert.equal(await new LeaderFencedClusterClient(cannot, fence).servesPodResize(), false);
  });

  it('fences an in-place resize like any write; refuses one the inner client cannot send', async () => {
    const { client, calls } = recorder();
    const fence = new ManualFence();
    fence.remainingMs = 600;
    const fenced = new LeaderFencedClusterClient(client, fence);
    const patch: JsonPatchOp[] = [{ op: 'replace', path: '/spec/containers/0/resources', value: {} }];
    assert.equal(await fenced.resizePod('ns', 'p', patch, { dryRun: true }), 'resizePod answer');
    const [ns, name, sent, options] = calls[0]?.args ?? [];
    assert.deepEqual([ns, name, sent], ['ns', 'p', patch]);
    assert.equal((options as WriteOptions).timeoutMs, 600);
    assert.equal((options as WriteOptions).dryRun, true);
    fence.lose();
    await assert.rejects(
      fenced.resizePod('ns', 'p', patch, { dryRun: false }),
      (e: unknown) =>
        e instanceof ForbiddenError &&
        e.message === 'not allowed to resize pod ns/p: this replica does not hold lease test/leader',
    );
    assert.equal(calls.length, 1);
    const { resizePod: _, ...cannot } = client;
    assert.throws(
      () =>
        new LeaderFencedClusterClient(cannot, new ManualFence()).resizePod('ns', 'p', patch, {
          dryRun: false,
        }),
      /this cluster client cannot resize pods in place/,
    );
  });

  it('lists TrainingAutoscalers unfenced (none from a client without them); fences their status writes', async () => {
    const { client, calls } = recorder();
    const fence = new ManualFence();
    const fenced = new LeaderFencedClusterClient(client, fence);
    const o = { timeoutMs: 250 };
    assert.equal(await fenced.listTrainingAutoscalers('ns', o), 'listTrainingAutoscalers answer');
    assert.deepEqual(calls.at(-1)?.args, ['ns', o]);
    const policy = {
      apiVersion: 'trainscaler.io/v1alpha1',
      kind: 'TrainingAutoscaler',
      metadata: { name: 'p' },
    };
    assert.equal(
      await fenced.putTrainingAutoscalerStatus(policy, { ready: true }, { dryRun: false }),
      'putTrainingAutoscalerStatus answer',
    );
    assert.deepEqual(calls.at(-1)?.args.slice(0, 2), [policy, { ready: true }]);
    fence.lose();
    await assert.rejects(
      fenced.putTrainingAutoscalerStatus(
        { ...policy, metadata: { name: 'p', namespace: 'team-a' } },
        {},
        { dryRun: false },
      ),
      (e: unknown) =>
        e instanceof ForbiddenError &&
        e.message ===
          'not allowed to write status of TrainingAutoscaler team-a/p: this replica does not hold lease test/leader',
    );
    assert.equal(calls.length, 2);
    const { listTrainingAutoscalers: _, putTrainingAutoscalerStatus: __, ...without } = client;
    const bare = new LeaderFencedClusterClient(without, new ManualFence());
    assert.deepEqual(await bare.listTrainingAutoscalers(), []);
    assert.throws(
      () => bare.putTrainingAutoscalerStatus(policy, {}, { dryRun: false }),
      /this cluster client cannot write TrainingAutoscaler status/,
    );
  });

  it('a refusal while the lease holds is passed on as it is, and a write without limits gets the lease', async () => {
    const refusal = new ApiError('evict', 429, 'budget');
    const { client } = recorder();
    const seen: WriteOptions[] = [];
    const fenced = new LeaderFencedClusterClient(
      {
        ...client,
        evictPod: async (_ns, _name, options) => {
          seen.push(options);
          throw refusal;
        },
      },
      new ManualFence(),
    );
    await assert.rejects(fenced.evictPod('ns', 'p', { dryRun: false }), (e) => e === refusal);
    assert.equal(seen[0]?.timeoutMs, 8_000, 'no limit of its own: the lease');
    assert.equal(seen[0]?.signal?.aborted, false);
  });
});
