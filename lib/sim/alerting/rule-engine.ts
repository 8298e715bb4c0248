// The emulated Prometheus rule manager: the project's own rule file (infra/prometheus/rules), every group
// evaluated in file order at each evaluation instant, recording rules written back as series, alerting rules
// with Prometheus 2.42's state machine (pending when the expression first returns a series, firing once it
// has returned it for `for:`, gone the first evaluation it does not; a series that comes back is a new
// alert). Alert labels = the result's labels without __name__, then the rule's labels; annotations expanded.
import { load } from 'js-yaml';
import { checkTemplate, expandTemplate } from './alert-template.js';
import { type Expr, evaluateVector, type Labels, METRIC_NAME, parsePromql } from './promql.js';
import type { SeriesStore } from './series-store.js';

interface RuleBase {
  expr: Expr;
  source: string;
  labels: Record<string, string>;
}
export interface RecordingRule extends RuleBase {
  kind: 'record';
  record: string;
}
export interface AlertingRule extends RuleBase {
  kind: 'alert';
  alert: string;
  forSeconds: number;
  annotations: Record<string, string>;
}
export type Rule = RecordingRule | AlertingRule;
export interface RuleGroup {
  name: string;
  rules: Rule[];
}

export interface ActiveAlert {
  rule: string;
  labels: Labels;
  annotations: Record<string, string>;
  value: number;
  activeAt: number;
  state: 'pending' | 'firing';
  firedAt?: number;
}

const RULE_KEYS = new Set(['record', 'alert', 'expr', 'for', 'labels', 'annotations']);

function durationSeconds(raw: unknown, where: string): number {
  const match = typeof raw === 'string' ? /^(\d+)([smh])$/.exec(raw) : null;
  if (!match) throw new Error(`${where}: duration '${String(raw)}' (expected e.g. 10m)`);
  return Number(match[1]) * (match[2] === 'h' ? 3600 : match[2] === 'm' ? 60 : 1);
}

function stringMap(raw: unknown, where: string): Record<string, string> {
  if (raw === undefined) return {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${where}: not a map`);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, String(v)]));
}

/** Parses a Prometheus rule file; refuses group options and rule fields the emulation does not implement. */
export function parseRuleFile(yamlText: string, file = 'rules'): RuleGroup[] {
  const doc = load(yamlText) as { groups?: unknown };
  if (!doc || !Array.isArray(doc.groups)) throw new Error(`${file}: no groups`);
  return doc.groups.map((group: Record<string, unknown>) => {
    const extra = Object.keys(group).filter((k) => k !== 'name' && k !== 'rules');
    if (extra.length > 0) throw new Error(`${file}: group option(s) ${extra.join(', ')} not emulated`);
    const rules = (group.rules as Array<Record<string, unknown>>).map((raw) => {
      const where = `${file}: ${String(raw.record ?? raw.alert)}`;
      const unknown = Object.keys(raw).filter((k) => !RULE_KEYS.has(k));
      if (unknown.length > 0) throw new Error(`${where}: field(s) ${unknown.join(', ')} not emulated`);
      const source = String(raw.expr);
      const base = { expr: parsePromql(source), source, labels: stringMap(raw.labels, where) };
      if (typeof raw.record === 'string') return { kind: 'record', record: raw.record, ...base } as Rule;
      const annotations = stringMap(raw.annotations, where);
      for (const text of Object.values(annotations)) checkTemplate(text);
      return {
        kind: 'alert',
        alert: String(raw.alert),
        forSeconds: raw.for === undefined ? 0 : durationSeconds(raw.for, where),
        annotations,
        ...base,
      } as Rule;
    });
    return { name: String(group.name), rules };
  });
}

function alertKey(labels: Labels): string {
  return JSON.stringify(
    Object.keys(labels)
      .sort()
      .map((k) => [k, labels[k]]),
  );
}

export class RuleEngine {
  readonly #groups: readonly RuleGroup[];
  readonly #store: SeriesStore;
  readonly #active = new Map<string, Map<string, ActiveAlert>>();

  constructor(groups: readonly RuleGroup[], store: SeriesStore) {
    this.#groups = groups;
    this.#store = store;
  }

  /** The longest range any rule reads: older samples can be dropped. */
  get longestRangeSeconds(): number {
    let longest = 0;
    const walk = (expr: Expr): void => {
      if (expr.type === 'range') longest = Math.max(longest, expr.seconds);
      if (expr.type === 'call') walk(expr.range);
      if (expr.type === 'aggregate') walk(expr.expr);
      if (expr.type === 'binary') {
        walk(expr.lhs);
        walk(expr.rhs);
      }
    };
    for (const group of this.#groups) for (const rule of group.rules) walk(rule.expr);
    return longest;
  }

  /** One evaluation of every group at `at`; returns the alerts firing after it. */
  evaluate(at: number): ActiveAlert[] {
    for (const group of this.#groups) {
      for (const rule of group.rules) {
        const result = evaluateVector(rule.expr, at, this.#store);
        if (rule.kind === 'record') {
          this.#store.write(
            `rule:${group.name}/${rule.record}`,
            result.map((s) => ({
              labels: { ...s.labels, ...rule.labels, [METRIC_NAME]: rule.record },
              value: s.value,
            })),
            at,
          );
        } else this.#alert(rule, result, at);
      }
    }
    return this.firing();
  }

  firing(): ActiveAlert[] {
    const out: ActiveAlert[] = [];
    for (const alerts of this.#active.values())
      for (const a of alerts.values()) if (a.state === 'firing') out.push(a);
    return out;
  }

  #alert(rule: AlertingRule, result: ReadonlyArray<{ labels: Labels; value: number }>, at: number): void {
    const active = this.#active.get(rule.alert) ?? new Map<string, ActiveAlert>();
    this.#active.set(rule.alert, active);
    const seen = new Set<string>();
    for (const sample of result) {
      const { [METRIC_NAME]: _name, ...plain } = sample.labels;
      const labels: Record<string, string> = { ...plain, ...rule.labels, alertname: rule.alert };
      const key = alertKey(labels);
      if (seen.has(key))
        throw new Error(
          `${rule.alert}: vector contains metrics with the same labelset after applying alert labels`,
        );
      seen.add(key);
      const annotations = Object.fromEntries(
        Object.entries(rule.annotations).map(([k, t]) => [k, expandTemplate(t, plain, sample.value)]),
      );
      const existing = active.get(key);
      if (existing) {
        existing.value = sample.value;
        existing.annotations = annotations;
        continue;
      }
      active.set(key, {
        rule: rule.alert,
        labels,
        annotations,
        value: sample.value,
        activeAt: at,
        state: 'pending',
      });
    }
    for (const [key, alert] of active) {
      if (!seen.has(key)) {
        active.delete(key);
        continue;
      }
      if (alert.state === 'pending' && at - alert.activeAt >= rule.forSeconds) {
        alert.state = 'firing';
        alert.firedAt = at;
      }
    }
  }
}
