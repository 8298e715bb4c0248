// Shared vocabulary of the pure core. Units are fixed so that no policy has to guess:
// CPU in millicores, memory in bytes, GPUs as whole devices, time in seconds (epoch seconds for instants).

import type { LaunchSettings } from './torchelastic/launch-settings.js';

export type JobKind = 'PyTorchJob' | 'TFJob' | 'StatefulSet' | 'Job' | 'JobSet' | 'TrainJob';

export interface JobRef {
  kind: JobKind;
  namespace: string;
  name: string;
}

export interface Resources {
  cpuMillis: number;
  memoryBytes: number;
  gpus: number;
}

/** Replica roles as the frameworks name them; StatefulSets expose a single 'Worker' role. */
export type RoleName = 'Worker' | 'Master' | 'PS' | 'Chief' | 'Evaluator';

export interface RoleView {
  role: RoleName;
  replicas: number;
  /** Elastic bounds: PyTorchJob elasticPolicy, or trainscaler.io/min-/max- annotations for other kinds. */
  minReplicas: number;
  maxReplicas: number;
  /** The container that trains (the first one unless the job names another); index into the pod template. */
  containerName: string;
  containerIndex: number;
  requests: Resources;
  limits: Resources;
  /**
   * The worker count moves only in steps of this many (a JobSet's replicated job: `replicas` child Jobs, each
   * with `parallelism` pods, and `replicas` is immutable). Absent: any whole number.
   */
  replicaMultiple?: number;
}

/** A kind of change the job's own API may refuse whatever its value (see JobView.refusals). */
export type RefusableChange = Change['kind'];

/** What trainscaler keeps on the job itself (annotations) between stateless invocations. */
export interface JobAutoscalerState {
  /**
   * Epoch seconds of the last write trainscaler made to this job that changed how it runs (the cool-down
   * counts from it); a node preference alone (prefer-node), which moves no pod, leaves it as it was.
   */
  lastActionAt?: number;
  lastDecisionId?: string;
  /** Consecutive OOM kills seen for the job, used for bounded memory growth. */
  oomCount: number;
  /** Restart counts seen at the last fault decision, per pod, to detect crash loops. */
  paused: boolean;
  pauseReason?: string;
  /**
   * Replica reductions trainscaler applied to a torchelastic job that restarted its running workers: each
   * spends one of the job's `elasticPolicy.maxRestarts` (measured; growth spends none).
   */
  scaleDowns?: number;
  /**
   * The Worker replicas the job had before trainscaler's first write to it: the size its user asked for.
   * Recorded on that first write; before it, the job's current replicas are the user's.
   */
  askedWorkers?: number;
  /**
   * The last worker-count change trainscaler wrote (live from/to, epoch seconds of the write), so that a later
   * review can measure what it cost from the job's own metrics.
   */
  lastRescale?: { at: number; from: number; to: number };
  /**
   * Measured seconds from a patch to the job's first step at the new size, per direction (the latest
   * measurement of each), and the `lastRescale.at` they were last measured for (measured once).
   */
  /**
   * The job's own rescale measurements. `down`: patch to the first step at the new size (a shrink pauses from
   * the patch on). `upPause`: a growth's pause, last step before it to the first after it (what growth costs:
   * the joining pods start while the old world trains on). `upToFirstStep`: that growth's patch to first step,
   * pods' start included (reported, not charged).
   */
  rescaleCost?: { upPause?: number; upToFirstStep?: number; down?: number; measuredFor?: number };
  /**
   * The most Worker pods the job has had running when trainscaler wrote to it: a size it has run at, so
   * growing back to it is no step into the unknown (growthLimit, the guardrails' step bound).
   */
  largestRunWorkers?: number;
  /**
   * The straggler policy's pod replacements, one entry per slot (the pod name, which its replacement keeps):
   * when it was last replaced and how many times in a row (lib/policies/stragglers.ts
   * withStragglerReplacement). A slot whose replacement is as slow waits out a back-off that grows with
   * `count`. Bounds trainscaler's own actions: kept where tenants cannot write.
   */
  stragglerReplacements?: StragglerReplacement[];
}

export interface StragglerReplacement {
  pod: string;
  /** Epoch seconds of the latest eviction of this slot. */
  at: number;
  /** Replacements of this slot, each within STRAGGLER_REPLACEMENT_MEMORY_SECONDS of the one before. */
  count: number;
}

/**
 * What torchelastic needs trainscaler to know about an elastic PyTorchJob (from its elasticPolicy).
 * `c10dStore`: the rendezvous store lives in worker-0 (backend c10d, the operator's default when unset), so
 * removing worker-0 kills the whole job.
 */
export interface TorchElasticView {
  c10dStore: boolean;
  maxRestarts?: number;
  /**
   * Where maxRestarts came from: elasticPolicy, PET_MAX_RESTARTS in the Worker's env, --max_restarts in its
   * command, or torchrun's default (0) when nothing sets it.
   */
  maxRestartsFrom?: 'elasticPolicy' | 'env' | 'command' | 'torchrun default';
  /** elasticPolicy.rdzvConf as key -> value. */
  rdzvConf: Record<string, string>;
  /** PET_MONITOR_INTERVAL in the Worker's training container env, when set there. */
  monitorInterval?: string;
  /** The user lets trainscaler set the rendezvous settings it recommends (trainscaler.io/tune-rendezvous). */
  tuneRendezvous: boolean;
  /** The Worker's training container runs trainscaler's launcher (`trainscaler_hook.launch` in its command/args). */
  trainscalerLauncher: boolean;
  /** How the Worker's training container launches (lib/torchelastic/launch-settings.ts); unset without a Worker. */
  launch?: LaunchSettings;
}

/** One view of a training job whatever its kind. Adapters build it; policies read only this. */
export interface JobView {
  ref: JobRef;
  uid: string;
  resourceVersion: string;
  /** Numeric priority (higher wins); resolved from priorityClassName by the caller when known. */
  priority: number;
  priorityClassName?: string;
  /** Whether the framework can change the worker count without resubmission. */
  elastic: boolean;
  /** Same signature = same model/code/data shape; keys the profile store. */
  signature: string;
  /** Per-replica batch size and the global batch the user wants kept, when the job declares them. */
  localBatchSize?: number;
  globalBatchSize?: number;
  /** Samples the job must process to finish, when declared (used for remaining-time estimates). */
  targetSamples?: number;
  roles: RoleView[];
  /** Opted in (lib/management.ts): the annotation or label trainscaler.io/managed, or a listed namespace. */
  managed: boolean;
  /** Why a job is not managed, when it is not. */
  unmanagedReason?: string;
  state: JobAutoscalerState;
  creationTimestamp?: number;
  /**
   * Set when Kueue manages the job, saying how that was seen (its kueue.x-k8s.io/queue-name label, or a
   * Workload it controls): its size then follows Kueue's rules (lib/kueue/kueue-guard.ts), and the cluster-wide
   * rebalance leaves it to Kueue's priorities and preemption.
   */
  kueue?: string;
  /**
   * The kinds of change the job's own API refuses now, whatever the value (its kind, completion mode, a
   * finished job), each with the refusal a write would get (UnsupportedChangeError's message). Policies
   * propose none of them and say why instead (lib/policies/kind-limits.ts); a plan that still carries one is
   * refused whole by the adapter (UnsupportedChangeError), before anything is written.
   */
  refusals?: Partial<Record<RefusableChange, string>>;
  /** Only for a PyTorchJob with an elasticPolicy (torchrun). */
  torchElastic?: TorchElasticView;
  /**
   * Rescale pauses measured on earlier runs of the job's signature (its profile, lib/policies/profiles.ts):
   * the median of the last ones per direction, set by the handlers that read the profile store.
   */
  signatureRescaleCost?: SignatureRescaleCost;
}

export interface SignatureRescaleCost {
  /** Seconds; undefined when no earlier run measured that direction. */
  up?: number;
  down?: number;
  /** How many measurements each median is of. */
  upRuns?: number;
  downRuns?: number;
}

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface PodTermination {
  reason: string; // 'OOMKilled' | 'Error' | 'Evicted' | 'Preempted' | 'DeadlineExceeded' | ...
  exitCode?: number;
  at?: number;
}

export interface PodView {
  name: string;
  namespace: string;
  role: RoleName;
  /** Replica index within the role, from the framework's index label. */
  index: number;
  phase: PodPhase;
  nodeName?: string;
  restartCount: number;
  /** The last termination of the training container, current or previous. */
  lastTermination?: PodTermination;
  /** Pod-level reason, e.g. 'Evicted' or 'Preempted' on a failed pod. */
  reason?: string;
  requests: Resources;
  limits: Resources;
  /** The pod waits behind scheduling gates (e.g. Kueue's, until its workload slice is admitted): not unplaceable. */
  schedulingGated?: boolean;
  /**
   * What the kubelet reports the training container runs with (status.containerStatuses[].resources, on nodes
   * that resize in place), when it reports it: after a resize it can lag the spec (PodResizePending/InProgress).
   */
  actual?: { requests: Resources; limits: Resources };
}

export interface NodeView {
  name: string;
  allocatable: Resources;
  /** Sum of requests of pods bound to the node that are not finished. */
  allocated: Resources;
  schedulable: boolean;
}

export interface ClusterCapacity {
  nodes: NodeView[];
}

/** One observation of a job's step time at a given scale. */
export interface StepSample {
  /** Number of data-parallel replicas (workers). */
  replicas: number;
  /** Number of distinct nodes the replicas ran on. */
  nodes: number;
  /** Parameter servers, for PS jobs; 0 or undefined for all-reduce jobs. */
  ps?: number;
  localBatchSize: number;
  /** Seconds per optimizer step. */
  stepTime: number;
  /** Part of stepTime spent in gradient synchronisation, when measured. */
  syncTime?: number;
  /** Epoch seconds when observed (used to weigh recent samples). */
  at?: number;
}

/** Observed usage of one pod's training container. */
export interface ContainerUsage {
  pod: string;
  role: RoleName;
  cpuMillis: number;
  /** Peak working-set memory over the observation window. */
  memoryBytes: number;
}

/** Step times of each worker over time, for straggler detection. */
export interface WorkerStepTimes {
  worker: number;
  pod?: string;
  /** `node`: where the pod ran at that sample, when the metrics carry it (names nodes that keep straggling). */
  samples: { at: number; stepTime: number; node?: string }[];
}

export type PolicyName = 'initial' | 'tuning' | 'rightsizing' | 'fault' | 'straggler' | 'rebalance';

export type Change =
  | { kind: 'replicas'; role: RoleName; from: number; to: number }
  | {
      kind: 'resources';
      role: RoleName;
      resource: 'cpu' | 'memory';
      field: 'requests' | 'limits';
      from: number;
      to: number;
    }
  /**
   * `toResize`: evicted only so that the controller recreates it at the role's new size (an OOM kill); where
   * the pod can be resized in place (pods/resize) the actuator does that instead and does not evict it.
   */
  | { kind: 'evict-pod'; pod: string; toResize?: boolean }
  /**
   * Prefer other nodes for the role's pods created from now on (a preferred node anti-affinity on the pod
   * template): what the operators let one replacement pod be steered by. Written with the eviction of a
   * straggler, so that its replacement lands elsewhere when another node fits; running pods are untouched.
   */
  | { kind: 'avoid-node'; role: RoleName; node: string }
  /**
   * Prefer this node for the role's pods created from now on (a preferred node affinity on the pod template),
   * written on submit when all of a job's workers fit on one node now: the scheduler puts its pods there while
   * the node has room, else wherever they fit.
   */
  | { kind: 'prefer-node'; role: RoleName; node: string }
  | { kind: 'pause'; reason: string }
  /**
   * A torchelastic rendezvous setting of an elastic PyTorchJob, set only where the user allows it
   * (trainscaler.io/tune-rendezvous): `last_call_timeout` in elasticPolicy.rdzvConf, or PET_MONITOR_INTERVAL
   * in the Worker's training container env.
   */
  | { kind: 'rendezvous'; setting: 'last_call_timeout' | 'PET_MONITOR_INTERVAL'; value: string };

/** A policy's answer: what to change and why, in words a person can read. Empty changes = leave the job alone. */
export interface Plan {
  ref: JobRef;
  policy: PolicyName;
  changes: Change[];
  /** One line of at most 120 characters: what changed (or why nothing) and the one number that justified it. */
  reason: string;
  /**
   * What the one-line reason leaves out (advice, pauses, priors, the rest of the arithmetic), one item per
   * point: shown by `explain --verbose`, kept in the decision record, logged once per job; never in an Event.
   */
  details?: string[];
}
