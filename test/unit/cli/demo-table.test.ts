import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatDemoConfig, renderDemoTables } from '../../../cli/demo-table.js';
import { demoResultFixture } from './demo-fixture.js';

describe('renderDemoTables', () => {
  const text = renderDemoTables(demoResultFixture());

  it('has a row for each job in both tables, with its outcome in each run', () => {
    const rows = text
      .split('\n')
      .filter((line) => line.startsWith('alpha-small') || line.startsWith('beta-oom'));
    assert.equal(rows.length, 4);
    assert.match(rows[2] ?? '', /^alpha-small\s+1:00:00\s+completed\s+0:33:20\s+completed\s+1$/);
    assert.match(rows[3] ?? '', /^beta-oom\s+-\s+failed\s+0:56:40\s+completed\s+0$/);
  });

  it('shows the configuration change trainscaler made', () => {
    assert.match(text, /1 W\(1g 4c 10Gi\) -> 4 W\(1g 4c 10Gi\)/);
    assert.match(text, /2 W\(1g 4c 5Gi\) -> 2 W\(1g 4c 5Gi lim 7\.5Gi\)/);
  });

  it('ends the comparison with median JCT and completion rate of both runs', () => {
    assert.match(text, /Median JCT \(completed jobs\):\s+manual 1:00:00\s+trainscaler 0:45:00/);
    assert.match(
      text,
      /Completion rate:\s+manual 1\/2 \(50%\), 1 failed\s+trainscaler 2\/2 \(100%\), 0 failed/,
    );
  });

  it('lists decisions with their reasons, failures and contained handler errors', () => {
    assert.match(text, /0:10:00 {2}alpha-small {2}tuning \(alarm\): 1 -> 4 workers/);
    assert.match(text, /beta-oom \(manual\): BackoffLimitExceeded/);
    assert.match(text, /MISSING_METRICS x1/);
  });

  it('formats multi-role configurations role by role', () => {
    const config = {
      roles: [
        {
          role: 'PS' as const,
          replicas: 1,
          requests: { gpus: 0, cpuMillis: 2000, memoryBytes: 8 * 1024 ** 3 },
          limits: { gpus: 0, cpuMillis: 2000, memoryBytes: 8 * 1024 ** 3 },
        },
        {
          role: 'Worker' as const,
          replicas: 2,
          requests: { gpus: 1, cpuMillis: 4500, memoryBytes: 3.6 * 1024 ** 3 },
          limits: { gpus: 1, cpuMillis: 0, memoryBytes: 0 },
        },
      ],
    };
    assert.equal(formatDemoConfig(config), '1 PS(2c 8Gi) + 2 W(1g 4.5c 3.6Gi)');
  });
});
