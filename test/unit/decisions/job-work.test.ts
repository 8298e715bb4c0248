// A tick's per-job work (lib/decisions/job-work.ts): at most `concurrency` jobs at once, each within its
// deadline, so that one job whose API calls hang costs the tick one slot for that long and no other job waits
// on it; with a cluster GPU budget, one job at a time.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JobDeadlineError, jobWorkUnder } from '../../../lib/decisions/job-work.js';
import type { JobRef } from '../../../lib/types.js';

const ref = (name: string): JobRef => ({ kind: 'PyTorchJob', namespace: 'team-a', name });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function inFlight() {
  let now = 0;
  let most = 0;
  return {
    async run<T>(work: () => Promise<T>): Promise<T> {
      now++;
      most = Math.max(most, now);
      try {
        return await work();
      } finally {
        now--;
      }
    },
    get most() {
      return most;
    },
  };
}

describe('jobWorkUnder', () => {
  it('runs at most `concurrency` jobs at once, and all of them', async () => {
    const runJob = jobWorkUnder({ concurrency: 3, deadlineSeconds: 5 }, false);
    const gauge = inFlight();
    const done = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        runJob(ref(`j${i}`), () => gauge.run(() => sleep(10).then(() => i))),
      ),
    );
    assert.deepEqual(done, [...Array(10).keys()]);
    assert.equal(gauge.most, 3);
  });

  it('runs one job at a time under a GPU budget, whatever the concurrency', async () => {
    const runJob = jobWorkUnder({ concurrency: 8, deadlineSeconds: 5 }, true);
    const gauge = inFlight();
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => runJob(ref(`j${i}`), () => gauge.run(() => sleep(5)))),
    );
    assert.equal(gauge.most, 1);
  });

  it('gives up on a job that hangs at its deadline, aborts its signal, and the others finish meanwhile', async () => {
    const runJob = jobWorkUnder({ concurrency: 2, deadlineSeconds: 1 }, false);
    let aborted: unknown;
    const abortReason = () => aborted;
    const finished: string[] = [];
    const hung = runJob(ref('hung'), (signal) => {
      signal.addEventListener('abort', () => {
        aborted = signal.reason;
      });
      return new Promise<never>(() => undefined);
    });
    const others = Array.from({ length: 6 }, (_, i) =>
      runJob(ref(`quick-${i}`), async () => {
        await sleep(5);
        finished.push(`quick-${i}`);
      }),
    );
    await Promise.all(others);
    // Six quick jobs through the one slot the hung job leaves, all done while it still holds its own.
    assert.equal(abortReason(), undefined, 'the quick jobs waited for the hung one');
    assert.equal(finished.length, 6);
    await assert.rejects(hung, (error: unknown) => {
      assert.ok(error instanceof JobDeadlineError);
      assert.equal(error.code, 'JOB_DEADLINE');
      assert.match(error.message, /team-a\/hung: not decided within 1 s; nothing written/);
      return true;
    });
    assert.ok(abortReason() instanceof JobDeadlineError);
    // Its slot is free again.
    assert.equal(await runJob(ref('after'), async () => 'ran'), 'ran');
  });

  it('passes a job’s own error through, and never aborts a job that ended in time', async () => {
    const runJob = jobWorkUnder({ concurrency: 1, deadlineSeconds: 0.05 }, false);
    let signalOf: AbortSignal | undefined;
    await runJob(ref('ok'), async (signal) => {
      signalOf = signal;
    });
    await assert.rejects(
      runJob(ref('bad'), async () => {
        throw new Error('model cannot be fitted');
      }),
      /model cannot be fitted/,
    );
    await sleep(80);
    assert.equal(signalOf?.aborted, false);
  });

  it('refuses limits that would run nothing or never stop', () => {
    for (const concurrency of [0, -1, 1.5, Number.NaN])
      assert.throws(
        () => jobWorkUnder({ concurrency, deadlineSeconds: 1 }, false),
        /concurrency must be an integer >= 1/,
      );
    for (const deadlineSeconds of [0, -1, Number.NaN])
      assert.throws(
        () => jobWorkUnder({ concurrency: 1, deadlineSeconds }, false),
        /deadline must be > 0 seconds/,
      );
  });
});
