// The actuator (lib/actuator.ts) on the SimulatedCluster: what it reads, what it skips and why, the minimal
// guarded patch and its audit trail (state, last decision, bounded history, Event), conflicts re-read and
// recomputed, dry runs, evictions, and the guardrail context it builds (defaults, queued jobs, GPU budget).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ActuatorDeps,
  actOnJob,
  type Decide,
  type DecisionRecord,
  decisionIdOf,
  type JobSnapshot,
  loadSnapshot,
  runningWorkersOf,
} from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { readJob } from '../../lib/adapters/job-adapter.js';
import type { ClusterClient, KubeObject } from '../../lib/cluster/cluster-client.js';
import { EVENT_MESSAGE_LIMIT } from '../../lib/cluster/event-message.js';
import { STATUS_REASON_LIMIT, stateOfStatus } from '../../lib/cluster/job-state.js';
import { JobDeadlineError } from '../../lib/decisions/job-work.js';
import { ApiError, ConflictError, TrainscalerError } from '../../lib/errors.js';
import { placedReplicasOf } from '../../lib/guardrails.js';
import { SimulatedCluster } from '../../lib/sim/simulated-cluster.js';
import type { Change, JobAutoscalerState, JobRef, Plan, PodView } from '../../lib/types.js';
import { recordedState, seedJobState } from '../support/job-states.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';
import { FIXED_APP_MODEL } from './sim/fixed-app-model.js';

const GiB = 1024 ** 3;

function managed(job: KubeObject, value = 'true'): KubeObject {
  job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: value };
  return job;
}

function recordingLogger() {
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    lines.push({ level, msg: msg ?? '', obj: obj as Record<string, unknown> });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

/** The simulated API server, with calls counted and faults injected where a test asks. */
function door(sim: SimulatedCluster) {
  const calls: string[] = [];
  const faults = { patch: [] as Error[], event: [] as unknown[], state: [] as Error[] };
  const client: ClusterClient = {
    getJob: (ref) => {
      calls.push('getJob');
      return sim.getJob(ref);
    },
    listJobs: (kind, ns) => sim.listJobs(kind, ns),
    listPods: (ns, selector) => {
      calls.push(`listPods ${ns ?? '*'}`);
      return sim.listPods(ns, selector);
    },
    listNodes: () => sim.listNodes(),
    getConfigMap: (ns, name) => sim.getConfigMap(ns, name),
    listWorkloads: (ns, selector) => sim.listWorkloads(ns, selector),
    getLocalQueue: (ns, name) => sim.getLocalQueue(ns, name),
    getClusterQueue: (name) => sim.getClusterQueue(name),
    patchJob: async (ref, patch, options) => {
      calls.push(`patch dryRun=${options.dryRun}`);
      const fault = faults.patch.shift();
      if (fault) throw fault;
      return sim.patchJob(ref, patch, options);
    },
    evictPod: (ns, name, options) => {
      calls.push(`evict ${name} dryRun=${options.dryRun}`);
      return sim.evictPod(ns, name, options);
    },
    createEvent: async (event, options) => {
      calls.push(`event dryRun=${options.dryRun}`);
      if (faults.event.length > 0) throw faults.event.shift();
      return sim.createEvent(event, options);
    },
    putConfigMap: (ns, name, data, rv, options) => sim.putConfigMap(ns, name, data, rv, options),
    getJobState: (ref) => {
      calls.push('getJobState');
      return sim.getJobState(ref);
    },
    listJobStates: () => sim.listJobStates(),
    putJobState: async (job, status, current, options) => {
      calls.push(`putJobState dryRun=${options.dryRun}`);
      const fault = faults.state.shift();
      if (fault) throw fault;
      return sim.putJobState(job, status, current, options);
    },
  };
  return { client, calls, faults };
}

function setup(options: { job?: KubeObject; deps?: Partial<ActuatorDeps> } = {}) {
  const { sim } = harness();
  sim.submitJob(options.job ?? managed(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 })));
  const { client, calls, faults } = door(sim);
  const { logger, lines } = recordingLogger();
  const deps: ActuatorDeps = {
    cluster: client,
    clock: sim.clock.now,
    dryRun: false,
    logger,
    namespaceAllowlist: [],
    ...options.deps,
  };
  return { sim, deps, calls, faults, lines };
}

const plan = (changes: Change[], policy: Plan['policy'] = 'tuning', reason = 'because'): Plan => ({
  ref: TOY,
  policy,
  reason,
  changes,
});

/** Workers to `to` (from the live count). */
const workersTo =
  (to: number, policy: Plan['policy'] = 'tuning'): Decide =>
  (s) =>
    plan([{ kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 0, to }], policy);

/** The Worker's memory limit to `to` bytes (from the live limit). */
const workerMemoryLimit = (s: JobSnapshot, to: number): Change => ({
  kind: 'resources',
  role: 'Worker',
  resource: 'memory',
  field: 'limits',
  from: s.view.roles[0]?.limits.memoryBytes ?? 0,
  to,
});

async function job(sim: SimulatedCluster) {
  const obj = await sim.getJob(TOY);
  const a = obj.metadata.annotations ?? {};
  return {
    obj,
    view: readJob(obj),
    state: stateOfStatus(await recordedState(sim, TOY)) as Partial<JobAutoscalerState>,
    status: await recordedState(sim, TOY),
    last: JSON.parse(a[ANNOTATION.lastDecision] ?? 'null') as DecisionRecord | null,
    history: JSON.parse(a[ANNOTATION.history] ?? '[]') as DecisionRecord[],
  };
}

describe('actOnJob: what it skips', () => {
  it('a namespace outside the allowlist: nothing read, nothing decided', async () => {
    const { deps, calls } = setup({ deps: { namespaceAllowlist: ['other'] } });
    let decided = false;
    const outcome = await actOnJob(
      TOY,
      () => {
        decided = true;
        return plan([]);
      },
      deps,
    );
    assert.deepEqual(outcome, {
      ref: TOY,
      plan: { ref: TOY, policy: 'tuning', changes: [], reason: 'namespace team-a is not in the allowlist' },
      applied: false,
      skipped: 'namespace-not-allowed',
    });
    assert.equal(decided, false);
    assert.deepEqual(calls, []);
    const allowed = await actOnJob(TOY, workersTo(3), { ...deps, namespaceAllowlist: ['other', 'team-a'] });
    assert.equal(allowed.applied, true);
  });

  it('a job opted out (managed=false): nothing decided, nothing written', async () => {
    const { deps, calls } = setup({ job: managed(toyJob({ workers: 2 }), 'false') });
    let decided = false;
    const outcome = await actOnJob(
      TOY,
      () => {
        decided = true;
        return plan([]);
      },
      deps,
    );
    assert.equal(decided, false);
    assert.deepEqual(outcome, {
      ref: TOY,
      plan: { ref: TOY, policy: 'tuning', changes: [], reason: 'trainscaler.io/managed=false' },
      applied: false,
      skipped: 'not-managed',
    });
    assert.ok(calls.every((c) => !c.startsWith('patch')));
  });

  it('a plan of no-ops (from = to) writes nothing and says no-change', async () => {
    const { deps, calls } = setup();
    const outcome = await actOnJob(
      TOY,
      (s) =>
        plan([
          { kind: 'replicas', role: 'Worker', from: 2, to: 2 },
          workerMemoryLimit(s, s.view.roles[0]?.limits.memoryBytes ?? 0),
        ]),
      deps,
    );
    assert.equal(outcome.applied, false);
    assert.equal(outcome.skipped, 'no-change');
    assert.equal(outcome.conflicts, 0);
    assert.deepEqual(outcome.plan.changes, []);
    assert.ok(calls.every((c) => !c.startsWith('patch') && !c.startsWith('event')));
  });
});

describe("actOnJob: a caller that stopped waiting (a tick's per-job deadline)", () => {
  it('starts no write once its signal is aborted: not the job, not its state, not an Event', async () => {
    const controller = new AbortController();
    const { sim, deps, calls } = setup();
    const before = await job(sim);
    const late = new JobDeadlineError(TOY, 60);
    await assert.rejects(
      actOnJob(
        TOY,
        (s) => {
          // The deadline passes while the job is being decided.
          controller.abort(late);
          return workersTo(3)(s);
        },
        { ...deps, signal: controller.signal },
      ),
      (error: unknown) => error === late,
    );
    assert.deepEqual(
      calls.filter((c) => /^(patch|event|putJobState)/.test(c)),
      [],
    );
    assert.equal((await job(sim)).view.roles[0]?.replicas, before.view.roles[0]?.replicas);
  });

  it('writes as before while its signal is not aborted', async () => {
    const { sim, deps } = setup();
    const outcome = await actOnJob(TOY, workersTo(3), { ...deps, signal: new AbortController().signal });
    assert.equal(outcome.applied, true);
    assert.equal((await job(sim)).view.roles[0]?.replicas, 3);
  });
});

describe('actOnJob: the write and its audit trail', () => {
  it('patches only the decided field, guarded by the version read, and records state, decision, history, Event', async () => {
    const { sim, deps, lines, calls } = setup();
    const before = await job(sim);
    const outcome = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(outcome.applied, true);
    assert.equal(outcome.conflicts, 0);
    assert.equal(outcome.skipped, undefined);
    const expectedPlan = plan([{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }]);
    assert.deepEqual(outcome.plan, expectedPlan);
    assert.equal(outcome.decisionId, decisionIdOf(before.view, expectedPlan));
    assert.deepEqual(outcome.patch?.slice(0, 2), [
      { op: 'replace', path: '/metadata/resourceVersion', value: before.obj.metadata.resourceVersion },
      { op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 },
    ]);
    const after = await job(sim);
    assert.equal(after.view.roles[0]?.replicas, 3);
    const at = sim.clock.now();
    assert.deepEqual(after.state, {
      oomCount: 0,
      paused: false,
      lastActionAt: at,
      lastDecisionId: outcome.decisionId,
      // The first write records the user's size, what sharing measures against.
      askedWorkers: 2,
    });
    // The state is in the job's ScaledTrainingJob status, with what was observed and decided; never on the job.
    assert.equal(after.status?.observedWorkers, 0);
    assert.deepEqual(after.status?.lastDecision, {
      id: outcome.decisionId,
      at,
      policy: 'tuning',
      reason: 'because',
      changes: expectedPlan.changes,
    });
    assert.equal(after.obj.metadata.annotations?.[ANNOTATION.state], undefined);
    assert.ok(!lines.some((l) => l.msg === 'state re-read and written again'), 'no conflict, nothing to say');
    // After the job's patch; before the Event.
    assert.deepEqual(
      calls.filter((c) => /^(patch|putJobState|event)/.test(c)),
      ['patch dryRun=false', 'putJobState dryRun=false', 'event dryRun=false'],
    );
    assert.ok(!JSON.stringify(outcome.patch).includes(ANNOTATION.state));
    assert.ok(after.last);
    assert.match(after.last.write ?? '', /^[0-9a-f]{12}$/);
    assert.deepEqual(after.last, {
      id: outcome.decisionId,
      at,
      policy: 'tuning',
      reason: 'because',
      changes: expectedPlan.changes,
      write: after.last.write,
    });
    assert.deepEqual(after.history, [after.last]);
    const events = sim.recordedEvents();
    assert.equal(events.length, 1);
    assert.equal(events[0]?.type, 'Normal');
    assert.equal(events[0]?.reason, 'TrainscalerTuning');
    assert.equal(events[0]?.message, 'because');
    assert.equal(events[0]?.involvedObject?.uid, before.view.uid);
    assert.equal(events[0]?.involvedObject?.apiVersion, 'kubeflow.org/v1');
    assert.ok(calls.includes('event dryRun=false'), 'the Event is a real write');
    assert.ok(!lines.some((l) => l.msg === 'plan clamped'), 'nothing clamped, nothing warned');
    const applied = lines.find((l) => l.msg === 'decision applied');
    assert.deepEqual(applied?.obj, {
      job: TOY,
      decisionId: outcome.decisionId,
      policy: 'tuning',
      reason: 'because',
    });
  });

  it('keeps the last 10 decisions, reading a corrupt or non-list history as empty', async () => {
    const { sim, deps } = setup();
    const old = Array.from({ length: 10 }, (_, i) => ({ id: `old-${i}` }));
    await sim.patchJob(
      TOY,
      [{ op: 'add', path: `/metadata/annotations/trainscaler.io~1history`, value: JSON.stringify(old) }],
      { dryRun: false },
    );
    const noCooldown = { ...deps, guardrails: { cooldownSeconds: 0 } };
    await actOnJob(TOY, workersTo(3), noCooldown);
    const ids = (await job(sim)).history.map((r) => r.id);
    assert.equal(ids.length, 10);
    assert.equal(ids[0], 'old-1');
    assert.equal(ids[8], 'old-9');
    for (const raw of ['{not json', '{"id":"x"}']) {
      await sim.patchJob(
        TOY,
        [{ op: 'add', path: '/metadata/annotations/trainscaler.io~1history', value: raw }],
        {
          dryRun: false,
        },
      );
      const outcome = await actOnJob(TOY, workersTo(2), noCooldown);
      assert.equal(outcome.applied, true);
      assert.deepEqual(
        (await job(sim)).history.map((r) => r.id),
        [outcome.decisionId],
      );
      await actOnJob(TOY, workersTo(3), noCooldown);
    }
  });

  it('a long reason is one line in the Event; the rest is kept whole in the decision record, as details', async () => {
    const { sim, deps } = setup();
    const reason = `grow: ${'because of a long measured story; '.repeat(40)}`;
    await actOnJob(
      TOY,
      () => plan([{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }], 'tuning', reason),
      deps,
    );
    const last = (await job(sim)).last;
    assert.equal(last?.reason, 'grow: because of a long measured story');
    assert.equal([last?.reason, ...(last?.details ?? [])].join('; '), reason.slice(0, -2));
    const message = sim.recordedEvents()[0]?.message ?? '';
    assert.ok(message.length <= EVENT_MESSAGE_LIMIT, String(message.length));
    assert.equal(message, 'grow: because of a long measured story');
  });

  it('a plan with a pause among other changes is still audited as a Warning', async () => {
    const { sim, deps } = setup();
    await actOnJob(
      TOY,
      () =>
        plan([
          { kind: 'replicas', role: 'Worker', from: 2, to: 3 },
          { kind: 'pause', reason: 'x' },
        ]),
      deps,
    );
    assert.equal(sim.recordedEvents()[0]?.type, 'Warning');
  });

  it('a node preference alone is recorded and audited but starts no cool-down; a resize does', async () => {
    const { sim, deps } = setup();
    const prefer: Change = { kind: 'prefer-node', role: 'Worker', node: 'node-1' };
    const first = await actOnJob(TOY, () => plan([prefer], 'initial'), deps);
    assert.equal(first.applied, true);
    const preferred = await job(sim);
    assert.equal(preferred.state.lastDecisionId, first.decisionId);
    assert.equal(preferred.state.lastActionAt, undefined, 'no pod moved: nothing to cool down from');
    assert.equal(preferred.state.askedWorkers, 2);
    assert.equal(sim.recordedEvents().length, 1);
    const grown = await actOnJob(TOY, workersTo(3, 'rebalance'), deps);
    assert.equal(grown.applied, true, 'the rebalance may act at once after a preference');
    assert.equal((await job(sim)).state.lastActionAt, sim.clock.now());
  });

  it('records the most Worker pods it has seen running at a write, and never lowers it', async () => {
    const { sim, deps } = setup({ job: managed(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 16 })) });
    await actOnJob(TOY, workersTo(5), deps);
    assert.equal((await job(sim)).state.largestRunWorkers, undefined, 'none running yet: nothing recorded');
    sim.step(600);
    const running = (await sim.listPods('team-a')).filter((p) => p.status?.phase === 'Running').length;
    assert.equal(running, 5);
    await actOnJob(TOY, workersTo(3), deps);
    assert.equal((await job(sim)).state.largestRunWorkers, 5);
    sim.step(600);
    await actOnJob(TOY, workersTo(2), deps);
    assert.equal((await job(sim)).state.largestRunWorkers, 5, 'fewer running now: the most stays');
  });

  it('a size run at counts Worker pods only, running only', () => {
    const pod = (role: PodView['role'], phase: PodView['phase'], i: number): PodView => ({
      name: `p-${i}`,
      namespace: 'team-a',
      role,
      index: i,
      phase,
      restartCount: 0,
      requests: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
      limits: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
    });
    const pods = [
      pod('Worker', 'Running', 0),
      pod('Worker', 'Running', 1),
      pod('Worker', 'Pending', 2),
      pod('Master', 'Running', 0),
      pod('PS', 'Running', 0),
    ];
    assert.equal(runningWorkersOf(pods), 2);
  });

  it('counts only Worker pods running: pods waiting for a node are no size the job has run at', async () => {
    const { sim, deps } = setup({ job: managed(toyJob({ workers: 40, minReplicas: 1, maxReplicas: 64 })) });
    sim.step(60);
    const pods = await sim.listPods('team-a');
    const running = pods.filter((p) => p.status?.phase === 'Running').length;
    assert.ok(running > 1 && running < pods.length, `${running} of ${pods.length} running`);
    await actOnJob(TOY, workersTo(39, 'fault'), deps);
    assert.equal((await job(sim)).state.largestRunWorkers, running);
  });

  it("the cool-down counts from the trigger's arrival, never from after the write", async () => {
    const early = setup();
    const at = early.sim.clock.now();
    await actOnJob(TOY, workersTo(3), { ...early.deps, triggeredAt: at - 5 });
    assert.equal((await job(early.sim)).state.lastActionAt, at - 5);
    const late = setup();
    await actOnJob(TOY, workersTo(3), { ...late.deps, triggeredAt: at + 1000 });
    assert.equal(
      (await job(late.sim)).state.lastActionAt,
      at,
      'a trigger time after the write is not believed',
    );
  });

  it('a pause is recorded in the state and audited as a Warning', async () => {
    const { sim, deps } = setup();
    const outcome = await actOnJob(
      TOY,
      () => plan([{ kind: 'pause', reason: 'diverging loss' }], 'tuning'),
      deps,
    );
    assert.equal(outcome.applied, true);
    const { state } = await job(sim);
    assert.equal(state.paused, true);
    assert.equal(state.pauseReason, 'diverging loss');
    assert.equal(sim.recordedEvents()[0]?.type, 'Warning');
  });

  it('a fault answered with memory counts one more OOM kill; a fault without memory does not', async () => {
    const { sim, deps } = setup();
    const memory = (s: JobSnapshot): Plan => plan([workerMemoryLimit(s, 12 * GiB)], 'fault', 'OOM killed');
    await actOnJob(TOY, memory, deps);
    assert.equal((await job(sim)).state.oomCount, 1);
    const events = sim.recordedEvents();
    assert.equal(events[0]?.type, 'Warning');
    assert.equal(events[0]?.reason, 'TrainscalerFault');
    await actOnJob(TOY, workersTo(1, 'fault'), deps);
    const after = await job(sim);
    assert.equal(after.view.roles[0]?.replicas, 1, 'a fault passes the cool-down');
    assert.equal(after.state.oomCount, 1);
    // A memory change by another policy is not an OOM kill.
    const resized = await actOnJob(
      TOY,
      (s) => {
        const m = memory(s);
        return {
          ...m,
          policy: 'rightsizing',
          changes: m.changes.map((c) => ({ ...c, to: 14 * GiB })),
        } as Plan;
      },
      { ...deps, guardrails: { cooldownSeconds: 0 } },
    );
    assert.equal(resized.applied, true);
    assert.equal((await job(sim)).state.oomCount, 1);
    // A fault answered with memory and more still counts one OOM kill.
    await actOnJob(
      TOY,
      (s) => {
        const m = memory(s);
        return {
          ...m,
          changes: [
            { kind: 'replicas', role: 'Worker', from: 1, to: 2 },
            ...m.changes.map((c) => ({ ...c, to: 16 * GiB })),
          ],
        } as Plan;
      },
      deps,
    );
    assert.equal((await job(sim)).state.oomCount, 2);
  });

  it('a straggler eviction evicts the pod named, after the patch, for real', async () => {
    const { sim, deps, calls } = setup();
    sim.step(60);
    // Worker-1: worker-0 of this c10d job hosts the rendezvous store and is never evicted (the guardrails).
    const pod = (await sim.listPods('team-a')).find(
      (p) => p.spec?.nodeName && p.metadata?.name?.endsWith('-worker-1'),
    )?.metadata?.name;
    assert.ok(pod);
    const outcome = await actOnJob(TOY, () => plan([{ kind: 'evict-pod', pod }], 'straggler'), deps);
    assert.equal(outcome.applied, true);
    const patchAt = calls.indexOf('patch dryRun=false');
    assert.ok(patchAt >= 0 && calls.indexOf(`evict ${pod} dryRun=false`) > patchAt);
    assert.ok(sim.writeLog().some((w) => w.verb === 'evict' && w.target.endsWith(pod)));
  });

  it('a lost audit Event is logged, not thrown: the annotation is the durable record', async () => {
    for (const [error, detail] of [
      [new ApiError('create event', 500, 'boom'), /boom/],
      ['a string', /a string/],
    ] as const) {
      const { deps, faults, lines } = setup();
      faults.event.push(error);
      const outcome = await actOnJob(TOY, workersTo(3), deps);
      assert.equal(outcome.applied, true);
      const logged = lines.find((l) => l.msg === 'could not record the audit Event');
      assert.equal(logged?.level, 'error');
      assert.deepEqual(logged?.obj.job, TOY);
      assert.match(String(logged?.obj.error), detail);
      if (error instanceof TrainscalerError) assert.equal(logged?.obj.error, error.message);
    }
  });
});

describe('actOnJob: conflicts, errors and dry runs', () => {
  it('a conflict re-reads and recomputes on the new version; the fourth gives up', async () => {
    const { sim, deps, faults, lines } = setup();
    const seen: string[] = [];
    const decide: Decide = (s) => {
      seen.push(s.obj.metadata.resourceVersion ?? '');
      return workersTo(3)(s);
    };
    faults.patch.push(new ConflictError('patch'), new ConflictError('patch'), new ConflictError('patch'));
    const outcome = await actOnJob(TOY, decide, deps);
    assert.equal(outcome.applied, true);
    assert.equal(outcome.conflicts, 3);
    assert.equal(seen.length, 4, 'one decision per read');
    assert.deepEqual(
      lines
        .filter((l) => l.msg === 'conflict on patch; re-reading and recomputing')
        .map((l) => l.obj.attempt),
      [1, 2, 3],
    );
    assert.equal((await job(sim)).view.roles[0]?.replicas, 3);
    const again = setup();
    again.faults.patch.push(...Array.from({ length: 4 }, () => new ConflictError('patch')));
    await assert.rejects(actOnJob(TOY, workersTo(3), again.deps), ConflictError);
    assert.equal((await job(again.sim)).view.roles[0]?.replicas, 2);
  });

  it('any other error is thrown at once, with nothing written and no Event', async () => {
    const { sim, deps, faults, calls } = setup();
    faults.patch.push(new ApiError('patch', 500, 'boom'));
    await assert.rejects(actOnJob(TOY, workersTo(3), deps), ApiError);
    assert.equal(calls.filter((c) => c.startsWith('patch')).length, 1);
    assert.equal(sim.recordedEvents().length, 0);
  });

  it('a dry run sends the patch as a server-side dry run, and evicts and records nothing', async () => {
    const { sim, deps, calls, lines } = setup({ deps: { dryRun: true } });
    sim.step(60);
    const pod = (await sim.listPods('team-a'))[0]?.metadata?.name ?? '';
    const outcome = await actOnJob(
      TOY,
      () =>
        plan(
          [
            { kind: 'replicas', role: 'Worker', from: 2, to: 3 },
            { kind: 'evict-pod', pod },
          ],
          'straggler',
        ),
      deps,
    );
    assert.equal(outcome.applied, false);
    assert.equal(outcome.skipped, 'dry-run');
    assert.equal(outcome.conflicts, 0);
    assert.ok(outcome.decisionId && outcome.patch && outcome.patch.length > 0);
    assert.ok(calls.includes('patch dryRun=true'));
    assert.ok(calls.every((c) => !/^evict .* dryRun=false$/.test(c) && !c.startsWith('event')));
    assert.equal((await job(sim)).view.roles[0]?.replicas, 2);
    const logged = lines.find((l) => l.msg === 'dry run: decision not written');
    assert.deepEqual(Object.keys(logged?.obj ?? {}), ['job', 'decisionId', 'patch', 'reason']);
    assert.equal(logged?.level, 'debug', 'the decision log, not the actuator, reports dry runs at info');
  });
});

describe('actOnJob: the guardrail context', () => {
  it('takes the production defaults (step 4, cool-down 120 s) and the overrides given', async () => {
    const { sim, deps, lines } = setup();
    sim.step(60);
    const outcome = await actOnJob(TOY, workersTo(16), deps);
    assert.deepEqual(outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 6 }]);
    const warned = lines.find((l) => l.msg === 'plan clamped');
    assert.equal(warned?.level, 'warn');
    assert.deepEqual(warned?.obj.job, TOY);
    assert.equal(warned?.obj.policy, 'tuning');
    assert.deepEqual(warned?.obj.violations, ['Worker replicas 16 clamped to 6 (bounds, max step)']);
    sim.step(119);
    const cooling = await actOnJob(TOY, workersTo(7), deps);
    assert.equal(cooling.skipped, 'no-change');
    assert.match(cooling.plan.reason, /cool-down/);
    const tuned = await actOnJob(TOY, workersTo(16), {
      ...deps,
      guardrails: { cooldownSeconds: 0, maxReplicaStep: 1 },
    });
    assert.deepEqual(tuned.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 6, to: 7 }]);
    const capped = await actOnJob(TOY, (s) => plan([workerMemoryLimit(s, 64 * GiB)]), {
      ...deps,
      guardrails: { cooldownSeconds: 0, maxMemoryBytes: 32 * GiB },
    });
    assert.equal((capped.plan.changes[0] as { to: number }).to, 32 * GiB);
    const elsewhere = await actOnJob(TOY, workersTo(8), {
      ...deps,
      guardrails: { cooldownSeconds: 0, namespaceAllowlist: ['other'] },
    });
    assert.equal(elsewhere.skipped, 'no-change', 'the guardrails allowlist takes precedence');
  });

  it('a job with no pod placed is queued: it may shrink inside the cool-down; once placed it may not', async () => {
    const { sim, deps } = setup({ job: managed(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 16 })) });
    const first = await actOnJob(TOY, workersTo(5), deps);
    assert.equal(first.applied, true);
    const queued = await actOnJob(TOY, workersTo(4), deps);
    assert.equal(queued.applied, true, 'no pod placed yet: shrinking restarts nothing');
    sim.step(30);
    assert.ok((await sim.listPods('team-a')).some((p) => p.spec?.nodeName));
    const placed = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(placed.skipped, 'no-change');
  });

  it('holds growth within the cluster GPU budget, counting other jobs but this one only at its declared size', async () => {
    const { sim } = harness();
    sim.submitJob(managed(toyJob({ workers: 1, minReplicas: 1, maxReplicas: 16 })));
    sim.submitJob(managed(toyJob({ name: 'other', workers: 2, minReplicas: 1, maxReplicas: 16 })));
    sim.step(60);
    const { client, calls } = door(sim);
    const deps: ActuatorDeps = {
      cluster: client,
      clock: sim.clock.now,
      dryRun: false,
      logger: recordingLogger().logger,
      namespaceAllowlist: [],
      guardrails: { maxClusterGpus: 4 },
    };
    // 1 (this job) + 2 (other) allocated of 4: one more GPU worker fits.
    const outcome = await actOnJob(TOY, workersTo(4), deps);
    assert.deepEqual(outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
    assert.ok(calls.includes('listPods *'), 'the allocation was read across the cluster');
    // Shrinking adds no GPU: the cluster is not listed.
    calls.length = 0;
    await actOnJob(TOY, workersTo(1, 'fault'), deps);
    assert.ok(!calls.includes('listPods *'));
  });
});

describe('loadSnapshot and decision ids', () => {
  it('takes the priority from the pods, else from the priority class map, else 0', async () => {
    const { sim } = harness();
    sim.submitJob(managed(toyJob({ workers: 1, priorityClassName: 'high' })));
    assert.equal(
      (await loadSnapshot(sim, TOY, { high: 1000 })).view.priority,
      1000,
      'no pods yet: the class',
    );
    assert.equal((await loadSnapshot(sim, TOY)).view.priority, 0, 'unknown class');
    const s = await loadSnapshot(sim, TOY, { high: 1000 });
    assert.equal(s.rawPods.length, 0);
    const other: JobRef = { ...TOY, name: 'prio' };
    const { sim: sim2 } = harness();
    sim2.submitJob(managed(toyJob({ name: 'prio', workers: 2 })));
    sim2.step(30);
    const snap = await loadSnapshot(sim2, other, { high: 1000 });
    assert.equal(snap.pods.length, snap.rawPods.length);
    assert.ok(snap.rawPods.length > 0);
    const podPriority = Math.max(...snap.rawPods.map((p) => p.spec?.priority ?? 0));
    assert.equal(snap.view.priority, podPriority);
  });

  it('the same job version and plan give the same id; another version, policy or change another', () => {
    const view = readJob(managed(toyJob()));
    view.uid = 'u';
    view.resourceVersion = '7';
    const p = plan([{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
    const id = decisionIdOf(view, p);
    assert.match(id, /^[0-9a-f]{16}$/);
    assert.equal(decisionIdOf({ ...view }, { ...p, reason: 'other words' }), id);
    assert.notEqual(decisionIdOf({ ...view, resourceVersion: '8' }, p), id);
    assert.notEqual(decisionIdOf({ ...view, uid: 'v' }, p), id);
    assert.notEqual(decisionIdOf(view, { ...p, policy: 'rebalance' }), id);
    assert.notEqual(decisionIdOf(view, plan([{ kind: 'replicas', role: 'Worker', from: 1, to: 3 }])), id);
  });
});

describe('actOnJob: the state it bounds itself with is only its own (a tenant edits the job, not the status)', () => {
  /** What a tenant who owns the job writes on it: the annotation earlier versions read the state from. */
  const crafted = (obj: KubeObject, state: object) => {
    obj.metadata.annotations = { ...obj.metadata.annotations, [ANNOTATION.state]: JSON.stringify(state) };
    return obj;
  };
  const running = () => {
    const env = setup({ job: managed(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 64 })) });
    env.sim.step(300);
    return env;
  };

  it('a crafted {"largestRunWorkers":64,"lastActionAt":0} does not let a 2 -> 64 plan through: 2 -> 6, the step bound', async () => {
    const { sim, deps } = running();
    const t0 = sim.clock.now();
    await seedJobState(sim, TOY, { lastActionAt: t0 - 3600, largestRunWorkers: 2 });
    const tampered = crafted(await sim.getJob(TOY), { largestRunWorkers: 64, lastActionAt: 0 });
    await sim.patchJob(
      TOY,
      [{ op: 'replace', path: '/metadata/annotations', value: tampered.metadata.annotations }],
      {
        dryRun: false,
      },
    );
    const outcome = await actOnJob(TOY, workersTo(64), deps);
    assert.equal(outcome.applied, true);
    assert.deepEqual(outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 6 }]);
    assert.equal((await job(sim)).view.roles[0]?.replicas, 6);
  });

  it('a crafted annotation resets neither the restart budget, the pause, the OOM count, the cool-down nor the measured costs', async () => {
    const { sim, deps } = running();
    const now = sim.clock.now();
    const truth = {
      oomCount: 3,
      paused: true,
      pauseReason: 'diverging loss',
      scaleDowns: 2,
      lastActionAt: now - 10,
      rescaleCost: { upPause: 40, down: 30, measuredFor: now - 500 },
      largestRunWorkers: 2,
    };
    await seedJobState(sim, TOY, truth);
    const tampered = crafted(await sim.getJob(TOY), {
      oomCount: 0,
      paused: false,
      scaleDowns: 0,
      lastActionAt: 0,
      rescaleCost: { upPause: 1, down: 1 },
      largestRunWorkers: 64,
    });
    await sim.patchJob(
      TOY,
      [{ op: 'replace', path: '/metadata/annotations', value: tampered.metadata.annotations }],
      {
        dryRun: false,
      },
    );
    const snapshot = await loadSnapshot(sim, TOY);
    assert.deepEqual(snapshot.view.state, truth);
    const outcome = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(outcome.applied, false, 'in the cool-down the true state started');
    assert.match(outcome.plan.reason, /cool-down/);
  });

  it('a job acted on before the status existed (its last-decision record, no status) is in the cool-down from that record', async () => {
    const { sim, deps } = running();
    const t = sim.clock.now();
    const record = {
      id: 'before-upgrade',
      at: t - 30,
      policy: 'tuning',
      reason: 'r',
      changes: [{ kind: 'replicas' }],
    };
    await sim.patchJob(
      TOY,
      [
        {
          op: 'add',
          path: '/metadata/annotations/trainscaler.io~1last-decision',
          value: JSON.stringify(record),
        },
      ],
      { dryRun: false },
    );
    const held = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(held.applied, false);
    assert.match(held.plan.reason, /cool-down: last change 30 s ago/);
    sim.step(120);
    assert.equal(
      (await actOnJob(TOY, workersTo(3), deps)).applied,
      true,
      'after it: acts, and records its state',
    );
    assert.equal((await job(sim)).state.lastDecisionId !== undefined, true);
  });

  it('a state write that fails after the job write: logged, told as a Warning Event, the decision stands', async () => {
    const { sim, deps, faults, lines, calls } = running();
    faults.state.push(new ApiError('write state', 403, 'forbidden'));
    const outcome = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(outcome.applied, true);
    assert.equal((await job(sim)).view.roles[0]?.replicas, 3);
    assert.equal(await recordedState(sim, TOY), undefined);
    const error = lines.find((l) => l.level === 'error' && l.msg === 'could not record the job state');
    assert.match(String(error?.obj.error), /forbidden/);
    assert.deepEqual(
      calls.filter((c) => /^(putJobState|event)/.test(c)),
      ['putJobState dryRun=false', 'event dryRun=false', 'event dryRun=false'],
    );
    const warning = sim.recordedEvents().find((e) => e.reason === 'TrainscalerStateNotRecorded');
    assert.equal(warning?.type, 'Warning');
    assert.match(warning?.message ?? '', /^decision applied, its state not recorded .*forbidden/);
    // Its last-decision record still holds the cool-down.
    const next = await actOnJob(TOY, workersTo(4), deps);
    assert.equal(next.applied, false);
    assert.match(next.plan.reason, /cool-down/);
  });

  it('a lost Warning Event after a failed state write is logged too, and nothing is undone', async () => {
    const { sim, deps, faults, lines } = running();
    faults.state.push(
      new ConflictError('x'),
      new ConflictError('x'),
      new ConflictError('x'),
      new ConflictError('x'),
    );
    faults.event.push(new ApiError('event', 500, 'down'));
    const outcome = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(outcome.applied, true);
    assert.equal((await job(sim)).view.roles[0]?.replicas, 3);
    assert.deepEqual(
      lines.filter((l) => l.level === 'error').map((l) => l.msg),
      ['could not record the job state', 'could not record the audit Event'],
    );
    assert.match(String(lines.find((l) => l.level === 'error')?.obj.error), /conflict/i);
  });

  it('the status keeps a short reason (the full one is on the job) and what ran when it decided', async () => {
    const { sim, deps } = running();
    const long = 'r'.repeat(STATUS_REASON_LIMIT + 50);
    const outcome = await actOnJob(TOY, (s) => ({ ...(workersTo(3)(s) as Plan), reason: long }), deps);
    assert.equal(outcome.applied, true);
    const { status, last } = await job(sim);
    const decided = status?.lastDecision as { reason: string } | undefined;
    assert.equal(decided?.reason, outcome.plan.reason.slice(0, STATUS_REASON_LIMIT));
    assert.ok(outcome.plan.reason.length <= 120, 'a one-line summary');
    assert.deepEqual(last?.details, [long], 'the job keeps it whole');
    assert.equal(status?.observedWorkers, 2);
  });

  it('a dry run writes no state', async () => {
    const { sim, deps, calls } = running();
    const outcome = await actOnJob(TOY, workersTo(3), { ...deps, dryRun: true });
    assert.equal(outcome.skipped, 'dry-run');
    assert.ok(!calls.some((c) => c.startsWith('putJobState')));
    assert.equal(await recordedState(sim, TOY), undefined);
  });

  it('a state write that conflicts is re-read and written again (logged), onto what is there', async () => {
    const { sim, deps, faults, lines } = running();
    faults.state.push(new ConflictError('state'));
    const outcome = await actOnJob(TOY, workersTo(3), deps);
    assert.equal(outcome.applied, true);
    assert.equal((await job(sim)).state.lastDecisionId, outcome.decisionId);
    assert.deepEqual(
      lines.filter((l) => l.msg === 'state re-read and written again').map((l) => l.obj.conflicts),
      [1],
    );
  });

  it('the schedule’s listed state stands in for the per-job read', async () => {
    const { sim, deps, calls } = running();
    await seedJobState(sim, TOY, { largestRunWorkers: 9 });
    const listed = await sim.listJobStates();
    const snapshot = await loadSnapshot(deps.cluster, TOY, undefined, undefined, (ref) =>
      ref.name === TOY.name ? listed[0] : undefined,
    );
    assert.equal(snapshot.view.state.largestRunWorkers, 9);
    assert.equal(snapshot.stateObject?.name, 'pytorchjob-toy');
    assert.ok(calls.includes('getJob') && !calls.includes('getJobState'));
    await loadSnapshot(deps.cluster, TOY);
    assert.ok(calls.includes('getJobState'), 'without a listing: read per job');
    const none = await loadSnapshot(sim, TOY, undefined, undefined, () => undefined);
    assert.deepEqual(none.view.state, { oomCount: 0, paused: false });
    assert.equal('stateObject' in none, false);
  });
});

describe('actOnJob: more of the guardrail context', () => {
  it('the production memory cap (256 GiB) applies when none is given', async () => {
    const { deps } = setup();
    const outcome = await actOnJob(TOY, (s) => plan([workerMemoryLimit(s, 300 * GiB)]), deps);
    assert.equal((outcome.plan.changes[0] as { to: number }).to, 256 * GiB);
  });

  it('the cluster is listed for the GPU budget only when a GPU role grows and a budget is set', async () => {
    const cpu = setup({
      job: managed(toyJob({ workers: 1, sizing: { gpus: 0, cpuMillis: 1000, memoryBytes: GiB } })),
    });
    await actOnJob(TOY, workersTo(2), { ...cpu.deps, guardrails: { maxClusterGpus: 4 } });
    assert.ok(!cpu.calls.includes('listPods *'), 'a CPU-only role adds no GPU');
    const unlimited = setup();
    await actOnJob(TOY, workersTo(3), unlimited.deps);
    assert.ok(!unlimited.calls.includes('listPods *'), 'no budget by default');
  });

  it('a finished pod holds no GPU: an evicted pod of another job is not counted', async () => {
    const { sim } = harness();
    sim.submitJob(managed(toyJob({ workers: 1, minReplicas: 1, maxReplicas: 16 })));
    sim.submitJob(managed(toyJob({ name: 'other', workers: 2, minReplicas: 1, maxReplicas: 16 })));
    sim.step(60);
    const victim = (await sim.listPods('team-a')).find((p) => p.metadata?.name?.startsWith('other'));
    assert.ok(victim?.metadata?.name);
    await sim.evictPod('team-a', victim.metadata.name, { dryRun: false });
    const pods = await sim.listPods(undefined);
    assert.ok(
      pods.some((p) => p.status?.phase === 'Failed'),
      'the evicted pod is still listed, failed',
    );
    const running = pods.filter((p) => p.status?.phase !== 'Failed' && p.status?.phase !== 'Succeeded');
    const gpus = running.reduce(
      (n, p) => n + Number(p.spec?.containers[0]?.resources?.requests?.['nvidia.com/gpu'] ?? 0),
      0,
    );
    const { client } = door(sim);
    const deps: ActuatorDeps = {
      cluster: client,
      clock: sim.clock.now,
      dryRun: false,
      logger: recordingLogger().logger,
      namespaceAllowlist: [],
      guardrails: { maxClusterGpus: gpus + 1 },
    };
    const outcome = await actOnJob(TOY, workersTo(4), deps);
    assert.deepEqual(outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
  });

  it('a CPU change answering a fault is not an OOM kill', async () => {
    const { sim, deps } = setup();
    await actOnJob(
      TOY,
      (s) =>
        plan(
          [
            {
              kind: 'resources',
              role: 'Worker',
              resource: 'cpu',
              field: 'limits',
              from: s.view.roles[0]?.limits.cpuMillis ?? 0,
              to: 8000,
            },
          ],
          'fault',
        ),
      deps,
    );
    assert.equal((await job(sim)).state.oomCount, 0);
  });

  it('takes the priority the API server resolved on the pods over the class map', async () => {
    const sim = new SimulatedCluster({ seed: 7, apps: FIXED_APP_MODEL, priorityClasses: { high: 500 } });
    sim.submitJob(managed(toyJob({ workers: 2, priorityClassName: 'high' })));
    assert.equal((await loadSnapshot(sim, TOY, { high: 1000 })).view.priority, 1000, 'no pod yet: the map');
    sim.step(30);
    const snap = await loadSnapshot(sim, TOY, { high: 1000 });
    assert.ok(snap.rawPods.length > 0);
    assert.equal(snap.view.priority, 500);
  });
});

describe('actOnJob: when the GPU allocation is read', () => {
  const budget = { guardrails: { maxClusterGpus: 64, cooldownSeconds: 0 } };

  it('not for a memory change, a no-op, or a role the job does not have', async () => {
    const { deps, calls } = setup({ deps: budget });
    const memory: Decide = (s) => plan([workerMemoryLimit(s, 64 * GiB)]);
    assert.equal((await actOnJob(TOY, memory, deps)).applied, true);
    assert.equal((await actOnJob(TOY, workersTo(2), deps)).skipped, 'no-change');
    const ps = await actOnJob(TOY, () => plan([{ kind: 'replicas', role: 'PS', from: 0, to: 3 }]), deps);
    assert.equal(ps.skipped, 'no-change');
    assert.ok(!calls.includes('listPods *'));
    await actOnJob(TOY, workersTo(3), deps);
    assert.ok(calls.includes('listPods *'), 'but for a growth of a GPU role');
  });

  it('a succeeded pod holds no GPU either', async () => {
    const { sim, deps, calls } = setup({ deps: { guardrails: { maxClusterGpus: 4 } } });
    sim.step(60);
    const finished = {
      metadata: { name: 'done-0', namespace: 'team-b', uid: 'done-0' },
      spec: { containers: [{ name: 'c', resources: { requests: { 'nvidia.com/gpu': '2' } } }] },
      status: { phase: 'Succeeded' },
    };
    const cluster: ClusterClient = {
      ...deps.cluster,
      listPods: async (ns, selector) => [
        ...(await deps.cluster.listPods(ns, selector)),
        ...(ns === undefined ? [finished] : []),
      ],
    };
    // 2 declared by this job, the finished pod's 2 not counted: 2 more fit.
    const outcome = await actOnJob(TOY, workersTo(4), { ...deps, cluster });
    assert.equal((outcome.plan.changes[0] as { to: number }).to, 4);
    assert.ok(calls.length > 0);
  });

  it('a pod just created, with no status yet, holds its GPUs; one without a uid is told apart by name', async () => {
    const { sim, deps } = setup({ deps: { guardrails: { maxClusterGpus: 4 } } });
    sim.step(60);
    const fresh = {
      metadata: { name: 'fresh-0', namespace: 'team-b' },
      spec: { containers: [{ name: 'c', resources: { requests: { 'nvidia.com/gpu': '1' } } }] },
    };
    const cluster: ClusterClient = {
      ...deps.cluster,
      listPods: async (ns, selector) => [
        ...(await deps.cluster.listPods(ns, selector)),
        ...(ns === undefined ? [fresh] : []),
      ],
    };
    // 2 declared by this job and the fresh pod's 1: one more fits under 4.
    const outcome = await actOnJob(TOY, workersTo(4), { ...deps, cluster });
    assert.equal((outcome.plan.changes[0] as { to: number }).to, 3);
  });

  it('a job partly placed is not queued: in the cool-down it may drop only replicas never placed', async () => {
    const { sim, deps } = setup({ job: managed(toyJob({ workers: 40, minReplicas: 1, maxReplicas: 64 })) });
    sim.step(60);
    const pods = await sim.listPods('team-a');
    assert.ok(
      pods.some((p) => p.spec?.nodeName) && pods.some((p) => !p.spec?.nodeName),
      'some placed, some not',
    );
    const placed = placedReplicasOf((await loadSnapshot(deps.cluster, TOY)).pods).Worker ?? 0;
    assert.ok(placed > 1 && placed < 39, `placed ${placed}`);
    await actOnJob(TOY, workersTo(39, 'fault'), deps);
    const held = await actOnJob(TOY, workersTo(placed - 1), deps);
    assert.equal(held.skipped, 'no-change');
    assert.match(held.plan.reason, /cool-down/);
    const dropped = await actOnJob(TOY, workersTo(placed), deps);
    assert.equal(dropped.applied, true, 'removing only pods that never started restarts nothing');
    assert.equal((await job(sim)).view.roles[0]?.replicas, placed);
  });
});

describe('loadSnapshot: priority across pods', () => {
  it('takes the highest priority among the job pods (a pod admitted under another class counts)', async () => {
    const { sim } = harness();
    sim.submitJob(managed(toyJob({ workers: 3 })));
    sim.step(30);
    // As if the PriorityClass changed between pod creations: the pods carry different resolved priorities.
    const cluster: ClusterClient = {
      ...door(sim).client,
      listPods: async (ns, selector) =>
        (await sim.listPods(ns, selector)).map((p, i) => ({
          ...p,
          spec: { ...p.spec, containers: p.spec?.containers ?? [], priority: [100, 700, 300][i] ?? 0 },
        })),
    };
    assert.equal((await loadSnapshot(cluster, TOY)).view.priority, 700);
  });
});
