// The sidecar, the alert rules and the Prometheus queries of lib/ name the same series in three places;
// these checks fail as soon as one of them is renamed without the others.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { METRIC } from '../../../infra/sidecar/src/metrics.js';
import { SIDECAR_SERIES } from '../../../lib/metrics/prometheus-metrics-source.js';

const rules = readFileSync(
  new URL('../../../infra/prometheus/rules/trainscaler.rules.yml', import.meta.url),
  'utf8',
);
const exported = new Set<string>(Object.values(METRIC));

describe('series names', () => {
  it('every series the Prometheus source queries is one the sidecar exports', () => {
    for (const name of Object.values(SIDECAR_SERIES))
      assert.ok(exported.has(name), `${name} is not exported`);
  });

  it('every trainscaler series the rules use is exported by the sidecar or recorded by the rules', () => {
    const recorded = new Set([...rules.matchAll(/record:\s*(\S+)/g)].map((m) => m[1]));
    const used = new Set([...rules.matchAll(/\b(trainscaler[:_][a-z0-9_:]+)/g)].map((m) => m[1] ?? ''));
    assert.ok(used.size >= 6, `found ${[...used].join(', ')}`);
    for (const name of used)
      assert.ok(exported.has(name) || recorded.has(name), `${name} is neither exported nor recorded`);
  });

  it('every alert keeps the labels the alarm function needs, and is routed to it', () => {
    const alerts = rules.split(/\n\s*- alert: /).slice(1);
    assert.equal(alerts.length, 5);
    for (const alert of alerts) {
      const name = alert.split('\n')[0];
      // Each aggregation in the expression keeps the job's identity (or the expression aggregates nothing).
      for (const by of alert.matchAll(/\b(?:by|on)\s*\(([^)]*)\)/g)) {
        const labels = (by[1] ?? '').split(',').map((l) => l.trim());
        for (const needed of ['namespace', 'job_kind', 'job_name'])
          assert.ok(labels.includes(needed), `${name}: '${by[0]}' drops ${needed}`);
      }
      assert.match(alert, /trainscaler: review/, `${name} is not routed to the alarm function`);
    }
  });
});
