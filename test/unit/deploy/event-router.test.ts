import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  EventRouter,
  type InformerEvent,
  POLICY_REVIEW_KEY,
  type WatchedObject,
} from '../../../lib/runner/event-router.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');

function job(name: string, extra: Partial<WatchedObject['metadata']> = {}, status?: unknown): WatchedObject {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name, namespace: 'ml', uid: `uid-${name}`, ...extra },
    ...(status ? { status } : {}),
  } as WatchedObject;
}

const SUCCEEDED = { conditions: [{ type: 'Succeeded', status: 'True' }] };

function pod(name: string, jobName?: string): WatchedObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'ml',
      ...(jobName ? { labels: { 'training.kubeflow.org/job-name': jobName } } : {}),
    },
  };
}

const ev = (type: InformerEvent['type'], object: WatchedObject, initial = false): InformerEvent => ({
  type,
  object,
  initial,
});

describe('EventRouter', () => {
  const router = () => new EventRouter({ now: () => NOW, submitGraceMs: 5 * 60_000 });

  it('sends a job ADDED by the watch to submit, and only then', () => {
    const r = router();
    const tasks = r.route(ev('ADDED', job('bert')));
    assert.deepEqual(
      tasks.map((t) => [t.trigger, t.key]),
      [['submit', 'submit:PyTorchJob/ml/bert']],
    );
    assert.deepEqual(tasks[0]?.payload.type, 'ADDED');
    assert.deepEqual(r.route(ev('MODIFIED', job('bert'))), []);
  });

  it('treats a listed job as submitted only when recent and never decided on', () => {
    const r = router();
    const recent = '2026-11-29T11:58:00Z';
    const old = '2026-11-29T11:00:00Z';
    assert.equal(r.route(ev('ADDED', job('new', { creationTimestamp: recent }), true)).length, 1);
    assert.equal(r.route(ev('ADDED', job('old', { creationTimestamp: old }), true)).length, 0);
    const decided = job('decided', {
      creationTimestamp: recent,
      annotations: { 'trainscaler.io/last-decision': '{}' },
    });
    assert.equal(r.route(ev('ADDED', decided, true)).length, 0);
  });

  it('records a success once per run: not when listed already succeeded, not twice, again for a new uid', () => {
    const r = router();
    assert.deepEqual(r.route(ev('ADDED', job('done', {}, SUCCEEDED), true)), []);
    assert.deepEqual(r.route(ev('MODIFIED', job('done', {}, SUCCEEDED))), []);
    const finishing = r.route(ev('MODIFIED', job('bert', {}, SUCCEEDED)));
    assert.deepEqual(
      finishing.map((t) => [t.trigger, t.key]),
      [['cluster-event', 'job:PyTorchJob/ml/bert']],
    );
    assert.deepEqual(r.route(ev('MODIFIED', job('bert', {}, SUCCEEDED))), []);
    const rerun = job('bert', { uid: 'uid-bert-2' }, SUCCEEDED);
    assert.equal(r.route(ev('MODIFIED', rerun)).length, 1);
  });

  it('reviews a job for faults on any event of its pods, one queue key per job, and ignores other pods', () => {
    const r = router();
    const a = r.route(ev('MODIFIED', pod('bert-worker-0', 'bert')));
    const b = r.route(ev('ADDED', pod('bert-worker-1', 'bert'), true));
    assert.equal(a[0]?.trigger, 'cluster-event');
    assert.equal(a[0]?.key, 'pods:PyTorchJob/ml/bert');
    assert.equal(b[0]?.key, a[0]?.key);
    assert.deepEqual(r.route(ev('MODIFIED', pod('nginx-abc'))), []);
  });

  it('skips pods whose job is not watched (a StatefulSet outside the selector)', () => {
    const r = new EventRouter({
      ownerWatched: (kind, _ns, name) => kind !== 'StatefulSet' || name === 'trainer',
    });
    const stsPod = (owner: string): WatchedObject =>
      ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${owner}-0`,
          namespace: 'ml',
          ownerReferences: [{ kind: 'StatefulSet', name: owner, controller: true }],
        },
      }) as WatchedObject;
    assert.equal(r.route(ev('MODIFIED', stsPod('trainer'))).length, 1);
    assert.equal(r.route(ev('MODIFIED', stsPod('postgres'))).length, 0);
    assert.equal(r.route(ev('MODIFIED', pod('bert-worker-0', 'bert'))).length, 1);
  });

  describe('batch/v1 Jobs, JobSets and TrainJobs', () => {
    const of = (
      kind: string,
      apiVersion: string,
      name: string,
      extra: Partial<WatchedObject['metadata']> = {},
      status?: unknown,
    ): WatchedObject =>
      ({
        apiVersion,
        kind,
        metadata: { name, namespace: 'ml', uid: `uid-${kind}-${name}`, ...extra },
        ...(status ? { status } : {}),
      }) as WatchedObject;
    const kinds = [
      ['Job', 'batch/v1', 'Complete'],
      ['JobSet', 'jobset.x-k8s.io/v1alpha2', 'Completed'],
      ['TrainJob', 'trainer.kubeflow.org/v1alpha1', 'Complete'],
    ] as const;

    for (const [kind, apiVersion, done] of kinds) {
      it(`a ${kind} ADDED by the watch is submitted; its own condition ${done} records its success once`, () => {
        const r = router();
        assert.deepEqual(
          r.route(ev('ADDED', of(kind, apiVersion, 'llm'))).map((t) => [t.trigger, t.key]),
          [['submit', `submit:${kind}/ml/llm`]],
        );
        // Another kind's success condition is not this kind's success.
        const other = done === 'Completed' ? 'Complete' : 'Completed';
        const wrong = {
          conditions: [
            { type: other, status: 'True' },
            { type: 'Succeeded', status: 'True' },
          ],
        };
        assert.deepEqual(r.route(ev('MODIFIED', of(kind, apiVersion, 'llm', {}, wrong))), []);
        const finished = of(kind, apiVersion, 'llm', {}, { conditions: [{ type: done, status: 'True' }] });
        assert.deepEqual(
          r.route(ev('MODIFIED', finished)).map((t) => [t.trigger, t.key]),
          [['cluster-event', `job:${kind}/ml/llm`]],
        );
        assert.deepEqual(r.route(ev('MODIFIED', finished)), []);
      });
    }

    it("a JobSet's child Jobs and a TrainJob's JobSet are their owner's parts: neither submitted nor finished", () => {
      const r = router();
      const child = of('Job', 'batch/v1', 'llm-node-0', {
        ownerReferences: [{ kind: 'JobSet', name: 'llm', controller: true }],
      });
      assert.deepEqual(r.route(ev('ADDED', child)), []);
      const completeChild = of(
        'Job',
        'batch/v1',
        'llm-node-0',
        { ownerReferences: [{ kind: 'JobSet', name: 'llm', controller: true }] },
        { conditions: [{ type: 'Complete', status: 'True' }] },
      );
      assert.deepEqual(r.route(ev('MODIFIED', completeChild)), []);
      const trainers = of('JobSet', 'jobset.x-k8s.io/v1alpha2', 'tj', {
        ownerReferences: [{ kind: 'TrainJob', name: 'tj', controller: true }],
      });
      assert.deepEqual(r.route(ev('ADDED', trainers)), []);
      // An owner reference that is not a controller does not make it another object's part.
      const referenced = of('Job', 'batch/v1', 'solo', {
        ownerReferences: [{ kind: 'ConfigMap', name: 'x', controller: false }],
      });
      assert.equal(r.route(ev('ADDED', referenced)).length, 1);
    });

    it("pods of a Job review the Job, pods of a JobSet's child Job review the JobSet", () => {
      const r = router();
      const jobPod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'solo-0-abc',
          namespace: 'ml',
          ownerReferences: [{ kind: 'Job', name: 'solo', controller: true }],
        },
      } as WatchedObject;
      assert.deepEqual(
        r.route(ev('MODIFIED', jobPod)).map((t) => t.key),
        ['pods:Job/ml/solo'],
      );
      const setPod = {
        ...jobPod,
        metadata: {
          ...jobPod.metadata,
          labels: { 'jobset.sigs.k8s.io/jobset-name': 'llm' },
          ownerReferences: [{ kind: 'Job', name: 'llm-node-0', controller: true }],
        },
      } as WatchedObject;
      assert.deepEqual(
        r.route(ev('MODIFIED', setPod)).map((t) => t.key),
        ['pods:JobSet/ml/llm'],
      );
    });
  });

  it("a TrainingAutoscaler's spec change asks for the tick now; its status writes and the start's list do not", () => {
    const r = router();
    const policy = (generation: number, uid = 'uid-p'): WatchedObject =>
      ({
        apiVersion: 'trainscaler.io/v1alpha1',
        kind: 'TrainingAutoscaler',
        metadata: { name: 'p', namespace: 'ml', uid, generation },
      }) as WatchedObject;
    const keys = (event: InformerEvent) => r.route(event).map((t) => `${t.trigger}:${t.key}`);
    assert.deepEqual(keys(ev('ADDED', policy(1), true)), [], 'listed at start: the state, not a change');
    assert.deepEqual(
      keys(ev('MODIFIED', policy(1))),
      [],
      'its status written (trainscaler): same generation',
    );
    assert.deepEqual(keys(ev('MODIFIED', policy(2))), [`schedule:${POLICY_REVIEW_KEY}`], 'its spec changed');
    assert.deepEqual(keys(ev('MODIFIED', policy(2))), []);
    assert.deepEqual(keys(ev('DELETED', policy(2))), [`schedule:${POLICY_REVIEW_KEY}`]);
    assert.deepEqual(keys(ev('ADDED', policy(1, 'uid-new'))), [`schedule:${POLICY_REVIEW_KEY}`], 'created');
    assert.deepEqual(keys(ev('MODIFIED', policy(1, 'uid-new'))), []);
  });
});
