import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import {
  decideRebalance,
  type PendingDemand,
  type RebalanceInput,
  type RebalanceJob,
} from '../../../lib/policies/rebalance.js';
import type { ClusterCapacity, JobView, Plan, Resources } from '../../../lib/types.js';

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
const ONE_GPU: Resources = { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 };

/** Closed-form model: throughput per worker count from a table, exact; 1 sample/s off the table. */
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

interface JobSpec {
  name: string;
  k: number;
  table?: Record<number, number>;
  priority?: number;
  min?: number;
  max?: number;
  gpus?: number;
  lastActionAt?: number;
  remainingSeconds?: number | null;
  elastic?: boolean;
  /** The user's size recorded on trainscaler's first write (JobAutoscalerState.askedWorkers). */
  asked?: number;
  /** Nodes its workers run on (1 unless said). */
  nodes?: number;
  /** The job's signature (its name unless said): jobs of one signature are alike. */
  signature?: string;
  /** For a job without samples (no table): its signature's profile, as a table. */
  priors?: Record<number, number>;
}

function view(
  spec: { name: string; priority?: number },
  worker?: Partial<JobView['roles'][number]>,
): JobView {
  const requests = { ...ONE_GPU, ...(worker?.requests ?? {}) };
  return {
    ref: { kind: 'PyTorchJob', namespace: 'ml', name: spec.name },
    uid: `uid-${spec.name}`,
    resourceVersion: '1',
    priority: spec.priority ?? 0,
    elastic: true,
    signature: spec.name,
    localBatchSize: 32,
    roles: [
      {
        role: 'Worker',
        replicas: 4,
        minReplicas: 1,
        maxReplicas: 16,
        containerName: 'pytorch',
        containerIndex: 0,
        limits: requests,
        ...worker,
        requests,
      },
    ],
    managed: true,
    state: { oomCount: 0, paused: false },
  };
}

function entry(spec: JobSpec): RebalanceJob {
  const job = view(spec, {
    replicas: spec.k,
    minReplicas: spec.min ?? 1,
    maxReplicas: spec.max ?? 16,
    requests: { ...ONE_GPU, gpus: spec.gpus ?? 1 },
  });
  job.elastic = spec.elastic ?? true;
  if (spec.lastActionAt !== undefined) job.state.lastActionAt = spec.lastActionAt;
  if (spec.asked !== undefined) job.state.askedWorkers = spec.asked;
  if (spec.signature !== undefined) job.signature = spec.signature;
  return {
    job,
    model: spec.table ? tableModel(spec.table) : undefined,
    ...(spec.priors ? { priors: tableModel(spec.priors) } : {}),
    current: { replicas: spec.k, nodes: spec.nodes ?? 1, localBatchSize: 32 },
    // An hour left unless said otherwise; `null` for a job whose remaining time is unknown.
    ...(spec.remainingSeconds !== null ? { remainingSeconds: spec.remainingSeconds ?? 3600 } : {}),
  };
}

/** The reason and its details, as `explain --verbose` shows them: what the tests below read. */
function told(plan: Plan | undefined): string {
  return plan ? [plan.reason, ...(plan.details ?? [])].join('; ') : '';
}

/** A 4-GPU node (the measured world's shape) with `used` GPUs taken by 1-GPU pods. */
function fourGpuNode(name: string, used: number) {
  return {
    name,
    allocatable: { cpuMillis: 4000, memoryBytes: 4 * GiB, gpus: 4 },
    allocated: { cpuMillis: used * 1000, memoryBytes: used * GiB, gpus: used },
    schedulable: true,
  };
}

/** One node with `total` GPUs of which `used` are taken by 1-GPU pods (so release() can give them back). */
function capacity(used: number, total = 32): ClusterCapacity {
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

function pending(priority: number, pods: number): PendingDemand {
  return { job: view({ name: 'urgent', priority }), demand: ONE_GPU, pods };
}

function rebalance(jobs: JobSpec[], overrides: Partial<RebalanceInput> = {}): Plan[] {
  const used = jobs.reduce((n, j) => n + j.k * (j.gpus ?? 1), 0);
  return decideRebalance({
    jobs: jobs.map(entry),
    capacity: capacity(used, used),
    config,
    now: NOW,
    ...overrides,
  });
}

/** Worker counts after the plans, by job name (only jobs that change). */
function sizes(plans: Plan[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of plans) {
    assert.equal(p.policy, 'rebalance');
    for (const c of p.changes) if (c.kind === 'replicas') out[p.ref.name] = c.to;
  }
  return out;
}

const SMALL = { 2: 200, 3: 290, 4: 330, 5: 340 }; // +45%, +13.8%, +3%
const BIG = { 8: 800, 9: 880, 10: 950, 11: 960 }; // +10%, +8.0%, +1.1%

describe('decideRebalance: idle capacity', () => {
  const small = (extra: Partial<JobSpec> = {}): JobSpec => ({ name: 'small', k: 2, table: SMALL, ...extra });
  const big = (extra: Partial<JobSpec> = {}): JobSpec => ({ name: 'big', k: 8, table: BIG, ...extra });
  const withFree = (jobs: JobSpec[], free: number, overrides: Partial<RebalanceInput> = {}) =>
    rebalance(jobs, { capacity: capacity(10, 10 + free), ...overrides });

  it('returns no plans when nothing can change', () => {
    assert.deepEqual(rebalance([small(), big()]), []);
  });

  it('gives each free GPU to the job with the highest relative gain', () => {
    assert.deepEqual(sizes(withFree([small(), big()], 1)), { small: 3 });
    assert.deepEqual(sizes(withFree([small(), big()], 2)), { small: 4 }); // +13.8% still beats +10%
    // small's 5th worker adds 3%: big's +10% and +8% come first.
    assert.deepEqual(sizes(withFree([small(), big()], 4)), { small: 4, big: 10 });
    // small's 5th (+3%) and big's 11th (+1.1%) still speed their jobs up, and each decision clears the 5%
    // hysteresis as a whole (2 -> 5: +70%, 8 -> 11: +20%): no GPU idles that a job would use. Past the
    // tables (a loss) the rest stays idle.
    assert.deepEqual(sizes(withFree([small(), big()], 8)), { small: 5, big: 11 });
  });

  it('explains a growth with its numbers', () => {
    const [plan] = withFree([small()], 2);
    assert.ok(plan);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 4 }]);
    assert.match(
      told(plan),
      /^2 -> 4 workers: \+2 from idle capacity; predicted \+65\.0%; predicted 200 -> 330 samples\/s \(\+65\.0%\)/,
    );
    assert.match(
      told(plan),
      /gain over remaining ~60\.0 min = 23\.6 min > 2 x scale-up cost 50 s \(the re-rendezvous pause, default/,
    );
  });

  it('growth rule: a job whose remaining time is unknown gets one worker, and the reason says why', () => {
    const [plan] = withFree([small({ remainingSeconds: null })], 2);
    assert.ok(plan);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }]);
    assert.match(told(plan), /growth rule: remaining time unknown: one worker at a time/);
    assert.match(told(plan), /remaining ~60\.0 min \(unknown, assumed\)/);
  });

  it('growth rule: a job seen at one size only gets one probe worker however large its predicted gain', () => {
    const oneSize = { name: 'one', k: 4, table: { 4: 400, 5: 500, 6: 600, 7: 700, 8: 800 } };
    const model = tableModel(oneSize.table);
    const seenOnce = { ...model, distinctScales: 1 };
    const job = entry(oneSize);
    const plans = decideRebalance({
      jobs: [{ ...job, model: seenOnce }],
      capacity: capacity(0),
      config: DEFAULT_POLICY_CONFIG,
      now: NOW,
    });
    assert.deepEqual(plans[0]?.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 5 }]);
    assert.match(told(plans[0]), /growth rule: seen at one size only: one probe worker at a time/);
    // seen at two sizes, the same gains take the full step
    const two = decideRebalance({
      jobs: [job],
      capacity: capacity(0),
      config: DEFAULT_POLICY_CONFIG,
      now: NOW,
    });
    const change = two[0]?.changes[0];
    assert.equal(change?.kind === 'replicas' && change.to, 4 + DEFAULT_POLICY_CONFIG.maxReplicaStep);
  });

  it('growth rule: a job measured at two sizes grows back to the most workers it has run at, no further', () => {
    const table = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, 100 * (i + 1)]));
    const grown = (largestRunWorkers: number | undefined, model?: ThroughputModel) => {
      const back = entry({ name: 'back', k: 4, max: 16, table, remainingSeconds: 36_000 });
      back.job.state.largestRunWorkers = largestRunWorkers;
      if (model) back.model = model;
      return decideRebalance({ jobs: [back], capacity: capacity(4, 32), config, now: NOW });
    };
    const plans = grown(10);
    assert.deepEqual(sizes(plans), { back: 10 });
    assert.match(told(plans[0]), /growth rule: back to the 10 workers it has run at/);
    assert.deepEqual(sizes(grown(undefined)), { back: 8 }, 'no size run at: the step');
    assert.deepEqual(sizes(grown(6)), { back: 8 }, 'a size run at within the step: the step');
    const once = { ...tableModel(table), distinctScales: 1 };
    assert.deepEqual(sizes(grown(10, once)), { back: 5 }, 'seen at one size: one probe worker');
  });

  it("growth rule: each job's limit is its own and that of the decision's config, decision after decision", () => {
    // The limit is kept per job within one decision (it is asked for every pair of alike jobs): it must never
    // be another job's, nor an earlier decision's under another config.
    const table = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, 100 * (i + 1)]));
    const back = entry({ name: 'back', k: 4, max: 16, table, remainingSeconds: 36_000 });
    back.job.state.largestRunWorkers = 10;
    const stepped = entry({ name: 'stepped', k: 4, max: 16, table, remainingSeconds: 36_000 });
    const decide = (c: PolicyConfig) =>
      sizes(decideRebalance({ jobs: [back, stepped], capacity: capacity(8, 64), config: c, now: NOW }));
    assert.deepEqual(decide(config), { back: 10, stepped: 8 });
    assert.deepEqual(decide({ ...config, maxReplicaStep: 2 }), { back: 10, stepped: 6 });
    assert.deepEqual(decide({ ...config, maxReplicaStep: 8 }), { back: 12, stepped: 12 });
    assert.deepEqual(decide(config), { back: 10, stepped: 8 });
  });

  it('growth rule: a probe of a large job clears the hysteresis on the step it opens', () => {
    // 24 workers seen at one size, +3% per worker on the mean: one worker alone is below the 5% hysteresis,
    // the step measuring it opens (maxReplicaStep, to 28: +7.1%) is not.
    const table = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [i + 1, 1000 * (1 + 0.03 * i)]));
    const job = entry({ name: 'wide', k: 24, max: 40, table, remainingSeconds: 36_000 });
    const plans = decideRebalance({
      jobs: [{ ...job, model: { ...tableModel(table), distinctScales: 1 } }],
      capacity: capacity(24, 64),
      config,
      now: NOW,
    });
    assert.deepEqual(sizes(plans), { wide: 25 });
    assert.match(told(plans[0]), /growth rule: seen at one size only/);
  });

  it('compares gains per GPU', () => {
    // small's workers hold 4 GPUs: +30% is 7.5%/GPU, below big's 10%/GPU; +45% is 11.25%/GPU, above it.
    const fourGpu = (table: Record<number, number>) => ({ name: 'small', k: 2, gpus: 4, table });
    const plans = (table: Record<number, number>) =>
      decideRebalance({
        jobs: [entry(fourGpu(table)), entry(big())],
        capacity: capacity(16, 20),
        config,
        now: NOW,
      });
    assert.deepEqual(sizes(plans({ 2: 200, 3: 260 })), { big: 11 });
    assert.deepEqual(sizes(plans({ 2: 200, 3: 290 })), { small: 3 });
  });

  it('respects max, maxReplicaStep, cool-down and hysteresis', () => {
    assert.deepEqual(sizes(withFree([small({ max: 3 }), big()], 2)), { small: 3, big: 9 });
    const linear = { name: 'lin', k: 2, table: { 2: 200, 3: 300, 4: 400, 5: 500, 6: 600, 7: 700 } };
    assert.deepEqual(sizes(withFree([linear], 8, { config: { ...config, maxReplicaStep: 3 } })), { lin: 5 });
    const cooling = small({ lastActionAt: NOW - 299 });
    assert.deepEqual(sizes(withFree([cooling, big()], 1)), { big: 9 });
    assert.deepEqual(sizes(withFree([small({ lastActionAt: NOW - 300 }), big()], 1)), { small: 3 });
    const flat = big({ table: { 8: 800, 9: 838 } }); // +4.75%
    assert.deepEqual(withFree([flat], 4), []);
  });

  it('steps over a worker that slows the job when the step as a whole speeds it up (a node boundary)', () => {
    // The 4th worker alone is slower (290 < 300); the 4th and 5th together are faster (400).
    const dip = { name: 'dip', k: 2, table: { 2: 200, 3: 300, 4: 290, 5: 400 } };
    assert.deepEqual(sizes(withFree([dip], 3)), { dip: 5 });
    // Room for one more after the 3rd only: the slower 4th alone is not taken.
    assert.deepEqual(sizes(withFree([dip], 2)), { dip: 3 });
    // A step that ends slower is never taken, whatever its size.
    const sag = { name: 'sag', k: 2, table: { 2: 200, 3: 300, 4: 290, 5: 295 } };
    assert.deepEqual(sizes(withFree([sag], 3)), { sag: 3 });
    // Filling the next node from a full one: 4 -> 5 alone loses, 4 -> 8 gains.
    const full = { name: 'full', k: 4, table: { 4: 400, 5: 380, 6: 470, 7: 540, 8: 600 } };
    assert.deepEqual(sizes(withFree([full], 4)), { full: 8 });
    // Room for three: the best step that fits (4 -> 7), not nothing.
    assert.deepEqual(sizes(withFree([full], 3)), { full: 7 });
    // A worker taken from another job moves alone: never one that alone slows its recipient down.
    const lazy = { name: 'lazy', k: 4, table: { 3: 399, 4: 400 } };
    const boundary = { name: 'boundary', k: 2, table: { 2: 200, 3: 190, 4: 400 } };
    assert.deepEqual(rebalance([lazy, boundary]), []);
  });

  it('does not grow a job whose gain cannot pay for the rescale before it ends', () => {
    // 800 -> 880 saves R x 9.1% against 2 x 50 s: 1090 s saves 99 s, 1200 s saves 109 s.
    assert.deepEqual(withFree([big({ remainingSeconds: 1090 })], 1), []);
    assert.deepEqual(sizes(withFree([big({ remainingSeconds: 1200 })], 1)), { big: 9 });
  });

  it('leaves paused, unmanaged, non-elastic and mid-rescale jobs alone', () => {
    const paused = entry(small());
    paused.job.state.paused = true;
    const unmanaged = entry(small());
    unmanaged.job.managed = false;
    const rescaling = entry(small());
    rescaling.current = { ...rescaling.current, replicas: 1 };
    for (const e of [paused, unmanaged, rescaling, entry(small({ elastic: false }))]) {
      assert.deepEqual(decideRebalance({ jobs: [e], capacity: capacity(10, 12), config, now: NOW }), []);
    }
  });
});

describe('decideRebalance: pending higher-priority work', () => {
  const low = (name: string, priority: number, extra: Partial<JobSpec> = {}): JobSpec => ({
    name,
    k: 4,
    min: 2,
    priority,
    table: { 2: 200, 3: 300, 4: 400 },
    ...extra,
  });
  const jobs = [low('l1', 1), low('l2', 5), low('peer', 100, { k: 8, min: 1 })];

  it('shrinks the lowest priority first, never below min', () => {
    assert.deepEqual(sizes(rebalance(jobs, { pending: [pending(101, 2)] })), { l1: 2 });
    assert.deepEqual(sizes(rebalance(jobs, { pending: [pending(101, 3)] })), { l1: 2, l2: 3 });
  });

  it('never touches jobs of equal or higher priority', () => {
    // l2 has priority 5: a pending job of priority 5 can only take from l1.
    assert.deepEqual(rebalance(jobs, { pending: [pending(5, 3)] }), []);
    assert.deepEqual(sizes(rebalance(jobs, { pending: [pending(5, 2)] })), { l1: 2 });
    // peer has the pending job's priority: 4 pods can come from l1 and l2, a 5th cannot.
    assert.deepEqual(sizes(rebalance(jobs, { pending: [pending(100, 4)] })), { l1: 2, l2: 2 });
  });

  it('shrinks nothing when the pending job still would not fit', () => {
    // l1 and l2 can free 4 (down to their min); peer has the pending job's priority.
    assert.deepEqual(rebalance(jobs, { pending: [pending(100, 5)] }), []);
  });

  it('shrinks nothing when the pending job already fits', () => {
    assert.deepEqual(rebalance(jobs, { pending: [pending(101, 2)], capacity: capacity(16, 18) }), []);
  });

  it('among equal priorities takes the worker whose loss per GPU is smallest', () => {
    const cheap = low('zz-cheap', 1, { table: { 2: 200, 3: 390, 4: 400 } }); // -2.5%
    const dear = low('aa-dear', 1, { table: { 2: 200, 3: 300, 4: 400 } }); // -25%
    assert.deepEqual(sizes(rebalance([cheap, dear], { pending: [pending(9, 1)] })), { 'zz-cheap': 3 });
  });

  it('skips a victim in cool-down', () => {
    const cooling = low('l1', 1, { lastActionAt: NOW - 10 });
    assert.deepEqual(sizes(rebalance([cooling, low('l2', 5)], { pending: [pending(101, 1)] })), { l2: 3 });
  });

  it('names the pending job and the priorities', () => {
    const [plan] = rebalance(jobs, { pending: [pending(101, 2)] });
    assert.match(
      told(plan),
      /^4 -> 2 workers: -2 to admit ml\/urgent \(priority 101 > 1, needs 2 pods\); predicted -50\.0%; predicted 400 -> 200 samples\/s/,
    );
  });

  it('keeps free capacity for pending pods instead of growing into it', () => {
    const grower = { name: 'g', k: 2, table: SMALL };
    assert.deepEqual(
      decideRebalance({
        jobs: [entry(grower)],
        pending: [pending(0, 2)],
        capacity: capacity(2, 4),
        config,
        now: NOW,
      }),
      [],
    );
    assert.deepEqual(
      sizes(
        decideRebalance({
          jobs: [entry(grower)],
          pending: [pending(0, 1)],
          capacity: capacity(2, 4),
          config,
          now: NOW,
        }),
      ),
      { g: 3 },
    );
  });
});

describe('decideRebalance: reclaiming workers that add nearly nothing', () => {
  const gainer = { name: 'gainer', k: 4, table: { 4: 400, 5: 480 } }; // +20%

  it('moves a worker whose contribution is below hysteresis to a job that gains more', () => {
    const idle = { name: 'idle', k: 4, table: { 2: 100, 3: 392, 4: 400 } }; // last worker +2.0%
    const plans = rebalance([idle, gainer]);
    assert.deepEqual(sizes(plans), { idle: 3, gainer: 5 });
    const byName = Object.fromEntries(plans.map((p) => [p.ref.name, told(p)]));
    assert.match(
      byName.idle ?? '',
      /-1 to ml\/gainer: last worker adds only \+2\.0% \(< 5%\) while ml\/gainer gains \+20\.0% per GPU/,
    );
    assert.match(byName.gainer ?? '', /\+1 from ml\/idle/);
  });

  it('moves a worker that adds at least hysteresis only to a job gaining twice what it loses', () => {
    const busy = { name: 'busy', k: 4, table: { 3: 380, 4: 400 } }; // loses 5% of its speed per GPU
    const modest = { name: 'modest', k: 4, table: { 4: 400, 5: 436 } }; // +9%, less than 2 x 5%
    assert.deepEqual(rebalance([busy, modest]), []);
    const plans = rebalance([busy, gainer]); // +20%
    assert.deepEqual(sizes(plans), { busy: 3, gainer: 5 });
    assert.match(
      told(plans.find((p) => p.ref.name === 'gainer')),
      /\+1 from ml\/busy, which has longer to run/,
    );
  });

  it('weighs gains by time left: a job near its end gets a worker from one far from it', () => {
    // Urgency is (hours left)^-0.5: 25% x 0.1 against 10% x 1.41.
    const far = { name: 'far', k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 360_000 };
    const near = { name: 'near', k: 4, table: { 4: 400, 5: 440 }, remainingSeconds: 1_800 };
    assert.deepEqual(sizes(rebalance([far, near])), { far: 3, near: 5 });
    // The same two jobs with equal time left: 10% does not beat 2 x 25%.
    assert.deepEqual(rebalance([{ ...far, remainingSeconds: 1_800 }, near]), []);
  });

  it('softens shortest-remaining-first: a job 20 times further from its end keeps a worker worth 2.5 times more', () => {
    // 25% x 0.32 against 10% x 1.41: not twice. With the plain completion rate (25% x 0.1 against 10% x 2) the
    // far job gave its worker, and the longest jobs of a cluster lent to every shorter one.
    const far = { name: 'far', k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 36_000 };
    const near = { name: 'near', k: 4, table: { 4: 400, 5: 440 }, remainingSeconds: 1_800 };
    assert.deepEqual(rebalance([far, near]), []);
  });

  it('never takes from a higher-priority job to feed a lower one', () => {
    const idle = { name: 'idle', k: 4, priority: 10, table: { 3: 392, 4: 400 } };
    assert.deepEqual(rebalance([idle, { ...gainer, priority: 5 }]), []);
    assert.deepEqual(sizes(rebalance([idle, { ...gainer, priority: 10 }])), { idle: 3, gainer: 5 });
  });
});

describe('decideRebalance: jobs without a model', () => {
  const unknown = { name: 'unknown', k: 4 };
  // Earlier runs of its signature: +20% from 4 to 5 workers.
  const profiled = { name: 'unknown', k: 4, priors: { 4: 400, 5: 480 } };

  it('are never grown without samples, however much room is idle', () => {
    assert.deepEqual(rebalance([unknown], { capacity: capacity(4, 32) }), []);
    assert.deepEqual(rebalance([{ ...unknown, asked: 8 }], { capacity: capacity(0, 32) }), []);
  });

  it("get one probe worker on their signature's profile, and only one, saying so", () => {
    const plans = rebalance([profiled], { capacity: capacity(4, 8) });
    assert.deepEqual(sizes(plans), { unknown: 5 });
    assert.match(
      told(plans[0]),
      /^4 -> 5 workers: \+1 on priors \(no samples yet\): its signature's profile predicts \+20\.0%/,
    );
  });

  it('are not probed on priors that predict less than the hysteresis', () => {
    assert.deepEqual(
      rebalance([{ ...profiled, priors: { 4: 400, 5: 410 } }], { capacity: capacity(4, 8) }),
      [],
    );
  });

  it('are not probed across a node boundary', () => {
    const node = (name: string, used: number) => ({
      name,
      allocatable: { cpuMillis: 4000, memoryBytes: 4 * GiB, gpus: 4 },
      allocated: { cpuMillis: used * 1000, memoryBytes: used * GiB, gpus: used },
      schedulable: true,
    });
    const full = { nodes: [node('n1', 4), node('n2', 0)] };
    assert.deepEqual(rebalance([profiled], { capacity: full }), []);
    // Three workers on a 4-GPU node: the fourth stays on it and is probed.
    const three = { nodes: [node('n1', 3), node('n2', 0)] };
    assert.deepEqual(
      sizes(rebalance([{ ...profiled, k: 3, priors: { 3: 300, 4: 400 } }], { capacity: three })),
      { unknown: 4 },
    );
  });

  it('probe after modelled jobs have taken what they gain from', () => {
    const small = { name: 'small', k: 2, table: SMALL };
    assert.deepEqual(sizes(rebalance([profiled, small], { capacity: capacity(6, 7) })), { small: 3 });
    assert.deepEqual(sizes(rebalance([profiled, small], { capacity: capacity(6, 10) })), {
      small: 5,
      unknown: 5,
    });
  });

  it('are not reclaimed from, but are shrunk for priority', () => {
    const gainer = { name: 'gainer', k: 4, table: { 4: 400, 5: 480 } };
    assert.deepEqual(rebalance([unknown, gainer]), []);
    assert.deepEqual(sizes(rebalance([unknown, gainer], { pending: [pending(10, 1)] })), { unknown: 3 });
  });
});

describe('decideRebalance determinism', () => {
  it('gives the same plans whatever the input order', () => {
    const jobs: JobSpec[] = [
      { name: 'b', k: 2, table: SMALL },
      { name: 'a', k: 2, table: SMALL },
      { name: 'c', k: 8, table: BIG },
      { name: 'd', k: 4 },
    ];
    const forward = rebalance(jobs, { capacity: capacity(16, 19) });
    const backward = rebalance([...jobs].reverse(), { capacity: capacity(16, 19) });
    assert.deepEqual(backward, forward);
    // Equal gains: the tie goes by name.
    assert.deepEqual(sizes(forward), { a: 4, b: 3 });
    assert.deepEqual(
      forward.map((p) => p.ref.name),
      ['a', 'b'],
    );
  });
});

describe('decideRebalance: queued jobs of the same priority share the cluster', () => {
  const LINEAR = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, 100 * (i + 1)]));
  const running = (name: string, k: number, extra: Partial<JobSpec> = {}): JobSpec => ({
    name,
    k,
    table: LINEAR,
    ...extra,
  });
  /** A job that asked for `asked` workers, none placed, waiting since it was just submitted (cool-down). */
  const queued = (asked: number, extra: { min?: number; elastic?: boolean; priority?: number } = {}) => {
    const job = view(
      { name: 'queued', priority: extra.priority ?? 0 },
      { replicas: asked, minReplicas: extra.min ?? 1 },
    );
    job.elastic = extra.elastic ?? true;
    job.state.lastActionAt = NOW - 10;
    const demand: PendingDemand = { job, demand: ONE_GPU, pods: asked, role: 'Worker', placed: 0 };
    const slot: RebalanceJob = {
      job,
      model: undefined,
      current: { replicas: asked, nodes: 1, localBatchSize: 32 },
    };
    return { demand, slot };
  };
  const full = (jobs: JobSpec[], q: ReturnType<typeof queued>, overrides: Partial<RebalanceInput> = {}) => {
    const used = jobs.reduce((n, j) => n + j.k, 0);
    return decideRebalance({
      jobs: [...jobs.map(entry), q.slot],
      pending: [q.demand],
      capacity: capacity(used, used),
      config,
      now: NOW,
      ...overrides,
    });
  };

  it('takes workers from a running job while its next worker is worth more, and starts at that share', () => {
    // The first worker is worth everything; then 1/1, 1/2, 1/3 against big's 1/8, 1/7, 1/6, 1/5 (+5%):
    // the 4-worker step per decision ends it at 4 and 4.
    const plans = full([running('big', 8)], queued(8));
    assert.deepEqual(sizes(plans), { big: 4, queued: 4 });
    const own = plans.find((p) => p.ref.name === 'queued');
    assert.match(told(own), /queued with 8 workers asked and none placed: starts with 4 \(4 from running/);
    const victim = plans.find((p) => p.ref.name === 'big');
    assert.match(told(victim), /to ml\/queued, queued at priority 0/);
  });

  it('stops where the queued job would gain less than the running jobs lose', () => {
    // Its 2nd and 3rd workers (worth 1/1, 1/2) beat a 3-worker job's last (1/3 + 5%); its 4th (1/3) does not
    // beat a 2-worker job's last (1/2 + 5%).
    const three = ['a', 'b', 'c'].map((n) => running(n, 3));
    assert.deepEqual(sizes(full(three, queued(8))), { a: 2, b: 2, c: 2, queued: 3 });
    // Nothing is taken below a job's minimum.
    assert.deepEqual(sizes(full([running('big', 3)], queued(8))), { big: 1, queued: 2 });
  });

  it('uses free GPUs first and leaves running jobs alone when they suffice', () => {
    const plans = full([running('big', 4)], queued(2), { capacity: capacity(4, 6) });
    assert.deepEqual(plans, []);
    // One free GPU: the second comes from big.
    assert.deepEqual(sizes(full([running('big', 4)], queued(2), { capacity: capacity(4, 5) })), { big: 3 });
  });

  it('shrinks nothing when the queued job cannot reach its minimum', () => {
    // big may give at most 4 (step), the queued job needs 6 to start.
    assert.deepEqual(full([running('big', 8)], queued(8, { min: 6 })), []);
  });

  it('never takes from a job of higher priority, nor for a job that cannot be resized', () => {
    assert.deepEqual(full([running('big', 8, { priority: 5 })], queued(8)), []);
    assert.deepEqual(full([running('big', 8)], queued(8, { elastic: false })), []);
    const placed = queued(8);
    placed.demand.placed = 1;
    assert.deepEqual(full([running('big', 8)], placed), []);
  });

  it('takes from the job with the most time left first (shortest remaining time first)', () => {
    const plans = full(
      // ending may not grow (max 4), so only the choice of donor shows.
      [
        running('ending', 4, { remainingSeconds: 600, max: 4 }),
        running('long', 4, { remainingSeconds: 36_000 }),
      ],
      queued(2),
    );
    // The queued job got all it asked for: only the victim changes.
    assert.deepEqual(sizes(plans), { long: 2 });
  });
});

describe('decideRebalance: urgency', () => {
  it('gives an idle GPU to the job closer to its end when relative gains are equal', () => {
    const a = { name: 'a', k: 2, table: SMALL, remainingSeconds: 7200 };
    const b = { name: 'b', k: 2, table: SMALL, remainingSeconds: 1800 };
    assert.deepEqual(sizes(rebalance([a, b], { capacity: capacity(4, 5) })), { b: 3 });
    assert.deepEqual(sizes(rebalance([{ ...a, remainingSeconds: 900 }, b], { capacity: capacity(4, 5) })), {
      a: 3,
    });
  });
});

describe('decideRebalance: alike jobs end one after the other', () => {
  /** Throughput `slope` x k + (100 - slope): 100 samples/s on one worker, `slope` more per worker after it. */
  const linear = (slope: number) =>
    Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, slope * (i + 1) + 100 - slope]));
  // Equal gains per GPU, and time left too close for the urgency weighting to move a worker (reclaim).
  const first = { name: 'first', signature: 'resnet', k: 8, table: linear(100), remainingSeconds: 7_200 };
  const later = { name: 'later', signature: 'resnet', k: 8, table: linear(100), remainingSeconds: 10_800 };

  it('moves workers from the one with longer to run to the one ending first, one step at most', () => {
    const plans = rebalance([first, later]);
    assert.deepEqual(sizes(plans), { first: 12, later: 4 });
    const byName = Object.fromEntries(plans.map((p) => [p.ref.name, told(p)]));
    assert.match(
      byName.later ?? '',
      /-4 to ml\/first, alike and ending first: the GPUs come back when it ends/,
    );
    assert.match(byName.first ?? '', /\+4 from ml\/later, alike and with longer to run/);
  });

  it('leaves jobs of different signatures, and equal remaining times, to the marginal comparisons', () => {
    assert.deepEqual(rebalance([first, { ...later, signature: 'bert' }]), []);
    assert.deepEqual(rebalance([first, { ...later, remainingSeconds: 7_200 }]), []);
  });

  it('only for a recipient with at least an hour to run', () => {
    assert.deepEqual(rebalance([{ ...first, remainingSeconds: 3_000 }, later]), []);
  });

  it('only where each moved GPU does at least 75% of a one-worker job', () => {
    assert.deepEqual(
      rebalance([
        { ...first, table: linear(60) },
        { ...later, table: linear(60) },
      ]),
      [],
    );
    assert.deepEqual(
      sizes(
        rebalance([
          { ...first, table: linear(80) },
          { ...later, table: linear(80) },
        ]),
      ),
      {
        first: 12,
        later: 4,
      },
    );
  });

  it('only while the recipient gains at least what the donor loses', () => {
    // 100 samples/s a worker up to 8, 80 above: the ending job would gain 0.8 of what the other loses.
    const bent = Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [i + 1, i < 8 ? 100 * (i + 1) : 800 + 80 * (i - 7)]),
    );
    assert.deepEqual(
      rebalance([
        { ...first, table: bent },
        { ...later, table: bent },
      ]),
      [],
    );
  });

  it('never takes from a job of higher priority, nor below the donor minimum', () => {
    assert.deepEqual(rebalance([first, { ...later, priority: 10 }]), []);
    assert.deepEqual(sizes(rebalance([first, { ...later, min: 6 }])), { first: 10, later: 6 });
  });

  it('takes at most one step from a donor in a decision, whatever the number of recipients', () => {
    // The first recipient stops at its maximum (2 more), the second gets what is left of the donor's step.
    const second = { ...first, name: 'second', remainingSeconds: 9_000 };
    const big = { ...later, k: 12 };
    assert.deepEqual(sizes(rebalance([{ ...first, max: 10 }, second, big])), {
      first: 10,
      second: 10,
      later: 8,
    });
  });

  it('not from a donor in its cool-down', () => {
    assert.deepEqual(rebalance([first, { ...later, lastActionAt: NOW - 10 }]), []);
  });

  it('owns the moves between them where it applies: the marginal comparisons do not take a worker back', () => {
    // The small job's next worker is worth more per GPU than the ending job's last (+50% against +14%, weighted
    // by time left): reclaimed, this pass took it back the next tick, every cool-down.
    const ending = { ...first, name: 'ending' };
    const small = { ...later, name: 'small', k: 2 };
    const reclaimed = { ending: 7, small: 3 };
    assert.deepEqual(sizes(rebalance([ending, small])), { ending: 9, small: 1 });
    // Where this pass would not take it back, the marginal comparisons still move it: another signature, less
    // than an hour left, a recipient of higher priority, an unknown time left, or a last worker doing under 75%
    // of a one-worker job.
    assert.deepEqual(sizes(rebalance([ending, { ...small, signature: 'bert' }])), reclaimed);
    assert.deepEqual(sizes(rebalance([{ ...ending, remainingSeconds: 3_000 }, small])), reclaimed);
    assert.deepEqual(sizes(rebalance([ending, { ...small, priority: 10 }])), reclaimed);
    assert.deepEqual(sizes(rebalance([{ ...ending, remainingSeconds: null }, small])), reclaimed);
    const bent = { ...linear(100), 8: 750, 9: 800 };
    assert.deepEqual(sizes(rebalance([{ ...ending, table: bent }, small])), reclaimed);
  });
});

describe('decideRebalance: a job observed at one scale only', () => {
  /** Mean predictions from the table; off the observed scale the spread is unbounded, as in a real fit. */
  function oneScaleModel(
    observed: number,
    table: Record<number, number>,
    distinctScales = 1,
  ): ThroughputModel {
    return {
      sampleCount: 3,
      distinctScales,
      predict(p: Placement) {
        const tp = table[p.replicas] ?? 1;
        const stdev = p.replicas === observed ? 0 : Number.POSITIVE_INFINITY;
        return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev, throughput: tp };
      },
    };
  }
  const fresh = (distinctScales: number): RebalanceJob => {
    const e = entry({ name: 'fresh', k: 2 });
    e.model = oneScaleModel(2, { 2: 200, 3: 290, 4: 360 }, distinctScales);
    return e;
  };

  it('grows by one probe worker on the mean prediction, never more per decision', () => {
    const plans = decideRebalance({ jobs: [fresh(1)], capacity: capacity(2, 5), config, now: NOW });
    assert.deepEqual(sizes(plans), { fresh: 3 });
  });

  it('fills the node its probe opens when it exactly fills its own: one worker alone would be slower', () => {
    // 4 workers on a full 4-GPU node; the 5th opens a node and makes all pay the inter-node all-reduce.
    const boundary = (nodes: ReturnType<typeof fourGpuNode>[], asked = 48) => {
      const e = entry({ name: 'wide', k: 4, max: 48, remainingSeconds: 36_000, asked });
      e.model = oneScaleModel(4, { 4: 400, 5: 330, 6: 420, 7: 500, 8: 580 });
      return decideRebalance({ jobs: [e], capacity: { nodes }, config, now: NOW });
    };
    const plans = boundary([fourGpuNode('n1', 4), fourGpuNode('n2', 0), fourGpuNode('n3', 0)]);
    assert.deepEqual(sizes(plans), { wide: 8 });
    assert.match(
      told(plans[0]),
      /growth rule: seen at one size only: one probe worker at a time, but 4 to fill the node the first one opens/,
    );
    // Room for two only on the new node: 4 -> 6 (+5%) is the best that fits.
    assert.deepEqual(sizes(boundary([fourGpuNode('n1', 4), fourGpuNode('n2', 2)])), { wide: 6 });
    // Never past the size its user asked for; at that size, one worker at a time (here: none, it is slower).
    const empty = () => [fourGpuNode('n1', 4), fourGpuNode('n2', 0), fourGpuNode('n3', 0)];
    assert.deepEqual(sizes(boundary(empty(), 6)), { wide: 6 });
    assert.deepEqual(boundary(empty(), 4), []);
    // Inside its node the probe stays one worker.
    const inside = entry({ name: 'inside', k: 3, max: 48, remainingSeconds: 36_000 });
    inside.model = oneScaleModel(3, { 3: 300, 4: 400, 5: 330, 6: 420, 7: 500 });
    const within = decideRebalance({
      jobs: [inside],
      capacity: { nodes: [fourGpuNode('n1', 3), fourGpuNode('n2', 0)] },
      config,
      now: NOW,
    });
    assert.deepEqual(sizes(within), { inside: 4 });
  });

  it('is probed into idle GPUs on its optimistic prediction when the mean says no, below its asked size only', () => {
    // Priors put two nodes 25% below one: the mean never grows it; off the observed size the spread is unbounded.
    const stuck = (asked: number, nodes = [fourGpuNode('n1', 4), fourGpuNode('n2', 0)]) => {
      const e = entry({ name: 'stuck', k: 4, max: 48, remainingSeconds: 36_000, asked });
      e.model = oneScaleModel(4, { 4: 400, 5: 300, 6: 300, 7: 300, 8: 300 });
      return decideRebalance({ jobs: [e], capacity: { nodes }, config, now: NOW });
    };
    const plans = stuck(48);
    assert.deepEqual(sizes(plans), { stuck: 8 });
    // At best linear (400 -> 800), and the mean is said too.
    assert.match(
      told(plans[0]),
      /^4 -> 8 workers: \+4 probe from idle capacity: .*; at best \+100\.0%; at best 400 -> 800 samples\/s \(\+100\.0%\); on the mean 400 -> 300/,
    );
    assert.match(told(plans[0]), /probe from idle capacity: seen at one size/);
    // At its asked size, no: the user's size is the evidence that it was meant to span more.
    assert.deepEqual(stuck(4), []);
    // No idle GPU, no probe.
    assert.deepEqual(stuck(48, [fourGpuNode('n1', 4)]), []);
    // Sure of itself (1% spread) that 8 workers add about 1%: even at best below the hysteresis, no probe.
    const sure = entry({ name: 'sure', k: 4, max: 48, remainingSeconds: 36_000, asked: 48 });
    sure.model = {
      sampleCount: 3,
      distinctScales: 1,
      predict(p: Placement) {
        const stepTime = (p.replicas * p.localBatchSize) / 400;
        return { stepTime, stdev: p.replicas === 4 ? 0 : 0.01 * stepTime, throughput: 400 };
      },
    };
    const nodes = [fourGpuNode('n1', 4), fourGpuNode('n2', 0)];
    assert.deepEqual(decideRebalance({ jobs: [sure], capacity: { nodes }, config, now: NOW }), []);
  });

  it('measured at several sizes and unchanged for 30 min beside idle GPUs, is probed on its optimistic prediction again', () => {
    // Its fit says 9-12 workers add nothing (measured slower there once, given back); 30% spread off its size.
    const settled = (
      lastActionAt: number | undefined,
      opts: { spread?: number; scales?: number; table?: Record<number, number>; idleGpus?: number } = {},
    ) => {
      const e = entry({ name: 'settled', k: 8, max: 48, remainingSeconds: 36_000, lastActionAt, asked: 8 });
      const table = opts.table ?? { 7: 700, 8: 800, 9: 790, 10: 790, 11: 790, 12: 790 };
      const spread = opts.spread ?? 0.3;
      e.model = {
        sampleCount: 30,
        distinctScales: opts.scales ?? 4,
        predict(p: Placement) {
          const throughput = table[p.replicas] ?? 1;
          const stepTime = (p.replicas * p.localBatchSize) / throughput;
          return { stepTime, stdev: p.replicas === 8 ? 0 : spread * stepTime, throughput };
        },
      };
      const nodes = [fourGpuNode('n1', 4), fourGpuNode('n2', 4), fourGpuNode('n3', 4 - (opts.idleGpus ?? 4))];
      return decideRebalance({ jobs: [e], capacity: { nodes }, config, now: NOW });
    };
    const plans = settled(NOW - 1800);
    assert.deepEqual(sizes(plans), { settled: 12 });
    assert.match(
      told(plans[0]),
      /^8 -> 12 workers: \+4 probe from idle capacity: .*; at best \+[0-9.]+%; at best 800 -> [0-9]+ samples\/s/,
    );
    assert.match(told(plans[0]), /on the mean 800 -> 790/);
    assert.match(told(plans[0]), /probe from idle capacity: unchanged for 30/);
    // Changed less than 30 min ago, or never changed by trainscaler: its fit decides, and it says no.
    assert.deepEqual(settled(NOW - 1799), []);
    assert.deepEqual(settled(undefined), []);
    // No idle GPU, no probe; sure of itself (1% spread), even at best below the hysteresis, no probe.
    assert.deepEqual(settled(NOW - 7200, { idleGpus: 0 }), []);
    assert.deepEqual(settled(NOW - 7200, { spread: 0.01 }), []);
    // Seen at one size, at the size its user asked for: the one-size rule holds however long it has waited.
    assert.deepEqual(settled(NOW - 7200, { scales: 1 }), []);
    // Its optimistic curve bends: the step that gains most (10: 800 -> 1000, at most linear), not the largest
    // that merely beats its size (12: +3.6% at best, under the hysteresis).
    const bent = { 7: 700, 8: 800, 9: 790, 10: 800, 11: 600, 12: 580 };
    assert.deepEqual(sizes(settled(NOW - 7200, { table: bent })), { settled: 10 });
    // Room for one worker only, and at best it adds 3.6%: under the hysteresis, no probe.
    const dip = { ...bent, 9: 580 };
    assert.deepEqual(settled(NOW - 7200, { table: dip, idleGpus: 1 }), []);
  });

  it('takes a probe worker from a job far from its end when none is idle', () => {
    const far = entry({ name: 'far', k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 36_000 });
    const plans = decideRebalance({ jobs: [fresh(1), far], capacity: capacity(6, 6), config, now: NOW });
    assert.deepEqual(sizes(plans), { far: 3, fresh: 3 });
  });

  it('with several scales observed, an unbounded spread argues for growth into idle GPUs on the mean, not for idling', () => {
    const plans = decideRebalance({ jobs: [fresh(3)], capacity: capacity(2, 5), config, now: NOW });
    assert.deepEqual(sizes(plans), { fresh: 4 });
    assert.match(
      told(plans[0]),
      /^2 -> 4 workers: \+2 from idle capacity; predicted \+80\.0%; predicted 200 -> 360 samples\/s \(\+80\.0%\)/,
    );
    // From another job, the cautious prediction decides: it sees no gain, so nothing moves.
    const far = entry({ name: 'far', k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 36_000 });
    assert.deepEqual(
      decideRebalance({ jobs: [fresh(3), far], capacity: capacity(6, 6), config, now: NOW }),
      [],
    );
    // No probe where the mean itself says the worker adds nothing, or where no GPU is idle.
    const flat = entry({ name: 'fresh', k: 2 });
    flat.model = oneScaleModel(2, { 2: 200, 3: 200, 4: 200 }, 3);
    assert.deepEqual(decideRebalance({ jobs: [flat], capacity: capacity(2, 5), config, now: NOW }), []);
    assert.deepEqual(decideRebalance({ jobs: [fresh(3)], capacity: capacity(2, 2), config, now: NOW }), []);
  });
});

describe('decideRebalance: a queued job valued from its profile', () => {
  // Earlier runs of the signature: linear at 100 samples/s per worker.
  const profileModel = tableModel(
    Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, 100 * (i + 1)])),
  );
  const queuedWith = (targetSamples: number) => {
    const job = view({ name: 'queued' }, { replicas: 4 });
    job.targetSamples = targetSamples;
    job.state.lastActionAt = NOW - 10;
    const demand: PendingDemand = {
      job,
      demand: ONE_GPU,
      pods: 4,
      role: 'Worker',
      placed: 0,
      model: profileModel,
    };
    const slot: RebalanceJob = {
      job,
      model: undefined,
      current: { replicas: 4, nodes: 1, localBatchSize: 32 },
    };
    return { demand, slot };
  };
  // A running job with an hour left at 4 workers: its 4th worker is worth 25% of its speed per hour.
  const running = entry({ name: 'running', k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 3600 });
  const plan = (targetSamples: number) => {
    const q = queuedWith(targetSamples);
    return decideRebalance({
      jobs: [running, q.slot],
      pending: [q.demand],
      capacity: capacity(4, 4),
      config,
      now: NOW,
    });
  };

  it('starts a short job at once, taking from a running job', () => {
    // 36,000 samples at 100/s per worker: 6 min on one worker, each worker worth 10 per hour, far above
    // what running's 4th, 3rd and 2nd workers lose (0.25, 0.33, 0.5 + 5%); running keeps its last.
    assert.deepEqual(sizes(plan(36_000)), { running: 1, queued: 3 });
  });

  it('lets a long job wait rather than slow a job that finishes sooner', () => {
    // 36,000,000 samples: 100 h on one worker, its first worker worth 0.01^0.5 = 0.1 < 0.25 + 5%.
    assert.deepEqual(plan(36_000_000), []);
    // 10 h: worth 0.1^0.5 = 0.32, more than the running job's 4th worker loses; it starts with one.
    assert.deepEqual(sizes(plan(3_600_000)), { running: 3, queued: 1 });
  });
});

describe('decideRebalance: Kueue-managed jobs are left to Kueue', () => {
  const kueued = (r: RebalanceJob): RebalanceJob => ({ ...r, job: { ...r.job, kueue: 'label q' } });

  it('gives idle GPUs to a job only when Kueue does not manage it', () => {
    const jobs = [{ name: 'small', k: 2, table: SMALL }];
    const input = { jobs: jobs.map(entry), capacity: capacity(2, 4), config, now: NOW };
    assert.deepEqual(sizes(decideRebalance(input)), { small: 4 });
    assert.deepEqual(decideRebalance({ ...input, jobs: input.jobs.map(kueued) }), []);
  });

  it("holds the room of a Kueue-managed job's waiting pods: idle growth does not take it", () => {
    const input = {
      jobs: [entry({ name: 'small', k: 2, table: SMALL })],
      capacity: capacity(2, 4),
      config,
      now: NOW,
    };
    const waiting = pending(0, 2);
    assert.deepEqual(sizes(decideRebalance(input)), { small: 4 });
    assert.deepEqual(
      decideRebalance({ ...input, pending: [{ ...waiting, job: { ...waiting.job, kueue: 'label q' } }] }),
      [],
    );
  });

  it('does not shrink a Kueue-managed job for pending work, nor shrink others for a Kueue job waiting', () => {
    const low: JobSpec = { name: 'l1', k: 4, min: 2, priority: 1, table: { 2: 200, 3: 300, 4: 400 } };
    const input = {
      jobs: [entry(low)],
      capacity: capacity(4, 4),
      config,
      now: NOW,
      pending: [pending(101, 2)],
    };
    assert.deepEqual(sizes(decideRebalance(input)), { l1: 2 });
    assert.deepEqual(decideRebalance({ ...input, jobs: input.jobs.map(kueued) }), []);
    const waiting = pending(101, 2);
    assert.deepEqual(
      decideRebalance({ ...input, pending: [{ ...waiting, job: { ...waiting.job, kueue: 'label q' } }] }),
      [],
    );
  });
});

describe('decideRebalance: workers that slow their job down', () => {
  // 5 workers span a second node in this table: slower than 4, and 3 slower still.
  const slowed = { name: 'slowed', k: 5, table: { 3: 300, 4: 420, 5: 380 } };

  it('gives back a worker that makes its job slower, even with no one to take it', () => {
    const plans = rebalance([slowed]);
    assert.deepEqual(sizes(plans), { slowed: 4 });
    assert.match(told(plans[0]), /-1 its last worker slows it down/);
  });

  it('keeps a worker that adds speed, one seen at one size only, and one in cool-down', () => {
    assert.deepEqual(sizes(rebalance([{ ...slowed, table: { 4: 380, 5: 420 } }])), {});
    const oneScale = entry(slowed);
    oneScale.model = { ...tableModel(slowed.table), distinctScales: 1 };
    const plans = decideRebalance({ jobs: [oneScale], capacity: capacity(5, 5), config, now: NOW });
    assert.deepEqual(sizes(plans), {});
    assert.deepEqual(sizes(rebalance([{ ...slowed, lastActionAt: NOW - 10 }])), {});
  });

  it('does not shrink a job about to end: the restart would cost more than it saves', () => {
    assert.deepEqual(sizes(rebalance([{ ...slowed, remainingSeconds: 300 }])), {});
  });
});

describe('decideRebalance: a job at its asked size on one node of many keeps its workers among equals', () => {
  const LINEAR = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [i + 1, 100 * (i + 1)]));
  const LINEAR_MODEL = tableModel(LINEAR);
  /** `nodeCount` 8-GPU nodes, the first `used` GPUs taken by 1-GPU pods. */
  const nodes = (nodeCount: number, used: number): ClusterCapacity => ({
    nodes: Array.from({ length: nodeCount }, (_, i) => {
      const taken = Math.max(0, Math.min(8, used - 8 * i));
      return {
        name: `n${i + 1}`,
        allocatable: { cpuMillis: 8000, memoryBytes: 8 * GiB, gpus: 8 },
        allocated: { cpuMillis: taken * 1000, memoryBytes: taken * GiB, gpus: taken },
        schedulable: true,
      };
    }),
  });
  const queued = () => {
    const job = view({ name: 'queued' }, { replicas: 4 });
    job.state.lastActionAt = NOW - 10;
    const slot: RebalanceJob = {
      job,
      model: undefined,
      current: { replicas: 4, nodes: 1, localBatchSize: 32 },
    };
    const demand: PendingDemand = { job, demand: ONE_GPU, pods: 4, role: 'Worker', placed: 0 };
    return { slot, demand };
  };
  const share = (donor: JobSpec, cap = nodes(2, 16)) => {
    const q = queued();
    return decideRebalance({
      jobs: [entry(donor), q.slot],
      pending: [q.demand],
      capacity: cap,
      config,
      now: NOW,
    });
  };
  // Far from its end, so that any queued job is worth more than its last worker.
  const donor = (extra: Partial<JobSpec> = {}): JobSpec => ({
    name: 'donor',
    k: 8,
    table: LINEAR,
    remainingSeconds: 36_000,
    ...extra,
  });

  it('is not shrunk for a queued job of its priority', () => {
    assert.deepEqual(share(donor()), []);
    assert.deepEqual(share(donor({ asked: 8, lastActionAt: NOW - 3600 })), []);
  });

  it('gives the workers it has above its asked size, and only those', () => {
    assert.deepEqual(sizes(share(donor({ asked: 6, lastActionAt: NOW - 3600 }))), { donor: 6, queued: 2 });
  });

  it('gives when its workers already span nodes, when it is alone on the cluster, or when its size is unknown', () => {
    assert.deepEqual(sizes(share(donor({ nodes: 2 }))), { donor: 4 });
    assert.deepEqual(sizes(share(donor(), capacity(8, 8))), { donor: 4 });
    // Written by a version that did not record the user's size.
    assert.deepEqual(sizes(share(donor({ lastActionAt: NOW - 3600 }))), { donor: 4 });
  });

  it('gives a worker that adds less than the hysteresis', () => {
    const flat = { ...LINEAR, 8: 710 }; // the 8th worker adds +1.4%
    assert.deepEqual(sizes(share(donor({ table: flat }))).donor, 7);
  });

  it('lends to a queued job of its priority predicted to finish within two cool-downs and half its remaining time', () => {
    // The borrower's profile: 100 samples/s per worker, so N samples run N / 100 s on its first worker.
    const lend = (targetSamples: number | undefined, remainingSeconds = 36_000, withProfile = true) => {
      const q = queued();
      if (targetSamples !== undefined) q.slot.job.targetSamples = targetSamples;
      return decideRebalance({
        jobs: [entry(donor({ remainingSeconds })), q.slot],
        pending: [withProfile ? { ...q.demand, model: LINEAR_MODEL } : q.demand],
        capacity: nodes(2, 16),
        config,
        now: NOW,
      });
    };
    // 6 min: the GPU comes back long before the donor's 10 h end. The borrower gets the 4 workers it asked
    // for, so only the donor changes.
    assert.deepEqual(sizes(lend(36_000)), { donor: 4 });
    assert.match(told(lend(36_000).find((p) => p.ref.name === 'donor')), /to ml\/queued, queued/);
    // Exactly two cool-downs (600 s): lent; a second more: kept, though its first worker is worth far more
    // (6 per hour) than the donor's last loses (0.0125 + 5%).
    assert.equal(sizes(lend(60_000)).donor, 4);
    assert.deepEqual(lend(60_100), []);
    // A donor with 1,000 s left lends to a borrower done in 500 s, not in 501.
    assert.equal(sizes(lend(50_000, 1_000)).donor, 4);
    assert.deepEqual(lend(50_100, 1_000), []);
    // Without a target or a profile its run time is unknown: kept.
    assert.deepEqual(lend(undefined), []);
    assert.deepEqual(lend(36_000, 36_000, false), []);
  });

  it('still gives to a queued job of higher priority', () => {
    const q = queued();
    q.slot.job.priority = 10;
    const plans = decideRebalance({
      jobs: [entry(donor()), q.slot],
      pending: [q.demand],
      capacity: nodes(2, 16),
      config,
      now: NOW,
    });
    assert.equal(sizes(plans).donor, 4);
  });

  it('is not reclaimed from for a running job of its priority', () => {
    // 25% x 0.1 urgency (100 h left) against 10% x 1.41 (half an hour).
    const far = donor({ k: 4, table: { 3: 300, 4: 400 }, remainingSeconds: 360_000 });
    const near = { name: 'near', k: 4, table: { 4: 400, 5: 440 }, remainingSeconds: 1_800, nodes: 2 };
    const run = (d: JobSpec) =>
      decideRebalance({ jobs: [entry(d), entry(near)], capacity: nodes(2, 16), config, now: NOW });
    assert.deepEqual(run(far), []);
    assert.deepEqual(sizes(run({ ...far, nodes: 2 })), { donor: 3, near: 5 });
  });
});

describe('decideRebalance: sizes are predicted on the nodes the job would really span (workerNodes)', () => {
  // yolov3-like: fast on one node, slow across two (the inter-node all-reduce), exact (stdev 0), measured.
  const ONE_NODE: Record<number, number> = { 1: 24, 2: 40, 3: 54, 4: 72 };
  const TWO_NODES: Record<number, number> = { 2: 26, 3: 37, 4: 41 };
  const nodeAware: ThroughputModel = {
    sampleCount: 6,
    distinctScales: 3,
    predict(p: Placement) {
      const tp = (p.nodes > 1 ? TWO_NODES[p.replicas] : ONE_NODE[p.replicas]) ?? 1;
      return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
    },
  };
  /** 4-GPU nodes a and b with `freeA` and `freeB` GPUs free. */
  const node = (name: string, free: number) => ({
    name,
    allocatable: { cpuMillis: 4000, memoryBytes: 4 * GiB, gpus: 4 },
    allocated: { cpuMillis: (4 - free) * 1000, memoryBytes: (4 - free) * GiB, gpus: 4 - free },
    schedulable: true,
  });
  const twoNodes = (freeA: number, freeB: number): ClusterCapacity => ({
    nodes: [node('a', freeA), node('b', freeB)],
  });
  const job = (k: number, workerNodes: string[] | undefined): RebalanceJob => {
    const e = entry({ name: 'yolo', k, max: 8 });
    const nodes = workerNodes ? new Set(workerNodes).size : 1;
    return {
      ...e,
      model: nodeAware,
      current: { ...e.current, nodes },
      remainingSeconds: 36_000,
      ...(workerNodes ? { workerNodes } : {}),
    };
  };
  const run = (j: RebalanceJob, cap: ClusterCapacity) =>
    sizes(decideRebalance({ jobs: [j], capacity: cap, config, now: NOW }));

  it('gives back a last worker alone on a second node: one worker fewer runs on one node, faster', () => {
    assert.deepEqual(run(job(4, ['a', 'a', 'a', 'b']), twoNodes(0, 3)), { yolo: 3 });
  });

  it('keeps it when the shrink would not leave one node (the lone worker is not the last index) or the layout is unknown', () => {
    assert.deepEqual(run(job(4, ['b', 'a', 'a', 'a']), twoNodes(0, 3)), {});
    const unknown = job(4, undefined);
    unknown.current = { ...unknown.current, nodes: 2 };
    assert.deepEqual(run(unknown, twoNodes(0, 3)), {});
  });

  it('does not grow into idle GPUs on another node when its own node is full and two nodes are no faster', () => {
    // 2 on node a (full): 3 or 4 workers would span a and b, 37 or 41 samples/s against 40 now.
    assert.deepEqual(run(job(2, ['a', 'a']), twoNodes(0, 4)), {});
  });

  it('grows when its own node has the room', () => {
    assert.deepEqual(run(job(2, ['a', 'a']), twoNodes(2, 4)), { yolo: 4 });
  });

  it('seen at one size on a node another job fills, may fill the node its next worker opens', () => {
    // 3 on node a (full): a 4th alone spans two nodes and is slower; filling node b is faster.
    const table: Record<number, number> = { 3: 54, 4: 41, 5: 55, 6: 68, 7: 80 };
    const probed = job(3, ['a', 'a', 'a']);
    // Below the size its user asked for: the node fill applies only there.
    probed.job.state.askedWorkers = 8;
    probed.model = {
      sampleCount: 2,
      distinctScales: 1,
      predict(p: Placement) {
        const tp = (p.nodes > 1 || p.replicas <= 3 ? table[p.replicas] : undefined) ?? 1;
        return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
      },
    };
    assert.deepEqual(run(probed, twoNodes(0, 4)), { yolo: 7 });
  });

  describe('a growth steers its new workers to the node it runs on with the most room', () => {
    // Faster with every worker while it spans at most two nodes; a third node costs half.
    const twoNodeModel: ThroughputModel = {
      sampleCount: 6,
      distinctScales: 3,
      predict(p: Placement) {
        const tp = (p.nodes > 2 ? 5 : 10) * p.replicas;
        return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
      },
    };
    const growing = (workerNodes: string[]) => ({
      ...job(workerNodes.length, workerNodes),
      model: twoNodeModel,
    });
    const preference = (plans: Plan[]) =>
      plans.flatMap((p) => p.changes.flatMap((c) => (c.kind === 'prefer-node' ? [c.node] : [])));
    const plan = (j: RebalanceJob, cap: ClusterCapacity) =>
      decideRebalance({ jobs: [j], capacity: cap, config, now: NOW });

    it("worker-0's node full: the other node it runs on, not a new one", () => {
      const cap = { nodes: [node('a', 0), node('b', 2), node('c', 4)] };
      const plans = plan(growing(['a', 'a', 'b']), cap);
      assert.deepEqual(sizes(plans), { yolo: 5 });
      assert.deepEqual(preference(plans), ['b']);
      assert.match(told(plans[0]), /new Worker pods prefer node b, the one it runs on with the most room/);
    });

    it("worker-0's node among equals", () => {
      const cap = { nodes: [node('a', 1), node('b', 1), node('c', 4)] };
      assert.deepEqual(preference(plan(growing(['a', 'b']), cap)), ['a']);
    });

    it('no preference when its nodes have no room, or on a shrink', () => {
      const full = { nodes: [node('a', 0), node('b', 0), node('c', 4)] };
      const grown = plan(growing(['a', 'b']), full);
      assert.deepEqual(sizes(grown), { yolo: 6 }, 'onto node c');
      assert.deepEqual(preference(grown), []);
      const shrunk = plan(job(4, ['a', 'a', 'a', 'b']), twoNodes(0, 3));
      assert.deepEqual(sizes(shrunk), { yolo: 3 });
      assert.deepEqual(preference(shrunk), []);
    });
  });
});

describe('decideRebalance: no thrash where a rescale is dear', () => {
  // small: 2 -> 3 +45%, -> 4 +13.8%, -> 5 +3%. Its costs are the config's (50 s up, 30 s down): a round trip of
  // 80 s, so a shrunk job waits 800 s before it grows again.
  const shrunkAt = (at: number, from = 3, to = 2): RebalanceJob => {
    const e = entry({ name: 'small', k: 2, table: SMALL, lastActionAt: at });
    e.job.state.lastRescale = { at, from, to };
    return e;
  };
  const grow = (e: RebalanceJob, free: number, overrides: Partial<RebalanceInput> = {}) =>
    sizes(decideRebalance({ jobs: [e], capacity: capacity(2, 2 + free), config, now: NOW, ...overrides }));

  it('a job shrunk does not grow back within ten round trips of its rescale cost, then does', () => {
    assert.deepEqual(grow(shrunkAt(NOW - 400), 3), {});
    assert.deepEqual(grow(shrunkAt(NOW - 799), 3), {});
    assert.deepEqual(grow(shrunkAt(NOW - 801), 3), { small: 5 });
  });

  it('the hold scales with the job’s own measured costs', () => {
    const cheap = shrunkAt(NOW - 400);
    cheap.job.state.rescaleCost = { upPause: 3, down: 4, measuredFor: NOW - 400 };
    assert.deepEqual(grow(cheap, 3), { small: 5 });
  });

  it('only regrowth waits: a job grown keeps climbing after the cool-down', () => {
    assert.deepEqual(grow(shrunkAt(NOW - 400, 1, 2), 3), { small: 5 });
  });

  it('keeps idle GPUs for the jobs arriving within the hold, judged on the last hour of arrivals', () => {
    const fresh = entry({ name: 'small', k: 2, table: SMALL });
    // 9 GPUs asked in the last hour: 9 / 3600 s x the 800 s hold = 2 GPUs kept.
    assert.deepEqual(grow(fresh, 3, { arrivals: [{ at: NOW - 600, gpus: 9 }] }), { small: 3 });
    assert.deepEqual(grow(fresh, 4, { arrivals: [{ at: NOW - 600, gpus: 9 }] }), { small: 4 });
    // Arrivals older than the hour, or none: every idle GPU may be grown into.
    assert.deepEqual(grow(fresh, 3, { arrivals: [{ at: NOW - 3601, gpus: 9 }] }), { small: 5 });
    assert.deepEqual(grow(fresh, 3), { small: 5 });
    // Where its rescales are cheap (a 70 s hold, inside the 300 s cool-down) no room is kept.
    const cheap = entry({ name: 'small', k: 2, table: SMALL });
    cheap.job.state.rescaleCost = { upPause: 3, down: 4 };
    assert.deepEqual(grow(cheap, 3, { arrivals: [{ at: NOW - 600, gpus: 90 }] }), { small: 5 });
  });
});
