// Every decision's reason is one line of at most 120 characters with its plurals right (issue 46): run over the
// policies with a spread of inputs, and over the decisions of a simulated demo run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runDemo } from '../../../cli/demo.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { applyGuardrails } from '../../../lib/guardrails.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import { decideOnFault } from '../../../lib/policies/faults.js';
import { decideInitialConfig } from '../../../lib/policies/initial-config.js';
import { keptWithoutSamples } from '../../../lib/policies/missing-samples.js';
import { oneLine, SUMMARY_LIMIT, summarized, workersChange } from '../../../lib/policies/reason.js';
import { decideRebalance, type RebalanceJob } from '../../../lib/policies/rebalance.js';
import { decideRightsizing } from '../../../lib/policies/rightsizing.js';
import { decideTuning } from '../../../lib/policies/tuning.js';
import type {
  ClusterCapacity,
  ContainerUsage,
  JobView,
  Plan,
  PodView,
  Resources,
} from '../../../lib/types.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
const config = DEFAULT_POLICY_CONFIG;
const ONE_GPU: Resources = { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 };
const COUNTED = 'worker|pod|straggler|guardrail|run|restart|replica';

/** What is wrong with a reason as a one-line summary; nothing when it is right. */
function problems(reason: string): string[] {
  const out: string[] = [];
  if (reason.length > SUMMARY_LIMIT) out.push(`${reason.length} characters`);
  if (/[\r\n]/.test(reason)) out.push('more than one line');
  if (reason.trim() === '') out.push('empty');
  const one = new RegExp(`(?<![\\d.])1 (?:${COUNTED})s\\b`).exec(reason);
  if (one) out.push(`plural after 1: "${one[0]}"`);
  const many = new RegExp(`(?<![\\d.x])(?:0|[2-9]|\\d{2,}) (?:${COUNTED})(?![s\\w-])`).exec(reason);
  if (many) out.push(`singular after a count: "${many[0]}"`);
  return out;
}

function assertReadable(plans: readonly Plan[], where: string): void {
  assert.ok(plans.length > 0, `${where}: no plan to check`);
  const bad = plans
    .map((p) => ({ reason: p.reason, problems: problems(p.reason) }))
    .filter((p) => p.problems.length > 0);
  assert.deepEqual(bad, [], where);
}

function tableModel(table: Record<number, number>, distinctScales = 3): ThroughputModel {
  return {
    sampleCount: 6,
    distinctScales,
    predict(p: Placement) {
      const tp = table[p.replicas] ?? 1;
      return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
    },
  };
}

function job(name: string, workers: number, more: Partial<JobView> = {}): JobView {
  return {
    ref: { kind: 'PyTorchJob', namespace: 'ml', name },
    uid: `uid-${name}`,
    resourceVersion: '1',
    priority: 0,
    elastic: true,
    signature: name,
    localBatchSize: 32,
    roles: [
      {
        role: 'Worker',
        replicas: workers,
        minReplicas: 1,
        maxReplicas: 16,
        containerName: 'pytorch',
        containerIndex: 0,
        requests: ONE_GPU,
        limits: ONE_GPU,
      },
    ],
    managed: true,
    state: { oomCount: 0, paused: false },
    ...more,
  };
}

function capacity(used: number, total = 16): ClusterCapacity {
  return {
    nodes: [
      {
        name: 'n1',
        allocatable: { cpuMillis: total * 4000, memoryBytes: total * 16 * GiB, gpus: total },
        allocated: { cpuMillis: used * 4000, memoryBytes: used * 16 * GiB, gpus: used },
        schedulable: true,
      },
    ],
  };
}

function pod(index: number, more: Partial<PodView> = {}): PodView {
  return {
    name: `a-job-with-a-long-name-worker-${index}`,
    namespace: 'ml',
    role: 'Worker',
    index,
    phase: 'Running',
    nodeName: 'n1',
    restartCount: 0,
    requests: ONE_GPU,
    limits: ONE_GPU,
    ...more,
  };
}

const TABLES: Record<string, Record<number, number>> = {
  linear: { 1: 100, 2: 200, 3: 300, 4: 400, 5: 500, 6: 600, 7: 700, 8: 800 },
  flat: { 1: 100, 2: 101, 3: 102, 4: 103, 5: 104, 6: 105 },
  slowing: { 1: 300, 2: 290, 3: 280, 4: 270, 5: 260 },
  bending: { 1: 100, 2: 190, 3: 260, 4: 300, 5: 310, 6: 312 },
};

describe('reasons are one line of at most 120 characters, plurals right', () => {
  it('the checks themselves catch what they are for', () => {
    assert.deepEqual(problems('keep 1 worker: fine'), []);
    assert.deepEqual(problems('5 -> 1 worker: 4 pods freed'), []);
    assert.deepEqual(problems('worker 2 straggling at x1.50'), []);
    assert.equal(problems('keep 1 workers: no').length, 1);
    assert.equal(problems('5 -> 1 workers').length, 1);
    assert.equal(problems('freed 2 pod').length, 1);
    assert.equal(problems('x'.repeat(121)).length, 1);
    assert.equal(problems('a\nb').length, 1);
    assert.equal(workersChange(2, 1), '2 -> 1 worker');
    assert.equal(workersChange(1, 2), '1 -> 2 workers');
    assert.ok(oneLine('word '.repeat(60)).length <= SUMMARY_LIMIT);
  });

  it('tuning: growth, probes, shrinks and every kind of keep', () => {
    const plans: Plan[] = [];
    for (const [name, table] of Object.entries(TABLES)) {
      for (const k of [1, 2, 4, 5]) {
        for (const distinctScales of [1, 3]) {
          for (const used of [0, 10, 16]) {
            for (const remainingSeconds of [undefined, 120, 36_000]) {
              plans.push(
                decideTuning({
                  job: job(name, k),
                  model: tableModel(table, distinctScales),
                  current: { replicas: k, nodes: 1, localBatchSize: 32 },
                  capacity: capacity(used + k),
                  remainingSeconds,
                  config,
                  now: NOW,
                }),
              );
            }
          }
        }
      }
    }
    const model = tableModel(TABLES.linear ?? {});
    const current = { replicas: 2, nodes: 1, localBatchSize: 32 };
    const base = { model, current, capacity: capacity(2), remainingSeconds: undefined, config, now: NOW };
    plans.push(
      decideTuning({
        ...base,
        job: job('p', 2, { state: { oomCount: 0, paused: true, pauseReason: 'crash loop' } }),
      }),
      decideTuning({ ...base, job: job('r', 2, { elastic: false }) }),
      decideTuning({
        ...base,
        job: job('c', 2, { state: { oomCount: 0, paused: false, lastActionAt: NOW - 10 } }),
      }),
      decideTuning({ ...base, job: job('m', 5) }),
    );
    assert.ok(plans.some((p) => p.changes.length > 0) && plans.some((p) => p.changes.length === 0));
    assertReadable(plans, 'tuning');
  });

  it('rebalance: idle capacity, admission, reclaims and probes on priors', () => {
    const entry = (name: string, k: number, table?: Record<number, number>, priority = 0): RebalanceJob => ({
      job: job(name, k, { priority }),
      model: table ? tableModel(table) : undefined,
      ...(table ? {} : { priors: tableModel(TABLES.linear ?? {}) }),
      current: { replicas: k, nodes: 1, localBatchSize: 32 },
      remainingSeconds: 3600,
    });
    const plans: Plan[] = [];
    for (const used of [0, 4, 12]) {
      plans.push(
        ...decideRebalance({
          jobs: [
            entry('a-rather-long-job-name-for-the-team', 2, TABLES.linear),
            entry('flat', 4, TABLES.flat),
            entry('slowing', 4, TABLES.slowing),
            entry('bending', 3, TABLES.bending, 1),
            entry('fresh-without-samples', 2),
          ],
          pending: [
            { job: job('urgent-job-waiting-for-room', 2, { priority: 100 }), demand: ONE_GPU, pods: 2 },
          ],
          capacity: capacity(used + 15, 16),
          config,
          now: NOW,
        }),
        ...decideRebalance({
          jobs: [entry('alone', 2, TABLES.linear), entry('fresh', 2)],
          capacity: capacity(used, 16),
          config,
          now: NOW,
        }),
      );
    }
    assertReadable(plans, 'rebalance');
  });

  it('right-sizing, faults, keeps without samples and guardrails', () => {
    const plans: Plan[] = [];
    const usage = (cpuMillis: number, memoryBytes: number, n = 3): ContainerUsage[] =>
      Array.from({ length: n }, (_, i) => ({ pod: `w-${i}`, role: 'Worker', cpuMillis, memoryBytes }));
    for (const u of [usage(1000, 2 * GiB), usage(3900, 15 * GiB), usage(0, 0), usage(8000, 40 * GiB, 1)]) {
      plans.push(decideRightsizing({ job: job('sized', 3), usage: u, config, now: NOW }));
    }
    const oom = (i: number) =>
      pod(i, { restartCount: 1, lastTermination: { reason: 'OOMKilled', exitCode: 137 } });
    const gone = (i: number, reason: string) => pod(i, { phase: 'Failed', reason, nodeName: undefined });
    for (const pods of [
      [oom(0), oom(1), oom(2), pod(3)],
      [pod(0), gone(1, 'Preempted'), gone(2, 'Preempted'), gone(3, 'Evicted')],
      [pod(0), pod(1, { restartCount: 9, lastTermination: { reason: 'Error', exitCode: 1 } })],
      [pod(0), pod(1)],
    ]) {
      plans.push(decideOnFault({ job: job('faulty', 4), pods, capacity: capacity(16), config, now: NOW }));
    }
    for (const workers of [undefined, 0, 1, 2]) {
      for (const missing of ['no-series', 'no-progress'] as const) {
        const kept = keptWithoutSamples(workers, missing);
        plans.push({ ref: job('x', 1).ref, policy: 'rebalance', changes: [], ...kept });
      }
    }
    const guarded = applyGuardrails(
      {
        ref: job('g', 4).ref,
        policy: 'tuning',
        changes: [
          { kind: 'replicas', role: 'Worker', from: 41, to: 40 },
          { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 1, to: 100 * GiB },
        ],
        reason: '4 -> 40 workers: predicted +900.0% at step time + 1 sd, a plan from a policy gone wrong',
      },
      { job: job('g', 4), config: { ...config, namespaceAllowlist: [] }, now: NOW },
    );
    plans.push(guarded.plan);
    plans.push(
      decideInitialConfig({
        job: job('submitted', 4),
        profile: undefined,
        model: undefined,
        capacity: capacity(0),
        config,
      }),
    );
    assertReadable(plans, 'right-sizing, faults, keeps, guardrails, initial');
  });

  it("the actuator's guarantee: any reason comes out as one line within the limit", () => {
    const long: Plan = {
      ref: job('x', 1).ref,
      policy: 'tuning',
      changes: [],
      reason: `first clause that is itself far too long ${'and goes on '.repeat(20)}; second; third`,
    };
    const out = summarized(long);
    assert.deepEqual(problems(out.reason), []);
    assert.deepEqual(out.details, [long.reason]);
    assert.equal(summarized({ ...long, reason: 'short' }).reason, 'short');
  });

  it('every decision of a simulated demo run, from each policy that made one', async () => {
    const result = await runDemo({ seed: 1, timeCapSeconds: 3 * 3600 });
    const decisions = result.jobs.flatMap((j) => j.decisions);
    const policies = new Set(decisions.map((d) => d.policy));
    for (const p of ['initial', 'tuning', 'rebalance', 'rightsizing', 'fault'] as const)
      assert.ok(policies.has(p), p);
    const bad = decisions
      .map((d) => ({ policy: d.policy, reason: d.reason, problems: problems(d.reason) }))
      .filter((d) => d.problems.length > 0);
    assert.deepEqual(bad, []);
  });
});
