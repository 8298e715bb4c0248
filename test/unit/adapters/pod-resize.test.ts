// The in-place resize rules (lib/adapters/pod-resize.ts), each from both sides: the API server serves
// pods/resize or not, the node reports container resources or not, a memory limit going down with and
// without resizePolicy RestartContainer, the QoS class kept or changed, the kubelet's Infeasible answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { planPodResize, qosClassOf } from '../../../lib/adapters/pod-resize.js';

type Res = { cpu?: string; memory?: string };

function pod(
  options: {
    requests?: Res;
    limits?: Res;
    memoryPolicy?: 'NotRequired' | 'RestartContainer';
    statusResources?: boolean;
    conditions?: { type: string; reason?: string }[];
    qos?: string;
  } = {},
): V1Pod {
  const requests = options.requests ?? { cpu: '2', memory: '4Gi' };
  const limits = options.limits ?? { cpu: '4', memory: '8Gi' };
  return {
    metadata: { name: 'toy-worker-0', namespace: 'team-a', uid: 'u-0', resourceVersion: '41' },
    spec: {
      nodeName: 'node-1',
      containers: [
        { name: 'sidecar', image: 's', resources: { requests: { cpu: '100m', memory: '64Mi' } } },
        {
          name: 'pytorch',
          image: 'p',
          resources: { requests, limits },
          ...(options.memoryPolicy
            ? { resizePolicy: [{ resourceName: 'memory', restartPolicy: options.memoryPolicy }] }
            : {}),
        },
      ],
    },
    status: {
      phase: 'Running',
      ...(options.qos ? { qosClass: options.qos } : {}),
      conditions: (options.conditions ?? []).map((c) => ({ ...c, status: 'True' })),
      containerStatuses: [
        {
          name: 'pytorch',
          image: 'p',
          imageID: '',
          ready: true,
          restartCount: 0,
          state: { running: {} },
          ...(options.statusResources === false ? {} : { resources: { requests, limits } }),
        },
      ],
    },
  };
}

const GiB = 1024 ** 3;

describe('planPodResize', () => {
  it('a memory request down and CPU up: in place, the changed fields only, pinned to the resourceVersion', () => {
    const plan = planPodResize(pod(), 'pytorch', { requests: { memory: 3 * GiB, cpu: 3000 } }, true);
    assert.deepEqual(plan, {
      action: 'in-place',
      pod: 'toy-worker-0',
      uid: 'u-0',
      restartsContainer: false,
      patch: [
        { op: 'replace', path: '/metadata/resourceVersion', value: '41' },
        { op: 'add', path: '/spec/containers/1/resources/requests/cpu', value: '3' },
        { op: 'add', path: '/spec/containers/1/resources/requests/memory', value: '3Gi' },
      ],
    });
  });

  it('pods/resize not served (discovery): falls back; served: in place', () => {
    const target = { limits: { memory: 12 * GiB } };
    assert.equal(planPodResize(pod(), 'pytorch', target, true).action, 'in-place');
    const plan = planPodResize(pod(), 'pytorch', target, false);
    assert.equal(plan.action, 'fallback');
    assert.match('why' in plan ? plan.why : '', /does not serve pods\/resize/);
  });

  it('a running container without status resources (a node that cannot resize): falls back', () => {
    const target = { limits: { memory: 12 * GiB } };
    const plan = planPodResize(pod({ statusResources: false }), 'pytorch', target, true);
    assert.equal(plan.action, 'fallback');
    assert.match('why' in plan ? plan.why : '', /does not report container resources/);
  });

  it('a memory limit down: only with resizePolicy RestartContainer (then the container restarts)', () => {
    const target = { limits: { memory: 6 * GiB } };
    const refused = planPodResize(pod(), 'pytorch', target, true);
    assert.equal(refused.action, 'fallback');
    assert.match('why' in refused ? refused.why : '', /memory limit would go down/);
    assert.equal(
      planPodResize(pod({ memoryPolicy: 'NotRequired' }), 'pytorch', target, true).action,
      'fallback',
    );
    const restarting = planPodResize(pod({ memoryPolicy: 'RestartContainer' }), 'pytorch', target, true);
    assert.equal(restarting.action, 'in-place');
    assert.equal(restarting.action === 'in-place' && restarting.restartsContainer, true);
  });

  it('a memory limit up is in place without a restart', () => {
    const plan = planPodResize(pod(), 'pytorch', { limits: { memory: 12 * GiB } }, true);
    assert.equal(plan.action === 'in-place' && plan.restartsContainer, false);
  });

  it('the QoS class may not change: Guaranteed stays Guaranteed only with requests = limits', () => {
    const guaranteed = { cpu: '4', memory: '8Gi' };
    const single = (p: V1Pod): V1Pod => ({
      ...p,
      spec: { ...p.spec, containers: [p.spec?.containers[1] ?? { name: 'x' }] },
    });
    const g = single(pod({ requests: guaranteed, limits: guaranteed }));
    const lowered = planPodResize(g, 'pytorch', { requests: { memory: 6 * GiB } }, true);
    assert.equal(lowered.action, 'fallback');
    assert.match('why' in lowered ? lowered.why : '', /QoS class would change from Guaranteed to Burstable/);
    const both = planPodResize(
      g,
      'pytorch',
      { requests: { memory: 12 * GiB }, limits: { memory: 12 * GiB } },
      true,
    );
    assert.equal(both.action, 'in-place');
    // Burstable -> Guaranteed is a change too.
    const b = single(pod({ requests: { cpu: '4', memory: '4Gi' }, limits: guaranteed }));
    const up = planPodResize(b, 'pytorch', { requests: { memory: 8 * GiB } }, true);
    assert.equal(up.action, 'fallback');
    assert.match('why' in up ? up.why : '', /from Burstable to Guaranteed/);
  });

  it('qosClassOf follows the API server', () => {
    const a = (r: [number?, number?], l: [number?, number?]) => ({
      requests: { cpu: r[0], memory: r[1] },
      limits: { cpu: l[0], memory: l[1] },
    });
    assert.equal(qosClassOf([a([], [])]), 'BestEffort');
    assert.equal(qosClassOf([a([1000, 5], [1000, 5])]), 'Guaranteed');
    assert.equal(qosClassOf([a([1000, 5], [1000, 5]), a([100], [])]), 'Burstable');
    assert.equal(qosClassOf([a([500, 5], [1000, 5])]), 'Burstable');
  });

  it('already at the target: nothing to write, unless the kubelet answered Infeasible', () => {
    const target = { requests: { memory: 4 * GiB } };
    assert.equal(planPodResize(pod(), 'pytorch', target, true).action, 'none');
    const pending = pod({ conditions: [{ type: 'PodResizePending', reason: 'Infeasible' }] });
    const plan = planPodResize(pending, 'pytorch', target, true);
    assert.equal(plan.action, 'fallback');
    assert.match('why' in plan ? plan.why : '', /Infeasible/);
    const deferred = pod({ conditions: [{ type: 'PodResizePending', reason: 'Deferred' }] });
    assert.equal(planPodResize(deferred, 'pytorch', target, true).action, 'none');
  });

  it('a finished pod is left alone; a pod without the container falls back', () => {
    const done = pod();
    if (done.status) done.status.phase = 'Succeeded';
    assert.equal(planPodResize(done, 'pytorch', { limits: { memory: 12 * GiB } }, true).action, 'none');
    assert.equal(
      planPodResize(pod(), 'tensorflow', { limits: { memory: 12 * GiB } }, true).action,
      'fallback',
    );
  });

  it('pod-level resources cannot be resized', () => {
    const p = pod();
    if (p.spec) p.spec.resources = { limits: { memory: '16Gi' } };
    const plan = planPodResize(p, 'pytorch', { limits: { memory: 12 * GiB } }, true);
    assert.equal(plan.action, 'fallback');
  });
});

describe('readPod: what the kubelet reports the container runs with', () => {
  it('actual comes from status.containerStatuses[].resources, and is absent when the node reports none', async () => {
    const { readPod } = await import('../../../lib/adapters/pod-view.js');
    const reported = pod();
    const status = reported.status?.containerStatuses?.[0];
    if (status) status.resources = { limits: { memory: '6Gi' }, requests: { memory: '4Gi' } };
    const view = readPod(reported, 'pytorch');
    assert.equal(view.limits.memoryBytes, 8 * GiB, 'the spec: what was asked for');
    assert.equal(view.actual?.limits.memoryBytes, 6 * GiB, 'the status: what it runs with');
    assert.equal(readPod(pod({ statusResources: false }), 'pytorch').actual, undefined);
  });
});
