import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { rescaleCostsOf } from '../../../lib/policies/rescale-cost.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import {
  LAUNCHER_RESCALE_COST,
  parseRescaleCost,
  RescaleCostError,
  type WorldRescaleCost,
} from '../../../lib/sim/world-rescale-cost.js';
import { MEASURED_RESCALE_PAUSE_SECONDS } from '../../../lib/torchelastic/recommended-rendezvous.js';

describe('parseRescaleCost (--rescale-cost)', () => {
  it("takes the launcher's and plain torchrun's measured pauses by name, and SECONDS for both directions", () => {
    const { up, down, name } = parseRescaleCost('launcher');
    assert.deepEqual({ name, up, down }, { name: 'launcher', ...MEASURED_RESCALE_PAUSE_SECONDS.recommended });
    assert.equal(parseRescaleCost('launcher'), LAUNCHER_RESCALE_COST);
    const torchrun = parseRescaleCost('torchrun');
    assert.deepEqual(
      { up: torchrun.up, down: torchrun.down },
      { up: 11.2, down: 22.2 }, // docs/real-training.md: plain torchrun with the recommended flags
    );
    assert.match(torchrun.source, /torchrunRecommendedFlags/);
    for (const [text, seconds] of [
      ['30', 30],
      ['0', 0],
      ['2.5', 2.5],
      [' 45 ', 45],
    ] as const) {
      const cost = parseRescaleCost(text);
      assert.deepEqual({ up: cost.up, down: cost.down }, { up: seconds, down: seconds }, text);
    }
  });

  it('refuses anything else with an error naming the flag, the value and the accepted forms', () => {
    for (const bad of ['', 'fast', 'Launcher', '-1', '30s', '0x1e', '1e3', 'Infinity', 'NaN', '3,5']) {
      assert.throws(
        () => parseRescaleCost(bad),
        (error: unknown) =>
          error instanceof RescaleCostError &&
          error.code === 'VALIDATION' &&
          error.message.startsWith(
            `--rescale-cost '${bad}': expected launcher, torchrun or a number of seconds`,
          ),
        bad,
      );
    }
  });
});

describe("the simulated jobs' pod spec says how their workers are launched, as the world charges it", () => {
  const estimateIn = (world: WorldRescaleCost) => {
    const manifest = pytorchJobManifest({
      name: 'toy',
      namespace: 'team-a',
      app: 'toy',
      workers: 2,
      minReplicas: 1,
      maxReplicas: 4,
      sizing: { cpuMillis: 4000, memoryBytes: 2 ** 34, gpus: 1 },
      launch: world.workers,
    });
    return rescaleCostsOf(readJob(manifest), DEFAULT_POLICY_CONFIG);
  };

  it("trainscaler's estimate from the pod spec is within a second of the world's launcher and torchrun pauses", () => {
    for (const world of [parseRescaleCost('launcher'), parseRescaleCost('torchrun')]) {
      const costs = estimateIn(world);
      assert.equal(costs.upSource, 'launch', world.name);
      assert.ok(Math.abs(costs.up - world.up) <= 1, `${world.name} up ${costs.up} against ${world.up}`);
      assert.ok(
        Math.abs(costs.down - world.down) <= 1,
        `${world.name} down ${costs.down} against ${world.down}`,
      );
    }
    // A number of seconds: the launcher's pod spec; trainscaler learns the given pause from the job's metrics.
    assert.equal(parseRescaleCost('30').workers, LAUNCHER_RESCALE_COST.workers);
  });
});
