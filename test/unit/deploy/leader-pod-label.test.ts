import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaderPodLabel } from '../../../lib/runner/leader-pod-label.js';

const silent = { info() {}, warn() {}, error() {} };

describe('LeaderPodLabel', () => {
  it('removes a stale label at start, follows leadership (latest wins), and retries a failed patch', async () => {
    const patches: boolean[] = [];
    let failures = 1;
    const label = new LeaderPodLabel({
      logger: silent,
      retryMs: 10,
      reassertMs: 0,
      patch: async (leader) => {
        patches.push(leader);
        if (leader && failures-- > 0) throw new Error('503 from the API server');
      },
    });
    try {
      assert.equal(await label.settle(1_000), true);
      assert.deepEqual(patches, [false], 'a restarted replica starts unlabelled');
      label.set(true);
      assert.equal(await label.settle(1_000), true);
      assert.deepEqual(patches, [false, true, true], 'the failed patch was retried');
      label.set(false);
      label.set(true);
      label.set(false);
      assert.equal(await label.settle(1_000), true);
      assert.equal(patches.at(-1), false, 'the last wish is what the pod carries');
    } finally {
      label.stop();
    }
  });

  it('re-applies the label periodically (someone edited the pod)', async () => {
    const patches: boolean[] = [];
    const label = new LeaderPodLabel({
      logger: silent,
      reassertMs: 30,
      patch: async (leader) => {
        patches.push(leader);
      },
    });
    try {
      label.set(true);
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(patches.filter((p) => p).length >= 3, JSON.stringify(patches));
    } finally {
      label.stop();
    }
  });
});
