// The simulator's rule evaluation (lib/sim/alerting) against the project's promtool cases: every
// alert_rule_test of infra/prometheus/tests/trainscaler.rules.test.yml (which `promtool test rules` passes,
// test/metrics) must give the same firing alerts, labels and annotations here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { parsePromql, UnsupportedPromqlError } from '../../../lib/sim/alerting/promql.js';
import { parseRuleFile, RuleEngine } from '../../../lib/sim/alerting/rule-engine.js';
import { SeriesStore } from '../../../lib/sim/alerting/series-store.js';

const RULES = 'infra/prometheus/rules/trainscaler.rules.yml';
const TESTS = 'infra/prometheus/tests/trainscaler.rules.test.yml';

interface PromtoolCase {
  interval: string;
  input_series: Array<{ series: string; values: string }>;
  alert_rule_test: Array<{
    eval_time: string;
    alertname: string;
    exp_alerts: Array<{ exp_labels: Record<string, string>; exp_annotations?: Record<string, string> }>;
  }>;
}

function minutes(raw: string): number {
  const m = /^(\d+)m$/.exec(raw);
  assert.ok(m, `duration ${raw}`);
  return Number(m[1]) * 60;
}

/** promtool's expanding notation: 'a+bxN' (N+1 values), 'axN', plain numbers. */
function expand(values: string): number[] {
  const out: number[] = [];
  for (const part of values.trim().split(/\s+/)) {
    const m = /^([-+]?[\d.e]+)(?:([-+][\d.e]+))?x(\d+)$/.exec(part);
    if (!m) {
      out.push(Number(part));
      continue;
    }
    const start = Number(m[1]);
    const step = Number(m[2] ?? 0);
    for (let i = 0; i <= Number(m[3]); i++) out.push(start + i * step);
  }
  return out;
}

function parseSeries(text: string): Record<string, string> {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$/.exec(text);
  assert.ok(m, text);
  const labels: Record<string, string> = { __name__: m[1] ?? '' };
  for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g))
    labels[pair[1] ?? ''] = pair[2] ?? '';
  return labels;
}

const groups = parseRuleFile(readFileSync(RULES, 'utf8'), RULES);
const doc = load(readFileSync(TESTS, 'utf8')) as { evaluation_interval: string; tests: PromtoolCase[] };

describe('simulated rule evaluation agrees with the promtool cases', () => {
  doc.tests.forEach((testCase, n) => {
    it(`case ${n + 1}: ${[...new Set(testCase.alert_rule_test.map((t) => t.alertname))].join(', ')}`, () => {
      const store = new SeriesStore();
      const engine = new RuleEngine(groups, store);
      const step = minutes(testCase.interval);
      const evalStep = minutes(doc.evaluation_interval);
      const series = testCase.input_series.map((s) => ({
        labels: parseSeries(s.series),
        values: expand(s.values),
      }));
      const checks = [...testCase.alert_rule_test].sort(
        (a, b) => minutes(a.eval_time) - minutes(b.eval_time),
      );
      const end = Math.max(...checks.map((c) => minutes(c.eval_time)));
      for (let t = 0; t <= end; t += evalStep) {
        if (t % step === 0)
          series.forEach((s, i) => {
            const value = s.values[t / step];
            store.write(`series:${i}`, value === undefined ? [] : [{ labels: s.labels, value }], t);
          });
        const firing = engine.evaluate(t);
        for (const check of checks.filter((c) => minutes(c.eval_time) === t)) {
          const got = firing
            .filter((a) => a.rule === check.alertname)
            .map((a) => {
              const { alertname: _a, ...labels } = a.labels;
              return { labels, annotations: a.annotations };
            })
            .sort((a, b) => JSON.stringify(a.labels).localeCompare(JSON.stringify(b.labels)));
          const want = check.exp_alerts
            .map((e) => ({
              labels: e.exp_labels,
              annotations: e.exp_annotations ?? got[0]?.annotations ?? {},
            }))
            .sort((a, b) => JSON.stringify(a.labels).localeCompare(JSON.stringify(b.labels)));
          assert.deepEqual(got, want, `${check.alertname} at ${check.eval_time}`);
        }
      }
    });
  });

  it('refuses a function, operator or matcher the rules do not use, naming it', () => {
    assert.throws(() => parsePromql('sum(rate(x[5m]))'), UnsupportedPromqlError);
    assert.throws(() => parsePromql('x + y'), /operator/);
    assert.throws(() => parsePromql('x{a=~"b"}'), /label matcher/);
    assert.throws(() => parsePromql('irate(x[5m])'), /function/);
    assert.throws(() => parsePromql('x > bool 1'), UnsupportedPromqlError);
    assert.throws(() => parsePromql('rate(x[5m'), /syntax error/);
  });
});
