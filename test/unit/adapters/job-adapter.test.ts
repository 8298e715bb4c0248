import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { buildJobPatch, podSelectorFor, readJob } from '../../../lib/adapters/job-adapter.js';
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

  it('parses the state annotation and treats managed=false as opted out', () => {
    const view = readJob(
      pytorchJob({
        annotations: {
          'trainscaler.io/state': '{"lastActionAt":100,"oomCount":2,"paused":true}',
          'trainscaler.io/managed': 'false',
        },
      }),
    );
    assert.equal(view.state.lastActionAt, 100);
    assert.equal(view.state.oomCount, 2);
    assert.equal(view.state.paused, true);
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
    const ops = buildJobPatch(obj, [], { 'trainscaler.io/state': '{}' });
    assert.deepEqual(ops.at(-1), {
      op: 'add',
      path: '/metadata/annotations',
      value: { 'trainscaler.io/state': '{}' },
    });
    const withMap = buildJobPatch(tfJob(), [], { 'trainscaler.io/state': '{}' });
    assert.equal(withMap.at(-1)?.path, '/metadata/annotations/trainscaler.io~1state');
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
});
