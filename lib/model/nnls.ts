// Non-negative least squares (Lawson & Hanson, "Solving Least Squares Problems", 1974, ch. 23)
// and the small dense linear algebra it needs. Matrices are row-major arrays of rows.

export type Matrix = number[][];

function at(v: readonly number[], i: number): number {
  const x = v[i];
  if (x === undefined) throw new RangeError(`index ${i} out of range ${v.length}`);
  return x;
}

function row(A: Matrix, i: number): number[] {
  const r = A[i];
  if (r === undefined) throw new RangeError(`row ${i} out of range ${A.length}`);
  return r;
}

/** A^T v for A of m rows. */
export function transposeTimes(A: Matrix, v: readonly number[], cols: number): number[] {
  const out = new Array<number>(cols).fill(0);
  for (let i = 0; i < A.length; i++) {
    const r = row(A, i);
    const vi = at(v, i);
    if (vi === 0) continue;
    for (let j = 0; j < cols; j++) out[j] = at(out, j) + at(r, j) * vi;
  }
  return out;
}

export function times(A: Matrix, x: readonly number[]): number[] {
  return A.map((r) => {
    let s = 0;
    for (let j = 0; j < x.length; j++) s += at(r, j) * at(x, j);
    return s;
  });
}

/**
 * Unconstrained least squares min ||A x - b|| over the given columns (others are 0), by Householder QR.
 * Columns that are (numerically) linearly dependent on earlier ones get 0, so the answer is always finite.
 */
export function leastSquares(A: Matrix, b: readonly number[], columns?: readonly number[]): number[] {
  const n = A.length === 0 ? 0 : row(A, 0).length;
  const cols = columns ?? Array.from({ length: n }, (_, j) => j);
  const m = A.length;
  const k = cols.length;
  // Working copy of the selected columns (column-major for Householder) and of b.
  const Q: number[][] = cols.map((c) => A.map((r) => at(r, c)));
  const y = [...b];
  const diag = new Array<number>(k).fill(0);
  /** Row of R holding column j's diagonal, or -1 when column j is dependent on earlier ones. */
  const pivotRow = new Array<number>(k).fill(-1);
  let scale = 0;
  for (const col of Q) for (const v of col) scale = Math.max(scale, Math.abs(v));
  const tol = Math.max(m, k) * Number.EPSILON * 1e3 * (scale || 1);
  let rank = 0;
  for (let j = 0; j < k && rank < m; j++) {
    const cj = Q[j] as number[];
    let norm = 0;
    for (let i = rank; i < m; i++) norm += at(cj, i) ** 2;
    norm = Math.sqrt(norm);
    if (norm <= tol) continue;
    const alpha = at(cj, rank) > 0 ? -norm : norm;
    // Householder vector v = x - alpha e1, stored in cj[rank..].
    cj[rank] = at(cj, rank) - alpha;
    let vnorm2 = 0;
    for (let i = rank; i < m; i++) vnorm2 += at(cj, i) ** 2;
    for (let l = j + 1; l < k; l++) reflect(cj, vnorm2, rank, Q[l] as number[]);
    reflect(cj, vnorm2, rank, y);
    diag[j] = alpha;
    pivotRow[j] = rank;
    rank++;
  }
  // Back substitution; R[pivotRow(j)][l] = Q[l][pivotRow(j)] for l > j.
  const xs = new Array<number>(k).fill(0);
  for (let j = k - 1; j >= 0; j--) {
    const pr = at(pivotRow, j);
    if (pr < 0) continue;
    let s = at(y, pr);
    for (let l = j + 1; l < k; l++) if (at(pivotRow, l) >= 0) s -= at(Q[l] as number[], pr) * at(xs, l);
    xs[j] = s / at(diag, j);
  }
  const x = new Array<number>(n).fill(0);
  cols.forEach((c, idx) => {
    x[c] = at(xs, idx);
  });
  return x;
}

/** Applies the Householder reflection of vector v (entries from `from` on, squared norm vnorm2) to target. */
function reflect(v: readonly number[], vnorm2: number, from: number, target: number[]): void {
  let dot = 0;
  for (let i = from; i < v.length; i++) dot += at(v, i) * at(target, i);
  const f = (2 * dot) / vnorm2;
  for (let i = from; i < v.length; i++) target[i] = at(target, i) - f * at(v, i);
}

export interface NnlsResult {
  /** The solution, x >= 0. */
  x: number[];
  /** ||A x - b||_2. */
  residualNorm: number;
  /** Indices of the columns with x > 0 (the passive set). */
  active: number[];
  iterations: number;
}

/**
 * Lawson-Hanson active-set algorithm for min ||A x - b||_2 subject to x >= 0.
 * A has m rows of n columns. Deterministic; at most `maxIterations` (default 3n + 10) outer steps.
 * `start`: columns expected positive (an earlier, similar problem's `active`). When the least squares on them
 * alone is positive, the algorithm starts there instead of at x = 0; otherwise it starts at 0. Either way it
 * stops only where the optimality conditions hold, so where the minimum is unique (A of full column rank) the
 * answer is the same up to rounding, in fewer steps when the start was right.
 */
export function nnls(
  A: Matrix,
  b: readonly number[],
  maxIterations?: number,
  start?: readonly number[],
): NnlsResult {
  const m = A.length;
  if (b.length !== m) throw new Error(`nnls: A has ${m} rows but b has ${b.length}`);
  const n = m === 0 ? 0 : row(A, 0).length;
  for (const r of A) if (r.length !== n) throw new Error('nnls: ragged matrix');
  const x = new Array<number>(n).fill(0);
  if (n === 0 || m === 0) return { x, residualNorm: norm2(b), active: [], iterations: 0 };
  let anorm = 0;
  for (const r of A)
    anorm = Math.max(
      anorm,
      r.reduce((s, v) => s + Math.abs(v), 0),
    );
  const tol = 10 * Number.EPSILON * (anorm || 1) * Math.max(m, n) * Math.max(1, norm2(b));
  const passive = new Array<boolean>(n).fill(false);
  const warm = start !== undefined && start.length > 0 && warmStart(A, b, start, x, passive, tol * 1e-3);
  const limit = maxIterations ?? 3 * n + 10;
  let iterations = 0;
  const residual = (): number[] => {
    const ax = times(A, x);
    return b.map((bi, i) => bi - at(ax, i));
  };
  let w = transposeTimes(A, residual(), n);
  while (iterations < limit) {
    // Most positive gradient among the zero set.
    let t = -1;
    let best = tol;
    for (let j = 0; j < n; j++) {
      if (!passive[j] && at(w, j) > best) {
        best = at(w, j);
        t = j;
      }
    }
    if (t < 0) break;
    iterations++;
    passive[t] = true;
    for (let inner = 0; inner < 3 * n + 10; inner++) {
      const P = passiveIndices(passive);
      const z = leastSquares(A, b, P);
      // Columns dependent on others come back as exactly 0: drop them from the passive set.
      let feasible = true;
      for (const j of P) if (at(z, j) <= 0) feasible = false;
      if (feasible) {
        for (let j = 0; j < n; j++) x[j] = at(z, j);
        break;
      }
      let alpha = Number.POSITIVE_INFINITY;
      for (const j of P) {
        const zj = at(z, j);
        if (zj <= 0) {
          const xj = at(x, j);
          const a = xj / (xj - zj);
          if (a < alpha) alpha = a;
        }
      }
      if (!Number.isFinite(alpha)) alpha = 0;
      for (const j of P) x[j] = at(x, j) + alpha * (at(z, j) - at(x, j));
      for (const j of P) {
        if (at(x, j) <= tol * 1e-3 || (at(z, j) <= 0 && alpha === 0)) {
          x[j] = 0;
          passive[j] = false;
        }
      }
    }
    w = transposeTimes(A, residual(), n);
    // Guard against cycling on the column just added (degenerate, dependent column).
    if (!passive[t]) w[t] = 0;
  }
  if (warm) {
    // The guard above can stop a run short of the optimum (a column dropped at once is never retried); from
    // a cold start that is the algorithm as it always was, from a warm one it must not differ: check the
    // optimality conditions afresh and start over from x = 0 where they fail.
    const g = transposeTimes(A, residual(), n);
    for (let j = 0; j < n; j++) if (!passive[j] && at(g, j) > tol) return nnls(A, b, maxIterations);
  }
  const active = passiveIndices(passive).filter((j) => at(x, j) > 0);
  return { x, residualNorm: norm2(residual()), active, iterations };
}

/**
 * x and the passive set from the least squares on `start`'s columns, those that come out at or below `zero`
 * left out (a coefficient of rounding size would stall the first step), until the rest are all positive.
 * False when none are: x = 0, a cold start.
 */
function warmStart(
  A: Matrix,
  b: readonly number[],
  start: readonly number[],
  x: number[],
  passive: boolean[],
  zero: number,
): boolean {
  const n = x.length;
  let P = [...new Set(start)].filter((j) => Number.isInteger(j) && j >= 0 && j < n).sort((i, j) => i - j);
  while (P.length > 0) {
    const z = leastSquares(A, b, P);
    const positive = P.filter((j) => at(z, j) > zero);
    if (positive.length < P.length) {
      P = positive;
      continue;
    }
    for (const j of P) {
      x[j] = at(z, j);
      passive[j] = true;
    }
    return true;
  }
  return false;
}

function passiveIndices(passive: readonly boolean[]): number[] {
  const out: number[] = [];
  passive.forEach((p, j) => {
    if (p) out.push(j);
  });
  return out;
}

export function norm2(v: readonly number[]): number {
  let s = 0;
  for (const x of v) s += x * x;
  return Math.sqrt(s);
}

/**
 * Inverse of a symmetric positive semi-definite matrix plus `ridge` on the diagonal (Gauss-Jordan with
 * partial pivoting). Used for leverage x^T (X^T X + ridge I)^-1 x.
 */
export function inverseSymmetric(M: Matrix, ridge = 0): Matrix {
  const n = M.length;
  const a = M.map((r, i) => [...r.map((v, j) => v + (i === j ? ridge : 0)), ...unit(n, i)]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(at(row(a, r), c)) > Math.abs(at(row(a, p), c))) p = r;
    const tmp = row(a, c);
    a[c] = row(a, p);
    a[p] = tmp;
    const pr = row(a, c);
    const piv = at(pr, c);
    if (piv === 0) throw new Error('inverseSymmetric: singular matrix (add a ridge)');
    for (let j = 0; j < 2 * n; j++) pr[j] = at(pr, j) / piv;
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const rr = row(a, r);
      const f = at(rr, c);
      if (f === 0) continue;
      for (let j = 0; j < 2 * n; j++) rr[j] = at(rr, j) - f * at(pr, j);
    }
  }
  return a.map((r) => r.slice(n));
}

function unit(n: number, i: number): number[] {
  const u = new Array<number>(n).fill(0);
  u[i] = 1;
  return u;
}

/** X^T X for X of m rows and n columns. */
export function gram(X: Matrix, n: number): Matrix {
  const G: Matrix = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (const r of X) {
    for (let i = 0; i < n; i++) {
      const ri = at(r, i);
      if (ri === 0) continue;
      const gi = row(G, i);
      for (let j = 0; j < n; j++) gi[j] = at(gi, j) + ri * at(r, j);
    }
  }
  return G;
}

/** x^T M x. */
export function quadraticForm(M: Matrix, x: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) {
    const xi = at(x, i);
    if (xi === 0) continue;
    const r = row(M, i);
    for (let j = 0; j < x.length; j++) s += xi * at(r, j) * at(x, j);
  }
  return s;
}
