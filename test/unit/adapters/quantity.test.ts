// parseQuantity keeps the strings it has parsed (a tick parses every pod's requests): a kept answer must be
// the answer, for every string, however many it has seen, and a string it refused is refused every time.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cpuToMillis, parseQuantity } from '../../../lib/adapters/quantity.js';

const GiB = 2 ** 30;

describe('parseQuantity', () => {
  it('answers a string seen before as the first time, past its bound too', () => {
    assert.equal(parseQuantity('4Gi'), 4 * GiB);
    assert.equal(parseQuantity('4'), 4);
    assert.equal(parseQuantity('4Gi'), 4 * GiB);
    assert.equal(cpuToMillis('500m'), 500);
    assert.equal(cpuToMillis('500m'), 500);
    for (let i = 0; i < 10_000; i++) assert.equal(parseQuantity(`${i}Mi`), i * 2 ** 20);
    assert.equal(parseQuantity('4Gi'), 4 * GiB);
    assert.equal(parseQuantity('1.5e3'), 1500);
  });

  it('refuses an invalid quantity every time it is asked', () => {
    for (let i = 0; i < 2; i++) {
      assert.throws(() => parseQuantity('lots'), /invalid quantity 'lots'/);
      assert.throws(() => parseQuantity('1Gb'), /invalid quantity/);
    }
  });
});
