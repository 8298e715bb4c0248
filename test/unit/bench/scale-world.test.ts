// The scale benchmark charges each tick the time its world spends answering (ScaleWorld.busyMs), so that
// the tick's own seconds are the difference: the world's clock must count the simulator's work and only it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildScaleWorld } from '../../bench/scale-world.js';

describe('ScaleWorld.busyMs', () => {
  it("counts the simulator's answers (lists and metrics), not what the caller does between its calls", async () => {
    const world = buildScaleWorld(3, 300);
    const start = world.busyMs();
    await world.metrics.stepSamples(world.runningJob, 3600);
    const afterQuery = world.busyMs();
    assert.ok(afterQuery > start, 'a metrics read is the world answering');
    const spin = performance.now() + 30;
    while (performance.now() < spin) {
      // the caller's own work
    }
    assert.equal(world.busyMs(), afterQuery);
    await world.cluster.listPods(undefined);
    assert.ok(world.busyMs() > afterQuery, 'a list (its shards joined) is the world answering');
  });
});
