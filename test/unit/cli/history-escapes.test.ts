// `trainscaler history` and `explain` print what a job's owner can write (the trainscaler.io/history
// annotation) and what trainscaler stored about the job: a crafted annotation must not reach the terminal as
// escape sequences, and must not pass for trainscaler's own record.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainJob, renderExplanation } from '../../../cli/explain.js';
import { readJobHistory, renderHistory, terminalSafe, terminalSafeJson } from '../../../cli/history.js';
import type { ClusterClient, KubeObject } from '../../../lib/cluster/cluster-client.js';
import { outcomesConfigMapName, outcomesKey } from '../../../lib/decisions/outcome-store.js';
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

/** A cluster holding one job with `annotation` as its history, and `stored` as its namespace's outcomes. */
function cluster(annotation: unknown, stored?: Record<string, unknown>): ClusterClient {
  const job: KubeObject = {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: {
      name: REF.name,
      namespace: REF.namespace,
      annotations: { 'trainscaler.io/history': JSON.stringify(annotation) },
    },
  } as KubeObject;
  const fake: Pick<ClusterClient, 'getJob' | 'getConfigMap'> = {
    getJob: async () => job,
    getConfigMap: async (namespace, name) =>
      stored && namespace === STORE_NS && name === outcomesConfigMapName(REF.namespace)
        ? { data: { [outcomesKey(REF)]: JSON.stringify(stored) } }
        : undefined,
  };
  return fake as ClusterClient;
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

describe('history and explain print what tenants wrote, escaped and labelled', () => {
  it('history: no control character or bidi override reaches the terminal; each shows as its escape', async () => {
    const records = await readJobHistory(cluster(HOSTILE.map((text, i) => hostileRecord(i, text))), REF);
    const out = renderHistory(REF, records);
    assert.doesNotMatch(out, RAW);
    assert.ok(out.includes('\\x1b[2J'), 'ESC shown as \\x1b');
    assert.ok(out.includes('\\x9b31m') && out.includes('\\u202etxt.exe') && out.includes('\\x7f'));
    // Every record is 2 lines plus its 3 changes: a CR or LF in a field forges no line of its own.
    assert.equal(out.trimEnd().split('\n').length, 1 + HOSTILE.length * 5);
    assert.match(
      out.split('\n')[0] ?? '',
      /trainscaler\.io\/history annotation, which whoever may edit the job/,
    );
  });

  it('history --json: still the same records, with DEL, C1 and bidi escaped as \\uXXXX', () => {
    const records = HOSTILE.map((text, i) => hostileRecord(i, text));
    const out = terminalSafeJson(records);
    assert.doesNotMatch(out, RAW);
    assert.deepEqual(JSON.parse(out), records);
    assert.ok(out.includes('\\u009b31m') && out.includes('\\u202e'));
  });

  it('explain: what trainscaler stored wins over the annotation whatever its dates, and the annotation is labelled', async () => {
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
    // The job's owner writes a "newer" tuning decision and a rebalance one.
    const forged = [
      { ...hostileRecord(0, CLEAR_SCREEN), policy: 'tuning', at: 1_900_000_000 },
      { ...hostileRecord(1, ''), policy: 'rebalance' },
    ];
    const explained = await explainJob(cluster(forged, stored), STORE_NS, REF);
    assert.deepEqual(
      explained.map((p) => [p.policy, p.source]),
      [
        ['rebalance', 'job-history'],
        ['tuning', 'outcome-store'],
      ],
    );
    const out = renderExplanation(REF, explained);
    assert.doesNotMatch(out, RAW);
    assert.match(
      out,
      /^rebalance: applied, since .*\n {2}\(from the job's trainscaler\.io\/history annotation/m,
    );
    assert.match(out, /^tuning: no-change on alarm, since .*\n {2}reason: keep 4 workers\\x1b\[2J$/m);
  });

  it('terminalSafe leaves ordinary text, non-ASCII letters included, as it is', () => {
    const text = 'Worker replicas 2 -> 4 (größer, 更快) ✓';
    assert.equal(terminalSafe(text), text);
    assert.equal(terminalSafe('a\tb'), 'a\\x09b');
  });
});
