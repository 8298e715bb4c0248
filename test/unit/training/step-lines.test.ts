import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  accountSteps,
  lineReader,
  parseAgentLine,
  parseScriptLine,
  type ScriptLine,
  stdoutBreakdown,
  stdoutPause,
} from '../../support/step-lines.js';

const step = (t: number, n: number, world: number, rank = 0, epoch = 0, batch = n): ScriptLine => ({
  kind: 'step',
  t,
  step: n,
  epoch,
  batch,
  batches: 1000,
  rank,
  world,
});
const resume = (t: number, n: number, world: number, rank = 0): ScriptLine => ({
  kind: 'resume',
  t,
  step: n,
  epoch: 0,
  rank,
  world,
});
const checkpoint = (t: number, n: number, world: number): ScriptLine => ({
  kind: 'checkpoint',
  t,
  step: n,
  rank: 0,
  world,
});

/** A run: world 1 trains steps 1..7 (checkpoint every 5), a second rank joins, world 2 resumes from step 5. */
function scaleUp(resumedFrom = 5): ScriptLine[] {
  return [
    resume(0, 0, 1),
    ...[1, 2, 3, 4, 5].map((n) => step(n, n, 1)),
    checkpoint(5.1, 5, 1),
    step(6, 6, 1),
    step(7, 7, 1),
    resume(20, resumedFrom, 2, 1),
    resume(20.5, resumedFrom, 2),
    step(21, resumedFrom + 1, 2, 1),
    step(21, resumedFrom + 1, 2),
    step(22, resumedFrom + 2, 2),
  ];
}

describe('the unmodified script, read from its stdout', () => {
  it('parses its step, resume and checkpoint lines, with or without torchrun --tee prefix', () => {
    assert.deepEqual(parseScriptLine('step 12 epoch 0 batch 12/25000 rank 1/2 loss 2.3150', 5), {
      kind: 'step',
      t: 5,
      step: 12,
      epoch: 0,
      batch: 12,
      batches: 25000,
      rank: 1,
      world: 2,
    });
    assert.equal(parseScriptLine('[default0]:step 3 epoch 1 batch 2/9 rank 0/1 loss 1', 1)?.kind, 'step');
    assert.deepEqual(parseScriptLine('resumed from step 2500 epoch 0 sample 40000 rank 0/2', 7), {
      kind: 'resume',
      t: 7,
      step: 2500,
      epoch: 0,
      rank: 0,
      world: 2,
    });
    assert.deepEqual(parseScriptLine('checkpoint step 50 rank 0/1\n', 2), {
      kind: 'checkpoint',
      t: 2,
      step: 50,
      rank: 0,
      world: 1,
    });
    // A worker killed between print()'s two writes: its line and the next worker's run together.
    assert.equal(
      parseScriptLine(
        'step 9 epoch 0 batch 9/99 rank 0/1 loss 2.1resumed from step 5 epoch 0 sample 80 rank 0/2',
        3,
      )?.kind,
      'resume',
    );
    assert.equal(
      parseScriptLine('I1207 torch/distributed/run.py:855] Using nproc_per_node=1.', 1),
      undefined,
    );
    assert.equal(parseScriptLine('step 12 epoch 0 loss 2', 1), undefined);
  });

  it('splits chunks into lines stamped when their end arrived, holding a partial line back', () => {
    const read = lineReader();
    assert.deepEqual(read('step 1 a\nstep 2', 10), [{ line: 'step 1 a', t: 10 }]);
    assert.deepEqual(read(' b\nstep 3\n', 11), [
      { line: 'step 2 b', t: 11 },
      { line: 'step 3', t: 11 },
    ]);
    assert.deepEqual(read('', 12), []);
  });

  it('times a pause from the last step at the old size to the first at the new one', () => {
    const lines = scaleUp();
    assert.equal(stdoutPause(lines, 1, 2, 7.5), 21 - 7);
    assert.equal(stdoutPause(lines, 1, 2, 30), undefined, 'no step at the new size after `after` yet');
    assert.equal(stdoutPause(lines.slice(0, 8), 1, 2, 0), undefined);
  });

  it('splits the pause at the agents rendezvous and the last new worker resuming', () => {
    const agents = [
      { t: 6.5, event: 'rendezvousing' as const }, // the joining agent, before the pause: not counted
      { t: 8, event: 'rendezvousing' as const },
      { t: 11, event: 'rendezvoused' as const },
      { t: 11.1, event: 'rendezvoused' as const },
    ];
    const parts = stdoutBreakdown(scaleUp(), agents, 1, 2, 7.5);
    const rounded = Object.fromEntries(
      Object.entries(parts ?? {}).map(([k, v]) => [k, Math.round(v * 10) / 10]),
    );
    assert.deepEqual(rounded, { stop: 1, rendezvous: 3.1, workerStart: 9.4, firstStep: 0.5 });
    // no agent log (LOGLEVEL unset): the rendezvous moves into workerStart, the parts still add up
    const bare = stdoutBreakdown(scaleUp(), [], 1, 2, 7.5);
    assert.deepEqual(bare, { stop: 0, rendezvous: 0, workerStart: 13.5, firstStep: 0.5 });
    assert.deepEqual(parseAgentLine("I1207 api.py:706] [default] Rendezvous'ing worker group", 3), {
      t: 3,
      event: 'rendezvousing',
    });
    assert.equal(
      parseAgentLine('[default] Rendezvous complete for workers. Result:', 4)?.event,
      'rendezvoused',
    );
    assert.equal(parseAgentLine('[default] Starting worker group', 4), undefined);
  });
});

describe('steps across restarts: none lost, none redone beyond the last checkpoint', () => {
  it('counts the steps since the last checkpoint as redone, within the checkpoint interval', () => {
    const { restarts, problems } = accountSteps(scaleUp(), 5);
    assert.deepEqual(problems, []);
    assert.deepEqual(restarts, [
      { t: 20.5, fromWorld: 1, toWorld: 2, lastStep: 7, resumedFrom: 5, redone: 2, midEpoch: true },
    ]);
  });

  it('allows a whole interval (rank 0 stopped while saving), fails more (a checkpoint missed)', () => {
    assert.deepEqual(accountSteps(scaleUp(), 2).problems, []);
    assert.match(
      accountSteps(scaleUp(), 1).problems.join('\n'),
      /redid 2 steps \(6\.\.7\): more than the checkpoint interval allows \(1\)/,
    );
  });

  it('fails a resume from anything but the last checkpoint rank 0 reported', () => {
    assert.match(
      accountSteps(scaleUp(0), 50).problems.join('\n'),
      /resumed from step 0, but the last checkpoint was step 5/,
    );
    const ahead = accountSteps(scaleUp(8), 50).problems.join('\n');
    assert.match(ahead, /but the last checkpoint was step 5/);
    assert.match(ahead, /after the last step trained \(7\)/);
  });

  it('fails a step lost or repeated inside a world', () => {
    const gap = scaleUp().filter((l) => !(l.kind === 'step' && l.step === 6));
    assert.match(
      accountSteps(gap, 5).problems.join('\n'),
      /step 7 at world size 1 followed step 5: steps 6\.\.6 were lost/,
    );
    const again = [...scaleUp(), step(23, 7, 2)];
    assert.match(accountSteps(again, 5).problems.join('\n'), /a step was repeated without a restart/);
  });

  it('reads rank 0 only: the other ranks print the same steps', () => {
    const lines = scaleUp();
    const withRank1 = [...lines, step(22, 7, 2, 1)];
    assert.deepEqual(accountSteps(withRank1, 5).problems, []);
  });

  it('marks a restart at an epoch boundary as not mid-epoch', () => {
    const lines = scaleUp().map((l) =>
      l.kind === 'step' && l.world === 2 ? { ...l, epoch: 1, batch: l.step - 5 } : l,
    );
    assert.equal(accountSteps(lines, 5).restarts[0]?.midEpoch, false);
    const lastBatch = scaleUp().map((l) =>
      l.kind === 'step' && l.step === 7 && l.world === 1 ? { ...l, batch: 1000 } : l,
    );
    assert.equal(accountSteps(lastBatch, 5).restarts[0]?.midEpoch, false);
  });

  it('fails a checkpoint reported for another step than the last one trained', () => {
    const lines = [...scaleUp().slice(0, 6), checkpoint(5.2, 4, 1)];
    assert.match(accountSteps(lines, 5).problems.join('\n'), /checkpoint of step 4 after step 5/);
  });
});
