// An eviction refused by a PodDisruptionBudget (HTTP 429, as the API server answers it and the real client
// raises it) must not leave a decision half-applied: refused at the dry run, nothing is written (no patch, no
// cool-down) and a Warning Event says why; refused only for real (the budget spent in between), the patch
// stands and the Event says the pod stayed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import type { ClusterClient, KubeObject } from '../../lib/cluster/cluster-client.js';
import { translateError } from '../../lib/cluster/kubernetes-cluster-client.js';
import { ApiError } from '../../lib/errors.js';
import type { SimulatedCluster } from '../../lib/sim/simulated-cluster.js';
import type { Plan } from '../../lib/types.js';
import { harness, replaceStraggler, runningWorkerOne, TOY, toyJob } from './functions/handler-harness.js';

/** What the API server answers an eviction that would break a PodDisruptionBudget. */
const PDB_REFUSAL = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: "Cannot evict pod as it would violate the pod's disruption budget.",
  reason: 'TooManyRequests',
  details: {
    causes: [
      {
        reason: 'DisruptionBudget',
        message: 'The disruption budget toy-pdb needs 2 healthy pods and has 2 currently',
      },
    ],
  },
  code: 429,
});

/**
 * The simulated API server behind a PodDisruptionBudget: `allows(dryRun)` says whether it allows a disruption
 * now; a refusal is the real client's typed error for the real answer.
 */
function withBudget(sim: SimulatedCluster, allows: (dryRun: boolean) => boolean | Error) {
  const calls: string[] = [];
  const client: ClusterClient = {
    getJob: (ref) => sim.getJob(ref),
    listJobs: (kind, ns) => sim.listJobs(kind, ns),
    listPods: (ns, selector) => sim.listPods(ns, selector),
    listNodes: () => sim.listNodes(),
    getConfigMap: (ns, name) => sim.getConfigMap(ns, name),
    listWorkloads: (ns, selector) => sim.listWorkloads(ns, selector),
    getLocalQueue: (ns, name) => sim.getLocalQueue(ns, name),
    getClusterQueue: (name) => sim.getClusterQueue(name),
    patchJob: (ref, patch, options) => {
      calls.push(`patch dryRun=${options.dryRun}`);
      return sim.patchJob(ref, patch, options);
    },
    evictPod: async (ns, name, options) => {
      calls.push(`evict ${name} dryRun=${options.dryRun}`);
      const verdict = allows(options.dryRun);
      if (verdict instanceof Error) throw verdict;
      if (!verdict)
        throw translateError(
          `evict pod ${ns}/${name}`,
          new ApiException(429, 'HTTP-Code: 429', PDB_REFUSAL, { 'content-type': 'application/json' }),
        );
      return sim.evictPod(ns, name, options);
    },
    createEvent: (event, options) => {
      calls.push(`event ${event.type} ${event.reason} dryRun=${options.dryRun}`);
      return sim.createEvent(event, options);
    },
    putConfigMap: (ns, name, data, rv, options) => sim.putConfigMap(ns, name, data, rv, options),
    getJobState: (ref) => sim.getJobState(ref),
    listJobStates: () => sim.listJobStates(),
    putJobState: (job, status, current, options) => sim.putJobState(job, status, current, options),
  };
  return { client, calls };
}

function setup(allows: (dryRun: boolean) => boolean | Error, dryRun = false) {
  const { sim } = harness();
  const job = toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 });
  job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'true' };
  sim.submitJob(job);
  sim.step(60);
  const { client, calls } = withBudget(sim, allows);
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    lines.push({ level, msg: msg ?? '', obj: obj as Record<string, unknown> });
  const deps: ActuatorDeps = {
    cluster: client,
    clock: sim.clock.now,
    dryRun,
    logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    namespaceAllowlist: [],
  };
  return { sim, deps, calls, lines };
}

const evicted = (sim: SimulatedCluster, pod: string) =>
  sim.writeLog().some((w) => w.verb === 'evict' && w.target.endsWith(pod));

describe('actOnJob: an eviction a PodDisruptionBudget refuses', () => {
  it('refused at the dry run: nothing written, no cool-down, the pod stays, a Warning Event names the budget', async () => {
    let budget = 0;
    const { sim, deps, calls, lines } = setup(() => budget > 0);
    const { pod, node } = await runningWorkerOne(sim);
    const before: KubeObject = await sim.getJob(TOY);
    const outcome = await actOnJob(TOY, replaceStraggler(pod, node), deps);
    assert.equal(outcome.applied, false);
    assert.equal(outcome.skipped, 'eviction-refused');
    assert.equal(outcome.decisionId, undefined);
    assert.deepEqual(
      outcome.evictionsRefused?.map((r) => r.pod),
      [pod],
    );
    assert.match(
      outcome.evictionsRefused?.[0]?.detail ?? '',
      /HTTP 429: Cannot evict pod .*disruption budget toy-pdb/,
    );
    assert.deepEqual(calls, [
      `evict ${pod} dryRun=true`,
      'event Warning TrainscalerEvictionRefused dryRun=false',
    ]);
    const after = await sim.getJob(TOY);
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion, 'the job is as it was');
    assert.equal(await sim.getJobState(TOY), undefined, 'no cool-down started: no state recorded');
    assert.equal(evicted(sim, pod), false);
    const [event] = sim.recordedEvents();
    assert.equal(sim.recordedEvents().length, 1);
    assert.equal(event?.type, 'Warning');
    assert.equal(event?.reason, 'TrainscalerEvictionRefused');
    const patchedWarning = 'eviction refused after the job was patched; the pod stays';
    assert.ok(!lines.some((l) => l.msg === patchedWarning), 'a dry run refused is not told as a patched job');
    assert.match(
      event?.message ?? '',
      new RegExp(`^worker 1 slow; evicting ${pod}; not applied: eviction refused`),
    );
    assert.match(
      event?.message ?? '',
      /toy-pdb needs 2 healthy pods.*nothing written, the cool-down unchanged$/,
    );
    const warned = lines.find((l) => l.msg === 'plan not applied: eviction refused');
    assert.equal(warned?.level, 'warn');
    assert.equal(warned?.obj.policy, 'straggler');
    // Nothing held the job back: once the budget allows it, the same decision is applied whole.
    budget = 1;
    const retried = await actOnJob(TOY, replaceStraggler(pod, node), deps);
    assert.equal(retried.applied, true);
    assert.equal(retried.evictionsRefused, undefined);
    assert.equal(evicted(sim, pod), true);
    const recorded = (await sim.getJobState(TOY))?.status as { lastActionAt?: number } | undefined;
    assert.ok((recorded?.lastActionAt ?? 0) > 0, 'the cool-down starts with the applied decision');
    assert.equal(sim.recordedEvents().at(-1)?.type, 'Normal');
  });

  it('refused, with its Warning Event refused too: the refusal stands and the lost Event is logged by job', async () => {
    const { sim, deps, lines } = setup(() => false);
    const { pod, node } = await runningWorkerOne(sim);
    const cluster: ClusterClient = {
      ...deps.cluster,
      createEvent: () => Promise.reject(new ApiError('create Event', 403, 'events are forbidden')),
    };
    const outcome = await actOnJob(TOY, replaceStraggler(pod, node), { ...deps, cluster });
    assert.equal(outcome.skipped, 'eviction-refused');
    assert.equal(evicted(sim, pod), false);
    const logged = lines.find((l) => l.msg === 'could not record the refused eviction');
    assert.equal(logged?.level, 'error');
    assert.deepEqual(logged?.obj.job, TOY);
    assert.match(String(logged?.obj.error), /events are forbidden/);
  });

  it('refused for real after the dry run passed: the patch stands, the Event warns that the pod stayed', async () => {
    const { sim, deps, calls, lines } = setup((dryRun) => dryRun);
    const { pod, node } = await runningWorkerOne(sim);
    const outcome = await actOnJob(TOY, replaceStraggler(pod, node), deps);
    assert.equal(outcome.applied, true);
    assert.ok(outcome.decisionId);
    assert.deepEqual(
      outcome.evictionsRefused?.map((r) => r.pod),
      [pod],
    );
    assert.deepEqual(calls, [
      `evict ${pod} dryRun=true`,
      'patch dryRun=false',
      `evict ${pod} dryRun=false`,
      'event Warning TrainscalerStraggler dryRun=false',
    ]);
    assert.equal(evicted(sim, pod), false);
    const [event] = sim.recordedEvents();
    assert.match(event?.message ?? '', new RegExp(`; eviction refused, the pod stays: ${pod} \\(.*toy-pdb`));
    const warned = lines.find((l) => l.msg === 'eviction refused after the job was patched; the pod stays');
    assert.equal(warned?.level, 'warn');
    assert.deepEqual(warned?.obj.job, TOY);
  });

  it('in a dry run: asked as a dry run, nothing written, no Event stored', async () => {
    const { sim, deps, calls } = setup(() => false, true);
    const { pod, node } = await runningWorkerOne(sim);
    const mark = sim.writeLog().length;
    const outcome = await actOnJob(TOY, replaceStraggler(pod, node), deps);
    assert.equal(outcome.skipped, 'eviction-refused');
    assert.deepEqual(calls, [
      `evict ${pod} dryRun=true`,
      'event Warning TrainscalerEvictionRefused dryRun=true',
    ]);
    assert.equal(sim.recordedEvents().length, 0);
    assert.equal(sim.writeLog().length, mark);
  });

  it('any other failure of the dry run is thrown, with nothing written', async () => {
    for (const error of [
      new ApiError('evict pod', 500, 'boom'),
      new ApiError('evict pod', undefined, 'reset'),
    ]) {
      const { sim, deps, calls } = setup(() => error);
      const { pod, node } = await runningWorkerOne(sim);
      const mark = sim.writeLog().length;
      await assert.rejects(actOnJob(TOY, replaceStraggler(pod, node), deps), (e: unknown) => e === error);
      assert.deepEqual(calls, [`evict ${pod} dryRun=true`]);
      assert.equal(sim.writeLog().length, mark);
    }
  });

  it('a plan that evicts nothing asks no dry run, and warns of no refusal', async () => {
    const { deps, calls, lines } = setup(() => false);
    const outcome = await actOnJob(
      TOY,
      (): Plan => ({
        ref: TOY,
        policy: 'tuning',
        reason: 'grow',
        changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }],
      }),
      deps,
    );
    assert.equal(outcome.applied, true);
    assert.ok(calls.every((c) => !c.startsWith('evict')));
    assert.deepEqual(
      lines.filter((l) => l.level === 'warn'),
      [],
    );
  });
});
