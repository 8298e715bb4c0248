import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { leastSquares, nnls, times, transposeTimes } from '../../../lib/model/nnls.js';

/** Deterministic pseudo-random numbers in [-1, 1) (LCG), so the cases are the same on every run. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 2 - 1;
  };
}

function residualNorm(A: number[][], x: number[], b: number[]): number {
  const ax = times(A, x);
  return Math.sqrt(b.reduce((s, bi, i) => s + (bi - (ax[i] ?? 0)) ** 2, 0));
}

/** Exhaustive NNLS: best feasible unconstrained LS over every subset of columns. */
function bruteForce(A: number[][], b: number[]): number {
  const n = A[0]?.length ?? 0;
  let best = residualNorm(A, new Array<number>(n).fill(0), b);
  for (let mask = 1; mask < 1 << n; mask++) {
    const cols = [...Array(n).keys()].filter((j) => mask & (1 << j));
    const x = leastSquares(A, b, cols);
    if (x.every((v) => v >= -1e-12)) best = Math.min(best, residualNorm(A, x, b));
  }
  return best;
}

function close(actual: number, expected: number, tol = 1e-9): void {
  assert.ok(Math.abs(actual - expected) <= tol, `expected ${expected}, got ${actual}`);
}

describe('leastSquares', () => {
  it('solves an overdetermined consistent system exactly', () => {
    const A = [
      [1, 0],
      [1, 1],
      [1, 2],
      [1, 3],
    ];
    const x = leastSquares(A, [1, 3, 5, 7]);
    close(x[0] ?? Number.NaN, 1);
    close(x[1] ?? Number.NaN, 2);
  });

  it('gives the textbook fit of an inconsistent system', () => {
    // Regression of y = [1, 2, 2] on [1, t], t = 0, 1, 2: slope 0.5, intercept 7/6.
    const x = leastSquares(
      [
        [1, 0],
        [1, 1],
        [1, 2],
      ],
      [1, 2, 2],
    );
    close(x[0] ?? Number.NaN, 7 / 6);
    close(x[1] ?? Number.NaN, 0.5);
  });

  it('stays finite on a rank-deficient matrix (duplicate column gets 0)', () => {
    const x = leastSquares(
      [
        [1, 1],
        [2, 2],
      ],
      [2, 4],
    );
    close(x[0] ?? Number.NaN, 2);
    close(x[1] ?? Number.NaN, 0);
  });
});

describe('nnls (Lawson-Hanson)', () => {
  it('returns the unconstrained solution when it is already non-negative', () => {
    const A = [
      [2, 0, 1],
      [0, 1, 0],
      [1, 1, 1],
      [0, 3, 1],
    ];
    const xTrue = [0.5, 1.5, 2];
    const r = nnls(A, times(A, xTrue));
    xTrue.forEach((v, j) => {
      close(r.x[j] ?? Number.NaN, v, 1e-10);
    });
    close(r.residualNorm, 0, 1e-10);
    assert.deepEqual(r.active, [0, 1, 2]);
  });

  it('clamps where unconstrained least squares goes negative', () => {
    // y = 3 - t: unconstrained fit is intercept 3, slope -1. With slope >= 0 the best is the mean, 1.5.
    const A = [
      [1, 0],
      [1, 1],
      [1, 2],
      [1, 3],
    ];
    const b = [3, 2, 1, 0];
    const ls = leastSquares(A, b);
    assert.ok((ls[1] ?? 0) < -0.99, 'the unconstrained slope is negative');
    const r = nnls(A, b);
    close(r.x[0] ?? Number.NaN, 1.5, 1e-12);
    assert.equal(r.x[1], 0);
    close(r.residualNorm, Math.sqrt(5), 1e-12);
    assert.deepEqual(r.active, [0]);
  });

  it('handles a case where the first column to enter must leave again', () => {
    // Columns 0 and 1 nearly parallel; b favours column 1 and column 2.
    const A = [
      [1, 0.9, 0],
      [1, 1.1, 0],
      [0, 0, 1],
      [1, 1, 1],
    ];
    const b = [0.9, 1.1, 2, 3];
    const r = nnls(A, b);
    close(residualNorm(A, r.x, b), bruteForce(A, b), 1e-10);
    assert.ok(r.x.every((v) => v >= 0));
  });

  it('matches exhaustive search and satisfies the KKT conditions on random problems', () => {
    const rand = lcg(42);
    for (let trial = 0; trial < 40; trial++) {
      const m = 6 + (trial % 5);
      const n = 2 + (trial % 4);
      const A = Array.from({ length: m }, () => Array.from({ length: n }, () => rand()));
      const b = Array.from({ length: m }, () => rand());
      const r = nnls(A, b);
      assert.ok(
        r.x.every((v) => v >= 0),
        `trial ${trial}: negative entry`,
      );
      close(r.residualNorm, bruteForce(A, b), 1e-9);
      // KKT: gradient w = A^T (b - A x) is <= 0 where x = 0 and = 0 where x > 0.
      const ax = times(A, r.x);
      const w = transposeTimes(
        A,
        b.map((bi, i) => bi - (ax[i] ?? 0)),
        n,
      );
      r.x.forEach((xj, j) => {
        const wj = w[j] ?? 0;
        if (xj > 0) assert.ok(Math.abs(wj) < 1e-9, `trial ${trial}: w[${j}] = ${wj} on a positive entry`);
        else assert.ok(wj < 1e-9, `trial ${trial}: w[${j}] = ${wj} > 0 on a zero entry`);
      });
    }
  });

  it('returns zero for a target in the negative cone', () => {
    const r = nnls(
      [
        [1, 0],
        [0, 1],
      ],
      [-1, -2],
    );
    assert.deepEqual(r.x, [0, 0]);
    close(r.residualNorm, Math.sqrt(5));
  });

  it('rejects mismatched dimensions', () => {
    assert.throws(() => nnls([[1, 2]], [1, 2]), /rows/);
  });
});
