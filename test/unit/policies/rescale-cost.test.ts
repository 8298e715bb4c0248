// Measured rescale costs (the launcher's pauses: ~3.3 s to grow, the new pods' start not charged since the old
// world trains on; ~3.6 s to shrink, or the job's own measurement) and each elastic PyTorchJob's restart budget,
// as tuning and rebalance use them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import { measureLastRescale } from '../../../lib/decisions/rescale-measurement.js';
import { ApiError } from '../../../lib/errors.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import { decideRebalance, type RebalanceJob } from '../../../lib/policies/rebalance.js';
import {
  describeCost,
  rescaleCostsOf,
  scaleDownsLeft,
  withMeasuredRescale,
} from '../../../lib/policies/rescale-cost.js';
import { decideTuning } from '../../../lib/policies/tuning.js';
import { MEASURED_RESCALE_PAUSE_SECONDS } from '../../../lib/torchelastic/recommended-rendezvous.js';
import type { ClusterCapacity, JobAutoscalerState, JobView, Plan } from '../../../lib/types.js';
import { jobView, workerRole } from '../../support/job-views.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
const ONE_GPU = { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 };
const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG };
const C10D = { c10dStore: true, rdzvConf: {}, tuneRendezvous: false, trainscalerLauncher: false };

function tableModel(table: Record<number, number>): ThroughputModel {
  return {
    sampleCount: 6,
    distinctScales: 3,
    predict(p: Placement) {
      const tp = table[p.replicas] ?? 1;
      return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
    },
  };
}

function job(name: string, k: number, state: Partial<JobAutoscalerState> = {}, extra: Partial<JobView> = {}) {
  return jobView(
    {
      ref: { kind: 'PyTorchJob', namespace: 'ml', name },
      signature: name,
      state: { oomCount: 0, paused: false, ...state },
      ...extra,
    },
    [workerRole(ONE_GPU, { replicas: k, minReplicas: 1, maxReplicas: 16 })],
  );
}

function capacity(used: number, total: number): ClusterCapacity {
  return {
    nodes: [
      {
        name: 'n1',
        allocatable: { cpuMillis: total * 1000, memoryBytes: total * GiB, gpus: total },
        allocated: { cpuMillis: used * 1000, memoryBytes: used * GiB, gpus: used },
        schedulable: true,
      },
    ],
  };
}

function tune(
  view: JobView,
  table: Record<number, number>,
  remainingSeconds: number,
  free = 0,
  overrides: Partial<PolicyConfig> = {},
) {
  const k = view.roles[0]?.replicas ?? 1;
  return decideTuning({
    job: view,
    model: tableModel(table),
    current: { replicas: k, nodes: 1, localBatchSize: 32 },
    capacity: capacity(k, k + free),
    remainingSeconds,
    config: { ...config, ...overrides },
    now: NOW,
  });
}

function to(plan: Plan): number | undefined {
  const c = plan.changes[0];
  return c?.kind === 'replicas' ? c.to : undefined;
}

describe('rescale costs before the first measurement: signature, then launch, then default', () => {
  const torchrunDefaults: JobView['torchElastic'] = { ...C10D, launch: { launcher: 'torchrun' } };
  const launcher: JobView['torchElastic'] = {
    ...C10D,
    launch: { launcher: 'trainscaler', lastCallTimeout: 2, monitorInterval: 1 },
  };
  const unknown: JobView['torchElastic'] = {
    ...C10D,
    launch: {
      launcher: 'unknown',
      unknownWhy: "neither torchrun nor trainscaler's launcher: `deepspeed x.py`",
    },
  };
  const earlier = { up: 9, down: 12, upRuns: 3, downRuns: 1 };

  it('measured on this job wins over earlier runs of its signature', () => {
    const costs = rescaleCostsOf(
      job(
        'a',
        4,
        { rescaleCost: { upPause: 5, down: 6 } },
        { torchElastic: torchrunDefaults, signatureRescaleCost: earlier },
      ),
      config,
    );
    assert.deepEqual(
      [costs.up, costs.upSource, costs.down, costs.downSource],
      [5, 'measured', 6, 'measured'],
    );
    assert.match(describeCost(costs, 'down'), /scale-down cost 6 s \(measured on this job\)/);
  });

  it('earlier runs of the signature win over the launch, per direction', () => {
    const costs = rescaleCostsOf(
      job(
        'a',
        4,
        { rescaleCost: { down: 6 } },
        { torchElastic: torchrunDefaults, signatureRescaleCost: { up: 9, upRuns: 3 } },
      ),
      config,
    );
    assert.deepEqual(
      [costs.up, costs.upSource, costs.down, costs.downSource],
      [9, 'signature', 6, 'measured'],
    );
    assert.match(
      describeCost(costs, 'up'),
      /scale-up cost 9 s \(the re-rendezvous pause, median of 3 earlier runs of its signature; not yet measured on this job:/,
    );
    const one = rescaleCostsOf(
      job('a', 4, {}, { torchElastic: torchrunDefaults, signatureRescaleCost: earlier }),
      config,
    );
    assert.equal(
      describeCost(one, 'down'),
      'scale-down cost 12 s (measured on an earlier run of its signature; not yet measured on this job)',
    );
  });

  it('the launch wins over the configured default', () => {
    const costs = rescaleCostsOf(job('a', 4, {}, { torchElastic: torchrunDefaults }), config);
    assert.deepEqual(
      [costs.up, costs.upSource, costs.down, costs.downSource],
      [97.5, 'launch', 49.4, 'launch'],
    );
    assert.match(
      describeCost(costs, 'down'),
      /^scale-down cost 49 s \(plain torchrun with default rendezvous settings, from its launch; not yet measured on this job\)$/,
    );
    assert.match(
      describeCost(costs, 'up'),
      /scale-up cost 98 s .*and without TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1/,
    );
    const fast = rescaleCostsOf(job('a', 4, {}, { torchElastic: launcher }), config);
    assert.deepEqual([fast.up, fast.down, fast.upSource], [3.2, 3.2, 'launch']);
    assert.match(
      describeCost(fast, 'up'),
      /trainscaler's launcher with the recommended rendezvous settings, from its launch/,
    );
  });

  it('an unrecognised launch, or none (no torchelastic), falls back to the default and says why', () => {
    const costs = rescaleCostsOf(job('a', 4, {}, { torchElastic: unknown }), config);
    assert.deepEqual(
      [costs.up, costs.upSource, costs.down, costs.downSource],
      [3.3, 'default', 3.6, 'default'],
    );
    assert.equal(
      describeCost(costs, 'down'),
      "scale-down cost 4 s (default; launch not recognised: neither torchrun nor trainscaler's launcher: `deepspeed x.py`)",
    );
    assert.equal(rescaleCostsOf(job('a', 4), config).downFrom, 'default');
  });
});

describe('rescale costs: defaults from bench:rescale, then the job own measurements', () => {
  it('defaults to the measured pauses; growth pays the pause only (its pods start while the job trains on)', () => {
    const costs = rescaleCostsOf(job('a', 4), config);
    assert.equal(costs.up, MEASURED_RESCALE_PAUSE_SECONDS.recommended.up);
    assert.equal(costs.down, MEASURED_RESCALE_PAUSE_SECONDS.recommended.down);
    assert.equal(costs.downSource, 'default');
    assert.deepEqual([config.scaleUpCostSeconds, config.scaleDownCostSeconds], [3.3, 3.6]);
  });

  it("a job's shrink measurement replaces the scale-down default; its growth's patch-to-first-step is only reported", () => {
    const costs = rescaleCostsOf(job('a', 4, { rescaleCost: { down: 44, upToFirstStep: 31 } }), config);
    assert.deepEqual(costs, {
      up: 3.3,
      upSource: 'default',
      upFrom: 'default',
      down: 44,
      downSource: 'measured',
      downFrom: 'measured on this job',
      upToFirstStep: 31,
    });
    assert.match(
      describeCost(costs, 'up'),
      /scale-up cost 3 s \(the re-rendezvous pause, default.*its last growth took 31 s from the patch/,
    );
    assert.match(describeCost(costs, 'down'), /scale-down cost 44 s \(measured on this job\)/);
  });

  it('measures the last rescale once, per direction, from the first step after the patch', () => {
    const grown: JobAutoscalerState = {
      oomCount: 0,
      paused: false,
      lastRescale: { at: 1000, from: 2, to: 3 },
    };
    const up = withMeasuredRescale(grown, 1031);
    assert.deepEqual(up.rescaleCost, { upToFirstStep: 31, measuredFor: 1000 });
    assert.equal(withMeasuredRescale(up, 1090), up, 'measured once');
    assert.equal(withMeasuredRescale(grown, undefined), grown, 'not seen yet');
    assert.equal(withMeasuredRescale(grown, 990), grown, 'a step before the patch is no measurement');
    const shrunk = withMeasuredRescale({ ...up, lastRescale: { at: 2000, from: 3, to: 2 } }, 2017, 5);
    assert.deepEqual(
      shrunk.rescaleCost,
      { upToFirstStep: 31, down: 17, measuredFor: 2000 },
      'a shrink: patch to step',
    );
    const paused = withMeasuredRescale(grown, 1031, 2.8);
    assert.deepEqual(paused.rescaleCost, { upToFirstStep: 31, upPause: 2.8, measuredFor: 1000 });
    assert.equal(
      withMeasuredRescale(grown, 1031, 40).rescaleCost?.upPause,
      undefined,
      'longer than the rescale',
    );
  });

  it('reads the first step from the metrics source, and a failing source leaves the state as it was', async () => {
    const state: JobAutoscalerState = {
      oomCount: 0,
      paused: false,
      lastRescale: { at: 500, from: 4, to: 2 },
    };
    const view = { ref: { kind: 'PyTorchJob' as const, namespace: 'ml', name: 'a' }, state };
    const asked: number[] = [];
    const source = (answer: () => Promise<number | undefined>) =>
      ({
        firstStepAfterPause: async (_ref: unknown, since: number) => {
          asked.push(since);
          return answer();
        },
      }) as unknown as MetricsSource;
    assert.deepEqual(
      (
        await measureLastRescale(
          source(async () => 520),
          view,
        )
      ).rescaleCost,
      {
        down: 20,
        measuredFor: 500,
      },
    );
    assert.deepEqual(asked, [500]);
    const failing = source(async () => {
      throw new ApiError('Prometheus', 503, 'down');
    });
    assert.equal(await measureLastRescale(failing, view), state);
    assert.equal(await measureLastRescale(undefined, view), state);
  });
});

describe('tuning weighs growth and shrinking at their own costs', () => {
  // 4 -> 5 workers: 400 -> 500 samples/s saves 0.2 x remaining; it must exceed 2 x the scale-up cost.
  const growth = { 4: 400, 5: 500 };

  it("grows when the saving beats 2 x the scale-up pause; the job's patch-to-first-step time is not charged", () => {
    // 2 x 3.3 s = 6.6 s: 40 s left saves 8 s, 30 s left saves 6 s.
    assert.equal(to(tune(job('a', 4), growth, 40, 1)), 5);
    const short = tune(job('a', 4), growth, 30, 1);
    assert.deepEqual(short.changes, []);
    assert.match(
      [short.reason, ...(short.details ?? [])].join('; '),
      /needs > 2 x scale-up cost 3 s \(the re-rendezvous pause, default/,
    );
    // A growth that took 400 s from the patch to its first step (pods slow to start) lost only its pause.
    const slowStart = tune(job('a', 4, { rescaleCost: { upToFirstStep: 400 } }), growth, 40, 1);
    assert.equal(to(slowStart), 5);
    assert.match(
      [slowStart.reason, ...(slowStart.details ?? [])].join('; '),
      /its last growth took 6\.7 min from the patch/,
    );
    // The job's own measured pause replaces the default, and is named so.
    const dearPause = tune(job('a', 4, { rescaleCost: { upPause: 40, upToFirstStep: 60 } }), growth, 300, 1);
    assert.deepEqual(dearPause.changes, []);
    assert.match(
      [dearPause.reason, ...(dearPause.details ?? [])].join('; '),
      /scale-up cost 40 s \(the re-rendezvous pause, measured on this job.*took 60 s from the patch/,
    );
    // A dearer configured pause (TRAINSCALER_SCALE_UP_COST_SECONDS) holds the growth; a shrink measurement does not.
    assert.deepEqual(tune(job('a', 4), growth, 300, 1, { scaleUpCostSeconds: 40 }).changes, []);
    assert.equal(to(tune(job('a', 4, { rescaleCost: { down: 40 } }), growth, 40, 1)), 5);
  });

  it("shrinks when the freed pod-seconds beat 2 x pods x the job's scale-down cost", () => {
    // 4 -> 3 loses nothing: frees R pod-seconds against 2 x 4 x 3.6 = 28.8.
    const flat = { 3: 300, 4: 300 };
    assert.equal(to(tune(job('a', 4), flat, 30)), 3);
    assert.deepEqual(tune(job('a', 4), flat, 28).changes, []);
    assert.deepEqual(tune(job('a', 4, { rescaleCost: { down: 25 } }), flat, 160).changes, []);
    assert.equal(to(tune(job('a', 4, { rescaleCost: { down: 25 } }), flat, 210)), 3);
  });

  it('plans no scale-down once only the reserved restart of an elastic PyTorchJob is left', () => {
    const flat = { 3: 300, 4: 300 };
    const te = (scaleDowns: number) =>
      job('a', 4, { scaleDowns }, { torchElastic: { ...C10D, maxRestarts: 3 } });
    assert.equal(scaleDownsLeft(te(1)), 1);
    assert.equal(to(tune(te(1), flat, 3600)), 3);
    const held = tune(te(2), flat, 3600);
    assert.deepEqual(held.changes, []);
    assert.match(
      [held.reason, ...(held.details ?? [])].join('; '),
      /no scale-down: 2 of maxRestarts 3 spent on scale-downs, the last kept in reserve/,
    );
  });
});

describe('rebalance values the restart budget of its donors', () => {
  const donorTable = { 2: 200, 3: 300, 4: 400 };
  const entry = (view: JobView, table: Record<number, number>): RebalanceJob => ({
    job: view,
    model: tableModel(table),
    current: { replicas: view.roles[0]?.replicas ?? 1, nodes: 1, localBatchSize: 32 },
    remainingSeconds: 3600,
  });
  const urgent = job('urgent', 1, {}, { priority: 10 });
  const admit = (donors: JobView[]) =>
    decideRebalance({
      jobs: donors.map((d) => entry(d, donorTable)),
      pending: [{ job: urgent, demand: ONE_GPU, pods: 1 }],
      capacity: capacity(8, 8),
      config,
      now: NOW,
    });
  const budget = (name: string, scaleDowns: number) =>
    job(name, 4, { scaleDowns }, { torchElastic: { ...C10D, maxRestarts: 3 } });

  it('does not plan a shrink its restart budget cannot pay: takes from the donor that can', () => {
    const plans = admit([budget('aa-spent', 2), budget('zz-able', 1)]);
    assert.deepEqual(
      plans.map((p) => [p.ref.name, to(p)]),
      [['zz-able', 3]],
    );
    assert.deepEqual(admit([budget('aa-spent', 2)]), [], 'nothing shrinks when no donor can');
  });

  it('prefers, among donors that lose alike, the one with restarts to spare', () => {
    // Alphabetical order would pick aa-last; its last spare restart makes its loss count double.
    const plans = admit([budget('aa-last', 1), job('zz-free', 4)]);
    assert.deepEqual(
      plans.map((p) => [p.ref.name, to(p)]),
      [['zz-free', 3]],
    );
    const alike = admit([job('aa-last', 4), job('zz-free', 4)]);
    assert.deepEqual(
      alike.map((p) => [p.ref.name, to(p)]),
      [['aa-last', 3]],
      'without budgets the tie goes by name',
    );
  });
});
