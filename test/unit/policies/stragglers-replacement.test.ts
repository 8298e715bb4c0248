// When a straggler is replaced: only the job's bottleneck, only when the predicted gain over the remaining run
// beats the replacement's cost, and not again within a growing back-off when its replacement is as slow.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JobSnapshot } from '../../../lib/actuator.js';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import { decideRuntime } from '../../../lib/decisions/runtime-review.js';
import {
  BOTTLENECK_NOISE_MULTIPLE,
  bottleneckTolerance,
  decideOnStragglers,
  detectStragglers,
  parseStragglerReplacements,
  replacementCost,
  STRAGGLER_BACKOFF_MAX_SECONDS,
  STRAGGLER_QUERY_STEP_SECONDS,
  STRAGGLER_REPLACEMENT_MEMORY_SECONDS,
  type StragglerInput,
  stragglerBackoffSeconds,
  withStragglerReplacement,
} from '../../../lib/policies/stragglers.js';
import { mulberry32, uniform } from '../../../lib/sim/prng.js';
import type { JobAutoscalerState, JobView, Plan, PodView, WorkerStepTimes } from '../../../lib/types.js';

/** The whole account of a plan, as it read before reasons had a one-line summary: its details, else its reason. */
function full(plan: Plan): string {
  return (plan.details ?? [plan.reason]).join('; ');
}

const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG };
const STEP = STRAGGLER_QUERY_STEP_SECONDS;
/** The default replacement: 3.6 s pause + 20 s pod start + 3.3 s join pause, charged twice (gainOverCostFactor). */
const DEFAULT_COST = 3.6 + 20 + 3.3;

/** One point every 15 s; `at(w, i)` is worker w's step time at point i; `drop` leaves points out. */
function series(
  workers: number,
  n: number,
  at: (w: number, i: number) => number,
  drop: (w: number, i: number) => boolean = () => false,
): WorkerStepTimes[] {
  return Array.from({ length: workers }, (_, w) => ({
    worker: w,
    pod: `worker-${w}`,
    samples: Array.from({ length: n }, (_, i) => ({ at: i * STEP, stepTime: at(w, i) })).filter(
      (_, i) => !drop(w, i),
    ),
  }));
}

/** Uniform +-`spread` noise per worker and point from a fixed seed, none on the last of `n` points. */
function seededNoise(n: number, spread: number): (w: number, i: number) => number {
  const prng = mulberry32(7);
  const table = Array.from({ length: 6 }, () =>
    Array.from({ length: n }, () => uniform(prng, 1 - spread, 1 + spread)),
  );
  return (w, i) => (i === n - 1 ? 1 : (table[w]?.[i] ?? 1));
}

/** +-2% in three phases, each worker shifted by one: the noise never cancels out across workers. */
const noisy = (w: number, i: number) => 1 + 0.02 * (((i + w) % 3) - 1);

function job(state: Partial<JobAutoscalerState> = {}, extra: Partial<JobView> = {}): JobView {
  const resources = { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3, gpus: 1 };
  return {
    ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'resnet' },
    uid: 'uid',
    resourceVersion: '1',
    priority: 0,
    elastic: true,
    signature: 'sig',
    roles: [
      {
        role: 'Worker',
        replicas: 6,
        minReplicas: 6,
        maxReplicas: 6,
        containerName: 'pytorch',
        containerIndex: 0,
        requests: resources,
        limits: resources,
      },
    ],
    managed: true,
    state: { oomCount: 0, paused: false, ...state },
    ...extra,
  };
}

const pods = (count = 6): PodView[] =>
  Array.from({ length: count }, (_, i) => ({
    name: `worker-${i}`,
    namespace: 'ml',
    role: 'Worker' as const,
    index: i,
    phase: 'Running' as const,
    nodeName: `node-${i}`,
    restartCount: 0,
    requests: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
    limits: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
  }));

function decide(s: WorkerStepTimes[], n: number, extra: Partial<StragglerInput> = {}): Plan {
  return decideOnStragglers({
    job: job(),
    series: s,
    pods: pods(s.length),
    config,
    now: (n - 1) * STEP,
    ...extra,
  });
}

const evicted = (plan: Plan) => plan.changes.filter((c) => c.kind === 'evict-pod').map((c) => c.pod);

describe('detectStragglers: what the replacement rules read', () => {
  it('reports each worker’s step time at the latest instant compared, none for a worker absent then', () => {
    const s = series(
      6,
      40,
      (w, i) => (w === 3 && i >= 34 ? 1.5 : 1) * (w === 5 ? 1.1 : 1),
      (w, i) => w === 4 && i === 39,
    );
    const report = detectStragglers(s, config, 39 * STEP);
    assert.deepEqual(
      report.workers.map((w) => w.stepTime),
      [1, 1, 1, 1.5, undefined, 1.1],
    );
  });

  it('measures the noise of a worker’s pace from its normal points (a robust relative deviation)', () => {
    assert.equal(
      detectStragglers(
        series(6, 40, () => 1),
        config,
        39 * STEP,
      ).paceNoise,
      0,
    );
    // Paces cycle over 1, 1.0204, 1.0408 (step times 0.98, 1, 1.02 over the fast pace 0.98): MAD 0.0204
    // around a median of 1.0204, x1.4826.
    const report = detectStragglers(series(6, 40, noisy), config, 39 * STEP);
    assert.ok(Math.abs(report.paceNoise - (1.4826 * 0.02) / 1) < 1e-3, String(report.paceNoise));
    assert.equal(bottleneckTolerance(report), BOTTLENECK_NOISE_MULTIPLE * report.paceNoise);
    // Workers without eight normal points yet have no baseline and no say.
    assert.equal(detectStragglers(series(6, 7, noisy), config, 6 * STEP).paceNoise, 0);
  });

  it('takes the median over workers, so that one erratic worker does not widen the tolerance', () => {
    const oneErratic = series(6, 60, (w, i) => (w === 5 ? 1 + 0.08 * ((i % 3) - 1) : noisy(w, i)));
    const report = detectStragglers(oneErratic, config, 59 * STEP);
    assert.ok(report.paceNoise < 0.035, String(report.paceNoise));
  });
});

describe('decideOnStragglers: only the job’s bottleneck is replaced', () => {
  // 5/5 split: workers 3-5 usually 2x the others (persistently slow), the job steps at 2.
  const split = (w: number) => (w >= 3 ? 2 : 1);

  it('reports a fast worker slowing 1.5x its own pace, still faster than the job’s bottleneck', () => {
    const plan = decide(
      series(6, 40, (w, i) => split(w) * (w === 1 && i >= 34 ? 1.5 : 1)),
      40,
    );
    assert.deepEqual(plan.changes, []);
    assert.match(
      full(plan),
      /worker-1 \(worker 1\) straggling .*; reported, not evicting: not the job's bottleneck: its step time is x0\.75 the slowest worker's \(within 0%, the measurement's noise, it would count\); the job steps at the pace of its slowest worker, so replacing this one cannot speed it up/,
    );
  });

  it('replaces the same worker once it is slower than the bottleneck', () => {
    const plan = decide(
      series(6, 40, (w, i) => split(w) * (w === 1 && i >= 34 ? 2.5 : 1)),
      40,
    );
    assert.deepEqual(evicted(plan), ['worker-1']);
    assert.match(
      full(plan),
      /worker-1 .*; the job's bottleneck, and predicted gain 12\.0 min over remaining/,
    );
  });

  it('counts a worker within the measurement’s noise of the slowest as the bottleneck, not beyond it', () => {
    // +-3% seeded noise on every point but the last (so that the last instant compares exact figures); worker
    // 5 persistently 1.6x; worker 2 slows down to `by` for the last 6 points.
    const noise = seededNoise(40, 0.03);
    const job = (by: number) =>
      series(6, 40, (w, i) => noise(w, i) * (w === 5 ? 1.6 : 1) * (w === 2 && i >= 34 ? by : 1));
    const tolerance = bottleneckTolerance(detectStragglers(job(1), config, 39 * STEP));
    assert.ok(tolerance > 0.02 && tolerance < 0.1, String(tolerance));
    const edge = 1.6 / (1 + tolerance);
    const close = decide(job(edge * 1.002), 40);
    assert.doesNotMatch(full(close), /not the job's bottleneck/);
    // It bounds the job with worker 5: replacing it alone would leave the job at worker 5's pace.
    assert.match(full(close), /worker-2 .*reported, not evicting: predicted gain 0 s .* does not beat/);
    const far = decide(job(edge * 0.998), 40);
    assert.match(
      full(far),
      /worker-2 .*not the job's bottleneck: its step time is x0\.9\d the slowest worker's \(within [1-9]\.\d%/,
    );
    // The same slowdown on a job without noise is outside a zero tolerance.
    const exact = decide(
      series(6, 40, (w, i) => (w === 5 ? 1.6 : 1) * (w === 2 && i >= 34 ? edge * 1.002 : 1)),
      40,
    );
    assert.match(full(exact), /worker-2 .*not the job's bottleneck: its step time is x0\.9\d .*within 0%/);
  });

  it('reports a straggler absent at the latest instant: it is not known to bound the job', () => {
    const s = series(
      6,
      40,
      (w, i) => (w === 2 && i >= 30 ? 1.5 : 1),
      (w, i) => w === 2 && i === 39,
    );
    const plan = decide(s, 40);
    assert.deepEqual(plan.changes, []);
    assert.match(full(plan), /worker-2 .*no step time at the latest instant, so not known to bound the job/);
  });
});

describe('decideOnStragglers: the gain over the remaining run must beat the replacement’s cost', () => {
  // Worker 2 at 1.5x: the job's step time falls from 1.5 to 1, a third of the remaining run saved.
  const oneSlow = series(6, 40, (w, i) => (w === 2 && i >= 34 ? 1.5 : 1));

  it('replaces when a third of the remaining run beats twice the default cost, not when it does not', () => {
    const charged = 2 * DEFAULT_COST; // 53.8 s
    const below = decide(oneSlow, 40, { remainingSeconds: 3 * charged - 1 });
    assert.deepEqual(below.changes, []);
    assert.match(
      full(below),
      /worker-2 .*reported, not evicting: predicted gain 53 s over remaining ~2\.7 min/,
    );
    assert.match(
      full(below),
      /\(the job's step time x0\.67 of now with 1 bottleneck straggler back at usual pace\) does not beat 54 s = 2 x 1 x 27 s a replacement: pause 4 s \(default\) \+ start to first step 23 s \(default: pod start 20 s \+ join pause 3 s\)/,
    );
    const above = decide(oneSlow, 40, { remainingSeconds: 3 * charged + 1 });
    assert.deepEqual(evicted(above), ['worker-2']);
    assert.match(full(above), /predicted gain 54 s over remaining ~2\.7 min .* beats 54 s = 2 x 1 x/);
  });

  it('assumes an hour when the job does not declare what is left', () => {
    const plan = decide(oneSlow, 40);
    assert.deepEqual(evicted(plan), ['worker-2']);
    assert.match(full(plan), /predicted gain 20\.0 min over remaining ~60\.0 min \(unknown, assumed\)/);
  });

  it('charges the job’s measured cost: its shrink’s pause plus its last growth’s patch to first step', () => {
    const measured = job({ rescaleCost: { down: 10, upToFirstStep: 40 } });
    const cost = replacementCost(measured, config);
    assert.equal(cost.seconds, 50);
    assert.equal(
      cost.text,
      "50 s a replacement: pause 10 s (measured on this job) + start to first step 40 s (the job's last growth, patch to first step, measured)",
    );
    const at = (remainingSeconds: number) => decide(oneSlow, 40, { job: measured, remainingSeconds });
    assert.deepEqual(at(299).changes, []); // gain 99.7 s against 100 s
    assert.deepEqual(evicted(at(301)), ['worker-2']);
  });

  it('charges the configured defaults when nothing is measured, and the measured pause alone when only it is', () => {
    assert.equal(replacementCost(job(), config).seconds, DEFAULT_COST);
    const slowStart = { ...config, podStartSeconds: 100 };
    assert.equal(replacementCost(job(), slowStart).seconds, 3.6 + 100 + 3.3);
    assert.equal(replacementCost(job({ rescaleCost: { down: 10 } }), config).seconds, 10 + 20 + 3.3);
    assert.equal(replacementCost(job({ rescaleCost: { upPause: 1 } }), config).seconds, 3.6 + 20 + 1);
  });

  it('applies gainOverCostFactor as rescales do', () => {
    const once = { ...config, gainOverCostFactor: 1 };
    const plan = decideOnStragglers({
      job: job(),
      series: oneSlow,
      pods: pods(),
      config: once,
      now: 39 * STEP,
      remainingSeconds: 3 * DEFAULT_COST + 1,
    });
    assert.deepEqual(evicted(plan), ['worker-2']);
    assert.match(full(plan), /beats 27 s = 1 x 1 x/);
  });

  it('weighs two stragglers that bound the job together as one gain for two replacements', () => {
    const two = series(6, 40, (w, i) => ((w === 1 || w === 4) && i >= 34 ? 2 : 1));
    // Half the remaining run saved, against 2 x 2 replacements.
    const plan = decide(two, 40, { remainingSeconds: 8 * DEFAULT_COST + 2 });
    assert.deepEqual(evicted(plan), ['worker-1']);
    assert.match(full(plan), /with 2 bottleneck stragglers back at usual pace\) beats 108 s = 2 x 2 x/);
    assert.match(full(plan), /worker-4 .*left for a later decision \(one eviction at a time\)/);
    const short = decide(two, 40, { remainingSeconds: 8 * DEFAULT_COST - 2 });
    assert.deepEqual(short.changes, []);
    assert.match(full(short), /worker-1 .*does not beat .*; worker-4 .*does not beat/);
  });

  it('charges a worker back at its own usual pace when that is slower than the others', () => {
    // Worker 5 usually 1.3x the others, now 2.6x (2x its own): replaced, the job would step at 1.3.
    const s = series(6, 40, (w, i) => (w === 5 ? 1.3 : 1) * (w === 5 && i >= 34 ? 2 : 1));
    const plan = decide(s, 40);
    assert.match(full(plan), /the job's step time x0\.50 of now/);
  });
});

describe('decideOnStragglers: a slot whose replacement is as slow waits out a growing back-off', () => {
  // Worker 2 slow from point 40 (t=600) to the end (point 119, t=1785).
  const N = 120;
  const NOW = (N - 1) * STEP;
  const longSpell = series(6, N, (w, i) => (w === 2 && i >= 40 ? 1.5 : 1));
  const withHistory = (at: number, count: number, pod = 'worker-2') =>
    decide(longSpell, N, { job: job({ stragglerReplacements: [{ pod, at, count }] }) });

  it('does not replace it again before the back-off expires, and does after', () => {
    const held = withHistory(NOW - 1, 1);
    assert.deepEqual(held.changes, []);
    assert.match(
      full(held),
      /worker-2 .*reported, not evicting: its replacement of t=1784 is as slow \(straggling since t=600, before it\); after 1 such replacement it is not replaced again for 10\.0 min \(599 s more; the back-off doubles per replacement, at most 2\.0 h\)/,
    );
    assert.match(full(withHistory(NOW - 599, 1)), /\(1 s more;/);
    assert.deepEqual(evicted(withHistory(NOW - 600, 1)), ['worker-2']);
  });

  it('grows the back-off with each replacement that stayed slow', () => {
    assert.deepEqual(evicted(withHistory(NOW - 1000, 1)), ['worker-2']);
    const second = withHistory(NOW - 1000, 2);
    assert.deepEqual(second.changes, []);
    assert.match(
      full(second),
      /after 2 such replacements it is not replaced again for 20\.0 min \(200 s more/,
    );
  });

  it('treats the same slot straggling only after its replacement as a new spell', () => {
    assert.deepEqual(evicted(withHistory(599, 5)), ['worker-2']);
    // Straggling since the very instant of the replacement: the same spell.
    assert.deepEqual(withHistory(600, 5).changes, []);
  });

  it('keeps the back-off to the slot it was earned by', () => {
    assert.deepEqual(evicted(withHistory(NOW - 1, 3, 'worker-3')), ['worker-2']);
  });

  it('doubles from twice the straggler cool-down up to two hours', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 40].map((n) => stragglerBackoffSeconds(n, config)),
      [600, 600, 1200, 2400, 4800, 7200, 7200, 7200],
    );
    assert.equal(STRAGGLER_BACKOFF_MAX_SECONDS, 7200);
    const longCooldown = { ...config, cooldownSeconds: 400 };
    assert.equal(stragglerBackoffSeconds(1, longCooldown), 800);
  });
});

describe('withStragglerReplacement: the slots’ replacement history the writer keeps', () => {
  const base: JobAutoscalerState = { oomCount: 0, paused: false };
  const eviction = (pod: string, policy: Plan['policy'] = 'straggler'): Plan => ({
    ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'resnet' },
    policy,
    changes: [
      { kind: 'avoid-node', role: 'Worker', node: 'node-1' },
      { kind: 'evict-pod', pod },
    ],
    reason: '',
  });

  it('counts each replacement of a slot, and leaves other plans alone', () => {
    const once = withStragglerReplacement(base, eviction('worker-1'), 1000);
    assert.deepEqual(once.stragglerReplacements, [{ pod: 'worker-1', at: 1000, count: 1 }]);
    const twice = withStragglerReplacement(once, eviction('worker-1'), 2000);
    assert.deepEqual(twice.stragglerReplacements, [{ pod: 'worker-1', at: 2000, count: 2 }]);
    const other = withStragglerReplacement(twice, eviction('worker-3'), 2100);
    assert.deepEqual(other.stragglerReplacements, [
      { pod: 'worker-1', at: 2000, count: 2 },
      { pod: 'worker-3', at: 2100, count: 1 },
    ]);
    assert.equal(withStragglerReplacement(twice, eviction('worker-1', 'fault'), 3000), twice);
    const keep: Plan = { ...eviction('worker-1'), changes: [] };
    assert.equal(withStragglerReplacement(twice, keep, 3000), twice);
  });

  it('starts a slot’s count again, and forgets other slots, after four hours without a replacement', () => {
    const old: JobAutoscalerState = {
      ...base,
      stragglerReplacements: [
        { pod: 'worker-1', at: 0, count: 5 },
        { pod: 'worker-2', at: 1, count: 2 },
      ],
    };
    assert.equal(STRAGGLER_REPLACEMENT_MEMORY_SECONDS, 4 * 3600);
    const later = withStragglerReplacement(old, eviction('worker-1'), STRAGGLER_REPLACEMENT_MEMORY_SECONDS);
    assert.deepEqual(later.stragglerReplacements, [
      { pod: 'worker-2', at: 1, count: 2 },
      { pod: 'worker-1', at: STRAGGLER_REPLACEMENT_MEMORY_SECONDS, count: 1 },
    ]);
    const latest = withStragglerReplacement(
      old,
      eviction('worker-3'),
      STRAGGLER_REPLACEMENT_MEMORY_SECONDS + 1,
    );
    assert.deepEqual(latest.stragglerReplacements, [
      { pod: 'worker-3', at: STRAGGLER_REPLACEMENT_MEMORY_SECONDS + 1, count: 1 },
    ]);
  });

  it('remembers at most 64 slots, the most recently replaced', () => {
    const many: JobAutoscalerState = {
      ...base,
      stragglerReplacements: Array.from({ length: 70 }, (_, i) => ({ pod: `w-${i}`, at: i, count: 1 })),
    };
    const next = withStragglerReplacement(many, eviction('w-new'), 100);
    const kept = next.stragglerReplacements ?? [];
    assert.equal(kept.length, 64);
    assert.equal(kept[0]?.pod, 'w-7');
    assert.deepEqual(kept.at(-1), { pod: 'w-new', at: 100, count: 1 });
  });

  it('reads back only well-formed entries', () => {
    assert.equal(parseStragglerReplacements(undefined), undefined);
    assert.equal(parseStragglerReplacements({ pod: 'w', at: 1, count: 1 }), undefined);
    assert.deepEqual(
      parseStragglerReplacements([
        { pod: 'ok', at: 5, count: 2 },
        { pod: '', at: 5, count: 1 },
        { pod: 3, at: 5, count: 1 },
        { pod: 'nan', at: Number.NaN, count: 1 },
        { pod: 'zero', at: 5, count: 0 },
        { pod: 'half', at: 5, count: 1.5 },
        null,
        'worker-1',
      ]),
      [{ pod: 'ok', at: 5, count: 2 }],
    );
  });
});

describe('decideRuntime: the straggler check sees the job’s remaining run', () => {
  it('does not replace a straggler of a job about to finish', () => {
    const s = series(6, 40, (w, i) => (w === 2 && i >= 34 ? 1.5 : 1));
    const now = 39 * STEP;
    // 6 workers x 32 samples per 1.5 s step: 128 samples/s, 100 s left.
    const view = job({}, { targetSamples: 1_000_000 + 128 * 100 });
    const snapshot = { obj: {}, view, pods: pods(), rawPods: [] } as unknown as JobSnapshot;
    const observed = {
      samples: [{ replicas: 6, nodes: 6, localBatchSize: 32, stepTime: 1.5, at: now }],
      usage: undefined,
      series: s,
      samplesProcessed: 1_000_000,
    };
    const plan = decideRuntime(snapshot, observed, { nodes: [] }, config, now);
    assert.deepEqual(plan.changes, [], full(plan));
    assert.match(full(plan), /worker-2 .*predicted gain 33 s over remaining ~100 s .*does not beat 54 s/);
  });
});
