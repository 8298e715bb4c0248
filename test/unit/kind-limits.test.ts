// What a job's own API refuses whatever the value (lib/adapters/job-adapter.ts refusals) is not proposed by
// the policies (lib/policies/kind-limits.ts), and a JobSet's worker count moves only in multiples of its
// immutable child-Job count (lib/guardrails.ts rounds, towards the live count, so every bound still holds and
// the adapter accepts what comes out).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { buildJobPatch, readJob } from '../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../lib/cluster/cluster-client.js';
import { applyGuardrails, type GuardrailConfig } from '../../lib/guardrails.js';
import { planWithinKind } from '../../lib/policies/kind-limits.js';
import { pytorchJobManifest } from '../../lib/sim/training-job-manifests.js';
import type { Change, Plan } from '../../lib/types.js';
import { indexedJob, jobSet, trainJob } from '../fixtures/batch-jobs.js';

const NOW = 1_800_000_000;
const CONFIG: GuardrailConfig = {
  namespaceAllowlist: [],
  maxReplicaStep: 64,
  cooldownSeconds: 0,
  maxMemoryBytes: 256 * 1024 ** 3,
  maxClusterGpus: Number.POSITIVE_INFINITY,
};

function withAnnotations(obj: KubeObject, annotations: Record<string, string>): KubeObject {
  return {
    ...obj,
    metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, ...annotations } },
  };
}

function resize(
  obj: KubeObject,
  to: number,
  config: Partial<GuardrailConfig> = {},
  allocated?: number,
  withoutMultiple = false,
) {
  const job = readJob(obj);
  if (withoutMultiple) for (const role of job.roles) delete role.replicaMultiple;
  const worker = job.roles.find((r) => r.role === 'Worker');
  assert.ok(worker);
  const plan: Plan = {
    ref: job.ref,
    policy: 'tuning',
    changes: [{ kind: 'replicas', role: 'Worker', from: worker.replicas, to }],
    reason: 'test',
  };
  return applyGuardrails(plan, {
    job,
    config: { ...CONFIG, ...config },
    now: NOW,
    ...(allocated === undefined ? {} : { clusterGpusAllocated: allocated }),
  });
}

const target = (guarded: ReturnType<typeof resize>) =>
  (guarded.plan.changes[0] as Extract<Change, { kind: 'replicas' }> | undefined)?.to;

describe('guardrails: a JobSet target is a multiple of its child Jobs', () => {
  // 2 child Jobs x 2 pods = 4 workers, up to 16.
  const js = withAnnotations(jobSet({ replicas: 2, parallelism: 2 }), {
    'trainscaler.io/max-replicas': '16',
  });

  it('reads the child-Job count as the role’s replicaMultiple', () => {
    assert.equal(readJob(js).roles.find((r) => r.role === 'Worker')?.replicaMultiple, 2);
    assert.equal(readJob(indexedJob()).roles[0]?.replicaMultiple, undefined);
  });

  it('rounds growth down and shrinking up, towards the live count, and says so', () => {
    const up = resize(js, 7);
    assert.equal(target(up), 6);
    assert.match(
      up.plan.reason,
      /Worker replicas 7 rounded to 6 \(a multiple of its 2 child Jobs, towards the live 4\)/,
    );
    assert.equal(target(resize(js, 3)), 4);
    assert.equal(target(resize(js, 8)), 8);
    assert.deepEqual(resize(js, 8).violations, []);
  });

  it('rounds after the step bound and the GPU budget, so neither is exceeded', () => {
    // Step 3: 4 -> 7 at most, rounded to 6.
    assert.equal(target(resize(js, 12, { maxReplicaStep: 3 })), 6);
    // 1 GPU per worker, budget 9 with 4 in use: 5 more at most -> 9, rounded to 8.
    assert.equal(target(resize(js, 12, { maxClusterGpus: 9 }, 4)), 8);
    // Room for one more: 5 rounds back to the live 4, i.e. no change.
    assert.equal(target(resize(js, 12, { maxClusterGpus: 5 }, 4)), 4);
  });

  it('every guarded target is one the JobSet’s API accepts, and within the bounds (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 32 }),
        (replicas, parallelism, to, step, max) => {
          const obj = withAnnotations(jobSet({ replicas, parallelism }), {
            'trainscaler.io/max-replicas': String(max),
          });
          const from = replicas * parallelism;
          const written = target(resize(obj, to, { maxReplicaStep: step })) ?? from;
          // The same plan with no multiple to keep: what every other bound allows.
          const bounded = target(resize(obj, to, { maxReplicaStep: step }, undefined, true)) ?? from;
          assert.equal(written % replicas, 0, `${written} is a multiple of ${replicas}`);
          assert.ok(
            Math.min(from, bounded) <= written && written <= Math.max(from, bounded),
            `${written} lies between the live ${from} and the bounded ${bounded}`,
          );
          assert.ok(Math.abs(bounded - written) < replicas, 'the nearest multiple towards the live count');
          const guarded = resize(obj, to, { maxReplicaStep: step });
          if (written !== from && written >= replicas)
            assert.doesNotThrow(() => buildJobPatch(obj, guarded.plan.changes, {}));
        },
      ),
    );
  });

  it('leaves other kinds’ counts alone (no multiple)', () => {
    const job = pytorchJobManifest({
      name: 'p',
      namespace: 'team-a',
      app: 'a',
      workers: 4,
      minReplicas: 1,
      maxReplicas: 16,
      sizing: { gpus: 1, cpuMillis: 1000, memoryBytes: 1024 ** 3 },
    }) as KubeObject;
    assert.equal(target(resize(job, 7)), 7);
  });
});

describe('what each kind refuses, whatever the value', () => {
  it('an indexed Job: its pod template (resources, node affinity); its count and evictions pass', () => {
    const view = readJob(indexedJob());
    assert.deepEqual(Object.keys(view.refusals ?? {}).sort(), ['avoid-node', 'prefer-node', 'resources']);
    assert.match(
      view.refusals?.resources ?? '',
      /^Job cannot change \/spec: a running Job's pod template is immutable/,
    );
    assert.equal(view.elastic, true);
  });

  it('a NonIndexed Job: its count too, and it is then not elastic whatever it says', () => {
    const view = readJob(indexedJob({ completionMode: 'NonIndexed' }));
    assert.match(view.refusals?.replicas ?? '', /completionMode is NonIndexed/);
    assert.equal(view.elastic, false);
  });

  it('a TrainJob: everything, evictions and pauses included (it is never written)', () => {
    const view = readJob(trainJob());
    assert.deepEqual(Object.keys(view.refusals ?? {}).sort(), [
      'avoid-node',
      'evict-pod',
      'pause',
      'prefer-node',
      'rendezvous',
      'replicas',
      'resources',
    ]);
  });

  it('a PyTorchJob: nothing', () => {
    const job = pytorchJobManifest({
      name: 'p',
      namespace: 'team-a',
      app: 'a',
      workers: 2,
      minReplicas: 1,
      maxReplicas: 4,
      sizing: { gpus: 1, cpuMillis: 1000, memoryBytes: 1024 ** 3 },
    }) as KubeObject;
    assert.equal(readJob(job).refusals, undefined);
  });
});

describe('planWithinKind', () => {
  const plan: Plan = {
    ref: { kind: 'Job', namespace: 'team-a', name: 'ddp' },
    policy: 'initial',
    changes: [
      { kind: 'replicas', role: 'Worker', from: 4, to: 6 },
      { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 1, to: 2 },
      { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'requests', from: 1, to: 2 },
    ],
    reason: '6 workers, 2 GiB',
  };

  it('keeps what the kind allows and says what it left out, once per refusal', () => {
    const out = planWithinKind({ refusals: { resources: 'Job cannot change /spec: immutable' } }, plan);
    assert.deepEqual(out.changes, [plan.changes[0]]);
    assert.equal(
      out.reason,
      '6 workers, 2 GiB; not attempted (2 changes): Job cannot change /spec: immutable',
    );
  });

  it('leaves a plan the kind allows as it is', () => {
    assert.equal(planWithinKind({}, plan), plan);
    assert.equal(planWithinKind({ refusals: { 'avoid-node': 'x' } }, plan), plan);
  });
});
