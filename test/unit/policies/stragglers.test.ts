import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import {
  decideOnStragglers,
  detectStragglers,
  STRAGGLER_QUERY_STEP_SECONDS,
  type StragglerReport,
} from '../../../lib/policies/stragglers.js';
import type { JobView, Plan, PodView, WorkerStepTimes } from '../../../lib/types.js';

/** The whole account of a plan, as it read before reasons had a one-line summary: its details, else its reason. */
function full(plan: Plan): string {
  return (plan.details ?? [plan.reason]).join('; ');
}

const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG }; // stragglerFactor 1.2, stragglerMinSamples 5
const STEP = STRAGGLER_QUERY_STEP_SECONDS; // the production resolution: what query_range returns

/** `paces.length` workers, one point every 15 s for `n` points; factor(worker, i) multiplies the pace. */
function series(
  paces: number[],
  n: number,
  factor: (worker: number, i: number) => number = () => 1,
): WorkerStepTimes[] {
  return paces.map((pace, w) => ({
    worker: w,
    pod: `worker-${w}`,
    samples: Array.from({ length: n }, (_, i) => ({ at: i * STEP, stepTime: pace * factor(w, i) })),
  }));
}

const uniform = (workers: number) => Array.from({ length: workers }, () => 1);
const lastAt = (n: number) => (n - 1) * STEP;
/** The last `slow` of `n` points of the listed workers are `by` times slower. */
const lastSlow = (workers: number[], n: number, slow: number, by: number) => (w: number, i: number) =>
  workers.includes(w) && i >= n - slow ? by : 1;

function statusOf(report: StragglerReport, worker: number) {
  const found = report.workers.find((w) => w.worker === worker);
  assert.ok(found, `worker ${worker} in report`);
  return found;
}
const stragglersIn = (report: StragglerReport) =>
  report.workers.filter((w) => w.status === 'straggler').map((w) => w.worker);

describe('detectStragglers: a worker slower than its own usual pace', () => {
  it('reports everyone ok on a uniform job', () => {
    const report = detectStragglers(series(uniform(5), 40), config, lastAt(40));
    assert.deepEqual(stragglersIn(report), []);
    assert.equal(statusOf(report, 0).recentRatio, 1);
  });

  it('flags 1.2x its usual pace for 5 points (a minute at 15 s), since the first slow point', () => {
    const report = detectStragglers(series(uniform(5), 40, lastSlow([2], 40, 5, 1.25)), config, lastAt(40));
    const w2 = statusOf(report, 2);
    assert.equal(w2.status, 'straggler');
    assert.equal(w2.since, lastAt(40) - 4 * STEP);
    assert.ok(Math.abs((w2.recentRatio ?? 0) - 1.25) < 1e-9);
    assert.equal(w2.baselineRatio, 1);
    assert.deepEqual(stragglersIn(report), [2]);
  });

  it('does not flag one point short of the hold, nor 1.15x for long', () => {
    const short = detectStragglers(series(uniform(5), 40, lastSlow([2], 40, 4, 1.5)), config, lastAt(40));
    assert.equal(statusOf(short, 2).status, 'ok');
    const mild = detectStragglers(series(uniform(5), 60, lastSlow([2], 60, 30, 1.15)), config, lastAt(60));
    assert.equal(statusOf(mild, 2).status, 'ok');
  });

  it('judges a usually-slow worker against its own pace: 1.15x more is not a straggler, 1.25x more is', () => {
    const paces = [1, 1, 1.3, 1, 1];
    const mild = detectStragglers(series(paces, 40, lastSlow([2], 40, 10, 1.15)), config, lastAt(40));
    assert.equal(statusOf(mild, 2).status, 'persistently-slow');
    const spike = detectStragglers(series(paces, 40, lastSlow([2], 40, 10, 1.25)), config, lastAt(40));
    assert.equal(statusOf(spike, 2).status, 'straggler');
  });

  it('keeps the verdict through one fast point and clears it after 5 normal ones', () => {
    const slowFrom20 = (fast: number[], until = 60) =>
      series(uniform(5), 60, (w, i) => (w === 2 && i >= 20 && i < until && !fast.includes(i) ? 1.5 : 1));
    assert.equal(statusOf(detectStragglers(slowFrom20([27]), config, 29 * STEP), 2).status, 'straggler');
    const recovered = slowFrom20([], 30);
    assert.equal(statusOf(detectStragglers(recovered, config, 33 * STEP), 2).status, 'straggler');
    const after = statusOf(detectStragglers(recovered, config, 34 * STEP), 2);
    assert.equal(after.status, 'ok');
    assert.deepEqual(after.episodes, [{ from: 20 * STEP, to: 29 * STEP }]);
    assert.equal(after.since, 30 * STEP, 'ok since the first of the normal points that cleared it');
  });

  it('holds a verdict for at least one point whatever stragglerMinSamples says', () => {
    const once = { ...config, stragglerMinSamples: 0 };
    const report = detectStragglers(series(uniform(5), 40, lastSlow([2], 40, 1, 1.5)), once, lastAt(40));
    assert.deepEqual(stragglersIn(report), [2]);
    assert.equal(statusOf(report, 2).since, lastAt(40));
  });

  it('ignores points after `now`, missing and nonsensical step times', () => {
    const s = series(uniform(5), 40, lastSlow([2], 40, 5, 2));
    assert.equal(statusOf(detectStragglers(s, config, lastAt(40) - STEP), 2).status, 'ok');
    s[0]?.samples.push({ at: 7, stepTime: Number.NaN }, { at: 8, stepTime: 0 });
    const report = detectStragglers(s, config, lastAt(40));
    assert.equal(statusOf(report, 0).comparableSamples, 40);
    assert.equal(statusOf(report, 2).status, 'straggler');
  });

  it('gives no verdict with fewer than three workers, nor before 8 normal points of history', () => {
    const two = detectStragglers(series([1, 1], 40, lastSlow([1], 40, 10, 3)), config, lastAt(40));
    assert.equal(statusOf(two, 1).status, 'ok');
    assert.equal(statusOf(two, 1).comparableSamples, 0);
    const young = detectStragglers(series(uniform(5), 12, lastSlow([2], 12, 5, 2)), config, lastAt(12));
    assert.equal(statusOf(young, 2).status, 'ok');
    const enough = detectStragglers(series(uniform(5), 13, lastSlow([2], 13, 5, 2)), config, lastAt(13));
    assert.equal(statusOf(enough, 2).status, 'straggler');
  });

  it('compares workers whose points are a few seconds apart', () => {
    const skewed = series(uniform(5), 40, lastSlow([2], 40, 6, 1.5)).map((s) => ({
      ...s,
      samples: s.samples.map((x) => ({ ...x, at: x.at - s.worker })),
    }));
    const report = detectStragglers(skewed, config, 10_000);
    assert.deepEqual(stragglersIn(report), [2]);
    assert.equal(statusOf(report, 0).comparableSamples, 40);
  });
});

describe('detectStragglers: several workers slowing down together', () => {
  it('flags four of ten 1.3x slower together (half minus one), and no other', () => {
    const report = detectStragglers(
      series(uniform(10), 60, lastSlow([2, 4, 6, 8], 60, 10, 1.3)),
      config,
      lastAt(60),
    );
    assert.deepEqual(stragglersIn(report), [2, 4, 6, 8]);
  });

  it('does not flag five of ten 1.1x slower together (under the threshold)', () => {
    const report = detectStragglers(
      series(uniform(10), 60, lastSlow([0, 1, 2, 3, 4], 60, 10, 1.1)),
      config,
      lastAt(60),
    );
    assert.deepEqual(stragglersIn(report), []);
  });

  it('flags the whole job slowing down as nobody (a slower phase, a resize)', () => {
    const report = detectStragglers(
      series(uniform(6), 60, lastSlow([0, 1, 2, 3, 4, 5], 60, 10, 1.5)),
      config,
      lastAt(60),
    );
    assert.deepEqual(stragglersIn(report), []);
  });
});

describe('detectStragglers: 5/5 splits and persistent skew', () => {
  const split = [1, 1, 1, 1, 1, 2, 2, 2, 2, 2];

  it('calls the slow half persistently slow, not stragglers, with a fixed since', () => {
    const early = detectStragglers(series(split, 60), config, lastAt(60));
    assert.deepEqual(stragglersIn(early), []);
    assert.deepEqual(
      early.workers.filter((w) => w.status === 'persistently-slow').map((w) => w.worker),
      [5, 6, 7, 8, 9],
    );
    const later = detectStragglers(series(split, 120), config, lastAt(120));
    assert.equal(statusOf(early, 7).since, 0);
    assert.equal(statusOf(later, 7).since, 0);
  });

  it('flags a fast worker of the split slowing 1.3x, and four fast ones together', () => {
    const one = detectStragglers(series(split, 60, lastSlow([1], 60, 8, 1.3)), config, lastAt(60));
    assert.deepEqual(stragglersIn(one), [1]);
    const four = detectStragglers(series(split, 60, lastSlow([0, 1, 2, 3], 60, 8, 1.3)), config, lastAt(60));
    assert.deepEqual(stragglersIn(four), [0, 1, 2, 3]);
  });

  it('keeps a steady gap under x1.15 the fast pace ok; over it, persistently slow after 40 points only', () => {
    const gap = (factor: number, n: number) =>
      detectStragglers(series([1, 1, 1, 1, 1, factor], n), config, lastAt(n));
    assert.equal(statusOf(gap(1.12, 60), 5).status, 'ok');
    assert.equal(statusOf(gap(1.2, 60), 5).status, 'persistently-slow');
    assert.equal(statusOf(gap(1.2, 39), 5).status, 'ok');
    assert.equal(statusOf(gap(1.2, 40), 5).status, 'persistently-slow');
  });

  it('calls a persistently slow worker a straggler again when it gets 4x slower, not when 1.1x', () => {
    const paces = [1, 1, 1, 1, 1, 3, 3.5, 4, 4.5, 5];
    const much = detectStragglers(series(paces, 80, lastSlow([6], 80, 20, 4)), config, lastAt(80));
    assert.deepEqual(stragglersIn(much), [6]);
    assert.equal(statusOf(much, 6).baselineRatio, 3.5);
    const little = detectStragglers(series(paces, 80, lastSlow([6], 80, 20, 1.1)), config, lastAt(80));
    assert.deepEqual(stragglersIn(little), []);
  });
});

describe('detectStragglers: long spells and fast workers', () => {
  it('still calls a spell a straggler after an hour (its usual pace is frozen while it is slow)', () => {
    // 30 min of history, then 60 min at 4x: the last review still compares with the pace before the onset.
    const n = 120 + 240;
    const report = detectStragglers(series(uniform(8), n, lastSlow([3], n, 240, 4)), config, lastAt(n));
    const w3 = statusOf(report, 3);
    assert.equal(w3.status, 'straggler');
    assert.equal(w3.since, 120 * STEP);
    assert.equal(w3.baselineRatio, 1);
  });

  it('never flags a worker that is not slower than the job’s fast pace, however much slower than its own', () => {
    const paces = [0.5, 1, 1, 1, 1, 1, 1, 1];
    const faster = detectStragglers(series(paces, 60, lastSlow([0], 60, 20, 1.9)), config, lastAt(60));
    assert.equal(statusOf(faster, 0).status, 'ok');
    // Back at exactly the others' pace: replacing it could not speed the job up.
    const level = detectStragglers(series(paces, 60, lastSlow([0], 60, 20, 2)), config, lastAt(60));
    assert.equal(statusOf(level, 0).recentRatio, 1);
    assert.equal(statusOf(level, 0).status, 'ok');
    const slower = detectStragglers(series(paces, 60, lastSlow([0], 60, 20, 2.3)), config, lastAt(60));
    assert.equal(statusOf(slower, 0).status, 'straggler');
  });
});

describe('detectStragglers: its boundaries', () => {
  it('reports nothing to compare on no samples, and one comparison on one sample per worker', () => {
    assert.deepEqual(detectStragglers([], config, 0), {
      at: 0,
      workers: [],
      persistentFactor: 1.15,
      paceNoise: 0,
    });
    const empty = detectStragglers(series(uniform(4), 0), config, 0);
    assert.deepEqual(
      empty.workers.map((w) => [w.status, w.comparableSamples, w.stepTime]),
      Array.from({ length: 4 }, () => ['ok', 0, undefined]),
    );
    const single = detectStragglers(series(uniform(4), 1), config, 0);
    assert.deepEqual(
      single.workers.map((w) => [w.comparableSamples, w.stepTime]),
      Array.from({ length: 4 }, () => [1, 1]),
    );
  });

  it('flags exactly stragglerFactor x its usual pace', () => {
    const exact = detectStragglers(series(uniform(6), 40, lastSlow([2], 40, 5, 1.2)), config, lastAt(40));
    assert.deepEqual(stragglersIn(exact), [2]);
  });

  it('compares three workers, the fewest that make a job', () => {
    const three = detectStragglers(series(uniform(3), 40, lastSlow([1], 40, 5, 2)), config, lastAt(40));
    assert.deepEqual(stragglersIn(three), [1]);
    assert.equal(statusOf(three, 0).comparableSamples, 40);
  });

  it('keeps the usual pace to the latest 120 normal points', () => {
    // Worker 5 at 1.0 for 120 points, then 1.1 (under the threshold) for 60: its last 120 are half and half.
    const n = 180;
    const report = detectStragglers(
      series(uniform(6), n, (w, i) => (w === 5 && i >= 120 ? 1.1 : 1)),
      config,
      lastAt(n),
    );
    const w5 = statusOf(report, 5);
    assert.equal(w5.status, 'ok');
    assert.ok(Math.abs((w5.baselineRatio ?? 0) - 1.05) < 1e-9, String(w5.baselineRatio));
  });

  it('matches a worker’s sample to an instant only when it is less than one interval old', () => {
    // Worker 0's samples are stamped one interval earlier: at the last instant its latest is one interval old.
    const early = series(uniform(6), 40).map((s) =>
      s.worker === 0 ? { ...s, samples: s.samples.map((x) => ({ ...x, at: x.at - STEP })) } : s,
    );
    const report = detectStragglers(early, config, lastAt(40));
    assert.equal(statusOf(report, 0).comparableSamples, 39);
    assert.equal(statusOf(report, 0).stepTime, undefined);
    assert.equal(statusOf(report, 1).comparableSamples, 40);
    const slightlyLate = series(uniform(6), 40).map((s) =>
      s.worker === 0 ? { ...s, samples: s.samples.map((x) => ({ ...x, at: x.at - 1 })) } : s,
    );
    assert.equal(statusOf(detectStragglers(slightlyLate, config, lastAt(40)), 0).comparableSamples, 40);
  });

  it('ignores samples stamped at no finite time', () => {
    const s = series(uniform(6), 40, lastSlow([2], 40, 5, 1.5));
    s[0]?.samples.push({ at: Number.NaN, stepTime: 5 }, { at: Number.NEGATIVE_INFINITY, stepTime: 5 });
    const report = detectStragglers(s, config, lastAt(40));
    assert.deepEqual(stragglersIn(report), [2]);
    assert.equal(statusOf(report, 0).comparableSamples, 40);
  });
});

describe('detectStragglers: samples it cannot use', () => {
  const n = 40;
  const clean = () => series(uniform(6), n, lastSlow([2], n, 5, 1.5));

  it('ignores samples stamped after now (a pod whose clock runs ahead)', () => {
    const future = Array.from({ length: 6 }, (_, k) => ({ at: lastAt(n) + (k + 1) * STEP, stepTime: 3 }));
    const ahead = clean().map((s) => (s.worker === 0 ? { ...s, samples: [...s.samples, ...future] } : s));
    assert.deepEqual(stragglersIn(detectStragglers(ahead, config, lastAt(n))), [2]);
  });

  it('ignores zero, negative and non-finite step times (a broken exporter)', () => {
    // Two workers at zero would make the fast pace zero, and every other worker infinitely slow.
    const broken = clean().map((s) =>
      s.worker > 1
        ? s
        : {
            ...s,
            samples: s.samples.map((x, i) =>
              i < n - 6 ? x : { ...x, stepTime: [0, -1, Number.NaN][i % 3] ?? 0 },
            ),
          },
    );
    assert.deepEqual(stragglersIn(detectStragglers(broken, config, lastAt(n))), [2]);
  });

  it('reads samples in any order', () => {
    const expected = detectStragglers(clean(), config, lastAt(n));
    const shuffled = clean().map((s) => ({
      ...s,
      samples: s.samples.map((x, i) => s.samples[(i * 7) % n] ?? x),
    }));
    const report = detectStragglers(shuffled, config, lastAt(n));
    assert.deepEqual(stragglersIn(report), [2]);
    assert.equal(statusOf(report, 2).since, statusOf(expected, 2).since);
  });
});

// --- decideOnStragglers ---------------------------------------------------------------------------------

const N = 40;
const NOW = lastAt(N);

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
        replicas: 6,
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

function pods(overrides: Partial<PodView> & { index?: number } = {}, count = 6): PodView[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `worker-${i}`,
    namespace: 'ml',
    role: 'Worker' as const,
    index: i,
    phase: 'Running' as const,
    nodeName: `node-${i}`,
    restartCount: 0,
    requests: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
    limits: { cpuMillis: 4000, memoryBytes: 0, gpus: 1 },
    ...(i === overrides.index ? overrides : {}),
  }));
}

const oneSlow = (by = 1.5) => series(uniform(6), N, lastSlow([2], N, 6, by));

function decide(s: WorkerStepTimes[], j = job(), p = pods(), now = NOW) {
  return decideOnStragglers({ job: j, series: s, pods: p, config, now });
}

describe('decideOnStragglers', () => {
  it('evicts the straggler’s pod, names its node, and has its replacement prefer other nodes', () => {
    const plan = decide(oneSlow());
    assert.equal(plan.policy, 'straggler');
    assert.deepEqual(plan.changes, [
      { kind: 'avoid-node', role: 'Worker', node: 'node-2' },
      { kind: 'evict-pod', pod: 'worker-2' },
    ]);
    assert.match(
      full(plan),
      /evicting worker-2 so the controller replaces it, preferring nodes other than node-2/,
    );
    assert.match(
      full(plan),
      /worker-2 \(worker 2\) straggling on node node-2 since t=510: pace x1\.50 .* usual x1\.00/,
    );
  });

  it('only evicts on a kind whose pod template cannot change (a running Job or JobSet), and says so', () => {
    const refused =
      "JobSet cannot change /spec: a running JobSet's pod template is immutable (node affinity changes only while suspended and never started)";
    const plan = decide(oneSlow(), { ...job(), refusals: { 'avoid-node': refused } });
    assert.deepEqual(plan.changes, [{ kind: 'evict-pod', pod: 'worker-2' }]);
    assert.match(
      full(plan),
      /evicting worker-2 so the controller replaces it \(not steered away from node-2: JobSet cannot change/,
    );
  });

  it('reports a straggling worker-0 of an elastic c10d job instead of evicting it (it hosts the store)', () => {
    const c10d = {
      ...job(),
      torchElastic: { c10dStore: true, rdzvConf: {}, tuneRendezvous: false, trainscalerLauncher: false },
    };
    const slow0 = series(uniform(6), N, lastSlow([0], N, 6, 1.5));
    const plan = decide(slow0, c10d);
    assert.deepEqual(plan.changes, []);
    assert.match(
      full(plan),
      /reported, not evicting: worker-0 is worker-0, the host of the job's c10d rendezvous store/,
    );
    // The same straggler without a c10d store, or worker-2 of the c10d job, is evicted.
    assert.deepEqual(decide(slow0).changes.at(-1), { kind: 'evict-pod', pod: 'worker-0' });
    assert.deepEqual(decide(oneSlow(), c10d).changes.at(-1), { kind: 'evict-pod', pod: 'worker-2' });
  });

  it('evicts at most one pod per decision: the worse of two stragglers that bound the job together', () => {
    // Both end at step time 2: worker 4 at 2x its usual 1, worker 1 at 1.6x its usual 1.25.
    const two = series([1, 1.25, 1, 1, 1, 1], N, (w, i) =>
      i >= N - 6 && w === 1 ? 1.6 : i >= N - 6 && w === 4 ? 2 : 1,
    );
    const plan = decide(two);
    assert.deepEqual(plan.changes.at(-1), { kind: 'evict-pod', pod: 'worker-4' });
    assert.equal(plan.changes.length, 2);
    assert.match(full(plan), /worker-1 .* left for a later decision/);
  });

  it('finds the pod by Worker replica index when the series does not name it', () => {
    const unnamed = oneSlow().map(({ pod: _pod, ...rest }) => rest);
    assert.deepEqual(decide(unnamed).changes.at(-1), { kind: 'evict-pod', pod: 'worker-2' });
  });

  it('only evicts when the node is unknown, or for a StatefulSet (a template change would roll every pod)', () => {
    const noNode = decide(oneSlow(), job(), pods({ index: 2, nodeName: undefined }));
    assert.deepEqual(noNode.changes, [{ kind: 'evict-pod', pod: 'worker-2' }]);
    const sts = { ...job(), ref: { kind: 'StatefulSet' as const, namespace: 'ml', name: 'resnet' } };
    const plan = decide(oneSlow(), sts);
    assert.deepEqual(plan.changes, [{ kind: 'evict-pod', pod: 'worker-2' }]);
    assert.match(
      full(plan),
      /a StatefulSet: its template is left alone, so the replacement may land on node-2 again/,
    );
  });

  it('does not evict a straggler whose pod is not running', () => {
    const plan = decide(oneSlow(), job(), pods({ index: 2, phase: 'Pending' }));
    assert.deepEqual(plan.changes, []);
    assert.match(full(plan), /Pending, not evicting/);
  });

  it('does not evict for persistent skew, and says so with a since', () => {
    const plan = decide(series([1, 1, 1, 1, 1, 1.3], N));
    assert.deepEqual(plan.changes, []);
    assert.match(
      full(plan),
      /no straggler; persistently slow, not evicting .*worker 5 \(x1\.30 the fast pace since t=0\)/,
    );
  });

  it('names a node on which the job’s pods straggled twice in the lookback, and never cordons it', () => {
    // Worker 2 straggled on node-9 at points 10-19 and straggles there again from point 34.
    const s = series(uniform(6), N, (w, i) => (w === 2 && ((i >= 10 && i < 20) || i >= 34) ? 1.6 : 1)).map(
      (x) => ({ ...x, samples: x.samples.map((p) => (x.worker === 2 ? { ...p, node: 'node-9' } : p)) }),
    );
    const plan = decide(s, job(), pods({ index: 2, nodeName: 'node-9' }));
    assert.deepEqual(plan.changes.at(-1), { kind: 'evict-pod', pod: 'worker-2' });
    assert.match(full(plan), /node node-9: this job's pods straggled on it 2 times in the last 2 h/);
    const once = decide(oneSlow());
    assert.doesNotMatch(full(once), /straggled on it/);
  });

  it('does nothing while paused', () => {
    const plan = decide(oneSlow(), job({ paused: true, pauseReason: 'manual' }));
    assert.deepEqual(plan.changes, []);
    assert.match(full(plan), /paused \(manual\)/);
  });

  it('waits out the cooldown after a write (the window still holds the replaced pod’s steps)', () => {
    // The straggler's own 300 s, longer than the general 120 s cool-down.
    assert.ok(config.stragglerCooldownSeconds > config.cooldownSeconds);
    const inCooldown = decide(oneSlow(), job({ lastActionAt: NOW - config.stragglerCooldownSeconds + 1 }));
    assert.deepEqual(inCooldown.changes, []);
    assert.match(full(inCooldown), /cooldown for 1 s more/);
    const after = decide(oneSlow(), job({ lastActionAt: NOW - config.stragglerCooldownSeconds }));
    assert.equal(after.changes.length, 2);
    // A general cool-down set longer governs.
    const longer = { ...config, cooldownSeconds: config.stragglerCooldownSeconds + 100 };
    const held = decideOnStragglers({
      job: job({ lastActionAt: NOW - config.stragglerCooldownSeconds }),
      series: oneSlow(),
      pods: pods(),
      config: longer,
      now: NOW,
    });
    assert.match(full(held), /cooldown for 100 s more/);
  });
});
