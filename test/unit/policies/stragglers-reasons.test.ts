// The straggler decision's reason is what an operator reads in the job's Event and in `trainscaler explain`:
// each part of it is asserted whole here (who, where, since when, against what threshold, and why not).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import {
  decideOnStragglers,
  detectStragglers,
  STRAGGLER_QUERY_STEP_SECONDS,
} from '../../../lib/policies/stragglers.js';
import type { JobView, Plan, PodView, WorkerStepTimes } from '../../../lib/types.js';

/** The whole account of a plan, as it read before reasons had a one-line summary: its details, else its reason. */
function full(plan: Plan): string {
  return (plan.details ?? [plan.reason]).join('; ');
}

const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG };
const STEP = STRAGGLER_QUERY_STEP_SECONDS;
const N = 40;
const NOW = (N - 1) * STEP;

function series(
  at: (w: number, i: number) => number,
  node: (w: number, i: number) => string | undefined = () => undefined,
  workers = 6,
): WorkerStepTimes[] {
  return Array.from({ length: workers }, (_, w) => ({
    worker: w,
    pod: `worker-${w}`,
    samples: Array.from({ length: N }, (_, i) => {
      const where = node(w, i);
      return { at: i * STEP, stepTime: at(w, i), ...(where !== undefined ? { node: where } : {}) };
    }),
  }));
}

const job = (state: Partial<JobView['state']> = {}): JobView => ({
  ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'resnet' },
  uid: 'uid',
  resourceVersion: '1',
  priority: 0,
  elastic: true,
  signature: 'sig',
  roles: [],
  managed: true,
  state: { oomCount: 0, paused: false, ...state },
});

function pods(count = 6, nodeOf: (i: number) => string | undefined = (i) => `node-${i}`): PodView[] {
  return Array.from({ length: count }, (_, i) => {
    const node = nodeOf(i);
    return {
      name: `worker-${i}`,
      namespace: 'ml',
      role: 'Worker' as const,
      index: i,
      phase: 'Running' as const,
      ...(node !== undefined ? { nodeName: node } : {}),
      restartCount: 0,
      requests: { cpuMillis: 0, memoryBytes: 0, gpus: 0 },
      limits: { cpuMillis: 0, memoryBytes: 0, gpus: 0 },
    };
  });
}

const slowFrom =
  (worker: number, from: number, by = 1.5) =>
  (w: number, i: number) =>
    w === worker && i >= from ? by : 1;

describe('straggler reasons', () => {
  it('says who, where, since when, how slow against what threshold', () => {
    const plan = decideOnStragglers({
      job: job(),
      series: series(slowFrom(2, 34)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.ok(
      full(plan).startsWith(
        "worker-2 (worker 2) straggling on node node-2 since t=510: pace x1.50 the job's fast pace vs its usual x1.00 (threshold x1.20 its usual for 5 samples); the job's bottleneck, and ",
      ),
      full(plan),
    );
  });

  it('names the worker and the node its samples carry when no pod of the job matches it', () => {
    const onNode9 = series(slowFrom(2, 34), (w) => (w === 2 ? 'node-9' : undefined));
    const noPod = pods(6).filter((p) => p.index !== 2);
    const plan = decideOnStragglers({ job: job(), series: onNode9, pods: noPod, config, now: NOW });
    assert.equal(
      full(plan),
      "worker 2 straggling on node node-9 since t=510: pace x1.50 the job's fast pace vs its usual x1.00 (threshold x1.20 its usual for 5 samples); no pod found for it, not evicting",
    );
    const report = detectStragglers(onNode9, config, NOW);
    assert.equal(report.workers[2]?.node, 'node-9');
    assert.equal(report.workers[1]?.node, undefined);
    assert.equal(report.at, NOW);
    const nowhere = decideOnStragglers({
      job: job(),
      series: series(slowFrom(2, 34)),
      pods: noPod,
      config,
      now: NOW,
    });
    assert.match(full(nowhere), /^worker 2 straggling since t=510: /);
  });

  it('prefers the node of the pod to the node of the samples', () => {
    const onNode9 = series(slowFrom(2, 34), (w) => (w === 2 ? 'node-9' : undefined));
    const plan = decideOnStragglers({ job: job(), series: onNode9, pods: pods(), config, now: NOW });
    assert.match(full(plan), /^worker-2 \(worker 2\) straggling on node node-2 since/);
  });

  it('says so when the job is paused without a recorded reason', () => {
    const plan = decideOnStragglers({
      job: job({ paused: true }),
      series: series(slowFrom(2, 34)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.equal(full(plan), 'job is paused (no reason recorded); not checking stragglers');
    assert.equal(plan.policy, 'straggler');
  });

  it('lists the persistently slow workers with their pace and since, and the threshold', () => {
    const plan = decideOnStragglers({
      job: job(),
      series: series((w) => (w === 4 ? 1.4 : w === 5 ? 1.3 : 1)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.equal(
      full(plan),
      "no straggler; persistently slow, not evicting (a replacement would be as slow): worker 4 (x1.40 the fast pace since t=0), worker 5 (x1.30 the fast pace since t=0); more than x1.15 the job's fast pace",
    );
  });

  it('names repeat nodes by their count, then name, from the pod when the samples carry none', () => {
    // Workers 1 and 2 straggle twice each (points 10-19 and from 34), worker 3 three times on node-a; the
    // samples name no node, so each worker's pod's node counts.
    const spells = (w: number, i: number) =>
      (w === 1 || w === 2) && ((i >= 10 && i < 20) || i >= 34)
        ? 1.6
        : w === 3 && ((i >= 8 && i < 14) || (i >= 20 && i < 26) || i >= 34)
          ? 1.6
          : 1;
    const nodeOf = (i: number) => (i === 3 ? 'node-a' : i === 1 || i === 2 ? 'node-b' : `node-${i}`);
    const plan = decideOnStragglers({
      job: job(),
      series: series(spells),
      pods: pods(6, nodeOf),
      config,
      now: NOW,
    });
    assert.match(
      full(plan),
      /node node-b: this job's pods straggled on it 4 times in the last 2 h \(reported only; trainscaler does not cordon or taint\); node node-a: this job's pods straggled on it 3 times in the last 2 h/,
    );
  });

  it('orders nodes with as many episodes by name', () => {
    const spells = (w: number, i: number) =>
      (w === 1 || w === 2) && ((i >= 10 && i < 20) || i >= 34) ? 1.6 : 1;
    const nodeOf = (i: number) => (i === 1 ? 'node-z' : i === 2 ? 'node-y' : undefined);
    const plan = decideOnStragglers({
      job: job(),
      series: series(spells),
      pods: pods(6, nodeOf),
      config,
      now: NOW,
    });
    assert.match(full(plan), /node node-y: .* 2 times .*; node node-z: .* 2 times/);
  });

  it('rounds the seconds left of a cool-down or a back-off up', () => {
    const cooling = decideOnStragglers({
      job: job({ lastActionAt: NOW - config.stragglerCooldownSeconds + 0.5 }),
      series: series(slowFrom(2, 34)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.equal(full(cooling), 'in cooldown for 1 s more after the last change; not checking stragglers');
    const backingOff = decideOnStragglers({
      job: job({ stragglerReplacements: [{ pod: 'worker-2', at: NOW - 0.5, count: 1 }] }),
      series: series(slowFrom(2, 30)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.match(full(backingOff), /not replaced again for 10\.0 min \(600 s more;/);
  });

  it('evicts a straggling pod of another role with index 0 in a c10d job: only Worker 0 hosts the store', () => {
    const c10d: JobView = {
      ...job(),
      torchElastic: { c10dStore: true, rdzvConf: {}, tuneRendezvous: false, trainscalerLauncher: false },
    };
    const withMaster = pods().map((p) => (p.index === 2 ? { ...p, role: 'Master' as const, index: 0 } : p));
    const plan = decideOnStragglers({
      job: c10d,
      series: series(slowFrom(2, 34)),
      pods: withMaster,
      config,
      now: NOW,
    });
    assert.deepEqual(plan.changes.at(-1), { kind: 'evict-pod', pod: 'worker-2' });
  });

  it('takes the straggler slower against its own pace first, then the lower worker number', () => {
    // Workers 1 and 4 both at 2x their usual 1: the tie goes to worker 1.
    const plan = decideOnStragglers({
      job: job(),
      series: series((w, i) => ((w === 1 || w === 4) && i >= 34 ? 2 : 1)),
      pods: pods(),
      config,
      now: NOW,
    });
    assert.deepEqual(plan.changes.at(-1), { kind: 'evict-pod', pod: 'worker-1' });
    assert.ok(full(plan).indexOf('worker-1 (worker 1)') < full(plan).indexOf('worker-4 (worker 4)'));
  });
});
