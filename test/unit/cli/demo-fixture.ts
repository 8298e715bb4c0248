// A hand-made demo result: two jobs, one decision with characters that must be escaped in HTML.
import type { DemoJobConfig, DemoResult } from '../../../cli/demo.js';

const GiB = 1024 ** 3;

function workers(replicas: number, memoryGiB: number, limitGiB = memoryGiB): DemoJobConfig {
  return {
    roles: [
      {
        role: 'Worker',
        replicas,
        requests: { gpus: 1, cpuMillis: 4000, memoryBytes: memoryGiB * GiB },
        limits: { gpus: 1, cpuMillis: 4000, memoryBytes: limitGiB * GiB },
      },
    ],
  };
}

export function demoResultFixture(): DemoResult {
  return {
    seed: 5,
    scenario: 'fixture',
    summary: {
      manual: { medianJctSeconds: 3600, completionRate: 0.5, completed: 1, failed: 1, makespanSeconds: 5400 },
      trainscaler: {
        medianJctSeconds: 2700,
        completionRate: 1,
        completed: 2,
        failed: 0,
        makespanSeconds: 4000,
      },
    },
    jobs: [
      {
        name: 'alpha-small',
        kind: 'PyTorchJob',
        application: 'imagenet',
        submittedAtSeconds: 0,
        story: 'too small',
        manual: { config: workers(1, 10), jctSeconds: 3600, state: 'completed' },
        trainscaler: {
          config: { initial: workers(1, 10), final: workers(4, 10) },
          jctSeconds: 2000,
          state: 'completed',
        },
        decisions: [
          {
            at: 600,
            trigger: 'alarm',
            policy: 'tuning',
            changes: [{ kind: 'replicas', role: 'Worker', from: 1, to: 4 }],
            reason: '1 -> 4 workers: <gain> & "more"',
          },
        ],
      },
      {
        name: 'beta-oom',
        kind: 'TFJob',
        application: 'bert',
        submittedAtSeconds: 0,
        story: 'limit below need',
        manual: {
          config: workers(2, 5),
          jctSeconds: null,
          state: 'failed',
          failureReason: 'BackoffLimitExceeded: x',
        },
        trainscaler: {
          config: { initial: workers(2, 5), final: workers(2, 5, 7.5) },
          jctSeconds: 3400,
          state: 'completed',
        },
        decisions: [],
      },
    ],
    timelines: {
      manual: {
        'alpha-small': [
          { t: 60, workers: 1, workersRunning: 1, throughput: 190, phase: 'Running' },
          { t: 3600, workers: 1, workersRunning: 0, throughput: 191, phase: 'Succeeded' },
        ],
        'beta-oom': [{ t: 60, workers: 2, workersRunning: 2, throughput: 20, phase: 'Running' }],
      },
      trainscaler: {
        'alpha-small': [
          { t: 60, workers: 1, workersRunning: 1, throughput: 190, phase: 'Running' },
          { t: 660, workers: 4, workersRunning: 4, throughput: 700, phase: 'Running' },
        ],
        'beta-oom': [],
      },
    },
    handlerErrors: [
      { at: 300, trigger: 'alarm', job: 'beta-oom', code: 'MISSING_METRICS', message: 'no samples' },
    ],
  };
}
