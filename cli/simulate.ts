// `trainscaler simulate`: replay job-arrival workloads (the Pollux workloads: Philly arrivals with the GPU
// count and global batch each user asked for) on the embedded SIMULATED cluster, once per policy:
//   manual       the jobs as submitted (the user's GPU count, fixed), admitted first come first served when
//                their GPUs are free; no handler runs;
//   trainscaler  the production handlers, driven as cli/demo.ts drives them: submit on arrival, every pod and
//                job watch event from drainEvents(), an Alertmanager alert per running job every few decision
//                intervals and the EventBridge schedule every decision interval;
//   backfill     a BASELINE: the user's GPU count, fixed, FIFO with backfilling (Kueue BestEffortFIFO):
//                a later job starts when it fits now (lib/sim/baselines/backfill.ts);
//   tiresias     a BASELINE: the user's GPU count, Tiresias's discretized 2D-LAS with preemption
//                (lib/sim/baselines/tiresias.ts); a preempted job is stopped (Worker replicas 0) and resumed
//                from its checkpoint at the same size;
//   threshold    a BASELINE, not trainscaler: admitted like manual, then a Kubernetes HPA (or KEDA ScaledObject)
//                emulation on each running job's Worker replicas with a GPU-utilisation target
//                (lib/sim/baselines/threshold.ts), patching the job every decision interval like any client.
// Jobs progress at the step times of the chosen world (lib/sim/simulation-world.ts: the MEASURED Pollux
// tables, or the FITTED profiles of lib/sim/app-profiles.ts), keep their global batch and end at their
// application's target (lib/sim/workload.ts).
import { closeSync, openSync, writeSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { type Command, InvalidArgumentError } from 'commander';
import { handleAlarm } from '../functions/alarm.js';
import { handleClusterEvent } from '../functions/cluster-event.js';
import type { Handler, HandlerResult } from '../functions/handler-deps.js';
import { handleSchedule } from '../functions/schedule.js';
import { handleSubmit } from '../functions/submit.js';
import { readJob, roleOf } from '../lib/adapters/job-adapter.js';
import { shapeKey } from '../lib/cluster/capacity.js';
import type { KubeObject } from '../lib/cluster/cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../lib/config.js';
import {
  describeProductionTriggers,
  loadProductionTriggerConfig,
  type ProductionTriggerConfig,
  ProductionTriggers,
  scheduleTickSeconds,
  type TriggerCounts,
} from '../lib/sim/alerting/production-triggers.js';
import { backfillAdmissions } from '../lib/sim/baselines/backfill.js';
import { fcfsAdmissions } from '../lib/sim/baselines/manual.js';
import type { QueuedJob } from '../lib/sim/baselines/queue.js';
import {
  defaultHpaSpec,
  EMPTY_HPA_STATE,
  GPU_UTILISATION_TARGET,
  type HpaSpec,
  type HpaState,
  thresholdBaselineInterval,
} from '../lib/sim/baselines/threshold.js';
import {
  TIRESIAS_DEFAULTS,
  type TiresiasJobState,
  type TiresiasParams,
  tiresiasPass,
} from '../lib/sim/baselines/tiresias.js';
import {
  type IdleBeside,
  IdleWhileWantedMeter,
  meanIdleBeside,
  type RoomAround,
  type SampledJob,
  unheldGpus,
  workersWorthAdding,
} from '../lib/sim/idle-capacity.js';
import {
  type JobTimelinePoint,
  SimulatedCluster,
  type SimulatedJobPhase,
  type SimulatedJobStatus,
  type SimulatedNodeSpec,
} from '../lib/sim/simulated-cluster.js';
import { eventBridgeScheduledEvent } from '../lib/sim/simulated-triggers.js';
import {
  FITTED_WORLD,
  SIMULATION_WORLDS,
  type SimulationWorld,
  type SimulationWorldName,
} from '../lib/sim/simulation-world.js';
import { SIMULATED_MAX_RESTARTS } from '../lib/sim/training-job-manifests.js';
import {
  loadWorkloads,
  type TenantTraits,
  WORKLOAD_NAMESPACE,
  WORKLOAD_PRIORITY_CLASSES,
  type Workload,
  type WorkloadJob,
  workloadJobManifest,
} from '../lib/sim/workload.js';
import {
  DEFAULT_MULTI_TENANT,
  describeMultiTenant,
  type MultiTenantOptions,
  multiTenantTraits,
  nodeFailureTimes,
  workloadDrawKey,
} from '../lib/sim/workload-multitenant.js';
import {
  LAUNCHER_RESCALE_COST,
  parseRescaleCost,
  RESCALE_COST_FORMS,
  RescaleCostError,
  type WorldRescaleCost,
} from '../lib/sim/world-rescale-cost.js';
import type { JobRef, RoleView } from '../lib/types.js';
import { median } from './demo.js';
import { worldTruthOracle } from './oracle-model.js';
import { simulatedHandlerDeps } from './simulated-handler-deps.js';
import { defaultTracesDir, loadSimulationWorld } from './simulation-world.js';

export const SIMULATION_POLICIES = ['manual', 'backfill', 'tiresias', 'threshold', 'trainscaler'] as const;
/**
 * Run only when named: trainscaler with the world's truth as its throughput model (cli/oracle-model.ts), to
 * show what its model's errors cost beside `trainscaler` in the same run. No cluster can run it.
 */
export const DIAGNOSTIC_POLICIES = ['trainscaler-oracle'] as const;
export type SimulationPolicy = (typeof SIMULATION_POLICIES)[number] | (typeof DIAGNOSTIC_POLICIES)[number];
const KNOWN_POLICIES: readonly string[] = [...SIMULATION_POLICIES, ...DIAGNOSTIC_POLICIES];

/** The policies that run trainscaler's own handlers (submit, alarms, schedule, cluster events). */
function runsTrainscaler(policy: SimulationPolicy): boolean {
  return policy === 'trainscaler' || policy === 'trainscaler-oracle';
}

const GiB = 1024 ** 3;

/** The workload manifests are PyTorchJobs of workers only. */
const WORKER_REPLICAS_PATH = '/spec/pytorchReplicaSpecs/Worker/replicas';

/**
 * Mean of average JCT over the Pollux artifact's 8 workloads at 1.0x load, measured in THAT artifact's
 * simulator (measured throughput tables, 30 s restart penalty), not in ours: Pollux, Optimus+Oracle and
 * Tiresias as published (OSDI'21), and manual with backfill as run in that simulator (issue 13).
 */
export const PUBLISHED_MEAN_AVG_JCT_SECONDS: Record<string, number> = {
  Pollux: 2751,
  Tiresias: 4038,
  'Optimus+Oracle': 5682,
  'manual with backfill': 7783,
};

/** Where the peer figures come from, printed beside them. */
export const PUBLISHED_SOURCE =
  "the Pollux artifact's own simulator (another simulator), 8 workloads at 1.0x";

export interface SimulationOptions {
  workloads: Workload[];
  policies: readonly SimulationPolicy[];
  /** Where the true step times come from; FITTED_WORLD (needs no data) when undefined. */
  world?: SimulationWorld;
  seed?: number;
  /** 16 nodes x 4 GPUs (the Pollux testbed); 32 cores and 128 GiB per node. */
  nodes?: number;
  gpusPerNode?: number;
  /** Scheduling and decision interval: the schedule trigger and the FCFS admission run this often. */
  decisionIntervalSeconds?: number;
  /** Stop a run after this many simulated seconds; unfinished jobs count as not completed. */
  timeCapSeconds?: number;
  /** Seeded tenant behaviour (priorities, OOM, over-requests, node failures); off when undefined. */
  multiTenant?: MultiTenantOptions;
  /** The tiresias baseline's queues and promotion knob (TIRESIAS_DEFAULTS when undefined). */
  tiresias?: TiresiasParams;
  /** What every re-formed world costs, for every policy (LAUNCHER_RESCALE_COST when undefined). */
  rescaleCost?: WorldRescaleCost;
  onProgress?: (line: string) => void;
  /** Every applied trainscaler decision, as it happens (simulated seconds since the start). */
  onDecision?: (decision: AppliedDecision) => void;
  /** Every decision interval of every run, as the idle-capacity meter sees it (`simulate --trace`). */
  onInterval?: (sample: IntervalSample) => void;
}

export interface AppliedDecision {
  workload: string;
  policy: SimulationPolicy;
  job: string;
  /** Simulated seconds since the start. */
  at: number;
  /** The decision's policy (initial, tuning, fault, rebalance, ...), not the simulated one. */
  decidedBy: string;
  reason: string;
}

/**
 * One decision interval of a run: the GPUs no bound pod holds, the workers running elastic jobs would take at a
 * real gain (the two the idle-GPU figures are summed from), and every submitted, unfinished job's size, as the
 * cluster stands at the interval's end, before the events and decisions of that second.
 */
export interface IntervalSample {
  workload: string;
  policy: SimulationPolicy;
  /** Simulated seconds since the start. */
  at: number;
  idleGpus: number;
  wantedGpus: number;
  jobs: IntervalJob[];
}

export interface IntervalJob {
  name: string;
  /** Never Succeeded or Failed: finished jobs are not listed. */
  phase: SimulatedJobPhase;
  /** Worker replicas its spec asks for now (pods may still be starting). */
  workers: number;
  /** Workers it would take at a real gain (workersWorthAdding; 0 unless running): its part of wantedGpus. */
  wanted: number;
  /** Samples processed over its target, 0 to 1. */
  done: number;
}

export interface JobOutcome {
  name: string;
  application: string;
  arrivalSeconds: number;
  /** Finished minus arrival (queueing included); null unless completed. */
  jctSeconds: number | null;
  /** First training step minus arrival (queueing and pod start); null if it never started. */
  queuedSeconds: number | null;
  state: 'completed' | 'failed' | 'unfinished';
  /** Worker-count changes written by trainscaler (or the threshold baseline) after the job first trained. */
  rescales: number;
  workersAsked: number;
  workersFinal: number;
  /** Times the tiresias baseline preempted the job (each resume costs a checkpoint-restart). */
  preemptions?: number;
  /**
   * The world's rescale cost charged to each re-formed world of the job (a rescale, a replaced or restarted pod,
   * a tiresias resume), seconds: the progress its re-formed worlds lost. Empty for a job never submitted.
   */
  pausesSeconds: number[];
  /** trainscaler's (or the threshold baseline's) last reason about this job, so that a size can be explained. */
  lastReason?: string;
  /** The simulator's reason for a failed job, e.g. 'BackoffLimitExceeded: ...' or 'PendingTimeout: ...'. */
  failureReason?: string;
  /** Where the job's time went, from its timeline (60 s points); absent for a job never submitted. */
  time?: JobTimeSplit;
}

/** A job's seconds by phase (each timeline point's phase covers the span since the previous point). */
export interface JobTimeSplit {
  pendingSeconds: number;
  runningSeconds: number;
  restartingSeconds: number;
  /** Mean training workers while Running, weighted by time. */
  meanWorkersRunning: number;
}

export function timeSplitOf(timeline: readonly JobTimelinePoint[], submittedAt: number): JobTimeSplit {
  const split = { pendingSeconds: 0, runningSeconds: 0, restartingSeconds: 0, meanWorkersRunning: 0 };
  let workerSeconds = 0;
  let previous = submittedAt;
  for (const point of timeline) {
    const span = Math.max(0, point.at - previous);
    previous = point.at;
    if (point.phase === 'Pending') split.pendingSeconds += span;
    else if (point.phase === 'Restarting') split.restartingSeconds += span;
    else if (point.phase === 'Running' || point.phase === 'Succeeded') {
      split.runningSeconds += span;
      // A closing point reports no running workers; its span ran at the size of the point before.
      workerSeconds += span * (point.workersRunning || point.workersDesired);
    }
  }
  split.meanWorkersRunning = split.runningSeconds > 0 ? workerSeconds / split.runningSeconds : 0;
  return split;
}

export interface RunSummary {
  jobs: number;
  completed: number;
  failed: number;
  completionRate: number;
  avgJctSeconds: number | null;
  medianJctSeconds: number | null;
  makespanSeconds: number;
  /** GPU-time of running training containers / (cluster GPUs x makespan). */
  gpuUtilisation: number;
  rescalesPerJob: number;
  /**
   * GPU-hours no pod held while a running elastic job would have taken them at a true gain above the
   * rescale cost (lib/sim/idle-capacity.ts); and the part idle longer than two schedule ticks.
   */
  idleGpuHoursWhileJobsCouldGrow: number;
  idleGpuHoursBeyondTwoTicks: number;
  /** That part by what the jobs that wanted the GPUs did within those two ticks (IdleBeside). */
  idleGpuHoursBeyondTwoTicksBeside: IdleBeside;
  /** Time-averaged shares of the cluster's CPU and memory: requested by bound pods, and really used. */
  cpuRequested: number;
  cpuUsed: number;
  memoryRequested: number;
  memoryUsed: number;
}

export interface WorkloadRun {
  workload: string;
  policy: SimulationPolicy;
  summary: RunSummary;
  jobs: JobOutcome[];
  /** Cluster-wide GPUs held by running training containers, sampled every decision interval. */
  gpusBusy: Array<[number, number]>;
  handlerErrors: number;
  /** trainscaler only: rule evaluations, webhooks and alerts sent by alert name, schedule ticks. */
  triggerCounts?: TriggerCounts;
  wallSeconds: number;
}

export interface PolicyAggregate {
  workloads: number;
  meanAvgJctSeconds: number | null;
  meanMedianJctSeconds: number | null;
  meanMakespanSeconds: number;
  meanGpuUtilisation: number;
  meanRescalesPerJob: number;
  /** Over every job of the runs: the mean rescales per job, and the most any one job had (with its workload/name). */
  rescalesPerJob: RescalesPerJob;
  meanIdleGpuHoursWhileJobsCouldGrow: number;
  meanIdleGpuHoursBeyondTwoTicks: number;
  meanIdleGpuHoursBeyondTwoTicksBeside: IdleBeside;
  meanCompletionRate: number;
  meanCpuRequested: number;
  meanCpuUsed: number;
  meanMemoryRequested: number;
  meanMemoryUsed: number;
}

export interface RescalesPerJob {
  /** Worker-count changes written by the policy after the job first trained (JobOutcome.rescales). */
  mean: number;
  max: number;
  /** `workload/job` of the job with the most (the first such), null when none was rescaled. */
  maxJob: string | null;
  /**
   * Re-formed worlds of any cause (a rescale, a replaced or restarted pod, a tiresias resume), each charged the
   * rescale cost (JobOutcome.pausesSeconds): what the baselines' restarts are compared on.
   */
  reformedWorlds: { mean: number; max: number; maxJob: string | null };
}

export interface SimulationResult {
  seed: number;
  world: SimulationWorldName;
  cluster: { nodes: number; gpusPerNode: number; cpuMillisPerNode: number; memoryBytesPerNode: number };
  decisionIntervalSeconds: number;
  /** How trainscaler is triggered (production's rules, routing and cron, read from infra/). */
  triggers: string;
  /**
   * Seconds without progress of a re-formed world that gained members (up) or lost one (down), charged to every
   * policy; name: the --rescale-cost form (launcher, torchrun or the seconds given).
   */
  rescaleCostSeconds: WorldRescaleCost;
  multiTenant: string[] | null;
  assumptions: string[];
  runs: WorkloadRun[];
  policies: Partial<Record<SimulationPolicy, PolicyAggregate>>;
  published: Record<string, number>;
  publishedSource: string;
}

/** The run's assumptions, in words; `cost` is what the world charges per re-formed world. */
export function simulationAssumptions(cost: WorldRescaleCost): string[] {
  const config = DEFAULT_POLICY_CONFIG;
  return [
    'cluster: 16 nodes x 4 GPUs, 32 cores, 128 GiB each (the Pollux testbed shape); one GPU per worker pod',
    "throughput: workers x local batch / the world's step time (the world lines above), global batch fixed at the workload's batch_size (local batch = batch_size / workers)",
    `every re-formed world costs time without progress, charged alike to every policy's jobs (--rescale-cost ${cost.name}): ${cost.up} s when it only gained workers, ${cost.down} s when it lost or restarted one, a tiresias resume included (${cost.source}); a growing elastic job trains on at its old size through the joining pods' 20 s start (as torchelastic does, measured end to end); the first start costs the 20 s pod start`,
    `what trainscaler believes a rescale costs: as in the product, its config default (lib/config.ts: scaleUpCostSeconds ${config.scaleUpCostSeconds} s, scaleDownCostSeconds ${config.scaleDownCostSeconds} s, the launcher's measured pauses) until it has measured the job's own rescale in that direction (lib/decisions/rescale-measurement.ts, from the job's metrics: the first step after a rescale and the growth's pause, which the simulated cluster reports as it charged them); so it learns the world's ${cost.up} s / ${cost.down} s (plus up to one 10 s sub-step on a shrink, measured from the patch) job by job, after each job's first growth and first shrink, and is never handed the world's cost`,
    `restarts: each elastic PyTorchJob has elasticPolicy.maxRestarts ${SIMULATED_MAX_RESTARTS}; a world that loses or restarts a member spends one of each surviving torchrun agent's restarts, and an agent past maxRestarts fails the job (MaxRestartsExceeded); growth spends none`,
    "decision interval 60 s: FCFS admission (manual, threshold) and the threshold baseline run every interval; trainscaler is triggered only as production triggers it (see triggers): an alarm only when the project's alert rules fire on the simulated sidecar series, the schedule on its cron",
    "manual: the user's num_replicas (capped at the cluster's GPUs), fixed; jobs admitted first come first served when enough GPUs are free (high-priority jobs bypass the queue); JCT counts the queueing",
    "backfill (a baseline): the user's num_replicas, fixed; FIFO with backfilling like a Kueue BestEffortFIFO queue: at every arrival and decision interval the waiting jobs are tried in arrival order and each one that fits in the GPUs then free starts; no reservation for the head (it can be delayed by later small jobs); no preemption",
    `tiresias (a baseline): the user's num_replicas, fixed; discretized 2D-LAS with preemption (Tiresias, NSDI'19): attained service = GPUs x seconds held since the last promotion; ${TIRESIAS_DEFAULTS.queueThresholdsGpuSeconds.length + 1} queues, demotion at ${TIRESIAS_DEFAULTS.queueThresholdsGpuSeconds.map((t) => `${t / 3600} GPU-h`).join(', ')} (the Pollux artifact's Tiresias); FIFO by queue entry within a queue; GPUs given in priority order, a job that does not fit is skipped; promotion to the top queue after waiting ${TIRESIAS_DEFAULTS.promoteKnob}x its service (PROMOTEKNOB, our choice; the artifact disables it); passes at every arrival and decision interval; a preemption sets Worker replicas to 0 (pods deleted, progress kept at the checkpoint) and a resume costs the 20 s pod start plus the ${cost.down} s pause of a world that lost its members`,
    'trainscaler: each job submitted on arrival with elastic bounds 1..64 workers; the handlers decide its size',
    `threshold (a baseline, not trainscaler): admitted like manual; then every decision interval a Kubernetes HPA emulation per running job scales its Worker replicas to ceil(workers x utilisation / ${GPU_UTILISATION_TARGET}), utilisation = 1 - syncTime/stepTime of its current world's step samples; HPA defaults: tolerance 0.1, highest recommendation of the last 300 s for scale-down, scale-up at most max(+4, x2) per 15 s period; bounds = the job's elastic bounds (1..64); never grown beyond the GPUs free at that moment (no cluster-autoscaler: unplaceable pods would stay Pending and fail the rendezvous), and blind to the FCFS queue (it may take GPUs the head of the queue waits for); jobs without a step sample of their current world size are skipped; jobs handled in admission order`,
    'JCT = completion - arrival; averages and medians are over completed jobs; makespan = last completion (or the time cap)',
    "no statistical-efficiency model: a job's target does not change with its worker count because the global batch is kept (Pollux also adapts the batch size, which we do not)",
  ];
}

export async function runSimulation(options: SimulationOptions): Promise<SimulationResult> {
  const seed = options.seed ?? 1;
  const nodes = options.nodes ?? 16;
  const gpusPerNode = options.gpusPerNode ?? 4;
  const interval = options.decisionIntervalSeconds ?? 60;
  const world = options.world ?? FITTED_WORLD;
  const triggers = loadProductionTriggerConfig();
  const rescaleCost = options.rescaleCost ?? LAUNCHER_RESCALE_COST;
  const runs: WorkloadRun[] = [];
  for (const workload of options.workloads) {
    for (const policy of options.policies) {
      runs.push(
        await runWorkload(workload, policy, {
          seed,
          nodes,
          gpusPerNode,
          interval,
          triggers,
          world,
          cap: options.timeCapSeconds ?? 14 * 86_400,
          multiTenant: options.multiTenant,
          tiresias: options.tiresias ?? TIRESIAS_DEFAULTS,
          rescaleCost,
          report: options.onProgress ?? (() => {}),
          onDecision: options.onDecision,
          onInterval: options.onInterval,
        }),
      );
    }
  }
  const policies: Partial<Record<SimulationPolicy, PolicyAggregate>> = {};
  for (const policy of options.policies)
    policies[policy] = aggregate(runs.filter((r) => r.policy === policy));
  return {
    seed,
    world: world.name,
    cluster: { nodes, gpusPerNode, cpuMillisPerNode: 32_000, memoryBytesPerNode: 128 * GiB },
    decisionIntervalSeconds: interval,
    triggers: describeProductionTriggers(triggers),
    rescaleCostSeconds: rescaleCost,
    multiTenant: options.multiTenant ? describeMultiTenant(options.multiTenant) : null,
    assumptions: [...world.assumptions, ...simulationAssumptions(rescaleCost)],
    runs,
    policies,
    published: { ...PUBLISHED_MEAN_AVG_JCT_SECONDS },
    publishedSource: PUBLISHED_SOURCE,
  };
}

interface RunSettings {
  seed: number;
  nodes: number;
  gpusPerNode: number;
  interval: number;
  triggers: ProductionTriggerConfig;
  world: SimulationWorld;
  cap: number;
  multiTenant: MultiTenantOptions | undefined;
  tiresias: TiresiasParams;
  rescaleCost: WorldRescaleCost;
  report: (line: string) => void;
  onDecision: SimulationOptions['onDecision'];
  onInterval: SimulationOptions['onInterval'];
}

function nodeSpecs(count: number, gpus: number): SimulatedNodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `gpu-node-${String(i).padStart(2, '0')}`,
    gpus,
    cpuMillis: 32_000,
    memoryBytes: 128 * GiB,
  }));
}

interface Tracked {
  job: WorkloadJob;
  ref: JobRef;
  workers: number;
  rescales: number;
  /** tiresias: preemptions so far. */
  preemptions: number;
  lastReason?: string;
  /** The emulated HPA of the threshold baseline. */
  hpa?: { spec: HpaSpec; state: HpaState };
}

async function runWorkload(
  workload: Workload,
  policy: SimulationPolicy,
  settings: RunSettings,
): Promise<WorkloadRun> {
  const wallStart = performance.now();
  const clusterGpus = settings.nodes * settings.gpusPerNode;
  const nodes = nodeSpecs(settings.nodes, settings.gpusPerNode);
  const apps = settings.world.apps;
  const sim = new SimulatedCluster({
    seed: settings.seed,
    apps: settings.world.apps,
    nodes,
    priorityClasses: WORKLOAD_PRIORITY_CLASSES,
    timing: {
      scaleUpCostSeconds: settings.rescaleCost.up,
      scaleDownCostSeconds: settings.rescaleCost.down,
    },
  });
  const start = sim.now();
  const deps = simulatedHandlerDeps(sim, WORKLOAD_PRIORITY_CLASSES);
  if (policy === 'trainscaler-oracle') deps.throughputOracle = worldTruthOracle(apps);
  const traits: TenantTraits[] | undefined = settings.multiTenant
    ? multiTenantTraits(workload.jobs, settings.seed, settings.multiTenant)
    : undefined;
  const failures = settings.multiTenant
    ? nodeFailureTimes(
        settings.seed,
        workloadDrawKey(workload.jobs),
        settings.nodes,
        settings.cap,
        settings.multiTenant,
      )
    : [];
  const tracked = new Map<string, Tracked>();
  const triggers = runsTrainscaler(policy)
    ? new ProductionTriggers(sim, WORKLOAD_NAMESPACE, settings.triggers)
    : undefined;
  let handlerErrors = 0;
  const call = async (handler: Handler, payload: unknown) => {
    let result: HandlerResult;
    try {
      result = await handler(payload, deps);
    } catch {
      handlerErrors += 1;
      return;
    }
    handlerErrors += result.errors.length;
    for (const outcome of result.outcomes) {
      const entry = tracked.get(outcome.plan.ref.name);
      if (!entry) continue;
      // Fault checks run on every pod event and mostly say "no fault": keep the last reason that says more.
      if (outcome.plan.policy !== 'fault' || outcome.plan.changes.length > 0)
        entry.lastReason = `${outcome.plan.policy}: ${outcome.plan.reason}`;
      if (!outcome.applied) continue;
      settings.onDecision?.({
        workload: workload.name,
        policy,
        job: outcome.plan.ref.name,
        at: sim.now() - start,
        decidedBy: outcome.plan.policy,
        reason: outcome.plan.reason,
      });
      const started = sim.jobStatus(entry.ref).startedAt !== undefined;
      for (const change of outcome.plan.changes) {
        if (change.kind !== 'replicas' || change.role !== 'Worker') continue;
        if (started && change.from !== change.to) entry.rescales += 1;
        entry.workers = change.to;
      }
    }
  };

  const arrivals = workload.jobs
    .map((job, i) => ({ job, traits: traits?.[i] }))
    .sort((a, b) => a.job.time - b.job.time);
  const fcfs: typeof arrivals = [];
  /** High-priority tenants' jobs: submitted on arrival, outside every queue. */
  const bypass: Record<string, true> = {};
  const submit = async (entry: (typeof arrivals)[number]) => {
    const stored = sim.submitJob(
      workloadJobManifest(
        entry.job,
        clusterGpus,
        entry.traits,
        settings.rescaleCost.workers,
        settings.world.targetSamples(entry.job.application, entry.job.batchSize),
      ),
    );
    const ref: JobRef = { kind: 'PyTorchJob', namespace: WORKLOAD_NAMESPACE, name: stored.metadata.name };
    const entryTracked: Tracked = {
      job: entry.job,
      ref,
      workers: Math.min(entry.job.replicas, clusterGpus),
      rescales: 0,
      preemptions: 0,
    };
    if (policy === 'threshold') {
      // The user's HPA spans the job's elastic bounds (1..clusterGpus in the workload manifests).
      const worker = roleOf(readJob(stored), 'Worker');
      entryTracked.hpa = {
        spec: defaultHpaSpec(worker?.minReplicas ?? 1, worker?.maxReplicas ?? clusterGpus),
        state: EMPTY_HPA_STATE,
      };
    }
    tracked.set(ref.name, entryTracked);
    if (runsTrainscaler(policy)) await call(handleSubmit, ref);
  };
  const unfinished = () =>
    [...tracked.values()].filter((t) => {
      const phase = sim.jobStatus(t.ref).phase;
      return phase !== 'Succeeded' && phase !== 'Failed';
    });
  const queued = (entry: (typeof arrivals)[number]): QueuedJob => ({
    name: entry.job.name,
    gpus: Math.min(entry.job.replicas, clusterGpus),
    arrival: entry.job.time,
  });
  const startQueued = async (names: readonly string[]) => {
    for (const name of names) {
      const index = fcfs.findIndex((e) => e.job.name === name);
      const [next] = index >= 0 ? fcfs.splice(index, 1) : [];
      if (next) await submit(next);
    }
  };
  // The queue baselines (lib/sim/baselines/): manual (strict FCFS; also threshold's admission), backfill,
  // tiresias. GPUs held = the sizes of the unfinished jobs (a preempted tiresias job holds none).
  const admit = async () => {
    if (policy === 'tiresias') return tiresiasAdmit();
    const free = clusterGpus - unfinished().reduce((sum, t) => sum + t.workers, 0);
    const queue = fcfs.map(queued);
    await startQueued(policy === 'backfill' ? backfillAdmissions(queue, free) : fcfsAdmissions(queue, free));
  };
  let tiresiasState: ReadonlyMap<string, TiresiasJobState> = new Map();
  const tiresiasAdmit = async () => {
    // High-priority tenants bypass the queue (as for manual); their GPUs are outside Tiresias's reach.
    const managed = unfinished().filter((t) => !(t.job.name in bypass));
    const outside = unfinished()
      .filter((t) => t.job.name in bypass)
      .reduce((sum, t) => sum + t.workers, 0);
    const jobs = [
      ...managed.map((t) => ({
        name: t.job.name,
        gpus: Math.min(t.job.replicas, clusterGpus),
        arrival: t.job.time,
      })),
      ...fcfs.map(queued),
    ];
    const pass = tiresiasPass(jobs, tiresiasState, {
      now: elapsed,
      capacityGpus: clusterGpus - outside,
      params: settings.tiresias,
    });
    tiresiasState = pass.state;
    // Preempt first: the resumed and started jobs need the GPUs the preempted ones release.
    for (const name of pass.preempt) {
      const t = tracked.get(name);
      if (!t) continue;
      await sim.patchJob(t.ref, [{ op: 'replace', path: WORKER_REPLICAS_PATH, value: 0 }], { dryRun: false });
      t.workers = 0;
      t.preemptions += 1;
      t.lastReason = `tiresias: preempted in queue ${pass.state.get(name)?.queue ?? 0}`;
    }
    for (const name of pass.start) {
      const t = tracked.get(name);
      if (!t) {
        await startQueued([name]);
        continue;
      }
      const gpus = Math.min(t.job.replicas, clusterGpus);
      await sim.patchJob(t.ref, [{ op: 'replace', path: WORKER_REPLICAS_PATH, value: gpus }], {
        dryRun: false,
      });
      t.workers = gpus;
      t.lastReason = `tiresias: resumed in queue ${pass.state.get(name)?.queue ?? 0}`;
    }
  };

  // The threshold baseline: the emulated HPA of every job that has trained, in admission order.
  const thresholdInterval = async () => {
    const running = unfinished().filter((t) => t.hpa && sim.jobStatus(t.ref).startedAt !== undefined);
    const decisions = await thresholdBaselineInterval(
      sim,
      running.map((t) => ({
        ref: t.ref,
        replicas: t.workers,
        spec: t.hpa?.spec ?? defaultHpaSpec(1, clusterGpus),
        state: t.hpa?.state ?? EMPTY_HPA_STATE,
      })),
      { now: sim.now(), namespace: WORKLOAD_NAMESPACE, metricWindowSeconds: settings.interval },
    );
    for (const decision of decisions) {
      const t = tracked.get(decision.ref.name);
      if (!t?.hpa) continue;
      t.hpa.state = decision.state;
      t.lastReason = `threshold: ${decision.reason}`;
      if (decision.to === decision.from) continue;
      // Only started jobs are scaled: each change is a rescale, and the FCFS admission sees the new size.
      t.rescales += 1;
      t.workers = decision.to;
    }
  };

  const usage = { cpuReq: 0, cpuUsed: 0, memReq: 0, memUsed: 0, samples: 0 };
  const gpusBusy: Array<[number, number]> = [];
  let gpuSeconds = 0;
  // Idle beyond two schedule ticks of production's cron is what the work-conservation goal forbids.
  const idleMeter = new IdleWhileWantedMeter(settings.interval, 2 * scheduleTickSeconds(settings.triggers));
  const idleWorld = {
    apps,
    gpusPerNode: settings.gpusPerNode,
    rescaleCostSeconds: sim.timing.scaleUpCostSeconds, // the idle GPUs would be taken by growth
  };
  // The cluster as it stands at the end of each interval, before that instant's events and triggers are
  // handled. Observed after them, it counted the GPUs a decision had just handed out as idle: a real scheduler
  // binds their pods within a second, the simulator only at its next sub-step (1.0x workload-1: the 14 idle
  // GPUs at 19,380 s were the 14 that three queued jobs' pods were about to take, and in busy stretches that
  // filled the two-tick window tick after tick).
  const observeIdle = async (): Promise<void> => {
    // One read of each job serves the idle meter and, when tracing, the job's line.
    const tracing = settings.onInterval !== undefined;
    let wanted = 0;
    const jobs: IntervalJob[] = [];
    const sampled: SampledJob[] = [];
    const roomByShape = new Map<string, number[]>();
    for (const status of sim.jobStatuses()) {
      if (status.phase === 'Succeeded' || status.phase === 'Failed') continue;
      if (status.phase !== 'Running' && !tracing) continue;
      const job = await sim.getJob(status.ref);
      const worker = roleOf(readJob(job), 'Worker');
      const want =
        status.phase === 'Running'
          ? workersWorthAdding(job, status, idleWorld, roomAround(worker, status))
          : 0;
      wanted += want;
      if (status.phase === 'Running' && worker)
        sampled.push({ key: status.ref.name, workers: worker.replicas, wanted: want });
      if (tracing) jobs.push(intervalJob(job, status, want));
    }
    const idleGpus = unheldGpus(clusterGpus, await sim.listPods(WORKLOAD_NAMESPACE));
    idleMeter.sample(idleGpus, sampled);
    settings.onInterval?.({
      workload: workload.name,
      policy,
      at: elapsed,
      idleGpus,
      wantedGpus: wanted,
      jobs,
    });

    function roomAround(worker: RoleView | undefined, status: SimulatedJobStatus): RoomAround | undefined {
      if (!worker) return undefined;
      const shape = shapeKey(worker.requests);
      let room = roomByShape.get(shape);
      if (!room) {
        room = sim.roomPerNode(worker.requests);
        roomByShape.set(shape, room);
      }
      return { perNode: sim.trainingPodsPerNode(status.ref), room };
    }
  };
  let ticks = 0;
  let scheduleCount = 0;
  let failureIndex = 0;
  let elapsed = 0;
  let nextArrival = 0;
  for (;;) {
    // Arrivals at their exact second (not rounded to the interval), then the rest of the interval.
    while (arrivals[nextArrival] && (arrivals[nextArrival]?.job.time ?? 0) <= elapsed) {
      const entry = arrivals[nextArrival++];
      if (!entry) break;
      if (entry.traits?.highPriority) bypass[entry.job.name] = true;
      if (runsTrainscaler(policy) || entry.traits?.highPriority) await submit(entry);
      else fcfs.push(entry);
    }
    if (!runsTrainscaler(policy)) await admit();
    const tickEnd = (Math.floor(elapsed / settings.interval) + 1) * settings.interval;
    const upcoming = arrivals[nextArrival]?.job.time;
    const triggerAt = triggers ? triggers.nextAfter(start + elapsed) - start : Number.POSITIVE_INFINITY;
    const until = Math.min(upcoming ?? Number.POSITIVE_INFINITY, tickEnd, triggerAt);
    sim.step(until - elapsed);
    elapsed = until;
    if (elapsed === tickEnd) await observeIdle();
    const events = sim.drainEvents();
    if (runsTrainscaler(policy)) for (const event of events) await call(handleClusterEvent, event);
    if (triggers) {
      // Alerts only when the project's rules fire on the simulated series; the schedule on its cron.
      const due = await triggers.due(start + elapsed);
      for (const hook of due.webhooks) await call(handleAlarm, hook.payload);
      if (due.schedule) await call(handleSchedule, eventBridgeScheduledEvent(sim.now(), scheduleCount++));
    }
    if (elapsed !== tickEnd) continue;

    ticks += 1;
    const failure = failures[failureIndex];
    if (failure && failure.at <= elapsed) {
      failureIndex += 1;
      await failNode(sim, nodes[failure.node]?.name ?? '');
    }
    const busy = await sampleCluster(sim, usage, settings.multiTenant !== undefined && ticks % 5 === 0);
    gpuSeconds += busy * settings.interval;
    gpusBusy.push([elapsed, busy]);
    if (policy === 'threshold') await thresholdInterval();
    const allIn = nextArrival >= arrivals.length && fcfs.length === 0;
    const open = unfinished().length;
    if (ticks % 60 === 0)
      settings.report(
        `[${workload.name} ${policy}] t=${(elapsed / 3600).toFixed(1)} h submitted ${tracked.size}/${arrivals.length} running/queued ${open}`,
      );
    if ((allIn && open === 0) || elapsed >= settings.cap) break;
  }

  const jobs: JobOutcome[] = [...tracked.values()].map((t) => {
    const status = sim.jobStatus(t.ref);
    const state =
      status.phase === 'Succeeded' ? 'completed' : status.phase === 'Failed' ? 'failed' : 'unfinished';
    return {
      name: t.job.name,
      application: t.job.application,
      arrivalSeconds: t.job.time,
      jctSeconds:
        state === 'completed' && status.finishedAt !== undefined
          ? status.finishedAt - start - t.job.time
          : null,
      queuedSeconds: status.startedAt !== undefined ? status.startedAt - start - t.job.time : null,
      state,
      rescales: t.rescales,
      workersAsked: t.job.replicas,
      workersFinal: t.workers,
      ...(policy === 'tiresias' ? { preemptions: t.preemptions } : {}),
      pausesSeconds: sim.chargedPauses(t.ref),
      ...(t.lastReason ? { lastReason: t.lastReason } : {}),
      ...(status.failureReason ? { failureReason: status.failureReason } : {}),
      time: timeSplitOf(sim.timeline(t.ref), status.submittedAt),
    };
  });
  // Jobs never admitted before the cap are unfinished too.
  for (const entry of [...fcfs, ...arrivals.slice(nextArrival)]) {
    jobs.push({
      name: entry.job.name,
      application: entry.job.application,
      arrivalSeconds: entry.job.time,
      jctSeconds: null,
      queuedSeconds: null,
      state: 'unfinished',
      rescales: 0,
      workersAsked: entry.job.replicas,
      workersFinal: 0,
      pausesSeconds: [],
    });
  }
  const finishedAt = [...tracked.values()].map((t) => sim.jobStatus(t.ref).finishedAt ?? sim.now());
  const makespan = Math.max(0, ...finishedAt) - start;
  const jcts = jobs.flatMap((j) => (j.jctSeconds === null ? [] : [j.jctSeconds])).sort((a, b) => a - b);
  const completed = jcts.length;
  const n = Math.max(1, usage.samples);
  const summary: RunSummary = {
    jobs: jobs.length,
    completed,
    failed: jobs.filter((j) => j.state === 'failed').length,
    completionRate: jobs.length > 0 ? completed / jobs.length : 0,
    avgJctSeconds: completed > 0 ? jcts.reduce((s, v) => s + v, 0) / completed : null,
    medianJctSeconds: median(jcts),
    makespanSeconds: makespan,
    gpuUtilisation: makespan > 0 ? Math.min(1, gpuSeconds / (clusterGpus * makespan)) : 0,
    rescalesPerJob: jobs.length > 0 ? jobs.reduce((s, j) => s + j.rescales, 0) / jobs.length : 0,
    idleGpuHoursWhileJobsCouldGrow: idleMeter.totalGpuSeconds / 3600,
    idleGpuHoursBeyondTwoTicks: idleMeter.beyondGraceGpuSeconds / 3600,
    idleGpuHoursBeyondTwoTicksBeside: {
      growing: idleMeter.beside.growing / 3600,
      shrunk: idleMeter.beside.shrunk / 3600,
      leftAlone: idleMeter.beside.leftAlone / 3600,
    },
    cpuRequested: usage.cpuReq / n,
    cpuUsed: usage.cpuUsed / n,
    memoryRequested: usage.memReq / n,
    memoryUsed: usage.memUsed / n,
  };
  const wallSeconds = (performance.now() - wallStart) / 1000;
  settings.report(
    `[${workload.name} ${policy}] done: ${completed}/${jobs.length} completed, makespan ${(makespan / 3600).toFixed(1)} h, ${wallSeconds.toFixed(1)} s wall`,
  );
  return {
    workload: workload.name,
    policy,
    summary,
    jobs,
    gpusBusy,
    handlerErrors,
    ...(triggers ? { triggerCounts: triggers.counts } : {}),
    wallSeconds,
  };
}

function intervalJob(job: KubeObject, status: SimulatedJobStatus, wanted: number): IntervalJob {
  return {
    name: status.ref.name,
    phase: status.phase,
    workers: roleOf(readJob(job), 'Worker')?.replicas ?? 0,
    wanted,
    done: status.targetSamples > 0 ? Math.min(1, status.processedSamples / status.targetSamples) : 0,
  };
}

/** A node reboot: every pod on it is evicted at once (its controller recreates them elsewhere or there). */
async function failNode(sim: SimulatedCluster, nodeName: string): Promise<void> {
  const pods = await sim.listPods(WORKLOAD_NAMESPACE);
  for (const pod of pods) {
    const phase = pod.status?.phase;
    if (pod.spec?.nodeName !== nodeName || phase === 'Succeeded' || phase === 'Failed') continue;
    await sim.evictPod(WORKLOAD_NAMESPACE, pod.metadata?.name ?? '', { dryRun: false });
  }
}

/**
 * GPUs held by running training containers (every interval, from the jobs' timelines would lag: pods are
 * read directly), and when `resources` is set the cluster's requested and used CPU and memory shares.
 */
async function sampleCluster(
  sim: SimulatedCluster,
  usage: { cpuReq: number; cpuUsed: number; memReq: number; memUsed: number; samples: number },
  resources: boolean,
): Promise<number> {
  const pods = await sim.listPods(WORKLOAD_NAMESPACE);
  let gpus = 0;
  let cpuReq = 0;
  let memReq = 0;
  const runningJobs = new Set<string>();
  for (const pod of pods) {
    if (!pod.spec?.nodeName || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') continue;
    const container = pod.spec.containers[0];
    const requests = container?.resources?.requests ?? {};
    const running = pod.status?.containerStatuses?.[0]?.state?.running !== undefined;
    if (running) gpus += Number(requests['nvidia.com/gpu'] ?? 0);
    if (!resources) continue;
    cpuReq += parseCpu(requests.cpu);
    memReq += parseMemory(requests.memory);
    const job = pod.metadata?.labels?.['training.kubeflow.org/job-name'];
    if (job) runningJobs.add(job);
  }
  if (!resources) return gpus;
  let cpuUsed = 0;
  let memUsed = 0;
  for (const name of runningJobs) {
    const used = await sim
      .containerUsage({ kind: 'PyTorchJob', namespace: WORKLOAD_NAMESPACE, name }, 300)
      .catch(() => []);
    for (const u of used) {
      cpuUsed += u.cpuMillis;
      memUsed += u.memoryBytes;
    }
  }
  const nodes = await sim.listNodes();
  const cpuTotal = nodes.reduce((s, n) => s + parseCpu(n.status?.allocatable?.cpu), 0);
  const memTotal = nodes.reduce((s, n) => s + parseMemory(n.status?.allocatable?.memory), 0);
  usage.cpuReq += cpuReq / cpuTotal;
  usage.cpuUsed += cpuUsed / cpuTotal;
  usage.memReq += memReq / memTotal;
  usage.memUsed += memUsed / memTotal;
  usage.samples += 1;
  return gpus;
}

function parseCpu(quantity: string | undefined): number {
  if (!quantity) return 0;
  return quantity.endsWith('m') ? Number(quantity.slice(0, -1)) : Number(quantity) * 1000;
}

const MEMORY_UNITS: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };

function parseMemory(quantity: string | undefined): number {
  if (!quantity) return 0;
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)?$/.exec(quantity);
  if (!match) return 0;
  return Number(match[1]) * (MEMORY_UNITS[match[2] ?? ''] ?? 1);
}

function mean(values: readonly number[]): number {
  return values.length > 0 ? values.reduce((s, v) => s + v, 0) / values.length : 0;
}

function meanOrNull(values: ReadonlyArray<number | null>): number | null {
  const present = values.filter((v): v is number => v !== null);
  return present.length > 0 ? mean(present) : null;
}

/** Every job of the runs counts once: the mean of their rescales (and re-formed worlds), and the job with the most. */
export function rescalesPerJobOf(runs: readonly Pick<WorkloadRun, 'workload' | 'jobs'>[]): RescalesPerJob {
  const jobs = runs.flatMap((r) => r.jobs.map((j) => ({ name: `${r.workload}/${j.name}`, job: j })));
  const spread = (count: (j: JobOutcome) => number) => {
    let most: (typeof jobs)[number] | undefined;
    for (const entry of jobs) if (!most || count(entry.job) > count(most.job)) most = entry;
    const max = most ? count(most.job) : 0;
    return { mean: mean(jobs.map((e) => count(e.job))), max, maxJob: most && max > 0 ? most.name : null };
  };
  return { ...spread((j) => j.rescales), reformedWorlds: spread((j) => j.pausesSeconds.length) };
}

export function aggregate(runs: readonly WorkloadRun[]): PolicyAggregate {
  const pick = (f: (s: RunSummary) => number) => mean(runs.map((r) => f(r.summary)));
  return {
    workloads: runs.length,
    meanAvgJctSeconds: meanOrNull(runs.map((r) => r.summary.avgJctSeconds)),
    meanMedianJctSeconds: meanOrNull(runs.map((r) => r.summary.medianJctSeconds)),
    meanMakespanSeconds: pick((s) => s.makespanSeconds),
    meanGpuUtilisation: pick((s) => s.gpuUtilisation),
    meanRescalesPerJob: pick((s) => s.rescalesPerJob),
    rescalesPerJob: rescalesPerJobOf(runs),
    meanIdleGpuHoursWhileJobsCouldGrow: pick((s) => s.idleGpuHoursWhileJobsCouldGrow),
    meanIdleGpuHoursBeyondTwoTicks: pick((s) => s.idleGpuHoursBeyondTwoTicks),
    meanIdleGpuHoursBeyondTwoTicksBeside: meanIdleBeside(
      runs.map((r) => r.summary.idleGpuHoursBeyondTwoTicksBeside),
    ),
    meanCompletionRate: pick((s) => s.completionRate),
    meanCpuRequested: pick((s) => s.cpuRequested),
    meanCpuUsed: pick((s) => s.cpuUsed),
    meanMemoryRequested: pick((s) => s.memoryRequested),
    meanMemoryUsed: pick((s) => s.memoryUsed),
  };
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

export function parsePolicies(value: string): SimulationPolicy[] {
  const names = value
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  const unknown = names.filter((p) => !KNOWN_POLICIES.includes(p));
  if (unknown.length > 0 || names.length === 0)
    throw new InvalidArgumentError(
      `unknown policy '${unknown.join(',')}': choose from ${KNOWN_POLICIES.join(', ')}`,
    );
  return [...new Set(names)] as SimulationPolicy[];
}

export function parseWorld(value: string): SimulationWorldName {
  if (!(SIMULATION_WORLDS as readonly string[]).includes(value))
    throw new InvalidArgumentError(`unknown world '${value}': choose from ${SIMULATION_WORLDS.join(', ')}`);
  return value as SimulationWorldName;
}

/** commander's form of parseRescaleCost: a bad value stops the command before anything runs. */
export function rescaleCostOption(value: string): WorldRescaleCost {
  try {
    return parseRescaleCost(value);
  } catch (error) {
    if (error instanceof RescaleCostError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}

export interface SimulateCommandOptions {
  workload: string;
  rescaleCost: WorldRescaleCost;
  policy: SimulationPolicy[];
  world: SimulationWorldName;
  traces?: string;
  statisticalEfficiency?: boolean;
  seed: number;
  limit?: number;
  multiTenant?: boolean;
  timeCapHours?: number;
  json?: boolean;
  report?: string;
  trace?: string;
}

export interface TraceWriter {
  onInterval: (sample: IntervalSample) => void;
  onDecision: (decision: AppliedDecision) => void;
  close: () => void;
}

/**
 * `simulate --trace FILE`: JSON lines written as the runs go, {"type":"interval", ...IntervalSample} every
 * decision interval and {"type":"decision", ...AppliedDecision} for every applied trainscaler decision: where a
 * run's time and idle GPUs went, job by job (the figures in the README's "Tried since" section).
 */
export function traceWriter(path: string): TraceWriter {
  let fd: number;
  try {
    fd = openSync(path, 'w');
  } catch (error) {
    throw new Error(
      `cannot write the trace to ${path}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const write = (record: object) => writeSync(fd, `${JSON.stringify(record)}\n`);
  return {
    onInterval: (sample) => write({ type: 'interval', ...sample }),
    onDecision: (decision) => write({ type: 'decision', ...decision }),
    close: () => closeSync(fd),
  };
}

export function registerSimulateCommand(program: Command): Command {
  return program
    .command('simulate')
    .description(
      'Replay job-arrival workloads (CSV name,time,application,num_replicas,batch_size, e.g. the Pollux workloads) on the embedded SIMULATED cluster of 16 nodes x 4 GPUs, per policy, and compare JCT, makespan and utilisation',
    )
    .requiredOption('--workload <path>', 'a workload CSV file, or a folder of workload-N.csv files')
    .option(
      '--policy <list>',
      `comma-separated policies: ${SIMULATION_POLICIES.join(',')} (manual: strict FCFS; backfill: FIFO with backfilling, like Kueue BestEffortFIFO; tiresias: 2D-LAS with preemption; threshold: an HPA-style GPU-utilisation autoscaler; all four are baselines at the user's sizes, not trainscaler); also, only when named: ${DIAGNOSTIC_POLICIES.join(',')} (a diagnostic: trainscaler with the simulated world's true throughput as its model, to show what its model's errors cost)`,
      parsePolicies,
      [...SIMULATION_POLICIES],
    )
    .option(
      '--world <name>',
      "where the true step times come from: measured (the Pollux artifact's placements.csv and scalability.csv, played as its simulator plays them) or fitted (the parametric profiles of lib/sim/app-profiles.ts, the form trainscaler's own model fits: its model is right by construction there)",
      parseWorld,
      'measured',
    )
    .option(
      '--traces <dir>',
      'the Pollux traces folder for --world measured (default: the traces folder beside the workload folder)',
    )
    .option(
      '--statistical-efficiency',
      "--world measured: a job's progress per step follows its global batch as the traces' gradient statistics say (validation-B.csv), every job completing at the same target progress (lib/sim/statistical-efficiency.ts); off: a job completes when it has processed its target samples (the README's tables)",
    )
    .option(
      '--rescale-cost <cost>',
      `what every re-formed world costs, for every policy alike: ${RESCALE_COST_FORMS} (launcher: trainscaler's launcher as measured, ${LAUNCHER_RESCALE_COST.up} s up / ${LAUNCHER_RESCALE_COST.down} s down; torchrun: plain torchrun with the recommended rendezvous, as measured; SECONDS: that pause up and down, a tiresias resume included). trainscaler is not told it: it learns each job's cost from the job's metrics, as in production`,
      rescaleCostOption,
      LAUNCHER_RESCALE_COST,
    )
    .option('--seed <n>', 'random seed of the simulation', positiveInt, 1)
    .option('--limit <n>', 'only the first n workloads of a folder', positiveInt)
    .option('--multi-tenant', 'seeded tenants: high-priority arrivals, OOM, over-requests, node failures')
    .option('--time-cap-hours <h>', 'stop each run after this many simulated hours', positiveInt)
    .option('--json', 'print one JSON object instead of tables')
    .option('--report <file>', 'also write an HTML page with plots')
    .option(
      '--trace <file>',
      "also write JSON lines: every decision interval's idle GPUs, GPUs running jobs would take and each job's workers, and every applied decision",
    )
    .action(async (options: SimulateCommandOptions) => {
      const workloads = loadWorkloads(options.workload).slice(0, options.limit);
      const world = loadSimulationWorld(options.world, options.traces ?? defaultTracesDir(options.workload), {
        statisticalEfficiency: options.statisticalEfficiency === true,
      });
      const progress = (line: string) =>
        process.stderr.write(process.stderr.isTTY ? `\r${line.padEnd(100)}` : `${line}\n`);
      const simulationOptions: SimulationOptions = {
        workloads,
        policies: options.policy,
        world,
        seed: options.seed,
        rescaleCost: options.rescaleCost,
        onProgress: progress,
      };
      if (options.multiTenant) simulationOptions.multiTenant = DEFAULT_MULTI_TENANT;
      if (options.timeCapHours !== undefined) simulationOptions.timeCapSeconds = options.timeCapHours * 3600;
      const trace = options.trace ? traceWriter(options.trace) : undefined;
      if (trace) {
        simulationOptions.onInterval = trace.onInterval;
        simulationOptions.onDecision = trace.onDecision;
      }
      let result: SimulationResult;
      try {
        result = await runSimulation(simulationOptions);
      } finally {
        trace?.close();
      }
      if (process.stderr.isTTY) process.stderr.write('\n');
      if (trace) process.stderr.write(`trace written to ${options.trace}\n`);
      const { renderSimulationTables, renderSimulationHtml } = await import('./simulate-report.js');
      if (options.report) {
        await writeFile(options.report, renderSimulationHtml(result));
        process.stderr.write(`report written to ${options.report}\n`);
      }
      process.stdout.write(
        options.json
          ? `${JSON.stringify(simulationJson(result), null, 2)}\n`
          : renderSimulationTables(result),
      );
    });
}

/** The --json form: everything but the per-interval GPU series (plots only), which would dominate it. */
export function simulationJson(result: SimulationResult) {
  return { ...result, runs: result.runs.map(({ gpusBusy: _gpusBusy, ...run }) => run) };
}
