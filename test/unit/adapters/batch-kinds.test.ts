// The indexed batch/v1 Job, the JobSet and the TrainJob through the job adapter: what is read into the view,
// the minimal patch of each resize path the kind's API allows (parallelism and completions together), and a
// clear refusal, before any op is built, of every change the kind's API forbids.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { buildJobPatch, podSelectorFor, readJob } from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { UnsupportedChangeError, ValidationError } from '../../../lib/errors.js';
import type { Change } from '../../../lib/types.js';
import { indexedJob, jobSet, trainJob } from '../../fixtures/batch-jobs.js';

const GiB = 1024 ** 3;
const ANN = { 'trainscaler.io/last-decision': '{}' };

function apply(obj: KubeObject, ops: ReturnType<typeof buildJobPatch>): KubeObject {
  return fastJsonPatch.applyPatch(structuredClone(obj), ops as Operation[], true, false).newDocument;
}

function specOf(obj: KubeObject): Record<string, unknown> {
  return obj.spec as Record<string, unknown>;
}

function refusal(run: () => unknown, field: string, words: RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof UnsupportedChangeError, String(error));
    assert.equal(error.field, field);
    assert.match(error.message, words);
    return true;
  });
}

const grow = (to: number): Change => ({ kind: 'replicas', role: 'Worker', from: 0, to });

describe('indexed batch/v1 Job', () => {
  it('reads parallelism as the Worker count, bounds from annotations, the first container, its selector', () => {
    const view = readJob(indexedJob());
    assert.deepEqual(view.ref, { kind: 'Job', namespace: 'team-a', name: 'ddp' });
    assert.equal(view.managed, true);
    assert.equal(view.elastic, true);
    assert.equal(view.priorityClassName, 'research');
    assert.equal(view.signature, 'Job:registry.example.com/ddp:1.4');
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas, r.containerName]),
      [['Worker', 4, 2, 8, 'trainer']],
    );
    assert.deepEqual(view.roles[0]?.requests, { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 });
    assert.equal(podSelectorFor(indexedJob()), 'batch.kubernetes.io/job-name=ddp');
  });

  it('resizes by parallelism and completions together, pinned to the resourceVersion', () => {
    const job = indexedJob();
    const ops = buildJobPatch(job, [grow(6)], ANN);
    assert.deepEqual(ops.slice(0, 3), [
      { op: 'replace', path: '/metadata/resourceVersion', value: '812' },
      { op: 'replace', path: '/spec/parallelism', value: 6 },
      { op: 'replace', path: '/spec/completions', value: 6 },
    ]);
    assert.equal(ops.length, 4, 'and the one annotation');
    const after = specOf(apply(job, ops));
    assert.equal(after.parallelism, 6);
    assert.equal(after.completions, 6);
  });

  it('refuses what the API server forbids on a running Job: non-indexed, finished, below 1, the template', () => {
    refusal(
      () => buildJobPatch(indexedJob({ completionMode: 'NonIndexed' }), [grow(6)], ANN),
      '/spec/completionMode',
      /only Indexed/,
    );
    const done = indexedJob();
    done.status = { conditions: [{ type: 'Complete', status: 'True' }] };
    refusal(() => buildJobPatch(done, [grow(6)], ANN), '/spec/parallelism', /Complete/);
    const failedFalse = indexedJob();
    failedFalse.status = { conditions: [{ type: 'Failed', status: 'False' }] };
    assert.ok(
      buildJobPatch(failedFalse, [grow(6)], ANN).length > 0,
      'a condition that is False does not count',
    );
    refusal(() => buildJobPatch(indexedJob(), [grow(0)], ANN), '/spec/parallelism', />= 1/);
    const memory: Change = {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'limits',
      from: 16 * GiB,
      to: 24 * GiB,
    };
    refusal(() => buildJobPatch(indexedJob(), [grow(6), memory], ANN), '/spec', /pod template is immutable/);
    refusal(
      () => buildJobPatch(indexedJob(), [{ kind: 'avoid-node', role: 'Worker', node: 'n1' }], ANN),
      '/spec',
      /immutable/,
    );
  });

  it('evictions and pauses write only the audit annotations', () => {
    const ops = buildJobPatch(
      indexedJob(),
      [
        { kind: 'evict-pod', pod: 'ddp-1-x7k2p' },
        { kind: 'pause', reason: 'crash loop' },
      ],
      ANN,
    );
    assert.deepEqual(
      ops.map((o) => o.path),
      ['/metadata/resourceVersion', '/metadata/annotations/trainscaler.io~1last-decision'],
    );
  });

  it('a Job controlled by a JobSet (or a CronJob) is its owner’s, not trainscaler’s, even when opted in', () => {
    const child = indexedJob();
    child.metadata.ownerReferences = [
      { apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet', name: 'llm', uid: 'u', controller: true },
    ];
    const view = readJob(child);
    assert.equal(view.managed, false);
    assert.match(view.unmanagedReason ?? '', /controlled by JobSet llm/);
    child.metadata.ownerReferences = [
      { apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet', name: 'llm', uid: 'u', controller: false },
    ];
    assert.equal(readJob(child).managed, true, 'a non-controller owner does not take it over');
  });
});

describe('JobSet (ElasticJobSet)', () => {
  it('reads the training replicated job: pods = child Jobs x parallelism; selector by JobSet and replicated job', () => {
    const view = readJob(jobSet({ replicas: 2, parallelism: 2 }));
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas, r.containerName]),
      [['Worker', 4, 4, 8, 'trainer']],
    );
    assert.equal(view.elastic, false, 'elastic only when the user says the training survives it');
    assert.equal(
      podSelectorFor(jobSet()),
      'jobset.sigs.k8s.io/jobset-name=llm,jobset.sigs.k8s.io/replicatedjob-name=workers',
    );
  });

  it('resizes the replicated job’s parallelism and completions together, per child Job', () => {
    const js = jobSet({ replicas: 2, parallelism: 2 });
    const ops = buildJobPatch(js, [grow(6)], ANN);
    assert.deepEqual(ops.slice(0, 3), [
      { op: 'replace', path: '/metadata/resourceVersion', value: '901' },
      { op: 'replace', path: '/spec/replicatedJobs/1/template/spec/parallelism', value: 3 },
      { op: 'replace', path: '/spec/replicatedJobs/1/template/spec/completions', value: 3 },
    ]);
    const after = apply(js, ops);
    assert.deepEqual(readJob(after).roles[0]?.replicas, 6);
    const rjobs = specOf(after).replicatedJobs as Array<{ replicas: number }>;
    assert.equal(rjobs[1]?.replicas, 2, 'replicas (immutable) untouched');
  });

  it('refuses what the webhook forbids: a count that is no multiple of the child Jobs, a finished JobSet, a non-indexed job', () => {
    refusal(
      () => buildJobPatch(jobSet({ replicas: 2 }), [grow(5)], ANN),
      '/spec/replicatedJobs/1/template/spec/parallelism',
      /not a multiple of the 2 child Jobs/,
    );
    for (const type of ['Completed', 'Failed']) {
      const js = jobSet();
      js.status = { conditions: [{ type, status: 'True' }] };
      refusal(
        () => buildJobPatch(js, [grow(3)], ANN),
        '/spec/replicatedJobs/1/template/spec/parallelism',
        /finished/,
      );
    }
    const driver = jobSet();
    driver.metadata.annotations = {
      ...driver.metadata.annotations,
      'trainscaler.io/replicated-job': 'driver',
    };
    refusal(
      () => buildJobPatch(driver, [grow(2)], ANN),
      '/spec/replicatedJobs/0/template/spec/completionMode',
      /NonIndexed/,
    );
  });

  it('which replicated job trains: the annotation, else a conventional name, else the only one; else a clear error', () => {
    const unnamed = jobSet();
    const rjobs = specOf(unnamed).replicatedJobs as Array<{ name: string }>;
    for (const r of rjobs) r.name = `${r.name}-x`;
    assert.throws(
      () => readJob(unnamed),
      (e: unknown) => e instanceof ValidationError && /ambiguous/.test(e.message),
    );
    const wrong = jobSet();
    wrong.metadata.annotations = { ...wrong.metadata.annotations, 'trainscaler.io/replicated-job': 'nope' };
    assert.throws(() => readJob(wrong), /no replicated job named 'nope'/);
    const single = jobSet();
    specOf(single).replicatedJobs = [rjobs[1]];
    assert.equal(readJob(single).roles[0]?.replicas, 2);
  });
});

describe('TrainJob (Kubeflow Trainer v2.3)', () => {
  it('reads numNodes and resourcesPerNode into the view; bounds fixed, not elastic', () => {
    const view = readJob(trainJob());
    assert.deepEqual(view.ref, { kind: 'TrainJob', namespace: 'team-a', name: 'mnist' });
    assert.equal(view.elastic, false);
    assert.equal(view.signature, 'TrainJob:registry.example.com/mnist:2.0');
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas, r.containerName]),
      [['Worker', 3, 3, 3, 'node']],
    );
    assert.deepEqual(view.roles[0]?.requests, { cpuMillis: 2000, memoryBytes: 8 * GiB, gpus: 1 });
    assert.equal(
      podSelectorFor(trainJob()),
      'jobset.sigs.k8s.io/jobset-name=mnist,jobset.sigs.k8s.io/replicatedjob-name=node',
    );
  });

  it('refuses every change (spec.trainer is immutable, even suspended), naming the field', () => {
    refusal(() => buildJobPatch(trainJob(), [grow(4)], ANN), '/spec/trainer/numNodes', /immutable/);
    for (const change of [
      { kind: 'evict-pod', pod: 'p' },
      { kind: 'pause', reason: 'r' },
    ] satisfies Change[])
      refusal(() => buildJobPatch(trainJob(), [change], ANN), '/spec/trainer', /changes none/);
  });

  it('without numNodes the size is the runtime’s: refused with the field named', () => {
    const tj = trainJob();
    delete (specOf(tj).trainer as { numNodes?: number }).numNodes;
    assert.throws(
      () => readJob(tj),
      (e: unknown) => e instanceof ValidationError && e.field === '/spec/trainer/numNodes',
    );
  });
});
