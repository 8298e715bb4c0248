import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import {
  decideOnStragglers,
  detectStragglers,
  type StragglerReport,
} from '../../../lib/policies/stragglers.js';
import type { JobView, PodView, WorkerStepTimes } from '../../../lib/types.js';
import { loadPaiJob, sampleTimes, windowAt } from '../../support/pai-data.js';

const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG }; // stragglerFactor 1.3, stragglerMinSamples 3
const INTERVAL = 10;

/** `workers` workers sampled every 10 s for `n` samples; stepTime(worker, sampleIndex). */
function series(
  workers: number,
  n: number,
  stepTime: (worker: number, i: number) => number,
): WorkerStepTimes[] {
  return Array.from({ length: workers }, (_, w) => ({
    worker: w,
    pod: `worker-${w}`,
    samples: Array.from({ length: n }, (_, i) => ({ at: i * INTERVAL, stepTime: stepTime(w, i) })),
  }));
}

/** Worker 2 of 5 runs at `slowFactor` for the last `slowSamples` of `n` samples; everyone else at 100. */
function lastSamplesSlow(n: number, slowSamples: number, slowFactor: number): WorkerStepTimes[] {
  return series(5, n, (w, i) => (w === 2 && i >= n - slowSamples ? 100 * slowFactor : 100));
}

function statusOf(report: StragglerReport, worker: number) {
  const found = report.workers.find((w) => w.worker === worker);
  assert.ok(found, `worker ${worker} in report`);
  return found;
}

const lastAt = (n: number) => (n - 1) * INTERVAL;

describe('detectStragglers: thresholds (synthetic)', () => {
  it('reports everyone ok on a uniform job', () => {
    const report = detectStragglers(
      series(5, 20, () => 100),
      config,
      lastAt(20),
    );
    assert.deepEqual(
      report.workers.map((w) => w.status),
      ['ok', 'ok', 'ok', 'ok', 'ok'],
    );
    assert.equal(statusOf(report, 0).recentRatio, 1);
  });

  it('flags a worker slow by more than stragglerFactor for stragglerMinSamples samples, since the first slow one', () => {
    const report = detectStragglers(lastSamplesSlow(20, 3, 1.35), config, lastAt(20));
    const w2 = statusOf(report, 2);
    assert.equal(w2.status, 'straggler');
    assert.equal(w2.since, lastAt(20) - 2 * INTERVAL);
    assert.ok(Math.abs((w2.recentRatio ?? 0) - 1.35) < 1e-9);
    assert.ok(Math.abs((w2.baselineRatio ?? 0) - 1) < 1e-9);
    assert.equal(statusOf(report, 1).status, 'ok');
  });

  it('does not flag one sample short of stragglerMinSamples', () => {
    const report = detectStragglers(lastSamplesSlow(20, 2, 1.35), config, lastAt(20));
    assert.equal(statusOf(report, 2).status, 'ok');
  });

  it('does not flag a slowdown below stragglerFactor', () => {
    const report = detectStragglers(lastSamplesSlow(20, 5, 1.25), config, lastAt(20));
    assert.equal(statusOf(report, 2).status, 'ok');
  });

  it('judges against the worker’s own baseline: a usually-slow worker must slow down by the factor again', () => {
    // Worker 2 usually runs at 1.2x the median. 1.45x is above 1.3x the median but only 1.21x its own norm.
    const mild = series(5, 40, (w, i) => (w === 2 ? (i >= 35 ? 145 : 120) : 100));
    assert.notEqual(statusOf(detectStragglers(mild, config, lastAt(40)), 2).status, 'straggler');
    // 1.2 * 1.35 = 1.62x the median is a real spike on top of its norm.
    const spike = series(5, 40, (w, i) => (w === 2 ? (i >= 35 ? 162 : 120) : 100));
    assert.equal(statusOf(detectStragglers(spike, config, lastAt(40)), 2).status, 'straggler');
  });

  it('keeps the verdict through one fast sample and clears it after stragglerMinSamples fast ones', () => {
    const slowAt = (fastAfter: number[]) =>
      series(5, 30, (w, i) => (w === 2 && i >= 20 && !fastAfter.includes(i) ? 150 : 100));
    const oneFast = detectStragglers(slowAt([24]), config, lastAt(25));
    assert.equal(statusOf(oneFast, 2).status, 'straggler');

    const recovered = series(5, 30, (w, i) => (w === 2 && i >= 20 && i < 25 ? 150 : 100));
    assert.equal(statusOf(detectStragglers(recovered, config, 26 * INTERVAL), 2).status, 'straggler');
    const after = statusOf(detectStragglers(recovered, config, 27 * INTERVAL), 2);
    assert.equal(after.status, 'ok');
    assert.equal(after.since, 25 * INTERVAL);
  });

  it('ignores samples after `now` (they have not been observed yet)', () => {
    const report = detectStragglers(lastSamplesSlow(20, 3, 2), config, lastAt(20) - INTERVAL);
    assert.equal(statusOf(report, 2).status, 'ok');
  });

  it('gives no verdict with fewer than three workers to compare', () => {
    const two = series(2, 20, (w, i) => (w === 1 && i >= 15 ? 300 : 100));
    const report = detectStragglers(two, config, lastAt(20));
    assert.equal(statusOf(report, 1).status, 'ok');
    assert.equal(statusOf(report, 1).recentRatio, undefined);
    assert.equal(statusOf(report, 1).comparableSamples, 0);
  });

  it('compares workers whose samples are a few seconds apart', () => {
    const skewed = lastSamplesSlow(20, 4, 1.5).map((s) => ({
      ...s,
      samples: s.samples.map((x) => ({ ...x, at: x.at + s.worker })),
    }));
    const report = detectStragglers(skewed, config, 1000);
    assert.equal(statusOf(report, 2).status, 'straggler');
    assert.equal(statusOf(report, 0).comparableSamples, 20);
  });

  it('ignores missing and nonsensical step times', () => {
    const broken = lastSamplesSlow(20, 3, 1.35);
    broken[0]?.samples.push({ at: 55, stepTime: Number.NaN }, { at: 65, stepTime: 0 });
    const report = detectStragglers(broken, config, lastAt(20));
    assert.equal(statusOf(report, 0).comparableSamples, 20);
    assert.equal(statusOf(report, 2).status, 'straggler');
  });
});

describe('detectStragglers: persistent skew (synthetic)', () => {
  const skewed = (n: number, factor: number) => series(6, n, (w) => (w === 5 ? 100 * factor : 100));

  it('reports a steadily slower worker as persistently-slow, not straggler, since its first sample', () => {
    const w5 = statusOf(detectStragglers(skewed(40, 1.2), config, lastAt(40)), 5);
    assert.equal(w5.status, 'persistently-slow');
    assert.equal(w5.since, 0);
  });

  it('keeps a small steady gap (below half the straggler margin) ok', () => {
    assert.equal(statusOf(detectStragglers(skewed(40, 1.1), config, lastAt(40)), 5).status, 'ok');
  });

  it('does not call a gap persistent on short history (fewer than 10 straggler windows)', () => {
    assert.equal(statusOf(detectStragglers(skewed(29, 1.2), config, lastAt(29)), 5).status, 'ok');
    assert.equal(
      statusOf(detectStragglers(skewed(30, 1.2), config, lastAt(30)), 5).status,
      'persistently-slow',
    );
  });
});

describe('detectStragglers on real PAI traces replayed with a 15-minute window', () => {
  const WINDOW = 900;

  function replay(file: 'job_1_norm.csv' | 'job_2_norm.csv') {
    const data = loadPaiJob(file);
    return sampleTimes(data).map((t) => ({
      t,
      report: detectStragglers(windowAt(data, t, WINDOW), config, t),
    }));
  }

  it('job 1: flags worker 6 only while it is slow (~1,800-1,950 s), and no other worker', () => {
    const flagged = replay('job_1_norm.csv').flatMap(({ t, report }) =>
      report.workers
        .filter((w) => w.status === 'straggler')
        .map((w) => ({ t, worker: w.worker, since: w.since })),
    );
    assert.ok(flagged.length > 0, 'worker 6 is flagged at some point');
    assert.deepEqual([...new Set(flagged.map((f) => f.worker))], [6]);
    for (const f of flagged) {
      assert.ok(f.t >= 1800 && f.t <= 1950, `flagged at t=${f.t}`);
      assert.ok((f.since ?? 0) >= 1800, `since t=${f.since}`);
    }
    assert.ok(
      flagged.some((f) => f.t === 1841),
      'flagged in the middle of the slow spell',
    );
    assert.ok(!flagged.some((f) => f.t < 1700 || f.t > 2100));
  });

  it('job 2: never flags a straggler, and reports a worker among 3-8 as persistently slow (never 0-1)', () => {
    const reports = replay('job_2_norm.csv');
    const stragglers = reports.flatMap(({ t, report }) =>
      report.workers.filter((w) => w.status === 'straggler').map((w) => `t=${t} worker ${w.worker}`),
    );
    assert.deepEqual(stragglers, []);

    const persistent = new Set(
      reports.flatMap(({ report }) =>
        report.workers.filter((w) => w.status === 'persistently-slow').map((w) => w.worker),
      ),
    );
    assert.ok(
      [3, 4, 5, 6, 7, 8].some((w) => persistent.has(w)),
      `persistently slow: ${[...persistent]}`,
    );
    assert.ok(!persistent.has(0) && !persistent.has(1));

    const last = reports.at(-1)?.report;
    assert.ok(last?.workers.some((w) => w.worker >= 3 && w.worker <= 8 && w.status === 'persistently-slow'));
  });
});

// --- decideOnStragglers ---------------------------------------------------------------------------------

const NOW = lastAt(20);

function job(state: Partial<JobView['state']> = {}): JobView {
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
        replicas: 5,
        minReplicas: 2,
        maxReplicas: 8,
        containerName: 'pytorch',
        containerIndex: 0,
        requests: resources,
        limits: resources,
      },
    ],
    managed: true,
    state: { oomCount: 0, paused: false, ...state },
  };
}

function pods(overrides: Partial<PodView> & { index?: number } = {}): PodView[] {
  return Array.from({ length: 5 }, (_, i) => ({
    name: `worker-${i}`,
    namespace: 'ml',
    role: 'Worker' as const,
    index: i,
    phase: 'Running' as const,
    restartCount: 0,
    requests: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
    limits: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
    ...(i === overrides.index ? overrides : {}),
  }));
}

function decide(s: WorkerStepTimes[], j = job(), p = pods(), now = NOW) {
  return decideOnStragglers({ job: j, series: s, pods: p, config, now });
}

describe('decideOnStragglers', () => {
  it('evicts the transient straggler’s pod and explains with numbers', () => {
    const plan = decide(lastSamplesSlow(20, 3, 1.5));
    assert.equal(plan.policy, 'straggler');
    assert.deepEqual(plan.changes, [{ kind: 'evict-pod', pod: 'worker-2' }]);
    assert.match(
      plan.reason,
      /worker-2 \(worker 2\) straggling since t=170: step time x1\.50 .* usual x1\.00/,
    );
  });

  it('evicts at most one pod per decision: the worse straggler', () => {
    const two = series(6, 20, (w, i) => (i >= 17 && w === 1 ? 140 : i >= 17 && w === 4 ? 200 : 100));
    const plan = decide(two, job(), [...pods(), { ...(pods()[0] as PodView), name: 'worker-5', index: 5 }]);
    assert.deepEqual(plan.changes, [{ kind: 'evict-pod', pod: 'worker-4' }]);
    assert.match(plan.reason, /worker-1 .* left for a later decision/);
  });

  it('finds the pod by Worker replica index when the series does not name it', () => {
    const unnamed = lastSamplesSlow(20, 3, 1.5).map(({ pod: _pod, ...rest }) => rest);
    assert.deepEqual(decide(unnamed).changes, [{ kind: 'evict-pod', pod: 'worker-2' }]);
  });

  it('does not evict a straggler whose pod is not running', () => {
    const plan = decide(lastSamplesSlow(20, 3, 1.5), job(), pods({ index: 2, phase: 'Pending' }));
    assert.deepEqual(plan.changes, []);
    assert.match(plan.reason, /Pending, not evicting/);
  });

  it('does not evict for persistent skew, and says so', () => {
    const skewed = series(6, 40, (w) => (w === 5 ? 120 : 100));
    const plan = decide(
      skewed,
      job(),
      [...pods(), { ...(pods()[0] as PodView), name: 'worker-5', index: 5 }],
      lastAt(40),
    );
    assert.deepEqual(plan.changes, []);
    assert.match(
      plan.reason,
      /no straggler; persistently slow, not evicting .*worker 5 \(x1\.20 of median\)/,
    );
  });

  it('does nothing while paused', () => {
    const plan = decide(lastSamplesSlow(20, 3, 1.5), job({ paused: true, pauseReason: 'manual' }));
    assert.deepEqual(plan.changes, []);
    assert.match(plan.reason, /paused \(manual\)/);
  });

  it('waits out the cooldown after a write (the window still holds the replaced pod’s steps)', () => {
    const inCooldown = decide(
      lastSamplesSlow(20, 3, 1.5),
      job({ lastActionAt: NOW - config.cooldownSeconds + 1 }),
    );
    assert.deepEqual(inCooldown.changes, []);
    assert.match(inCooldown.reason, /cooldown for 1 s more/);
    const after = decide(lastSamplesSlow(20, 3, 1.5), job({ lastActionAt: NOW - config.cooldownSeconds }));
    assert.equal(after.changes.length, 1);
  });

  it('evicts worker 6 of the real job 1 in the middle of its slow spell, and nothing before it', () => {
    const data = loadPaiJob('job_1_norm.csv');
    const tenPods = Array.from({ length: 10 }, (_, i) => ({
      ...(pods()[0] as PodView),
      name: `worker-${i}`,
      index: i,
    }));
    const during = decide(windowAt(data, 1841, 900), job(), tenPods, 1841);
    assert.deepEqual(during.changes, [{ kind: 'evict-pod', pod: 'worker-6' }]);
    const before = decide(windowAt(data, 1801, 900), job(), tenPods, 1801);
    assert.deepEqual(before.changes, []);
  });
});
