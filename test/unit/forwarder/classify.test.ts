import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hasSucceeded } from '../../../lib/adapters/job-adapter.js';
import {
  type ClassifyContext,
  classify,
  DEFAULT_GRACE_MS,
  DETAIL_TYPE,
  EVENT_SOURCE,
  type Forward,
} from '../../../lib/forwarder/classify.js';
import type { InformerEvent, WatchedObject } from '../../../lib/runner/event-router.js';
import { parseClusterEvent } from '../../../lib/triggers/cluster-event-payload.js';
import { parseSubmit } from '../../../lib/triggers/submit-payload.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');
const RECENT = '2026-11-29T11:58:00Z';
const OLD = '2026-11-29T10:00:00Z';
const ctx = (lastForwarded?: string): ClassifyContext => ({ lastForwarded, now: NOW, graceMs: 5 * 60_000 });

function pod(status: Record<string, unknown>, extra: Record<string, unknown> = {}): WatchedObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'bert-worker-0',
      namespace: 'ml',
      uid: 'pod-uid',
      labels: { 'training.kubeflow.org/job-name': 'bert', 'training.kubeflow.org/replica-type': 'worker' },
      ownerReferences: [
        { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert', uid: 'j', controller: true },
      ],
      managedFields: [{ manager: 'kubelet' }],
      ...extra,
    },
    status,
  } as WatchedObject;
}

function job(metadata: Record<string, unknown> = {}, status?: unknown): WatchedObject {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name: 'bert', namespace: 'ml', uid: 'job-uid', creationTimestamp: RECENT, ...metadata },
    ...(status ? { status } : {}),
  } as WatchedObject;
}

const ev = (type: InformerEvent['type'], object: WatchedObject, initial = false): InformerEvent => ({
  type,
  object,
  initial,
});

const running = {
  phase: 'Running',
  containerStatuses: [{ name: 'pytorch', restartCount: 0, state: { running: {} } }],
};
const oomRestarted = (restartCount: number, finishedAt = RECENT) => ({
  phase: 'Running',
  containerStatuses: [
    {
      name: 'pytorch',
      restartCount,
      state: { running: {} },
      lastState: { terminated: { reason: 'OOMKilled', exitCode: 137, finishedAt } },
    },
  ],
});
const oomNever = {
  phase: 'Failed',
  containerStatuses: [
    {
      name: 'pytorch',
      restartCount: 0,
      state: { terminated: { reason: 'OOMKilled', exitCode: 137, finishedAt: RECENT } },
    },
  ],
};

/** What EventBridge delivers to the function: the forwarded event in its envelope. */
function delivered(forward: Forward) {
  return {
    version: '0',
    id: 'e1',
    'detail-type': forward.detailType,
    source: EVENT_SOURCE,
    account: '123456789012',
    time: '2026-11-29T12:00:00Z',
    region: 'us-east-1',
    resources: [],
    detail: JSON.parse(JSON.stringify(forward.detail)),
  };
}

describe('forwarder classifier: pods', () => {
  it('forwards an OOM kill (restarted in place or terminated), not a healthy running pod', () => {
    assert.equal(classify(ev('MODIFIED', pod(running)), ctx()), undefined);
    const restarted = classify(ev('MODIFIED', pod(oomRestarted(1))), ctx());
    assert.equal(restarted?.reason, 'OOMKilled');
    assert.equal(restarted?.fingerprint, 'OOMKilled/pytorch/1');
    assert.equal(restarted?.detailType, DETAIL_TYPE.watchEvent);
    assert.equal(classify(ev('MODIFIED', pod(oomNever)), ctx())?.reason, 'OOMKilled');
  });

  it('does not forward a container terminated for another reason while running', () => {
    const status = oomRestarted(1);
    (
      status.containerStatuses[0] as { lastState: { terminated: { reason: string } } }
    ).lastState.terminated.reason = 'Error';
    assert.equal(classify(ev('MODIFIED', pod(status)), ctx()), undefined);
  });

  it('forwards one OOM kill once, and the next kill (restartCount) again', () => {
    assert.equal(classify(ev('MODIFIED', pod(oomRestarted(1))), ctx('OOMKilled/pytorch/1')), undefined);
    assert.equal(
      classify(ev('MODIFIED', pod(oomRestarted(2))), ctx('OOMKilled/pytorch/1'))?.fingerprint,
      'OOMKilled/pytorch/2',
    );
  });

  it('forwards an evicted or preempted pod, by status reason or DisruptionTarget condition', () => {
    assert.equal(
      classify(ev('MODIFIED', pod({ phase: 'Failed', reason: 'Evicted' })), ctx())?.reason,
      'Evicted',
    );
    assert.equal(
      classify(ev('MODIFIED', pod({ phase: 'Failed', reason: 'Preempted' })), ctx())?.reason,
      'Preempted',
    );
    const condition = (status: string, reason: string) => ({
      phase: 'Running',
      conditions: [{ type: 'DisruptionTarget', status, reason, lastTransitionTime: RECENT }],
    });
    assert.equal(
      classify(ev('MODIFIED', pod(condition('True', 'EvictionByEvictionAPI'))), ctx())?.reason,
      'Evicted',
    );
    assert.equal(
      classify(ev('MODIFIED', pod(condition('True', 'PreemptionByScheduler'))), ctx())?.reason,
      'Preempted',
    );
    assert.equal(
      classify(ev('MODIFIED', pod(condition('False', 'EvictionByEvictionAPI'))), ctx()),
      undefined,
    );
  });

  it('forwards a failed pod, not a succeeded one', () => {
    assert.equal(classify(ev('MODIFIED', pod({ phase: 'Failed' })), ctx())?.reason, 'Failed');
    assert.equal(classify(ev('MODIFIED', pod({ phase: 'Succeeded' })), ctx()), undefined);
  });

  it('forwards an unschedulable pod, not one merely pending scheduling', () => {
    const scheduled = (status: string, reason?: string) => ({
      phase: 'Pending',
      conditions: [
        { type: 'PodScheduled', status, ...(reason ? { reason } : {}), lastTransitionTime: RECENT },
      ],
    });
    assert.equal(
      classify(ev('MODIFIED', pod(scheduled('False', 'Unschedulable'))), ctx())?.reason,
      'Unschedulable',
    );
    assert.equal(classify(ev('MODIFIED', pod(scheduled('False', 'SchedulingGated'))), ctx()), undefined);
    assert.equal(classify(ev('MODIFIED', pod(scheduled('True'))), ctx()), undefined);
  });

  it('ignores pods of no supported job, deleted pods and pods without uid', () => {
    const orphan = pod(oomNever, { labels: {}, ownerReferences: [] });
    assert.equal(classify(ev('MODIFIED', orphan), ctx()), undefined);
    const replicaSet = pod(oomNever, {
      labels: {},
      ownerReferences: [{ kind: 'ReplicaSet', name: 'x', controller: true }],
    });
    assert.equal(classify(ev('MODIFIED', replicaSet), ctx()), undefined);
    assert.equal(classify(ev('DELETED', pod(oomNever)), ctx()), undefined);
    assert.equal(classify(ev('MODIFIED', pod(oomNever, { uid: undefined })), ctx()), undefined);
  });

  it('forwards an eviction of a pod OOM-killed earlier: a new fact is not hidden by an old one', () => {
    const evictedAfterOom = {
      ...oomRestarted(1),
      conditions: [
        {
          type: 'DisruptionTarget',
          status: 'True',
          reason: 'EvictionByEvictionAPI',
          lastTransitionTime: RECENT,
        },
      ],
    };
    const forward = classify(ev('MODIFIED', pod(evictedAfterOom)), ctx('OOMKilled/pytorch/1'));
    assert.equal(forward?.reason, 'Evicted');
    assert.equal(forward?.fingerprint, 'OOMKilled/pytorch/1+Evicted');
    assert.equal(
      classify(ev('MODIFIED', pod(evictedAfterOom)), ctx('OOMKilled/pytorch/1+Evicted')),
      undefined,
    );
    // A fact that went away (the OOM kill's lastState replaced) is no news either.
    const evictedOnly = { phase: 'Running', conditions: evictedAfterOom.conditions };
    assert.equal(classify(ev('MODIFIED', pod(evictedOnly)), ctx('OOMKilled/pytorch/1+Evicted')), undefined);
  });

  it('ignores pods of jobs the informers do not select (a StatefulSet selector)', () => {
    const sts = pod(oomNever, {
      labels: {},
      ownerReferences: [{ kind: 'StatefulSet', name: 'db', controller: true }],
    });
    const watched = (selected: boolean) => ({ ...ctx(), ownerWatched: () => selected });
    assert.equal(classify(ev('MODIFIED', sts), watched(false)), undefined);
    assert.equal(classify(ev('MODIFIED', sts), watched(true))?.reason, 'OOMKilled');
  });

  it('in the first list, forwards only recent faults never forwarded, or newer than the ledger says', () => {
    assert.ok(classify(ev('ADDED', pod(oomRestarted(1, RECENT)), true), ctx()));
    assert.equal(classify(ev('ADDED', pod(oomRestarted(1, OLD)), true), ctx()), undefined);
    assert.equal(
      classify(ev('ADDED', pod(oomRestarted(1, RECENT)), true), ctx('OOMKilled/pytorch/1')),
      undefined,
    );
    // Killed again while the forwarder was down: the ledger knows the first kill, the second is new.
    assert.ok(classify(ev('ADDED', pod(oomRestarted(2, OLD)), true), ctx('OOMKilled/pytorch/1')));
    // Nor does the next update of a pod with an old fault never forwarded (a fresh install: no replay).
    assert.equal(classify(ev('MODIFIED', pod(oomRestarted(1, OLD))), ctx()), undefined);
    // An undated fault is new when it appears live, unknown in the first list.
    assert.equal(classify(ev('MODIFIED', pod({ phase: 'Failed' })), ctx())?.reason, 'Failed');
    assert.equal(classify(ev('ADDED', pod({ phase: 'Failed' }), true), ctx()), undefined);
  });

  it('strips managedFields and yields the event functions/cluster-event.ts parses', () => {
    const forward = classify(ev('MODIFIED', pod(oomRestarted(1))), ctx());
    assert.ok(forward);
    assert.equal('managedFields' in forward.detail.object.metadata, false);
    const trigger = parseClusterEvent(delivered(forward));
    assert.equal(trigger.subject, 'pod');
    assert.deepEqual(trigger.subject === 'pod' && trigger.ref, {
      kind: 'PyTorchJob',
      namespace: 'ml',
      name: 'bert',
    });
  });
});

describe('forwarder classifier: jobs', () => {
  it('forwards a job ADDED recently as submitted, not an old one nor one trainscaler decided on', () => {
    const forward = classify(ev('ADDED', job()), ctx());
    assert.equal(forward?.detailType, DETAIL_TYPE.jobSubmitted);
    assert.equal(classify(ev('ADDED', job({ creationTimestamp: OLD })), ctx()), undefined);
    const decided = job({ annotations: { 'trainscaler.io/last-decision': '{}' } });
    assert.equal(classify(ev('ADDED', decided), ctx()), undefined);
    assert.equal(classify(ev('ADDED', job()), ctx('Submitted')), undefined);
  });

  it('does not forward a job MODIFIED without success', () => {
    assert.equal(classify(ev('MODIFIED', job()), ctx()), undefined);
    const running = { conditions: [{ type: 'Running', status: 'True', lastTransitionTime: RECENT }] };
    assert.equal(classify(ev('MODIFIED', job({}, running)), ctx('Submitted')), undefined);
  });

  it('forwards a job that succeeded once, not while Succeeded is False', () => {
    const succeeded = (status: string, at = RECENT) => ({
      conditions: [{ type: 'Succeeded', status, lastTransitionTime: at }],
    });
    const forward = classify(ev('MODIFIED', job({}, succeeded('True'))), ctx('Submitted'));
    assert.equal(forward?.reason, 'JobSucceeded');
    assert.equal(forward?.detailType, DETAIL_TYPE.watchEvent);
    assert.equal(classify(ev('MODIFIED', job({}, succeeded('True'))), ctx('Succeeded')), undefined);
    assert.equal(classify(ev('MODIFIED', job({}, succeeded('False'))), ctx('Submitted')), undefined);
    // A success long ago listed at start (fresh ledger) is history; one listed with the ledger at Submitted is new.
    assert.equal(
      classify(ev('ADDED', job({ creationTimestamp: OLD }, succeeded('True', OLD)), true), ctx()),
      undefined,
    );
    assert.ok(
      classify(ev('ADDED', job({ creationTimestamp: OLD }, succeeded('True', OLD)), true), ctx('Submitted')),
    );
  });

  it('ignores kinds trainscaler does not manage', () => {
    const deployment = { ...job(), kind: 'Deployment', apiVersion: 'apps/v1' } as WatchedObject;
    assert.equal(classify(ev('ADDED', deployment), ctx()), undefined);
  });

  it('yields the events functions/submit.ts and functions/cluster-event.ts parse', () => {
    const submitted = classify(ev('ADDED', job()), ctx());
    assert.ok(submitted);
    assert.deepEqual(parseSubmit(delivered(submitted)), {
      kind: 'PyTorchJob',
      namespace: 'ml',
      name: 'bert',
    });
    const done = classify(
      ev(
        'MODIFIED',
        job({}, { conditions: [{ type: 'Succeeded', status: 'True', lastTransitionTime: RECENT }] }),
      ),
      ctx(),
    );
    assert.ok(done);
    assert.equal(parseClusterEvent(delivered(done)).subject, 'job');
  });

  it("forwards a Job, JobSet or TrainJob submitted or completed (each kind's own condition), not their parts", () => {
    const of = (kind: string, apiVersion: string, metadata: Record<string, unknown> = {}, status?: unknown) =>
      ({
        apiVersion,
        kind,
        metadata: {
          name: 'llm',
          namespace: 'ml',
          uid: `uid-${kind}`,
          creationTimestamp: RECENT,
          ...metadata,
        },
        ...(status ? { status } : {}),
      }) as WatchedObject;
    for (const [kind, apiVersion, done] of [
      ['Job', 'batch/v1', 'Complete'],
      ['JobSet', 'jobset.x-k8s.io/v1alpha2', 'Completed'],
      ['TrainJob', 'trainer.kubeflow.org/v1alpha1', 'Complete'],
    ] as const) {
      const submitted = classify(ev('ADDED', of(kind, apiVersion)), ctx());
      assert.equal(submitted?.reason, 'JobSubmitted', kind);
      assert.deepEqual(parseSubmit(delivered(submitted)), { kind, namespace: 'ml', name: 'llm' });
      const finished = of(
        kind,
        apiVersion,
        {},
        {
          conditions: [{ type: done, status: 'True', lastTransitionTime: RECENT }],
        },
      );
      const forwarded = classify(ev('MODIFIED', finished), ctx('Submitted'));
      assert.equal(forwarded?.reason, 'JobSucceeded', kind);
      assert.equal(parseClusterEvent(delivered(forwarded)).subject, 'job');
      // Not finished while the condition is False.
      const running = of(kind, apiVersion, {}, { conditions: [{ type: done, status: 'False' }] });
      assert.equal(classify(ev('MODIFIED', running), ctx('Submitted')), undefined, kind);
    }
    const child = of('Job', 'batch/v1', {
      ownerReferences: [
        { apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet', name: 'llm', uid: 'u', controller: true },
      ],
    });
    assert.equal(classify(ev('ADDED', child), ctx()), undefined);
  });
});

describe('forwarder classifier: what leaves the cluster', () => {
  const SECRET = 'sk-live-4f9a1c0ffee';
  /** A pod as a tenant writes it: a key in env, envFrom, a Secret volume, annotations, the command line. */
  const leaky = (status: Record<string, unknown>): WatchedObject => {
    const p = pod(status, {
      annotations: {
        'example.com/api-key': SECRET,
        'kubectl.kubernetes.io/last-applied-configuration': SECRET,
      },
      labels: {
        'training.kubeflow.org/job-name': 'bert',
        'training.kubeflow.org/replica-type': 'worker',
        'team.example.com/token': SECRET,
      },
    }) as WatchedObject & Record<string, unknown>;
    p.spec = {
      nodeName: 'gpu-1',
      containers: [
        {
          name: 'pytorch',
          image: 'registry.example.com/train:1',
          command: ['torchrun', 'train.py', `--api-key=${SECRET}`],
          env: [{ name: 'OPENAI_API_KEY', value: SECRET }],
          envFrom: [{ secretRef: { name: 'keys' } }],
          resources: { requests: { memory: '2Gi' }, limits: { memory: '2Gi' } },
        },
      ],
      volumes: [{ name: 'keys', secret: { secretName: 'keys' } }],
    };
    return p;
  };
  const killed = {
    ...oomNever,
    message: `pod failed: ${SECRET}`,
    conditions: [
      { type: 'Ready', status: 'False', reason: 'PodFailed', message: SECRET, lastTransitionTime: RECENT },
    ],
    containerStatuses: [
      {
        name: 'pytorch',
        restartCount: 0,
        image: 'registry.example.com/train:1',
        state: {
          terminated: {
            reason: 'OOMKilled',
            exitCode: 137,
            finishedAt: RECENT,
            message: `last log: ${SECRET}`,
          },
        },
      },
    ],
  };

  it('an OOM-killed pod with an API key in its env: the key is nowhere in the forwarded event', () => {
    const forward = classify(ev('MODIFIED', leaky(killed)), ctx());
    assert.equal(forward?.reason, 'OOMKilled');
    const sent = JSON.stringify(delivered(forward as Forward));
    assert.equal(sent.includes(SECRET), false, sent);
    for (const field of ['env', 'envFrom', 'volumes', 'command', 'annotations', 'managedFields', 'image'])
      assert.equal(sent.includes(`"${field}"`), false, `${field} is not forwarded`);
  });

  it('keeps what the handlers read: owner, job labels, container states and resources', () => {
    const forward = classify(ev('MODIFIED', leaky(killed)), ctx()) as Forward;
    const object = JSON.parse(JSON.stringify(forward.detail.object));
    assert.deepEqual(object.metadata, {
      name: 'bert-worker-0',
      namespace: 'ml',
      uid: 'pod-uid',
      labels: { 'training.kubeflow.org/job-name': 'bert', 'training.kubeflow.org/replica-type': 'worker' },
      ownerReferences: [
        { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert', uid: 'j', controller: true },
      ],
    });
    assert.deepEqual(object.spec, {
      nodeName: 'gpu-1',
      containers: [
        { name: 'pytorch', resources: { requests: { memory: '2Gi' }, limits: { memory: '2Gi' } } },
      ],
    });
    assert.deepEqual(object.status, {
      phase: 'Failed',
      conditions: [{ type: 'Ready', status: 'False', reason: 'PodFailed', lastTransitionTime: RECENT }],
      containerStatuses: [
        {
          name: 'pytorch',
          restartCount: 0,
          state: { terminated: { reason: 'OOMKilled', exitCode: 137, finishedAt: RECENT } },
        },
      ],
    });
    // Classified again as the bus delivers it, the same fault; parsed by the handler, the same job.
    const again = classify(ev('MODIFIED', object), ctx());
    assert.equal(again?.fingerprint, forward.fingerprint);
    const trigger = parseClusterEvent(delivered(forward));
    assert.deepEqual(trigger.subject === 'pod' && trigger.ref, {
      kind: 'PyTorchJob',
      namespace: 'ml',
      name: 'bert',
    });
  });

  it('a restarted container keeps its last state, running start and waiting reason; init containers too', () => {
    const status = {
      phase: 'Running',
      initContainerStatuses: [
        { name: 'init', restartCount: 0, state: { waiting: { reason: 'PodInitializing', message: SECRET } } },
      ],
      containerStatuses: [
        {
          name: 'pytorch',
          restartCount: 1,
          ready: true,
          state: { running: { startedAt: RECENT } },
          lastState: {
            terminated: { reason: 'OOMKilled', exitCode: 137, signal: 9, startedAt: OLD, finishedAt: RECENT },
          },
        },
      ],
    };
    const forward = classify(ev('MODIFIED', leaky(status)), ctx()) as Forward;
    const object = JSON.parse(JSON.stringify(forward.detail.object));
    assert.deepEqual(object.status.containerStatuses, status.containerStatuses);
    assert.deepEqual(object.status.initContainerStatuses, [
      { name: 'init', restartCount: 0, state: { waiting: { reason: 'PodInitializing' } } },
    ]);
    assert.equal(JSON.stringify(forward).includes(SECRET), false);
  });

  it('an evicted pod keeps its reason and deletion time; a job is sent without its spec (its pod templates)', () => {
    const evicted = leaky({ phase: 'Failed', reason: 'Evicted', message: SECRET });
    (evicted.metadata as Record<string, unknown>).deletionTimestamp = RECENT;
    const forward = classify(ev('MODIFIED', evicted), ctx()) as Forward;
    const object = JSON.parse(JSON.stringify(forward.detail.object));
    assert.equal(object.status.reason, 'Evicted');
    assert.equal(object.metadata.deletionTimestamp, RECENT);
    assert.equal(JSON.stringify(forward).includes(SECRET), false);

    const submitted = {
      ...job({ annotations: { note: SECRET }, labels: { owner: SECRET } }),
      spec: {
        pytorchReplicaSpecs: {
          Worker: { template: { spec: { containers: [{ env: [{ value: SECRET }] }] } } },
        },
      },
    } as WatchedObject;
    const sent = classify(ev('ADDED', submitted), ctx()) as Forward;
    assert.equal(sent.reason, 'JobSubmitted');
    assert.deepEqual(JSON.parse(JSON.stringify(sent.detail.object)), {
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: { name: 'bert', namespace: 'ml', uid: 'job-uid', creationTimestamp: RECENT },
    });
    const done = classify(
      ev('MODIFIED', {
        ...submitted,
        status: {
          conditions: [{ type: 'Succeeded', status: 'True', message: SECRET, lastTransitionTime: RECENT }],
        },
      } as WatchedObject),
      ctx('Submitted'),
    ) as Forward;
    assert.equal(JSON.stringify(done).includes(SECRET), false);
    const trigger = parseClusterEvent(delivered(done));
    assert.ok(trigger.subject === 'job' && hasSucceeded(trigger.job), 'the handler still sees the success');
  });
});

describe('forwarder classifier: each fact, its fingerprint and its time', () => {
  const disruption = (reason: string, at: unknown = RECENT) => ({
    phase: 'Running',
    conditions: [{ type: 'DisruptionTarget', status: 'True', reason, lastTransitionTime: at }],
  });

  it('names every disruption reason the API server and kubelet give; an unknown one is an eviction', () => {
    for (const [reason, expected] of [
      ['EvictionByEvictionAPI', 'Evicted'],
      ['TerminationByKubelet', 'Evicted'],
      ['DeletionByTaintManager', 'Evicted'],
      ['PreemptionByScheduler', 'Preempted'],
      ['PreemptionByKubeScheduler', 'Preempted'],
      ['SomethingNewInKubernetes', 'Evicted'],
    ] as const) {
      const forward = classify(ev('MODIFIED', pod(disruption(reason))), ctx());
      assert.deepEqual([forward?.reason, forward?.fingerprint], [expected, expected], reason);
    }
  });

  it('fingerprints a failed and an unschedulable pod by their fact, and names the subject Kind/namespace/name', () => {
    const failed = classify(ev('MODIFIED', pod({ phase: 'Failed' })), ctx());
    assert.equal(failed?.fingerprint, 'Failed');
    assert.equal(failed?.subject, 'Pod/ml/bert-worker-0');
    const unschedulable = {
      phase: 'Pending',
      conditions: [
        { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', lastTransitionTime: RECENT },
      ],
    };
    assert.equal(classify(ev('MODIFIED', pod(unschedulable)), ctx())?.fingerprint, 'Unschedulable');
    // An object without a namespace is in `default`, as the API server has it.
    const bare = job({ namespace: undefined });
    assert.equal(classify(ev('ADDED', bare), ctx())?.subject, 'PyTorchJob/default/bert');
  });

  it('an OOM kill without a restart count is the container first kill; an init container counts too', () => {
    const noCount = {
      phase: 'Failed',
      containerStatuses: [
        {
          name: 'pytorch',
          state: { terminated: { reason: 'OOMKilled', exitCode: 137, finishedAt: RECENT } },
        },
      ],
    };
    assert.equal(classify(ev('MODIFIED', pod(noCount)), ctx())?.fingerprint, 'OOMKilled/pytorch/0+Failed');
    const init = {
      phase: 'Pending',
      initContainerStatuses: [
        {
          name: 'fetch-data',
          restartCount: 2,
          state: { waiting: { reason: 'CrashLoopBackOff' } },
          lastState: { terminated: { reason: 'OOMKilled', exitCode: 137, finishedAt: RECENT } },
        },
      ],
    };
    assert.equal(classify(ev('MODIFIED', pod(init)), ctx())?.fingerprint, 'OOMKilled/fetch-data/2');
  });

  it('skips entries of a status that are not objects', () => {
    const odd = {
      phase: 'Failed',
      conditions: [null, 'x', { type: 'PodScheduled', status: 'True' }],
      initContainerStatuses: [null],
      containerStatuses: [
        null,
        7,
        { name: 'pytorch', restartCount: 0, state: { terminated: { reason: 'Error', finishedAt: RECENT } } },
      ],
    };
    assert.equal(classify(ev('MODIFIED', pod(odd)), ctx())?.fingerprint, 'Failed');
  });

  it("dates each fact by the object's own time: old ones are history to a fresh ledger", () => {
    // No phase: a Failed phase is a fact of its own (undated here).
    const evicted = (at: string) => pod({ reason: 'Evicted' }, { deletionTimestamp: at }) as WatchedObject;
    assert.equal(classify(ev('MODIFIED', evicted(RECENT)), ctx())?.reason, 'Evicted');
    assert.equal(classify(ev('MODIFIED', evicted(OLD)), ctx()), undefined);
    assert.equal(classify(ev('MODIFIED', pod(disruption('TerminationByKubelet', OLD))), ctx()), undefined);
    const unschedulableSince = (at: string) => ({
      phase: 'Pending',
      conditions: [
        { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', lastTransitionTime: at },
      ],
    });
    assert.equal(classify(ev('MODIFIED', pod(unschedulableSince(OLD))), ctx()), undefined);
    // The informer's objects carry Date objects, not strings.
    assert.equal(
      classify(ev('MODIFIED', pod(oomRestarted(1, new Date(OLD) as unknown as string))), ctx()),
      undefined,
    );
    assert.ok(classify(ev('MODIFIED', pod(oomRestarted(1, new Date(RECENT) as unknown as string))), ctx()));
    // A time that is neither (garbage) is no time: the fact counts as undated, new when seen live.
    assert.ok(classify(ev('MODIFIED', pod(oomRestarted(1, 12345 as unknown as string))), ctx()));
  });

  it('dates a failed pod by its last container to finish, whatever its other containers do', () => {
    const failed = (...finished: Array<string | undefined>) => ({
      phase: 'Failed',
      containerStatuses: finished.map((at, i) => ({
        name: `c${i}`,
        restartCount: 0,
        state: at ? { terminated: { reason: 'Error', exitCode: 1, finishedAt: at } } : { waiting: {} },
      })),
    });
    assert.equal(classify(ev('MODIFIED', pod(failed(OLD))), ctx()), undefined);
    // A container that never finished does not make an old failure undated (new).
    assert.equal(classify(ev('MODIFIED', pod(failed(OLD, undefined))), ctx()), undefined);
    assert.equal(classify(ev('MODIFIED', pod(failed(OLD, RECENT, undefined))), ctx())?.reason, 'Failed');
    assert.equal(classify(ev('MODIFIED', pod(failed(RECENT, OLD))), ctx())?.reason, 'Failed');
    assert.equal(classify(ev('MODIFIED', pod(failed(undefined))), ctx())?.reason, 'Failed', 'undated, live');
  });

  it('is recent within DEFAULT_GRACE_MS either way (a clock a little ahead), not at or beyond it', () => {
    const at = (offsetMs: number) => new Date(NOW - offsetMs).toISOString();
    const context = { lastForwarded: undefined, now: NOW, graceMs: DEFAULT_GRACE_MS };
    const oom = (offsetMs: number) => classify(ev('MODIFIED', pod(oomRestarted(1, at(offsetMs)))), context);
    assert.equal(DEFAULT_GRACE_MS, 5 * 60_000);
    assert.ok(oom(DEFAULT_GRACE_MS - 1000));
    assert.equal(oom(DEFAULT_GRACE_MS), undefined);
    assert.ok(oom(-(DEFAULT_GRACE_MS - 1000)));
    assert.equal(oom(-DEFAULT_GRACE_MS), undefined);
    assert.equal(oom(-3600_000), undefined, 'an hour in the future is a wrong clock, not news');
  });

  it('a submission is news only while recent, whatever the ledger holds; any recent fresh fact makes news', () => {
    assert.equal(classify(ev('ADDED', job({ creationTimestamp: OLD })), ctx('Something-else')), undefined);
    const oomThenEvicted = {
      ...oomRestarted(1, OLD),
      conditions: [
        {
          type: 'DisruptionTarget',
          status: 'True',
          reason: 'EvictionByEvictionAPI',
          lastTransitionTime: RECENT,
        },
      ],
    };
    const forward = classify(ev('MODIFIED', pod(oomThenEvicted)), ctx());
    assert.equal(forward?.fingerprint, 'OOMKilled/pytorch/1+Evicted');
  });
});
