import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RECOMMENDED_LAUNCHER,
  RECOMMENDED_RENDEZVOUS,
  recommendedTorchrunFlags,
} from '../../../lib/torchelastic/recommended-rendezvous.js';

describe('recommended rendezvous settings', () => {
  it('gives torchrun flags that carry exactly the recommended values (what bench:rescale measures)', () => {
    const flags = Object.fromEntries(
      recommendedTorchrunFlags().map((f) => {
        const [name, ...value] = f.replace(/^--/, '').split('=');
        return [name, value.join('=')];
      }),
    );
    assert.equal(Number(flags.monitor_interval), RECOMMENDED_RENDEZVOUS.PET_MONITOR_INTERVAL);
    assert.equal(flags.rdzv_conf, `last_call_timeout=${RECOMMENDED_RENDEZVOUS.last_call_timeout}`);
  });

  it('keeps a last call above one rendezvous poll of plain torch (1 s), so a joiner is not left out', () => {
    assert.ok(RECOMMENDED_RENDEZVOUS.last_call_timeout > 1);
    assert.deepEqual(RECOMMENDED_LAUNCHER.slice(1), ['-m', 'trainscaler_hook.launch']);
  });
});
