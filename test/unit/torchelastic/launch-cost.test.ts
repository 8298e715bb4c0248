// The rescale cost estimated from a job's launch, before anything is measured: anchored on bench:rescale's rows.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { launchCostEstimate } from '../../../lib/torchelastic/launch-cost.js';
import type { LaunchSettings } from '../../../lib/torchelastic/launch-settings.js';
import {
  MEASURED_RESCALE_PAUSE_SECONDS,
  MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15,
  SHARED_STORE_WAIT_SECONDS,
} from '../../../lib/torchelastic/recommended-rendezvous.js';

const OWN_STORE = { disableShareStore: '1' } as const;
const seconds = (l: LaunchSettings) => {
  const e = launchCostEstimate(l);
  return e && [e.up.seconds, e.down.seconds];
};

describe('rescale cost from the launch', () => {
  it('the launcher with the recommended settings: the measured torch 2.15 pauses', () => {
    const launcher = MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15.recommended;
    const e = launchCostEstimate({ launcher: 'trainscaler', lastCallTimeout: 2, monitorInterval: 1 });
    assert.deepEqual([e?.up.seconds, e?.down.seconds], [launcher.up, launcher.down]);
    assert.equal(e?.up.basis, "trainscaler's launcher with the recommended rendezvous settings");
    // It sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE itself; a job that sets it to something else shares the store.
    const shared = launchCostEstimate({
      launcher: 'trainscaler',
      lastCallTimeout: 2,
      disableShareStore: '0',
    });
    assert.equal(shared?.up.seconds, launcher.up + SHARED_STORE_WAIT_SECONDS);
    assert.equal(shared?.down.seconds, launcher.down);
  });

  it('plain torchrun: its defaults and the recommended flags are the measured rows', () => {
    const d = MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15.torchrunDefaults;
    const f = MEASURED_RESCALE_PAUSE_SECONDS.torchrunRecommendedFlags;
    assert.deepEqual(seconds({ launcher: 'torchrun', ...OWN_STORE }), [d.up, d.down]);
    assert.deepEqual(seconds({ launcher: 'torchrun', lastCallTimeout: 30, ...OWN_STORE }), [d.up, d.down]);
    assert.deepEqual(
      seconds({ launcher: 'torchrun', lastCallTimeout: 2, monitorInterval: 1, ...OWN_STORE }),
      [f.up, f.down],
    );
    assert.equal(
      launchCostEstimate({ launcher: 'torchrun', ...OWN_STORE })?.down.basis,
      'plain torchrun with default rendezvous settings',
    );
  });

  it('between and beyond them: about a second per second of last call above 2 s and of monitor interval above 1 s', () => {
    const [up16, down16] = seconds({ launcher: 'torchrun', lastCallTimeout: 16, ...OWN_STORE }) ?? [];
    assert.deepEqual([up16, down16], [24.4, 35.8]); // half-way between the two measured rows
    assert.deepEqual(
      seconds({ launcher: 'torchrun', lastCallTimeout: 2, monitorInterval: 5, ...OWN_STORE }),
      [15.2, 26.2],
    );
    assert.deepEqual(seconds({ launcher: 'trainscaler', lastCallTimeout: 10 }), [11.2, 11.2]);
    assert.deepEqual(
      seconds({ launcher: 'trainscaler', monitorInterval: 5 }),
      [3.2, 3.2].map((s) => s + 4 + 28),
    );
    // Shorter than recommended is charged as the recommended (the measured row), not less.
    assert.deepEqual(
      seconds({ launcher: 'trainscaler', lastCallTimeout: 1, monitorInterval: 0.5 }),
      [3.2, 3.2],
    );
    assert.match(
      launchCostEstimate({ launcher: 'torchrun', lastCallTimeout: 16, ...OWN_STORE })?.up.basis ?? '',
      /^plain torchrun with last_call_timeout 16 s$/,
    );
  });

  it('plain torchrun without TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: a scale-up waits the store timeout', () => {
    const d = MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15.torchrunDefaults;
    for (const disableShareStore of [undefined, '0', 'true']) {
      const e = launchCostEstimate({
        launcher: 'torchrun',
        ...(disableShareStore ? { disableShareStore } : {}),
      });
      assert.equal(e?.up.seconds, d.up + SHARED_STORE_WAIT_SECONDS, String(disableShareStore));
      assert.equal(e?.down.seconds, d.down);
      assert.match(
        e?.up.basis ?? '',
        /and without TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 \(the store's 60 s timeout added, torch >= 2\.4\)$/,
      );
    }
  });

  it('no estimate for a launch it does not recognise', () => {
    assert.equal(launchCostEstimate({ launcher: 'unknown', unknownWhy: 'x' }), undefined);
  });
});
