// RetryingClusterClient's rules, one by one: what it retries, what it must never repeat, and how it settles
// a patch whose answer was lost.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import type {
  ClusterClient,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../../lib/cluster/cluster-client.js';
import { patchIdentity, RetryingClusterClient } from '../../lib/cluster/retrying-cluster-client.js';
import { ApiError, ConflictError, ForbiddenError, NotFoundError } from '../../lib/errors.js';
import type { JobRef } from '../../lib/types.js';
import { harness, TOY, toyJob } from '../unit/functions/handler-harness.js';
import { addOneWorker } from './support/scenarios.js';

const fast = { baseDelayMs: 1, maxDelayMs: 2, attemptTimeoutMs: 200, random: () => 0.5 };
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A ClusterClient over the simulator whose chosen methods fail as scripted, call by call. */
function scripted(
  inner: ClusterClient,
  script: {
    getJob?: (Error | undefined)[];
    patchJob?: ('lose-answer' | Error | undefined)[];
    createEvent?: Error[];
  },
) {
  const calls = { getJob: 0, patchJob: 0, createEvent: 0 };
  // Plain delegation (not Object.create): the simulator's methods use private fields of their own instance.
  const client: ClusterClient = {
    getJob: (ref) => inner.getJob(ref),
    listJobs: (kind, namespace) => inner.listJobs(kind, namespace),
    patchJob: (ref, patch, options) => inner.patchJob(ref, patch, options),
    listPods: (namespace, selector) => inner.listPods(namespace, selector),
    listNodes: () => inner.listNodes(),
    evictPod: (namespace, name, options) => inner.evictPod(namespace, name, options),
    createEvent: (event, options) => inner.createEvent(event, options),
    getConfigMap: (namespace, name) => inner.getConfigMap(namespace, name),
    listWorkloads: (namespace, selector) => inner.listWorkloads(namespace, selector),
    getLocalQueue: (namespace, name) => inner.getLocalQueue(namespace, name),
    getClusterQueue: (name) => inner.getClusterQueue(name),
    putConfigMap: (namespace, name, data, rv, options) =>
      inner.putConfigMap(namespace, name, data, rv, options),
    getJobState: (ref) => inner.getJobState(ref),
    listJobStates: () => inner.listJobStates(),
    putJobState: (job, status, current, options) => inner.putJobState(job, status, current, options),
  };
  client.getJob = async (ref: JobRef) => {
    const e = script.getJob?.[calls.getJob++];
    if (e) throw e;
    return inner.getJob(ref);
  };
  client.patchJob = async (ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> => {
    const step = script.patchJob?.[calls.patchJob++];
    if (step === 'lose-answer') {
      await inner.patchJob(ref, patch, options);
      throw new ApiError('patch', 500, 'answer lost');
    }
    if (step) throw step;
    return inner.patchJob(ref, patch, options);
  };
  client.createEvent = async (event, options) => {
    const e = script.createEvent?.[calls.createEvent++];
    if (e) throw e;
    return inner.createEvent(event, options);
  };
  return { client, calls };
}

describe('RetryingClusterClient', () => {
  it('retries reads on 5xx and dropped connections, never on 404 or 403', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob());
    const flaky = scripted(sim, {
      getJob: [new ApiError('get', 503, 'x'), new ApiError('get', undefined, 'reset')],
    });
    await new RetryingClusterClient(flaky.client, fast).getJob(TOY);
    assert.equal(flaky.calls.getJob, 3);
    for (const error of [new NotFoundError('get'), new ForbiddenError('get', 'no')]) {
      const once = scripted(sim, { getJob: [error] });
      await assert.rejects(
        new RetryingClusterClient(once.client, fast).getJob(TOY),
        error.constructor as typeof Error,
      );
      assert.equal(once.calls.getJob, 1);
    }
  });

  it('gives up after maxAttempts', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob());
    const down = scripted(sim, {
      getJob: Array.from({ length: 10 }, () => new ApiError('get', 500, 'down')),
    });
    await assert.rejects(
      new RetryingClusterClient(down.client, { ...fast, maxAttempts: 4 }).getJob(TOY),
      ApiError,
    );
    assert.equal(down.calls.getJob, 4);
  });

  it('settles a patch whose answer was lost by finding its decision on the job: one write, one Event', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    const lossy = scripted(sim, { patchJob: ['lose-answer'] });
    const deps: ActuatorDeps = {
      cluster: new RetryingClusterClient(lossy.client, fast),
      clock: sim.clock.now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    };
    const mark = sim.writeLog().length;
    const outcome = await actOnJob(TOY, addOneWorker, deps);
    assert.equal(outcome.applied, true);
    assert.equal(lossy.calls.patchJob, 1, 'not sent again: the re-read found it applied');
    const writes = sim.writeLog().slice(mark);
    assert.equal(writes.filter((w) => w.verb === 'patch').length, 1);
    assert.equal(writes.filter((w) => w.verb === 'create-event').length, 1);
  });

  it('resends a guarded patch that never arrived, and passes a plain 409 to the actuator', async () => {
    const { sim } = harness();
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    const dropped = scripted(sim, { patchJob: [new ApiError('patch', undefined, 'socket hang up')] });
    const client = new RetryingClusterClient(dropped.client, fast);
    const outcome = await actOnJob(TOY, addOneWorker, {
      cluster: client,
      clock: sim.clock.now,
      dryRun: false,
      logger: quiet,
      namespaceAllowlist: [],
    });
    assert.equal(outcome.applied, true);
    assert.equal(dropped.calls.patchJob, 2);
    const conflicted = scripted(sim, { patchJob: [new ConflictError('patch')] });
    await assert.rejects(
      new RetryingClusterClient(conflicted.client, fast).patchJob(
        TOY,
        [{ op: 'test', path: '/x', value: 1 }],
        {
          dryRun: false,
        },
      ),
      ConflictError,
    );
    assert.equal(conflicted.calls.patchJob, 1);
  });

  it('does not repeat an Event after a dropped connection; does after a 503 or 429', async () => {
    const { sim } = harness();
    const event = {
      involved: { ref: TOY, uid: 'u', apiVersion: 'kubeflow.org/v1' },
      type: 'Normal' as const,
      reason: 'TrainscalerTuning',
      message: 'm',
    };
    const dropped = scripted(sim, { createEvent: [new ApiError('event', undefined, 'reset')] });
    await assert.rejects(
      new RetryingClusterClient(dropped.client, fast).createEvent(event, { dryRun: false }),
    );
    assert.equal(dropped.calls.createEvent, 1);
    const busy = scripted(sim, {
      createEvent: [new ApiError('event', 503, 'x'), new ApiError('event', 429, 'x')],
    });
    await new RetryingClusterClient(busy.client, fast).createEvent(event, { dryRun: false });
    assert.equal(busy.calls.createEvent, 3);
  });

  it('reads the decision id, nonce and guard from a trainscaler patch', () => {
    const record = JSON.stringify({
      id: 'abc',
      write: 'n1',
      at: 1,
      policy: 'tuning',
      reason: 'r',
      changes: [],
    });
    assert.deepEqual(
      patchIdentity([
        { op: 'replace', path: '/metadata/resourceVersion', value: '42' },
        { op: 'add', path: '/metadata/annotations/trainscaler.io~1last-decision', value: record },
      ]),
      { guardedBy: '42', decisionId: 'abc', write: 'n1' },
    );
    assert.deepEqual(patchIdentity([{ op: 'add', path: '/metadata/annotations', value: { x: '{' } }]), {});
  });
});
