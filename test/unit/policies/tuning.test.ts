import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import {
  localBatchFor,
  nodesAfterResize,
  nodesSpanned,
  podsPerNode,
  withinHysteresis,
} from '../../../lib/policies/placement.js';
import { decideTuning, type TuningInput } from '../../../lib/policies/tuning.js';
import type { ClusterCapacity, JobView, Resources, RoleView } from '../../../lib/types.js';
import { jobView, workerRole } from '../../support/job-views.js';
import { planText as told } from '../../support/plan-text.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
// mrg 5%, step 4, cool-down 300 s; round rescale costs (up 2 x 50 s, down 2 x 30 s) keep the arithmetic
// of the cost tests readable: the measured defaults are tested in rescale-cost.test.ts.
// The cool-down is pinned: the cases below are written around 300 s (the default is 120 s).
const config: PolicyConfig = {
  ...DEFAULT_POLICY_CONFIG,
  cooldownSeconds: 300,
  scaleUpCostSeconds: 50,
  scaleDownCostSeconds: 30,
};
const WORKER_REQ: Resources = { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 };
const PS_REQ: Resources = { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 0 };

function role(overrides: Partial<RoleView> = {}): RoleView {
  return workerRole(WORKER_REQ, overrides);
}

function job(overrides: Partial<JobView> = {}, roles: RoleView[] = [role()]): JobView {
  return jobView(overrides, roles);
}

/** One node with 8 GPUs of which the job's 4 workers use 4, plus `freeGpus` more on a second node. */
function capacity(freeGpus: number): ClusterCapacity {
  const big = { cpuMillis: 64_000, memoryBytes: 512 * GiB, gpus: 8 };
  return {
    nodes: [
      {
        name: 'n1',
        allocatable: big,
        allocated: { cpuMillis: 64_000, memoryBytes: 512 * GiB, gpus: 8 },
        schedulable: true,
      },
      {
        name: 'n2',
        allocatable: big,
        allocated: {
          cpuMillis: 64_000 - 4000 * freeGpus,
          memoryBytes: 512 * GiB - 16 * GiB * freeGpus,
          gpus: 8 - freeGpus,
        },
        schedulable: true,
      },
    ],
  };
}

/**
 * A model with a known closed form: throughput per worker count from a table (samples/s), and a stdev that
 * is a fraction of the step time away from `observed` workers (so pessimistic = throughput / (1 + sd)).
 */
function tableModel(
  table: Record<number, number>,
  opts: { sd?: number; observed?: number; seen?: Placement[]; psTable?: Record<number, number> } = {},
): ThroughputModel {
  return {
    sampleCount: 10,
    distinctScales: 3,
    predict(p: Placement) {
      opts.seen?.push(p);
      // With a PS table, throughput also scales with workers (the table is at 4 workers).
      const tp = opts.psTable ? ((opts.psTable[p.ps ?? 0] ?? 1) * p.replicas) / 4 : (table[p.replicas] ?? 1);
      const stepTime = (p.replicas * p.localBatchSize) / tp;
      const sd = p.replicas === (opts.observed ?? 4) && !opts.psTable ? 0 : (opts.sd ?? 0) * stepTime;
      return { stepTime, stdev: sd, throughput: tp };
    },
  };
}

const current: Placement = { replicas: 4, nodes: 1, localBatchSize: 32 };

function input(overrides: Partial<TuningInput> = {}): TuningInput {
  return {
    job: job(),
    model: tableModel({ 4: 400, 5: 480, 6: 540, 7: 560, 8: 565 }),
    current,
    capacity: capacity(8),
    remainingSeconds: 3600,
    config,
    now: NOW,
    ...overrides,
  };
}

function replicaChange(plan: ReturnType<typeof decideTuning>) {
  const c = plan.changes[0];
  assert.equal(plan.changes.length, 1, plan.reason);
  assert.ok(c && c.kind === 'replicas');
  return c;
}

describe('decideTuning scale-up', () => {
  it('picks the smallest worker count within hysteresis of the best (diminishing returns)', () => {
    // best 565 at 8; 540 * 1.05 = 567 > 565 so 6 is enough; 480 * 1.05 = 504 is not.
    const plan = decideTuning(input());
    assert.deepEqual(replicaChange(plan), { kind: 'replicas', role: 'Worker', from: 4, to: 6 });
    assert.equal(plan.policy, 'tuning');
    assert.match(
      told(plan),
      /4 -> 6 workers: predicted \+35\.0% at step time \+ 1 sd; predicted 400 -> 540 samples\/s \(\+35\.0%\)/,
    );
    assert.match(told(plan), /8 workers would reach 565 samples\/s, less than 5% more for 2 more pods/);
    assert.match(
      told(plan),
      /gain over remaining ~60\.0 min = 15\.6 min > 2 x scale-up cost 50 s \(the re-rendezvous pause, default/,
    );
  });

  it('goes to the best when the next smaller count is not within hysteresis', () => {
    const plan = decideTuning(input({ model: tableModel({ 4: 400, 5: 480, 6: 500, 7: 520, 8: 600 }) }));
    assert.equal(replicaChange(plan).to, 8);
  });

  it('acts at a gain just above hysteresis and not just below it', () => {
    const at = (tp5: number) =>
      decideTuning(
        input({ job: job({}, [role({ maxReplicas: 5 })]), model: tableModel({ 4: 400, 5: tp5 }) }),
      );
    assert.equal(replicaChange(at(421)).to, 5);
    const below = at(419);
    assert.deepEqual(below.changes, []);
    assert.match(told(below), /4 -> 5 workers predicts \+4\.8% \(< 5% hysteresis\)/);
  });

  it('scores scale-ups at step time + stdev, so an unsure extrapolation does not scale', () => {
    const table = { 4: 400, 5: 440 };
    const j = job({}, [role({ maxReplicas: 5 })]);
    assert.equal(replicaChange(decideTuning(input({ job: j, model: tableModel(table) }))).to, 5);
    // 440 / 1.1 = 400: no gain left once uncertainty is counted.
    const unsure = decideTuning(input({ job: j, model: tableModel(table, { sd: 0.1 }) }));
    assert.deepEqual(unsure.changes, []);
  });

  it('probes one worker more on the mean prediction while only one scale has been observed', () => {
    // Pessimistic (sd 10%): 5 -> 391, 6 -> 398 samples/s, no gain; mean: 5 -> 430 (+7.5%).
    const table = { 4: 400, 5: 430, 6: 438 };
    const j = job({}, [role({ maxReplicas: 6 })]);
    const oneScale = { ...tableModel(table, { sd: 0.1 }), distinctScales: 1 };
    const probe = decideTuning(input({ job: j, model: oneScale }));
    assert.equal(replicaChange(probe).to, 5, 'one step, not to the best');
    assert.match(told(probe), /probe, only one scale observed/);
    // The same uncertainty with two scales seen: no probe, the pessimistic score decides (no gain).
    assert.deepEqual(decideTuning(input({ job: j, model: tableModel(table, { sd: 0.1 }) })).changes, []);
    // A probe must still beat hysteresis on the mean: +2% is not worth a restart.
    const flat = { ...tableModel({ 4: 400, 5: 408, 6: 410 }, { sd: 0.1 }), distinctScales: 1 };
    assert.deepEqual(decideTuning(input({ job: j, model: flat })).changes, []);
  });

  it('growth rule: seen at one size only, a large confident predicted gain still adds one worker', () => {
    // The alert of issue 17: priors predict +86.5% at 8 workers with no spread, the job ran at 4 only.
    const priors = { ...tableModel({ 4: 400, 5: 490, 6: 580, 7: 670, 8: 746 }), distinctScales: 1 };
    const j = job({}, [role({ maxReplicas: 8 })]);
    const plan = decideTuning(input({ job: j, model: priors }));
    assert.equal(replicaChange(plan).to, 5);
    assert.match(told(plan), /growth rule: seen at one size only: one probe worker at a time/);
    const seenTwice = decideTuning(input({ job: j, model: { ...priors, distinctScales: 2 } }));
    assert.equal(replicaChange(seenTwice).to, 8, 'two sizes seen: the full step');
  });

  it('growth rule: a job measured at two sizes grows back to the most workers it has run at, no further', () => {
    // Linear to 12 workers: the best is always the largest size allowed.
    const table = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [i + 1, 100 * (i + 1)]));
    const ranAt = (largestRunWorkers?: number) =>
      job({ state: { oomCount: 0, paused: false, largestRunWorkers } }, [role({ maxReplicas: 12 })]);
    const grows = (j: JobView, model = tableModel(table), remainingKnown = true) =>
      decideTuning(
        input({ job: j, model, capacity: capacity(8), remainingSeconds: remainingKnown ? 3600 : undefined }),
      );
    const back = grows(ranAt(10));
    assert.equal(replicaChange(back).to, 10);
    assert.match(told(back), /growth rule: back to the 10 workers it has run at/);
    assert.equal(replicaChange(grows(ranAt(undefined))).to, 8, 'no size run at: the step');
    assert.equal(replicaChange(grows(ranAt(6))).to, 8, 'a size run at within the step: the step');
    const once = { ...tableModel(table), distinctScales: 1 };
    assert.equal(replicaChange(grows(ranAt(10), once)).to, 5, 'seen at one size: still one probe worker');
    assert.equal(replicaChange(grows(ranAt(10), tableModel(table), false)).to, 5, 'remaining unknown');
  });

  it('needs the time saved over the remaining run to exceed gainOverCostFactor x rescale cost', () => {
    // 400 -> 500: saved = R * (1 - 0.8) = 0.2 R against 2 x 50 s = 100 s.
    const at = (remainingSeconds: number) =>
      decideTuning(
        input({
          job: job({}, [role({ maxReplicas: 5 })]),
          model: tableModel({ 4: 400, 5: 500 }),
          remainingSeconds,
        }),
      );
    assert.equal(replicaChange(at(600)).to, 5);
    const short = at(400);
    assert.deepEqual(short.changes, []);
    assert.match(told(short), /saves only 80 s; 4 -> 5 workers saves 80 s over remaining ~6\.7 min/);
  });

  it('assumes an hour when the remaining time is unknown, says so, and grows by one worker only', () => {
    const known = decideTuning(input({ remainingSeconds: 3600 }));
    assert.equal(replicaChange(known).to, 6, 'an hour known to be left justifies two');
    const plan = decideTuning(input({ remainingSeconds: undefined }));
    assert.equal(replicaChange(plan).to, 5);
    assert.match(told(plan), /remaining ~60\.0 min \(unknown, assumed\)/);
    assert.match(told(plan), /growth rule: remaining time unknown: one worker at a time/);
  });

  it('never exceeds maxReplicas', () => {
    const plan = decideTuning(input({ job: job({}, [role({ replicas: 4, maxReplicas: 4 })]) }));
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /at max 4 workers/);
  });

  it('adds at most maxReplicaStep workers', () => {
    const linear = tableModel({ 4: 400, 5: 500, 6: 600, 7: 700, 8: 800 });
    const plan = decideTuning(input({ model: linear, config: { ...config, maxReplicaStep: 2 } }));
    assert.equal(replicaChange(plan).to, 6);
  });

  it('adds only workers that fit in free capacity', () => {
    const linear = tableModel({ 4: 400, 5: 500, 6: 600, 7: 700, 8: 800 });
    assert.equal(replicaChange(decideTuning(input({ model: linear, capacity: capacity(1) }))).to, 5);
    const full = decideTuning(input({ model: linear, capacity: capacity(0) }));
    assert.deepEqual(full.changes, []);
    assert.match(told(full), /no free capacity for another worker/);
  });

  it('keeps the global batch fixed: every candidate is predicted at globalBatchSize / K', () => {
    const seen: Placement[] = [];
    const j = job({ globalBatchSize: 1024 });
    decideTuning(
      input({ job: j, current: { ...current, localBatchSize: 256 }, model: tableModel({}, { seen }) }),
    );
    assert.ok(seen.length >= 2);
    for (const p of seen) assert.equal(p.replicas * p.localBatchSize, 1024);
    assert.ok(seen.some((p) => p.replicas !== 4));
  });

  it('never predicts an added worker as consolidating onto fewer nodes', () => {
    const seen: Placement[] = [];
    decideTuning(input({ current: { ...current, nodes: 3 }, model: tableModel({}, { seen }) }));
    for (const p of seen) if (p.replicas > 4) assert.ok(p.nodes >= 3);
  });
});

describe('decideTuning scale-down', () => {
  it('removes workers that add less than hysteresis and stops where they matter', () => {
    // At 4: 300. 3 -> 290 (290 * 1.05 = 304.5 > 300: nearly nothing), 2 -> 200 (matters).
    const plan = decideTuning(input({ model: tableModel({ 2: 200, 3: 290, 4: 300, 5: 301 }) }));
    assert.deepEqual(replicaChange(plan), { kind: 'replicas', role: 'Worker', from: 4, to: 3 });
    assert.match(
      told(plan),
      /4 -> 3 workers: 1 pod freed that added nearly nothing \(predicted -3\.3%\); predicted 300 -> 290 samples\/s \(-3\.3%/,
    );
  });

  it('keeps the workers when removing one loses just over hysteresis', () => {
    // 285 * 1.05 = 299.25 < 300.
    const plan = decideTuning(input({ model: tableModel({ 2: 200, 3: 285, 4: 300, 5: 301 }) }));
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /4 -> 3 workers would lose 5\.0% \(>= 5%\)/);
  });

  it('picks the smallest count within hysteresis of the best, even when more workers slow the job', () => {
    const plan = decideTuning(input({ model: tableModel({ 1: 100, 2: 330, 3: 340, 4: 300, 5: 250 }) }));
    assert.equal(replicaChange(plan).to, 2);
  });

  it('never goes below minReplicas', () => {
    const j = job({}, [role({ minReplicas: 4 })]);
    const plan = decideTuning(input({ job: j, model: tableModel({ 2: 200, 3: 299, 4: 300, 5: 301 }) }));
    assert.deepEqual(plan.changes, []);
  });

  it('does not shrink a job about to finish: freed pod-seconds must exceed the restart stall', () => {
    // 1 pod freed x R against 2 x 4 pods x 30 s = 240 pod-seconds.
    const at = (remainingSeconds: number) =>
      decideTuning(input({ model: tableModel({ 2: 100, 3: 299, 4: 300, 5: 301 }), remainingSeconds }));
    assert.equal(replicaChange(at(300)).to, 3);
    assert.deepEqual(at(200).changes, []);
  });
});

describe('decideTuning gates', () => {
  it('does nothing in cool-down and says how long is left', () => {
    const cooling = decideTuning(
      input({ job: job({ state: { oomCount: 0, paused: false, lastActionAt: NOW - 100 } }) }),
    );
    assert.deepEqual(cooling.changes, []);
    assert.match(told(cooling), /cool-down: 200 s left of 300 s/);
    const done = decideTuning(
      input({ job: job({ state: { oomCount: 0, paused: false, lastActionAt: NOW - 300 } }) }),
    );
    assert.equal(replicaChange(done).to, 6);
  });

  it('does nothing while paused', () => {
    const plan = decideTuning(
      input({ job: job({ state: { oomCount: 0, paused: true, pauseReason: 'crash loop' } }) }),
    );
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /paused \(crash loop\)/);
  });

  it('never changes the worker count of a non-elastic job', () => {
    const plan = decideTuning(input({ job: job({ elastic: false }) }));
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /not elastic/);
  });

  it('waits while a previous rescale has not settled', () => {
    const plan = decideTuning(input({ job: job({}, [role({ replicas: 6 })]) }));
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /rescale in progress/);
  });

  it('keeps the job and explains both directions when nothing qualifies', () => {
    const plan = decideTuning(
      input({ model: tableModel({ 3: 200, 4: 400, 5: 401, 6: 402, 7: 403, 8: 404 }) }),
    );
    assert.deepEqual(plan.changes, []);
    assert.match(
      told(plan),
      /^keep 4 workers at 400 samples\/s: .*hysteresis.*; 4 -> 3 workers would lose 50\.0%/,
    );
  });
});

describe('decideTuning parameter servers (TFJob)', () => {
  const tfjob = (ps: number, psMax: number) =>
    job({ ref: { kind: 'TFJob', namespace: 'ml', name: 'resnet' } }, [
      role({ maxReplicas: 4 }),
      role({
        role: 'PS',
        replicas: ps,
        minReplicas: 1,
        maxReplicas: psMax,
        requests: { ...PS_REQ },
        limits: { ...PS_REQ },
      }),
    ]);

  it('adds a PS when that is the gain (workers at max)', () => {
    const plan = decideTuning(
      input({
        job: tfjob(1, 3),
        current: { ...current, ps: 1 },
        model: tableModel({}, { psTable: { 1: 300, 2: 400 } }),
      }),
    );
    assert.deepEqual(replicaChange(plan), { kind: 'replicas', role: 'PS', from: 1, to: 2 });
  });

  it('does not add a PS beyond its max', () => {
    const plan = decideTuning(
      input({
        job: tfjob(1, 1),
        current: { ...current, ps: 1 },
        model: tableModel({}, { psTable: { 1: 300, 2: 400 } }),
      }),
    );
    assert.deepEqual(plan.changes, []);
  });

  it('removes a PS that adds nearly nothing', () => {
    const plan = decideTuning(
      input({
        job: tfjob(2, 3),
        current: { ...current, ps: 2 },
        model: tableModel({}, { psTable: { 1: 398, 2: 400, 3: 401 } }),
      }),
    );
    assert.deepEqual(replicaChange(plan), { kind: 'replicas', role: 'PS', from: 2, to: 1 });
  });
});

describe('placement helpers', () => {
  it('spans ceil(K / podsPerNode) nodes', () => {
    const cap = capacity(8);
    assert.equal(podsPerNode(cap, WORKER_REQ), 8);
    assert.equal(nodesSpanned(8, 8), 1);
    assert.equal(nodesSpanned(9, 8), 2);
    assert.equal(nodesSpanned(0, 8), 0);
    assert.equal(nodesSpanned(3, 0), 3);
  });

  it('resizing neither consolidates on growth nor assumes emptied nodes on shrink', () => {
    assert.equal(nodesAfterResize({ replicas: 4, nodes: 3 }, 5, 8), 3);
    assert.equal(nodesAfterResize({ replicas: 8, nodes: 1 }, 9, 8), 2);
    assert.equal(nodesAfterResize({ replicas: 4, nodes: 3 }, 2, 8), 2);
    assert.equal(nodesAfterResize({ replicas: 4, nodes: 4 }, 4, 1), 4);
  });

  it('keeps the global batch and falls back to the local batch', () => {
    assert.equal(localBatchFor(job({ globalBatchSize: 1024 }), 8, 32), 128);
    assert.equal(localBatchFor(job(), 8, 32), 32);
  });

  it('hysteresis holds strictly below and accepts the best itself', () => {
    assert.equal(withinHysteresis(96, 100, 0.05), true);
    assert.equal(withinHysteresis(95, 100, 0.05), false);
    assert.equal(withinHysteresis(100, 100, 0), true);
  });
});
