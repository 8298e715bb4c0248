import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../../functions/alarm.js';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps, HandlerResult } from '../../../functions/handler-deps.js';
import { handleSchedule } from '../../../functions/schedule.js';
import { handleSubmit } from '../../../functions/submit.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { recordRun } from '../../../lib/decisions/profile-store.js';
import { ApiError, ConflictError, UnsupportedJobKindError, ValidationError } from '../../../lib/errors.js';
import { alertmanagerWebhook, scheduledEvent } from '../../fixtures/payloads.js';
import { seedJobState } from '../../support/job-states.js';
import { fixedStepTime } from '../sim/fixed-app-model.js';
import { deliverEvents, GiB, harness, TOY, toyJob, writesSince } from './handler-harness.js';

const alarmFor = (name = 'toy') => alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name }]);

function workers(job: { spec?: unknown }): number | undefined {
  return (job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }).pytorchReplicaSpecs.Worker
    .replicas;
}

function memoryLimit(job: { spec?: unknown }): string | undefined {
  const spec = job.spec as {
    pytorchReplicaSpecs: {
      Worker: { template: { spec: { containers: { resources: { limits: { memory: string } } }[] } } };
    };
  };
  return spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]?.resources.limits.memory;
}

/**
 * Workers a one-worker toy job gains from one trigger after `seconds` of samples, when its signature's profile
 * holds earlier runs at `profiled` sizes stepping `slower` times the toy's true step time (none: no profile).
 */
async function grownWithProfile(
  trigger: (deps: HandlerDeps) => Promise<HandlerResult>,
  seconds: number,
  profiled: number[],
  slower: number,
  profiledIn = TOY.namespace,
): Promise<{ grown: number; logged: string[] }> {
  const { sim, deps, logged } = harness();
  if (profiled.length > 0) {
    const samples = profiled.map((replicas) => {
      const placement = { replicas, nodes: Math.ceil(replicas / 4), localBatchSize: 32 };
      return { ...placement, stepTime: slower * fixedStepTime(placement) };
    });
    await recordRun(
      sim,
      deps.profiles,
      { namespace: profiledIn, signature: 'toy', samples, usage: [] },
      sim.clock.now(),
      false,
    );
  }
  sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
  sim.step(seconds);
  const result = await trigger(deps);
  assert.deepEqual(result.errors, []);
  return { grown: (workers(await sim.getJob(TOY)) ?? 0) - 1, logged };
}

describe('alarm handler', () => {
  it("tunes a job seen at one size with what its signature's profile measured, where it agrees", async () => {
    const grownBy = (profiled: number[], slower = 1) =>
      grownWithProfile((deps) => handleAlarm(alarmFor(), deps), 900, profiled, slower);
    assert.equal((await grownBy([])).grown, 1);
    assert.equal((await grownBy([1, 2, 4, 8])).grown, 3);
    const elsewhere = await grownBy([1, 2, 4, 8], 2);
    assert.equal(elsewhere.grown, 1);
    assert.ok(
      elsewhere.logged.some((l) =>
        /^debug profile left out of the fit .*PyTorchJob team-a\/toy.*the profile measured/.test(l),
      ),
      elsewhere.logged.join('\n'),
    );
  });

  it("leaves out another namespace's profile of the same signature (a tenant may set any signature)", async () => {
    const grownBy = (profiledIn: string) =>
      grownWithProfile((deps) => handleAlarm(alarmFor(), deps), 900, [1, 2, 4, 8], 1, profiledIn);
    assert.equal((await grownBy('team-b')).grown, 1);
    assert.equal((await grownBy(TOY.namespace)).grown, 3);
  });

  it("tunes on the job's own samples when the profile store cannot be read, and says so", async () => {
    const { sim, deps, logged } = harness();
    sim.getConfigMap = async () => {
      throw new ApiError('get ConfigMap trainscaler-system/trainscaler-profiles', 403, 'forbidden');
    };
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    sim.step(900);
    const result = await handleAlarm(alarmFor(), deps);
    assert.deepEqual(result.errors, []);
    assert.equal(workers(await sim.getJob(TOY)), 2);
    assert.ok(logged.some((l) => l.startsWith('warn profile store unreadable: fitting without it')));
  });

  it('scales a job that would gain, records the decision on the job and as an Event', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900); // 15 minutes of samples at one worker
    const before = await sim.getJob(TOY);
    const result = await handleAlarm(alarmFor(), deps);
    assert.equal(result.errors.length, 0);
    const [outcome] = result.outcomes;
    assert.ok(outcome?.applied, outcome?.plan.reason);
    assert.equal(outcome.plan.policy, 'tuning');
    const after = await sim.getJob(TOY);
    assert.ok((workers(after) ?? 0) > (workers(before) ?? 0), 'more workers');
    const record = JSON.parse(after.metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}');
    assert.equal(record.id, outcome.decisionId);
    assert.equal(record.reason, outcome.plan.reason);
    assert.deepEqual(record.changes[0], { kind: 'replicas', role: 'Worker', from: 1, to: workers(after) });
    const events = sim.recordedEvents().filter((e) => e.involvedObject.name === 'toy');
    assert.equal(events.length, 1);
    assert.equal(events[0]?.reason, 'TrainscalerTuning');
    assert.equal(events[0]?.message, outcome.plan.reason);
  });

  it('a duplicate alarm right after does not write again (cool-down recorded on the job)', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    await handleAlarm(alarmFor(), deps);
    const mark = sim.writeLog().length;
    const again = await handleAlarm(alarmFor(), deps);
    assert.equal(again.outcomes[0]?.applied, false);
    assert.match(again.outcomes[0]?.plan.reason ?? '', /cool-down/);
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('rejects a malformed alarm naming the field, before any read or write', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    const mark = sim.writeLog().length;
    const bad = alarmFor();
    (bad.alerts[0]?.labels as Record<string, string>).job_kind = 'MPIJob';
    await assert.rejects(
      handleAlarm(bad, deps),
      (e: unknown) => e instanceof ValidationError && e.field === '/alerts/0/labels/job_kind',
    );
    await assert.rejects(handleAlarm({ version: '4' }, deps), ValidationError);
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('never grows a job without step-time samples on an alert: a keep saying what is missing', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(10); // no training yet: no samples
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarmFor(), deps);
    assert.deepEqual(result.errors, []);
    const [outcome] = result.outcomes;
    assert.equal(outcome?.skipped, 'no-change');
    assert.deepEqual(outcome?.plan.changes, []);
    assert.match(
      outcome?.plan.reason ?? '',
      /^keep \d+ workers?: no step-time samples: no sidecar series for this job$/,
    );
    assert.match(outcome?.plan.details?.join(' ') ?? '', /add the trainscaler sidecar/);
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('tells a sidecar that reports no step from no sidecar at all', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(10);
    deps.metrics = {
      stepSamples: async () => [],
      containerUsage: (ref, window) => sim.containerUsage(ref, window),
      workerStepTimes: (ref, window) => sim.workerStepTimes(ref, window),
      samplesProcessed: async () => 0, // the sidecar's counter, at 0 before the first step
    };
    const result = await handleAlarm(alarmFor(), deps);
    assert.match(
      result.outcomes[0]?.plan.reason ?? '',
      /no step-time samples: its sidecar reports no training step yet$/,
    );
  });

  it('reports an unknown job as NOT_FOUND and still handles the other jobs of the webhook', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    const hook = alertmanagerWebhook([
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'ghost' },
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' },
    ]);
    // As Prometheus does (the simulator would throw NotFoundError itself): no series for an unknown job.
    deps.metrics = {
      stepSamples: async (ref, window) => (ref.name === 'ghost' ? [] : sim.stepSamples(ref, window)),
      containerUsage: (ref, window) => sim.containerUsage(ref, window),
      workerStepTimes: (ref, window) => sim.workerStepTimes(ref, window),
      samplesProcessed: (ref) => sim.samplesProcessed(ref),
    };
    const result = await handleAlarm(hook, deps);
    assert.equal(result.errors[0]?.ref.name, 'ghost');
    assert.equal(result.errors[0]?.code, 'NOT_FOUND', 'not MISSING_METRICS: the job does not exist');
    assert.equal(result.outcomes[0]?.ref.name, 'toy');
  });

  it('an API error on the write is reported with nothing changed', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    const before = await sim.getJob(TOY);
    sim.failNextWrite(new ApiError('patch PyTorchJob team-a/toy', 500, 'etcdserver: request timed out'));
    const result = await handleAlarm(alarmFor(), deps);
    assert.equal(result.errors[0]?.code, 'API_ERROR');
    assert.match(result.errors[0]?.message ?? '', /HTTP 500/);
    const after = await sim.getJob(TOY);
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
  });

  it('on a 409 it re-reads and recomputes, then writes once', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    sim.failNextWrite(new ConflictError('PyTorchJob team-a/toy'));
    const result = await handleAlarm(alarmFor(), deps);
    const [outcome] = result.outcomes;
    assert.equal(outcome?.applied, true);
    assert.equal(outcome?.conflicts, 1);
    assert.equal(
      sim.writeLog().filter((w) => w.verb === 'patch' && w.target.endsWith('team-a/toy')).length,
      1,
    );
  });

  it('dry-run computes the plan and writes nothing: resourceVersion unchanged, no Event', async () => {
    const { sim, deps } = harness({ dryRun: true });
    sim.submitJob(toyJob());
    sim.step(900);
    const before = await sim.getJob(TOY);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarmFor(), deps);
    const [outcome] = result.outcomes;
    assert.equal(outcome?.skipped, 'dry-run');
    assert.ok((outcome?.patch?.length ?? 0) > 0, 'the patch it would send is reported');
    assert.equal((await sim.getJob(TOY)).metadata.resourceVersion, before.metadata.resourceVersion);
    assert.deepEqual(writesSince(sim, mark), []);
    assert.equal(sim.recordedEvents().length, 0);
  });

  it('leaves jobs annotated managed=false alone', async () => {
    const { sim, deps } = harness();
    const job = toyJob();
    job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'false' };
    sim.submitJob(job);
    sim.step(900);
    const mark = sim.writeLog().length;
    const result = await handleAlarm(alarmFor(), deps);
    assert.equal(result.outcomes[0]?.skipped, 'not-managed');
    assert.deepEqual(writesSince(sim, mark), []);
  });
});

describe('cluster-event handler', () => {
  it('raises memory of an OOM-killed job once, recreates the pods, and the job then trains', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 2, sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 6 * GiB } })); // app needs 8 GiB
    let raised = 0;
    for (let i = 0; i < 30; i++) {
      sim.step(10);
      for (const result of await deliverEvents(sim, deps)) {
        for (const o of result.outcomes)
          if (o.applied && o.plan.changes.some((c) => c.kind === 'resources')) raised++;
      }
    }
    assert.equal(raised, 1, 'one raise for one OOM kill of two pods');
    const job = await sim.getJob(TOY);
    assert.equal(memoryLimit(job), '9Gi');
    assert.equal(sim.jobStatus(TOY).phase, 'Running');
    assert.ok(sim.recordedEvents().some((e) => e.reason === 'TrainscalerFault' && e.type === 'Warning'));
  });

  it('rejects an unknown object kind with the field, and ignores pods of no job', async () => {
    const { sim, deps } = harness();
    const mark = sim.writeLog().length;
    await assert.rejects(
      handleClusterEvent(
        { type: 'ADDED', object: { kind: 'Deployment', metadata: { name: 'x', namespace: 'a' } } },
        deps,
      ),
      (e: unknown) => e instanceof ValidationError && e.field === '/object/kind',
    );
    const result = await handleClusterEvent(
      { type: 'MODIFIED', object: { kind: 'Pod', metadata: { name: 'x', namespace: 'a' } } },
      deps,
    );
    assert.match(result.ignored ?? '', /belongs to no job/);
    assert.deepEqual(writesSince(sim, mark), []);
  });
});

describe('submit handler', () => {
  it('clamps a submitted job into its bounds and records why', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 4 }));
    const result = await handleSubmit({ kind: 'PyTorchJob', namespace: 'team-a', name: 'toy' }, deps);
    assert.equal(result.outcomes[0]?.applied, true, result.outcomes[0]?.plan.reason);
    assert.equal(workers(await sim.getJob(TOY)), 4);
    const plan = result.outcomes[0]?.plan;
    assert.match([plan?.reason, ...(plan?.details ?? [])].join('; '), /bounds \[1, 4\]/);
  });

  it("sizes a new job from its own namespace's profile of the signature, never another's", async () => {
    const reasonWithProfileIn = async (profiledIn: string) => {
      const { sim, deps } = harness();
      const samples = [1, 2, 4, 8].map((replicas) => {
        const placement = { replicas, nodes: Math.ceil(replicas / 4), localBatchSize: 32 };
        return { ...placement, stepTime: fixedStepTime(placement) };
      });
      const run = { namespace: profiledIn, signature: 'toy', samples, usage: [] };
      await recordRun(sim, deps.profiles, run, sim.clock.now(), false);
      sim.submitJob(toyJob({ workers: 2, maxReplicas: 8 }));
      const result = await handleSubmit(TOY, deps);
      return result.outcomes[0]?.plan.reason ?? '';
    };
    assert.match(await reasonWithProfileIn('team-b'), /no profile for signature toy/);
    assert.match(await reasonWithProfileIn(TOY.namespace), /profile of toy/);
  });

  it("raises a memory limit that running jobs of the signature have outgrown, in the job's own namespace only", async () => {
    // The toy needs 8 GiB; the peer runs at 10 GiB and shows its peak (7.2-8 GiB) after a few minutes.
    const limitAfterSubmit = async (peerNamespace: string) => {
      const { sim, deps } = harness();
      sim.submitJob(toyJob({ name: 'peer', namespace: peerNamespace, workers: 2 }));
      sim.step(300);
      const ref = { ...TOY, name: 'tight' };
      sim.submitJob(
        toyJob({ name: 'tight', workers: 4, sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 6 * GiB } }),
      );
      const result = await handleSubmit(ref, deps);
      const plan = result.outcomes[0]?.plan;
      return {
        limit: memoryLimit(await sim.getJob(ref)),
        reason: [plan?.reason, ...(plan?.details ?? [])].join('; '),
      };
    };
    const raised = await limitAfterSubmit(TOY.namespace);
    assert.match(
      raised.reason,
      /Worker memory limit 6\.0 GiB -> [\d.]+ GiB, the request with it: 1 running job of this signature already peaked at [\d.]+ GiB/,
    );
    const bytes = Number(/^(\d+)Mi$/.exec(raised.limit ?? '')?.[1]) * 1024 ** 2;
    assert.ok(bytes >= 8 * GiB && bytes <= 8 * GiB * 1.2 + 1024 ** 2, raised.limit);
    const elsewhere = await limitAfterSubmit('team-b');
    assert.equal(elsewhere.limit, '6Gi');
    assert.doesNotMatch(elsewhere.reason, /running job/);
  });

  it("a job deleted before its read is that job's NOT_FOUND, not a failed handler; nothing is written", async () => {
    const { sim, deps } = harness();
    const mark = sim.writeLog().length;
    const result = await handleSubmit(TOY, deps);
    assert.deepEqual(result.outcomes, []);
    assert.deepEqual(
      result.errors.map((e) => [e.ref.name, e.code]),
      [[TOY.name, 'NOT_FOUND']],
    );
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('rejects unknown kinds and malformed references with no write', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    const mark = sim.writeLog().length;
    await assert.rejects(
      handleSubmit({ kind: 'MPIJob', namespace: 'team-a', name: 'toy' }, deps),
      UnsupportedJobKindError,
    );
    await assert.rejects(handleSubmit({ kind: 'PyTorchJob', namespace: 'team-a' }, deps), ValidationError);
    assert.deepEqual(writesSince(sim, mark), []);
  });
});

describe('schedule handler', () => {
  it('rebalances idle GPUs to a job that gains from them', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1 }));
    sim.step(1200);
    const result = await handleSchedule(scheduledEvent(), deps);
    assert.equal(result.errors.length, 0);
    const applied = result.outcomes.filter((o) => o.applied);
    assert.equal(applied.length, 1, JSON.stringify(result.outcomes.map((o) => o.plan.reason)));
    assert.equal(applied[0]?.plan.policy, 'rebalance');
    assert.ok((workers(await sim.getJob(TOY)) ?? 0) > 1);
  });

  it('a tenant’s crafted state annotation does not lift the cool-down or the pause; states are listed once a tick', async () => {
    for (const truth of [{ lastActionAt: -10 }, { paused: true, pauseReason: 'diverging loss' }]) {
      const { sim, deps } = harness();
      sim.submitJob(toyJob({ workers: 1 }));
      sim.step(1200);
      const at =
        truth.lastActionAt === undefined ? {} : { lastActionAt: sim.clock.now() + truth.lastActionAt };
      await seedJobState(sim, TOY, { ...truth, ...at });
      const crafted = JSON.stringify({ lastActionAt: 0, paused: false, largestRunWorkers: 64 });
      await sim.patchJob(
        TOY,
        [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1state', value: crafted }],
        {
          dryRun: false,
        },
      );
      const reads = { list: 0, get: 0 };
      const { listJobStates, getJobState } = {
        listJobStates: sim.listJobStates.bind(sim),
        getJobState: sim.getJobState.bind(sim),
      };
      sim.listJobStates = () => {
        reads.list++;
        return listJobStates();
      };
      sim.getJobState = (ref) => {
        reads.get++;
        return getJobState(ref);
      };
      const result = await handleSchedule(scheduledEvent(), deps);
      assert.deepEqual(result.errors, []);
      assert.equal(result.outcomes.filter((o) => o.applied).length, 0, JSON.stringify(truth));
      assert.match(
        result.outcomes[0]?.plan.reason ?? '',
        truth.paused ? /paused \(diverging loss\)/ : /cool-down/,
      );
      assert.equal(workers(await sim.getJob(TOY)), 1);
      assert.deepEqual(reads, { list: 1, get: 0 }, 'one LIST, no read per job');
    }
  });

  it("grows a job seen at one size past a probe worker when its signature's profile measured larger sizes", async () => {
    const grownBy = (profiled: number[], slower = 1) =>
      grownWithProfile((deps) => handleSchedule(scheduledEvent(), deps), 1200, profiled, slower);
    // Alone, one worker at a time; with earlier runs at 1-8 workers, straight to the 4 that one node holds
    // (a fifth worker opens a second node and slows every step by more than it adds).
    assert.equal((await grownBy([])).grown, 1);
    assert.equal((await grownBy([1, 2, 4, 8])).grown, 3);
    // A profile measured elsewhere (twice as slow at the size this job runs) is not used.
    const elsewhere = await grownBy([1, 2, 4, 8], 2);
    assert.equal(elsewhere.grown, 1);
    assert.ok(elsewhere.logged.some((l) => l.startsWith('debug profile left out of the fit')));
  });

  it('admits a queued job by sharing: running jobs give workers, the queued job starts at its share', async () => {
    const { sim, deps } = harness();
    // big holds all 16 GPUs of the 4 x 4 cluster; queued asks 6 (after the submit handler clamps 8 to its
    // max), so the submit wrote it and it is in its cool-down when the schedule tick comes.
    sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
    sim.step(600);
    sim.submitJob(toyJob({ name: 'queued', workers: 8, maxReplicas: 6 }));
    const queuedRef = { ...TOY, name: 'queued' };
    const submitted = await handleSubmit(queuedRef, deps);
    assert.equal(submitted.outcomes[0]?.applied, true);
    assert.equal(workers(await sim.getJob(queuedRef)), 6);
    sim.step(30);

    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    const big = workers(await sim.getJob({ ...TOY, name: 'big' })) ?? 0;
    const queued = workers(await sim.getJob(queuedRef)) ?? 0;
    assert.ok(big < 16 && big >= 12, `big shrank by at most the step: ${big}`);
    assert.ok(queued >= 1 && queued < 6, `queued started at its share: ${queued}`);
    assert.equal(big + queued, 16, 'every GPU freed goes to the queued job');
    const reason = (await sim.getJob(queuedRef)).metadata?.annotations?.[ANNOTATION.lastDecision] ?? '';
    assert.match(reason, /queued with 6 workers asked and none placed/);

    sim.step(120);
    assert.equal(sim.jobStatus(queuedRef).startedAt !== undefined, true, 'the queued job trains');
  });

  it("counts a queued job's waiting pods once: room freed before they are bound shrinks no one for them", async () => {
    const { sim, deps } = harness();
    const bigRef = { ...TOY, name: 'big' };
    const queuedRef = { ...TOY, name: 'queued' };
    sim.submitJob(toyJob({ name: 'big', workers: 16, maxReplicas: 16 }));
    sim.step(600);
    sim.submitJob(toyJob({ name: 'queued', workers: 6, minReplicas: 1, maxReplicas: 6 }));
    sim.step(30);
    // big's owner gives back six workers; the tick comes before the scheduler has bound the queued pods.
    await sim.patchJob(
      bigRef,
      [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 10 }],
      { dryRun: false },
    );
    const waiting = (await sim.listPods('team-a')).filter(
      (p) => p.metadata?.name?.startsWith('queued-worker-') && !p.spec?.nodeName,
    );
    assert.equal(waiting.length, 6);
    assert.deepEqual(
      sim.roomPerNode({ gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB }).reduce((a, b) => a + b),
      6,
    );

    const result = await handleSchedule(scheduledEvent(), deps);
    assert.deepEqual(result.errors, []);
    assert.deepEqual(
      result.outcomes.filter((o) => o.plan.changes.length > 0).map((o) => o.plan.reason),
      [],
    );
    assert.equal(workers(await sim.getJob(bigRef)), 10);
    assert.equal(workers(await sim.getJob(queuedRef)), 6);
    sim.step(60);
    assert.ok(sim.jobStatus(queuedRef).startedAt !== undefined, 'the queued job trains at the size asked');
  });

  it('a job written at one tick may move two ticks later, however long the tick took to write it', async () => {
    const { sim, deps } = harness();
    // Each clock reading inside a tick comes a quarter second after the one before: the handler reads every
    // job and its metrics before it writes, as it does against a real API server and Prometheus.
    let lag = 0;
    const clock = () => {
      lag += 0.25;
      return sim.clock.now() + lag;
    };
    const slow: HandlerDeps = { ...deps, clock };
    const tick = async () => {
      lag = 0;
      const result = await handleSchedule(scheduledEvent(), slow);
      assert.deepEqual(result.errors, []);
      return result.outcomes.find((o) => o.ref.name === TOY.name);
    };
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 16 }));
    sim.step(1200);
    assert.equal((await tick())?.applied, true);
    const first = workers(await sim.getJob(TOY)) ?? 0;
    sim.step(deps.config.cooldownSeconds);
    const second = await tick();
    assert.doesNotMatch(second?.plan.reason ?? '', /cool-down/);
    assert.equal(second?.applied, true, second?.plan.reason);
    assert.ok((workers(await sim.getJob(TOY)) ?? 0) > first);
  });

  it('rejects other EventBridge events, with no write', async () => {
    const { sim, deps } = harness();
    const mark = sim.writeLog().length;
    await assert.rejects(
      handleSchedule({ ...scheduledEvent(), 'detail-type': 'Object Created' }, deps),
      ValidationError,
    );
    assert.deepEqual(writesSince(sim, mark), []);
  });
});

describe('a job with pods that cannot be placed (1 master + 16 workers, room for 11)', () => {
  const MANAGED = { 'trainscaler.io/managed': 'true' };
  const MASTER = { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB };
  // 4 nodes x 4 GPUs; another job holds 4, so 12 GPUs are free: the master and 11 workers.
  function strandedCluster(workersAsked: number) {
    const h = harness();
    h.sim.submitJob(toyJob({ name: 'other', workers: 4, maxReplicas: 4, labels: MANAGED }));
    h.sim.step(60);
    h.sim.submitJob(
      toyJob({ workers: workersAsked, minReplicas: 1, maxReplicas: 16, master: MASTER, labels: MANAGED }),
    );
    h.sim.step(30);
    return h;
  }
  async function podPhases(sim: ReturnType<typeof harness>['sim']) {
    const pods = (await sim.listPods('team-a')).filter((p) => p.metadata?.name?.startsWith('toy-worker-'));
    return {
      running: pods.filter((p) => p.spec?.nodeName).length,
      waiting: pods.filter((p) => p.status?.phase === 'Pending' && !p.spec?.nodeName).length,
    };
  }

  it('the submit reason counts the room the job itself already holds (11 workers, not 10)', async () => {
    const { sim, deps } = strandedCluster(16);
    const result = await handleSubmit(TOY, deps);
    const plan = result.outcomes[0]?.plan;
    const reason = [plan?.reason, ...(plan?.details ?? [])].join('; ');
    assert.match(reason, /free capacity holds 11 workers/);
    // 16 -> 11 removes only workers that never started: the step guardrail does not hold it at 12.
    assert.equal(workers(await sim.getJob(TOY)), 11, reason);
    sim.step(30);
    assert.deepEqual(await podPhases(sim), { running: 11, waiting: 0 });
  });

  it('with no pod event to come, the schedule shrinks it to what runs within two ticks', async () => {
    for (const asked of [16, 12]) {
      const { sim, deps, logged } = strandedCluster(asked);
      sim.drainEvents(); // the pod events were missed (or answered by a clamped shrink): only ticks remain
      assert.deepEqual(await podPhases(sim), { running: 11, waiting: asked - 11 });
      let ticks = 0;
      while ((await podPhases(sim)).waiting > 0 && ticks < 2) {
        const tick = await handleSchedule(scheduledEvent(), deps);
        assert.deepEqual(tick.errors, []);
        ticks++;
        sim.step(30);
        sim.drainEvents();
      }
      assert.deepEqual(await podPhases(sim), { running: 11, waiting: 0 }, `from ${asked} in ${ticks} ticks`);
      assert.equal(workers(await sim.getJob(TOY)), 11);
      const reason = (await sim.getJob(TOY)).metadata?.annotations?.[ANNOTATION.lastDecision] ?? '';
      assert.match(
        reason,
        /Pending, fits on no node; 11 running \+ 0 more fit in free capacity = 11: shrinking Worker from \d+ to 11/,
      );
      const tickLine = logged.find((l) => l.startsWith('info schedule tick'));
      assert.match(tickLine ?? '', /"stranded":1/);
    }
  });
});
