// What the actuator reads of a job's pods and records about the job at each write besides the patch
// (lib/actuator.ts loadSnapshot, nextState): the Worker's own container in a pod with several; the size its user
// asked for, kept from trainscaler's first write on and never taken from a later one; the rescale remembered for
// measuring; the restart budget spent by a decision with a scale-down among other changes; a job with no Worker
// role; the management scope it is handed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Container } from '@kubernetes/client-node';
import { type ActuatorDeps, actOnJob, loadSnapshot } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { readJob } from '../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../lib/cluster/cluster-client.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import type { SimulatedCluster } from '../../lib/sim/simulated-cluster.js';
import type { Change, JobAutoscalerState, Plan, RoleName } from '../../lib/types.js';
import { recordedState, seedJobState } from '../support/job-states.js';
import { harness, TOY, toyJob } from './functions/handler-harness.js';

const GiB = 1024 ** 3;

function submit(job: KubeObject): { sim: SimulatedCluster; deps: ActuatorDeps } {
  const { sim, deps } = harness();
  job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'true' };
  sim.submitJob(job);
  return { sim, deps: { ...deps, namespaceAllowlist: [] } };
}

const plan = (changes: Change[]): Plan => ({ ref: TOY, policy: 'tuning', reason: 'because', changes });

const workers = (from: number, to: number): Change => ({ kind: 'replicas', role: 'Worker', from, to });

/** A role's memory limit from `from` to `to` GiB. */
const memoryLimit = (from: number, to: number, role: RoleName = 'Worker'): Change => ({
  kind: 'resources',
  role,
  resource: 'memory',
  field: 'limits',
  from: from * GiB,
  to: to * GiB,
});

async function stateOf(sim: SimulatedCluster): Promise<Partial<JobAutoscalerState>> {
  return stateOfStatus(await recordedState(sim, TOY)) as Partial<JobAutoscalerState>;
}

async function setWorkers(sim: SimulatedCluster, replicas: number): Promise<void> {
  await sim.patchJob(
    TOY,
    [{ op: 'replace', path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: replicas }],
    { dryRun: false },
  );
}

describe("a pod's resources", () => {
  it("are the Worker container's, where its pods run a sidecar first and the Master's container has another name", async () => {
    const job = toyJob({ workers: 2, master: { gpus: 0, cpuMillis: 1000, memoryBytes: 2 * GiB } });
    const specs = (
      job.spec as {
        pytorchReplicaSpecs: Record<string, { template: { spec: { containers: V1Container[] } } }>;
      }
    ).pytorchReplicaSpecs;
    const master = specs.Master?.template.spec.containers[0];
    if (master) master.name = 'launcher';
    const worker = specs.Worker?.template.spec;
    worker?.containers.unshift({
      name: 'sidecar',
      resources: { requests: { cpu: '100m', memory: '64Mi' } },
    });
    const { sim } = submit(job);
    sim.step(60);
    const snapshot = await loadSnapshot(sim, TOY);
    const workers = snapshot.pods.filter((p) => p.role === 'Worker');
    assert.equal(workers.length, 2);
    for (const p of workers)
      assert.deepEqual(p.requests, { cpuMillis: 4000, memoryBytes: 10 * GiB, gpus: 1 });
  });
});

describe('the size the user asked for', () => {
  it('is recorded once: a user resize after a first write that started no cool-down does not replace it', async () => {
    const { sim, deps } = submit(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 }));
    const prefer: Change = { kind: 'prefer-node', role: 'Worker', node: 'node-1' };
    assert.equal((await actOnJob(TOY, () => plan([prefer]), deps)).applied, true);
    const first = await stateOf(sim);
    assert.equal(first.askedWorkers, 2);
    assert.equal(first.lastActionAt, undefined);
    await setWorkers(sim, 4);
    assert.equal((await actOnJob(TOY, () => plan([workers(4, 5)]), deps)).applied, true);
    assert.equal(
      (await stateOf(sim)).askedWorkers,
      2,
      'the size before trainscaler wrote, not the one after',
    );
  });

  it('is not guessed for a job trainscaler wrote before it recorded the size: it stays unknown', async () => {
    const { sim, deps } = submit(toyJob({ workers: 3, minReplicas: 1, maxReplicas: 16 }));
    await seedJobState(sim, TOY, { lastActionAt: sim.clock.now() - 3600 });
    assert.equal((await actOnJob(TOY, () => plan([workers(3, 4)]), deps)).applied, true);
    assert.equal((await stateOf(sim)).askedWorkers, undefined);
  });

  it('is the live Worker count on the first write', async () => {
    const { sim, deps } = submit(toyJob({ workers: 3, minReplicas: 1, maxReplicas: 16 }));
    assert.equal((await actOnJob(TOY, () => plan([workers(3, 4)]), deps)).applied, true);
    assert.equal((await stateOf(sim)).askedWorkers, 3);
  });

  it('a job with no Worker role is written, with no size recorded', async () => {
    const job = toyJob({ workers: 1, master: { gpus: 0, cpuMillis: 1000, memoryBytes: 2 * GiB } });
    const specs = (job.spec as { pytorchReplicaSpecs: Record<string, unknown> }).pytorchReplicaSpecs;
    delete specs.Worker;
    const { sim, deps } = submit(job);
    const outcome = await actOnJob(TOY, () => plan([memoryLimit(2, 3, 'Master')]), deps);
    assert.equal(outcome.applied, true, outcome.plan.reason);
    const state = await stateOf(sim);
    assert.equal(state.askedWorkers, undefined);
    assert.equal(typeof state.lastActionAt, 'number');
  });
});

describe('the restart budget', () => {
  it('a decision that shrinks the workers and changes their memory spends one restart', async () => {
    const { sim, deps } = submit(toyJob({ workers: 4, minReplicas: 1, maxReplicas: 16, maxRestarts: 10 }));
    sim.step(600);
    const outcome = await actOnJob(TOY, () => plan([workers(4, 3), memoryLimit(10, 12)]), deps);
    assert.equal(outcome.applied, true, outcome.plan.reason);
    assert.equal((await stateOf(sim)).scaleDowns, 1);
  });
});

describe('the rescale remembered for measuring its cost', () => {
  it("is the Worker count's change, not a resource change listed before it", async () => {
    const { sim, deps } = submit(toyJob({ workers: 4, minReplicas: 1, maxReplicas: 16 }));
    sim.step(600);
    const outcome = await actOnJob(TOY, () => plan([memoryLimit(10, 12), workers(4, 5)]), deps);
    assert.equal(outcome.applied, true, outcome.plan.reason);
    assert.deepEqual((await stateOf(sim)).lastRescale, { at: sim.clock.now(), from: 4, to: 5 });
  });

  it('a resource change alone is no rescale, and a tuning decision on memory is no OOM', async () => {
    const { sim, deps } = submit(toyJob({ workers: 4, minReplicas: 1, maxReplicas: 16 }));
    sim.step(600);
    const outcome = await actOnJob(TOY, () => plan([memoryLimit(10, 12)]), deps);
    assert.equal(outcome.applied, true, outcome.plan.reason);
    const state = await stateOf(sim);
    assert.equal(state.lastRescale, undefined);
    assert.equal(state.oomCount, 0);
  });

  it('a job none of whose pods is placed (queued) restarts nothing: its growth is not remembered', async () => {
    const tooBig = { gpus: 64, cpuMillis: 4000, memoryBytes: 10 * GiB };
    const { sim, deps } = submit(toyJob({ workers: 4, minReplicas: 1, maxReplicas: 16, sizing: tooBig }));
    sim.step(60);
    const pods = await sim.listPods('team-a');
    assert.ok(pods.length > 0 && pods.every((p) => !p.spec?.nodeName), 'no pod placed yet');
    assert.equal((await actOnJob(TOY, () => plan([workers(4, 5)]), deps)).applied, true);
    assert.equal((await stateOf(sim)).lastRescale, undefined);
  });
});

describe('the management scope the actuator is given', () => {
  it('decides which jobs it manages: a namespace named as its own is never written', async () => {
    const { sim, deps } = submit(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 }));
    const management = { namespaceAllowlist: [], ownNamespaces: ['team-a'] };
    const outcome = await actOnJob(TOY, () => plan([workers(2, 3)]), { ...deps, management });
    assert.equal(outcome.skipped, 'not-managed');
    assert.equal(readJob(await sim.getJob(TOY)).roles.find((r) => r.role === 'Worker')?.replicas, 2);
  });
});

describe('the Worker count the status says the decision wants', () => {
  const memory = memoryLimit(10, 12);

  it("is the plan's Worker change, listed after a resource change, beside the Workers running now", async () => {
    const { sim, deps } = submit(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 16 }));
    sim.step(600);
    assert.equal((await actOnJob(TOY, () => plan([memory, workers(2, 3)]), deps)).applied, true);
    const status = await recordedState(sim, TOY);
    assert.equal(status?.desiredWorkers, 3);
    assert.equal(status?.observedWorkers, 2);
  });

  it("without a Worker change, the job's Worker replicas, not the Workers running", async () => {
    const tooBig = { gpus: 64, cpuMillis: 4000, memoryBytes: 10 * GiB };
    const { sim, deps } = submit(toyJob({ workers: 3, minReplicas: 1, maxReplicas: 16, sizing: tooBig }));
    sim.step(60);
    assert.equal((await actOnJob(TOY, () => plan([memory]), deps)).applied, true);
    const status = await recordedState(sim, TOY);
    assert.equal(status?.desiredWorkers, 3);
    assert.equal(status?.observedWorkers, 0);
  });
});
