// ShrinkingCapacity must place exactly where reserve() would, one pod at a time, for any mix of shapes:
// the rebalance's greedy loop relies on it being a faster reserve(), not a different placement.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { podsFitting, reserve, ShrinkingCapacity } from '../../../lib/cluster/capacity.js';
import type { ClusterCapacity, Resources } from '../../../lib/types.js';

const GiB = 1024 ** 3;

const nodeArb = fc
  .record({
    gpus: fc.integer({ min: 0, max: 8 }),
    usedGpus: fc.integer({ min: 0, max: 8 }),
    cpu: fc.integer({ min: 0, max: 64 }),
    usedCpu: fc.integer({ min: 0, max: 64 }),
    schedulable: fc.boolean(),
  })
  .map(({ gpus, usedGpus, cpu, usedCpu, schedulable }) => ({
    allocatable: { gpus, cpuMillis: cpu * 1000, memoryBytes: 256 * GiB },
    allocated: { gpus: Math.min(gpus, usedGpus), cpuMillis: Math.min(cpu, usedCpu) * 1000, memoryBytes: 0 },
    schedulable,
  }));

const shapeArb: fc.Arbitrary<Resources> = fc.record({
  gpus: fc.integer({ min: 0, max: 4 }),
  cpuMillis: fc.integer({ min: 0, max: 16 }).map((c) => c * 1000),
  memoryBytes: fc.integer({ min: 0, max: 64 }).map((g) => g * GiB),
});

describe('ShrinkingCapacity', () => {
  it('places pod by pod exactly as reserve() does, counts what fits as podsFitting does, and refuses exactly when nothing fits', () => {
    fc.assert(
      fc.property(
        fc.array(nodeArb, { minLength: 1, maxLength: 12 }),
        fc.array(shapeArb, { minLength: 1, maxLength: 4 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 60 }),
        (nodes, shapes, picks) => {
          let expected: ClusterCapacity = {
            nodes: nodes.map((n, i) => ({ name: `n${i}`, ...n })),
          };
          const free = new ShrinkingCapacity(expected);
          for (const pick of picks) {
            const shape = shapes[pick % shapes.length] as Resources;
            const fitsBefore = podsFitting(expected, shape) >= 1;
            const atMost = (pick % 7) + 1;
            assert.equal(free.fitting(shape, atMost), Math.min(atMost, podsFitting(expected, shape)));
            assert.equal(free.fits(shape), fitsBefore);
            assert.equal(free.place(shape), fitsBefore);
            if (fitsBefore) expected = reserve(expected, shape, 1);
            assert.deepEqual(free.snapshot(), expected);
          }
        },
      ),
      { numRuns: 500, seed: 11 },
    );
  });

  it('does not change the capacity it was built from', () => {
    const capacity: ClusterCapacity = {
      nodes: [
        {
          name: 'n0',
          allocatable: { gpus: 4, cpuMillis: 4000, memoryBytes: GiB },
          allocated: { gpus: 0, cpuMillis: 0, memoryBytes: 0 },
          schedulable: true,
        },
      ],
    };
    const free = new ShrinkingCapacity(capacity);
    assert.equal(free.place({ gpus: 1, cpuMillis: 1000, memoryBytes: 0 }), true);
    assert.equal(capacity.nodes[0]?.allocated.gpus, 0);
    assert.equal(free.snapshot().nodes[0]?.allocated.gpus, 1);
  });
});
