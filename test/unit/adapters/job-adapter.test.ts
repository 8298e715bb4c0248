import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import {
  apiVersionOf,
  buildJobPatch,
  isSupportedKind,
  podSelectorFor,
  readJob,
  refOf,
  roleOf,
  SUPPORTED_KINDS,
} from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { UnsupportedJobKindError, ValidationError } from '../../../lib/errors.js';
import { pytorchJob, statefulSet, tfJob } from '../../fixtures/jobs.js';

const GiB = 1024 ** 3;

function apply(obj: KubeObject, ops: ReturnType<typeof buildJobPatch>): KubeObject {
  return fastJsonPatch.applyPatch(structuredClone(obj), ops as Operation[], true, false).newDocument;
}

describe('readJob', () => {
  it('reads a PyTorchJob: elastic bounds from elasticPolicy, the pytorch container, its resources', () => {
    const view = readJob(pytorchJob());
    assert.deepEqual(view.ref, { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert-finetune' });
    assert.equal(view.elastic, true);
    assert.equal(view.globalBatchSize, 384);
    const worker = view.roles.find((r) => r.role === 'Worker');
    assert.ok(worker);
    assert.equal(worker.replicas, 2);
    assert.equal(worker.minReplicas, 1);
    assert.equal(worker.maxReplicas, 8);
    assert.equal(worker.containerName, 'pytorch');
    assert.deepEqual(worker.requests, { cpuMillis: 4000, memoryBytes: 16 * GiB, gpus: 1 });
    assert.equal(worker.limits.cpuMillis, 0);
  });

  it('reads a TFJob with PS and Worker roles; bounds for workers from annotations, PS fixed', () => {
    const view = readJob(tfJob());
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas]),
      [
        ['PS', 2, 2, 2],
        ['Worker', 4, 2, 10],
      ],
    );
    assert.equal(view.elastic, true);
  });

  it('a PyTorchJob without elasticPolicy is not elastic and cannot grow past its size', () => {
    const job = pytorchJob();
    delete (job.spec as { elasticPolicy?: unknown }).elasticPolicy;
    const view = readJob(job);
    assert.equal(view.elastic, false);
    assert.equal(view.roles[0]?.maxReplicas, 2);
  });

  it('reads a StatefulSet as one Worker role, with its label selector', () => {
    const obj = statefulSet();
    const view = readJob(obj);
    assert.equal(view.roles.length, 1);
    assert.equal(view.roles[0]?.replicas, 3);
    assert.equal(view.roles[0]?.maxReplicas, 6);
    assert.equal(podSelectorFor(obj), 'app=ddp-trainer');
  });

  it('rejects unknown kinds and malformed fields with the field named', () => {
    assert.throws(() => readJob({ ...pytorchJob(), kind: 'MPIJob' }), UnsupportedJobKindError);
    const bad = pytorchJob();
    (
      bad.spec as { pytorchReplicaSpecs: { Worker: { replicas: unknown } } }
    ).pytorchReplicaSpecs.Worker.replicas = -1;
    assert.throws(
      () => readJob(bad),
      (e: unknown) => e instanceof ValidationError && e.field === '/spec/pytorchReplicaSpecs/Worker/replicas',
    );
    const badQuantity = pytorchJob();
    const c = (
      badQuantity.spec as {
        pytorchReplicaSpecs: {
          Worker: {
            template: { spec: { containers: { resources: { requests: Record<string, string> } }[] } };
          };
        };
      }
    ).pytorchReplicaSpecs.Worker.template.spec.containers[0];
    if (c) c.resources.requests.memory = 'lots';
    assert.throws(
      () => readJob(badQuantity),
      (e: unknown) => e instanceof ValidationError && e.field.endsWith('/resources/requests/memory'),
    );
  });

  it('ignores the old state annotation (tenant-writable) and treats managed=false as opted out', () => {
    const view = readJob(
      pytorchJob({
        annotations: {
          'trainscaler.io/state': '{"lastActionAt":100,"oomCount":2,"paused":true,"largestRunWorkers":64}',
          'trainscaler.io/managed': 'false',
        },
      }),
    );
    assert.deepEqual(view.state, { oomCount: 0, paused: false });
    assert.equal(view.managed, false);
  });
});

describe('buildJobPatch', () => {
  it('changes only the decided fields, pins resourceVersion, and never replaces the container list', () => {
    const obj = pytorchJob();
    const ops = buildJobPatch(obj, [{ kind: 'replicas', role: 'Worker', from: 2, to: 4 }], {
      'trainscaler.io/last-decision': '{}',
    });
    assert.deepEqual(ops[0], { op: 'replace', path: '/metadata/resourceVersion', value: '1042' });
    assert.ok(ops.every((op) => !op.path.endsWith('/containers')));
    const after = apply(obj, ops);
    const before = structuredClone(obj) as {
      spec: { pytorchReplicaSpecs: { Worker: { replicas: number } } };
    };
    before.spec.pytorchReplicaSpecs.Worker.replicas = 4;
    assert.deepEqual(after.spec, before.spec);
    assert.equal(after.metadata.annotations?.['trainscaler.io/last-decision'], '{}');
    assert.equal(
      after.metadata.annotations?.['trainscaler.io/global-batch-size'],
      '384',
      'other annotations kept',
    );
  });

  it('patches resources of the training container by index and creates missing parents once', () => {
    const obj = statefulSet();
    const ops = buildJobPatch(
      obj,
      [
        { kind: 'resources', role: 'Worker', resource: 'memory', field: 'limits', from: 0, to: 12 * GiB },
        { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'limits', from: 0, to: 2500 },
      ],
      {},
    );
    assert.equal(ops.filter((o) => o.path.endsWith('/resources/limits')).length, 1);
    const after = apply(obj, ops) as {
      spec: { template: { spec: { containers: { resources: unknown }[] } } };
    };
    assert.deepEqual(after.spec.template.spec.containers[0]?.resources, {
      limits: { memory: '12Gi', cpu: '2500m' },
    });
  });

  it('targets the pytorch container, not the sidecar listed after it', () => {
    const obj = pytorchJob();
    const ops = buildJobPatch(
      obj,
      [
        {
          kind: 'resources',
          role: 'Worker',
          resource: 'memory',
          field: 'limits',
          from: 16 * GiB,
          to: 24 * GiB,
        },
      ],
      {},
    );
    assert.ok(
      ops.some(
        (o) =>
          o.path === '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/limits/memory' &&
          o.value === '24Gi',
      ),
    );
  });

  it('adds the annotations map when the job has none, escaping the key in paths otherwise', () => {
    const obj = tfJob();
    delete obj.metadata.annotations;
    const ops = buildJobPatch(obj, [], { 'trainscaler.io/last-decision': '{}' });
    assert.deepEqual(ops.at(-1), {
      op: 'add',
      path: '/metadata/annotations',
      value: { 'trainscaler.io/last-decision': '{}' },
    });
    const withMap = buildJobPatch(tfJob(), [], { 'trainscaler.io/last-decision': '{}' });
    assert.equal(withMap.at(-1)?.path, '/metadata/annotations/trainscaler.io~1last-decision');
  });

  it('avoid-node: adds a preferred node anti-affinity to the role template, once, bounded, keeping the user’s terms', () => {
    type Terms = { weight: number; preference: { matchFields?: { values: string[] }[] } }[];
    const termsOf = (obj: KubeObject) =>
      (
        obj as unknown as {
          spec: {
            pytorchReplicaSpecs: {
              Worker: {
                template: {
                  spec: {
                    affinity?: { nodeAffinity?: { preferredDuringSchedulingIgnoredDuringExecution?: Terms } };
                  };
                };
              };
            };
          };
        }
      ).spec.pytorchReplicaSpecs.Worker.template.spec.affinity?.nodeAffinity
        ?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
    const avoid = (obj: KubeObject, node: string) =>
      apply(obj, buildJobPatch(obj, [{ kind: 'avoid-node', role: 'Worker', node }], {}));

    const once = avoid(pytorchJob(), 'node-a');
    assert.deepEqual(termsOf(once), [
      {
        weight: 100,
        preference: { matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['node-a'] }] },
      },
    ]);
    const master = (
      once as unknown as { spec: { pytorchReplicaSpecs: { Master?: { template: { spec: object } } } } }
    ).spec.pytorchReplicaSpecs.Master?.template.spec;
    assert.ok(!master || !('affinity' in master), 'other roles untouched');
    // Idempotent: the same node again writes nothing but the resourceVersion pin.
    assert.deepEqual(
      buildJobPatch(once, [{ kind: 'avoid-node', role: 'Worker', node: 'node-a' }], {}).map((o) => o.path),
      ['/metadata/resourceVersion'],
    );
    // A user's own preferred term is kept; trainscaler's terms stay at 3, the oldest replaced.
    const user = {
      weight: 5,
      preference: { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] },
    };
    const withUser = apply(once, [
      {
        op: 'add',
        path: '/spec/pytorchReplicaSpecs/Worker/template/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/0',
        value: user,
      },
    ]);
    const four = ['node-b', 'node-c', 'node-d'].reduce(avoid, withUser);
    assert.deepEqual(termsOf(four)[0], user);
    assert.deepEqual(
      termsOf(four)
        .slice(1)
        .map((t) => t.preference.matchFields?.[0]?.values[0]),
      ['node-d', 'node-b', 'node-c'],
    );
  });

  it('prefer-node: adds one preferred node affinity term, replaces its own earlier one, keeps every other term', () => {
    type Terms = { weight: number; preference: { matchFields?: { operator: string; values: string[] }[] } }[];
    const termsOf = (obj: KubeObject) =>
      spec(obj).pytorchReplicaSpecs.Worker.template.spec.affinity?.nodeAffinity
        ?.preferredDuringSchedulingIgnoredDuringExecution as Terms;
    const prefer = (obj: KubeObject, node: string) =>
      apply(obj, buildJobPatch(obj, [{ kind: 'prefer-node', role: 'Worker', node }], {}));
    const once = prefer(pytorchJob(), 'node-a');
    assert.deepEqual(termsOf(once), [
      {
        weight: 50,
        preference: { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] },
      },
    ]);
    assert.deepEqual(
      buildJobPatch(once, [{ kind: 'prefer-node', role: 'Worker', node: 'node-a' }], {}).map((o) => o.path),
      ['/metadata/resourceVersion'],
      'idempotent',
    );
    const avoided = apply(
      once,
      buildJobPatch(once, [{ kind: 'avoid-node', role: 'Worker', node: 'node-x' }], {}),
    );
    const moved = prefer(avoided, 'node-b');
    assert.deepEqual(
      termsOf(moved).map((t) => [
        t.weight,
        t.preference.matchFields?.[0]?.operator,
        t.preference.matchFields?.[0]?.values[0],
      ]),
      [
        [50, 'In', 'node-b'],
        [100, 'NotIn', 'node-x'],
      ],
      'its own term replaced in place, the straggler avoidance kept (and it weighs more)',
    );
  });
});

// biome-ignore lint/suspicious/noExplicitAny: fixtures are edited in place below, at any depth
type Loose = Record<string, any>;
const spec = (obj: KubeObject) => obj.spec as Loose;
const invalid = (field: string, message?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof ValidationError, String(e));
  assert.equal(e.field, field);
  if (message) assert.match(e.message, message);
  return true;
};

describe('readJob: every field, its default and its error', () => {
  it('PyTorchJob without elasticPolicy: worker bounds from annotations; Master fixed; ids defaulted', () => {
    const job = pytorchJob({
      annotations: { 'trainscaler.io/min-replicas': '1', 'trainscaler.io/max-replicas': '5' },
    });
    delete spec(job).elasticPolicy;
    spec(job).pytorchReplicaSpecs.Master = structuredClone(spec(job).pytorchReplicaSpecs.Worker);
    spec(job).pytorchReplicaSpecs.Master.replicas = 1;
    delete job.metadata.uid;
    delete job.metadata.resourceVersion;
    delete job.metadata.namespace;
    const view = readJob(job);
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.replicas, r.minReplicas, r.maxReplicas]),
      [
        ['Master', 1, 1, 1],
        ['Worker', 2, 1, 5],
      ],
    );
    assert.equal(view.uid, '');
    assert.equal(view.resourceVersion, '');
    assert.equal(view.ref.namespace, 'default');
    assert.equal(view.elastic, false);
  });

  it('elasticPolicy without bounds keeps the size; a min above the max is brought down to it', () => {
    const job = pytorchJob();
    spec(job).elasticPolicy = {};
    assert.deepEqual(
      readJob(job).roles.map((r) => [r.minReplicas, r.maxReplicas]),
      [[2, 2]],
    );
    spec(job).elasticPolicy = { minReplicas: 6, maxReplicas: 3 };
    assert.deepEqual(
      readJob(job).roles.map((r) => [r.minReplicas, r.maxReplicas]),
      [[3, 3]],
    );
  });

  it('an absent replicas is 1 (the operator default); a fractional or non-number one is refused', () => {
    const job = pytorchJob();
    delete spec(job).pytorchReplicaSpecs.Worker.replicas;
    assert.equal(readJob(job).roles[0]?.replicas, 1);
    for (const bad of [1.5, '2']) {
      spec(job).pytorchReplicaSpecs.Worker.replicas = bad;
      assert.throws(
        () => readJob(job),
        invalid('/spec/pytorchReplicaSpecs/Worker/replicas', /expected a non-negative integer/),
      );
    }
    spec(job).pytorchReplicaSpecs.Worker.replicas = 0;
    assert.equal(readJob(job).roles[0]?.replicas, 0);
  });

  it('bound annotations must be non-negative integers, named in the error', () => {
    for (const raw of ['-1', 'many', '2.5']) {
      const job = statefulSet();
      job.metadata.annotations = { ...job.metadata.annotations, 'trainscaler.io/max-replicas': raw };
      assert.throws(
        () => readJob(job),
        invalid(
          '/metadata/annotations/trainscaler.io~1max-replicas',
          new RegExp(`expected a non-negative integer, got '${raw}'`),
        ),
      );
    }
    const zero = statefulSet();
    zero.metadata.annotations = { 'trainscaler.io/min-replicas': '0' };
    assert.equal(readJob(zero).roles[0]?.minReplicas, 0);
    assert.equal(readJob(zero).roles[0]?.maxReplicas, 3, 'no max: the current size');
  });

  it('TFJob: PS bounds from their own annotations, elastic only when the operator or the user says so', () => {
    const job = tfJob();
    job.metadata.annotations = {
      ...job.metadata.annotations,
      'trainscaler.io/min-ps-replicas': '1',
      'trainscaler.io/max-ps-replicas': '3',
    };
    const view = readJob(job);
    assert.deepEqual(
      view.roles.map((r) => [r.role, r.minReplicas, r.maxReplicas]),
      [
        ['PS', 1, 3],
        ['Worker', 2, 10],
      ],
    );
    assert.equal(view.signature, 'TFJob:tf:2.15', 'kind and the worker image');
    const fixed = tfJob();
    delete spec(fixed).enableDynamicWorker;
    assert.equal(readJob(fixed).elastic, false);
    fixed.metadata.annotations = { ...fixed.metadata.annotations, 'trainscaler.io/elastic': 'true' };
    assert.equal(readJob(fixed).elastic, true);
    const psOnly = tfJob();
    delete spec(psOnly).tfReplicaSpecs.Worker;
    assert.deepEqual(
      readJob(psOnly).roles.map((r) => [r.role, r.minReplicas, r.maxReplicas]),
      [['PS', 2, 2]],
    );
    assert.equal(readJob(psOnly).signature, 'TFJob:tf:2.15', 'no Worker: the first role');
  });

  it('StatefulSet: elastic only by annotation; its selector from matchLabels, refused without', () => {
    const sts = statefulSet();
    assert.equal(readJob(sts).elastic, true);
    sts.metadata.annotations = {};
    assert.equal(readJob(sts).elastic, false);
    spec(sts).selector.matchLabels = { app: 'ddp', tier: 'train' };
    assert.equal(podSelectorFor(sts), 'app=ddp,tier=train');
    for (const selector of [{}, { matchLabels: {} }]) {
      spec(sts).selector = selector;
      assert.throws(
        () => podSelectorFor(sts),
        invalid('/spec/selector/matchLabels', /a StatefulSet without matchLabels cannot be managed/),
      );
    }
    assert.equal(podSelectorFor(pytorchJob()), 'training.kubeflow.org/job-name=bert-finetune');
    assert.equal(podSelectorFor(tfJob()), 'training.kubeflow.org/job-name=wide-deep');
  });

  it('priority class: the run policy first, then the worker template, per kind', () => {
    const job = pytorchJob();
    assert.equal(readJob(job).priorityClassName, undefined);
    spec(job).pytorchReplicaSpecs.Worker.template.spec.priorityClassName = 'from-template';
    assert.equal(readJob(job).priorityClassName, 'from-template');
    spec(job).runPolicy = { schedulingPolicy: { priorityClass: 'from-run-policy' } };
    assert.equal(readJob(job).priorityClassName, 'from-run-policy');
    const tf = tfJob();
    spec(tf).tfReplicaSpecs.Worker.template.spec.priorityClassName = 'tf-template';
    assert.equal(readJob(tf).priorityClassName, 'tf-template');
    spec(tf).runPolicy = { schedulingPolicy: { priorityClass: 'tf-run' } };
    assert.equal(readJob(tf).priorityClassName, 'tf-run');
    const sts = statefulSet();
    spec(sts).template.spec.priorityClassName = 'sts';
    assert.equal(readJob(sts).priorityClassName, 'sts');
  });

  it('resources: absent or null is 0, GPUs from nvidia.com/gpu, a non-quantity refused with its path', () => {
    const sts = statefulSet();
    const container = spec(sts).template.spec.containers[0];
    container.resources = {
      requests: { cpu: '1500m', memory: null, 'nvidia.com/gpu': 2 },
      limits: { cpu: 2 },
    };
    const role = readJob(sts).roles[0];
    assert.deepEqual(role?.requests, { cpuMillis: 1500, memoryBytes: 0, gpus: 2 });
    assert.deepEqual(role?.limits, { cpuMillis: 2000, memoryBytes: 0, gpus: 0 });
    container.resources = { limits: { memory: { amount: 1 } } };
    assert.throws(
      () => readJob(sts),
      invalid('/spec/template/spec/containers/0/resources/limits/memory', /expected a quantity/),
    );
  });

  it('the training container: by annotation, else the conventional name, else the first; refused without', () => {
    const job = pytorchJob();
    const containers = spec(job).pytorchReplicaSpecs.Worker.template.spec.containers;
    assert.equal(readJob(job).roles[0]?.containerName, 'pytorch');
    job.metadata.annotations = {
      ...job.metadata.annotations,
      'trainscaler.io/container': containers[1].name,
    };
    assert.deepEqual(
      [readJob(job).roles[0]?.containerName, readJob(job).roles[0]?.containerIndex],
      [containers[1].name, 1],
    );
    job.metadata.annotations['trainscaler.io/container'] = 'nope';
    assert.equal(readJob(job).roles[0]?.containerIndex, 0);
    delete containers[0].name;
    assert.throws(
      () => readJob(job),
      invalid('/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/name', /container has no name/),
    );
    spec(job).pytorchReplicaSpecs.Worker.template.spec.containers = [];
    assert.throws(
      () => readJob(job),
      invalid(
        '/spec/pytorchReplicaSpecs/Worker/template/spec/containers',
        /the pod template has no containers/,
      ),
    );
    const sts = statefulSet();
    spec(sts).template.spec.containers.unshift({ name: 'sidecar', image: 'side:1' });
    assert.equal(readJob(sts).roles[0]?.containerName, 'sidecar', 'no conventional name: the first');
  });

  it('a state annotation that is not even JSON is no error: it is not read', () => {
    const view = readJob(pytorchJob({ annotations: { 'trainscaler.io/state': '{' } }));
    assert.deepEqual(view.state, { oomCount: 0, paused: false });
  });

  it('batch sizes, target and creation time when given; signature by annotation, else kind and image or name', () => {
    const view = readJob(
      pytorchJob({
        annotations: {
          'trainscaler.io/local-batch-size': '32',
          'trainscaler.io/target-samples': '1000',
          'trainscaler.io/signature': 'bert',
        },
      }),
    );
    assert.deepEqual(
      [view.localBatchSize, view.globalBatchSize, view.targetSamples, view.signature],
      [32, 384, 1000, 'bert'],
    );
    assert.equal(view.creationTimestamp, Date.parse('2026-11-29T10:00:00Z') / 1000);
    const none = pytorchJob({ annotations: { 'trainscaler.io/global-batch-size': '0' } });
    none.metadata.creationTimestamp = 'not a date';
    const v2 = readJob(none);
    assert.deepEqual(
      [v2.localBatchSize, v2.globalBatchSize, v2.targetSamples, v2.creationTimestamp],
      [undefined, undefined, undefined, undefined],
    );
    assert.equal('creationTimestamp' in v2, false);
    none.metadata.creationTimestamp = new Date(1_700_000_000_500);
    assert.equal(readJob(none).creationTimestamp, 1_700_000_000);
    delete spec(none).pytorchReplicaSpecs.Worker.template.spec.containers[0].image;
    assert.equal(readJob(none).signature, 'PyTorchJob:bert-finetune');
  });

  it('kinds, API versions, refs and roles', () => {
    assert.deepEqual(SUPPORTED_KINDS, ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob']);
    assert.equal(isSupportedKind('TFJob'), true);
    assert.equal(isSupportedKind('MPIJob'), false);
    assert.deepEqual(SUPPORTED_KINDS.map(apiVersionOf), [
      'kubeflow.org/v1',
      'kubeflow.org/v1',
      'apps/v1',
      'batch/v1',
      'jobset.x-k8s.io/v1alpha2',
      'trainer.kubeflow.org/v1alpha1',
    ]);
    const sts = statefulSet();
    delete sts.metadata.namespace;
    assert.deepEqual(refOf(sts), { kind: 'StatefulSet', namespace: 'default', name: 'ddp-trainer' });
    assert.throws(() => refOf({ ...sts, kind: 'Deployment' }), UnsupportedJobKindError);
    const view = readJob(tfJob());
    assert.equal(roleOf(view, 'PS')?.replicas, 2);
    assert.equal(roleOf(view, 'Master'), undefined);
  });
});

describe('buildJobPatch: edge cases', () => {
  it('no resourceVersion: no pin; an absent replicas is added; pauses and evictions add no job field', () => {
    const job = pytorchJob();
    delete job.metadata.resourceVersion;
    delete spec(job).pytorchReplicaSpecs.Worker.replicas;
    const ops = buildJobPatch(
      job,
      [
        { kind: 'replicas', role: 'Worker', from: 1, to: 3 },
        { kind: 'pause', reason: 'x' },
        { kind: 'evict-pod', pod: 'p' },
      ],
      {},
    );
    assert.deepEqual(ops, [{ op: 'add', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 3 }]);
  });

  it('refuses a change to a role the job does not have, naming it', () => {
    for (const change of [
      { kind: 'replicas', role: 'PS', from: 1, to: 2 },
      { kind: 'resources', role: 'PS', resource: 'cpu', field: 'limits', from: 1, to: 2 },
    ] as const) {
      assert.throws(() => buildJobPatch(pytorchJob(), [change], {}), invalid('/spec', /job has no PS role/));
    }
  });

  it('writes quantities the API server keeps: memory in Gi/Mi, CPU in millicores', () => {
    const job = pytorchJob();
    const ops = buildJobPatch(
      job,
      [
        {
          kind: 'resources',
          role: 'Worker',
          resource: 'memory',
          field: 'requests',
          from: 0,
          to: 1536 * 1024 ** 2,
        },
        { kind: 'resources', role: 'Worker', resource: 'cpu', field: 'requests', from: 0, to: 3000 },
      ],
      {},
    );
    const after = readJob(apply(job, ops)).roles[0];
    assert.equal(after?.requests.memoryBytes, 1536 * 1024 ** 2);
    assert.equal(after?.requests.cpuMillis, 3000);
    assert.equal(
      ops.filter((o) => o.op === 'add' && o.path.endsWith('/resources/requests')).length,
      0,
      'parent exists',
    );
  });
});
