// PromQL for the simulator's emulated Prometheus: expressions are parsed by @prometheus-io/lezer-promql
// (the grammar the Prometheus UI uses) into a small AST, then evaluated over stored series with the
// semantics of Prometheus 2.42 (the version Debian ships and `promtool test rules` runs here): closed range
// windows [t - r, t], a 5 m lookback and staleness markers for instant selectors, extrapolated rate and
// increase, and vector matching (one-to-one, group_left, and). Only the functions, aggregations and
// operators trainscaler's rule file uses are implemented; anything else is refused when the rule is
// parsed, naming the construct, so a new rule can never be evaluated loosely.
import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';

export type Labels = Readonly<Record<string, string>>;

export const METRIC_NAME = '__name__';
/** Prometheus' default lookback delta for instant vector selectors. */
export const LOOKBACK_SECONDS = 300;

export type RangeFunction = 'rate' | 'increase' | 'max_over_time' | 'avg_over_time' | 'quantile_over_time';
export type AggregateOp = 'avg' | 'max' | 'count' | 'quantile';
export type BinaryOp = '*' | '/' | '<' | '>' | '==' | '>=' | 'and';

export type Expr =
  | { type: 'number'; value: number }
  | { type: 'selector'; name: string; matchers: ReadonlyArray<{ label: string; value: string }> }
  | { type: 'range'; selector: Extract<Expr, { type: 'selector' }>; seconds: number }
  | { type: 'call'; fn: RangeFunction; param?: Expr; range: Extract<Expr, { type: 'range' }> }
  | { type: 'aggregate'; op: AggregateOp; by: readonly string[]; param?: Expr; expr: Expr }
  | {
      type: 'binary';
      op: BinaryOp;
      on?: readonly string[];
      groupLeft: boolean;
      lhs: Expr;
      rhs: Expr;
    };

export class UnsupportedPromqlError extends Error {
  constructor(expr: string, what: string) {
    super(`PromQL not supported by the simulator's rule evaluator: ${what} in '${expr.trim()}'`);
    this.name = 'UnsupportedPromqlError';
  }
}

const RANGE_FUNCTIONS: Record<string, RangeFunction> = {
  Rate: 'rate',
  Increase: 'increase',
  MaxOverTime: 'max_over_time',
  AvgOverTime: 'avg_over_time',
  QuantileOverTime: 'quantile_over_time',
};
const AGGREGATIONS: Record<string, AggregateOp> = {
  Avg: 'avg',
  Max: 'max',
  Count: 'count',
  Quantile: 'quantile',
};
const BINARY_OPS: Record<string, BinaryOp> = {
  Mul: '*',
  Div: '/',
  Lss: '<',
  Gtr: '>',
  Eql: '==',
  Gte: '>=',
  And: 'and',
};
const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Parses one rule expression; throws UnsupportedPromqlError on a syntax error or an unsupported construct. */
export function parsePromql(source: string): Expr {
  const tree = parser.parse(source);
  let error: number | undefined;
  tree.iterate({
    enter(node) {
      if (node.type.isError && error === undefined) error = node.from;
    },
  });
  if (error !== undefined) throw new UnsupportedPromqlError(source, `syntax error at offset ${error}`);
  const top = tree.topNode.firstChild;
  if (!top || top.nextSibling) throw new UnsupportedPromqlError(source, 'not one expression');
  return toExpr(top, source);
}

function children(node: SyntaxNode): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let child = node.firstChild; child; child = child.nextSibling) out.push(child);
  return out;
}

function text(node: SyntaxNode, source: string): string {
  return source.slice(node.from, node.to);
}

function only(node: SyntaxNode, name: string, source: string): SyntaxNode {
  const found = children(node).filter((c) => c.name === name);
  const first = found[0];
  if (found.length !== 1 || !first)
    throw new UnsupportedPromqlError(source, `${node.name} without one ${name}`);
  return first;
}

function groupingLabels(node: SyntaxNode, source: string): string[] {
  return children(node).map((c) => {
    if (c.name !== 'LabelName') throw new UnsupportedPromqlError(source, `grouping label ${c.name}`);
    return text(c, source);
  });
}

function parseDuration(raw: string, source: string): number {
  const parts = [...raw.matchAll(/(\d+)(ms|[smhdwy])/g)];
  if (parts.map((p) => p[0]).join('') !== raw || parts.length === 0)
    throw new UnsupportedPromqlError(source, `duration '${raw}'`);
  return parts.reduce((sum, p) => {
    const unit = DURATION_UNITS[p[2] ?? ''];
    if (unit === undefined) throw new UnsupportedPromqlError(source, `duration unit in '${raw}'`);
    return sum + Number(p[1]) * unit;
  }, 0);
}

function toExpr(node: SyntaxNode, source: string): Expr {
  switch (node.name) {
    case 'ParenExpr': {
      const inner = children(node);
      const first = inner[0];
      if (inner.length !== 1 || !first) throw new UnsupportedPromqlError(source, 'parenthesised list');
      return toExpr(first, source);
    }
    case 'NumberDurationLiteral': {
      const value = Number(text(node, source));
      if (!Number.isFinite(value)) throw new UnsupportedPromqlError(source, `number '${text(node, source)}'`);
      return { type: 'number', value };
    }
    case 'VectorSelector':
      return selector(node, source);
    case 'MatrixSelector': {
      const inner = children(node);
      const vector = inner[0];
      const duration = inner[1];
      if (inner.length !== 2 || vector?.name !== 'VectorSelector' || duration?.name !== 'DurationExpr')
        throw new UnsupportedPromqlError(source, `range selector '${text(node, source)}'`);
      return {
        type: 'range',
        selector: selector(vector, source),
        seconds: parseDuration(text(duration, source), source),
      };
    }
    case 'FunctionCall':
      return call(node, source);
    case 'AggregateExpr':
      return aggregate(node, source);
    case 'BinaryExpr':
      return binary(node, source);
    default:
      throw new UnsupportedPromqlError(source, `${node.name} '${text(node, source)}'`);
  }
}

function selector(node: SyntaxNode, source: string): Extract<Expr, { type: 'selector' }> {
  let name: string | undefined;
  const matchers: Array<{ label: string; value: string }> = [];
  for (const child of children(node)) {
    if (child.name === 'Identifier') name = text(child, source);
    else if (child.name === 'LabelMatchers') {
      for (const m of children(child)) {
        const parts = children(m);
        const op = parts[1]?.firstChild?.name;
        if (m.name !== 'UnquotedLabelMatcher' || parts.length !== 3 || op !== 'EqlSingle')
          throw new UnsupportedPromqlError(source, `label matcher '${text(m, source)}' (only label="value")`);
        const label = text(parts[0] as SyntaxNode, source);
        matchers.push({ label, value: JSON.parse(text(parts[2] as SyntaxNode, source)) as string });
      }
    } else throw new UnsupportedPromqlError(source, `selector part ${child.name}`);
  }
  if (name === undefined) throw new UnsupportedPromqlError(source, 'selector without a metric name');
  return { type: 'selector', name, matchers };
}

function call(node: SyntaxNode, source: string): Expr {
  const identifier = only(node, 'FunctionIdentifier', source).firstChild;
  const fn = identifier ? RANGE_FUNCTIONS[identifier.name] : undefined;
  if (!fn || !identifier) throw new UnsupportedPromqlError(source, `function '${text(node, source)}'`);
  const args = children(only(node, 'FunctionCallBody', source)).map((c) => toExpr(c, source));
  const expected = fn === 'quantile_over_time' ? 2 : 1;
  const range = args[args.length - 1];
  if (args.length !== expected || range?.type !== 'range')
    throw new UnsupportedPromqlError(source, `arguments of ${fn}`);
  if (fn === 'quantile_over_time') {
    const param = args[0];
    if (param?.type !== 'number') throw new UnsupportedPromqlError(source, `non-literal quantile in ${fn}`);
    return { type: 'call', fn, param, range };
  }
  return { type: 'call', fn, range };
}

function aggregate(node: SyntaxNode, source: string): Expr {
  const opNode = only(node, 'AggregateOp', source).firstChild;
  const op = opNode ? AGGREGATIONS[opNode.name] : undefined;
  if (!op) throw new UnsupportedPromqlError(source, `aggregation '${text(node, source)}'`);
  let by: string[] | undefined;
  for (const modifier of children(node).filter((c) => c.name === 'AggregateModifier')) {
    const [kind, labels] = children(modifier);
    if (kind?.name !== 'By' || !labels)
      throw new UnsupportedPromqlError(source, `'${text(modifier, source)}'`);
    by = groupingLabels(labels, source);
  }
  const args = children(only(node, 'FunctionCallBody', source)).map((c) => toExpr(c, source));
  const expr = args[args.length - 1];
  if (!expr || args.length !== (op === 'quantile' ? 2 : 1))
    throw new UnsupportedPromqlError(source, `arguments of ${op}`);
  const result: Extract<Expr, { type: 'aggregate' }> = { type: 'aggregate', op, by: by ?? [], expr };
  if (op === 'quantile') {
    const param = args[0];
    if (param?.type !== 'number') throw new UnsupportedPromqlError(source, 'non-literal quantile');
    return { ...result, param };
  }
  return result;
}

function binary(node: SyntaxNode, source: string): Expr {
  const parts = children(node);
  const lhsNode = parts[0];
  const opNode = parts[1];
  const rhsNode = parts[parts.length - 1];
  const op = opNode ? BINARY_OPS[opNode.name] : undefined;
  if (!lhsNode || !rhsNode || !op || !opNode)
    throw new UnsupportedPromqlError(source, `operator in '${text(node, source)}'`);
  let on: string[] | undefined;
  let groupLeft = false;
  for (const middle of parts.slice(2, -1)) {
    if (middle.name !== 'MatchingModifierClause')
      throw new UnsupportedPromqlError(source, `'${text(middle, source)}' (e.g. bool)`);
    for (const part of children(middle)) {
      if (part.name === 'On') continue;
      if (part.name === 'GroupingLabels') on = groupingLabels(part, source);
      else if (part.name === 'GroupLeft') groupLeft = true;
      else throw new UnsupportedPromqlError(source, `matching modifier '${text(middle, source)}'`);
    }
    if (children(middle)[0]?.name !== 'On')
      throw new UnsupportedPromqlError(source, `matching modifier '${text(middle, source)}' (only on)`);
  }
  const result: Extract<Expr, { type: 'binary' }> = {
    type: 'binary',
    op,
    groupLeft,
    lhs: toExpr(lhsNode, source),
    rhs: toExpr(rhsNode, source),
  };
  if (groupLeft && op === 'and') throw new UnsupportedPromqlError(source, 'group_left with and');
  return on ? { ...result, on } : result;
}

// ---- evaluation ---------------------------------------------------------------------------------------

/** One stored series: sample times ascending; a null value is a staleness marker. */
export interface StoredSeries {
  labels: Labels;
  times: number[];
  values: Array<number | null>;
}

export interface SeriesSource {
  /** Every stored series of this metric name (labels include __name__). */
  seriesOf(name: string): Iterable<StoredSeries>;
}

export interface VectorSample {
  labels: Labels;
  value: number;
}

type Value = { kind: 'scalar'; value: number } | { kind: 'vector'; samples: VectorSample[] };

/** Evaluates an instant query at `at` (epoch seconds): an instant vector or a scalar. */
export function evaluate(expr: Expr, at: number, source: SeriesSource): Value {
  switch (expr.type) {
    case 'number':
      return { kind: 'scalar', value: expr.value };
    case 'selector':
      return { kind: 'vector', samples: instant(expr, at, source) };
    case 'range':
      throw new Error('a range vector is not an instant query result');
    case 'call':
      return { kind: 'vector', samples: rangeFunction(expr, at, source) };
    case 'aggregate':
      return { kind: 'vector', samples: aggregateOver(expr, at, source) };
    case 'binary':
      return binaryOp(expr, at, source);
  }
}

export function evaluateVector(expr: Expr, at: number, source: SeriesSource): VectorSample[] {
  const value = evaluate(expr, at, source);
  if (value.kind !== 'vector') throw new Error('rule expression must be an instant vector');
  return value.samples;
}

function matches(series: StoredSeries, selector: Extract<Expr, { type: 'selector' }>): boolean {
  return selector.matchers.every((m) => (series.labels[m.label] ?? '') === m.value);
}

/** Index of the last time <= t, or -1. */
function lastAtOrBefore(times: readonly number[], t: number): number {
  let lo = 0;
  let hi = times.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((times[mid] ?? Number.POSITIVE_INFINITY) <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

function instant(
  selector: Extract<Expr, { type: 'selector' }>,
  at: number,
  source: SeriesSource,
): VectorSample[] {
  const out: VectorSample[] = [];
  for (const series of source.seriesOf(selector.name)) {
    if (!matches(series, selector)) continue;
    const i = lastAtOrBefore(series.times, at);
    if (i < 0 || (series.times[i] ?? 0) < at - LOOKBACK_SECONDS) continue;
    const value = series.values[i];
    if (value === null || value === undefined) continue;
    out.push({ labels: series.labels, value });
  }
  return out;
}

function points(series: StoredSeries, from: number, to: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = lastAtOrBefore(series.times, to); i >= 0; i--) {
    const t = series.times[i] ?? 0;
    if (t < from) break;
    const v = series.values[i];
    if (v !== null && v !== undefined) out.push([t, v]);
  }
  return out.reverse();
}

function withoutName(labels: Labels): Labels {
  if (!(METRIC_NAME in labels)) return labels;
  const { [METRIC_NAME]: _name, ...rest } = labels;
  return rest;
}

function rangeFunction(
  expr: Extract<Expr, { type: 'call' }>,
  at: number,
  source: SeriesSource,
): VectorSample[] {
  const { selector, seconds } = expr.range;
  const out: VectorSample[] = [];
  for (const series of source.seriesOf(selector.name)) {
    if (!matches(series, selector)) continue;
    const window = points(series, at - seconds, at);
    const value = overTime(expr, window, at, seconds);
    if (value !== undefined) out.push({ labels: withoutName(series.labels), value });
  }
  return out;
}

function overTime(
  expr: Extract<Expr, { type: 'call' }>,
  window: ReadonlyArray<[number, number]>,
  at: number,
  seconds: number,
): number | undefined {
  if (window.length === 0) return undefined;
  const values = window.map(([, v]) => v);
  switch (expr.fn) {
    case 'rate':
    case 'increase':
      return extrapolatedRate(window, at - seconds, at, seconds, expr.fn === 'rate');
    case 'max_over_time':
      return values.reduce((m, v) => (v > m || Number.isNaN(m) ? v : m));
    case 'avg_over_time':
      return values.reduce((s, v) => s + v, 0) / values.length;
    case 'quantile_over_time':
      return quantile(expr.param?.type === 'number' ? expr.param.value : Number.NaN, values);
  }
}

/** Prometheus 2.42 extrapolatedRate for counters (functions.go). */
function extrapolatedRate(
  window: ReadonlyArray<[number, number]>,
  rangeStart: number,
  rangeEnd: number,
  rangeSeconds: number,
  isRate: boolean,
): number | undefined {
  if (window.length < 2) return undefined;
  const [firstT, firstV] = window[0] as [number, number];
  const [lastT, lastV] = window[window.length - 1] as [number, number];
  let result = lastV - firstV;
  let previous = 0;
  for (const [, v] of window) {
    if (v < previous) result += previous;
    previous = v;
  }
  let durationToStart = firstT - rangeStart;
  const durationToEnd = rangeEnd - lastT;
  const sampledInterval = lastT - firstT;
  const averageBetween = sampledInterval / (window.length - 1);
  if (result > 0 && firstV >= 0) {
    const durationToZero = sampledInterval * (firstV / result);
    if (durationToZero < durationToStart) durationToStart = durationToZero;
  }
  const threshold = averageBetween * 1.1;
  let extrapolateTo = sampledInterval;
  extrapolateTo += durationToStart < threshold ? durationToStart : averageBetween / 2;
  extrapolateTo += durationToEnd < threshold ? durationToEnd : averageBetween / 2;
  result *= extrapolateTo / sampledInterval;
  return isRate ? result / rangeSeconds : result;
}

/** Prometheus' quantile: linear interpolation between the closest ranks (aggregation.go / quantile.go). */
export function quantile(q: number, values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  if (q < 0) return Number.NEGATIVE_INFINITY;
  if (q > 1) return Number.POSITIVE_INFINITY;
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const rank = q * (n - 1);
  const lower = Math.max(0, Math.floor(rank));
  const upper = Math.min(n - 1, lower + 1);
  const weight = rank - Math.floor(rank);
  return (sorted[lower] ?? 0) * (1 - weight) + (sorted[upper] ?? 0) * weight;
}

function signature(labels: Labels, on: readonly string[] | undefined): string {
  if (on) return JSON.stringify(on.map((l) => labels[l] ?? ''));
  return JSON.stringify(
    Object.keys(labels)
      .filter((k) => k !== METRIC_NAME)
      .sort()
      .map((k) => [k, labels[k]]),
  );
}

function aggregateOver(
  expr: Extract<Expr, { type: 'aggregate' }>,
  at: number,
  source: SeriesSource,
): VectorSample[] {
  const groups = new Map<string, { labels: Labels; values: number[] }>();
  for (const sample of evaluateVector(expr.expr, at, source)) {
    const key = JSON.stringify(expr.by.map((l) => sample.labels[l] ?? ''));
    let group = groups.get(key);
    if (!group) {
      const labels: Record<string, string> = {};
      for (const l of expr.by) {
        const v = sample.labels[l];
        if (v !== undefined && v !== '') labels[l] = v;
      }
      group = { labels, values: [] };
      groups.set(key, group);
    }
    group.values.push(sample.value);
  }
  const out: VectorSample[] = [];
  for (const { labels, values } of groups.values()) {
    let value: number;
    switch (expr.op) {
      case 'avg':
        value = values.reduce((s, v) => s + v, 0) / values.length;
        break;
      case 'max':
        value = values.reduce((m, v) => (v > m || Number.isNaN(m) ? v : m));
        break;
      case 'count':
        value = values.length;
        break;
      case 'quantile':
        value = quantile(expr.param?.type === 'number' ? expr.param.value : Number.NaN, values);
        break;
    }
    out.push({ labels, value });
  }
  return out;
}

function isComparison(op: BinaryOp): boolean {
  return op === '<' || op === '>' || op === '==' || op === '>=';
}

function apply(op: BinaryOp, lhs: number, rhs: number): number | undefined {
  switch (op) {
    case '*':
      return lhs * rhs;
    case '/':
      return lhs / rhs;
    case '<':
      return lhs < rhs ? lhs : undefined;
    case '>':
      return lhs > rhs ? lhs : undefined;
    case '==':
      return lhs === rhs ? lhs : undefined;
    case '>=':
      return lhs >= rhs ? lhs : undefined;
    case 'and':
      return lhs;
  }
}

function binaryOp(expr: Extract<Expr, { type: 'binary' }>, at: number, source: SeriesSource): Value {
  const lhs = evaluate(expr.lhs, at, source);
  const rhs = evaluate(expr.rhs, at, source);
  if (expr.op === 'and') {
    if (lhs.kind !== 'vector' || rhs.kind !== 'vector') throw new Error("'and' needs two instant vectors");
    const present = new Set(rhs.samples.map((s) => signature(s.labels, expr.on)));
    return { kind: 'vector', samples: lhs.samples.filter((s) => present.has(signature(s.labels, expr.on))) };
  }
  if (lhs.kind === 'scalar' && rhs.kind === 'scalar') {
    if (isComparison(expr.op)) throw new Error('scalar comparison needs bool, which is not supported');
    return { kind: 'scalar', value: apply(expr.op, lhs.value, rhs.value) ?? Number.NaN };
  }
  const dropName = !isComparison(expr.op);
  if (lhs.kind === 'scalar' || rhs.kind === 'scalar') {
    const vectorOnLeft = lhs.kind === 'vector';
    const vector = lhs.kind === 'vector' ? lhs.samples : rhs.kind === 'vector' ? rhs.samples : [];
    const scalar = lhs.kind === 'scalar' ? lhs.value : rhs.kind === 'scalar' ? rhs.value : Number.NaN;
    const out: VectorSample[] = [];
    for (const s of vector) {
      let value = vectorOnLeft ? apply(expr.op, s.value, scalar) : apply(expr.op, scalar, s.value);
      // A filter keeps the vector's own value whichever side it is on.
      if (value !== undefined && isComparison(expr.op)) value = s.value;
      if (value !== undefined) out.push({ labels: dropName ? withoutName(s.labels) : s.labels, value });
    }
    return { kind: 'vector', samples: out };
  }
  return { kind: 'vector', samples: vectorMatch(expr, lhs.samples, rhs.samples, dropName) };
}

function vectorMatch(
  expr: Extract<Expr, { type: 'binary' }>,
  lhs: readonly VectorSample[],
  rhs: readonly VectorSample[],
  dropName: boolean,
): VectorSample[] {
  const right = new Map<string, VectorSample>();
  for (const s of rhs) {
    const key = signature(s.labels, expr.on);
    if (right.has(key))
      throw new Error(
        `found duplicate series for the match group ${key} on the right hand-side of the operation: many-to-many matching not allowed`,
      );
    right.set(key, s);
  }
  const seenLeft = new Set<string>();
  const out: VectorSample[] = [];
  for (const l of lhs) {
    const key = signature(l.labels, expr.on);
    const r = right.get(key);
    if (!r) continue;
    if (!expr.groupLeft) {
      if (seenLeft.has(key))
        throw new Error(
          `found duplicate series for the match group ${key} on the left hand-side of the operation: many-to-one matching must be explicit (group_left)`,
        );
      seenLeft.add(key);
    }
    const value = apply(expr.op, l.value, r.value);
    if (value === null || value === undefined) continue;
    out.push({ labels: resultLabels(l.labels, expr, dropName), value });
  }
  return out;
}

/** Prometheus' resultMetric: one-to-one matching on(...) keeps only those labels; group_left keeps the left's. */
function resultLabels(labels: Labels, expr: Extract<Expr, { type: 'binary' }>, dropName: boolean): Labels {
  const base = dropName ? withoutName(labels) : labels;
  if (expr.groupLeft || !expr.on) return base;
  const kept: Record<string, string> = {};
  for (const l of expr.on) {
    const v = base[l];
    if (v !== undefined) kept[l] = v;
  }
  return kept;
}
