// RetryingClusterClient rule by rule, on a scripted client (no simulator): what is retried and how often,
// the backoff, each attempt's signal and time limit, what is passed through once, and how a patch whose
// answer was lost is settled. The same rules end to end on the simulator: test/reliability/retrying-client.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type {
  AuditEventInput,
  ClusterClient,
  JsonPatchOp,
  KubeObject,
  ReadOptions,
  WriteOptions,
} from '../../../lib/cluster/cluster-client.js';
import {
  DEFAULT_RETRY_OPTIONS,
  findDecision,
  isTransient,
  patchIdentity,
  RetryingClusterClient,
  type RetryOptions,
} from '../../../lib/cluster/retrying-cluster-client.js';
import {
  ApiError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.js';
import type { JobRef } from '../../../lib/types.js';

const REF: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'toy' };
const fast: Partial<RetryOptions> = {
  baseDelayMs: 1,
  maxDelayMs: 1,
  attemptTimeoutMs: 1_000,
  random: () => 0,
};
const OFF: WriteOptions = { dryRun: false };
const busy = () => new ApiError('x', 503, 'busy');
const POLICY: KubeObject = {
  apiVersion: 'trainscaler.io/v1alpha1',
  kind: 'TrainingAutoscaler',
  metadata: { name: 'policy' },
};

type Step = Error | 'hang' | undefined;

/** A client whose every method plays its script, call by call (then succeeds), recording what it was given. */
function scripted(script: Partial<Record<keyof ClusterClient, Step[]>> = {}, job?: () => KubeObject) {
  const calls: { method: string; args: unknown[]; options: ReadOptions | WriteOptions | undefined }[] = [];
  const count = (method: string) => calls.filter((c) => c.method === method).length;
  const play =
    <T>(method: keyof ClusterClient, value: () => T) =>
    (...args: unknown[]): Promise<T> => {
      const options = args.at(-1) as ReadOptions | WriteOptions | undefined;
      calls.push({ method, args: args.slice(0, -1), options });
      const step = script[method]?.[count(method) - 1];
      if (step === 'hang') return new Promise(() => {});
      if (step) return Promise.reject(step);
      return Promise.resolve(value());
    };
  const current =
    job ?? (() => ({ apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', metadata: { name: 'toy' } }));
  const client: ClusterClient = {
    getJob: play('getJob', current),
    listJobs: play('listJobs', () => []),
    listPods: play('listPods', () => []),
    listNodes: play('listNodes', () => []),
    listWorkloads: play('listWorkloads', () => []),
    getLocalQueue: play('getLocalQueue', current),
    getClusterQueue: play('getClusterQueue', current),
    getConfigMap: play('getConfigMap', () => undefined),
    patchJob: play('patchJob', current),
    evictPod: play('evictPod', () => undefined),
    createEvent: play('createEvent', () => undefined),
    putConfigMap: play('putConfigMap', () => ({ metadata: { name: 'cm' } })),
    servesPodResize: play('servesPodResize', () => true),
    resizePod: play('resizePod', () => ({ metadata: { name: 'p' } })),
    getJobState: play('getJobState', () => undefined),
    listJobStates: play('listJobStates', () => []),
    listTrainingAutoscalers: play('listTrainingAutoscalers', () => []),
    putTrainingAutoscalerStatus: play('putTrainingAutoscalerStatus', () => POLICY),
    putJobState: play('putJobState', () => ({
      namespace: 'ns',
      name: 'pytorchjob-toy',
      resourceVersion: '1',
      target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'toy' },
      status: {},
    })),
  };
  return { client, calls, count };
}

const record = (id: string, write?: string) =>
  JSON.stringify({ id, at: 1, policy: 'tuning', reason: 'r', changes: [], ...(write ? { write } : {}) });

/** A guarded patch recording decision `id` (nonce `write`), pinned to resourceVersion `rv`. */
function guardedPatch(id: string, write: string, rv = '7'): JsonPatchOp[] {
  return [
    { op: 'replace', path: '/metadata/resourceVersion', value: rv },
    { op: 'add', path: '/metadata/annotations/trainscaler.io~1last-decision', value: record(id, write) },
  ];
}

function jobWith(rv: string, annotations: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name: 'toy', resourceVersion: rv, annotations },
  };
}

describe('isTransient', () => {
  it('is true for 5xx, 429 and failures without a status; false for other statuses and untyped errors', () => {
    assert.equal(isTransient(new ApiError('x', undefined, 'reset')), true);
    assert.equal(isTransient(new ApiError('x', 429, '')), true);
    assert.equal(isTransient(new ApiError('x', 500, '')), true);
    assert.equal(isTransient(new ApiError('x', 503, '')), true);
    assert.equal(isTransient(new ApiError('x', 499, '')), false);
    assert.equal(isTransient(new ApiError('x', 428, '')), false);
    assert.equal(isTransient(new ApiError('x', 430, '')), false);
    assert.equal(isTransient(new ApiError('x', 400, '')), false);
    assert.equal(isTransient(new ConflictError('x')), false);
    assert.equal(isTransient(new Error('x')), false);
    assert.equal(isTransient('503'), false);
  });
});

describe('patchIdentity', () => {
  it('reads the guard only from a first op on metadata.resourceVersion with a string value', () => {
    assert.deepEqual(patchIdentity([{ op: 'replace', path: '/metadata/resourceVersion', value: '3' }]), {
      guardedBy: '3',
    });
    assert.deepEqual(patchIdentity([{ op: 'replace', path: '/metadata/resourceVersion', value: 3 }]), {});
    assert.deepEqual(
      patchIdentity([
        { op: 'test', path: '/spec', value: 1 },
        { op: 'replace', path: '/metadata/resourceVersion', value: '3' },
      ]),
      {},
    );
    assert.deepEqual(patchIdentity([]), {});
  });

  it('reads the decision from the last-decision path or from a whole annotations object', () => {
    assert.deepEqual(
      patchIdentity([
        {
          op: 'add',
          path: '/metadata/annotations',
          value: { [ANNOTATION.lastDecision]: record('d1', 'w1') },
        },
      ]),
      { decisionId: 'd1', write: 'w1' },
    );
    assert.deepEqual(
      patchIdentity([
        { op: 'add', path: '/metadata/annotations/trainscaler.io~1last-decision', value: record('d2') },
      ]),
      { decisionId: 'd2' },
    );
  });

  it('ignores what is not a trainscaler record', () => {
    const last = '/metadata/annotations/trainscaler.io~1last-decision';
    for (const value of [
      '{',
      '"a string"',
      'null',
      JSON.stringify({ noId: 1 }),
      JSON.stringify({ id: 7 }),
      42,
      { id: 'not a string value' },
    ])
      assert.deepEqual(patchIdentity([{ op: 'add', path: last, value }]), {}, JSON.stringify(value));
    assert.deepEqual(patchIdentity([{ op: 'add', path: '/metadata/annotations', value: null }]), {});
    assert.deepEqual(patchIdentity([{ op: 'add', path: '/metadata/annotations', value: 'x' }]), {});
    assert.deepEqual(patchIdentity([{ op: 'add', path: '/metadata/labels', value: record('d') }]), {});
    assert.deepEqual(
      patchIdentity([
        { op: 'add', path: '/metadata/labels', value: { [ANNOTATION.lastDecision]: record('d') } },
      ]),
      {},
      'only the annotations object is read whole',
    );
    assert.deepEqual(patchIdentity([{ op: 'add', path: last, value: [record('d')] }]), {}, 'not a string');
    assert.deepEqual(
      patchIdentity([{ op: 'add', path: last, value: JSON.stringify({ id: 'd', write: 5 }) }]),
      { decisionId: 'd' },
      'a nonce that is not a string is no nonce',
    );
  });
});

describe('findDecision', () => {
  it('finds the decision as the last decision or in the history, ours by its nonce', () => {
    const job = (key: string, value: string) => jobWith('1', { [key]: value });
    assert.equal(findDecision(job(ANNOTATION.lastDecision, record('d', 'w')), 'd', 'w'), 'ours');
    assert.equal(findDecision(job(ANNOTATION.lastDecision, record('d', 'other')), 'd', 'w'), 'duplicate');
    assert.equal(findDecision(job(ANNOTATION.lastDecision, record('d')), 'd', 'w'), 'duplicate');
    assert.equal(findDecision(job(ANNOTATION.lastDecision, record('d', 'x')), 'd', undefined), 'ours');
    assert.equal(findDecision(job(ANNOTATION.lastDecision, record('e', 'w')), 'd', 'w'), undefined);
    const history = `[${record('a', 'w')},${record('d', 'w')}]`;
    assert.equal(findDecision(job(ANNOTATION.history, history), 'd', 'w'), 'ours');
    const both = jobWith('1', {
      [ANNOTATION.lastDecision]: record('d', 'dup'),
      [ANNOTATION.history]: `[${record('d', 'dup')},${record('d', 'w')}]`,
    });
    assert.equal(findDecision(both, 'd', 'w'), 'ours', 'ours wherever it is, even after a duplicate');
  });

  it('proves nothing from a missing, corrupt or foreign annotation', () => {
    assert.equal(findDecision(jobWith('1'), 'd', 'w'), undefined);
    assert.equal(findDecision({ ...jobWith('1'), metadata: { name: 'toy' } }, 'd', 'w'), undefined);
    for (const raw of ['{', '[1, null, "d", {"noid": 1}]', '""'])
      assert.equal(findDecision(jobWith('1', { [ANNOTATION.history]: raw }), 'd', 'w'), undefined, raw);
    for (const stray of ['1', 'null', '"d"'])
      assert.equal(
        findDecision(jobWith('1', { [ANNOTATION.history]: `[${stray},${record('d', 'w')}]` }), 'd', 'w'),
        'ours',
        `a stray ${stray} entry does not hide the records after it`,
      );
    const corruptThenGood = jobWith('1', {
      [ANNOTATION.lastDecision]: '{',
      [ANNOTATION.history]: `[${record('d', 'w')}]`,
    });
    assert.equal(findDecision(corruptThenGood, 'd', 'w'), 'ours');
  });
});

describe('RetryingClusterClient: reads', () => {
  it('retries a transient failure up to maxAttempts, and no other failure', async () => {
    const down = scripted({ getJob: [busy(), busy(), busy(), busy()] });
    await assert.rejects(
      new RetryingClusterClient(down.client, { ...fast, maxAttempts: 3 }).getJob(REF),
      /busy/,
    );
    assert.equal(down.count('getJob'), 3);
    for (const error of [
      new NotFoundError('x'),
      new ForbiddenError('x', 'no'),
      new ApiError('x', 400, 'bad'),
    ]) {
      const once = scripted({ listPods: [error] });
      await assert.rejects(new RetryingClusterClient(once.client, fast).listPods('n'), (e) => e === error);
      assert.equal(once.count('listPods'), 1);
    }
    const recovers = scripted({ listNodes: [busy(), new ApiError('x', undefined, 'reset')] });
    assert.deepEqual(await new RetryingClusterClient(recovers.client, fast).listNodes(), []);
    assert.equal(recovers.count('listNodes'), 3);
  });

  it('backs off with full jitter: uniform below min(maxDelay, base x 2^(n-1)), reported before each retry', async () => {
    const retries: { operation: string; attempt: number; error: unknown; delayMs: number }[] = [];
    const error = busy();
    const down = scripted({ listJobs: Array.from({ length: 5 }, () => error) });
    const started = Date.now();
    await assert.rejects(
      new RetryingClusterClient(down.client, {
        maxAttempts: 5,
        baseDelayMs: 10,
        maxDelayMs: 50,
        attemptTimeoutMs: 1_000,
        random: () => 0.99,
        onRetry: (info) => retries.push(info),
      }).listJobs('PyTorchJob', 'team-a'),
    );
    assert.deepEqual(
      retries.map((r) => [r.operation, r.attempt, r.delayMs]),
      [
        ['list PyTorchJob', 1, 9],
        ['list PyTorchJob', 2, 19],
        ['list PyTorchJob', 3, 39],
        ['list PyTorchJob', 4, 49],
      ],
    );
    assert.ok(retries.every((r) => r.error === error));
    assert.ok(Date.now() - started >= 9 + 19 + 39 + 49 - 5, 'the delays are waited');
  });

  it('has production defaults: 6 attempts, 100 ms base, 10 s per attempt', async () => {
    assert.deepEqual(
      { ...DEFAULT_RETRY_OPTIONS, random: undefined },
      { maxAttempts: 6, baseDelayMs: 100, maxDelayMs: 2_000, attemptTimeoutMs: 10_000, random: undefined },
    );
    assert.equal(DEFAULT_RETRY_OPTIONS.random, Math.random);
    const delays: number[] = [];
    const down = scripted({ getConfigMap: Array.from({ length: 9 }, busy) });
    await assert.rejects(
      new RetryingClusterClient(down.client, {
        random: () => 0.5,
        onRetry: (i) => delays.push(i.delayMs),
      }).getConfigMap('n', 'cm'),
    );
    assert.deepEqual(delays, [50, 100, 200, 400, 800]);
    assert.equal(down.calls[0]?.options?.timeoutMs, 10_000);
    const plain = scripted();
    await new RetryingClusterClient(plain.client).getClusterQueue('q');
    assert.equal(plain.calls[0]?.options?.timeoutMs, 10_000);
  });

  it('an attempt that answered in time is not aborted afterwards', async () => {
    const ok = scripted();
    await new RetryingClusterClient(ok.client, { ...fast, attemptTimeoutMs: 20 }).getLocalQueue('n', 'q');
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(ok.calls[0]?.options?.signal?.aborted, false);
  });

  it('names each read in its time-out', async () => {
    const hung = scripted({
      getJob: ['hang'],
      listJobs: ['hang'],
      listPods: ['hang'],
      listNodes: ['hang'],
      listWorkloads: ['hang'],
      getLocalQueue: ['hang'],
      getClusterQueue: ['hang'],
      getConfigMap: ['hang'],
      servesPodResize: ['hang'],
      resizePod: ['hang'],
      createEvent: ['hang'],
    });
    const c = new RetryingClusterClient(hung.client, { ...fast, maxAttempts: 1, attemptTimeoutMs: 5 });
    const cases: [Promise<unknown>, string][] = [
      [c.getJob(REF), 'get PyTorchJob team-a/toy'],
      [c.listJobs('Job'), 'list Job'],
      [c.listPods(undefined), 'list pods'],
      [c.listNodes(), 'list nodes'],
      [c.listWorkloads('n', 's'), 'list workloads'],
      [c.getLocalQueue('n', 'q'), 'get localqueue'],
      [c.getClusterQueue('q'), 'get clusterqueue'],
      [c.getConfigMap('n', 'cm'), 'get configmap'],
      [c.servesPodResize(), 'discover pods/resize'],
      [c.resizePod('n', 'p', [], OFF), 'resize pod n/p'],
      [c.createEvent(event(), OFF), 'create event'],
    ];
    for (const [call, what] of cases)
      await assert.rejects(
        call,
        (e: unknown) => e instanceof ApiError && e.message === `${what} failed: no answer within 5 ms`,
      );
  });

  it('passes the arguments through', async () => {
    const door = scripted();
    const c = new RetryingClusterClient(door.client, fast);
    await c.getJob(REF);
    await c.listJobs('TFJob', 'ns');
    await c.listPods('ns', 'a=b');
    await c.listWorkloads('ns', 'c=d');
    await c.getLocalQueue('ns', 'lq');
    await c.getClusterQueue('cq');
    await c.getConfigMap('ns', 'cm');
    assert.deepEqual(
      door.calls.map((call) => [call.method, ...call.args]),
      [
        ['getJob', REF],
        ['listJobs', 'TFJob', 'ns'],
        ['listPods', 'ns', 'a=b'],
        ['listWorkloads', 'ns', 'c=d'],
        ['getLocalQueue', 'ns', 'lq'],
        ['getClusterQueue', 'cq'],
        ['getConfigMap', 'ns', 'cm'],
      ],
    );
  });

  it('lists TrainingAutoscalers through the inner client, retried; none from a client that serves none', async () => {
    const flaky = scripted({ listTrainingAutoscalers: [busy()] });
    const c = new RetryingClusterClient(flaky.client, fast);
    assert.deepEqual(await c.listTrainingAutoscalers('ns'), []);
    assert.deepEqual(
      flaky.calls.map((call) => [call.method, ...call.args]),
      [
        ['listTrainingAutoscalers', 'ns'],
        ['listTrainingAutoscalers', 'ns'],
      ],
    );
    const { listTrainingAutoscalers: _, ...without } = scripted().client;
    assert.deepEqual(await new RetryingClusterClient(without, fast).listTrainingAutoscalers(), []);
  });

  it("names the TrainingAutoscalers' namespace, or none, in each retry it reports", async () => {
    const operations: string[] = [];
    const reporting = {
      ...fast,
      onRetry: ({ operation }: { operation: string }) => operations.push(operation),
    };
    const flaky = () => scripted({ listTrainingAutoscalers: [busy()] }).client;
    await new RetryingClusterClient(flaky(), reporting).listTrainingAutoscalers('ns');
    await new RetryingClusterClient(flaky(), reporting).listTrainingAutoscalers();
    assert.deepEqual(operations, ['list trainingautoscalers in ns', 'list trainingautoscalers']);
  });

  it('writes a TrainingAutoscaler status once through the inner client (never retried); refuses without one', async () => {
    const policy = { ...POLICY, metadata: { name: 'policy', resourceVersion: '4' } };
    const flaky = scripted({ putTrainingAutoscalerStatus: [busy()] });
    const c = new RetryingClusterClient(flaky.client, fast);
    await assert.rejects(c.putTrainingAutoscalerStatus(policy, { ready: true }, OFF), /busy/);
    assert.equal(flaky.count('putTrainingAutoscalerStatus'), 1);
    assert.deepEqual(await c.putTrainingAutoscalerStatus(policy, { ready: true }, OFF), POLICY);
    assert.deepEqual(flaky.calls.at(-1)?.args, [policy, { ready: true }]);
    assert.deepEqual(flaky.calls.at(-1)?.options, OFF);
    const { putTrainingAutoscalerStatus: _, ...without } = scripted().client;
    assert.throws(
      () => new RetryingClusterClient(without, fast).putTrainingAutoscalerStatus(policy, {}, OFF),
      /this cluster client cannot write TrainingAutoscaler status/,
    );
  });

  it('discovers pods/resize through the inner client, retried; false when the inner client cannot resize', async () => {
    const flaky = scripted({ servesPodResize: [busy()] });
    assert.equal(await new RetryingClusterClient(flaky.client, fast).servesPodResize(), true);
    assert.equal(flaky.count('servesPodResize'), 2);
    const { servesPodResize: _, ...without } = scripted().client;
    assert.equal(await new RetryingClusterClient(without, fast).servesPodResize(), false);
  });
});

describe('RetryingClusterClient: write attempts', () => {
  it("bounds each attempt by its own signal and limit, and keeps the caller's signal and shorter limit", async () => {
    const door = scripted({ resizePod: [busy()] });
    const c = new RetryingClusterClient(door.client, { ...fast, attemptTimeoutMs: 500 });
    const caller = new AbortController();
    await c.resizePod('n', 'p', [], { dryRun: false, signal: caller.signal, timeoutMs: 200 });
    const [first, second] = door.calls.map((x) => x.options as WriteOptions);
    assert.ok(first?.signal && second?.signal && first.signal !== second.signal);
    assert.equal(first.timeoutMs, 200, "the caller's shorter limit");
    assert.equal(first.dryRun, false);
    caller.abort();
    assert.equal(second.signal.aborted, true, "the caller's signal cancels the attempt");
    await c.resizePod('n', 'p', [], { dryRun: true, timeoutMs: 900 });
    const third = door.calls.at(-1)?.options as WriteOptions;
    assert.equal(third.timeoutMs, 500, 'no longer than an attempt');
    assert.equal(third.dryRun, true);
    assert.equal(third.signal?.aborted, false);
    await c.createEvent(event(), OFF);
    assert.equal(door.calls.at(-1)?.options?.timeoutMs, 500, 'no caller limit: the attempt');
  });

  it('an attempt that times out is aborted, with the time-out as its reason', async () => {
    const door = scripted({ patchJob: ['hang'] });
    const c = new RetryingClusterClient(door.client, { ...fast, maxAttempts: 1, attemptTimeoutMs: 10 });
    await assert.rejects(
      c.patchJob(REF, [], OFF),
      /patch PyTorchJob team-a\/toy failed: no answer within 10 ms/,
    );
    const signal = door.calls[0]?.options?.signal;
    assert.equal(signal?.aborted, true);
    assert.match(String(signal?.reason), /no answer within 10 ms/);
  });

  it('passes evictions and ConfigMap writes through once, with the options given', async () => {
    const door = scripted({ evictPod: [busy()], putConfigMap: [busy()] });
    const c = new RetryingClusterClient(door.client, fast);
    const options: WriteOptions = { dryRun: true, timeoutMs: 123 };
    await assert.rejects(c.evictPod('n', 'p', options), /busy/);
    await assert.rejects(c.putConfigMap('n', 'cm', { a: '1' }, '4', options), /busy/);
    assert.equal(door.count('evictPod'), 1);
    assert.equal(door.count('putConfigMap'), 1);
    assert.ok(door.calls.every((x) => x.options === options));
    assert.deepEqual(await c.putConfigMap('n', 'cm', {}, undefined, OFF), { metadata: { name: 'cm' } });
  });

  it('retries an in-place resize on transient failures only, bounded; refuses without a resizing client', async () => {
    const door = scripted({ resizePod: [busy(), busy(), new ConflictError('p')] });
    const c = new RetryingClusterClient(door.client, { ...fast, maxAttempts: 2 });
    await assert.rejects(c.resizePod('n', 'p', [], OFF), /busy/);
    assert.equal(door.count('resizePod'), 2);
    await assert.rejects(c.resizePod('n', 'p', [], OFF), ConflictError);
    assert.equal(door.count('resizePod'), 3, 'a conflict is not retried');
    assert.deepEqual(await c.resizePod('n', 'p', [], OFF), { metadata: { name: 'p' } });
    const { resizePod: _, ...without } = scripted().client;
    await assert.rejects(
      new RetryingClusterClient(without, fast).resizePod('n', 'p', [], OFF),
      /this cluster client cannot resize pods in place/,
    );
  });
});

function event(decisionId?: string): AuditEventInput {
  return {
    involved: { ref: REF, uid: 'u', apiVersion: 'kubeflow.org/v1' },
    type: 'Normal',
    reason: 'R',
    message: 'm',
    ...(decisionId ? { decisionId } : {}),
  };
}

describe('RetryingClusterClient: Events', () => {
  it('repeats an unnamed Event only after 429 or 503, which the server answers unprocessed', async () => {
    for (const [error, attempts] of [
      [new ApiError('e', 429, ''), 2],
      [new ApiError('e', 503, ''), 2],
      [new ApiError('e', 500, ''), 1],
      [new ApiError('e', 502, ''), 1],
      [new ApiError('e', undefined, 'reset'), 1],
      [new ValidationError('', 'bad'), 1],
    ] as const) {
      const door = scripted({ createEvent: [error] });
      const c = new RetryingClusterClient(door.client, fast);
      if (attempts === 2) await c.createEvent(event(), OFF);
      else await assert.rejects(c.createEvent(event(), OFF), (e) => e === error);
      assert.equal(door.count('createEvent'), attempts, `${error.message}`);
    }
  });

  it('repeats an Event named after its decision on any transient failure, never on others, bounded', async () => {
    const door = scripted({
      createEvent: [new ApiError('e', 500, ''), new ApiError('e', undefined, 'reset')],
    });
    await new RetryingClusterClient(door.client, fast).createEvent(event('d1'), OFF);
    assert.equal(door.count('createEvent'), 3);
    const refused = scripted({ createEvent: [new ApiError('e', 400, 'bad')] });
    await assert.rejects(new RetryingClusterClient(refused.client, fast).createEvent(event('d1'), OFF));
    assert.equal(refused.count('createEvent'), 1);
    const down = scripted({ createEvent: Array.from({ length: 5 }, () => new ApiError('e', 503, '')) });
    await assert.rejects(
      new RetryingClusterClient(down.client, { ...fast, maxAttempts: 3 }).createEvent(event(), OFF),
    );
    assert.equal(down.count('createEvent'), 3);
  });
});

describe('RetryingClusterClient: patches', () => {
  it('does not repeat a patch it cannot verify after a transient failure', async () => {
    for (const patch of [
      [{ op: 'replace', path: '/spec/x', value: 1 }] as JsonPatchOp[],
      guardedPatch('d', 'w').slice(1), // a decision, no guard
      guardedPatch('d', 'w').slice(0, 1), // a guard, no decision
    ]) {
      const door = scripted({ patchJob: [busy()] });
      await assert.rejects(new RetryingClusterClient(door.client, fast).patchJob(REF, patch, OFF), /busy/);
      assert.equal(door.count('patchJob'), 1);
      assert.equal(door.count('getJob'), 0, 'nothing to look for');
    }
  });

  it('retries a dry-run patch like a read: on transient failures, bounded; never re-reads', async () => {
    const door = scripted({ patchJob: [busy(), busy(), busy(), busy()] });
    const dry = { dryRun: true };
    const c = new RetryingClusterClient(door.client, { ...fast, maxAttempts: 3 });
    await assert.rejects(c.patchJob(REF, guardedPatch('d', 'w'), dry), /busy/);
    assert.equal(door.count('patchJob'), 3);
    await c.patchJob(REF, guardedPatch('d', 'w'), dry);
    assert.equal(door.count('patchJob'), 5);
    assert.equal(door.count('getJob'), 0);
    const refused = scripted({ patchJob: [new ApiError('p', 422, 'invalid')] });
    await assert.rejects(new RetryingClusterClient(refused.client, fast).patchJob(REF, [], dry), /invalid/);
    assert.equal(refused.count('patchJob'), 1);
  });

  it('after a lost answer: its own decision found on the job is success, without sending it again', async () => {
    const written = jobWith('8', { [ANNOTATION.lastDecision]: record('d', 'w') });
    const door = scripted({ patchJob: [new ApiError('p', undefined, 'reset')] }, () => written);
    const result = await new RetryingClusterClient(door.client, fast).patchJob(
      REF,
      guardedPatch('d', 'w'),
      OFF,
    );
    assert.equal(result, written);
    assert.equal(door.count('patchJob'), 1);
    assert.equal(door.count('getJob'), 1);
  });

  it("after a lost answer: a duplicate's write of the same decision, or another write, is a conflict", async () => {
    for (const job of [jobWith('7', { [ANNOTATION.lastDecision]: record('d', 'theirs') }), jobWith('9')]) {
      const door = scripted({ patchJob: [busy()] }, () => job);
      await assert.rejects(
        new RetryingClusterClient(door.client, fast).patchJob(REF, guardedPatch('d', 'w'), OFF),
        (e: unknown) =>
          e instanceof ConflictError &&
          e.message.startsWith('patch PyTorchJob team-a/toy was modified concurrently'),
      );
      assert.equal(door.count('patchJob'), 1);
    }
  });

  it('after a lost answer with the job untouched: sends it again, and gives up after maxAttempts', async () => {
    const untouched = () => jobWith('7');
    const door = scripted({ patchJob: [busy(), busy()] }, untouched);
    await new RetryingClusterClient(door.client, fast).patchJob(REF, guardedPatch('d', 'w'), OFF);
    assert.equal(door.count('patchJob'), 3);
    assert.equal(door.count('getJob'), 2);
    const error = busy();
    const down = scripted({ patchJob: Array.from({ length: 5 }, () => error) }, untouched);
    await assert.rejects(
      new RetryingClusterClient(down.client, { ...fast, maxAttempts: 2 }).patchJob(
        REF,
        guardedPatch('d', 'w'),
        OFF,
      ),
      (e) => e === error,
    );
    assert.equal(down.count('patchJob'), 2);
  });

  it('a 409 after an ambiguous attempt is checked on the job (it may be our own write); a plain 409 is not', async () => {
    const ours = jobWith('8', { [ANNOTATION.history]: `[${record('d', 'w')}]` });
    const door = scripted({ patchJob: [busy(), new ConflictError('p')] }, () =>
      door.count('getJob') > 1 ? ours : jobWith('7'),
    );
    const result = await new RetryingClusterClient(door.client, fast).patchJob(
      REF,
      guardedPatch('d', 'w'),
      OFF,
    );
    assert.equal(result, ours);
    assert.equal(door.count('patchJob'), 2);
    const plain = scripted({ patchJob: [new ConflictError('p')] });
    await assert.rejects(
      new RetryingClusterClient(plain.client, fast).patchJob(REF, guardedPatch('d', 'w'), OFF),
      ConflictError,
    );
    assert.equal(plain.count('getJob'), 0);
    const refused = scripted({ patchJob: [new ForbiddenError('p', 'no')] });
    await assert.rejects(
      new RetryingClusterClient(refused.client, fast).patchJob(REF, guardedPatch('d', 'w'), OFF),
      ForbiddenError,
    );
    assert.equal(refused.count('getJob'), 0);
  });
});
