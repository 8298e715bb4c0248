// trainscaler's per-job state store (lib/cluster/job-state.ts): the ScaledTrainingJob's name, what is read from
// its status and what is never read from the job, the one conservative use of the job's last-decision record,
// and writes that survive a conflict without losing or doubling an update.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { JobStateObject, KubeObject } from '../../../lib/cluster/cluster-client.js';
import {
  jobStateLookup,
  jobStateName,
  ownedBy,
  reapplyState,
  STATE_WRITE_ATTEMPTS,
  stateOfStatus,
  trustedStateOf,
  writeJobState,
} from '../../../lib/cluster/job-state.js';
import { ApiError, ConflictError } from '../../../lib/errors.js';
import type { JobAutoscalerState, JobRef } from '../../../lib/types.js';
import { MemoryJobStates } from '../../support/job-states.js';

const REF: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const IDENTITY = { ref: REF, uid: 'uid-1', apiVersion: 'kubeflow.org/v1' };

function jobObj(annotations: Record<string, string> = {}, uid = 'uid-1'): KubeObject {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name: 'bert', namespace: 'team-a', uid, annotations },
  };
}

function stored(status: unknown, ownerUid: string | undefined = 'uid-1'): JobStateObject {
  const out: JobStateObject = {
    namespace: 'team-a',
    name: 'pytorchjob-bert',
    resourceVersion: '7',
    target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert' },
    status,
  };
  if (ownerUid !== undefined) out.ownerUid = ownerUid;
  return out;
}

const lastDecision = (record: object) => ({ [ANNOTATION.lastDecision]: JSON.stringify(record) });

describe('jobStateName', () => {
  it('is <kind lowercased>-<job name> when that is a valid object name', () => {
    assert.equal(jobStateName('PyTorchJob', 'bert'), 'pytorchjob-bert');
    assert.equal(jobStateName('StatefulSet', 'a.b-c'), 'statefulset-a.b-c');
  });

  it('too long or not a DNS subdomain: a valid prefix and a hash, distinct per job, at most 253 characters', () => {
    const long = 'x'.repeat(250);
    const name = jobStateName('PyTorchJob', long);
    assert.ok(name.length <= 253, `${name.length}`);
    assert.match(name, /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    assert.match(name, /^pytorchjob-x+-[0-9a-f]{10}$/);
    assert.notEqual(name, jobStateName('PyTorchJob', `${long.slice(1)}y`));
    assert.notEqual(name, jobStateName('TFJob', long));
    // The prefix is cut to make room for the hash; a cut ending on '-' or '.' is trimmed.
    const cut = jobStateName('Job', `${'a'.repeat(236)}-.${'b'.repeat(20)}`);
    assert.match(cut, /^job-a+-[0-9a-f]{10}$/);
    const odd = jobStateName('Job', 'Bad_Name.-x');
    assert.match(odd, /^job-bad-name\.x-[0-9a-f]{10}$/);
    assert.match(jobStateName('Job', '---'), /^job-[0-9a-f]{10}$/);
    assert.equal(jobStateName('Job', `${'a'.repeat(249)}`), `job-${'a'.repeat(249)}`, 'exactly 253: kept');
    assert.notEqual(jobStateName('Job', `${'a'.repeat(250)}`), `job-${'a'.repeat(250)}`, '254: hashed');
  });
});

describe('stateOfStatus', () => {
  it('keeps the typed fields, defaults the wrong types, and drops what is no measurement', () => {
    assert.deepEqual(
      stateOfStatus({
        oomCount: 1,
        paused: true,
        lastActionAt: 5,
        lastDecisionId: 'd',
        pauseReason: 'why',
        scaleDowns: 2,
        askedWorkers: 0,
        largestRunWorkers: 12,
        lastRescale: { at: 1, from: 2, to: 3 },
        rescaleCost: { upPause: 4, upToFirstStep: 5, down: 6, measuredFor: 1 },
      }),
      {
        oomCount: 1,
        paused: true,
        lastActionAt: 5,
        lastDecisionId: 'd',
        pauseReason: 'why',
        scaleDowns: 2,
        askedWorkers: 0,
        largestRunWorkers: 12,
        lastRescale: { at: 1, from: 2, to: 3 },
        rescaleCost: { upPause: 4, upToFirstStep: 5, down: 6, measuredFor: 1 },
      },
    );
    assert.deepEqual(
      stateOfStatus({
        oomCount: '1',
        paused: 'yes',
        lastActionAt: '5',
        lastDecisionId: 7,
        pauseReason: 1,
        scaleDowns: -1,
        askedWorkers: 2.5,
        lastRescale: { at: 1, from: 2 },
        rescaleCost: { upPause: 0, down: -3, upToFirstStep: '4', measuredFor: 'x' },
      }),
      { oomCount: 0, paused: false, rescaleCost: {} },
    );
    assert.deepEqual(stateOfStatus(undefined), { oomCount: 0, paused: false });
    assert.deepEqual(stateOfStatus(5), { oomCount: 0, paused: false });
    assert.equal(stateOfStatus({ oomCount: 1.5 }).oomCount, 0);
    assert.equal(stateOfStatus({ lastActionAt: Number.NaN }).lastActionAt, undefined);
    assert.equal(
      stateOfStatus({ lastRescale: { at: 1, from: 2, to: Number.POSITIVE_INFINITY } }).lastRescale,
      undefined,
    );
    // A size run at lets growth past the step: only a positive whole count is one.
    for (const bad of [0, -3, 2.5, '12', null])
      assert.equal(stateOfStatus({ largestRunWorkers: bad }).largestRunWorkers, undefined, String(bad));
  });
});

describe('trustedStateOf: the status, never the job', () => {
  it('reads the status made for this job and ignores the old state annotation', () => {
    const job = jobObj({ [ANNOTATION.state]: JSON.stringify({ largestRunWorkers: 64, lastActionAt: 0 }) });
    const state = trustedStateOf(job, stored({ lastActionAt: 100, largestRunWorkers: 2, oomCount: 1 }));
    assert.deepEqual(state, { oomCount: 1, paused: false, lastActionAt: 100, largestRunWorkers: 2 });
    assert.deepEqual(trustedStateOf(job, undefined), { oomCount: 0, paused: false }, 'no status: fresh');
  });

  it('a status made for an earlier job of the same name (another uid) is not this job’s', () => {
    const status = { lastActionAt: 100, largestRunWorkers: 64 };
    assert.equal(ownedBy(stored(status, 'uid-0'), jobObj()), false);
    const unowned = stored(status);
    delete unowned.ownerUid;
    const noUid = jobObj();
    delete noUid.metadata.uid;
    assert.equal(ownedBy(unowned, noUid), false, 'no owner, no uid: not a match');
    assert.equal(ownedBy(undefined, jobObj()), false);
    assert.equal(ownedBy(stored(status), jobObj()), true);
    assert.deepEqual(trustedStateOf(jobObj(), stored(status, 'uid-0')), { oomCount: 0, paused: false });
  });

  it('the last-decision record starts a cool-down only when the status does not hold it and only if later', () => {
    const record = { id: 'd2', at: 500, changes: [{ kind: 'replicas' }] };
    // No status (acted on before the status existed): the record's time starts the cool-down.
    assert.equal(trustedStateOf(jobObj(lastDecision(record)), undefined).lastActionAt, 500);
    // The status lags (its write failed): the later record wins.
    assert.equal(
      trustedStateOf(jobObj(lastDecision(record)), stored({ lastActionAt: 100 })).lastActionAt,
      500,
    );
    // The status holds the decision: the status is the truth, whatever the record's time says.
    const held = stored({ lastActionAt: 490, lastDecisionId: 'd2' });
    assert.equal(trustedStateOf(jobObj(lastDecision(record)), held).lastActionAt, 490);
    // A tenant's record can never shorten the cool-down the status started.
    const earlier = { id: 'forged', at: 0, changes: [{ kind: 'replicas' }] };
    assert.equal(
      trustedStateOf(jobObj(lastDecision(earlier)), stored({ lastActionAt: 100 })).lastActionAt,
      100,
    );
    assert.equal(
      trustedStateOf(jobObj(lastDecision({ ...record, at: 100 })), stored({ lastActionAt: 100 }))
        .lastActionAt,
      100,
    );
    // A node preference alone starts no cool-down; neither does a record without changes, time or JSON.
    const preferOnly = { id: 'p', at: 500, changes: [{ kind: 'prefer-node' }] };
    assert.equal(trustedStateOf(jobObj(lastDecision(preferOnly)), undefined).lastActionAt, undefined);
    const mixed = { id: 'm', at: 500, changes: [{ kind: 'prefer-node' }, { kind: 'pause' }] };
    assert.equal(trustedStateOf(jobObj(lastDecision(mixed)), undefined).lastActionAt, 500);
    assert.equal(
      trustedStateOf(jobObj(lastDecision({ id: 'x', at: 500 })), undefined).lastActionAt,
      undefined,
    );
    assert.equal(
      trustedStateOf(jobObj(lastDecision({ id: 'x', at: '500', changes: [{}] })), undefined).lastActionAt,
      undefined,
    );
    assert.equal(trustedStateOf(jobObj(lastDecision([record])), undefined).lastActionAt, undefined);
    assert.equal(
      trustedStateOf(jobObj({ [ANNOTATION.lastDecision]: '{' }), undefined).lastActionAt,
      undefined,
    );
    // A record without an id is still a decision the status does not hold.
    assert.equal(
      trustedStateOf(jobObj(lastDecision({ at: 500, changes: [5] })), undefined).lastActionAt,
      500,
    );
  });
});

describe('jobStateLookup', () => {
  it('finds a job’s ScaledTrainingJob by namespace and name, and nothing for another job', () => {
    const lookup = jobStateLookup([stored({ oomCount: 1 }), { ...stored({}), namespace: 'team-b' }]);
    assert.deepEqual(lookup(REF)?.status, { oomCount: 1 });
    assert.equal(lookup({ ...REF, name: 'other' }), undefined);
    assert.equal(lookup({ ...REF, kind: 'TFJob' }), undefined);
    assert.deepEqual(lookup({ ...REF, namespace: 'team-b' })?.namespace, 'team-b');
  });
});

describe('reapplyState', () => {
  const before: JobAutoscalerState = { oomCount: 1, paused: false, scaleDowns: 1, lastActionAt: 100 };
  it('adds counters, keeps the later instant and the larger run, the first asked size, and takes the rest', () => {
    const after: JobAutoscalerState = {
      oomCount: 2,
      paused: true,
      pauseReason: 'oom',
      scaleDowns: 2,
      lastActionAt: 200,
      lastDecisionId: 'mine',
      largestRunWorkers: 4,
      askedWorkers: 3,
      lastRescale: { at: 200, from: 4, to: 3 },
      rescaleCost: { down: 5 },
    };
    const current: JobAutoscalerState = {
      oomCount: 5,
      paused: false,
      scaleDowns: 3,
      lastActionAt: 250,
      lastDecisionId: 'theirs',
      largestRunWorkers: 6,
      askedWorkers: 2,
    };
    assert.deepEqual(reapplyState(current, before, after), {
      oomCount: 6,
      paused: true,
      pauseReason: 'oom',
      scaleDowns: 4,
      lastActionAt: 250,
      lastDecisionId: 'mine',
      largestRunWorkers: 6,
      askedWorkers: 2,
      lastRescale: { at: 200, from: 4, to: 3 },
      rescaleCost: { down: 5 },
    });
    const bare: JobAutoscalerState = { oomCount: 0, paused: false };
    assert.deepEqual(reapplyState(bare, before, after), {
      oomCount: 1,
      paused: true,
      pauseReason: 'oom',
      scaleDowns: 1,
      lastActionAt: 200,
      lastDecisionId: 'mine',
      largestRunWorkers: 4,
      askedWorkers: 3,
      lastRescale: { at: 200, from: 4, to: 3 },
      rescaleCost: { down: 5 },
    });
  });

  it('what this decision did not change stays as the other write left it', () => {
    const current: JobAutoscalerState = {
      oomCount: 9,
      paused: true,
      pauseReason: 'x',
      scaleDowns: 7,
      lastActionAt: 50,
    };
    assert.deepEqual(reapplyState(current, before, { ...before }), current);
    const noPrior: JobAutoscalerState = { oomCount: 0, paused: false };
    assert.deepEqual(
      reapplyState({ oomCount: 0, paused: false, scaleDowns: 2 }, noPrior, { ...noPrior, scaleDowns: 1 }),
      { oomCount: 0, paused: false, scaleDowns: 3 },
    );
    assert.deepEqual(reapplyState({ oomCount: 0, paused: false }, noPrior, { ...noPrior, scaleDowns: 1 }), {
      oomCount: 0,
      paused: false,
      scaleDowns: 1,
    });
  });
});

describe('writeJobState', () => {
  const update = (after: Partial<JobAutoscalerState>) => ({
    before: { oomCount: 0, paused: false } as JobAutoscalerState,
    after: { oomCount: 0, paused: false, ...after } as JobAutoscalerState,
    extra: { observedWorkers: 2 },
  });

  it('creates the object owned by the job, then replaces its status guarded by what was read', async () => {
    const store = new MemoryJobStates();
    const first = await writeJobState(
      store,
      IDENTITY,
      update({ lastActionAt: 10, lastDecisionId: 'a' }),
      undefined,
      {
        dryRun: false,
      },
    );
    assert.equal(first.conflicts, 0);
    const created = await store.getJobState(REF);
    assert.equal(created?.ownerUid, 'uid-1');
    assert.deepEqual(created?.status, {
      oomCount: 0,
      paused: false,
      lastActionAt: 10,
      lastDecisionId: 'a',
      observedWorkers: 2,
    });
    await writeJobState(store, IDENTITY, update({ lastActionAt: 20, lastDecisionId: 'b' }), created, {
      dryRun: false,
    });
    assert.equal(stateOfStatus((await store.getJobState(REF))?.status).lastActionAt, 20);
  });

  it('keeps the conditions it finds (another writer’s), and writes only the status it is given', async () => {
    const store = new MemoryJobStates();
    await writeJobState(store, IDENTITY, update({}), undefined, { dryRun: false });
    const read = await store.getJobState(REF);
    assert.ok(read);
    const conditions = [{ type: 'Active', status: 'True' }];
    const withConditions = await store.putJobState(
      IDENTITY,
      { oomCount: 0, paused: false, conditions },
      read,
      {
        dryRun: false,
      },
    );
    await writeJobState(store, IDENTITY, update({ lastDecisionId: 'c' }), withConditions, { dryRun: false });
    assert.deepEqual((await store.getJobState(REF))?.status, {
      oomCount: 0,
      paused: false,
      lastDecisionId: 'c',
      observedWorkers: 2,
      conditions,
    });
  });

  it('on a conflict: re-reads and carries the same update onto what another write left', async () => {
    const store = new MemoryJobStates();
    await writeJobState(store, IDENTITY, update({ oomCount: 2, lastDecisionId: 'x' }), undefined, {
      dryRun: false,
    });
    const stale = await store.getJobState(REF);
    // Another decision wrote in between.
    await store.putJobState(
      IDENTITY,
      { oomCount: 3, paused: false, lastDecisionId: 'y', scaleDowns: 1 },
      stale,
      {
        dryRun: false,
      },
    );
    const outcome = await writeJobState(
      store,
      IDENTITY,
      {
        before: { oomCount: 2, paused: false },
        after: { oomCount: 3, paused: false, lastDecisionId: 'z' },
        extra: {},
      },
      stale,
      { dryRun: false },
    );
    assert.equal(outcome.conflicts, 1);
    assert.deepEqual(stateOfStatus((await store.getJobState(REF))?.status), {
      oomCount: 4,
      paused: false,
      lastDecisionId: 'z',
      scaleDowns: 1,
    });
  });

  it('a create that meets an object made meanwhile updates it; an object for an earlier job is re-owned whole', async () => {
    const store = new MemoryJobStates();
    await store.putJobState({ ...IDENTITY, uid: 'uid-0' }, { oomCount: 7, paused: true }, undefined, {
      dryRun: false,
    });
    const outcome = await writeJobState(store, IDENTITY, update({ lastDecisionId: 'n' }), undefined, {
      dryRun: false,
    });
    assert.equal(outcome.conflicts, 1);
    const now = await store.getJobState(REF);
    assert.equal(now?.ownerUid, 'uid-1');
    assert.deepEqual(
      stateOfStatus(now?.status),
      { oomCount: 0, paused: false, lastDecisionId: 'n' },
      'not the old job’s',
    );
  });

  it('finds its own decision already written (a repeat after a lost answer) and writes nothing more', async () => {
    const store = new MemoryJobStates();
    await writeJobState(store, IDENTITY, update({ oomCount: 1, lastDecisionId: 'd' }), undefined, {
      dryRun: false,
    });
    const writes = store.writes.length;
    const outcome = await writeJobState(
      store,
      IDENTITY,
      update({ oomCount: 1, lastDecisionId: 'd' }),
      undefined,
      {
        dryRun: false,
      },
    );
    assert.deepEqual(outcome, { written: undefined, conflicts: 1 });
    assert.equal(store.writes.length, writes);
    assert.equal(stateOfStatus((await store.getJobState(REF))?.status).oomCount, 1, 'not counted twice');
  });

  it('gives up after a bounded number of conflicts; other errors are not retried', async () => {
    const store = new MemoryJobStates();
    let puts = 0;
    const always = {
      getJobState: (ref: JobRef) => store.getJobState(ref),
      putJobState: async () => {
        puts++;
        throw new ConflictError('state');
      },
    };
    await assert.rejects(
      writeJobState(always as never, IDENTITY, update({ lastDecisionId: 'q' }), undefined, { dryRun: false }),
      ConflictError,
    );
    assert.equal(puts, STATE_WRITE_ATTEMPTS);
    puts = 0;
    const broken = {
      ...always,
      putJobState: async () => {
        puts++;
        throw new ApiError('state', 500, 'boom');
      },
    };
    await assert.rejects(
      writeJobState(broken as never, IDENTITY, update({}), undefined, { dryRun: false }),
      ApiError,
    );
    assert.equal(puts, 1);
  });
});
