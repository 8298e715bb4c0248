// The actuator's in-place path (lib/pod-resizes.ts) on the SimulatedCluster, wrapped to play a cluster that
// serves pods/resize or not and a kubelet that reports container resources (the simulator models neither: it
// keeps pod resources immutable). The job's template is patched first in every case; then each running pod of
// the changed role is resized in place, or keeps the old path (eviction of an OOM-killed pod, else its size).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, type Decide } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { readJob } from '../../lib/adapters/job-adapter.js';
import type { ClusterClient, JsonPatchOp } from '../../lib/cluster/cluster-client.js';
import { ApiError, ConflictError } from '../../lib/errors.js';
import type { Change } from '../../lib/types.js';
import { planText as told } from '../support/plan-text.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

const GiB = 1024 ** 3;

function setup(options: {
  served: boolean;
  nodeReports?: boolean;
  /** One entry per resize call, in order: an error to throw, or undefined to let it through. */
  resizeFaults?: (Error | undefined)[];
  dryRun?: boolean;
}) {
  const { sim } = harness();
  const job = toyJob({ workers: 2, minReplicas: 1, maxReplicas: 4 });
  job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'true' };
  sim.submitJob(job);
  sim.step(60);
  const calls: string[] = [];
  const resizes: { pod: string; patch: JsonPatchOp[] }[] = [];
  const faults = [...(options.resizeFaults ?? [])];
  // A kubelet that resizes reports each running container's resources in its status (on a copy: the
  // simulator's listed pods are read-only).
  const withStatus = (pod: V1Pod): V1Pod => {
    if (options.nodeReports === false || !pod.status) return pod;
    const resources = pod.spec?.containers[0]?.resources;
    const containerStatuses = pod.status.containerStatuses?.map((s) => ({ ...s, resources }));
    return { ...pod, status: { ...pod.status, ...(containerStatuses ? { containerStatuses } : {}) } };
  };
  const cluster: ClusterClient = {
    getJob: (ref) => sim.getJob(ref),
    listJobs: (kind, ns) => sim.listJobs(kind, ns),
    listPods: async (ns, selector) => (await sim.listPods(ns, selector)).map(withStatus),
    listNodes: () => sim.listNodes(),
    getConfigMap: (ns, name) => sim.getConfigMap(ns, name),
    listWorkloads: (ns, selector) => sim.listWorkloads(ns, selector),
    getLocalQueue: (ns, name) => sim.getLocalQueue(ns, name),
    getClusterQueue: (name) => sim.getClusterQueue(name),
    putConfigMap: (ns, name, data, rv, o) => sim.putConfigMap(ns, name, data, rv, o),
    getJobState: (ref) => sim.getJobState(ref),
    listJobStates: () => sim.listJobStates(),
    putJobState: (job, status, current, o) => sim.putJobState(job, status, current, o),
    patchJob: (ref, patch, o) => {
      calls.push(`patchJob dryRun=${o.dryRun}`);
      return sim.patchJob(ref, patch, o);
    },
    evictPod: (ns, name, o) => {
      calls.push(`evict ${name}`);
      return sim.evictPod(ns, name, o);
    },
    createEvent: (event, o) => {
      calls.push('event');
      return sim.createEvent(event, o);
    },
    servesPodResize: async () => {
      calls.push('discovery');
      return options.served;
    },
    resizePod: async (_ns, name, patch) => {
      calls.push(`resize ${name}`);
      const fault = faults.shift();
      if (fault) throw fault;
      resizes.push({ pod: name, patch });
      const pod = (await sim.listPods('team-a')).find((p) => p.metadata?.name === name);
      assert.ok(pod);
      return pod;
    },
  };
  const quiet = () => undefined;
  const deps: ActuatorDeps = {
    cluster,
    clock: sim.clock.now,
    dryRun: options.dryRun ?? false,
    logger: { info: quiet, warn: quiet, error: quiet },
    namespaceAllowlist: [],
  };
  return { sim, deps, calls, resizes };
}

/** Worker memory request and limit to 12 GiB (Guaranteed stays Guaranteed), plus `extra` changes. */
const raiseMemory =
  (extra: (pods: string[]) => Change[] = () => [], policy: 'rightsizing' | 'fault' = 'rightsizing'): Decide =>
  (s) => ({
    ref: TOY,
    policy,
    reason: 'needs more memory',
    changes: [
      {
        kind: 'resources',
        role: 'Worker',
        resource: 'memory',
        field: 'limits',
        from: 10 * GiB,
        to: 12 * GiB,
      },
      {
        kind: 'resources',
        role: 'Worker',
        resource: 'memory',
        field: 'requests',
        from: 10 * GiB,
        to: 12 * GiB,
      },
      ...extra(s.pods.map((p) => p.name)),
    ],
  });

async function templateMemory(sim: ReturnType<typeof harness>['sim']) {
  return readJob(await sim.getJob(TOY)).roles[0]?.limits.memoryBytes;
}

describe('in-place right-sizing through pods/resize', () => {
  it('served: the template first, then every running worker resized in place, pinned to its resourceVersion', async () => {
    const { sim, deps, calls, resizes } = setup({ served: true });
    const pods = await sim.listPods('team-a');
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.equal(outcome.applied, true);
    assert.equal(
      await templateMemory(sim),
      12 * GiB,
      'the template keeps in step (new pods get the new size)',
    );
    assert.deepEqual(calls, [
      'discovery',
      'patchJob dryRun=false',
      'resize toy-worker-0',
      'resize toy-worker-1',
      'event',
    ]);
    const first = resizes[0];
    assert.deepEqual(first?.patch, [
      { op: 'replace', path: '/metadata/resourceVersion', value: pods[0]?.metadata?.resourceVersion },
      { op: 'add', path: '/spec/containers/0/resources/requests/memory', value: '12Gi' },
      { op: 'add', path: '/spec/containers/0/resources/limits/memory', value: '12Gi' },
    ]);
    assert.match(told(outcome.plan), /resized in place \(pods\/resize\): toy-worker-0, toy-worker-1/);
    assert.deepEqual(
      outcome.podResizes?.map((r) => r.result),
      ['resized', 'resized'],
    );
    const last = JSON.parse((await sim.getJob(TOY)).metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}');
    assert.match(
      [last.reason, ...(last.details ?? [])].join('; '),
      /resized in place/,
      'the audit annotation says which pods change in place',
    );
  });

  it('not served: the template only, no resize sent, and the reason says why', async () => {
    const { sim, deps, calls } = setup({ served: false });
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.equal(await templateMemory(sim), 12 * GiB);
    assert.ok(!calls.some((c) => c.startsWith('resize')));
    assert.match(
      told(outcome.plan),
      /toy-worker-0 not in place: the API server does not serve pods\/resize; keeps its size/,
    );
  });

  it('a node that cannot resize (no status resources): template only', async () => {
    const { deps, calls } = setup({ served: true, nodeReports: false });
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.ok(!calls.some((c) => c.startsWith('resize')));
    assert.match(told(outcome.plan), /does not report container resources/);
  });

  it('an OOM-killed pod: resized in place instead of evicted when served; evicted when not', async () => {
    // worker-1: worker-0 of this elastic c10d job is protected unless it was itself OOM-killed (guardrails).
    const oom = raiseMemory((pods) => [{ kind: 'evict-pod', pod: pods[1] ?? '', toResize: true }], 'fault');
    const served = setup({ served: true });
    await actOnJob(TOY, oom, served.deps);
    assert.ok(served.calls.includes('resize toy-worker-1'));
    assert.ok(!served.calls.some((c) => c.startsWith('evict')), 'no eviction: the pod is resized in place');
    const absent = setup({ served: false });
    await actOnJob(TOY, oom, absent.deps);
    assert.ok(absent.calls.includes('evict toy-worker-1'));
    assert.ok(!absent.calls.some((c) => c.startsWith('resize')));
  });

  it('a straggler eviction (not toResize) stays an eviction even when the pod is resized', async () => {
    const { deps, calls } = setup({ served: true });
    await actOnJob(
      TOY,
      raiseMemory((pods) => [{ kind: 'evict-pod', pod: pods[1] ?? '' }], 'fault'),
      deps,
    );
    assert.ok(calls.includes('evict toy-worker-1'));
  });

  it('a resize the API server refuses: the OOM-killed pod is evicted the old way, and the Event says so', async () => {
    const refusal = new ApiError('resize pod team-a/toy-worker-1', 422, 'Pod QOS Class may not change');
    const { sim, deps, calls } = setup({ served: true, resizeFaults: [undefined, refusal] });
    const outcome = await actOnJob(
      TOY,
      raiseMemory((pods) => [{ kind: 'evict-pod', pod: pods[1] ?? '', toResize: true }], 'fault'),
      deps,
    );
    assert.ok(calls.includes('evict toy-worker-1'));
    assert.ok(!calls.includes('evict toy-worker-0'), 'the pod resized in place is not evicted');
    assert.equal(outcome.podResizes?.[1]?.result, 'failed');
    const [event] = sim.recordedEvents();
    assert.match(
      event?.message ?? '',
      /; resize refused: toy-worker-1 \([^)]*Pod QOS Class may not change\)/,
    );
    assert.doesNotMatch(event?.message ?? '', /toy-worker-0 \(/, 'the pod resized in place is not named');
  });

  it('a 409 on a resize: the pod is re-read and the resize re-planned and sent again', async () => {
    const { deps, calls } = setup({ served: true, resizeFaults: [new ConflictError('resize pod')] });
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.deepEqual(
      calls.filter((c) => c.startsWith('resize')),
      ['resize toy-worker-0', 'resize toy-worker-0', 'resize toy-worker-1'],
    );
    assert.deepEqual(
      outcome.podResizes?.map((r) => r.result),
      ['resized', 'resized'],
    );
  });

  it('dry run: the template patch is a server-side dry run and no pod is resized', async () => {
    const { deps, calls } = setup({ served: true, dryRun: true });
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.equal(outcome.skipped, 'dry-run');
    assert.ok(!calls.some((c) => c.startsWith('resize') || c === 'event'));
  });

  it('a failed discovery is answered as not served: the template is still patched, no pod resized', async () => {
    const { deps, calls } = setup({ served: true });
    deps.cluster.servesPodResize = async () => {
      throw new ApiError('discover the core API resources', 503, 'unavailable');
    };
    const outcome = await actOnJob(TOY, raiseMemory(), deps);
    assert.equal(outcome.applied, true);
    assert.ok(!calls.some((c) => c.startsWith('resize')));
    assert.match(told(outcome.plan), /does not serve pods\/resize/);
  });

  it('a replicas-only plan asks no discovery and resizes nothing', async () => {
    const { deps, calls } = setup({ served: true });
    await actOnJob(
      TOY,
      () => ({
        ref: TOY,
        policy: 'tuning',
        reason: 'r',
        changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }],
      }),
      deps,
    );
    assert.ok(!calls.includes('discovery'));
    assert.ok(!calls.some((c) => c.startsWith('resize')));
  });
});
