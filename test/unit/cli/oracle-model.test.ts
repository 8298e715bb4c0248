import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { worldTruthOracle } from '../../../cli/oracle-model.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import { FITTED_WORLD } from '../../../lib/sim/simulation-world.js';

/** A fitted model that is wrong everywhere: 1 s a step with a wide spread, seen at 3 sizes from 40 samples. */
const fitted: ThroughputModel = {
  sampleCount: 40,
  distinctScales: 3,
  predict: (p: Placement) => ({ stepTime: 1, stdev: 0.5, throughput: p.replicas * p.localBatchSize }),
};

describe('worldTruthOracle (simulate --policy trainscaler-oracle)', () => {
  const oracle = worldTruthOracle(FITTED_WORLD.apps);

  it("answers with the world's step time at the placement asked about, with no spread", () => {
    const model = oracle('cifar10', fitted);
    for (const placement of [
      { replicas: 1, nodes: 1, localBatchSize: 128 },
      { replicas: 8, nodes: 2, localBatchSize: 128 },
      { replicas: 12, nodes: 3, localBatchSize: 256 },
    ]) {
      const truth = FITTED_WORLD.apps.stepTime('cifar10', placement);
      const got = model.predict(placement);
      assert.equal(got.stepTime, truth);
      assert.equal(got.stdev, 0);
      assert.equal(got.throughput, (placement.replicas * placement.localBatchSize) / truth);
    }
    // A placement asked about with more nodes than replicas is answered at one replica a node.
    assert.equal(
      model.predict({ replicas: 2, nodes: 4, localBatchSize: 64 }).stepTime,
      FITTED_WORLD.apps.stepTime('cifar10', { replicas: 2, nodes: 2, localBatchSize: 64 }),
    );
  });

  it("keeps the fitted model's counts, so the growth rule still sees what was measured", () => {
    const model = oracle('bert', fitted);
    assert.equal(model.sampleCount, 40);
    assert.equal(model.distinctScales, 3);
  });

  it('leaves the fitted model of a job the world does not know', () => {
    assert.equal(oracle('my-own-model', fitted), fitted);
  });
});
