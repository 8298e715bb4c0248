// The world of the scale benchmark: N managed elastic PyTorchJobs (about 10 one-GPU workers each) on 8-GPU
// nodes, a few percent of them queued, built directly (no trace replay) on the simulated cluster.
//
// Why shards: the simulator's kube-scheduler emulation is first fit over every bound pod per pending pod
// (cubic in the pods it places), which no one can wait for at 100,000 pods. The world is therefore several
// SimulatedClusters of SHARD_JOBS jobs each, one namespace and its own nodes per shard, joined behind one
// ClusterClient and MetricsSource: a list without namespace concatenates the shards, a namespaced call goes to
// its shard. The handlers see one cluster; the simulator's own per-call cost stays that of a shard.
import type { CoreV1Event, V1Node, V1Pod } from '@kubernetes/client-node';
import type {
  AuditEventInput,
  ClusterClient,
  JobStateObject,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../../lib/cluster/cluster-client.js';
import { NotFoundError } from '../../lib/errors.js';
import { readEach } from '../../lib/metrics/job-readings.js';
import type { MetricsSource } from '../../lib/metrics/metrics-source.js';
import { APP_PROFILES } from '../../lib/sim/app-profiles.js';
import { SimulatedCluster, type SimulatedNodeSpec } from '../../lib/sim/simulated-cluster.js';
import { FITTED_WORLD } from '../../lib/sim/simulation-world.js';
import { pytorchJobManifest } from '../../lib/sim/training-job-manifests.js';
import type { JobRef } from '../../lib/types.js';

const GiB = 1024 ** 3;
/** Jobs per shard; the last of each is queued (no room left for any of its pods): 2% of the jobs. */
export const SHARD_JOBS = 50;
export const GPUS_PER_NODE = 8;
/** Simulated time before the first tick: each running job has one step sample a minute from its second minute. */
export const DEFAULT_TRAINED_SECONDS = 30 * 60;
/** Workers per job, in turn: 10 on average (9.8 with the queued job's). */
const QUEUED_JOB_WORKERS = 2;
const WORKERS = [6, 8, 10, 12, 14] as const;
const APPS = ['cifar10', 'bert', 'imagenet', 'deepspeech2', 'ncf', 'yolov3'] as const;
/** Where the profile store lives (handlers' deps.profiles): served by shard 0. */
export const PROFILES_NAMESPACE = 'trainscaler-system';

/** The simulator numbers uids from 1 in each shard: each shard's get a prefix of its own. */
const SIM_UID_PREFIX = '00000000-0000-4000-8000-';
const shardUidPrefix = (shard: number) => `${(shard + 1).toString(16).padStart(8, '0')}-0000-4000-8000-`;

export interface ScaleWorld {
  cluster: ClusterClient;
  metrics: MetricsSource;
  clock: () => number;
  jobs: number;
  queuedJobs: number;
  pods: number;
  nodes: number;
  /** A running job (for the alert). */
  runningJob: JobRef;
  /** Advances every shard's clock (and simulation) together. */
  step(seconds: number): void;
  /**
   * Milliseconds spent so far inside the world answering calls: the simulator's own work (its lists, its
   * Prometheus) and the joining of its shards, which a real cluster and Prometheus do on their own machines.
   * Each call is timed up to its answer (the simulator answers synchronously), so what a handler does with the
   * answer is not in it.
   */
  busyMs(): number;
}

function namespaceOf(shard: number): string {
  return `team-${String(shard).padStart(4, '0')}`;
}

function workersOf(jobs: number): number[] {
  const workers = Array.from({ length: jobs }, (_, i): number => WORKERS[i % WORKERS.length] ?? 10);
  // The queued job small: each of its waiting pods costs the scheduler emulation a pass over every node.
  if (jobs > 1) workers[jobs - 1] = QUEUED_JOB_WORKERS;
  return workers;
}

/** One shard: `jobs` jobs, nodes for all but the last one exactly (so the last is queued, when jobs > 1). */
function buildShard(shard: number, jobs: number, seed: number) {
  const workers = workersOf(jobs);
  const running = jobs > 1 ? workers.slice(0, -1) : workers;
  // Round the running jobs' GPUs up to whole nodes by growing the first job: no spare GPU for the queued one.
  const total = running.reduce((a, b) => a + b, 0);
  const spare = (GPUS_PER_NODE - (total % GPUS_PER_NODE)) % GPUS_PER_NODE;
  workers[0] = (workers[0] ?? 0) + spare;
  const nodeCount = (total + spare) / GPUS_PER_NODE;
  const nodes: SimulatedNodeSpec[] = Array.from({ length: nodeCount }, (_, i) => ({
    name: `s${shard}-gpu-node-${i}`,
    gpus: GPUS_PER_NODE,
    cpuMillis: 128_000,
    memoryBytes: 2048 * GiB,
  }));
  // Sub-steps of 60 s (the sample interval): pods run from the second, one step sample per sub-step after;
  // fewer sub-steps build the world faster.
  const sim = new SimulatedCluster({
    seed,
    apps: FITTED_WORLD.apps,
    nodes,
    timing: { subStepSeconds: 60, podStartSeconds: 20 },
  });
  const namespace = namespaceOf(shard);
  workers.forEach((count, i) => {
    const app = APPS[(shard + i) % APPS.length] ?? 'cifar10';
    const profile = APP_PROFILES[app];
    sim.submitJob(
      pytorchJobManifest({
        name: `job-${String(i).padStart(3, '0')}`,
        namespace,
        app,
        workers: count,
        minReplicas: 1,
        maxReplicas: 2 * count,
        sizing: {
          gpus: 1,
          cpuMillis: profile.cpuMillis,
          memoryBytes: Math.ceil((profile.memoryBytes * 1.25) / 2 ** 20) * 2 ** 20,
        },
        // Long enough that no job finishes while the world is built.
        targetSamples: 1e12,
      }),
    );
  });
  return {
    sim,
    namespace,
    pods: workers.reduce((a, b) => a + b, 0),
    nodes: nodeCount,
    queued: jobs > 1 ? 1 : 0,
  };
}

/** The simulator with each method call's work added to the world's busy time (`timed`). */
function timedSimulator(sim: SimulatedCluster, timed: <T>(work: () => T) => T): SimulatedCluster {
  return new Proxy(sim, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => timed(() => value.apply(target, args));
    },
  });
}

function uidOut(uid: string | undefined, prefix: string): string | undefined {
  return uid?.startsWith(SIM_UID_PREFIX) ? prefix + uid.slice(SIM_UID_PREFIX.length) : uid;
}

function uidIn(uid: string, prefix: string): string {
  return uid.startsWith(prefix) ? SIM_UID_PREFIX + uid.slice(prefix.length) : uid;
}

interface Owned {
  metadata?: { uid?: string; ownerReferences?: Array<{ uid: string }> };
}

/** Each frozen object the simulator shares (its listed jobs, pods, nodes) with its shard's uids, made once per version. */
const renamed = new WeakMap<object, unknown>();

/**
 * The shard's uids made unique cluster-wide: in place for the simulator's fresh clones (a job read or written),
 * on a copy of the metadata for the frozen objects its lists share, kept while the simulator keeps that version.
 */
function withUids<T extends Owned>(object: T, prefix: string): T {
  const metadata = object.metadata;
  if (!metadata) return object;
  const uid = uidOut(metadata.uid, prefix);
  const owners = metadata.ownerReferences?.map((owner) => ({
    ...owner,
    uid: uidOut(owner.uid, prefix) ?? owner.uid,
  }));
  if (!Object.isFrozen(object)) {
    if (uid !== undefined) metadata.uid = uid;
    if (owners) metadata.ownerReferences = owners;
    return object;
  }
  const known = renamed.get(object);
  if (known) return known as T;
  const copy = Object.freeze({
    ...object,
    metadata: Object.freeze({
      ...metadata,
      ...(uid !== undefined ? { uid } : {}),
      ...(owners ? { ownerReferences: Object.freeze(owners.map((o) => Object.freeze(o))) } : {}),
    }),
  });
  renamed.set(object, copy);
  return copy;
}

function patchIn(patch: JsonPatchOp[], prefix: string): JsonPatchOp[] {
  return patch.map((op) => (typeof op.value === 'string' ? { ...op, value: uidIn(op.value, prefix) } : op));
}

/** Builds the world and steps it until every running job has step samples (the first tick sees them all new). */
export function buildScaleWorld(
  jobs: number,
  trainedSeconds = DEFAULT_TRAINED_SECONDS,
  seed = 41,
): ScaleWorld {
  const shards: ReturnType<typeof buildShard>[] = [];
  for (let left = jobs, shard = 0; left > 0; shard++) {
    const size = Math.min(SHARD_JOBS, left);
    shards.push(buildShard(shard, size, seed + shard));
    left -= size;
  }
  const home = shards[0];
  if (!home) throw new RangeError('the scale world needs at least one job');
  let busy = 0;
  const timed = <T>(work: () => T): T => {
    const start = performance.now();
    try {
      return work();
    } finally {
      busy += performance.now() - start;
    }
  };
  // Every call into a shard timed (its methods compute before they return their promise).
  for (const s of shards) s.sim = timedSimulator(s.sim, timed);
  const byNamespace = new Map(shards.map((s, i) => [s.namespace, { sim: s.sim, prefix: shardUidPrefix(i) }]));
  const homeShard = { sim: home.sim, prefix: shardUidPrefix(0) };
  const shardOf = (namespace: string) => {
    if (namespace === PROFILES_NAMESPACE) return homeShard;
    const found = byNamespace.get(namespace);
    if (!found) throw new NotFoundError(`namespace ${namespace}`);
    return found;
  };
  const everyShard = [...byNamespace.values()];
  const stateOut = <T extends JobStateObject | undefined>(state: T, namespace: string): T =>
    state && { ...state, ownerUid: uidOut(state.ownerUid, shardOf(namespace).prefix) ?? state.ownerUid };
  const all = async <T extends Owned>(read: (sim: SimulatedCluster) => Promise<T[]>) => {
    const lists = await Promise.all(
      everyShard.map(async (s) => {
        const items = await read(s.sim);
        return timed(() => items.map((item) => withUids(item, s.prefix)));
      }),
    );
    return timed(() => lists.flat());
  };

  const cluster: ClusterClient = {
    getJob: async (ref) => {
      const s = shardOf(ref.namespace);
      return withUids(await s.sim.getJob(ref), s.prefix);
    },
    listJobs: async (kind, namespace) => {
      if (namespace === undefined) return all((sim) => sim.listJobs(kind));
      const s = shardOf(namespace);
      return (await s.sim.listJobs(kind, namespace)).map((o) => withUids(o, s.prefix));
    },
    patchJob: async (ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> => {
      const s = shardOf(ref.namespace);
      const patched = await s.sim.patchJob(ref, patchIn(patch, s.prefix), options);
      // Nothing watches here (the handlers list): the simulator's watch events are dropped as they come, or
      // the world would keep a copy of every pod change, which is no part of the runner's memory.
      s.sim.drainEvents();
      return withUids(patched, s.prefix);
    },
    listPods: async (namespace, selector): Promise<V1Pod[]> => {
      if (namespace === undefined) return all((sim) => sim.listPods(undefined, selector));
      const s = shardOf(namespace);
      return (await s.sim.listPods(namespace, selector)).map((p) => withUids(p, s.prefix));
    },
    listNodes: (): Promise<V1Node[]> => all((sim) => sim.listNodes()),
    evictPod: (namespace, name, options) => shardOf(namespace).sim.evictPod(namespace, name, options),
    createEvent: async (event: AuditEventInput, options): Promise<CoreV1Event | undefined> => {
      const s = shardOf(event.involved.ref.namespace);
      const involved = { ...event.involved, uid: uidIn(event.involved.uid, s.prefix) };
      return s.sim.createEvent({ ...event, involved }, options);
    },
    listWorkloads: (namespace, selector) =>
      namespace === undefined
        ? all((sim) => sim.listWorkloads(undefined, selector))
        : shardOf(namespace).sim.listWorkloads(namespace, selector),
    getLocalQueue: (namespace, name) => shardOf(namespace).sim.getLocalQueue(namespace, name),
    getClusterQueue: (name) => home.sim.getClusterQueue(name),
    getConfigMap: (namespace, name) => shardOf(namespace).sim.getConfigMap(namespace, name),
    getJobState: async (ref) => stateOut(await shardOf(ref.namespace).sim.getJobState(ref), ref.namespace),
    listJobStates: async () => {
      const lists = await Promise.all(everyShard.map((s) => s.sim.listJobStates()));
      return timed(() => lists.flat().map((o) => stateOut(o, o.namespace)));
    },
    putJobState: async (job, status, current, options) => {
      const s = shardOf(job.ref.namespace);
      const inShard = current && {
        ...current,
        ownerUid: current.ownerUid && uidIn(current.ownerUid, s.prefix),
      };
      const written = await s.sim.putJobState(
        { ...job, uid: uidIn(job.uid, s.prefix) },
        status,
        inShard,
        options,
      );
      return stateOut(written, job.ref.namespace);
    },
    putConfigMap: (namespace, name, data, resourceVersion, options) =>
      shardOf(namespace).sim.putConfigMap(namespace, name, data, resourceVersion, options),
  };
  const metrics: MetricsSource = {
    stepSamples: (ref, window) => shardOf(ref.namespace).sim.stepSamples(ref, window),
    containerUsage: (ref, window) => shardOf(ref.namespace).sim.containerUsage(ref, window),
    workerStepTimes: (ref, window) => shardOf(ref.namespace).sim.workerStepTimes(ref, window),
    samplesProcessed: (ref) => shardOf(ref.namespace).sim.samplesProcessed(ref),
    firstStepAfterPause: (ref, since) => shardOf(ref.namespace).sim.firstStepAfterPause(ref, since),
    pauseEndedAfter: (ref, since) => shardOf(ref.namespace).sim.pauseEndedAfter(ref, since),
    // The simulator's batch reads, across the shards: each job read in its own.
    stepSamplesOfJobs: (refs, window) =>
      readEach(refs, (ref) => shardOf(ref.namespace).sim.stepSamples(ref, window)),
    containerUsageOfJobs: (refs, window) =>
      readEach(refs, (ref) => shardOf(ref.namespace).sim.containerUsage(ref, window)),
    workerStepTimesOfJobs: (refs, window) =>
      readEach(refs, (ref) => shardOf(ref.namespace).sim.workerStepTimes(ref, window)),
    samplesProcessedOfJobs: (refs) =>
      readEach(refs, (ref) => shardOf(ref.namespace).sim.samplesProcessed(ref)),
    firstStepAfterPauseOfJobs: (asks) =>
      readEach(asks, (a) => shardOf(a.ref.namespace).sim.firstStepAfterPause(a.ref, a.since)),
    pauseEndedAfterOfJobs: (asks) =>
      readEach(asks, (a) => shardOf(a.ref.namespace).sim.pauseEndedAfter(a.ref, a.since)),
  };
  const world: ScaleWorld = {
    cluster,
    metrics,
    clock: home.sim.clock.now,
    jobs,
    queuedJobs: shards.reduce((a, s) => a + s.queued, 0),
    pods: shards.reduce((a, s) => a + s.pods, 0),
    nodes: shards.reduce((a, s) => a + s.nodes, 0),
    runningJob: { kind: 'PyTorchJob', namespace: home.namespace, name: 'job-001' },
    step: (seconds) => {
      for (const s of shards) {
        s.sim.step(seconds);
        s.sim.drainEvents();
      }
    },
    busyMs: () => busy,
  };
  world.step(trainedSeconds);
  return world;
}
