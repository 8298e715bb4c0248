// Guardrails (lib/guardrails.ts): property tests that no plan, whatever a policy proposes, leaves the bounds
// after the guardrails: per-job min/max, the step per decision, the memory cap, the cluster GPU budget, the
// cool-down and the namespace allowlist; plus the actuator applying them before it writes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { actOnJob } from '../../lib/actuator.js';
import {
  applyGuardrails,
  type GuardrailConfig,
  gpusPerReplica,
  placedReplicasOf,
} from '../../lib/guardrails.js';
import type { Change, JobView, Plan, RoleName, RoleView } from '../../lib/types.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

const GiB = 1024 ** 3;
const NOW = 1_800_000_000;
const ROLES: RoleName[] = ['Worker', 'Master', 'PS'];

const role = (name: RoleName) =>
  fc
    .record({
      replicas: fc.integer({ min: 0, max: 64 }),
      min: fc.integer({ min: 0, max: 16 }),
      span: fc.integer({ min: 0, max: 48 }),
      gpus: fc.integer({ min: 0, max: 8 }),
    })
    .map(
      ({ replicas, min, span, gpus }): RoleView => ({
        role: name,
        replicas,
        minReplicas: min,
        maxReplicas: min + span,
        containerName: 'pytorch',
        containerIndex: 0,
        requests: { cpuMillis: 1000, memoryBytes: 4 * GiB, gpus },
        limits: { cpuMillis: 1000, memoryBytes: 4 * GiB, gpus },
      }),
    );

const jobArb = fc
  .record({
    roles: fc.tuple(role('Worker'), role('Master'), role('PS')),
    namespace: fc.constantFrom('team-a', 'team-b', 'kube-system'),
    lastActionAgo: fc.option(fc.integer({ min: 0, max: 3_600 }), { nil: undefined }),
  })
  .map(({ roles, namespace, lastActionAgo }): JobView => {
    const view: JobView = {
      ref: { kind: 'PyTorchJob', namespace, name: 'j' },
      uid: 'u',
      resourceVersion: '1',
      priority: 0,
      elastic: true,
      signature: 's',
      roles,
      managed: true,
      state: { oomCount: 0, paused: false },
    };
    if (lastActionAgo !== undefined) view.state.lastActionAt = NOW - lastActionAgo;
    return view;
  });

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
    to: fc.integer({ min: 0, max: 4 * 1024 }).map((g) => g * GiB),
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

const RUNS = { numRuns: 2_000, seed: 7 };

describe('guardrails (property-based)', () => {
  it('no plan ever leaves the per-job bounds or the step per decision', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (job, config, p) => {
        const plan: Plan = { ref: job.ref, reason: 'r', ...p };
        const { plan: out } = applyGuardrails(plan, { job, config, now: NOW, clusterGpusAllocated: 0 });
        for (const c of out.changes) {
          if (c.kind !== 'replicas') continue;
          const r = job.roles.find((x) => x.role === c.role);
          assert.ok(Number.isInteger(c.to) && c.to >= 0, `integer replicas ${c.to}`);
          assert.ok(Math.abs(c.to - c.from) <= config.maxReplicaStep, `step ${c.from} -> ${c.to}`);
          if (!r) continue;
          const inRange = c.to >= r.minReplicas && c.to <= r.maxReplicas;
          // A job outside its bounds may only move towards them, by at most the step.
          const towards =
            (c.from > r.maxReplicas && c.to < c.from && c.to >= r.maxReplicas) ||
            (c.from < r.minReplicas && c.to > c.from && c.to <= r.minReplicas) ||
            c.to === c.from;
          assert.ok(inRange || towards, `${c.from} -> ${c.to} outside [${r.minReplicas}, ${r.maxReplicas}]`);
        }
      }),
      RUNS,
    );
  });

  it('never raises memory above the cap', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (job, config, p) => {
        const plan: Plan = { ref: job.ref, reason: 'r', ...p };
        const { plan: out } = applyGuardrails(plan, { job, config, now: NOW, clusterGpusAllocated: 0 });
        for (const c of out.changes) {
          if (c.kind !== 'resources' || c.resource !== 'memory') continue;
          assert.ok(c.to <= config.maxMemoryBytes || c.to <= c.from, `memory ${c.from} -> ${c.to}`);
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
        (job, config, p, allocated) => {
          const plan: Plan = { ref: job.ref, reason: 'r', ...p };
          const ctx = {
            job,
            config,
            now: NOW,
            ...(allocated === undefined ? {} : { clusterGpusAllocated: allocated }),
          };
          const { plan: out } = applyGuardrails(plan, ctx);
          let added = 0;
          for (const c of out.changes) {
            if (c.kind !== 'replicas' || c.to <= c.from) continue;
            const r = job.roles.find((x) => x.role === c.role);
            added += (c.to - c.from) * (r ? gpusPerReplica(r) : 0);
          }
          if (!Number.isFinite(config.maxClusterGpus) || added === 0) return;
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
      fc.property(jobArb, configArb, planArb, (job, config, p) => {
        const plan: Plan = { ref: job.ref, reason: 'r', ...p };
        const { plan: out } = applyGuardrails(plan, { job, config, now: NOW, clusterGpusAllocated: 0 });
        const last = job.state.lastActionAt;
        if (p.policy !== 'fault' && last !== undefined && NOW - last < config.cooldownSeconds)
          assert.deepEqual(out.changes, []);
        if (config.namespaceAllowlist.length > 0 && !config.namespaceAllowlist.includes(job.ref.namespace))
          assert.deepEqual(out.changes, []);
      }),
      RUNS,
    );
  });

  it('a queued job (no pod placed) may shrink inside the cool-down and beyond the step; never grow', () => {
    fc.assert(
      fc.property(jobArb, configArb, planArb, (job, config, p) => {
        const plan: Plan = { ref: job.ref, reason: 'r', ...p };
        const ctx = { job, config, now: NOW, clusterGpusAllocated: 0, queued: true };
        const { plan: out } = applyGuardrails(plan, ctx);
        const last = job.state.lastActionAt;
        const cooling = p.policy !== 'fault' && last !== undefined && NOW - last < config.cooldownSeconds;
        const reductionsOnly =
          p.changes.length > 0 && p.changes.every((c) => c.kind === 'replicas' && c.to < c.from);
        const allowed =
          config.namespaceAllowlist.length === 0 || config.namespaceAllowlist.includes(job.ref.namespace);
        for (const c of out.changes) {
          if (c.kind !== 'replicas') continue;
          if (c.to > c.from) {
            // Growth keeps the step bound and the cool-down, queued or not.
            assert.ok(c.to - c.from <= config.maxReplicaStep, `step ${c.from} -> ${c.to}`);
            assert.ok(!cooling, 'grew in the cool-down');
          }
          const r = job.roles.find((x) => x.role === c.role);
          if (r && c.to < c.from && c.from >= r.minReplicas) assert.ok(c.to >= r.minReplicas, 'below min');
        }
        if (cooling && !reductionsOnly) assert.deepEqual(out.changes, []);
        // A pure reduction inside the bounds is written as asked, however large and however recent the last.
        const inBounds = p.changes.every((c) => {
          if (c.kind !== 'replicas') return false;
          const r = job.roles.find((x) => x.role === c.role);
          return r !== undefined && Number.isInteger(c.to) && c.to >= r.minReplicas && c.to <= r.maxReplicas;
        });
        if (allowed && reductionsOnly && inBounds) assert.deepEqual(out.changes, p.changes);
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
    const job: JobView = {
      ref: TOY,
      uid: 'u',
      resourceVersion: '1',
      priority: 0,
      elastic: true,
      signature: 's',
      managed: true,
      state: { oomCount: 0, paused: false },
      roles: [
        {
          role: 'Worker',
          replicas: 2,
          minReplicas: 1,
          maxReplicas: 8,
          containerName: 'pytorch',
          containerIndex: 0,
          requests: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
          limits: { cpuMillis: 1000, memoryBytes: GiB, gpus: 1 },
        },
      ],
    };
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

describe('actuator applies the guardrails before writing', () => {
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
