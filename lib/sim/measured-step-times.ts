// Step times played from the MEASURED Pollux tables (placements.csv, scalability.csv), the way the Pollux
// artifact's simulator plays them (simulator/applications.py, get_throughput): the exact placement's
// measurements when the placement was measured, else an interpolation over (nodes, replicas, local batch)
// of placements.csv grouped by those three plus scalability.csv. Everything here is linear interpolation
// between measured points; the three rules for what lies outside them are stated in MEASURED_WORLD_RULES.
import type { Placement } from '../model/throughput-model.js';
import type { SimulatedPlacement } from './app-model.js';
import type { MeasuredRow, PlacementRow } from './pollux-traces.js';

export interface StepAndSync {
  /** Seconds per optimizer step (gradient accumulation included). */
  stepTime: number;
  /** The gradient-synchronisation part of stepTime (once per optimizer step). */
  syncTime: number;
}

export interface MeasuredStep extends StepAndSync {
  /** 'placement': the exact per-node placement was measured; 'interpolated': (nodes, replicas, local batch). */
  source: 'placement' | 'interpolated';
}

interface Point {
  localBatchSize: number;
  stepTime: number;
  syncTime: number;
}

/** Measurements of one configuration over local batch, sorted, one point per local batch. */
type Curve = readonly Point[];

interface GridColumn {
  nodes: number;
  /** Curves by replica count, sorted by replicas. */
  byReplicas: ReadonlyArray<{ replicas: number; curve: Curve }>;
}

export interface MeasuredAppTable {
  app: string;
  /** Largest local batch one replica processes at once; above it the step accumulates gradients. */
  maxLocalBatchSize: number;
  /** Exact placements, by their canonical (smallest) rotation, e.g. '1124'. */
  placements: ReadonlyMap<string, Curve>;
  /** (nodes, replicas) columns sorted by nodes: placements.csv grouped by (nodes, replicas, local batch) + scalability.csv. */
  grid: readonly GridColumn[];
}

export const MEASURED_WORLD_RULES = [
  "Exact placement: when the simulator's per-node placement (replicas on each node, in the cluster's node order; a placement and its rotations are one measurement, as in the Pollux artifact) was measured in placements.csv, its step and sync times are interpolated linearly in the local batch between that placement's measured local batches.",
  'Otherwise (more than 4 nodes, or a placement not measured): placements.csv grouped by (nodes, replicas, local batch) with the mean of each group, plus scalability.csv (6, 8, 12 and 16 nodes), interpolated linearly in nodes between the two nearest measured node counts, at each of them linearly in replicas at the same replicas per node (replicas / nodes), and in local batch; the Pollux artifact triangulates the same points (scipy LinearNDInterpolator), both are exact at the measured points and linear between them. Outside the measured node counts and replicas per node (beyond 16 nodes, more than 4 replicas per node) the nearest measured value.',
  "Gradient accumulation above the largest measured local batch: a replica processes at most c = the smaller of the application's largest local batch in placements.csv (yolov3: 8, the Pollux setup's cap) and the largest measured at that configuration (ncf's scalability.csv stops at 5,803); a larger per-replica batch m runs as k = ceil(m / c) micro-batches of m / k, step time = T(m/k) + (k - 1) x (T(m/k) - S(m/k)) (T step, S sync time; the sync happens once per step), as in the artifact's simulator.",
  'Below the smallest measured local batch of a configuration, the step and sync times measured at that smallest batch (no extrapolation: a GPU is not assumed faster on a batch nobody measured).',
] as const;

/** The placement with zero entries dropped, rotated to its lexicographically smallest form (the artifact's key). */
export function canonicalPlacement(perNode: readonly number[]): string | undefined {
  const nodes = perNode.filter((n) => n > 0);
  if (nodes.length === 0 || nodes.some((n) => !Number.isInteger(n) || n > 9)) return undefined;
  const rotations = nodes.map((_, i) => [...nodes.slice(i), ...nodes.slice(0, i)].join(''));
  return rotations.sort()[0];
}

function curveOf(rows: ReadonlyArray<Point>): Curve {
  const byBatch = new Map<number, Point[]>();
  for (const row of rows) byBatch.set(row.localBatchSize, [...(byBatch.get(row.localBatchSize) ?? []), row]);
  const mean = (ps: Point[], f: (p: Point) => number) => ps.reduce((s, p) => s + f(p), 0) / ps.length;
  return [...byBatch]
    .sort(([a], [b]) => a - b)
    .map(([localBatchSize, ps]) => ({
      localBatchSize,
      stepTime: mean(ps, (p) => p.stepTime),
      syncTime: mean(ps, (p) => p.syncTime),
    }));
}

/** Builds an application's table from its parsed placements.csv and scalability.csv rows. */
export function buildMeasuredAppTable(input: {
  app: string;
  placements: readonly PlacementRow[];
  scalability: readonly MeasuredRow[];
  /** Cap on the local batch one replica processes at once; default: the largest in placements.csv. */
  maxLocalBatchSize?: number;
}): MeasuredAppTable {
  if (input.placements.length === 0) throw new RangeError(`${input.app}: placements.csv has no rows`);
  const largest = Math.max(...input.placements.map((r) => r.localBatchSize));
  const maxLocalBatchSize = input.maxLocalBatchSize ?? largest;
  if (!(maxLocalBatchSize > 0)) throw new RangeError(`${input.app}: maxLocalBatchSize must be > 0`);

  const exact = new Map<string, Point[]>();
  for (const row of input.placements) {
    const key = canonicalPlacement(row.perNode);
    if (key === undefined) throw new RangeError(`${input.app}: bad placement '${row.placement}'`);
    exact.set(key, [...(exact.get(key) ?? []), row]);
  }
  const grouped = new Map<number, Map<number, Point[]>>();
  for (const row of [...input.placements, ...input.scalability]) {
    const column = grouped.get(row.nodes) ?? new Map<number, Point[]>();
    column.set(row.replicas, [...(column.get(row.replicas) ?? []), row]);
    grouped.set(row.nodes, column);
  }
  return {
    app: input.app,
    maxLocalBatchSize,
    placements: new Map([...exact].map(([key, rows]) => [key, curveOf(rows)])),
    grid: [...grouped]
      .sort(([a], [b]) => a - b)
      .map(([nodes, column]) => ({
        nodes,
        byReplicas: [...column]
          .sort(([a], [b]) => a - b)
          .map(([replicas, rows]) => ({ replicas, curve: curveOf(rows) })),
      })),
  };
}

/** Linear weights of the two neighbours of x in sorted xs (clamped at the ends): [[index, weight], ...]. */
function bracket(xs: readonly number[], x: number): Array<[number, number]> {
  const last = xs.length - 1;
  if (last < 0) throw new RangeError('bracket: no points');
  if (x <= (xs[0] ?? 0)) return [[0, 1]];
  if (x >= (xs[last] ?? 0)) return [[last, 1]];
  let hi = 1;
  while ((xs[hi] ?? Number.POSITIVE_INFINITY) < x) hi += 1;
  const x0 = xs[hi - 1] ?? 0;
  const x1 = xs[hi] ?? 0;
  if (x1 === x) return [[hi, 1]];
  const w = (x - x0) / (x1 - x0);
  return [
    [hi - 1, 1 - w],
    [hi, w],
  ];
}

/** The curve at local batch m, linear between measured batches, flat below the smallest. */
function interpolateCurve(curve: Curve, m: number): StepAndSync {
  const parts = bracket(
    curve.map((p) => p.localBatchSize),
    m,
  );
  let stepTime = 0;
  let syncTime = 0;
  for (const [i, w] of parts) {
    const p = curve[i];
    if (!p) continue;
    stepTime += w * p.stepTime;
    syncTime += w * p.syncTime;
  }
  return { stepTime, syncTime };
}

/** One configuration at per-replica batch m, with gradient accumulation above its cap. */
function evaluateCurve(curve: Curve, m: number, appCap: number): StepAndSync {
  const measuredMax = curve[curve.length - 1]?.localBatchSize ?? appCap;
  const cap = Math.min(appCap, measuredMax);
  // The epsilon keeps m = k x cap at k micro-batches despite floating-point division.
  const k = Math.max(1, Math.ceil(m / cap - 1e-9));
  const micro = interpolateCurve(curve, m / k);
  return {
    stepTime: micro.stepTime + (k - 1) * (micro.stepTime - micro.syncTime),
    syncTime: micro.syncTime,
  };
}

function weighted(parts: ReadonlyArray<readonly [number, StepAndSync]>): StepAndSync {
  return {
    stepTime: parts.reduce((s, [w, v]) => s + w * v.stepTime, 0),
    syncTime: parts.reduce((s, [w, v]) => s + w * v.syncTime, 0),
  };
}

/** The (nodes, replicas, local batch) interpolation, at the same replicas per node across node counts. */
function interpolateGrid(table: MeasuredAppTable, placement: Placement): StepAndSync {
  const perNode = placement.replicas / placement.nodes;
  const columns = bracket(
    table.grid.map((c) => c.nodes),
    placement.nodes,
  );
  return weighted(
    columns.map(([ci, wn]) => {
      const column = table.grid[ci];
      if (!column) throw new RangeError(`${table.app}: no grid column ${ci}`);
      const rows = bracket(
        column.byReplicas.map((r) => r.replicas),
        perNode * column.nodes,
      );
      const value = weighted(
        rows.map(([ri, wr]) => {
          const curve = column.byReplicas[ri]?.curve;
          if (!curve) throw new RangeError(`${table.app}: no curve ${column.nodes}/${ri}`);
          return [wr, evaluateCurve(curve, placement.localBatchSize, table.maxLocalBatchSize)] as const;
        }),
      );
      return [wn, value] as const;
    }),
  );
}

/** Measured step and sync time of `placement` (no noise). */
export function measuredStep(table: MeasuredAppTable, placement: SimulatedPlacement): MeasuredStep {
  const { replicas, nodes, localBatchSize } = placement;
  if (!(replicas >= 1 && nodes >= 1 && replicas >= nodes && localBatchSize > 0)) {
    throw new RangeError(`measuredStep(${table.app}): invalid placement ${JSON.stringify(placement)}`);
  }
  const perNode = placement.perNode?.filter((n) => n > 0);
  if (perNode && (perNode.length !== nodes || perNode.reduce((s, n) => s + n, 0) !== replicas)) {
    throw new RangeError(
      `measuredStep(${table.app}): perNode ${JSON.stringify(placement.perNode)} disagrees with ${replicas} replicas on ${nodes} nodes`,
    );
  }
  const key = perNode ? canonicalPlacement(perNode) : undefined;
  const curve = key === undefined ? undefined : table.placements.get(key);
  if (curve) {
    return { ...evaluateCurve(curve, localBatchSize, table.maxLocalBatchSize), source: 'placement' };
  }
  return { ...interpolateGrid(table, placement), source: 'interpolated' };
}
