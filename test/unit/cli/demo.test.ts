import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { median, runDemo } from '../../../cli/demo.js';

describe('runDemo', () => {
  it('replays a short run identically for the same seed, and reports progress', async () => {
    const lines: string[] = [];
    const first = await runDemo({ seed: 11, timeCapSeconds: 20 * 60, onProgress: (l) => lines.push(l) });
    const second = await runDemo({ seed: 11, timeCapSeconds: 20 * 60 });
    assert.deepEqual(second, first);
    assert.ok(
      lines.some((l) => l.startsWith('[manual]')) && lines.some((l) => l.startsWith('[trainscaler]')),
    );
  });

  it('runs the manual configuration as submitted: the under-provisioned job fails on OOM kills', async () => {
    const result = await runDemo({ seed: 3, timeCapSeconds: 15 * 60 });
    const oom = result.jobs.find((j) => j.name === 'deepspeech2-lowmem');
    assert.equal(oom?.manual.state, 'failed');
    assert.match(oom?.manual.failureReason ?? '', /BackoffLimitExceeded/);
    assert.equal(result.jobs.length, 7);
    const submitted = result.jobs.filter((j) => j.submittedAtSeconds < 15 * 60).map((j) => j.name);
    assert.deepEqual(Object.keys(result.timelines.manual).sort(), submitted.sort());
    const { manual } = result.summary;
    assert.equal(manual.completed + manual.failed <= result.jobs.length, true);
    assert.equal(manual.completionRate, manual.completed / result.jobs.length);
  });
});

describe('median', () => {
  it('is the middle value, or the mean of the two middle values', () => {
    assert.equal(median([]), null);
    assert.equal(median([5]), 5);
    assert.equal(median([1, 2, 9]), 2);
    assert.equal(median([1, 3, 5, 100]), 4);
  });
});
