// The runner's per-job gauges (for the dashboard and `trainscaler status` alike): workers now and wanted, and
// when trainscaler last changed the job; a job found deleted leaves no series behind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandlerResult } from '../../../functions/handler-deps.js';
import { RunnerMetrics } from '../../../lib/runner/metrics.js';
import type { JobRef } from '../../../lib/types.js';

const REF: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert' };
const LABELS = 'namespace="team-a",job_kind="PyTorchJob",job_name="bert"';

function resized(applied: boolean, from: number, to: number): HandlerResult {
  return {
    trigger: 'schedule',
    errors: [],
    outcomes: [
      {
        ref: REF,
        applied,
        plan: {
          ref: REF,
          policy: 'rebalance',
          reason: 'grow',
          changes: [{ kind: 'replicas', role: 'Worker', from, to }],
        },
      },
    ],
  };
}

describe('per-job gauges of the runner', () => {
  it('an applied resize sets workers, desired workers and the time of the action', async () => {
    const metrics = new RunnerMetrics({ defaultMetrics: false, clock: () => 1_800_000_000 });
    metrics.recordOutcomes('schedule', resized(true, 2, 4));
    const text = await metrics.registry.metrics();
    assert.match(text, new RegExp(`trainscaler_job_workers\\{${LABELS}\\} 4`));
    assert.match(text, new RegExp(`trainscaler_job_desired_workers\\{${LABELS}\\} 4`));
    assert.match(text, new RegExp(`trainscaler_job_last_action_timestamp_seconds\\{${LABELS}\\} 1800000000`));
  });

  it('a resize held back (dry run, cool-down) is desired, not current, and no action time', async () => {
    const metrics = new RunnerMetrics({ defaultMetrics: false });
    metrics.recordOutcomes('schedule', resized(false, 2, 4));
    const text = await metrics.registry.metrics();
    assert.match(text, new RegExp(`trainscaler_job_workers\\{${LABELS}\\} 2`));
    assert.match(text, new RegExp(`trainscaler_job_desired_workers\\{${LABELS}\\} 4`));
    assert.doesNotMatch(text, /trainscaler_job_last_action_timestamp_seconds\{/);
  });

  it('a job found deleted loses its series', async () => {
    const metrics = new RunnerMetrics({ defaultMetrics: false });
    metrics.recordOutcomes('schedule', resized(true, 2, 4));
    metrics.recordOutcomes('alarm', {
      trigger: 'alarm',
      outcomes: [],
      errors: [{ ref: REF, code: 'NOT_FOUND', message: 'gone' }],
    });
    const text = await metrics.registry.metrics();
    assert.doesNotMatch(text, /trainscaler_job_(workers|desired_workers|last_action_timestamp_seconds)\{/);
  });
});
