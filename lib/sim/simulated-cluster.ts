// An in-process Kubernetes cluster for the demo and for tests: an API server (jobs, pods, nodes, events,
// ConfigMaps with resourceVersion semantics), the Kubeflow training-operator and StatefulSet controller,
// kube-scheduler (first fit, priority preemption), kubelets (start, OOM kill, crash-loop restarts) and the
// training itself (progress from the applications' measured step times). It is both the ClusterClient and
// the MetricsSource the handlers are given, so the production handlers run unchanged against it.
// Everything is driven by a simulated clock and a seeded PRNG: the same seed replays the same run.
// What it assumes and how jobs fail: simulation-assumptions.ts.
import type { CoreV1Event, V1ConfigMap, V1Container, V1Node, V1Pod } from '@kubernetes/client-node';
import { podsFittingOnNode } from '../cluster/capacity.js';
import type {
  AuditEventInput,
  ClusterClient,
  JobIdentity,
  JobStateObject,
  JsonPatchOp,
  KubeObject,
  WriteOptions,
} from '../cluster/cluster-client.js';
import { jobStateName } from '../cluster/job-state.js';
import { ApiError, ConflictError, MissingMetricsError, NotFoundError } from '../errors.js';
import { matchesLabels, parseLabelSelector } from '../label-selector.js';
import { type JobReadings, readEach, type SinceAsk } from '../metrics/job-readings.js';
import type { MetricsSource } from '../metrics/metrics-source.js';
import { MEASURED_RESCALE_PAUSE_SECONDS } from '../torchelastic/recommended-rendezvous.js';
import type {
  ContainerUsage,
  JobKind,
  JobRef,
  Resources,
  RoleName,
  StepSample,
  WorkerStepTimes,
} from '../types.js';
import { applyJsonPatchLikeApiServer } from './api-server-patch.js';
import type { SimulatedAppModel } from './app-model.js';
import { mulberry32, type Prng, uniform } from './prng.js';
import { bytesToMemoryQuantity, millisToCpuQuantity } from './quantity.js';
import {
  type BoundPod,
  choosePreemption,
  fits,
  freeOn,
  insufficientResources,
  type PreferredNodeTerm,
  preferredFitNode,
  type SchedulingNode,
} from './scheduler-emulation.js';
import { SimulatedClock, toRfc3339 } from './simulated-clock.js';
import {
  type PodSizing,
  podSizing,
  readSimulatedJobSpec,
  type SimulatedJobSpec,
  type SimulatedRole,
} from './simulated-job-spec.js';
import {
  markBound,
  markDisrupted,
  markOomKilled,
  markRestarted,
  markRunning,
  markSucceeded,
  markUnschedulable,
  newPod,
  podMetadata,
} from './simulated-pod.js';
import { advanceProgress, type GradientNoiseTable } from './statistical-efficiency.js';
import { GPU_RESOURCE } from './training-job-manifests.js';
import {
  advanceTraining,
  localBatchSizeFor,
  placementOf,
  replicasPerNode,
  type TrainingAdvance,
  type TrainingWorld,
  worldStepTime,
} from './training-progress.js';

const GiB = 1024 ** 3;

export interface SimulatedNodeSpec {
  name: string;
  gpus: number;
  cpuMillis: number;
  memoryBytes: number;
}

/** 4 nodes x 4 GPUs, 32 cores, 128 GiB: a small GPU pool where jobs compete. */
export const DEFAULT_SIMULATED_NODES: readonly SimulatedNodeSpec[] = [0, 1, 2, 3].map((i) => ({
  name: `gpu-node-${i}`,
  gpus: 4,
  cpuMillis: 32_000,
  memoryBytes: 128 * GiB,
}));

export interface SimulationTiming {
  /** Granularity of the emulated controllers; step(seconds) runs in sub-steps of at most this. */
  subStepSeconds: number;
  /** From binding to a running container (image pull, container start). */
  podStartSeconds: number;
  /**
   * Lost progress each time the world is re-formed: scaleUpCostSeconds when it only gained members (a
   * joining agent; an elastic job trains on at its old size until the joiner runs), scaleDownCostSeconds
   * when it lost or restarted one. Measured: MEASURED_RESCALE_PAUSE_SECONDS (the launcher's pauses).
   */
  scaleUpCostSeconds: number;
  scaleDownCostSeconds: number;
  /** A training container limited below its app's memory need is OOM-killed this long after it starts. */
  oomAfterSeconds: number;
  /** A job fails when one of its pods stays unschedulable this long while its peers wait in rendezvous. */
  pendingTimeoutSeconds: number;
  /** Crash-loop back-off after a container's first restart, doubled per restart up to the maximum. */
  crashLoopBackoffSeconds: number;
  maxCrashLoopBackoffSeconds: number;
  /** At most one step-time sample per job per interval. */
  sampleIntervalSeconds: number;
  /** Relative measurement noise on step times (uniform, +-). */
  stepTimeNoise: number;
  /** Spacing of the per-job timeline points kept for reports. */
  timelineIntervalSeconds: number;
}

export const DEFAULT_SIMULATION_TIMING: SimulationTiming = {
  subStepSeconds: 10,
  podStartSeconds: 20,
  scaleUpCostSeconds: MEASURED_RESCALE_PAUSE_SECONDS.recommended.up,
  scaleDownCostSeconds: MEASURED_RESCALE_PAUSE_SECONDS.recommended.down,
  oomAfterSeconds: 60,
  pendingTimeoutSeconds: 600,
  crashLoopBackoffSeconds: 10,
  maxCrashLoopBackoffSeconds: 300,
  sampleIntervalSeconds: 60,
  stepTimeNoise: 0.03,
  timelineIntervalSeconds: 60,
};

export interface SimulatedClusterOptions {
  seed: number;
  apps: SimulatedAppModel;
  nodes?: readonly SimulatedNodeSpec[];
  clock?: SimulatedClock;
  /** PriorityClass name -> value, resolved into pod.spec.priority like the admission plugin does. */
  priorityClasses?: Record<string, number>;
  timing?: Partial<SimulationTiming>;
}

/** Pending: never trained yet. Restarting: trained before, now waiting for its world or paying the rescale cost. */
export type SimulatedJobPhase = 'Pending' | 'Running' | 'Restarting' | 'Succeeded' | 'Failed';

export interface SimulatedJobStatus {
  ref: JobRef;
  app: string;
  phase: SimulatedJobPhase;
  submittedAt: number;
  startedAt?: number;
  finishedAt?: number;
  /** Completion time minus submission time; null unless the job succeeded. */
  jctSeconds: number | null;
  processedSamples: number;
  targetSamples: number;
  failureReason?: string;
}

export interface JobTimelinePoint {
  at: number;
  /** Training replicas the job asks for (spec), and how many of them have a running container. */
  workersDesired: number;
  workersRunning: number;
  /** Mean samples/s since the previous point. */
  throughput: number;
  processedSamples: number;
  phase: SimulatedJobPhase;
}

export interface WriteLogEntry {
  at: number;
  verb: 'create' | 'patch' | 'evict' | 'create-event' | 'put-configmap';
  /** 'PyTorchJob team-a/bert', 'Pod team-a/bert-worker-0', 'ConfigMap ns/name', ... */
  target: string;
  patch?: JsonPatchOp[];
  /** The resourceVersion the write produced. */
  resourceVersion?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export type SimulatedWatchEvent =
  | { type: WatchEventType; object: V1Pod }
  | { type: WatchEventType; object: KubeObject };

interface RecordedSample extends StepSample {
  workers: Array<{ index: number; pod: string; stepTime: number }>;
}

interface JobRecord {
  key: string;
  ref: JobRef;
  object: KubeObject;
  spec: SimulatedJobSpec;
  submittedAt: number;
  phase: SimulatedJobPhase;
  processed: number;
  target: number;
  /**
   * Where the app's gradient statistics are known (the measured world): progress in steps at its smallest
   * measured batch, and the table it is played from; the job completes at the table's target progress.
   */
  progress?: { done: number; table: GradientNoiseTable };
  startedAt?: number;
  finishedAt?: number;
  failureReason?: string;
  /** Identity of the last world the job trained with (pods and their restart counts). */
  worldKey?: string;
  /** Its members, one `uid:restartCount` each: one torchrun agent per pod container. */
  worldMembers: string[];
  /** Restarts each live torchrun agent has spent (elastic PyTorchJobs with maxRestarts only). */
  agentRestarts: Map<string, number>;
  /** Restarts of the job's worlds: at most the largest any one agent has spent. */
  restartsSpent: number;
  /**
   * Each re-formed world's pause: from the job's last progress before it to the new world's first step, and the
   * rescale cost charged for it (timing.scaleUpCostSeconds or scaleDownCostSeconds).
   */
  pauses: Array<{ from: number; to: number; charged: number }>;
  /** When the job last made progress. */
  lastProgressAt?: number;
  stalledUntil: number;
  /** Since when some pods run while a peer cannot be scheduled (the rendezvous wait). */
  rendezvousWaitSince?: number;
  samples: RecordedSample[];
  lastSampleAt?: number;
  timeline: JobTimelinePoint[];
  timelineClosed: boolean;
  lastTimelineAt: number;
  processedAtLastPoint: number;
  /**
   * Peak usage of each pod (by name) that stopped running, and when it stopped: Prometheus keeps a deleted
   * pod's series, so production's max_over_time usage queries still see them within their window.
   */
  endedUsage: Map<string, { role: RoleName; cpuMillis: number; memoryBytes: number; until: number }>;
}

interface PodRecord {
  key: string;
  seq: number;
  pod: V1Pod;
  /**
   * The pod as last published (its watch event; what lists return): a deep-frozen copy, replaced on every
   * change. Lists share it instead of cloning every pod per call, the cost of a tick's list at 100,000 pods;
   * the simulator's own changes go to `pod`, so a reader's copy never changes under it.
   */
  published?: V1Pod;
  jobKey: string;
  role: RoleName;
  index: number;
  trains: boolean;
  gatesProgress: boolean;
  revision: string;
  sizing: PodSizing;
  /** Index of the training container in the pod's containers. */
  trainingContainer: number;
  priority: number;
  pendingSince: number;
  boundAt?: number;
  /** Set while the training container runs. */
  runningSince?: number;
  /** Set while the container waits in crash-loop back-off. */
  restartAt?: number;
  /** Real peak memory and CPU as fractions of the app's need (what right-sizing can learn). */
  memoryFactor: number;
  cpuFactor: number;
  stragglerFactor: number;
}

interface SimulatedNode extends SchedulingNode {
  object: V1Node;
}

function jobKey(ref: JobRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

function describe(ref: JobRef): string {
  return `${ref.kind} ${ref.namespace}/${ref.name}`;
}

function isTerminal(rec: PodRecord): boolean {
  const phase = rec.pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

/** Its training container has run (it may be in a crash-loop back-off now). */
function hasStarted(rec: PodRecord): boolean {
  return rec.runningSince !== undefined || rec.restartAt !== undefined;
}

function progressOf(table: GradientNoiseTable | undefined): Pick<JobRecord, 'progress'> {
  return table ? { progress: { done: 0, table } } : {};
}

function isFinished(job: JobRecord): boolean {
  return job.phase === 'Succeeded' || job.phase === 'Failed';
}

export class SimulatedCluster implements ClusterClient, MetricsSource {
  readonly clock: SimulatedClock;
  readonly timing: SimulationTiming;
  readonly #apps: SimulatedAppModel;
  readonly #prng: Prng;
  readonly #priorityClasses: Record<string, number>;
  readonly #nodes: SimulatedNode[];
  readonly #jobs = new Map<string, JobRecord>();
  readonly #pods = new Map<string, PodRecord>();
  /** The same pods by job key: replays of hundreds of jobs would otherwise scan every pod per job per step. */
  readonly #podsByJob = new Map<string, Map<string, PodRecord>>();
  readonly #configMaps = new Map<string, V1ConfigMap>();
  /** ScaledTrainingJobs by namespace/name. */
  readonly #jobStates = new Map<string, JobStateObject>();
  /**
   * Their own revision counter, apart from #revision: the jobs' resourceVersions (and so the decision ids and
   * Event names derived from them) stay what they were before trainscaler kept its state here.
   */
  #stateRevision = 0;
  /** The tenants' TrainingAutoscalers by namespace/name, as given (applyTrainingAutoscaler). */
  readonly #policies = new Map<string, KubeObject>();
  readonly #events: CoreV1Event[] = [];
  readonly #writeLog: WriteLogEntry[] = [];
  #watch: SimulatedWatchEvent[] = [];
  /** One counter for every object, like etcd's revision. */
  #revision = 1000;
  #uids = 0;
  #podSeq = 0;
  #fault: Error | undefined;
  /**
   * One frozen copy of each stored version of a job, node or ScaledTrainingJob, made when a list first hands it
   * out: as with pods (PodRecord.published), a list costs its readers, not a deep clone per object per list
   * (3.3 s of a 10,000-job tick). The stored objects are replaced, never changed in place, once published.
   */
  readonly #published = new WeakMap<object, unknown>();

  constructor(options: SimulatedClusterOptions) {
    this.clock = options.clock ?? new SimulatedClock();
    this.timing = { ...DEFAULT_SIMULATION_TIMING, ...options.timing };
    this.#apps = options.apps;
    this.#prng = mulberry32(options.seed);
    this.#priorityClasses = { ...options.priorityClasses };
    this.#nodes = (options.nodes ?? DEFAULT_SIMULATED_NODES).map((spec) => this.#newNode(spec));
  }

  now(): number {
    return this.clock.now();
  }

  // ---- test and demo controls -------------------------------------------------------------------------

  /** Creates or replaces a TrainingAutoscaler, as a tenant's `kubectl apply` would (not validated here). */
  applyTrainingAutoscaler(policy: KubeObject): void {
    const key = `${policy.metadata.namespace ?? 'default'}/${policy.metadata.name}`;
    const generation = (this.#policies.get(key)?.metadata.generation ?? 0) + 1;
    this.#policies.set(key, structuredClone({ ...policy, metadata: { ...policy.metadata, generation } }));
  }

  deleteTrainingAutoscaler(namespace: string, name: string): void {
    this.#policies.delete(`${namespace}/${name}`);
  }

  /** The next write (any verb, dry run included) fails with `error`, like a flaky API server. */
  failNextWrite(error: Error): void {
    this.#fault = error;
  }

  /** Makes a pod run `factor` times slower than its peers until it is replaced. */
  injectStraggler(namespace: string, podName: string, factor: number): void {
    const rec = this.#pods.get(`${namespace}/${podName}`);
    if (!rec) throw new NotFoundError(`Pod ${namespace}/${podName}`);
    rec.stragglerFactor = factor;
  }

  /** Creates a job as `kubectl apply` would; its pods appear at the next step. */
  submitJob(manifest: KubeObject): KubeObject {
    const what = `create ${manifest.kind} ${manifest.metadata.namespace ?? 'default'}/${manifest.metadata.name}`;
    this.#takeFault();
    const object: KubeObject = structuredClone(manifest);
    object.metadata.namespace ??= 'default';
    const ref = {
      kind: object.kind as JobKind,
      namespace: object.metadata.namespace,
      name: object.metadata.name,
    };
    let spec: SimulatedJobSpec;
    try {
      spec = readSimulatedJobSpec(object);
    } catch (error) {
      throw new ApiError(what, 422, (error as Error).message, { cause: error });
    }
    if (!this.#apps.knows(spec.app))
      throw new ApiError(what, 422, `the simulator has no profile for '${spec.app}'`);
    const key = jobKey(ref);
    if (this.#jobs.has(key)) throw new ConflictError(`${describe(ref)} (already exists)`);
    const now = this.now();
    object.metadata.uid = this.#newUid();
    object.metadata.generation = 1;
    object.metadata.creationTimestamp = toRfc3339(now);
    object.metadata.resourceVersion = this.#nextRevision();
    const job: JobRecord = {
      key,
      ref,
      object,
      spec,
      submittedAt: now,
      phase: 'Pending',
      processed: 0,
      target: spec.targetSamples ?? this.#apps.defaultTargetSamples(spec.app),
      ...progressOf(this.#apps.statistics?.(spec.app)),
      stalledUntil: now,
      worldMembers: [],
      endedUsage: new Map(),
      agentRestarts: new Map(),
      restartsSpent: 0,
      pauses: [],
      samples: [],
      timeline: [],
      timelineClosed: false,
      lastTimelineAt: now,
      processedAtLastPoint: 0,
    };
    this.#jobs.set(key, job);
    this.#setJobCondition(job, 'Created', `${ref.kind} ${ref.name} is created.`, now, false);
    this.#watch.push({ type: 'ADDED', object: structuredClone(job.object) });
    this.#log({
      at: now,
      verb: 'create',
      target: describe(ref),
      resourceVersion: job.object.metadata.resourceVersion,
    });
    return structuredClone(job.object);
  }

  /** Advances the simulated clock, running controllers, scheduler, kubelets and training in sub-steps. */
  step(seconds: number): void {
    let left = seconds;
    while (left > 1e-9) {
      const dt = Math.min(this.timing.subStepSeconds, left);
      this.#subStep(dt);
      left -= dt;
    }
    this.#recordTimelines();
  }

  /** How many of the job's training pods are bound on each node, in the cluster's node order (0 where none). */
  trainingPodsPerNode(ref: JobRef): number[] {
    const counts = new Map<string, number>();
    for (const rec of this.#podsOf(this.#job(ref))) {
      const nodeName = rec.pod.spec?.nodeName;
      if (!rec.trains || !nodeName || isTerminal(rec)) continue;
      counts.set(nodeName, (counts.get(nodeName) ?? 0) + 1);
    }
    return this.#nodes.map((n) => counts.get(n.name) ?? 0);
  }

  /** How many more pods with these requests fit on each node now, in the cluster's node order. */
  roomPerNode(requests: Resources): number[] {
    const bound = this.#boundPods();
    return this.#nodes.map((node) => podsFittingOnNode(freeOn(node, bound), requests));
  }

  /** Watch events (pods and jobs) since the last call, oldest first. */
  drainEvents(): SimulatedWatchEvent[] {
    const events = this.#watch;
    this.#watch = [];
    return events;
  }

  jobStatus(ref: JobRef): SimulatedJobStatus {
    return this.#statusOf(this.#job(ref));
  }

  jobStatuses(): SimulatedJobStatus[] {
    return [...this.#jobs.values()].map((job) => this.#statusOf(job));
  }

  timeline(ref: JobRef): JobTimelinePoint[] {
    return structuredClone(this.#job(ref).timeline);
  }

  writeLog(): WriteLogEntry[] {
    return structuredClone(this.#writeLog);
  }

  recordedEvents(): CoreV1Event[] {
    return structuredClone(this.#events);
  }

  // ---- ClusterClient ----------------------------------------------------------------------------------

  async getJob(ref: JobRef): Promise<KubeObject> {
    return structuredClone(this.#job(ref).object);
  }

  async listJobs(kind: JobKind, namespace?: string): Promise<KubeObject[]> {
    return [...this.#jobs.values()]
      .filter((job) => job.ref.kind === kind && (namespace === undefined || job.ref.namespace === namespace))
      .map((job) => this.#publishedCopy(job.object));
  }

  async patchJob(ref: JobRef, patch: JsonPatchOp[], options: WriteOptions): Promise<KubeObject> {
    this.#takeFault();
    const job = this.#job(ref);
    const next = applyJsonPatchLikeApiServer(job.object, patch, `patch ${describe(ref)}`);
    if (JSON.stringify(next.spec) !== JSON.stringify(job.object.spec)) {
      next.metadata.generation = (job.object.metadata.generation ?? 1) + 1;
    }
    if (options.dryRun) return next;
    next.metadata.resourceVersion = this.#nextRevision();
    job.object = next;
    job.spec = readSimulatedJobSpec(next);
    this.#watch.push({ type: 'MODIFIED', object: structuredClone(next) });
    // The real controllers react to a spec change within milliseconds: pods are there for the next reader.
    if (!isFinished(job)) this.#reconcileJob(job, this.now());
    this.#log({
      at: this.now(),
      verb: 'patch',
      target: describe(ref),
      patch: structuredClone(patch),
      resourceVersion: next.metadata.resourceVersion,
    });
    return structuredClone(next);
  }

  async listPods(namespace: string | undefined, labelSelector?: string): Promise<V1Pod[]> {
    let requirements: ReturnType<typeof parseLabelSelector>;
    try {
      requirements = parseLabelSelector(labelSelector);
    } catch (error) {
      throw new ApiError('list pods', 400, (error as Error).message);
    }
    return [...this.#pods.values()]
      .filter((rec) => namespace === undefined || rec.pod.metadata?.namespace === namespace)
      .filter((rec) => matchesLabels(requirements, rec.pod.metadata?.labels))
      .sort((a, b) => a.key.localeCompare(b.key))
      .map((rec) => rec.published ?? deepFrozen(structuredClone(rec.pod)));
  }

  async listNodes(): Promise<V1Node[]> {
    return this.#nodes.map((node) => this.#publishedCopy(node.object));
  }

  /** The Eviction API: the pod fails with reason Evicted and its controller replaces it. No PDBs exist here. */
  async evictPod(namespace: string, name: string, options: WriteOptions): Promise<void> {
    this.#takeFault();
    const rec = this.#pods.get(`${namespace}/${name}`);
    if (!rec) throw new NotFoundError(`Pod ${namespace}/${name}`);
    if (options.dryRun || isTerminal(rec)) return;
    this.#disrupt(rec, 'Evicted', 'Evicted through the Eviction API.', this.now());
    this.#log({ at: this.now(), verb: 'evict', target: `Pod ${namespace}/${name}` });
  }

  async createEvent(event: AuditEventInput, options: WriteOptions): Promise<CoreV1Event | undefined> {
    this.#takeFault();
    const now = new Date(this.now() * 1000);
    const { ref, uid, apiVersion } = event.involved;
    const created: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        // Named after the decision as the API server's client names it (kubernetes-cluster-client.ts createEvent).
        name: event.decisionId
          ? `${ref.name.slice(0, 200)}.trainscaler.${event.decisionId}`
          : `${ref.name}.${(this.#revision + 1).toString(16)}`,
        namespace: ref.namespace,
        uid: this.#newUid(),
        creationTimestamp: now,
      },
      involvedObject: { apiVersion, kind: ref.kind, name: ref.name, namespace: ref.namespace, uid },
      type: event.type,
      reason: event.reason,
      message: event.message,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'trainscaler' },
      reportingComponent: 'trainscaler',
    };
    if (options.dryRun) return created;
    created.metadata.resourceVersion = this.#nextRevision();
    this.#events.push(created);
    this.#log({
      at: this.now(),
      verb: 'create-event',
      target: `Event ${ref.namespace}/${created.metadata.name}`,
    });
    return structuredClone(created);
  }

  async listJobEvents(ref: JobRef): Promise<CoreV1Event[]> {
    this.#takeFault();
    const about = (e: CoreV1Event) =>
      e.metadata.namespace === ref.namespace &&
      e.involvedObject.kind === ref.kind &&
      e.involvedObject.name === ref.name;
    return structuredClone(this.#events.filter(about));
  }

  /** The simulated cluster runs no Kueue: no Workloads, no queues. */
  async listWorkloads(_namespace: string | undefined, _labelSelector: string): Promise<KubeObject[]> {
    return [];
  }

  async getLocalQueue(namespace: string, name: string): Promise<KubeObject> {
    throw new NotFoundError(`LocalQueue ${namespace}/${name}`);
  }

  async getClusterQueue(name: string): Promise<KubeObject> {
    throw new NotFoundError(`ClusterQueue ${name}`);
  }

  async getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    const configMap = this.#configMaps.get(`${namespace}/${name}`);
    return configMap ? structuredClone(configMap) : undefined;
  }

  /** Create when no resourceVersion is given (409 if it exists); else replace guarded by it (409 if stale). */
  async putConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    resourceVersion: string | undefined,
    options: WriteOptions,
  ): Promise<V1ConfigMap> {
    this.#takeFault();
    const what = `ConfigMap ${namespace}/${name}`;
    const existing = this.#configMaps.get(`${namespace}/${name}`);
    if (resourceVersion === undefined && existing) throw new ConflictError(`${what} (already exists)`);
    if (resourceVersion !== undefined) {
      if (!existing) throw new NotFoundError(what);
      if (existing.metadata?.resourceVersion !== resourceVersion) throw new ConflictError(what);
    }
    const size = Object.entries(data).reduce((sum, [k, v]) => sum + k.length + Buffer.byteLength(v), 0);
    if (size > 1024 * 1024)
      throw new ApiError(`put ${what}`, 422, `data is ${size} bytes, over the 1 MiB limit`);
    const configMap: V1ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace,
        uid: existing?.metadata?.uid ?? this.#newUid(),
        creationTimestamp: existing?.metadata?.creationTimestamp ?? new Date(this.now() * 1000),
        resourceVersion: options.dryRun ? existing?.metadata?.resourceVersion : this.#nextRevision(),
      },
      data: { ...data },
    };
    if (options.dryRun) return configMap;
    this.#configMaps.set(`${namespace}/${name}`, configMap);
    this.#log({
      at: this.now(),
      verb: 'put-configmap',
      target: what,
      resourceVersion: configMap.metadata?.resourceVersion,
    });
    return structuredClone(configMap);
  }

  async getJobState(ref: JobRef): Promise<JobStateObject | undefined> {
    const stored = this.#jobStates.get(`${ref.namespace}/${jobStateName(ref.kind, ref.name)}`);
    return stored ? structuredClone(stored) : undefined;
  }

  async listJobStates(): Promise<JobStateObject[]> {
    return [...this.#jobStates.values()].map((s) => this.#publishedCopy(s));
  }

  /** None unless a test or demo applied some (applyTrainingAutoscaler). */
  async listTrainingAutoscalers(namespace?: string): Promise<KubeObject[]> {
    return [...this.#policies.values()]
      .filter((p) => namespace === undefined || p.metadata.namespace === namespace)
      .map((p) => structuredClone(p));
  }

  /** Create when `current` is undefined (409 if it exists); else replace status guarded by its resourceVersion. */
  async putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const name = jobStateName(job.ref.kind, job.ref.name);
    const key = `${job.ref.namespace}/${name}`;
    const what = `ScaledTrainingJob ${key}`;
    const existing = this.#jobStates.get(key);
    if (current === undefined && existing) throw new ConflictError(`${what} (already exists)`);
    if (current !== undefined) {
      if (!existing) throw new NotFoundError(what);
      if (existing.resourceVersion !== current.resourceVersion) throw new ConflictError(what);
    }
    const next: JobStateObject = {
      namespace: job.ref.namespace,
      name,
      resourceVersion: options.dryRun ? (existing?.resourceVersion ?? '') : `s${++this.#stateRevision}`,
      target: { apiVersion: job.apiVersion, kind: job.ref.kind, name: job.ref.name },
      ownerUid: job.uid,
      status: structuredClone(status),
    };
    if (!options.dryRun) this.#jobStates.set(key, next);
    return structuredClone(next);
  }

  // ---- MetricsSource ----------------------------------------------------------------------------------

  async stepSamples(ref: JobRef, windowSeconds: number): Promise<StepSample[]> {
    const samples = this.#samplesInWindow(ref, windowSeconds);
    return samples.map(({ workers: _workers, ...sample }) => ({ ...sample }));
  }

  /** Per pod with a started container: the app's real CPU use and peak memory, capped by the limits. */
  /**
   * Peak usage per pod over the window, as production's max_over_time queries read it: the running
   * containers, and the pods that stopped within the window (ended, evicted, deleted with a finished job).
   */
  async containerUsage(ref: JobRef, windowSeconds: number): Promise<ContainerUsage[]> {
    const job = this.#job(ref);
    const byPod = new Map<string, ContainerUsage>();
    const add = (u: ContainerUsage) => {
      const old = byPod.get(u.pod);
      byPod.set(
        u.pod,
        old
          ? {
              ...u,
              cpuMillis: Math.max(old.cpuMillis, u.cpuMillis),
              memoryBytes: Math.max(old.memoryBytes, u.memoryBytes),
            }
          : u,
      );
    };
    const from = this.now() - windowSeconds;
    for (const [pod, ended] of job.endedUsage)
      if (ended.until >= from)
        add({ pod, role: ended.role, cpuMillis: ended.cpuMillis, memoryBytes: ended.memoryBytes });
    for (const rec of this.#podsOf(job)) {
      if (!hasStarted(rec) || isTerminal(rec)) continue;
      add({ pod: rec.pod.metadata?.name ?? '', role: rec.role, ...this.#realUsage(job, rec) });
    }
    if (byPod.size === 0)
      throw new MissingMetricsError(`no container usage for ${describe(ref)} in the last ${windowSeconds} s`);
    return [...byPod.values()];
  }

  /** A pod that stops running leaves its peak usage behind (see containerUsage). */
  #rememberUsage(rec: PodRecord, t: number): void {
    const job = this.#jobs.get(rec.jobKey);
    if (!job || !hasStarted(rec) || isTerminal(rec)) return;
    const name = rec.pod.metadata?.name ?? '';
    const usage = this.#realUsage(job, rec);
    const old = job.endedUsage.get(name);
    job.endedUsage.set(name, {
      role: rec.role,
      cpuMillis: Math.max(old?.cpuMillis ?? 0, usage.cpuMillis),
      memoryBytes: Math.max(old?.memoryBytes ?? 0, usage.memoryBytes),
      until: t,
    });
  }

  async workerStepTimes(ref: JobRef, windowSeconds: number): Promise<WorkerStepTimes[]> {
    const series = new Map<number, WorkerStepTimes>();
    for (const sample of this.#samplesInWindow(ref, windowSeconds)) {
      for (const worker of sample.workers) {
        const entry = series.get(worker.index) ?? { worker: worker.index, samples: [] };
        entry.pod = worker.pod;
        entry.samples.push({ at: sample.at ?? 0, stepTime: worker.stepTime });
        series.set(worker.index, entry);
      }
    }
    return [...series.values()].sort((a, b) => a.worker - b.worker);
  }

  /** The end of the first pause of a world re-formed after `since` (already over), if there was one. */
  async firstStepAfterPause(ref: JobRef, since: number): Promise<number | undefined> {
    const now = this.now();
    return this.#job(ref).pauses.find((p) => p.to > since && p.to <= now)?.to;
  }

  /** The length of that pause, as the sidecars' paused/resumed timestamps give it. */
  async pauseEndedAfter(ref: JobRef, since: number): Promise<number | undefined> {
    const now = this.now();
    const pause = this.#job(ref).pauses.find((p) => p.to > since && p.to <= now);
    return pause ? pause.to - pause.from : undefined;
  }

  // The batch reads: in process, each job read on its own (no queries to save).
  stepSamplesOfJobs(refs: readonly JobRef[], windowSeconds: number): Promise<JobReadings<StepSample[]>> {
    return readEach(refs, (ref) => this.stepSamples(ref, windowSeconds));
  }

  containerUsageOfJobs(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<ContainerUsage[]>> {
    return readEach(refs, (ref) => this.containerUsage(ref, windowSeconds));
  }

  workerStepTimesOfJobs(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<WorkerStepTimes[]>> {
    return readEach(refs, (ref) => this.workerStepTimes(ref, windowSeconds));
  }

  samplesProcessedOfJobs(refs: readonly JobRef[]): Promise<JobReadings<number | undefined>> {
    return readEach(refs, (ref) => this.samplesProcessed(ref));
  }

  firstStepAfterPauseOfJobs(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>> {
    return readEach(asks, (ask) => this.firstStepAfterPause(ask.ref, ask.since));
  }

  pauseEndedAfterOfJobs(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>> {
    return readEach(asks, (ask) => this.pauseEndedAfter(ask.ref, ask.since));
  }

  /** The rescale cost charged to each of the job's re-formed worlds so far (its first start is none), seconds. */
  chargedPauses(ref: JobRef): number[] {
    return this.#job(ref).pauses.map((p) => p.charged);
  }

  /** Restarts the job's torchrun agents have spent on re-formed worlds (at most maxRestarts, or it failed). */
  restartsSpent(ref: JobRef): number {
    return this.#job(ref).restartsSpent;
  }

  /** Undefined until the job first trained (a job that never started reports nothing). */
  async samplesProcessed(ref: JobRef): Promise<number | undefined> {
    const job = this.#job(ref);
    return job.startedAt === undefined ? undefined : Math.floor(job.processed);
  }

  // ---- simulation -------------------------------------------------------------------------------------

  #subStep(dt: number): void {
    const t = this.now();
    const active = [...this.#jobs.values()].filter((job) => !isFinished(job));
    for (const job of active) this.#reconcileJob(job, t);
    this.#schedulePendingPods(t);
    this.#runKubelets(t);
    for (const job of active) {
      if (!isFinished(job)) this.#checkRendezvousTimeout(job, t);
      if (!isFinished(job)) this.#advanceTraining(job, t, dt);
    }
    this.clock.advance(dt);
  }

  /** The training-operator / StatefulSet controller: one pod per replica index, disrupted pods replaced. */
  #reconcileJob(job: JobRecord, t: number): void {
    for (const role of job.spec.roles) {
      let pods = this.#podsOf(job).filter((rec) => rec.role === role.role);
      for (const rec of pods.filter((r) => r.pod.status?.phase === 'Failed')) this.#deletePod(rec);
      pods = pods.filter((r) => this.#pods.has(r.key));
      // Scale-down removes the highest indices first, like both controllers do.
      const extras = pods.filter((r) => r.index >= role.replicas).sort((a, b) => b.index - a.index);
      for (const rec of extras) this.#deletePod(rec);
      pods = pods.filter((r) => r.index < role.replicas);
      if (job.ref.kind === 'StatefulSet') this.#rollStatefulSet(role, pods);
      const present = new Set(pods.filter((r) => this.#pods.has(r.key)).map((r) => r.index));
      for (let index = 0; index < role.replicas; index++) {
        if (present.has(index)) continue;
        if (job.spec.orderedStart && !this.#lowerIndicesRunning(job, role.role, index)) break;
        this.#createPod(job, role, index, t);
      }
    }
  }

  /** RollingUpdate: replace the highest-index pod of an old revision once every other pod runs. */
  #rollStatefulSet(role: SimulatedRole, pods: PodRecord[]): void {
    const stale = pods.filter((r) => r.revision !== role.revision).sort((a, b) => b.index - a.index);
    const first = stale[0];
    if (!first) return;
    const othersRunning = pods.every((r) => r === first || r.runningSince !== undefined);
    if (othersRunning && pods.length === role.replicas) this.#deletePod(first);
  }

  #lowerIndicesRunning(job: JobRecord, role: RoleName, index: number): boolean {
    const running = this.#podsOf(job).filter((r) => r.role === role && r.runningSince !== undefined);
    return running.filter((r) => r.index < index).length === index;
  }

  #createPod(job: JobRecord, role: SimulatedRole, index: number, t: number): void {
    const template = role.template;
    const className = template.spec?.priorityClassName;
    const priority = template.spec?.priority ?? (className ? (this.#priorityClasses[className] ?? 0) : 0);
    const pod = newPod({
      job: {
        kind: job.ref.kind,
        apiVersion: job.object.apiVersion,
        name: job.ref.name,
        namespace: job.ref.namespace,
        uid: job.object.metadata.uid ?? '',
      },
      role: role.role,
      index,
      template,
      revisionHash: revisionHash(role.revision),
      priority,
      uid: this.#newUid(),
      at: t,
    });
    const name = pod.metadata?.name ?? '';
    const rec: PodRecord = {
      key: `${job.ref.namespace}/${name}`,
      seq: this.#podSeq++,
      pod,
      jobKey: job.key,
      role: role.role,
      index,
      trains: role.trains,
      gatesProgress: role.gatesProgress,
      revision: role.revision,
      sizing: podSizing(template.spec?.containers ?? [], job.spec.trainingContainer),
      trainingContainer: trainingContainerIndex(template.spec?.containers ?? [], job.spec.trainingContainer),
      priority,
      pendingSince: t,
      memoryFactor: uniform(this.#prng, 0.9, 1),
      cpuFactor: uniform(this.#prng, 0.85, 1),
      stragglerFactor: 1,
    };
    this.#pods.set(rec.key, rec);
    const ofJob = this.#podsByJob.get(rec.jobKey) ?? new Map<string, PodRecord>();
    ofJob.set(rec.key, rec);
    this.#podsByJob.set(rec.jobKey, ofJob);
    this.#emitPod('ADDED', rec);
  }

  #deletePod(rec: PodRecord): void {
    this.#rememberUsage(rec, this.now());
    this.#pods.delete(rec.key);
    this.#podsByJob.get(rec.jobKey)?.delete(rec.key);
    this.#emitPod('DELETED', rec);
  }

  #boundPods(): BoundPod[] {
    const bound: BoundPod[] = [];
    for (const rec of this.#pods.values()) {
      const nodeName = rec.pod.spec?.nodeName;
      if (!nodeName || isTerminal(rec)) continue;
      bound.push({
        key: rec.key,
        nodeName,
        requests: rec.sizing.requests,
        priority: rec.priority,
        boundAt: rec.boundAt ?? 0,
      });
    }
    return bound;
  }

  /**
   * kube-scheduler: higher priority first, then the longest waiting; the fitting node its preferred node
   * affinity weighs most, first fit among equals, else preempt lower priority.
   */
  #schedulePendingPods(t: number): void {
    const pending = [...this.#pods.values()]
      .filter((rec) => !rec.pod.spec?.nodeName && rec.pod.status?.phase === 'Pending')
      .sort((a, b) => b.priority - a.priority || a.pendingSince - b.pendingSince || a.seq - b.seq);
    for (const rec of pending) {
      let bound = this.#boundPods();
      let nodeName = preferredFitNode(this.#nodes, bound, rec.sizing.requests, preferredNodeTerms(rec.pod));
      if (!nodeName) {
        const preemption = choosePreemption(this.#nodes, bound, {
          requests: rec.sizing.requests,
          priority: rec.priority,
        });
        if (preemption) {
          for (const victimKey of preemption.victims) {
            const victim = this.#pods.get(victimKey);
            if (!victim) continue;
            const message = `Preempted in order to admit critical pod ${rec.key} on node ${preemption.nodeName}.`;
            this.#disrupt(victim, 'Preempted', message, t);
          }
          bound = this.#boundPods();
          if (fits(rec.sizing.requests, freeOn(this.#node(preemption.nodeName), bound))) {
            nodeName = preemption.nodeName;
          }
        }
      }
      if (nodeName) {
        rec.boundAt = t;
        markBound(rec.pod, nodeName, t);
        this.#emitPod('MODIFIED', rec);
        continue;
      }
      const short = insufficientResources(this.#nodes, bound, rec.sizing.requests);
      const message = `0/${this.#nodes.length} nodes are available: ${short.map((r) => `Insufficient ${r}`).join(', ')}.`;
      if (markUnschedulable(rec.pod, message, t)) this.#emitPod('MODIFIED', rec);
    }
  }

  #runKubelets(t: number): void {
    for (const rec of [...this.#pods.values()]) {
      if (!rec.pod.spec?.nodeName || isTerminal(rec) || rec.boundAt === undefined) continue;
      const job = this.#jobs.get(rec.jobKey);
      if (!job || isFinished(job)) continue;
      if (rec.restartAt !== undefined) {
        if (t >= rec.restartAt) this.#restartContainer(job, rec, t);
      } else if (rec.runningSince === undefined) {
        if (t >= rec.boundAt + this.timing.podStartSeconds) {
          rec.runningSince = t;
          markRunning(rec.pod, t);
          this.#emitPod('MODIFIED', rec);
        }
      } else if (this.#outOfMemory(job, rec) && t >= rec.runningSince + this.timing.oomAfterSeconds) {
        this.#oomKill(job, rec, t);
      }
    }
  }

  #outOfMemory(job: JobRecord, rec: PodRecord): boolean {
    const limit = rec.sizing.limits.memoryBytes;
    return rec.trains && limit !== undefined && limit < this.#apps.memoryNeedBytes(job.spec.app);
  }

  #oomKill(job: JobRecord, rec: PodRecord, t: number): void {
    this.#rememberUsage(rec, t);
    const restarts = markOomKilled(rec.pod, rec.trainingContainer, rec.runningSince ?? t, t);
    rec.runningSince = undefined;
    const backoff = this.timing.crashLoopBackoffSeconds * 2 ** Math.max(0, restarts - 1);
    rec.restartAt = t + Math.min(backoff, this.timing.maxCrashLoopBackoffSeconds);
    this.#emitPod('MODIFIED', rec);
    // Like the training-operator's backoffLimit: restarts summed over the job's pods.
    const total = this.#podsOf(job).reduce((sum, r) => sum + restartCount(r), 0);
    if (total > job.spec.backoffLimit) {
      this.#failJob(
        job,
        'BackoffLimitExceeded',
        `${job.ref.kind} ${job.ref.name} has failed because it has reached the specified backoff limit (${total} restarts > ${job.spec.backoffLimit}).`,
        t,
      );
    }
  }

  /**
   * After back-off the kubelet restarts the container in the same pod, with the pod's own (immutable)
   * resources: a changed template reaches only pods the controller creates anew, as in Kubernetes.
   */
  #restartContainer(_job: JobRecord, rec: PodRecord, t: number): void {
    rec.restartAt = undefined;
    rec.runningSince = t;
    markRestarted(rec.pod, rec.trainingContainer, t);
    this.#emitPod('MODIFIED', rec);
  }

  /** Preemption or eviction: the pod fails now; its controller replaces it at the next reconcile. */
  #disrupt(rec: PodRecord, reason: 'Preempted' | 'Evicted', message: string, t: number): void {
    this.#rememberUsage(rec, t);
    markDisrupted(rec.pod, reason, message, t);
    rec.runningSince = undefined;
    rec.restartAt = undefined;
    this.#emitPod('MODIFIED', rec);
  }

  /**
   * torchrun with a fixed world waits in rendezvous for every peer; when a peer cannot be scheduled the
   * waiting workers time out and the job fails. A job none of whose pods runs is merely queued.
   */
  #checkRendezvousTimeout(job: JobRecord, t: number): void {
    const pods = this.#podsOf(job).filter((r) => r.gatesProgress && !isTerminal(r));
    // An elastic job's old world trains on while a pod that would join it waits: nobody waits in rendezvous.
    const running = pods.filter((r) => r.runningSince !== undefined);
    if (this.#oldWorldTrainingOn(job, running)) {
      job.rendezvousWaitSince = undefined;
      return;
    }
    const someRunning = pods.some((r) => r.runningSince !== undefined || r.restartAt !== undefined);
    const stuck = pods.some((r) => !r.pod.spec?.nodeName);
    if (!(someRunning && stuck)) {
      job.rendezvousWaitSince = undefined;
      return;
    }
    job.rendezvousWaitSince ??= t;
    if (t - job.rendezvousWaitSince >= this.timing.pendingTimeoutSeconds) {
      const waiting = pods.filter((r) => !r.pod.spec?.nodeName).map((r) => r.pod.metadata?.name);
      this.#failJob(
        job,
        'PendingTimeout',
        `pods ${waiting.join(', ')} stayed unschedulable for ${this.timing.pendingTimeoutSeconds} s while their peers waited in rendezvous.`,
        t,
      );
    }
  }

  /**
   * The job's pods form a complete world when every gating replica index has a running container. While an
   * elastic job grows, its old world trains on until the joining pods run (torchelastic: a new agent enters
   * the rendezvous only once its pod runs, measured in README "A real elastic job"), so the old world is the
   * current one as long as every member of it still runs within the job's replicas.
   */
  #currentWorld(
    job: JobRecord,
  ): { world: TrainingWorld; key: string; members: string[]; training: PodRecord[] } | undefined {
    const pods = this.#podsOf(job);
    const members: PodRecord[] = [];
    let complete = true;
    for (const role of job.spec.roles) {
      if (!role.gatesProgress) continue;
      const rolePods = pods.filter((r) => r.role === role.role && r.index < role.replicas);
      const running = rolePods.filter((r) => r.runningSince !== undefined && !isTerminal(r));
      if (running.length !== role.replicas) complete = false;
      members.push(...running);
    }
    if (!complete) {
      const old = this.#oldWorldTrainingOn(job, members);
      if (!old) return undefined;
      members.splice(0, members.length, ...old);
    }
    const training = members.filter((r) => r.trains);
    if (training.length === 0) return undefined;
    const appCpu = this.#apps.cpuMillis(job.spec.app);
    const slowdown = Math.max(
      ...training.map((r) => {
        const cpuLimit = r.sizing.limits.cpuMillis;
        const throttle = cpuLimit !== undefined && cpuLimit < appCpu ? appCpu / cpuLimit : 1;
        return r.stragglerFactor * throttle;
      }),
    );
    const world: TrainingWorld = {
      replicas: training.length,
      nodes: new Set(training.map((r) => r.pod.spec?.nodeName)).size,
      perNode: replicasPerNode(
        this.#nodes.map((n) => n.name),
        training.map((r) => r.pod.spec?.nodeName),
      ),
      ps: members.filter((r) => r.role === 'PS').length,
      localBatchSize: localBatchSizeFor(
        job.spec,
        training.length,
        this.#apps.defaultLocalBatchSize(job.spec.app),
      ),
      slowdown,
    };
    const agents = members.map(agentOf).sort();
    return { world, key: agents.join(','), members: agents, training };
  }

  /** The running pods that are exactly the job's last world, when the job is elastic and none of it was lost. */
  #oldWorldTrainingOn(job: JobRecord, running: PodRecord[]): PodRecord[] | undefined {
    if (!job.spec.elastic || job.worldMembers.length === 0) return undefined;
    const byAgent = new Map(running.map((r) => [agentOf(r), r]));
    const old = job.worldMembers.map((m) => byAgent.get(m));
    return old.every((r) => r !== undefined) ? old : undefined;
  }

  #advanceTraining(job: JobRecord, t: number, dt: number): void {
    const current = this.#currentWorld(job);
    if (!current) {
      job.phase = job.startedAt === undefined ? 'Pending' : 'Restarting';
      return;
    }
    if (current.key !== job.worldKey) {
      // Every re-formed world (new size, replaced or restarted pod) costs a restart from checkpoint; losing a
      // member costs more than gaining one, and spends one of each surviving agent's restarts.
      const members = current.members;
      if (job.startedAt !== undefined) {
        const kept = new Set(members);
        const lost = job.worldMembers.some((m) => !kept.has(m));
        const charged = lost ? this.timing.scaleDownCostSeconds : this.timing.scaleUpCostSeconds;
        job.stalledUntil = t + charged;
        job.pauses.push({ from: job.lastProgressAt ?? t, to: job.stalledUntil, charged });
        if (lost && this.#spendRestart(job, members, t)) return;
      }
      job.worldMembers = members;
      job.worldKey = current.key;
      if (job.startedAt === undefined) {
        job.startedAt = t;
        this.#setJobCondition(job, 'Running', `${job.ref.kind} ${job.ref.name} is running.`, t, false);
      }
    }
    const stepTime = worldStepTime(this.#apps, job.spec.app, current.world);
    const advance = this.#advanceOf(job, current.world, stepTime, t, t + dt);
    job.processed = advance.processed;
    if (advance.effectiveSeconds > 0) job.lastProgressAt = advance.completedAt ?? t + dt;
    job.phase = job.stalledUntil > t ? 'Restarting' : 'Running';
    const sampleAt = advance.completedAt ?? t + dt;
    const due =
      job.lastSampleAt === undefined || sampleAt - job.lastSampleAt >= this.timing.sampleIntervalSeconds;
    if (advance.effectiveSeconds > 0 && due) this.#recordSample(job, current, stepTime, sampleAt);
    if (advance.completedAt !== undefined) this.#completeJob(job, advance.completedAt);
  }

  /**
   * torchelastic: each agent of the world that survives a lost member restarts its workers and spends one of
   * its maxRestarts; an agent new to the job starts with all of them (its count begins at 0). An agent past
   * maxRestarts gives up and the job fails. True when it failed.
   */
  #spendRestart(job: JobRecord, members: string[], t: number): boolean {
    const max = job.spec.maxRestarts;
    if (max === undefined) return false;
    const previous = new Set(job.worldMembers);
    const counts = new Map<string, number>();
    for (const m of members) {
      const spent = (job.agentRestarts.get(m) ?? 0) + (previous.has(m) ? 1 : 0);
      counts.set(m, spent);
    }
    job.agentRestarts = counts;
    job.restartsSpent = Math.max(0, ...counts.values());
    if (job.restartsSpent <= max) return false;
    this.#failJob(
      job,
      'MaxRestartsExceeded',
      `${job.ref.kind} ${job.ref.name}: a torchrun agent needed restart ${job.restartsSpent} of elasticPolicy.maxRestarts ${max} after its world lost a member.`,
      t,
    );
    return true;
  }

  #recordSample(
    job: JobRecord,
    current: { world: TrainingWorld; training: PodRecord[] },
    stepTime: number,
    at: number,
  ): void {
    const noise = () => 1 + uniform(this.#prng, -this.timing.stepTimeNoise, this.timing.stepTimeNoise);
    const base = stepTime / current.world.slowdown;
    const appCpu = this.#apps.cpuMillis(job.spec.app);
    const workers = current.training.map((r) => {
      const cpuLimit = r.sizing.limits.cpuMillis;
      const throttle = cpuLimit !== undefined && cpuLimit < appCpu ? appCpu / cpuLimit : 1;
      return {
        index: r.index,
        pod: r.pod.metadata?.name ?? '',
        stepTime: base * r.stragglerFactor * throttle * noise(),
      };
    });
    const sample: RecordedSample = {
      replicas: current.world.replicas,
      nodes: current.world.nodes,
      localBatchSize: current.world.localBatchSize,
      stepTime: stepTime * noise(),
      at,
      workers,
    };
    if (current.world.ps > 0) sample.ps = current.world.ps;
    const sync = this.#apps.syncTime?.(job.spec.app, placementOf(current.world));
    if (sync !== undefined) sample.syncTime = Math.min(sample.stepTime, sync * noise());
    job.samples.push(sample);
    job.lastSampleAt = at;
  }

  /** Samples and completion over [from, to): by progress where the app's statistics are known, else by samples. */
  #advanceOf(
    job: JobRecord,
    world: TrainingWorld,
    stepTime: number,
    from: number,
    to: number,
  ): TrainingAdvance {
    const batch = world.replicas * world.localBatchSize;
    if (!job.progress)
      return advanceTraining({
        processed: job.processed,
        target: job.target,
        throughput: batch / stepTime,
        from,
        to,
        stalledUntil: job.stalledUntil,
      });
    const advance = advanceProgress({
      table: job.progress.table,
      progress: job.progress.done,
      batch,
      stepTime,
      from,
      to,
      stalledUntil: job.stalledUntil,
    });
    job.progress.done = advance.progress;
    return {
      processed: job.processed + advance.steps * batch,
      effectiveSeconds: advance.effectiveSeconds,
      ...(advance.completedAt !== undefined ? { completedAt: advance.completedAt } : {}),
    };
  }

  #completeJob(job: JobRecord, at: number): void {
    job.phase = 'Succeeded';
    job.finishedAt = at;
    // Played by samples, the target is exact; by progress, the samples are what the job processed.
    if (!job.progress) job.processed = job.target;
    for (const rec of this.#podsOf(job)) {
      if (isTerminal(rec)) continue;
      if (!rec.pod.spec?.nodeName) {
        this.#deletePod(rec);
        continue;
      }
      this.#rememberUsage(rec, at);
      rec.runningSince = undefined;
      rec.restartAt = undefined;
      markSucceeded(rec.pod, at);
      this.#emitPod('MODIFIED', rec);
    }
    this.#setJobCondition(
      job,
      'Succeeded',
      `${job.ref.kind} ${job.ref.name} is successfully completed.`,
      at,
      true,
    );
    // cleanPodPolicy All (a Kubeflow runPolicy option): the operator deletes even the succeeded pods, which
    // keeps long workload replays from accumulating thousands of finished pods.
    if (cleanPodPolicyOf(job.object) === 'All') for (const rec of this.#podsOf(job)) this.#deletePod(rec);
  }

  /** A failed job's pods are deleted (cleanPodPolicy Running), so its resources return to the pool. */
  #failJob(job: JobRecord, reason: string, message: string, t: number): void {
    job.phase = 'Failed';
    job.finishedAt = t;
    job.failureReason = `${reason}: ${message}`;
    for (const rec of this.#podsOf(job)) this.#deletePod(rec);
    this.#setJobCondition(job, 'Failed', message, t, true, reason);
  }

  #setJobCondition(
    job: JobRecord,
    type: 'Created' | 'Running' | 'Succeeded' | 'Failed',
    message: string,
    at: number,
    terminal: boolean,
    reason?: string,
  ): void {
    if (job.ref.kind === 'StatefulSet') return; // StatefulSets have no job conditions.
    const time = toRfc3339(at);
    const status = (isRecordLike(job.object.status) ? job.object.status : {}) as {
      conditions?: Array<Record<string, string>>;
      startTime?: string;
      completionTime?: string;
    };
    const conditions = (status.conditions ?? []).map((c) =>
      terminal && c.type === 'Running' ? { ...c, status: 'False', lastTransitionTime: time } : c,
    );
    conditions.push({
      type,
      status: 'True',
      reason: reason ?? `${job.ref.kind}${type}`,
      message,
      lastUpdateTime: time,
      lastTransitionTime: time,
    });
    status.conditions = conditions;
    if (type === 'Running') status.startTime = time;
    if (terminal) status.completionTime = time;
    job.object = { ...job.object, status };
    job.object.metadata = { ...job.object.metadata, resourceVersion: this.#nextRevision() };
    if (type !== 'Created') this.#watch.push({ type: 'MODIFIED', object: structuredClone(job.object) });
  }

  /** A point per job every timelineIntervalSeconds (and at its end), with the mean throughput since the last. */
  #recordTimelines(): void {
    const now = this.now();
    for (const job of this.#jobs.values()) {
      if (job.timelineClosed) continue;
      const elapsed = now - job.lastTimelineAt;
      if (!isFinished(job) && elapsed < this.timing.timelineIntervalSeconds) continue;
      const desired = job.spec.roles.filter((r) => r.trains).reduce((sum, r) => sum + r.replicas, 0);
      const running = this.#podsOf(job).filter((r) => r.trains && r.runningSince !== undefined).length;
      job.timeline.push({
        at: now,
        workersDesired: desired,
        workersRunning: isFinished(job) ? 0 : running,
        throughput: elapsed > 0 ? (job.processed - job.processedAtLastPoint) / elapsed : 0,
        processedSamples: job.processed,
        phase: job.phase,
      });
      job.lastTimelineAt = now;
      job.processedAtLastPoint = job.processed;
      if (isFinished(job)) job.timelineClosed = true;
    }
  }

  // ---- helpers ----------------------------------------------------------------------------------------

  #realUsage(job: JobRecord, rec: PodRecord): { cpuMillis: number; memoryBytes: number } {
    const limits = rec.sizing.limits;
    if (!rec.trains) {
      // Parameter servers and evaluators are not profiled: they use most of what they ask for.
      return {
        cpuMillis: Math.round(rec.sizing.requests.cpuMillis * rec.cpuFactor * 0.8),
        memoryBytes: Math.round(rec.sizing.requests.memoryBytes * rec.memoryFactor * 0.8),
      };
    }
    const cpu = this.#apps.cpuMillis(job.spec.app) * rec.cpuFactor;
    const memory = this.#apps.memoryNeedBytes(job.spec.app) * rec.memoryFactor;
    return {
      cpuMillis: Math.round(Math.min(cpu, limits.cpuMillis ?? Number.POSITIVE_INFINITY)),
      // A container that hits its limit is killed there: its observed peak is the limit.
      memoryBytes: Math.round(this.#outOfMemory(job, rec) ? (limits.memoryBytes ?? memory) : memory),
    };
  }

  #samplesInWindow(ref: JobRef, windowSeconds: number): RecordedSample[] {
    const job = this.#job(ref);
    const from = this.now() - windowSeconds;
    const samples = job.samples.filter((s) => (s.at ?? 0) >= from);
    if (samples.length === 0) {
      throw new MissingMetricsError(`no step samples for ${describe(ref)} in the last ${windowSeconds} s`);
    }
    return samples;
  }

  #podsOf(job: JobRecord): PodRecord[] {
    // Insertion order within a job equals its order in #pods: results are the same as a full scan's.
    return [...(this.#podsByJob.get(job.key)?.values() ?? [])];
  }

  #job(ref: JobRef): JobRecord {
    const job = this.#jobs.get(jobKey(ref));
    if (!job) throw new NotFoundError(describe(ref));
    return job;
  }

  #node(name: string): SimulatedNode {
    const node = this.#nodes.find((n) => n.name === name);
    if (!node) throw new NotFoundError(`Node ${name}`);
    return node;
  }

  #statusOf(job: JobRecord): SimulatedJobStatus {
    const status: SimulatedJobStatus = {
      ref: { ...job.ref },
      app: job.spec.app,
      phase: job.phase,
      submittedAt: job.submittedAt,
      jctSeconds:
        job.phase === 'Succeeded' && job.finishedAt !== undefined ? job.finishedAt - job.submittedAt : null,
      processedSamples: job.processed,
      targetSamples: job.target,
    };
    if (job.startedAt !== undefined) status.startedAt = job.startedAt;
    if (job.finishedAt !== undefined) status.finishedAt = job.finishedAt;
    if (job.failureReason !== undefined) status.failureReason = job.failureReason;
    return status;
  }

  #emitPod(type: WatchEventType, rec: PodRecord): void {
    podMetadata(rec.pod).resourceVersion = this.#nextRevision();
    rec.published = deepFrozen(structuredClone(rec.pod));
    this.#watch.push({ type, object: rec.published });
  }

  /** The frozen copy of this version of a stored object (see #published). */
  #publishedCopy<T extends object>(stored: T): T {
    let copy = this.#published.get(stored) as T | undefined;
    if (!copy) {
      copy = deepFrozen(structuredClone(stored));
      this.#published.set(stored, copy);
    }
    return copy;
  }

  #takeFault(): void {
    const fault = this.#fault;
    if (!fault) return;
    this.#fault = undefined;
    throw fault;
  }

  #log(entry: WriteLogEntry): void {
    this.#writeLog.push(entry);
  }

  #nextRevision(): string {
    this.#revision += 1;
    return String(this.#revision);
  }

  /** UUID-shaped and deterministic (a counter), so that replays produce identical objects. */
  #newUid(): string {
    this.#uids += 1;
    return `00000000-0000-4000-8000-${this.#uids.toString(16).padStart(12, '0')}`;
  }

  #newNode(spec: SimulatedNodeSpec): SimulatedNode {
    const quantities: Record<string, string> = {
      cpu: millisToCpuQuantity(spec.cpuMillis),
      memory: bytesToMemoryQuantity(spec.memoryBytes),
      [GPU_RESOURCE]: String(spec.gpus),
      pods: '110',
    };
    const allocatable: Resources = {
      cpuMillis: spec.cpuMillis,
      memoryBytes: spec.memoryBytes,
      gpus: spec.gpus,
    };
    const object: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: spec.name,
        uid: this.#newUid(),
        labels: { 'kubernetes.io/hostname': spec.name, 'nvidia.com/gpu.present': 'true' },
      },
      spec: {},
      status: {
        capacity: { ...quantities },
        allocatable: { ...quantities },
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
          },
        ],
      },
    };
    return { name: spec.name, allocatable, object };
  }
}

function cleanPodPolicyOf(job: KubeObject): unknown {
  const spec = isRecordLike(job.spec) ? job.spec : {};
  const runPolicy = isRecordLike(spec.runPolicy) ? spec.runPolicy : {};
  return runPolicy.cleanPodPolicy;
}

/** One torchrun agent: a pod's container between restarts. */
function agentOf(rec: PodRecord): string {
  return `${rec.pod.metadata?.uid}:${restartCount(rec)}`;
}

function restartCount(rec: PodRecord): number {
  return rec.pod.status?.containerStatuses?.[rec.trainingContainer]?.restartCount ?? 0;
}

function trainingContainerIndex(containers: V1Container[], name: string | undefined): number {
  return Math.max(
    0,
    containers.findIndex((c) => c.name === name),
  );
}

function isRecordLike(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A short stable hash of a template revision, for the controller-revision-hash label. */
function revisionHash(revision: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < revision.length; i++) {
    hash ^= revision.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

/** Frozen to the leaves (Dates aside, as Object.freeze leaves their time settable): a reader that writes throws. */
function deepFrozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFrozen(child);
    Object.freeze(value);
  }
  return value;
}

/** The pod's preferred node affinity terms that name nodes (matchFields metadata.name In/NotIn); others ignored. */
function preferredNodeTerms(pod: V1Pod): PreferredNodeTerm[] {
  const terms: PreferredNodeTerm[] = [];
  for (const t of pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? []) {
    const fields = t.preference?.matchFields ?? [];
    if (fields.length !== 1 || (t.preference?.matchExpressions ?? []).length > 0) continue;
    const [field] = fields;
    if (field?.key !== 'metadata.name' || (field.operator !== 'In' && field.operator !== 'NotIn')) continue;
    terms.push({ weight: t.weight, operator: field.operator, names: field.values ?? [] });
  }
  return terms;
}
