import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fitRuntimeModel } from '../../../lib/model/observed-bound.js';
import { agreeingPrior, PRIOR_AGREEMENT, signatureHistory } from '../../../lib/model/profile-prior.js';
import type { StepSample } from '../../../lib/types.js';

const GLOBAL_BATCH = 512;

/**
 * A job's true step time: compute linear in the local batch, and an all-reduce that is cheap within a node and
 * costs more with every node it spans (4 workers a node), as the measured tables have it.
 */
function truth(replicas: number, scale = 1): StepSample {
  const nodes = Math.ceil(replicas / 4);
  const localBatchSize = GLOBAL_BATCH / replicas;
  const syncTime = replicas === 1 ? 0 : nodes === 1 ? 0.02 : 0.06 + 0.03 * nodes;
  const stepTime = (0.05 + 0.004 * localBatchSize + syncTime) * scale;
  return { replicas, nodes, localBatchSize, stepTime, syncTime: syncTime * scale };
}

/** A minute of samples at one size, with a little deterministic jitter. */
function ran(replicas: number, n = 5, scale = 1): StepSample[] {
  return Array.from({ length: n }, (_, i) => {
    const t = truth(replicas, scale);
    const jitter = 1 + 0.01 * ((i % 3) - 1);
    return { ...t, stepTime: t.stepTime * jitter, syncTime: (t.syncTime ?? 0) * jitter };
  });
}

/** The profile's summaries of earlier runs: one median per size. */
const profile = (sizes: number[], scale = 1, withSync = true): StepSample[] =>
  sizes.map((k) => {
    const t = truth(k, scale);
    return withSync
      ? t
      : { replicas: t.replicas, nodes: t.nodes, localBatchSize: t.localBatchSize, stepTime: t.stepTime };
  });

const at = (replicas: number) => {
  const t = truth(replicas);
  return { replicas, nodes: t.nodes, localBatchSize: t.localBatchSize };
};

const relErr = (predicted: number, k: number) => Math.abs(predicted / truth(k).stepTime - 1);

describe('agreeingPrior', () => {
  // A job that has run on one node only, at 2 and 4 workers.
  const own = [...ran(2), ...ran(4)];
  const history = signatureHistory(profile([1, 2, 4, 8, 12, 16]));

  it('adds the profile where it agrees: the job predicts sizes it never ran at from what earlier runs measured', () => {
    const choice = agreeingPrior(own, history);
    assert.equal(choice.samples.length, 6);
    assert.match(choice.why, /6 sizes from the profile/);
    const alone = fitRuntimeModel(own);
    const informed = fitRuntimeModel(own, choice.samples);
    // Alone, the job has never crossed a node: it cannot know what the all-reduce across four costs.
    assert.ok(relErr(alone.predict(at(16)).stepTime, 16) > 0.2, 'the job alone misjudges 16 workers');
    assert.ok(relErr(informed.predict(at(16)).stepTime, 16) < 0.05, 'with the profile it does not');
    assert.ok(informed.predict(at(16)).stdev < alone.predict(at(16)).stdev);
    assert.equal(informed.distinctScales, 6);
  });

  it("keeps the job's own measurement at a size it ran at, even where the profile was faster", () => {
    const faster = signatureHistory(profile([1, 2, 4, 8, 16], 0.9));
    const choice = agreeingPrior(own, faster);
    assert.equal(choice.samples.length, 5);
    const mean4 = ran(4).reduce((sum, s) => sum + s.stepTime, 0) / 5;
    const predicted = fitRuntimeModel(own, choice.samples).predict(at(4)).stepTime;
    assert.ok(predicted >= mean4 - 1e-12, `${predicted} >= ${mean4}`);
  });

  it('ignores a profile that disagrees with what the job measures (another GPU, another image, another tenant)', () => {
    for (const scale of [1 + PRIOR_AGREEMENT + 0.05, 1 - PRIOR_AGREEMENT - 0.05]) {
      const choice = agreeingPrior(own, signatureHistory(profile([1, 2, 4, 8, 16], scale)));
      assert.deepEqual(choice.samples, []);
      assert.match(
        choice.why,
        /the profile measured .* s a step at 2 workers on 1 nodes where this job measures .* \(-?\d+%, more than 15%\)/,
      );
    }
  });

  it('allows where the profile only extrapolates what its own spread allows there, and no more', () => {
    // 12 workers spread over 6 nodes: earlier runs never ran so spread, and the profile's fit misses the
    // truth there by more than 15% but within two of its standard deviations.
    const spread = (k: number, nodes: number, scale: number): StepSample => {
      const t = truth(k);
      const syncTime = 0.06 + 0.03 * nodes;
      return { ...t, nodes, stepTime: (0.05 + 0.004 * t.localBatchSize + syncTime) * scale, syncTime };
    };
    const history = signatureHistory(profile([1, 2, 4, 8, 12, 16]));
    const model = history.model;
    assert.ok(model);
    const p = model.predict(spread(12, 6, 1));
    const off = Math.abs(p.stepTime / spread(12, 6, 1).stepTime - 1);
    assert.ok(off > PRIOR_AGREEMENT && off < (2 * p.stdev) / p.stepTime, `fit off by ${off}`);
    assert.equal(agreeingPrior([spread(12, 6, 1)], history).samples.length, 6);
    const slower = agreeingPrior([spread(12, 6, 1.3)], history);
    assert.deepEqual(slower.samples, []);
    assert.match(slower.why, /the profile predicts .* at 12 workers on 6 nodes .* more than 2\d%\)/);
  });

  it('judges agreement at every size the job ran at, not only the first', () => {
    // Agrees at 2 workers, 60% slower from 4 on: a profile fitted on points that bend where this job does not.
    const bent = signatureHistory([...profile([1, 2]), ...profile([4, 8, 16], 1.6)]);
    assert.deepEqual(agreeingPrior(ran(2), bent).samples.length > 0, true);
    assert.deepEqual(agreeingPrior(own, bent).samples, []);
  });

  it('uses no profile summaries without sync beside samples with sync, and none when there is no profile', () => {
    const untimed = agreeingPrior(own, signatureHistory(profile([1, 2, 4, 8, 16], 1, false)));
    assert.deepEqual(untimed.samples, []);
    assert.match(untimed.why, /no sync times/);
    const noSync = own.map(({ syncTime: _, ...s }) => s);
    assert.equal(agreeingPrior(noSync, signatureHistory(profile([1, 2, 4, 8], 1, false))).samples.length, 4);
    assert.deepEqual(agreeingPrior(own, undefined), { samples: [], why: 'no profile' });
    assert.deepEqual(agreeingPrior(own, signatureHistory([])), { samples: [], why: 'no profile' });
  });
});
