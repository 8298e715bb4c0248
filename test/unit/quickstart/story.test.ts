import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { decisionText, stamped, stampedPrinter, throughputText } from '../../../infra/quickstart/story.js';
import type { Outcome } from '../../../lib/actuator.js';
import { assertStory } from '../../support/quickstart-story.js';

const ref = { kind: 'PyTorchJob' as const, namespace: 'quickstart-a', name: 'elastic' };

test('lines are stamped with minutes and seconds since the start', () => {
  assert.equal(stamped(1_000, 1_000 + 65_400, 'x'), '[1:05] x');
  assert.equal(stamped(1_000, 500, 'x'), '[0:00] x');
});

test("a message's further lines are indented under its text", () => {
  let out = '';
  const print = stampedPrinter((t) => {
    out += t;
  }, Date.now());
  print('alert firing: A\n  summary');
  assert.equal(out, '[0:00] alert firing: A\n       summary\n');
});

test('throughput names the workers, in the singular for one', () => {
  assert.equal(
    throughputText({ samplesPerSecond: 158.4, workers: 1 }),
    '158 samples/s (1 worker, 158 per worker)',
  );
  assert.equal(
    throughputText({ samplesPerSecond: 300, workers: 2 }),
    '300 samples/s (2 workers, 150 per worker)',
  );
});

test('a decision says what changed, on what trigger and why; a kept job says so', () => {
  const grow: Outcome = {
    ref,
    applied: true,
    plan: {
      ref,
      policy: 'tuning',
      changes: [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }],
      reason: '1 -> 2 workers: predicted +46%',
    },
  };
  assert.equal(
    decisionText('alarm', grow),
    'trainscaler decided (on the alert, policy tuning): Worker replicas 1 -> 2\n  reason: 1 -> 2 workers: predicted +46%',
  );
  const kept: Outcome = { ...grow, applied: false, plan: { ...grow.plan, changes: [], reason: 'cool-down' } };
  assert.equal(
    decisionText('alarm', kept),
    'trainscaler reviewed the job and kept it (on the alert, policy tuning)\n  reason: cool-down',
  );
});

const RECORDED = readFileSync(new URL('./quickstart-output.txt', import.meta.url), 'utf8');

test('a recorded quick start tells the whole story, in order', () => {
  assertStory(RECORDED);
});

test('a quick start that leaves out a part of the story, or tells it out of order, fails', () => {
  const without = (pattern: RegExp) =>
    RECORDED.split('\n')
      .filter((l) => !pattern.test(l))
      .join('\n');
  assert.throws(() => assertStory(without(/alert firing/)), /did not print the alert/);
  assert.throws(() => assertStory(without(/^\s+reason:/)), /did not print the decision on the alert/);
  assert.throws(() => assertStory(without(/new size/)), /did not print the job at its new size/);
  assert.throws(
    () => assertStory(without(/2 workers, \d+ per worker/)),
    /did not print the throughput after/,
  );
  assert.throws(() => assertStory(without(/stopped: namespace/)), /did not print the job stopped/);
  const lines = RECORDED.split('\n');
  const alert = lines.findIndex((l) => l.includes('alert firing'));
  const decided = lines.findIndex((l) => l.includes('trainscaler decided'));
  const swapped = [...lines];
  swapped.splice(decided, 2, ...lines.slice(alert, alert + 2));
  swapped.splice(alert, 2, ...lines.slice(decided, decided + 2));
  assert.throws(() => assertStory(swapped.join('\n')), /did not print the decision on the alert/);
});
