import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compressAlertmanagerTimers,
  compressRuleDurations,
  durationSeconds,
} from '../../../infra/local-stack/time-compression.js';

describe('replaying rules faster', () => {
  it('reads Prometheus durations', () => {
    assert.equal(durationSeconds('5m'), 300);
    assert.equal(durationSeconds('1h30m'), 5400);
    assert.equal(durationSeconds('250ms'), 0.25);
    assert.throws(() => durationSeconds('5 minutes'));
  });

  it('divides ranges, subqueries and holds, and leaves thresholds alone', () => {
    const rule = [
      '        expr: rate(x[5m]) < 0.8 * max_over_time(y[1h]) and max_over_time(z[10m:1m]) > 0 and w[30s:]',
      '        for: 10m',
    ].join('\n');
    assert.equal(
      compressRuleDurations(rule, 30),
      [
        '        expr: rate(x[10s]) < 0.8 * max_over_time(y[120s]) and max_over_time(z[20s:2s]) > 0 and w[1s:]',
        '        for: 20s',
      ].join('\n'),
    );
    assert.equal(compressRuleDurations('        for: 1m\n', 120), '        for: 500ms\n');
  });

  it("divides Alertmanager's route timers only", () => {
    const config = '  group_wait: 30s\n  group_interval: 5m\n  repeat_interval: 1h\n  resolve_timeout: 5m\n';
    assert.equal(
      compressAlertmanagerTimers(config, 30),
      '  group_wait: 1s\n  group_interval: 10s\n  repeat_interval: 120s\n  resolve_timeout: 5m\n',
    );
  });
});
