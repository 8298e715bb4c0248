// Guardrails (lib/guardrails.ts): property tests that no plan, whatever a policy proposes and whatever `from` it
// claims, changes a real job beyond the bounds once written: per-job min/max, the step per decision, the memory
// cap, the cluster GPU budget, the cool-down and the namespace allowlist. Each case builds a real PyTorchJob
// object, reads its JobView with the adapter, guards the plan against that view, builds the JSON patch the
// actuator would send, applies it, and asserts on the job as written; plus the actuator applying them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import jsonpatch, { type Operation } from 'fast-json-patch';
import { actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { buildJobPatch, readJob } from '../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../lib/cluster/cluster-client.js';
import {
  applyGuardrails,
  declaredGpus,
  type GuardedPlan,
  type GuardrailConfig,
  gpusPerReplica,
  placedReplicasOf,
} from '../../lib/guardrails.js';
import { pytorchJobManifest } from '../../lib/sim/training-job-manifests.js';
import type { Change, JobView, Plan, RoleName, RoleView } from '../../lib/types.js';
import { jobView, workerRole } from '../support/job-views.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

const GiB = 1024 ** 3;
const NOW = 1_800_000_000;
/** PS is never in a PyTorchJob: a change to it must be dropped, not written somewhere. */
const ROLES: RoleName[] = ['Worker', 'Master', 'PS'];

interface Case {
  obj: KubeObject;
  view: JobView;
}

/** A real PyTorchJob object (Worker, and a Master when asked) and the JobView the adapter reads from it. */
const jobArb: fc.Arbitrary<Case> = fc
  .record({
    workers: fc.integer({ min: 0, max: 64 }),
    min: fc.integer({ min: 0, max: 16 }),
    span: fc.integer({ min: 0, max: 48 }),
    gpus: fc.integer({ min: 0, max: 8 }),
    memoryGiB: fc.integer({ min: 1, max: 2048 }),
    master: fc.boolean(),
    namespace: fc.constantFrom('team-a', 'team-b', 'kube-system'),
    lastActionAgo: fc.option(fc.integer({ min: 0, max: 3_600 }), { nil: undefined }),
    largestRun: fc.option(fc.integer({ min: 1, max: 80 }), { nil: undefined }),
  })
  .map(({ workers, min, span, gpus, memoryGiB, master, namespace, lastActionAgo, largestRun }): Case => {
    const sizing = { gpus, cpuMillis: 1000, memoryBytes: memoryGiB * GiB };
    const obj = pytorchJobManifest({
      name: 'j',
      namespace,
      app: 'a',
      workers,
      minReplicas: min,
      maxReplicas: min + span,
      sizing,
      ...(master ? { master: { gpus, cpuMillis: 1000, memoryBytes: 4 * GiB } } : {}),
    });
    obj.metadata.uid = 'u';
    obj.metadata.resourceVersion = '1';
    obj.metadata.annotations = { ...obj.metadata.annotations, [ANNOTATION.managed]: 'true' };
    const view = readJob(obj);
    if (lastActionAgo !== undefined) view.state.lastActionAt = NOW - lastActionAgo;
    if (largestRun !== undefined) view.state.largestRunWorkers = largestRun;
    return { obj, view };
  });

/** `from` is drawn apart from the job on purpose: the guardrails must not believe it. */
const changeArb: fc.Arbitrary<Change> = fc.oneof(
  fc.record({
    kind: fc.constant('replicas' as const),
    role: fc.constantFrom(...ROLES),
    from: fc.integer({ min: 0, max: 64 }),
    to: fc.oneof(fc.integer({ min: -10, max: 1_000 }), fc.constantFrom(0.5, Number.NaN, 1e9)),
  }),
  fc.record({
    kind: fc.constant('resources' as const),
    role: fc.constantFrom(...ROLES),
    resource: fc.constant('memory' as const),
    field: fc.constantFrom('requests' as const, 'limits' as const),
    from: fc.integer({ min: 0, max: 2 * 1024 }).map((g) => g * GiB),
    to: fc.oneof(
      fc.integer({ min: 0, max: 4 * 1024 }).map((g) => g * GiB),
      fc.constantFrom(-GiB, Number.NaN),
    ),
  }),
  fc.record({ kind: fc.constant('evict-pod' as const), pod: fc.constant('p-0') }),
);

const configArb: fc.Arbitrary<GuardrailConfig> = fc.record({
  namespaceAllowlist: fc.constantFrom([], ['team-a'], ['team-a', 'team-b']),
  maxReplicaStep: fc.integer({ min: 0, max: 8 }),
  cooldownSeconds: fc.integer({ min: 0, max: 900 }),
  maxMemoryBytes: fc.integer({ min: 1, max: 512 }).map((g) => g * GiB),
  maxClusterGpus: fc.oneof(fc.integer({ min: 0, max: 256 }), fc.constant(Number.POSITIVE_INFINITY)),
});

const planArb = fc.record({
  policy: fc.constantFrom(
    'initial' as const,
    'tuning' as const,
    'rightsizing' as const,
    'fault' as const,
    'straggler' as const,
    'rebalance' as const,
  ),
  changes: fc.array(changeArb, { maxLength: 6 }),
});

const RUNS = { numRuns: 1_000, seed: 7 };

/** The job as the API server would store it after the actuator's patch of the guarded plan. */
function written({ obj }: Case, guarded: GuardedPlan): JobView {
  const patch = buildJobPatch(obj, guarded.plan.changes, {});
  return readJob(jsonpatch.applyPatch(structuredClone(obj), patch as Operation[], true, false).newDocument);
}

/** The most a role may grow in one write: the step, or back to the Worker count the job has run at. */
function growthStep(c: Case, role: RoleView, config: GuardrailConfig): number {
  const back = role.role === 'Worker' ? (c.view.state.largestRunWorkers ?? 0) - role.replicas : 0;
  return Math.max(config.maxReplicaStep, back);
}

function memoryOf(view: JobView, role: RoleName, field: 'requests' | 'limits'): number | undefined {
  return view.roles.find((r) => r.role === role)?.[field].memoryBytes;
}

function guard(
  c: Case,
  config: GuardrailConfig,
  p: typeof planArb extends fc.Arbitrary<infer T> ? T : never,
  extra: { clusterGpusAllocated?: number; queued?: boolean } = { clusterGpusAllocated: 0 },
) {
  const plan: Plan = { ref: c.view.ref, reason: 'r', ...p };
  const out = applyGuardrails(plan, { job: c.view, config, now: NOW, ...extra });
  return { out, after: written(c, out) };
}

describe('guardrails (property-based, on the values written to a real job object)', () => {
  it("what is audited starts from the live values, never from the plan's from", () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (c, config, p) => {
        const { out } = guard(c, config, p);
        for (const change of out.plan.changes) {
          if (change.kind === 'replicas') {
            assert.equal(change.from, c.view.roles.find((r) => r.role === change.role)?.replicas);
          } else if (change.kind === 'resources') {
            assert.equal(change.from, memoryOf(c.view, change.role, change.field));
          }
        }
      }),
      RUNS,
    );
  });

  it('no written job leaves its per-role bounds or moves more than the step', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (c, config, p) => {
        const { after } = guard(c, config, p);
        for (const before of c.view.roles) {
          const now = after.roles.find((r) => r.role === before.role)?.replicas;
          assert.ok(now !== undefined && Number.isInteger(now) && now >= 0, `integer replicas ${now}`);
          const was = before.replicas;
          const step = now > was ? growthStep(c, before, config) : config.maxReplicaStep;
          assert.ok(Math.abs(now - was) <= step, `step ${was} -> ${now}`);
          const inRange = now >= before.minReplicas && now <= before.maxReplicas;
          // A job outside its bounds may only move towards them.
          const towards =
            (was > before.maxReplicas && now < was && now >= before.maxReplicas) ||
            (was < before.minReplicas && now > was && now <= before.minReplicas) ||
            now === was;
          assert.ok(
            inRange || towards,
            `${was} -> ${now} outside [${before.minReplicas}, ${before.maxReplicas}]`,
          );
        }
      }),
      RUNS,
    );
  });

  it('never writes memory above the cap unless the job already had more, and then never more than it had', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (c, config, p) => {
        const { after } = guard(c, config, p);
        for (const before of c.view.roles) {
          for (const field of ['requests', 'limits'] as const) {
            const was = before[field].memoryBytes;
            const now = memoryOf(after, before.role, field) ?? Number.NaN;
            assert.ok(now > 0, `memory ${was} -> ${now}`);
            assert.ok(now <= Math.max(config.maxMemoryBytes, was), `memory ${was} -> ${now}`);
          }
        }
      }),
      RUNS,
    );
  });

  it('never takes the cluster above its GPU budget, and adds nothing when the allocation is unknown', () => {
    fc.assert(
      fc.property(
        jobArb,
        configArb,
        planArb,
        fc.option(fc.integer({ min: 0, max: 300 }), { nil: undefined }),
        (c, config, p, allocated) => {
          const { after } = guard(
            c,
            config,
            p,
            allocated === undefined ? {} : { clusterGpusAllocated: allocated },
          );
          // The guardrails only ever shorten a change: each role ends between its live size and the last
          // valid target the plan asked for it, brought within the role's bounds.
          for (const before of c.view.roles) {
            const asked = p.changes.filter(
              (ch): ch is Change & { kind: 'replicas' } => ch.kind === 'replicas' && ch.role === before.role,
            );
            const target = asked.at(-1)?.to;
            const now = after.roles.find((r) => r.role === before.role)?.replicas ?? Number.NaN;
            const valid = target !== undefined && Number.isInteger(target) && target >= 0;
            const bounded = Math.min(
              Math.max(valid ? target : before.replicas, before.minReplicas),
              before.maxReplicas,
            );
            const lo = Math.min(before.replicas, target === undefined ? before.replicas : bounded);
            const hi = Math.max(before.replicas, target === undefined ? before.replicas : bounded);
            assert.ok(now >= lo && now <= hi, `${before.replicas} -> ${now}, asked ${target}`);
          }
          const added = declaredGpus(after) - declaredGpus(c.view);
          if (!Number.isFinite(config.maxClusterGpus) || added <= 0) return;
          assert.ok(allocated !== undefined, 'GPUs added with an unknown allocation');
          assert.ok(
            allocated + added <= config.maxClusterGpus,
            `${allocated} + ${added} > ${config.maxClusterGpus}`,
          );
        },
      ),
      RUNS,
    );
  });

  it('writes nothing in the cool-down except for faults, and nothing outside the allowlist', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (c, config, p) => {
        const { after } = guard(c, config, p);
        const last = c.view.state.lastActionAt;
        const cooling = p.policy !== 'fault' && last !== undefined && NOW - last < config.cooldownSeconds;
        const outside =
          config.namespaceAllowlist.length > 0 && !config.namespaceAllowlist.includes(c.view.ref.namespace);
        if (cooling || outside) assert.deepEqual(after.roles, c.view.roles);
      }),
      RUNS,
    );
  });

  it('a queued job (no pod placed) may shrink inside the cool-down and beyond the step; never grow', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (c, config, p) => {
        const { after } = guard(c, config, p, { clusterGpusAllocated: 0, queued: true });
        const last = c.view.state.lastActionAt;
        const cooling = p.policy !== 'fault' && last !== undefined && NOW - last < config.cooldownSeconds;
        const live = (role: RoleName) => c.view.roles.find((r) => r.role === role);
        // Reductions measured against the job, not against the plan's from.
        const reductionsOnly =
          p.changes.length > 0 &&
          p.changes.every((ch) => {
            if (ch.kind !== 'replicas') return false;
            const r = live(ch.role);
            return r !== undefined && Number.isInteger(ch.to) && ch.to >= 0 && ch.to < r.replicas;
          });
        const allowed =
          config.namespaceAllowlist.length === 0 || config.namespaceAllowlist.includes(c.view.ref.namespace);
        for (const before of c.view.roles) {
          const now = after.roles.find((r) => r.role === before.role)?.replicas ?? Number.NaN;
          if (now > before.replicas) {
            // Growth keeps the step bound and the cool-down, queued or not.
            assert.ok(
              now - before.replicas <= growthStep(c, before, config),
              `step ${before.replicas} -> ${now}`,
            );
            assert.ok(!cooling, 'grew in the cool-down');
          }
          if (now < before.replicas && before.replicas >= before.minReplicas)
            assert.ok(now >= before.minReplicas, 'below min');
        }
        if (cooling && !reductionsOnly) assert.deepEqual(after.roles, c.view.roles);
        // A pure reduction inside the bounds is written as asked, however large and however recent the last.
        if (!allowed || !reductionsOnly) return;
        for (const ch of p.changes) {
          if (ch.kind !== 'replicas') continue;
          const r = live(ch.role);
          if (!r || ch.to < r.minReplicas || ch.to > r.maxReplicas) return;
        }
        for (const ch of p.changes) {
          if (ch.kind !== 'replicas') continue;
          const last = p.changes.filter((x) => x.kind === 'replicas' && x.role === ch.role).at(-1);
          if (last !== ch) continue;
          assert.equal(after.roles.find((r) => r.role === ch.role)?.replicas, ch.to);
        }
      }),
      RUNS,
    );
  });

  it('a shrink that removes only replicas never placed passes the step and the cool-down; one more does not', () => {
    const worker: RoleView = {
      role: 'Worker',
      replicas: 16,
      minReplicas: 1,
      maxReplicas: 16,
      containerName: 'pytorch',
      containerIndex: 0,
      requests: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
      limits: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
    };
    const job: JobView = {
      ref: TOY,
      uid: 'u',
      resourceVersion: '1',
      priority: 0,
      elastic: true,
      signature: 's',
      roles: [worker],
      managed: true,
      state: { oomCount: 0, paused: false, lastActionAt: NOW - 10 },
    };
    const config: GuardrailConfig = {
      maxReplicaStep: 4,
      cooldownSeconds: 300,
      maxMemoryBytes: 64 * GiB,
      maxClusterGpus: Number.POSITIVE_INFINITY,
      namespaceAllowlist: [],
    };
    // workers 0..10 run, 11..15 are Pending without a node
    const pods = Array.from({ length: 16 }, (_, i) => ({
      name: `toy-worker-${i}`,
      namespace: 'team-a',
      role: 'Worker' as const,
      index: i,
      phase: i < 11 ? ('Running' as const) : ('Pending' as const),
      ...(i < 11 ? { nodeName: `n${i % 3}` } : {}),
      restartCount: 0,
      requests: worker.requests,
      limits: worker.limits,
    }));
    const placedReplicas = placedReplicasOf(pods);
    assert.deepEqual(placedReplicas, { Worker: 11 });
    const shrink = (to: number, policy: Plan['policy'] = 'rebalance'): Plan => ({
      ref: TOY,
      policy,
      reason: 'r',
      changes: [{ kind: 'replicas', role: 'Worker', from: 16, to }],
    });
    const ctx = { job, config, now: NOW, placedReplicas };
    assert.deepEqual(applyGuardrails(shrink(11), ctx).plan.changes, shrink(11).changes);
    // 10 would stop a running worker: the cool-down holds it back, and a fault (exempt from it) keeps the step.
    assert.deepEqual(applyGuardrails(shrink(10), ctx).plan.changes, []);
    const stepped = applyGuardrails(shrink(10, 'fault'), ctx).plan.changes[0];
    assert.equal(stepped?.kind === 'replicas' && stepped.to, 12);
    // without the placed counts the old rule holds: step 4
    const { placedReplicas: _, ...without } = ctx;
    const clamped = applyGuardrails(shrink(11, 'fault'), without).plan.changes[0];
    assert.equal(clamped?.kind === 'replicas' && clamped.to, 12);
  });

  it('leaves a plan inside every bound unchanged', () => {
    const job = jobView({ ref: TOY }, [
      workerRole(
        { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
        { replicas: 2, minReplicas: 1, maxReplicas: 8 },
      ),
    ]);
    const plan: Plan = {
      ref: TOY,
      policy: 'tuning',
      reason: 'r',
      changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 4 }],
    };
    const config: GuardrailConfig = {
      namespaceAllowlist: [],
      maxReplicaStep: 4,
      cooldownSeconds: 300,
      maxMemoryBytes: 8 * GiB,
      maxClusterGpus: 16,
    };
    const out = applyGuardrails(plan, { job, config, now: NOW, clusterGpusAllocated: 10 });
    assert.deepEqual(out, { plan, violations: [] });
    const tight = applyGuardrails(plan, { job, config, now: NOW, clusterGpusAllocated: 15 });
    assert.deepEqual(tight.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }]);
    assert.match(tight.plan.reason, /cluster GPU budget/);
  });
});

describe('guardrails: what each one says and does', () => {
  const config: GuardrailConfig = {
    namespaceAllowlist: [],
    maxReplicaStep: 2,
    cooldownSeconds: 300,
    maxMemoryBytes: 64 * GiB,
    maxClusterGpus: 8,
  };
  const job = (overrides: Partial<JobView> = {}) =>
    jobView({ ref: TOY, ...overrides }, [
      workerRole(
        { cpuMillis: 1000, memoryBytes: 16 * GiB, gpus: 1 },
        { replicas: 4, minReplicas: 1, maxReplicas: 16 },
      ),
    ]);
  const run = (
    changes: Change[],
    extra: Partial<Parameters<typeof applyGuardrails>[1]> = {},
    policy: Plan['policy'] = 'tuning',
  ) =>
    applyGuardrails(
      { ref: TOY, policy, reason: 'why', changes },
      { job: job(), config, now: NOW, clusterGpusAllocated: 0, ...extra },
    );
  const toOf = (out: GuardedPlan, i = 0) => (out.plan.changes[i] as { to: number } | undefined)?.to;

  it('the step bound lets Worker growth back to the most workers the job has run at, no further', () => {
    const ranAt = (largestRunWorkers?: number) => {
      const j = job();
      j.state.largestRunWorkers = largestRunWorkers;
      return j;
    };
    const grow = (to: number, largestRunWorkers?: number) =>
      applyGuardrails(
        {
          ref: TOY,
          policy: 'rebalance',
          reason: 'why',
          changes: [{ kind: 'replicas', role: 'Worker', from: 4, to }],
        },
        { job: ranAt(largestRunWorkers), config, now: NOW, clusterGpusAllocated: 0 },
      );
    // Step 2 from 4 workers: 6 at most, unless the job has run at more.
    assert.equal(toOf(grow(9, 9)), 9);
    assert.equal(toOf(grow(12, 9)), 9);
    assert.deepEqual(grow(12, 9).violations, ['Worker replicas 12 clamped to 9 (bounds, max step)']);
    assert.equal(toOf(grow(9)), 6, 'no size run at: the step');
    assert.equal(toOf(grow(9, 5)), 6, 'a size run at within the step: the step');
    // The size run at counts Worker pods: another role keeps its step.
    const withPs = jobView({ ref: TOY, state: { oomCount: 0, paused: false, largestRunWorkers: 9 } }, [
      workerRole({ cpuMillis: 1000, memoryBytes: GiB, gpus: 1 }),
      workerRole(
        { cpuMillis: 1000, memoryBytes: GiB, gpus: 0 },
        { role: 'PS', replicas: 1, maxReplicas: 16 },
      ),
    ]);
    const ps = applyGuardrails(
      {
        ref: TOY,
        policy: 'rebalance',
        reason: 'why',
        changes: [{ kind: 'replicas', role: 'PS', from: 1, to: 9 }],
      },
      { job: withPs, config, now: NOW, clusterGpusAllocated: 0 },
    );
    assert.equal(toOf(ps), 3);
    // A shrink keeps its step bound whatever the size run at.
    assert.equal(
      toOf(
        applyGuardrails(
          {
            ref: TOY,
            policy: 'rebalance',
            reason: 'why',
            changes: [{ kind: 'replicas', role: 'Worker', from: 4, to: 1 }],
          },
          { job: ranAt(9), config, now: NOW, clusterGpusAllocated: 0 },
        ),
      ),
      2,
    );
  });

  it('names every clamp in the violations and the reason, measured from the live values', () => {
    const out = run([
      { kind: 'replicas', role: 'Worker', from: 41, to: 40 },
      { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 1, to: 100 * GiB },
      { kind: 'replicas', role: 'PS', from: 1, to: 2 },
      { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'requests', from: 1000, to: Number.NaN },
    ]);
    assert.deepEqual(out.violations, [
      'Worker replicas from 41 is stale: live 4',
      `Worker memory limits from 1 is stale: live ${16 * GiB}`,
      'PS replicas: the job has no PS role',
      'Worker cpu requests NaN is not a valid target',
      'Worker replicas 40 clamped to 6 (bounds, max step)',
      `Worker memory ${100 * GiB} capped at ${64 * GiB} bytes`,
    ]);
    // One line for the reason; every clamp in full among the details.
    assert.equal(out.plan.reason, `why [guardrail: ${out.violations[0]} (+5 more)]`);
    assert.deepEqual(
      out.plan.details,
      out.violations.map((v) => `guardrail: ${v}`),
    );
    assert.deepEqual(out.plan.changes, [
      { kind: 'replicas', role: 'Worker', from: 4, to: 6 },
      {
        kind: 'resources',
        role: 'Worker',
        resource: 'memory',
        field: 'limits',
        from: 16 * GiB,
        to: 64 * GiB,
      },
      { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'requests', from: 1000, to: 1000 },
    ]);
  });

  it('a memory value already above the cap may come down but not go up; zero is not a target', () => {
    const big = jobView({ ref: TOY }, [
      workerRole({ cpuMillis: 1000, memoryBytes: 100 * GiB, gpus: 0 }, { replicas: 1 }),
    ]);
    const mem = (to: number): Plan => ({
      ref: TOY,
      policy: 'rightsizing',
      reason: 'r',
      changes: [
        { kind: 'resources', role: 'Worker', resource: 'memory', field: 'requests', from: 100 * GiB, to },
      ],
    });
    const ctx = { job: big, config, now: NOW };
    assert.equal(toOf(applyGuardrails(mem(90 * GiB), ctx)), 90 * GiB);
    assert.equal(toOf(applyGuardrails(mem(120 * GiB), ctx)), 100 * GiB);
    assert.deepEqual(applyGuardrails(mem(64 * GiB), ctx).violations, []);
    assert.equal(
      toOf(
        run([
          { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 16 * GiB, to: 0 },
        ]),
      ),
      16 * GiB,
    );
  });

  it('the GPU budget: what fits is written and the rest named; nothing added when the allocation is unknown', () => {
    const grow: Change = { kind: 'replicas', role: 'Worker', from: 4, to: 6 };
    const tight = run([grow], { clusterGpusAllocated: 7 });
    assert.deepEqual(tight.plan.changes, [{ ...grow, to: 5 }]);
    assert.deepEqual(tight.violations, ['Worker replicas 6 limited to 5 by the cluster GPU budget (8)']);
    assert.equal(toOf(run([grow], { clusterGpusAllocated: 9 })), 4, 'over budget: no growth, no shrink');
    const unknown = applyGuardrails(
      { ref: TOY, policy: 'tuning', reason: 'r', changes: [grow] },
      { job: job(), config, now: NOW },
    );
    assert.equal(toOf(unknown), 4);
    assert.deepEqual(run([grow], { clusterGpusAllocated: 6 }).violations, [], 'fits exactly');
    // Two growing roles share one budget.
    const two = jobView({ ref: TOY }, [
      workerRole({ cpuMillis: 1, memoryBytes: GiB, gpus: 2 }, { replicas: 1, maxReplicas: 9 }),
      {
        ...workerRole({ cpuMillis: 1, memoryBytes: GiB, gpus: 1 }, { replicas: 1, maxReplicas: 9 }),
        role: 'Master',
      },
    ]);
    const shared = applyGuardrails(
      {
        ref: TOY,
        policy: 'tuning',
        reason: 'r',
        changes: [
          { kind: 'replicas', role: 'Worker', from: 1, to: 3 },
          { kind: 'replicas', role: 'Master', from: 1, to: 3 },
        ],
      },
      { job: two, config: { ...config, maxClusterGpus: 10 }, now: NOW, clusterGpusAllocated: 5 },
    );
    assert.deepEqual([toOf(shared, 0), toOf(shared, 1)], [3, 2]);
  });

  it('the cool-down drops everything but faults, and says how long ago the last change was', () => {
    const shrink: Change = { kind: 'replicas', role: 'Worker', from: 4, to: 3 };
    const state = (lastActionAt: number) => ({
      job: job({ state: { oomCount: 0, paused: false, lastActionAt } }),
    });
    const out = run([shrink], state(NOW - 42.4));
    assert.deepEqual(out.plan.changes, []);
    assert.deepEqual(out.violations, ['cool-down: last change 42 s ago']);
    assert.equal(out.plan.reason, 'why [guardrail: cool-down: last change 42 s ago]');
    assert.deepEqual(
      run([shrink], state(NOW - 42), 'fault').plan.changes,
      [shrink],
      'a fault is answered at once',
    );
    assert.deepEqual(run([shrink], state(NOW + 10)).violations, ['cool-down: last change 0 s ago']);
    assert.deepEqual(
      run([shrink], state(NOW - 300)).plan.changes,
      [shrink],
      'exactly the cool-down ago: over',
    );
    assert.deepEqual(
      run([shrink], { ...state(NOW - 42), queued: true }).plan.changes,
      [shrink],
      'queued: may shrink',
    );
    assert.deepEqual(
      run([{ ...shrink, to: 5 }], { ...state(NOW - 42), queued: true }).plan.changes,
      [],
      'not grow',
    );
    assert.deepEqual(run([shrink], { ...state(NOW - 42), queued: false }).plan.changes, []);
  });

  it('the namespace allowlist drops the whole plan and says so; an empty plan passes untouched', () => {
    const elsewhere = { ...config, namespaceAllowlist: ['other'] };
    const out = applyGuardrails(
      { ref: TOY, policy: 'tuning', reason: 'r', changes: [{ kind: 'pause', reason: 'x' }] },
      { job: job(), config: elsewhere, now: NOW },
    );
    assert.deepEqual(out.plan.changes, []);
    assert.deepEqual(out.violations, ['namespace team-a is not in the allowlist']);
    assert.equal(out.plan.reason, 'r [guardrail: namespace team-a is not in the allowlist]');
    const listed = applyGuardrails(
      { ref: TOY, policy: 'tuning', reason: 'r', changes: [{ kind: 'pause', reason: 'x' }] },
      { job: job(), config: { ...config, namespaceAllowlist: ['other', 'team-a'] }, now: NOW },
    );
    assert.deepEqual(listed.plan.changes, [{ kind: 'pause', reason: 'x' }]);
    assert.equal(listed.plan.reason, 'r');
    const empty: Plan = { ref: TOY, policy: 'tuning', reason: 'r', changes: [] };
    const passed = applyGuardrails(empty, { job: job(), config: elsewhere, now: NOW });
    assert.equal(passed.plan, empty);
    assert.deepEqual(passed.violations, []);
  });

  it('a fractional or negative step moves by its whole part, at least 0', () => {
    const grow: Change = { kind: 'replicas', role: 'Worker', from: 4, to: 10 };
    const at = (maxReplicaStep: number) =>
      toOf(
        applyGuardrails(
          { ref: TOY, policy: 'tuning', reason: 'r', changes: [grow] },
          {
            job: job(),
            config: { ...config, maxReplicaStep, maxClusterGpus: Number.POSITIVE_INFINITY },
            now: NOW,
          },
        ),
      );
    assert.equal(at(1.9), 5);
    assert.equal(at(-1), 4);
    assert.equal(at(Number.POSITIVE_INFINITY), 4, 'no step bound: may only go down');
  });

  it('replicas may go to 0 (within bounds) but not below; CPU is never capped as memory', () => {
    const zeroable = jobView({ ref: TOY }, [
      workerRole({ cpuMillis: 1000, memoryBytes: GiB, gpus: 0 }, { replicas: 1, minReplicas: 0 }),
    ]);
    const at = (to: number) =>
      applyGuardrails(
        {
          ref: TOY,
          policy: 'tuning',
          reason: 'r',
          changes: [{ kind: 'replicas', role: 'Worker', from: 1, to }],
        },
        { job: zeroable, config, now: NOW },
      );
    assert.equal(toOf(at(0)), 0);
    assert.deepEqual(at(0).violations, []);
    assert.equal(toOf(at(-1)), 1);
    assert.deepEqual(at(-1).violations, ['Worker replicas -1 is not a valid target']);
    const cpu = applyGuardrails(
      {
        ref: TOY,
        policy: 'tuning',
        reason: 'r',
        changes: [
          { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'limits', from: 1000, to: 4000 },
        ],
      },
      { job: zeroable, config: { ...config, maxMemoryBytes: 2000 }, now: NOW },
    );
    assert.equal(toOf(cpu), 4000);
    assert.deepEqual(cpu.violations, []);
  });

  it('a queued job with a no-op change is not shrinking: the cool-down holds', () => {
    const out = run([{ kind: 'replicas', role: 'Worker', from: 4, to: 4 }], {
      job: job({ state: { oomCount: 0, paused: false, lastActionAt: NOW - 10 } }),
      queued: true,
    });
    assert.deepEqual(out.violations, ['cool-down: last change 10 s ago']);
  });

  it('the GPU budget counts whole replicas of several GPUs, and a shrink frees nothing for a growth', () => {
    const two = (workers: number, masters: number) =>
      jobView({ ref: TOY }, [
        workerRole({ cpuMillis: 1, memoryBytes: GiB, gpus: 2 }, { replicas: workers, maxReplicas: 9 }),
        {
          ...workerRole({ cpuMillis: 1, memoryBytes: GiB, gpus: 1 }, { replicas: masters, maxReplicas: 9 }),
          role: 'Master',
        },
      ]);
    const ctx = { config: { ...config, maxClusterGpus: 10 }, now: NOW, clusterGpusAllocated: 7 };
    const grow = applyGuardrails(
      {
        ref: TOY,
        policy: 'tuning',
        reason: 'r',
        changes: [{ kind: 'replicas', role: 'Worker', from: 1, to: 3 }],
      },
      { ...ctx, job: two(1, 1) },
    );
    assert.equal(toOf(grow), 2, '3 GPUs left: one more replica of 2');
    const shrinkThenGrow = applyGuardrails(
      {
        ref: TOY,
        policy: 'tuning',
        reason: 'r',
        changes: [
          { kind: 'replicas', role: 'Master', from: 3, to: 1 },
          { kind: 'replicas', role: 'Worker', from: 1, to: 4 },
        ],
      },
      { ...ctx, job: two(1, 3) },
    );
    assert.deepEqual([toOf(shrinkThenGrow, 0), toOf(shrinkThenGrow, 1)], [1, 2]);
  });

  it('counts the GPUs of a replica as the larger of its request and limit', () => {
    const role = workerRole(
      { cpuMillis: 1, memoryBytes: 1, gpus: 1 },
      { limits: { cpuMillis: 1, memoryBytes: 1, gpus: 3 } },
    );
    assert.equal(gpusPerReplica(role), 3);
    assert.equal(gpusPerReplica({ ...role, requests: { ...role.requests, gpus: 4 } }), 4);
    assert.equal(
      gpusPerReplica({
        ...role,
        requests: { ...role.requests, gpus: -2 },
        limits: { ...role.limits, gpus: -1 },
      }),
      0,
    );
    assert.equal(declaredGpus(jobView({}, [{ ...role, replicas: 5 }])), 15);
  });
});

describe('actuator applies the guardrails before writing', () => {
  it('writes from the live job, not from the plan: {from: 41, to: 40} on 2 workers, 1.5 TiB -> 1 TiB', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 64 }));
    const TiB = 1024 * GiB;
    const outcome = await actOnJob(
      TOY,
      () => ({
        ref: TOY,
        policy: 'tuning',
        reason: 'a plan built on a stale or forged view',
        changes: [
          { kind: 'replicas', role: 'Worker', from: 41, to: 40 },
          {
            kind: 'resources',
            role: 'Worker',
            resource: 'memory',
            field: 'limits',
            from: 1.5 * TiB,
            to: TiB,
          },
        ],
      }),
      {
        cluster: sim,
        clock: sim.clock.now,
        dryRun: false,
        logger: deps.logger,
        namespaceAllowlist: [],
        guardrails: { maxReplicaStep: 2, maxClusterGpus: 8, maxMemoryBytes: 256 * GiB },
      },
    );
    assert.equal(outcome.applied, true);
    const worker = readJob(await sim.getJob(TOY)).roles.find((r) => r.role === 'Worker');
    assert.equal(worker?.replicas, 4, 'two workers plus a step of two');
    assert.equal(worker?.limits.memoryBytes, 256 * GiB, 'capped');
    // The audit record says what really changed.
    assert.deepEqual(
      outcome.plan.changes.map((c) =>
        c.kind === 'replicas' || c.kind === 'resources' ? [c.from, c.to] : [],
      ),
      [
        [2, 4],
        [10 * GiB, 256 * GiB],
      ],
    );
    assert.match(
      [outcome.plan.reason, ...(outcome.plan.details ?? [])].join('; '),
      /from 41 is stale: live 2/,
    );
  });

  it('clamps a policy that asks for too much, and writes the clamped plan', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, minReplicas: 1, maxReplicas: 16 }));
    const outcome = await actOnJob(
      TOY,
      (s) => ({
        ref: TOY,
        policy: 'tuning',
        reason: 'a buggy policy',
        changes: [
          { kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 1, to: 100 },
          {
            kind: 'resources',
            role: 'Worker',
            resource: 'memory',
            field: 'limits',
            from: 10 * GiB,
            to: 4096 * GiB,
          },
        ],
      }),
      { cluster: sim, clock: sim.clock.now, dryRun: false, logger: deps.logger, namespaceAllowlist: [] },
    );
    assert.equal(outcome.applied, true);
    assert.deepEqual(
      outcome.plan.changes.map((c) => (c.kind === 'replicas' || c.kind === 'resources' ? c.to : undefined)),
      [5, 256 * GiB],
    );
    assert.match(outcome.plan.reason, /guardrail/);
  });

  it('holds a scale-up within the cluster GPU budget computed from the current allocation', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 1, minReplicas: 1, maxReplicas: 16 }));
    sim.step(60);
    const decide = (s: { view: JobView }): Plan => ({
      ref: TOY,
      policy: 'rebalance',
      reason: 'more',
      changes: [{ kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 1, to: 4 }],
    });
    const base = {
      cluster: sim,
      clock: sim.clock.now,
      dryRun: false,
      logger: deps.logger,
      namespaceAllowlist: [],
    };
    const outcome = await actOnJob(TOY, decide, { ...base, guardrails: { maxClusterGpus: 2 } });
    assert.equal(outcome.applied, true);
    assert.deepEqual(outcome.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
    const none = await actOnJob(TOY, decide, {
      ...base,
      guardrails: { maxClusterGpus: 2, cooldownSeconds: 0 },
    });
    assert.equal(none.applied, false, 'budget used up');
  });
});
