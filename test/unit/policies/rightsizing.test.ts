import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../../../lib/config.js';
import { decideRightsizing } from '../../../lib/policies/rightsizing.js';
import type {
  Change,
  ContainerUsage,
  JobKind,
  JobView,
  Resources,
  RoleName,
  RoleView,
} from '../../../lib/types.js';
import { planText as told } from '../../support/plan-text.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const NOW = 1_700_000_000;
const config: PolicyConfig = { ...DEFAULT_POLICY_CONFIG, cooldownSeconds: 300 }; // headroom 0.2, tolerance 0.25

function role(name: RoleName, requests: Partial<Resources> = {}, limits: Partial<Resources> = {}): RoleView {
  return {
    role: name,
    replicas: 2,
    minReplicas: 1,
    maxReplicas: 4,
    containerName: 'main',
    containerIndex: 0,
    requests: { cpuMillis: 1200, memoryBytes: 1216 * MiB, gpus: 1, ...requests },
    limits: { cpuMillis: 4000, memoryBytes: 8 * GiB, gpus: 1, ...limits },
  };
}

function job(
  roles: RoleView[],
  state: Partial<JobView['state']> = {},
  kind: JobKind = 'PyTorchJob',
): JobView {
  return {
    ref: { kind, namespace: 'ml', name: 'j' },
    uid: 'uid',
    resourceVersion: '1',
    priority: 0,
    elastic: true,
    signature: 'sig',
    roles,
    managed: true,
    state: { oomCount: 0, paused: false, ...state },
  };
}

/** Usage that matches the default role exactly: peak 1000m and 1000 MiB -> targets 1200m and 1216 MiB. */
function usage(
  cpuMillis = 1000,
  memoryBytes = 1000 * MiB,
  roleName: RoleName = 'Worker',
  pod = 'worker-0',
): ContainerUsage {
  return { pod, role: roleName, cpuMillis, memoryBytes };
}

function decide(j: JobView, u: ContainerUsage[], now = NOW) {
  return decideRightsizing({ job: j, usage: u, config, now });
}

type ResourceChange = Extract<Change, { kind: 'resources' }>;

function find(
  changes: Change[],
  resource: 'cpu' | 'memory',
  field: 'requests' | 'limits',
  roleName = 'Worker',
): ResourceChange | undefined {
  return changes.find(
    (c): c is ResourceChange =>
      c.kind === 'resources' && c.resource === resource && c.field === field && c.role === roleName,
  );
}

describe('decideRightsizing: targets', () => {
  it('keeps requests already at peak + headroom', () => {
    const plan = decide(job([role('Worker')]), [usage()]);
    assert.equal(plan.policy, 'rightsizing');
    assert.deepEqual(plan.changes, []);
    assert.match(
      told(plan),
      /Worker cpu: request 1\.2 cores is within 25% of peak 1 core over 1 pod \+20% headroom/,
    );
  });

  it('does not round float noise up to the next step (3000m * 1.1 is 3300.0000000000005 in floating point)', () => {
    const tenPercent = { ...config, rightsizeHeadroom: 0.1 };
    const j = job([role('Worker', { cpuMillis: 8000 })]);
    const plan = decideRightsizing({ job: j, usage: [usage(3000)], config: tenPercent, now: NOW });
    assert.equal(find(plan.changes, 'cpu', 'requests')?.to, 3300);
  });

  it('lowers an oversized CPU request to peak * (1 + headroom)', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 4000 })]), [usage(1000)]);
    assert.deepEqual(find(plan.changes, 'cpu', 'requests'), {
      kind: 'resources',
      role: 'Worker',
      resource: 'cpu',
      field: 'requests',
      from: 4000,
      to: 1200,
    });
    assert.match(told(plan), /Worker cpu: request 4 cores -> 1\.2 cores .*off by 70% > 25%/);
  });

  it('rounds CPU up to 100m and memory up to 64 MiB', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 4000, memoryBytes: 8 * GiB })]), [
      usage(1001, 1001 * MiB),
    ]);
    assert.equal(find(plan.changes, 'cpu', 'requests')?.to, 1300); // 1201.2m -> 1300m
    assert.equal(find(plan.changes, 'memory', 'requests')?.to, 1216 * MiB); // 1201.2 MiB -> 19 * 64 MiB
  });

  it('sizes by the largest peak over the role’s pods', () => {
    const samples = [usage(800, 900 * MiB, 'Worker', 'w0'), usage(2000, 500 * MiB, 'Worker', 'w1')];
    const plan = decide(job([role('Worker', { cpuMillis: 8000 })]), samples);
    assert.equal(find(plan.changes, 'cpu', 'requests')?.to, 2400);
    assert.match(told(plan), /over 2 pods/);
  });

  it('acts only when off by more than the tolerance (both sides, and exactly at it)', () => {
    const cpuChange = (request: number) =>
      find(decide(job([role('Worker', { cpuMillis: request })]), [usage(1000)]).changes, 'cpu', 'requests');
    assert.equal(cpuChange(1500), undefined); // 300/1500 = 20%
    assert.equal(cpuChange(1600), undefined); // 400/1600 = 25%, not more
    assert.equal(cpuChange(1700)?.to, 1200); // 500/1700 = 29%
    assert.equal(cpuChange(1000), undefined); // 200/1000 = 20% under
    assert.equal(cpuChange(900)?.to, 1200); // 300/900 = 33% under: raised
  });

  it('sets a request that is not set at all', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 0 })]), [usage(1000)]);
    assert.equal(find(plan.changes, 'cpu', 'requests')?.to, 1200);
    assert.match(told(plan), /no request set/);
  });
});

describe('decideRightsizing: limits', () => {
  it('never lowers a memory limit when lowering the request', () => {
    const plan = decide(job([role('Worker', { memoryBytes: 8 * GiB }, { memoryBytes: 8 * GiB })]), [
      usage(1000, 2 * GiB),
    ]);
    assert.equal(find(plan.changes, 'memory', 'requests')?.to, 2496 * MiB); // 2457.6 MiB -> 39 * 64 MiB
    assert.equal(find(plan.changes, 'memory', 'limits'), undefined);
  });

  it('raises the memory limit to the target when the new request would exceed it', () => {
    const j = job([role('Worker', { memoryBytes: 1 * GiB }, { memoryBytes: 2 * GiB })]);
    const plan = decide(j, [usage(1000, 1900 * MiB)]);
    assert.equal(find(plan.changes, 'memory', 'requests')?.to, 2304 * MiB); // 2280 MiB -> 36 * 64 MiB
    assert.deepEqual(find(plan.changes, 'memory', 'limits'), {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'limits',
      from: 2 * GiB,
      to: 2304 * MiB,
    });
  });

  it('raises a CPU limit the new request would exceed, and leaves an unset limit unset', () => {
    const capped = decide(job([role('Worker', { cpuMillis: 1000 }, { cpuMillis: 2000 })]), [usage(3000)]);
    assert.equal(find(capped.changes, 'cpu', 'limits')?.to, 3600);
    const unset = decide(job([role('Worker', { cpuMillis: 1000 }, { cpuMillis: 0 })]), [usage(3000)]);
    assert.equal(find(unset.changes, 'cpu', 'requests')?.to, 3600);
    assert.equal(find(unset.changes, 'cpu', 'limits'), undefined);
  });

  it('caps the memory target at maxMemoryBytes, and leaves memory alone when the peak is above the cap', () => {
    const big = job([role('Worker', { memoryBytes: 100 * GiB }, { memoryBytes: 300 * GiB })]);
    const capped = decide(big, [usage(1000, 250 * GiB)]);
    assert.equal(find(capped.changes, 'memory', 'requests')?.to, 256 * GiB);
    const over = decide(big, [usage(1000, 257 * GiB)]);
    assert.equal(find(over.changes, 'memory', 'requests'), undefined);
    assert.match(told(over), /above the cap/);
  });

  it('never touches GPUs', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 8000, memoryBytes: 64 * GiB })]), [
      usage(100, 1 * GiB),
    ]);
    assert.ok(plan.changes.length > 0);
    for (const change of plan.changes) {
      assert.ok(change.kind === 'resources' && (change.resource === 'cpu' || change.resource === 'memory'));
    }
  });
});

describe('decideRightsizing: roles and missing data', () => {
  it('skips a role without usage samples and says "no usage data"', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 8000 })]), []);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /Worker cpu: no usage data/);
  });

  it('treats zero or non-finite samples as missing, not as an idle pod', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 8000, memoryBytes: 8 * GiB })]), [
      usage(0, Number.NaN),
    ]);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /Worker cpu: no usage data.*Worker memory: no usage data/);
  });

  it('right-sizes PS of a TFJob from PS samples only', () => {
    const tf = job([role('Worker'), role('PS', { cpuMillis: 8000 })], {}, 'TFJob');
    const plan = decide(tf, [usage(), usage(2000, 1000 * MiB, 'PS', 'ps-0')]);
    assert.equal(find(plan.changes, 'cpu', 'requests', 'PS')?.to, 2400);
    assert.equal(find(plan.changes, 'cpu', 'requests', 'Worker'), undefined);
  });

  it('leaves PS of a non-TF job and the Master role alone', () => {
    const pt = job([role('Master', { cpuMillis: 8000 }), role('Worker')]);
    const plan = decide(pt, [usage(), usage(1000, 1000 * MiB, 'Master', 'master-0')]);
    assert.deepEqual(plan.changes, []);
    assert.doesNotMatch(told(plan), /Master/);
  });

  it('does nothing while paused', () => {
    const plan = decide(job([role('Worker', { cpuMillis: 8000 })], { paused: true }), [usage()]);
    assert.deepEqual(plan.changes, []);
    assert.match(told(plan), /paused/);
  });

  it('waits out the cooldown, and acts once it has passed', () => {
    const oversized = role('Worker', { cpuMillis: 8000 });
    const inCooldown = decide(job([oversized], { lastActionAt: NOW - 299 }), [usage()]);
    assert.deepEqual(inCooldown.changes, []);
    assert.match(told(inCooldown), /cooldown for 1 s more/);
    const after = decide(job([oversized], { lastActionAt: NOW - 300 }), [usage()]);
    assert.equal(find(after.changes, 'cpu', 'requests')?.to, 1200);
  });
});
