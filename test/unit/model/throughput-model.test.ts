import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CONTENTION_BEYOND_TWO_NODES, interNodeShape } from '../../../lib/model/forms.js';
import { evaluateSyncTime, fitThroughputModel, type Placement } from '../../../lib/model/throughput-model.js';
import type { StepSample } from '../../../lib/types.js';

const BATCHES = [16, 32, 64]; // median 32 = the fit's reference batch, so mu = m / 32
const PLACEMENTS: [number, number][] = [
  [1, 1],
  [2, 1],
  [4, 1],
  [2, 2],
  [8, 2],
  [6, 3],
  [12, 3],
  [16, 4],
];

/** The all-reduce form with known parameters (seconds), gamma = 1. */
const [A, B, R] = [0.1, 0.2, 0.01]; // compute: fixed, per reference batch, replicated overhead
const [LOCAL, LOCAL_PER_REPLICA, NET, NET_PER_INVERSE_BATCH] = [0.02, 0.01, 0.15, 0.05];
const TRUE = { compute: [A, B, R], sync: [LOCAL, LOCAL_PER_REPLICA, NET, NET_PER_INVERSE_BATCH] };
function truth(K: number, N: number, m: number): { step: number; sync: number } {
  const mu = m / 32;
  const c = A + B * mu + (K > 1 ? R : 0);
  let s = 0;
  if (K > 1 && N === 1) s = LOCAL + LOCAL_PER_REPLICA * (K - 2);
  if (N > 1) s = interNodeShape(K, N) * (NET + NET_PER_INVERSE_BATCH / mu);
  return { step: c + s, sync: s };
}

function synthetic(placements: [number, number][], withSync = true): StepSample[] {
  return placements.flatMap(([K, N]) =>
    BATCHES.map((m) => {
      const t = truth(K, N, m);
      return withSync
        ? { replicas: K, nodes: N, localBatchSize: m, stepTime: t.step, syncTime: t.sync }
        : { replicas: K, nodes: N, localBatchSize: m, stepTime: t.step };
    }),
  );
}

function assertRel(actual: number | undefined, expected: number, tol: number, what: string): void {
  assert.ok(actual !== undefined, `${what}: missing`);
  const rel = Math.abs(actual - expected) / Math.max(Math.abs(expected), 1e-12);
  assert.ok(rel <= tol, `${what}: expected ${expected}, got ${actual} (rel. error ${rel.toExponential(2)})`);
}

function assertAll(actual: readonly number[], expected: readonly number[], tol: number, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  expected.forEach((v, j) => {
    assertRel(actual[j], v, tol, `${what}[${j}]`);
  });
}

describe('fitThroughputModel: recovery of known parameters', () => {
  it('recovers the all-reduce parameters exactly from noise-free samples with sync measured', () => {
    const model = fitThroughputModel(synthetic(PLACEMENTS), { priorWeight: 1e-12 });
    const p = model.parameters;
    assert.equal(p.form, 'allreduce');
    assert.equal(p.refBatch, 32);
    assertAll(p.compute, TRUE.compute, 1e-6, 'compute');
    assertAll(p.sync, TRUE.sync, 1e-6, 'sync');
    assertRel(p.gamma, 1, 1e-3, 'gamma');
    // ... and so predicts an unseen placement and batch exactly.
    const pred = model.predict({ replicas: 24, nodes: 6, localBatchSize: 48 });
    assertRel(pred.stepTime, truth(24, 6, 48).step, 1e-6, 'step time at 24 replicas on 6 nodes');
    assertRel(pred.throughput, (24 * 48) / truth(24, 6, 48).step, 1e-6, 'throughput');
    assert.equal(model.sampleCount, PLACEMENTS.length * BATCHES.length);
    assert.equal(model.distinctScales, 7);
  });

  it('stays within 1% with the default (weak) priors', () => {
    const model = fitThroughputModel(synthetic(PLACEMENTS));
    for (const [K, N] of [
      [3, 1],
      [10, 5],
      [32, 8],
    ] as const) {
      assertRel(
        model.predict({ replicas: K, nodes: N, localBatchSize: 40 }).stepTime,
        truth(K, N, 40).step,
        0.01,
        `${K}/${N}`,
      );
    }
  });

  it('fits step times alone (no sync measured) and finds gamma by the 1-D search', () => {
    // Same parts combined with gamma = 2: T = sqrt(C^2 + S^2).
    const samples = synthetic(PLACEMENTS, false).map((s) => {
      const mu = s.localBatchSize / 32;
      const c = 0.1 + 0.2 * mu + (s.replicas > 1 ? 0.01 : 0);
      const t = truth(s.replicas, s.nodes, s.localBatchSize);
      return { ...s, stepTime: Math.hypot(c, t.sync) };
    });
    const model = fitThroughputModel(samples, { priorWeight: 1e-12 });
    assertRel(model.parameters.gamma, 2, 0.02, 'gamma');
    const c = 0.1 + 0.2 * 1.5 + 0.01;
    assertRel(
      model.predict({ replicas: 8, nodes: 4, localBatchSize: 48 }).stepTime,
      Math.hypot(c, truth(8, 4, 48).sync),
      0.01,
      'step time with gamma 2',
    );
  });

  it('recovers the Pollux form when asked for it', () => {
    // T_sync = 0.03 + 0.004 (K - 2) on one node, 0.2 + 0.02 (K - 2) across nodes.
    const samples: StepSample[] = PLACEMENTS.flatMap(([K, N]) =>
      BATCHES.map((m) => {
        const sync = K === 1 ? 0 : N === 1 ? 0.03 + 0.004 * (K - 2) : 0.2 + 0.02 * (K - 2);
        return {
          replicas: K,
          nodes: N,
          localBatchSize: m,
          stepTime: 0.05 + 0.3 * (m / 32) + sync,
          syncTime: sync,
        };
      }),
    );
    const p = fitThroughputModel(samples, { form: 'pollux', priorWeight: 1e-12 }).parameters;
    assertAll(p.compute, [0.05, 0.3], 1e-6, 'compute');
    assertAll(p.sync, [0.03, 0.004, 0.2, 0.02], 1e-6, 'sync');
  });

  it('recovers the Optimus form for parameter-server samples (chosen automatically)', () => {
    const samples: StepSample[] = [];
    for (const w of [1, 2, 4, 8])
      for (const ps of [1, 2, 4])
        for (const m of BATCHES) {
          const sync = 0.2 * (w / ps) + 0.01 * w + 0.02 * ps;
          samples.push({
            replicas: w,
            nodes: 1,
            ps,
            localBatchSize: m,
            stepTime: 0.05 + 0.1 * (m / 32) + sync,
            syncTime: sync,
          });
        }
    const model = fitThroughputModel(samples, { priorWeight: 1e-12 });
    assert.equal(model.parameters.form, 'optimus');
    assertAll(model.parameters.compute, [0.05, 0.1], 1e-6, 'compute');
    assertAll(model.parameters.sync, [0.2, 0.01, 0.02], 1e-6, 'sync');
    const pred = model.predict({ replicas: 16, nodes: 4, ps: 8, localBatchSize: 32 });
    assertRel(pred.stepTime, 0.05 + 0.1 + 0.2 * 2 + 0.16 + 0.16, 1e-6, 'PS step time');
  });
});

describe('interNodeShape: how inter-node sync extrapolates', () => {
  it('grows with the node count at one replica per node as the ring all-reduce bandwidth term 2 (N - 1) / N', () => {
    for (const N of [2, 3, 4, 6, 8, 12, 16, 64]) {
      assertRel(interNodeShape(N, N), (2 * (N - 1)) / N, 1e-12, `${N} nodes`);
    }
    assert.ok(interNodeShape(16, 16) > interNodeShape(4, 4) && interNodeShape(4, 4) > interNodeShape(2, 2));
    assert.ok(interNodeShape(1024, 1024) < 2, 'the bandwidth term is bounded by twice the two-node ring');
  });

  it('adds log2 of the replicas per node on two nodes (one unit per doubling)', () => {
    assertRel(interNodeShape(4, 2), 2, 1e-12, '2+2');
    assertRel(interNodeShape(8, 2), 3, 1e-12, '4+4');
  });

  it('adds a weaker logarithmic contention on three nodes or more', () => {
    for (const N of [3, 4, 16]) {
      assertRel(
        interNodeShape(4 * N, N) - interNodeShape(N, N),
        CONTENTION_BEYOND_TWO_NODES * Math.log(4),
        1e-12,
        `4 per node on ${N} nodes`,
      );
    }
    assert.ok(
      interNodeShape(12, 3) < interNodeShape(8, 2),
      'spreading 4 per node over 3 nodes relieves sync',
    );
  });

  it('is zero on one node (the local sync terms apply there)', () => {
    assert.equal(interNodeShape(4, 1), 0);
  });

  it('makes a fit from one two-node placement predict more sync at 16 nodes than at 2 or 4', () => {
    const model = fitThroughputModel(
      synthetic([
        [1, 1],
        [4, 1],
        [8, 2],
      ]),
    );
    const sync = (n: number) =>
      evaluateSyncTime(model.parameters, { replicas: n, nodes: n, localBatchSize: 32 });
    assert.ok(
      sync(2) < sync(4) && sync(4) < sync(16),
      `sync at 2/4/16 nodes: ${sync(2)} ${sync(4)} ${sync(16)}`,
    );
    assertRel(sync(16) / sync(2), 1.875, 0.01, 'ring growth from 2 to 16 nodes');
  });
});

describe('fitThroughputModel: uncertainty', () => {
  const jitter = (samples: StepSample[]) =>
    samples.map((s, i) => ({ ...s, stepTime: s.stepTime * (1 + (i % 2 === 0 ? 0.02 : -0.02)) }));
  const relStdev = (model: ReturnType<typeof fitThroughputModel>, p: Placement) => {
    const r = model.predict(p);
    return r.stdev / r.stepTime;
  };

  it('predicts more stdev the farther a placement is from the observed ones', () => {
    const model = fitThroughputModel(
      jitter(
        synthetic([
          [1, 1],
          [2, 1],
          [4, 1],
          [8, 2],
        ]),
      ),
    );
    const seen = relStdev(model, { replicas: 8, nodes: 2, localBatchSize: 32 });
    const near = relStdev(model, { replicas: 16, nodes: 4, localBatchSize: 32 });
    const far = relStdev(model, { replicas: 64, nodes: 16, localBatchSize: 32 });
    const bigBatch = relStdev(model, { replicas: 8, nodes: 2, localBatchSize: 1024 });
    assert.ok(seen > 0.005, `some noise even where observed, got ${seen}`);
    assert.ok(seen < near && near < far, `seen ${seen} < 4 nodes ${near} < 16 nodes ${far}`);
    assert.ok(seen < bigBatch, `batch extrapolation ${bigBatch} vs seen ${seen}`);
  });

  it('is far less sure across nodes when only one node was ever observed', () => {
    const model = fitThroughputModel(
      jitter(
        synthetic([
          [1, 1],
          [2, 1],
          [4, 1],
        ]),
      ),
    );
    const seen = relStdev(model, { replicas: 4, nodes: 1, localBatchSize: 32 });
    const interpolated = relStdev(model, { replicas: 3, nodes: 1, localBatchSize: 32 });
    const twoNodes = relStdev(model, { replicas: 8, nodes: 2, localBatchSize: 32 });
    assert.ok(interpolated < 2 * seen, `interpolation ${interpolated} vs seen ${seen}`);
    assert.ok(twoNodes > 5 * seen && twoNodes > 0.2, `two nodes ${twoNodes} vs seen ${seen}`);
  });
});

describe('fitThroughputModel: prior with a single scale', () => {
  it('predicts sublinear but increasing throughput and a large stdev from single-replica samples', () => {
    const samples: StepSample[] = BATCHES.map((m) => ({
      replicas: 1,
      nodes: 1,
      localBatchSize: m,
      stepTime: 0.1 + 0.005 * m,
    }));
    const model = fitThroughputModel(samples);
    assert.equal(model.distinctScales, 1);
    const base = model.predict({ replicas: 1, nodes: 1, localBatchSize: 32 });
    assertRel(base.stepTime, 0.26, 1e-3, 'the observed scale itself');
    let previous = base.throughput;
    for (const K of [2, 3, 4, 8, 12, 16, 32, 64]) {
      const pred = model.predict({ replicas: K, nodes: Math.ceil(K / 4), localBatchSize: 32 });
      assert.ok(pred.stepTime > 0 && Number.isFinite(pred.stepTime), `step time at ${K}`);
      assert.ok(
        pred.throughput > previous,
        `throughput must grow at ${K}: ${pred.throughput} <= ${previous}`,
      );
      assert.ok(pred.throughput < K * base.throughput, `throughput must be sublinear at ${K}`);
      assert.ok(pred.stdev / pred.stepTime > 0.2, `stdev at ${K} replicas should be large`);
      previous = pred.throughput;
    }
  });

  it('never predicts a negative or zero step time, even for odd placements', () => {
    const model = fitThroughputModel([
      { replicas: 4, nodes: 1, localBatchSize: 8, stepTime: 0.5, syncTime: 0.1 },
    ]);
    for (const p of [
      { replicas: 1, nodes: 1, localBatchSize: 1 },
      { replicas: 1000, nodes: 250, localBatchSize: 1 },
      { replicas: 2, nodes: 5, localBatchSize: 0.5 },
    ]) {
      const pred = model.predict(p);
      assert.ok(pred.stepTime > 0 && pred.stdev > 0 && pred.throughput > 0, JSON.stringify(p));
    }
  });
});

describe('fitThroughputModel: input checks', () => {
  it('throws a clear error on zero samples', () => {
    assert.throws(() => fitThroughputModel([]), /no samples/);
  });

  it('throws on non-positive or non-finite step times', () => {
    for (const stepTime of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(
        () => fitThroughputModel([{ replicas: 1, nodes: 1, localBatchSize: 8, stepTime }]),
        /non-positive step time/,
      );
    }
  });

  it('throws on more nodes than replicas', () => {
    assert.throws(
      () => fitThroughputModel([{ replicas: 2, nodes: 3, localBatchSize: 8, stepTime: 1 }]),
      /invalid nodes/,
    );
  });
});
