import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundedByObservations } from '../../../lib/model/observed-bound.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import type { StepSample } from '../../../lib/types.js';

/** A fit that says every worker count steps in 1 s. */
const FAST: ThroughputModel = {
  sampleCount: 4,
  distinctScales: 2,
  predict: (p: Placement) => ({ stepTime: 1, stdev: 0.1, throughput: p.replicas * p.localBatchSize }),
};

const sample = (replicas: number, stepTime: number, localBatchSize = 32): StepSample => ({
  replicas,
  nodes: 2,
  localBatchSize,
  stepTime,
});

describe('boundedByObservations', () => {
  const model = boundedByObservations(FAST, [sample(4, 2), sample(4, 4), sample(3, 0.5)]);

  it('predicts an observed size no faster than it ran (mean of its samples)', () => {
    const p = model.predict({ replicas: 4, nodes: 1, localBatchSize: 32 });
    assert.equal(p.stepTime, 3);
    assert.equal(p.throughput, (4 * 32) / 3);
    assert.equal(p.stdev, 0.1);
  });

  it('keeps the fit where the observation was faster, unseen sizes and other batch sizes', () => {
    assert.equal(model.predict({ replicas: 3, nodes: 1, localBatchSize: 32 }).stepTime, 1);
    assert.equal(model.predict({ replicas: 5, nodes: 2, localBatchSize: 32 }).stepTime, 1);
    assert.equal(model.predict({ replicas: 4, nodes: 1, localBatchSize: 64 }).stepTime, 1);
  });

  it('keeps the fit with no samples, and passes the fit counts through', () => {
    const bare = boundedByObservations(FAST, []);
    assert.equal(bare.predict({ replicas: 4, nodes: 1, localBatchSize: 32 }).stepTime, 1);
    assert.equal(model.distinctScales, 2);
    assert.equal(model.sampleCount, 4);
  });
});
