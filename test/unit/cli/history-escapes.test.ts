// `trainscaler history` and `explain` print what trainscaler recorded about a job (its Events, its
// ScaledTrainingJob's status, its outcome store), which holds text that tenants chose (job, pod and role
// names, Event messages quoting them): nothing of it may reach the terminal as escape sequences. And neither
// reads the job's annotations, which its owner can edit: a forged history there shows nowhere.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreV1Event } from '@kubernetes/client-node';
import { explainJob, renderExplanation } from '../../../cli/explain.js';
import { readJobHistory, renderHistory, terminalSafe, terminalSafeJson } from '../../../cli/history.js';
import type { ClusterClient, JobStateObject, KubeObject } from '../../../lib/cluster/cluster-client.js';
import { outcomesConfigMapName, outcomesKey } from '../../../lib/decisions/outcome-store.js';
import { ForbiddenError } from '../../../lib/errors.js';
import type { JobRef } from '../../../lib/types.js';

const REF: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const STORE_NS = 'trainscaler-system';
const CLEAR_SCREEN = '\u001b[2J';
/** What a tenant writes to fool a reader: clear the screen, move the cursor, forge a line, reverse text. */
const HOSTILE = [
  CLEAR_SCREEN,
  '\u001b[1A\u001b[2K',
  '\u009b31m',
  '\u001b]8;;http://evil.example/\u0007link\u001b]8;;\u0007',
  '\r2026-12-01T00:00:00.000Z  tuning  forged',
  '\nreason: all good',
  '\u202etxt.exe',
  '\u007f',
];
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters the output must not contain (LF excepted)
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const UID = 'uid-bert';

/**
 * A cluster holding one job whose history annotation is `annotation` (forged), its Events `events`, its
 * ScaledTrainingJob's status `status`, and `stored` as its namespace's outcomes.
 */
function cluster(input: {
  annotation?: unknown;
  events?: CoreV1Event[];
  status?: Record<string, unknown>;
  stored?: Record<string, unknown>;
  storeForbidden?: boolean;
}): ClusterClient {
  const job: KubeObject = {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: {
      name: REF.name,
      namespace: REF.namespace,
      uid: UID,
      annotations: { 'trainscaler.io/history': JSON.stringify(input.annotation ?? []) },
    },
  } as KubeObject;
  const state: JobStateObject | undefined = input.status && {
    namespace: REF.namespace,
    name: 'pytorchjob-bert',
    resourceVersion: '1',
    target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: REF.name },
    ownerUid: UID,
    status: input.status,
  };
  const fake: Pick<ClusterClient, 'getJob' | 'getConfigMap' | 'getJobState' | 'listJobEvents'> = {
    getJob: async () => job,
    getJobState: async () => state,
    listJobEvents: async () => input.events ?? [],
    getConfigMap: async (namespace, name) => {
      if (input.storeForbidden) throw new ForbiddenError('get configmaps', 'forbidden');
      return input.stored && namespace === STORE_NS && name === outcomesConfigMapName(REF.namespace)
        ? { data: { [outcomesKey(REF)]: JSON.stringify(input.stored) } }
        : undefined;
    },
  };
  return fake as ClusterClient;
}

/** An Event as trainscaler creates it about the job (or, with `component`, as someone else does). */
function event(i: number, text: string, over: Partial<CoreV1Event> = {}): CoreV1Event {
  return {
    metadata: { name: `bert.trainscaler.id-${i}`, namespace: REF.namespace },
    involvedObject: { kind: 'PyTorchJob', name: REF.name, namespace: REF.namespace, uid: UID },
    reason: 'TrainscalerTuning',
    message: `grow${text}`,
    type: 'Normal',
    source: { component: 'trainscaler' },
    lastTimestamp: new Date((1_800_000_000 + i) * 1000),
    ...over,
  };
}

const hostileRecord = (i: number, text: string) => ({
  id: `id-${i}${text}`,
  at: 1_800_000_000 + i,
  policy: `tuning${text}`,
  reason: `grow${text}`,
  changes: [
    { kind: 'replicas', role: `Worker${text}`, from: 2, to: 4 },
    { kind: 'evict-pod', pod: `bert-worker-0${text}` },
    { kind: 'pause', reason: text },
  ],
});

describe('history and explain print what trainscaler recorded, escaped, and never the annotations', () => {
  it('history: no control character or bidi override reaches the terminal; each shows as its escape', async () => {
    const last = HOSTILE.length - 1;
    const records = await readJobHistory(
      cluster({
        events: HOSTILE.map((text, i) => event(i, text)),
        // The status's last decision lends its changes to the Event named after it.
        status: { lastDecision: { ...hostileRecord(last, ''), id: `id-${last}` } },
      }),
      REF,
    );
    assert.equal(records.length, HOSTILE.length);
    const out = renderHistory(REF, records);
    assert.doesNotMatch(out, RAW);
    assert.ok(out.includes('\\x1b[2J'), 'ESC shown as \\x1b');
    assert.ok(out.includes('\\x9b31m') && out.includes('\\u202etxt.exe') && out.includes('\\x7f'));
    // Every record is 2 lines, the last plus its 3 changes: a CR or LF in a field forges no line of its own.
    assert.equal(out.trimEnd().split('\n').length, 1 + HOSTILE.length * 2 + 3);
    assert.match(out.split('\n')[0] ?? '', /trainscaler's Events about the job/);
  });

  it("history: only trainscaler's Events about this job (not another reporter's, not an earlier job's), and no annotation", async () => {
    const records = await readJobHistory(
      cluster({
        annotation: [hostileRecord(9, ' forged')],
        events: [
          event(1, ''),
          event(2, ' by someone else', { source: { component: 'kubectl' } }),
          event(3, ' not ours', { reason: 'Scaled' }),
          event(4, ' an earlier job', {
            involvedObject: { kind: 'PyTorchJob', name: REF.name, namespace: REF.namespace, uid: 'old' },
          }),
        ],
      }),
      REF,
    );
    assert.deepEqual(
      records.map((r) => r.reason),
      ['grow'],
    );
  });

  it('history --json: still the same records, with DEL, C1 and bidi escaped as \\uXXXX', () => {
    const records = HOSTILE.map((text, i) => hostileRecord(i, text));
    const out = terminalSafeJson(records);
    assert.doesNotMatch(out, RAW);
    assert.deepEqual(JSON.parse(out), records);
    assert.ok(out.includes('\\u009b31m') && out.includes('\\u202e'));
  });

  it("explain: the store and the job's status, the later per policy; the annotation nowhere", async () => {
    const stored = {
      tuning: {
        at: 1_800_000_000,
        trigger: 'alarm',
        outcome: 'no-change',
        reason: `keep 4 workers${CLEAR_SCREEN}`,
        changes: [],
        signature: 's',
      },
    };
    const status = {
      lastDecision: { ...hostileRecord(1, CLEAR_SCREEN), policy: 'rebalance' },
      policy: { name: `bert-policy${CLEAR_SCREEN}`, mode: 'Recommend' },
      recommendation: { workers: 6, reason: `grow${CLEAR_SCREEN}`, at: 1_800_000_100 },
    };
    // The job's owner writes a "newer" tuning decision into the annotation explain once read.
    const forged = [{ ...hostileRecord(0, CLEAR_SCREEN), policy: 'tuning', at: 1_900_000_000 }];
    const explained = await explainJob(cluster({ annotation: forged, stored, status }), STORE_NS, REF);
    assert.deepEqual(
      explained.map((p) => [p.policy, p.source]),
      [
        ['rebalance', 'job-state'],
        [`TrainingAutoscaler bert-policy${CLEAR_SCREEN}`, 'job-state'],
        ['tuning', 'outcome-store'],
      ],
    );
    const out = renderExplanation(REF, explained);
    assert.doesNotMatch(out, RAW);
    assert.match(out, /^rebalance: applied, since .*\n {2}\(from the job's ScaledTrainingJob status\)/m);
    assert.match(out, /^tuning: no-change on alarm, since .*\n {2}reason: keep 4 workers\\x1b\[2J$/m);
    assert.match(out, /^TrainingAutoscaler bert-policy\\x1b\[2J: recommends 6 workers/m);
  });

  it("explain with credentials that may not read trainscaler's namespace: the status still", async () => {
    const status = { lastDecision: hostileRecord(1, '') };
    const explained = await explainJob(cluster({ status, storeForbidden: true }), STORE_NS, REF);
    assert.deepEqual(
      explained.map((p) => [p.policy, p.outcome]),
      [['tuning', 'applied']],
    );
  });

  it('terminalSafe leaves ordinary text, non-ASCII letters included, as it is', () => {
    const text = 'Worker replicas 2 -> 4 (größer, 更快) ✓';
    assert.equal(terminalSafe(text), text);
    assert.equal(terminalSafe('a\tb'), 'a\\x09b');
  });
});

describe('history marks what only an Event says', () => {
  // The built-in edit role may create Events (test/integration/cluster/training-autoscaler.test.ts): a tenant can
  // write one that looks like trainscaler's. Only the status, which trainscaler alone writes, confirms a record.
  const ref = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' } as const;
  const record = (id: string, source: 'event' | 'job-state') => ({
    id,
    at: 1_800_000_000,
    policy: 'TrainscalerTuning',
    reason: '1 -> 2 workers',
    changes: [],
    source,
  });

  it('marks an Event the status does not confirm, and says why in the header', () => {
    const text = renderHistory(ref, [
      record('bert.trainscaler.a', 'event'),
      record('bert.trainscaler.b', 'job-state'),
    ]);
    const lines = text.split('\n');
    assert.match(lines[0] ?? '', /edit role may create Events too/);
    assert.match(lines[1] ?? '', /bert\.trainscaler\.a {2}\(unconfirmed: an Event only\)$/);
    assert.doesNotMatch(lines[3] ?? '', /unconfirmed/);
    assert.match(lines[3] ?? '', /bert\.trainscaler\.b$/);
  });
});
