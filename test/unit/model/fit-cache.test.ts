import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FitCache, fingerprint, fitRuntimeModelCached } from '../../../lib/model/fit-cache.js';
import { fitRuntimeModel } from '../../../lib/model/observed-bound.js';
import type { Placement } from '../../../lib/model/throughput-model.js';
import type { JobRef, StepSample } from '../../../lib/types.js';

const ref = (name: string, namespace = 'team-a'): JobRef => ({ kind: 'PyTorchJob', namespace, name });

/** A job's samples at two scales, one a minute, the step times a little noisy (deterministic). */
function samples(count: number, from = 0, scale = 1): StepSample[] {
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    const replicas = i % 2 === 0 ? 2 : 4;
    const stepTime = scale * (0.4 + 0.05 * replicas) * (1 + 0.02 * Math.sin(i));
    return { replicas, nodes: 1, localBatchSize: 32, stepTime, syncTime: 0.2 * stepTime, at: 1_000 + 60 * i };
  });
}

const copy = (list: readonly StepSample[]) => list.map((s) => ({ ...s }));
const at8: Placement = { replicas: 8, nodes: 2, localBatchSize: 32 };

describe('FitCache', () => {
  it('answers with the kept fit when the samples and the prior are the ones it was made on', () => {
    const cache = new FitCache();
    const job = { ref: ref('a'), uid: 'uid-a' };
    const first = cache.fit(job, samples(30), samples(5, 100));
    // Equal content in new arrays (as every tick reads them afresh) is the same input.
    const second = cache.fit(job, copy(samples(30)), copy(samples(5, 100)));
    assert.equal(second, first);
    assert.deepEqual(cache.stats, { hits: 1, warmFits: 0, coldFits: 1, evictions: 0 });
  });

  it('fits again, as a cold fit would, when a sample is added', () => {
    const cache = new FitCache();
    const job = { ref: ref('a'), uid: 'uid-a' };
    const first = cache.fit(job, samples(30));
    const next = samples(31);
    const second = cache.fit(job, next);
    assert.notEqual(second, first);
    assert.equal(cache.stats.warmFits, 1);
    assert.equal(second.sampleCount, 31);
    assert.equal(second.predict(at8).throughput, fitRuntimeModel(next).predict(at8).throughput);
  });

  it('fits again when a value changes under the same timestamps, or an old sample leaves the window', () => {
    const cache = new FitCache();
    const job = { ref: ref('a'), uid: 'uid-a' };
    const base = samples(30);
    cache.fit(job, base);
    const revised = copy(base);
    (revised[29] as StepSample).stepTime *= 1.5;
    cache.fit(job, revised);
    assert.equal(cache.stats.warmFits, 1);
    // Same count and newest sample, the window moved on: the oldest left, one in the middle is new.
    const slid = [...base.slice(1, 15), { ...(base[14] as StepSample), at: 1_870 }, ...base.slice(15)];
    cache.fit(job, slid);
    assert.equal(cache.stats.warmFits, 2);
    assert.equal(cache.stats.hits, 0);
  });

  it('fits again when the prior changes, the job’s own samples unchanged', () => {
    const cache = new FitCache();
    const job = { ref: ref('a'), uid: 'uid-a' };
    const own = samples(30);
    const withPrior = cache.fit(job, own, samples(5, 100, 2));
    const otherPrior = cache.fit(job, own, samples(5, 100, 3));
    const noPrior = cache.fit(job, own);
    assert.notEqual(otherPrior, withPrior);
    assert.notEqual(noPrior, otherPrior);
    assert.equal(cache.stats.warmFits, 2);
    assert.equal(noPrior.predict(at8).throughput, fitRuntimeModel(own).predict(at8).throughput);
  });

  it('never gives one job another job’s fit: by uid, and by kind/namespace/name where there is none', () => {
    const cache = new FitCache();
    const same = samples(30);
    const a = cache.fit({ ref: ref('a'), uid: 'uid-a' }, same);
    // The same name re-created (a new uid), the same name in another namespace, the same uid absent.
    const recreated = cache.fit({ ref: ref('a'), uid: 'uid-a2' }, same);
    const elsewhere = cache.fit({ ref: ref('a', 'team-b') }, same);
    const byName = cache.fit({ ref: ref('a') }, same);
    const models = new Set([a, recreated, elsewhere, byName]);
    assert.equal(models.size, 4);
    assert.deepEqual(cache.stats, { hits: 0, warmFits: 0, coldFits: 4, evictions: 0 });
    assert.equal(cache.fit({ ref: ref('a') }, same), byName);
    // A name that looks like a uid key is still a name.
    cache.fit({ ref: ref('uid-a', 'uid') }, same);
    assert.equal(cache.stats.coldFits, 5);
  });

  it('keeps at most maxEntries jobs, dropping the one fitted least recently', () => {
    const cache = new FitCache({ maxEntries: 3 });
    const jobs = ['a', 'b', 'c', 'd'].map((name) => ({ ref: ref(name), uid: `uid-${name}` }));
    const [a, b, c, d] = jobs as [(typeof jobs)[0], (typeof jobs)[0], (typeof jobs)[0], (typeof jobs)[0]];
    const own = samples(12);
    cache.fit(a, own);
    cache.fit(b, own);
    cache.fit(c, own);
    cache.fit(a, own); // a used again: b is now the least recent
    cache.fit(d, own);
    assert.equal(cache.size, 3);
    assert.equal(cache.stats.evictions, 1);
    cache.fit(a, own);
    cache.fit(c, own);
    cache.fit(d, own);
    assert.equal(cache.stats.hits, 4);
    cache.fit(b, own);
    assert.equal(cache.stats.coldFits, 5);
    assert.equal(cache.size, 3);
  });

  it('rejects a size that is not a whole number of at least one', () => {
    for (const maxEntries of [0, -1, 1.5, Number.NaN])
      assert.throws(() => new FitCache({ maxEntries }), RangeError);
  });

  it('leaves nothing behind when a fit fails, and the next valid fit is made from scratch', () => {
    const cache = new FitCache();
    const job = { ref: ref('a'), uid: 'uid-a' };
    assert.throws(() => cache.fit(job, [{ ...(samples(1)[0] as StepSample), stepTime: -1 }]));
    assert.equal(cache.size, 0);
    cache.fit(job, samples(10));
    assert.equal(cache.stats.coldFits, 1);
  });

  it('without a cache fits from scratch, with the same answer', () => {
    const own = samples(40);
    const prior = samples(6, 200, 1.1);
    const job = { ref: ref('a'), uid: 'uid-a' };
    const uncached = fitRuntimeModelCached(undefined, job, own, prior).predict(at8);
    const cached = fitRuntimeModelCached(new FitCache(), job, own, prior).predict(at8);
    assert.deepEqual(cached, uncached);
  });
});

describe('fingerprint', () => {
  it('differs for a change of any field, and for an absent field against any value', () => {
    const base = samples(3);
    const seen = new Set([fingerprint(base)]);
    const fields = ['replicas', 'nodes', 'ps', 'localBatchSize', 'stepTime', 'syncTime', 'at'] as const;
    for (const field of fields) {
      const changed = copy(base);
      const last = changed[2] as StepSample;
      last[field] = (last[field] ?? 0) + 1;
      seen.add(fingerprint(changed));
      const absent = copy(base);
      delete (absent[1] as Partial<StepSample>)[field];
      seen.add(fingerprint(absent));
    }
    assert.equal(seen.size, 1 + 2 * fields.length - 1); // ps is absent in base: "absent" is base itself
    assert.equal(fingerprint(copy(base)), fingerprint(base));
    assert.notEqual(fingerprint([]), fingerprint(base.slice(0, 1)));
  });
});
