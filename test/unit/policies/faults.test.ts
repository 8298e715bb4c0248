import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import { decideOnFault } from '../../../lib/policies/faults.js';
import type {
  Change,
  ClusterCapacity,
  JobView,
  NodeView,
  PodView,
  Resources,
  RoleView,
} from '../../../lib/types.js';
import { jobView, workerRole } from '../../support/job-views.js';
import { planText as told } from '../../support/plan-text.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG };

function worker(overrides: Partial<RoleView> = {}): RoleView {
  return workerRole(
    { cpuMillis: 4000, memoryBytes: 6 * GiB, gpus: 1 },
    { minReplicas: 2, limits: { cpuMillis: 8000, memoryBytes: 8 * GiB, gpus: 1 }, ...overrides },
  );
}

function job(overrides: Partial<JobView> = {}, roles: RoleView[] = [worker()]): JobView {
  return jobView(overrides, roles);
}

function pod(index: number, overrides: Partial<PodView> = {}): PodView {
  const role = worker();
  return {
    name: `worker-${index}`,
    namespace: 'ml',
    role: 'Worker',
    index,
    phase: 'Running',
    nodeName: `node-${index}`,
    restartCount: 0,
    requests: { ...role.requests },
    limits: { ...role.limits },
    ...overrides,
  };
}

function healthyPods(n = 4): PodView[] {
  return Array.from({ length: n }, (_, i) => pod(i));
}

/** A node with exactly `free` left over. */
function node(name: string, free: Partial<Resources>, schedulable = true): NodeView {
  const allocatable = { cpuMillis: 64_000, memoryBytes: 512 * GiB, gpus: 8 };
  const left = { cpuMillis: 0, memoryBytes: 0, gpus: 0, ...free };
  return {
    name,
    allocatable,
    allocated: {
      cpuMillis: allocatable.cpuMillis - left.cpuMillis,
      memoryBytes: allocatable.memoryBytes - left.memoryBytes,
      gpus: allocatable.gpus - left.gpus,
    },
    schedulable,
  };
}

const FULL: ClusterCapacity = { nodes: [node('full', {})] };
/** Room for exactly one more Worker (4 cores, 6 GiB, 1 GPU). */
const ROOM_FOR_ONE: ClusterCapacity = {
  nodes: [node('spare', { cpuMillis: 4000, memoryBytes: 6 * GiB, gpus: 1 })],
};

function decide(j: JobView, pods: PodView[], capacity: ClusterCapacity = FULL, cfg = config) {
  return decideOnFault({ job: j, pods, capacity, config: cfg, now: NOW });
}

function oomKilled(index: number, overrides: Partial<PodView> = {}): PodView {
  return pod(index, {
    restartCount: 1,
    lastTermination: { reason: 'OOMKilled', exitCode: 137 },
    ...overrides,
  });
}

type ResourceChange = Extract<Change, { kind: 'resources' }>;

function memoryChange(changes: Change[], field: 'requests' | 'limits'): ResourceChange | undefined {
  return changes.find(
    (c): c is ResourceChange => c.kind === 'resources' && c.resource === 'memory' && c.field === field,
  );
}

describe('decideOnFault: no fault and paused', () => {
  it('leaves a healthy job alone with reason "no fault"', () => {
    const plan = decide(job(), healthyPods());
    assert.deepEqual(plan.changes, []);
    assert.equal(plan.reason, 'no fault');
    assert.equal(plan.policy, 'fault');
    assert.deepEqual(plan.ref, job().ref);
  });

  it('does nothing while paused, even on an OOM kill, and says why', () => {
    const paused = job({ state: { oomCount: 0, paused: true, pauseReason: 'crash loop' } });
    const plan = decide(paused, [oomKilled(2), pod(0), pod(1), pod(3)]);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /paused \(crash loop\)/);
  });
});

describe('decideOnFault: OOM kills', () => {
  it('on a kind whose pod template cannot change (a running Job): no raise, no eviction, the refusal as reason', () => {
    const refused =
      "Job cannot change /spec: a running Job's pod template is immutable (resources cannot change without recreating it)";
    const batch = job({
      ref: { kind: 'Job', namespace: 'ml', name: 'ddp' },
      refusals: { resources: refused },
    });
    const plan = decide(batch, [pod(0), pod(1), oomKilled(2), pod(3)]);
    assert.deepEqual(plan.changes, []);
    assert.match(
      told(plan),
      /worker-2 OOMKilled \(exit 137\) at 8\.0 GiB limit; memory not raised: Job cannot change \/spec: a running Job's pod template is immutable/,
    );
  });

  it('raises the memory limit by the factor and keeps a lower request untouched', () => {
    const plan = decide(job(), [pod(0), pod(1), oomKilled(2), pod(3)]);
    assert.deepEqual(plan.changes, [
      { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 8 * GiB, to: 12 * GiB },
      // Pod resources are immutable: only a recreated pod runs at the new size.
      { kind: 'evict-pod', pod: 'worker-2', toResize: true },
    ]);
    assert.match(told(plan), /worker-2 OOMKilled \(exit 137\) at 8\.0 GiB limit/);
    assert.match(told(plan), /raising Worker memory to 12\.0 GiB \(x1\.50, cap 256\.0 GiB\)/);
  });

  it('raises request together with limit when they were equal (Guaranteed QoS kept)', () => {
    const guaranteed = worker({ requests: { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 1 } });
    const plan = decide(job({}, [guaranteed]), [oomKilled(1, { requests: guaranteed.requests })]);
    assert.equal(memoryChange(plan.changes, 'limits')?.to, 12 * GiB);
    assert.deepEqual(memoryChange(plan.changes, 'requests'), {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'requests',
      from: 8 * GiB,
      to: 12 * GiB,
    });
  });

  it('caps the raise at maxMemoryBytes', () => {
    const big = worker({ limits: { cpuMillis: 8000, memoryBytes: 200 * GiB, gpus: 1 } });
    const plan = decide(job({}, [big]), [oomKilled(0, { limits: big.limits })]);
    assert.equal(memoryChange(plan.changes, 'limits')?.to, 256 * GiB);
  });

  it('raises a limit just below the cap to the cap, and pauses once the limit is at the cap', () => {
    const below = worker({ limits: { cpuMillis: 8000, memoryBytes: 256 * GiB - 1024 ** 2, gpus: 1 } });
    const raised = decide(job({}, [below]), [oomKilled(0, { limits: below.limits })]);
    assert.equal(memoryChange(raised.changes, 'limits')?.to, 256 * GiB);

    const atCap = worker({ limits: { cpuMillis: 8000, memoryBytes: 256 * GiB, gpus: 1 } });
    const plan = decide(job({}, [atCap]), [oomKilled(0, { limits: atCap.limits })]);
    assert.equal(plan.changes.length, 1);
    assert.equal(plan.changes[0]?.kind, 'pause');
    assert.match(told(plan), /OOM at the cap/);
  });

  it('does not raise again when the pod ran with less than the role already has (raise already applied)', () => {
    const alreadyRaised = worker({ limits: { cpuMillis: 8000, memoryBytes: 12 * GiB, gpus: 1 } });
    const plan = decide(job({}, [alreadyRaised]), [oomKilled(2)]); // pod still carries the old 8 GiB limit
    assert.deepEqual(
      plan.changes,
      [{ kind: 'evict-pod', pod: 'worker-2', toResize: true }],
      'no second raise; the pod is recreated',
    );
    assert.match(told(plan), /already raised to 12\.0 GiB; evicting/);
  });

  it('raises again when the pod already ran with the raised limit and was killed again', () => {
    const raised = worker({ limits: { cpuMillis: 8000, memoryBytes: 12 * GiB, gpus: 1 } });
    const plan = decide(job({}, [raised]), [oomKilled(2, { limits: raised.limits })]);
    assert.equal(memoryChange(plan.changes, 'limits')?.to, 18 * GiB);
  });

  it('a pod resized in place whose kubelet still runs it at the old size: evicted, not raised again', () => {
    const raised = worker({ limits: { cpuMillis: 8000, memoryBytes: 12 * GiB, gpus: 1 } });
    const old = oomKilled(2);
    // The spec says 12 GiB (the resize was written), the kubelet reports 8 GiB (resize pending).
    const pending = { ...old, limits: raised.limits, actual: { requests: old.requests, limits: old.limits } };
    const plan = decide(job({}, [raised]), [pending]);
    assert.deepEqual(plan.changes, [{ kind: 'evict-pod', pod: 'worker-2', toResize: true }]);
    assert.match(told(plan), /OOMKilled at 8\.0 GiB, but Worker memory was already raised/);
    // Reported at the new size: it really ran with 12 GiB, so it is raised again.
    const reached = { ...pending, actual: { requests: old.requests, limits: raised.limits } };
    assert.equal(memoryChange(decide(job({}, [raised]), [reached]).changes, 'limits')?.to, 18 * GiB);
  });

  it('raises once per role however many of its pods were OOM-killed', () => {
    const plan = decide(job(), [oomKilled(0), oomKilled(1), pod(2), pod(3)]);
    assert.equal(plan.changes.filter((c) => c.kind === 'resources').length, 1);
    assert.deepEqual(
      plan.changes.filter((c) => c.kind === 'evict-pod'),
      [
        { kind: 'evict-pod', pod: 'worker-0', toResize: true },
        { kind: 'evict-pod', pod: 'worker-1', toResize: true },
      ],
    );
    assert.match(told(plan), /worker-0, worker-1 OOMKilled/);
  });

  it('treats exit code 137 without the OOMKilled reason as not an OOM kill', () => {
    const sigkilled = pod(2, { restartCount: 1, lastTermination: { reason: 'Error', exitCode: 137 } });
    const plan = decide(job(), [pod(0), pod(1), sigkilled, pod(3)]);
    assert.deepEqual(plan.changes, []);
    assert.equal(plan.reason, 'no fault');
  });

  it('grows the request when the role has no memory limit, and only once', () => {
    const noLimit = worker({ limits: { cpuMillis: 0, memoryBytes: 0, gpus: 1 } });
    const killed = oomKilled(0, { limits: noLimit.limits });
    const plan = decide(job({}, [noLimit]), [killed]);
    assert.deepEqual(plan.changes, [
      {
        kind: 'resources',
        role: 'Worker',
        resource: 'memory',
        field: 'requests',
        from: 6 * GiB,
        to: 9 * GiB,
      },
      { kind: 'evict-pod', pod: 'worker-0', toResize: true },
    ]);
    const grown = worker({ limits: noLimit.limits, requests: { ...noLimit.requests, memoryBytes: 9 * GiB } });
    assert.deepEqual(decide(job({}, [grown]), [killed]).changes, [
      { kind: 'evict-pod', pod: 'worker-0', toResize: true },
    ]);
  });
});

describe('decideOnFault: crash loops', () => {
  const crashing = (restartCount: number) =>
    pod(1, { restartCount, lastTermination: { reason: 'Error', exitCode: 1 } });

  it('pauses at crashLoopRestarts restarts, naming the pod and count', () => {
    const plan = decide(job(), [pod(0), crashing(5), pod(2), pod(3)]);
    assert.equal(plan.changes.length, 1);
    const change = plan.changes[0];
    assert.equal(change?.kind, 'pause');
    assert.match(told(plan), /worker-1 restarted 5 times/);
  });

  it('does not pause one restart below the limit', () => {
    const plan = decide(job(), [pod(0), crashing(4), pod(2), pod(3)]);
    assert.deepEqual(plan.changes, []);
  });

  it('does not count repeated OOM kills as a crash loop: memory is raised instead', () => {
    const plan = decide(job(), [oomKilled(1, { restartCount: 7 }), pod(0), pod(2), pod(3)]);
    assert.equal(memoryChange(plan.changes, 'limits')?.to, 12 * GiB);
  });

  it('wins over OOM and eviction: pause only', () => {
    const pods = [crashing(6), oomKilled(0), pod(2, { phase: 'Failed', reason: 'Evicted' }), pod(3)];
    const plan = decide(job(), pods);
    assert.deepEqual(
      plan.changes.map((c) => c.kind),
      ['pause'],
    );
  });
});

describe('decideOnFault: evicted, preempted, failed and unschedulable pods', () => {
  const evicted = (i: number) => pod(i, { phase: 'Failed', reason: 'Evicted', nodeName: undefined });

  it('shrinks an elastic job to the running replicas when nothing more fits', () => {
    const plan = decide(job(), [pod(0), pod(1), pod(2), evicted(3)], FULL);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
    assert.match(told(plan), /worker-3 Evicted/);
    assert.match(told(plan), /3 running \+ 0 more fit .* shrinking Worker from 4 to 3/);
  });

  it('keeps the replicas when the lost pod fits back into free capacity', () => {
    const plan = decide(job(), [pod(0), pod(1), pod(2), evicted(3)], ROOM_FOR_ONE);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /all 4 Worker replicas fit/);
  });

  it('counts what fits per node: free CPU split over two nodes does not hold one pod', () => {
    const split: ClusterCapacity = {
      nodes: [
        node('a', { cpuMillis: 3000, memoryBytes: 64 * GiB, gpus: 4 }),
        node('b', { cpuMillis: 3000, memoryBytes: 64 * GiB, gpus: 4 }),
      ],
    };
    const plan = decide(job(), [pod(0), pod(1), pod(2), evicted(3)], split);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
  });

  it('requires GPU, CPU and memory all to fit on the node', () => {
    for (const free of [
      { cpuMillis: 4000, memoryBytes: 6 * GiB, gpus: 0 },
      { cpuMillis: 3999, memoryBytes: 6 * GiB, gpus: 1 },
      { cpuMillis: 4000, memoryBytes: 6 * GiB - 1, gpus: 1 },
    ]) {
      const plan = decide(job(), [pod(0), pod(1), pod(2), evicted(3)], { nodes: [node('n', free)] });
      assert.deepEqual(
        plan.changes,
        [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }],
        JSON.stringify(free),
      );
    }
  });

  it('ignores free capacity on unschedulable nodes', () => {
    const cordoned: ClusterCapacity = {
      nodes: [node('cordoned', { cpuMillis: 64_000, memoryBytes: 256 * GiB, gpus: 8 }, false)],
    };
    const plan = decide(job(), [pod(0), pod(1), pod(2), evicted(3)], cordoned);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
  });

  it('shrinks to running + what fits when several pods are lost', () => {
    const pods = [pod(0), evicted(1), evicted(2), evicted(3)];
    const twoSlots: ClusterCapacity = {
      nodes: [node('n', { cpuMillis: 8000, memoryBytes: 12 * GiB, gpus: 2 })],
    };
    const plan = decide(job({}, [worker({ minReplicas: 1 })]), pods, twoSlots);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
  });

  it('never goes below minReplicas: keeps minReplicas and says pods will wait pending', () => {
    const plan = decide(
      job({}, [worker({ minReplicas: 3 })]),
      [pod(0), evicted(1), evicted(2), evicted(3)],
      FULL,
    );
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
    assert.match(told(plan), /below minReplicas 3: shrinking Worker from 4 to 3, pods wait pending/);
  });

  it('makes no replica change when already at minReplicas and nothing fits', () => {
    const atMin = worker({ replicas: 2, minReplicas: 2 });
    const plan = decide(job({}, [atMin]), [pod(0), evicted(1)], FULL);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /below minReplicas 2: keeping 2 Worker replicas, pods wait pending/);
    assert.match(told(plan), /pods wait pending/);
  });

  it('treats Preempted, Failed (non-OOM) and unschedulable Pending pods as lost', () => {
    for (const lost of [
      pod(3, { phase: 'Failed', reason: 'Preempted' }),
      pod(3, { phase: 'Failed', lastTermination: { reason: 'Error', exitCode: 1 } }),
      pod(3, { phase: 'Pending', nodeName: undefined }),
    ]) {
      const plan = decide(job(), [pod(0), pod(1), pod(2), lost], FULL);
      assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }], lost.reason);
    }
  });

  it('leaves a queued elastic job (no pod bound) to the rebalance admission, but shrinks a partly placed one', () => {
    const waiting = (i: number) => pod(i, { phase: 'Pending', nodeName: undefined });
    const queued = decide(job(), [waiting(0), waiting(1), waiting(2), waiting(3)], FULL);
    assert.deepEqual(queued.changes, []);
    assert.equal(queued.reason, 'no fault');
    // One pod bound: the job is stranded, not queued; its unplaceable peers are lost as before.
    const partly = decide(
      job({}, [worker({ minReplicas: 1 })]),
      [pod(0), waiting(1), waiting(2), waiting(3)],
      FULL,
    );
    assert.deepEqual(partly.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 1 }]);
    // A non-elastic queued job is never resized either way.
    const rigid = decide(job({ elastic: false }), [waiting(0), waiting(1), waiting(2), waiting(3)], FULL);
    assert.deepEqual(rigid.changes, []);
  });

  it('counts pods bound and still starting as placed: only the pods with no room go', () => {
    // Grown 4 -> 8 on a cluster that had room for two more: two new pods bound (starting), two fit nowhere.
    const j = job({}, [worker({ replicas: 8 })]);
    const pods = [
      ...[0, 1, 2, 3].map((i) => pod(i)),
      ...[4, 5].map((i) => pod(i, { phase: 'Pending' })),
      ...[6, 7].map((i) => pod(i, { phase: 'Pending', nodeName: undefined })),
    ];
    const d = decide(j, pods, FULL);
    assert.deepEqual(d.changes, [{ kind: 'replicas', role: 'Worker', from: 8, to: 6 }]);
    assert.match(
      told(d),
      /4 running \+ 2 starting \+ 0 more fit in free capacity = 6: shrinking Worker from 8 to 6/,
    );
    // With room for them, the two without a node are not lost: the scheduler has yet to bind them.
    const roomy = { nodes: [node('spare', { cpuMillis: 8000, memoryBytes: 12 * GiB, gpus: 2 })] };
    assert.deepEqual(decide(j, pods, roomy).changes, []);
  });

  it('does not treat a Pending pod that fits somewhere, or one already bound to a node, as lost', () => {
    const fits = decide(
      job(),
      [pod(0), pod(1), pod(2), pod(3, { phase: 'Pending', nodeName: undefined })],
      ROOM_FOR_ONE,
    );
    assert.equal(fits.reason, 'no fault');
    const bound = decide(job(), [pod(0), pod(1), pod(2), pod(3, { phase: 'Pending' })], FULL);
    assert.equal(bound.reason, 'no fault');
  });

  it('does not shrink a Failed OOM-killed pod: it is an OOM, memory is raised', () => {
    const plan = decide(job(), [pod(0), pod(1), pod(2), oomKilled(3, { phase: 'Failed' })], FULL);
    assert.deepEqual(
      plan.changes.map((c) => c.kind),
      ['resources'],
    );
  });

  it('does not change replicas of a non-elastic job, and says it is not elastic', () => {
    const plan = decide(job({ elastic: false }), [pod(0), pod(1), pod(2), evicted(3)], FULL);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /not elastic/);
  });

  it('puts an OOM raise and an eviction shrink in the same plan', () => {
    const plan = decide(job(), [oomKilled(0), pod(1), pod(2), evicted(3)], FULL);
    assert.deepEqual(plan.changes, [
      { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 8 * GiB, to: 12 * GiB },
      { kind: 'evict-pod', pod: 'worker-0', toResize: true },
      { kind: 'replicas', role: 'Worker', from: 4, to: 3 },
    ]);
  });

  it('does not let two roles count the same free slot twice', () => {
    const ps = worker({ role: 'PS', replicas: 2, minReplicas: 1 });
    const tf = job({ ref: { kind: 'TFJob', namespace: 'ml', name: 'tf' } }, [worker(), ps]);
    const pods = [
      pod(0),
      pod(1),
      pod(2),
      evicted(3),
      pod(0, { name: 'ps-0', role: 'PS' }),
      pod(1, { name: 'ps-1', role: 'PS', phase: 'Failed', reason: 'Evicted' }),
    ];
    const plan = decide(tf, pods, ROOM_FOR_ONE);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'PS', from: 2, to: 1 }]);
  });
});

describe('decideOnFault: a master that fits nowhere', () => {
  // 1 master + 16 workers; the scheduler placed 12 workers and left the master (and 4 workers) waiting on a
  // full cluster: the workers wait for the master forever unless one of them makes room.
  const master: RoleView = { ...worker({ minReplicas: 1, maxReplicas: 1 }), role: 'Master', replicas: 1 };
  const workers = worker({ replicas: 16, minReplicas: 1, maxReplicas: 16 });
  const pods = [
    ...Array.from({ length: 12 }, (_, i) => pod(i, { nodeName: `node-${i % 3}` })),
    ...Array.from({ length: 4 }, (_, i) => pod(12 + i, { phase: 'Pending', nodeName: undefined })),
    { ...pod(0, { phase: 'Pending', nodeName: undefined }), name: 'master-0', role: 'Master' as const },
  ];
  // the 12 running workers hold every GPU of three 4-GPU nodes
  const full: ClusterCapacity = {
    nodes: ['node-0', 'node-1', 'node-2'].map((name) => ({
      name,
      allocatable: { cpuMillis: 16_000, memoryBytes: 24 * GiB, gpus: 4 },
      allocated: { cpuMillis: 16_000, memoryBytes: 24 * GiB, gpus: 4 },
      schedulable: true,
    })),
  };

  it('removes as many running workers as the master needs, and the waiting ones', () => {
    const plan = decide(job({}, [master, workers]), pods, full);
    assert.deepEqual(plan.changes, [{ kind: 'replicas', role: 'Worker', from: 16, to: 11 }]);
    assert.match(
      told(plan),
      /master-0 Pending, fits on no node: 1 running worker removed to make room for Master/,
    );
    assert.match(
      told(plan),
      /11 running \+ 0 more fit in free capacity = 11: shrinking Worker from 16 to 11/,
    );
  });

  it('never below the workers minimum, and not for a job that is not elastic', () => {
    const atMin = decide(job({}, [master, { ...workers, minReplicas: 12 }]), pods, full);
    assert.deepEqual(atMin.changes, [{ kind: 'replicas', role: 'Worker', from: 16, to: 12 }]);
    assert.match(told(atMin), /keeping 1 Master replicas, pods wait pending/);
    assert.deepEqual(decide(job({ elastic: false }, [master, workers]), pods, full).changes, []);
  });
});

describe('decideOnFault: pods behind scheduling gates', () => {
  it('does not count a gated Pending pod (Kueue holds a scale-up slice) as lost; the same pod ungated is', () => {
    const waiting = pod(3, { phase: 'Pending', nodeName: undefined });
    const gated = decide(job(), [pod(0), pod(1), pod(2), { ...waiting, schedulingGated: true }], FULL);
    assert.equal(gated.reason, 'no fault');
    assert.deepEqual(gated.changes, []);
    const ungated = decide(job(), [pod(0), pod(1), pod(2), waiting], FULL);
    assert.deepEqual(ungated.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }]);
  });
});
