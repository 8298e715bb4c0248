import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import type { Placement, ThroughputModel } from '../../../lib/model/throughput-model.js';
import { decideInitialConfig, type InitialConfigInput } from '../../../lib/policies/initial-config.js';
import type { JobProfile } from '../../../lib/policies/profiles.js';
import type { Change, ClusterCapacity, JobView, Resources, RoleView } from '../../../lib/types.js';
import { jobView, workerRole } from '../../support/job-views.js';
import { planText as told } from '../../support/plan-text.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG }; // mrg 5%, headroom 20%
const WORKER_REQ: Resources = { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 };

function role(overrides: Partial<RoleView> = {}): RoleView {
  return workerRole(WORKER_REQ, { minReplicas: 2, ...overrides });
}

function job(overrides: Partial<JobView> = {}, roles: RoleView[] = [role()]): JobView {
  return jobView({ signature: 'bert-large', localBatchSize: 32, ...overrides }, roles);
}

/** Empty nodes of 8 GPUs, 64 cores, 512 GiB; `gpus` limits the free GPUs of the last one. */
function capacity(nodes: number, lastNodeGpus = 8, cpuPerNode = 64_000): ClusterCapacity {
  return {
    nodes: Array.from({ length: nodes }, (_, i) => ({
      name: `n${i}`,
      allocatable: { cpuMillis: cpuPerNode, memoryBytes: 512 * GiB, gpus: 8 },
      allocated: { cpuMillis: 0, memoryBytes: 0, gpus: i === nodes - 1 ? 8 - lastNodeGpus : 0 },
      schedulable: true,
    })),
  };
}

function profile(overrides: Partial<JobProfile> = {}): JobProfile {
  return {
    version: 1,
    signature: 'bert-large',
    runs: 3,
    peaks: {},
    steps: [],
    updatedAt: 1_700_000_000,
    ...overrides,
  };
}

/** Closed-form model: throughput per worker count from a table, exact (no stdev). */
function tableModel(table: Record<number, number>, seen?: Placement[]): ThroughputModel {
  return {
    sampleCount: 6,
    distinctScales: 3,
    predict(p: Placement) {
      seen?.push(p);
      const tp = table[p.replicas] ?? 1;
      return { stepTime: (p.replicas * p.localBatchSize) / tp, stdev: 0, throughput: tp };
    },
  };
}

const DIMINISHING = { 2: 200, 3: 290, 4: 370, 5: 380, 6: 385, 7: 386, 8: 386 };

function input(overrides: Partial<InitialConfigInput> = {}): InitialConfigInput {
  return { job: job(), profile: undefined, model: undefined, capacity: capacity(1), config, ...overrides };
}

function workerReplicas(changes: Change[]): number | undefined {
  const c = changes.find((x) => x.kind === 'replicas' && x.role === 'Worker');
  return c?.kind === 'replicas' ? c.to : undefined;
}

function resource(changes: Change[], roleName: string, res: 'cpu' | 'memory', field: 'requests' | 'limits') {
  const c = changes.find(
    (x) => x.kind === 'resources' && x.role === roleName && x.resource === res && x.field === field,
  );
  return c?.kind === 'resources' ? c.to : undefined;
}

describe('decideInitialConfig without a profile', () => {
  it("keeps the user's configuration when it is within bounds and fits", () => {
    const plan = decideInitialConfig(input());
    assert.equal(plan.policy, 'initial');
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /no profile for signature bert-large: keep 4 workers/);
  });

  it('clamps into [min, max]', () => {
    assert.equal(
      workerReplicas(
        decideInitialConfig(input({ job: job({}, [role({ replicas: 12 })]), capacity: capacity(2) })).changes,
      ),
      8,
    );
    assert.equal(
      workerReplicas(decideInitialConfig(input({ job: job({}, [role({ replicas: 1 })]) })).changes),
      2,
    );
  });

  it('clamps into what fits now; when nothing fits, keeps the size (the job queues either way)', () => {
    const five = decideInitialConfig(
      input({ job: job({}, [role({ replicas: 8 })]), capacity: capacity(1, 5) }),
    );
    assert.equal(workerReplicas(five.changes), 5);
    assert.match(told(five), /free capacity holds 5 workers/);
    const none = decideInitialConfig(
      input({ job: job({}, [role({ replicas: 8 })]), capacity: capacity(1, 1) }),
    );
    assert.equal(workerReplicas(none.changes), undefined, 'no replica change: 8 is kept');
    assert.match(told(none), /size kept, pods will queue/);
  });

  it("leaves room for the job's other roles", () => {
    const master = role({ role: 'Master', replicas: 1, minReplicas: 1, maxReplicas: 1 });
    const plan = decideInitialConfig(
      input({ job: job({}, [master, role({ replicas: 8 })]), capacity: capacity(1, 8) }),
    );
    assert.equal(workerReplicas(plan.changes), 7);
  });

  it('does not touch a job that opted out', () => {
    assert.deepEqual(
      decideInitialConfig(input({ job: job({ managed: false }, [role({ replicas: 12 })]) })).changes,
      [],
    );
  });
});

describe('decideInitialConfig with a profile', () => {
  /** A job asking `replicas` workers, sized from the diminishing-returns profile (all nodes free unless given). */
  const asking = (replicas: number, free?: ClusterCapacity) =>
    decideInitialConfig(
      input({
        job: job({}, [role({ replicas })]),
        profile: profile(),
        model: tableModel(DIMINISHING),
        ...(free ? { capacity: free } : {}),
      }),
    );

  it('when nothing fits now (the job queues), picks the smallest worker count within hysteresis of the best', () => {
    // best 386 at 7; 370 * 1.05 = 388.5 > 386 so 4 is enough; 290 * 1.05 = 304.5 is not.
    const plan = asking(8, capacity(1, 0));
    assert.equal(workerReplicas(plan.changes), 4);
    assert.match(
      told(plan),
      /profile of bert-large \(3 runs\): 8 -> 4 workers: predicted -4\.1%; predicted 386 -> 370 samples\/s/,
    );
    assert.match(told(plan), /7 workers would reach 386 samples\/s, less than 5% more/);
  });

  it('never starts below the ask that fits in free capacity for a gain within hysteresis (the GPUs would idle)', () => {
    // 4 workers come within 5% of the best (386 at 7), but 8 are free and 8 were asked: 8 adds nothing over
    // 7, so 7; not 4, which would leave 3 GPUs idle for a prediction inside the model's noise.
    const plan = asking(8);
    assert.equal(workerReplicas(plan.changes), 7, plan.reason);
    assert.match(told(plan), /4 workers would come within 5%, but free capacity holds 7 of the 8 asked/);
    // asked 6 of 8 free: kept at 6 (386 at 7 is within 5% of 385 at 6, so no growth either)
    const six = asking(6);
    assert.equal(workerReplicas(six.changes), undefined, six.reason);
    // only 5 free: all 5, not 4
    const five = asking(6, capacity(1, 5));
    assert.equal(workerReplicas(five.changes), 5, five.reason);
  });

  it('grows above the ask only by more than the hysteresis over the ask itself', () => {
    // best 420 at 8; 5 is the smallest within 5% of it (399 * 1.05 < 420), but only 3% above the 4 asked: keep 4.
    const flat = tableModel({ 2: 200, 3: 300, 4: 399, 5: 412, 6: 415, 7: 418, 8: 420 });
    const plan = decideInitialConfig(input({ profile: profile(), model: flat }));
    assert.equal(workerReplicas(plan.changes), undefined, plan.reason);
    assert.match(told(plan), /keep 4 workers/);
    // 6% above the ask is worth it
    const steeper = tableModel({ 2: 200, 3: 300, 4: 400, 5: 424, 6: 426, 7: 428, 8: 430 });
    assert.equal(
      workerReplicas(decideInitialConfig(input({ profile: profile(), model: steeper })).changes),
      5,
    );
  });

  it('still starts below the ask when more workers are predicted slower', () => {
    const peaked = tableModel({ 2: 200, 3: 300, 4: 400, 5: 350, 6: 300, 7: 250, 8: 200 });
    const plan = decideInitialConfig(
      input({ job: job({}, [role({ replicas: 8 })]), profile: profile(), model: peaked }),
    );
    assert.equal(workerReplicas(plan.changes), 4, plan.reason);
  });

  it('takes one more worker when the smaller count falls just outside hysteresis', () => {
    const plan = decideInitialConfig(
      input({
        job: job({}, [role({ replicas: 8 })]),
        profile: profile(),
        model: tableModel({ ...DIMINISHING, 4: 367 }), // 367 * 1.05 = 385.35 < 386
        capacity: capacity(1, 0),
      }),
    );
    assert.equal(workerReplicas(plan.changes), 5);
  });

  it('is limited by what fits in free capacity', () => {
    const plan = decideInitialConfig(
      input({ profile: profile(), model: tableModel(DIMINISHING), capacity: capacity(1, 3) }),
    );
    assert.equal(workerReplicas(plan.changes), 3);
    assert.match(told(plan), /free capacity holds at most 3 workers/);
  });

  it('growth rule: a profile seen at one size only adds at most one worker to what the user asked', () => {
    const linear = { 2: 200, 3: 300, 4: 400, 5: 500, 6: 600, 7: 700, 8: 800 };
    const oneSize = { ...tableModel(linear), distinctScales: 1 };
    const plan = decideInitialConfig(input({ profile: profile(), model: oneSize, capacity: capacity(2) }));
    assert.equal(workerReplicas(plan.changes), 5, plan.reason);
    assert.match(told(plan), /growth rule: seen at one size only: one probe worker at a time/);
    // seen at two sizes: up to the step (the guardrail's bound on any write) above the ask
    const twoSizes = { ...tableModel(linear), distinctScales: 2 };
    const wide = decideInitialConfig(input({ profile: profile(), model: twoSizes, capacity: capacity(2) }));
    assert.equal(workerReplicas(wide.changes), 4 + config.maxReplicaStep);
  });

  it('stays within [min, max] whatever the model says', () => {
    const growing = tableModel({ 2: 200, 4: 400, 8: 800, 16: 1600 });
    const plan = decideInitialConfig(input({ profile: profile(), model: growing, capacity: capacity(4) }));
    assert.equal(workerReplicas(plan.changes), 8);
    const shrinking = tableModel({ 1: 1000, 2: 200, 3: 150, 4: 100 });
    assert.equal(
      workerReplicas(decideInitialConfig(input({ profile: profile(), model: shrinking })).changes),
      2,
    );
  });

  it('predicts with the global batch kept fixed and nodes spanned by dense packing', () => {
    const seen: Placement[] = [];
    decideInitialConfig(
      input({
        job: job({ globalBatchSize: 960 }),
        profile: profile(),
        model: tableModel(DIMINISHING, seen),
        capacity: capacity(2),
        config: { ...config, rightsizeHeadroom: 0 },
      }),
    );
    for (const p of seen) {
      assert.ok(Math.abs(p.replicas * p.localBatchSize - 960) < 1e-9);
      assert.equal(p.nodes, Math.ceil(p.replicas / 8));
    }
  });

  it('sizes requests from observed peaks plus headroom; memory never below the peak; GPUs untouched', () => {
    const plan = decideInitialConfig(
      input({
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
        model: tableModel(DIMINISHING),
      }),
    );
    assert.equal(resource(plan.changes, 'Worker', 'cpu', 'requests'), 2400);
    assert.equal(
      resource(plan.changes, 'Worker', 'memory', 'requests'),
      Math.ceil((8 * GiB * 1.2) / MiB) * MiB,
    );
    assert.ok(
      plan.changes.every((c) => c.kind !== 'resources' || c.resource === 'cpu' || c.resource === 'memory'),
    );
    assert.match(
      told(plan),
      /Worker requests from observed peak \+ 20%: cpu 4 cores -> 2.4 cores, memory 16\.0 GiB -> 9\.6 GiB/,
    );

    const capped = decideInitialConfig(
      input({
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
        config: { ...config, maxMemoryBytes: 8.5 * GiB },
      }),
    );
    assert.equal(resource(capped.changes, 'Worker', 'memory', 'requests'), 8.5 * GiB);
    const belowPeak = decideInitialConfig(
      input({
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
        config: { ...config, maxMemoryBytes: 4 * GiB },
      }),
    );
    assert.equal(resource(belowPeak.changes, 'Worker', 'memory', 'requests'), 8 * GiB);
  });

  it('raises a limit that the new request would exceed, and only then', () => {
    const peaks = { Worker: { cpuMillis: 5000, memoryBytes: 20 * GiB } };
    const plan = decideInitialConfig(input({ profile: profile({ peaks }) }));
    assert.equal(resource(plan.changes, 'Worker', 'cpu', 'limits'), 6000);
    assert.equal(resource(plan.changes, 'Worker', 'memory', 'limits'), 24 * GiB);
    const roomy = job({}, [role({ limits: { cpuMillis: 16_000, memoryBytes: 64 * GiB, gpus: 1 } })]);
    const none = decideInitialConfig(input({ job: roomy, profile: profile({ peaks }) }));
    assert.equal(resource(none.changes, 'Worker', 'cpu', 'limits'), undefined);
    assert.equal(resource(none.changes, 'Worker', 'memory', 'limits'), undefined);
  });

  it('counts what fits with the right-sized requests, not the submitted ones', () => {
    // 8 cores asked on a 24-core node: 3 fit; right-sized to 2.4 cores: 8 fit (GPU-bound).
    const fat = job({}, [role({ replicas: 8, requests: { ...WORKER_REQ, cpuMillis: 8000 } })]);
    const asSubmitted = decideInitialConfig(input({ job: fat, capacity: capacity(1, 8, 24_000) }));
    assert.equal(workerReplicas(asSubmitted.changes), 3);
    const rightsized = decideInitialConfig(
      input({
        job: fat,
        capacity: capacity(1, 8, 24_000),
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
      }),
    );
    assert.equal(workerReplicas(rightsized.changes), undefined);
  });

  it('without a model keeps the user count but still right-sizes', () => {
    const plan = decideInitialConfig(
      input({
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
        model: undefined,
      }),
    );
    assert.equal(workerReplicas(plan.changes), undefined);
    assert.equal(resource(plan.changes, 'Worker', 'cpu', 'requests'), 2400);
    assert.match(told(plan), /has no throughput model/);
  });
});

describe('decideInitialConfig: running jobs of the signature', () => {
  const tight: Resources = { cpuMillis: 4000, memoryBytes: 12 * GiB, gpus: 1 };
  const tightJob = (limits: Resources = tight) => job({}, [role({ requests: { ...tight }, limits })]);
  const peers = (memoryBytes: number, cpuMillis = 2000) => ({
    jobs: 2,
    peaks: { Worker: { cpuMillis, memoryBytes } },
  });
  const raisedTo = (peak: number) => Math.ceil((peak * 1.2) / MiB) * MiB;

  it('raises a memory limit they have outgrown to their peak plus headroom, the request with it', () => {
    const plan = decideInitialConfig(input({ job: tightJob(), peers: peers(14 * GiB) }));
    assert.equal(resource(plan.changes, 'Worker', 'memory', 'limits'), raisedTo(14 * GiB));
    assert.equal(resource(plan.changes, 'Worker', 'memory', 'requests'), raisedTo(14 * GiB));
    assert.match(
      told(plan),
      /Worker memory limit 12\.0 GiB -> 16\.8 GiB, the request with it: 2 running jobs of this signature already peaked at 14\.0 GiB/,
    );
    // within the headroom of the limit: the limit is raised to peak + headroom, never below the peak
    const close = decideInitialConfig(input({ job: tightJob(), peers: peers(11 * GiB) }));
    assert.equal(resource(close.changes, 'Worker', 'memory', 'limits'), raisedTo(11 * GiB));
    const capped = decideInitialConfig(
      input({ job: tightJob(), peers: peers(14 * GiB), config: { ...config, maxMemoryBytes: 13 * GiB } }),
    );
    assert.equal(resource(capped.changes, 'Worker', 'memory', 'limits'), 14 * GiB);
  });

  it('never lowers, never touches CPU, and leaves a job without a memory limit alone', () => {
    const below = decideInitialConfig(input({ job: tightJob(), peers: peers(4 * GiB, 64_000) }));
    assert.deepEqual(
      below.changes.filter((c) => c.kind === 'resources'),
      [],
    );
    const noLimit = decideInitialConfig(
      input({ job: tightJob({ ...tight, memoryBytes: 0 }), peers: peers(20 * GiB) }),
    );
    assert.deepEqual(
      noLimit.changes.filter((c) => c.kind === 'resources'),
      [],
    );
    const roomy = decideInitialConfig(
      input({ job: tightJob({ ...tight, memoryBytes: 32 * GiB }), peers: peers(20 * GiB) }),
    );
    assert.deepEqual(
      roomy.changes.filter((c) => c.kind === 'resources'),
      [],
    );
  });

  it("comes after the profile's right-size: one memory change each for the request and the limit", () => {
    const plan = decideInitialConfig(
      input({
        job: tightJob(),
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 8 * GiB } } }),
        peers: peers(14 * GiB),
      }),
    );
    const memory = plan.changes.filter((c) => c.kind === 'resources' && c.resource === 'memory');
    assert.equal(memory.length, 2, JSON.stringify(memory));
    assert.equal(resource(plan.changes, 'Worker', 'memory', 'requests'), raisedTo(14 * GiB));
    assert.equal(resource(plan.changes, 'Worker', 'memory', 'limits'), raisedTo(14 * GiB));
    assert.match(
      told(plan),
      /memory 12\.0 GiB -> 9\.6 GiB \(peak 8\.0 GiB\).*memory limit 12\.0 GiB -> 16\.8 GiB/,
    );
    // the profile's own raise stands when the peers peaked lower
    const profiled = decideInitialConfig(
      input({
        job: tightJob(),
        profile: profile({ peaks: { Worker: { cpuMillis: 2000, memoryBytes: 14 * GiB } } }),
        peers: peers(9 * GiB),
      }),
    );
    assert.equal(resource(profiled.changes, 'Worker', 'memory', 'limits'), raisedTo(14 * GiB));
    assert.doesNotMatch(told(profiled), /running job/);
  });
});

describe('decideInitialConfig: locality', () => {
  /** Nodes of 8 GPUs with these GPUs free. */
  const freeGpus = (...free: number[]): ClusterCapacity => ({
    nodes: free.map((f, i) => ({
      name: `n${i}`,
      allocatable: { cpuMillis: 64_000, memoryBytes: 512 * GiB, gpus: 8 },
      allocated: { cpuMillis: 0, memoryBytes: 0, gpus: 8 - f },
      schedulable: true,
    })),
  });
  const preferred = (replicas: number, cap: ClusterCapacity) =>
    decideInitialConfig(
      input({ job: job({}, [role({ replicas, minReplicas: 1 })]), capacity: cap }),
    ).changes.find((c) => c.kind === 'prefer-node');

  it('prefers the fullest node that holds all its workers now', () => {
    const plan = decideInitialConfig(
      input({ job: job({}, [role({ replicas: 4 })]), capacity: freeGpus(1, 8, 5, 4, 6) }),
    );
    assert.deepEqual(
      plan.changes.find((c) => c.kind === 'prefer-node'),
      { kind: 'prefer-node', role: 'Worker', node: 'n3' },
    );
    assert.match(told(plan), /locality: Worker pods prefer node n3, the fullest that holds all 4 now/);
  });

  it('prefers nothing for one worker, a job larger than any free node, or a one-node cluster', () => {
    assert.equal(preferred(1, freeGpus(1, 8)), undefined);
    assert.equal(preferred(5, freeGpus(4, 4, 4)), undefined, 'fits only spread');
    assert.equal(preferred(4, freeGpus(8)), undefined, 'one node: nothing to choose');
    assert.deepEqual(
      preferred(4, {
        nodes: [
          ...freeGpus(8).nodes,
          {
            ...(freeGpus(8).nodes[0] as ClusterCapacity['nodes'][number]),
            name: 'cordoned',
            schedulable: false,
          },
        ],
      }),
      undefined,
    );
  });
});

describe('decideInitialConfig for TFJob parameter servers', () => {
  const ps = (replicas: number) =>
    role({
      role: 'PS',
      replicas,
      minReplicas: 1,
      maxReplicas: 4,
      requests: { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 0 },
      limits: { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 0 },
    });
  const tf = (workers: number, psCount: number) =>
    job({ ref: { kind: 'TFJob', namespace: 'ml', name: 'resnet' } }, [
      role({ replicas: workers }),
      ps(psCount),
    ]);

  it("scales PS with the profile's PS:worker ratio", () => {
    const plan = decideInitialConfig(
      input({
        job: tf(6, 1),
        profile: profile({ best: { replicas: 4, ps: 2, localBatchSize: 32, throughput: 370 } }),
        model: tableModel({ ...DIMINISHING, 5: 400, 6: 420, 7: 421, 8: 421 }),
      }),
    );
    assert.equal(workerReplicas(plan.changes), undefined, 'the 6 workers asked stay');
    assert.ok(
      plan.changes.some((c) => c.kind === 'replicas' && c.role === 'PS' && c.from === 1 && c.to === 3),
    );
    assert.match(told(plan), /PS 1 -> 3 \(profile's best run had 0\.50 PS per worker\)/);
  });

  it("raises each role's memory limit by that role's peak in running jobs of the signature", () => {
    const peaks = {
      Worker: { cpuMillis: 2000, memoryBytes: 10 * GiB },
      PS: { cpuMillis: 1000, memoryBytes: 12 * GiB },
    };
    const plan = decideInitialConfig(input({ job: tf(2, 1), peers: { jobs: 1, peaks } }));
    assert.equal(resource(plan.changes, 'PS', 'memory', 'limits'), Math.ceil((12 * GiB * 1.2) / MiB) * MiB);
    assert.equal(
      resource(plan.changes, 'Worker', 'memory', 'limits'),
      undefined,
      'the 16 GiB Worker limit holds',
    );
  });

  it('keeps the PS count without a ratio in the profile', () => {
    const plan = decideInitialConfig(
      input({ job: tf(8, 1), profile: profile(), model: tableModel(DIMINISHING), capacity: capacity(1, 0) }),
    );
    assert.equal(workerReplicas(plan.changes), 4);
    assert.ok(!plan.changes.some((c) => c.kind === 'replicas' && c.role === 'PS'));
  });
});
