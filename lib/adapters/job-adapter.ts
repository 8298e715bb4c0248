import type { JsonPatchOp, KubeObject } from '../cluster/cluster-client.js';
import { UnsupportedChangeError, UnsupportedJobKindError, ValidationError } from '../errors.js';
import { ELASTIC_JOB_ANNOTATION, QUEUE_NAME_LABEL } from '../kueue/kueue-objects.js';
import { DEFAULT_MANAGEMENT_SCOPE, type ManagementScope, managementOf } from '../management.js';
import { launchSettingsOf } from '../torchelastic/launch-settings.js';
import type {
  Change,
  JobKind,
  JobRef,
  JobView,
  RefusableChange,
  Resources,
  RoleName,
  RoleView,
  TorchElasticView,
} from '../types.js';
import { ANNOTATION, jsonPointer } from './annotations.js';
import { cpuToMillis, formatCpuMillis, formatMemoryBytes, parseQuantity } from './quantity.js';
import { getArray, getNumber, getObject, getPath, getString, isObject } from './unstructured.js';

type Path = readonly (string | number)[];

/** Where one replica role lives inside a job object. */
interface RoleLocation {
  role: RoleName;
  replicasPath: Path;
  /** Written with the same value as replicasPath: an elastic indexed Job's completions track its parallelism. */
  tandemPaths?: readonly Path[];
  /** Pods per unit of replicasPath: a JobSet's replicated job runs `replicas` child Jobs of `parallelism` pods. */
  groups?: number;
  /** Path of the pod template's `spec`. */
  podSpecPath: Path;
  /** Where the node's resources live when the kind has no pod template (a TrainJob's resourcesPerNode). */
  resourcesPath?: Path;
  defaultReplicas: number;
}

/** Why the kind's own API refuses a change, and at which field; undefined when it allows it. */
interface Refusal {
  field: string;
  why: string;
}

interface KindShape {
  kind: JobKind;
  apiVersion: string;
  /** The training container's conventional name (the frameworks require it). */
  defaultContainer: string | undefined;
  roles(obj: KubeObject): RoleLocation[];
  elastic(obj: KubeObject): boolean;
  /** Bounds a role may be scaled within, before annotations are applied. */
  bounds(obj: KubeObject, role: RoleName, replicas: number): { min: number; max: number };
  priorityClassName(obj: KubeObject): string | undefined;
  podSelector(obj: KubeObject): string;
  /** The kind's API rules for a change, read from its validation (CRD CEL, webhooks, the API server's own). */
  refuses?(obj: KubeObject, change: Change, loc: RoleLocation | undefined): Refusal | undefined;
  /** The training image, where the kind does not keep it in a pod template. */
  image?(obj: KubeObject): string | undefined;
  /**
   * Objects whose controller owns them (a JobSet's child Jobs, a TrainJob's JobSet) are not trainscaler's to
   * change: their owner re-applies its own spec over them.
   */
  ownerActsForIt?: boolean;
  /** The status condition (status True) the kind's controller sets when the run succeeded; none for a StatefulSet. */
  succeededCondition?: string;
  /** The job's suspend flag, where the kind has one (Kueue keeps a job it manages suspended until admitted). */
  suspended(obj: KubeObject): boolean;
  /** The Kueue Workload pod set a role's pods are counted in (Kueue's integration for the kind names it). */
  kueuePodSet(obj: KubeObject, role: RoleName): string;
}

const ROLE_NAMES: readonly RoleName[] = ['Master', 'Chief', 'PS', 'Worker', 'Evaluator'];

function isRoleName(value: string): value is RoleName {
  return (ROLE_NAMES as readonly string[]).includes(value);
}

function replicaSpecRoles(obj: KubeObject, specsKey: string): RoleLocation[] {
  const specs = getObject(obj, ['spec', specsKey]);
  if (!specs) throw new ValidationError(`/spec/${specsKey}`, 'missing replica specs');
  return Object.keys(specs)
    .filter(isRoleName)
    .sort((a, b) => ROLE_NAMES.indexOf(a) - ROLE_NAMES.indexOf(b))
    .map((role) => ({
      role,
      replicasPath: ['spec', specsKey, role, 'replicas'],
      podSpecPath: ['spec', specsKey, role, 'template', 'spec'],
      // The training-operator defaults an absent `replicas` to 1.
      defaultReplicas: 1,
    }));
}

function annotationInt(obj: KubeObject, key: string): number | undefined {
  const raw = obj.metadata.annotations?.[key];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    throw new ValidationError(
      jsonPointer(['metadata', 'annotations', key]),
      `expected a non-negative integer, got '${raw}'`,
    );
  }
  return value;
}

function workerBoundsFromAnnotations(obj: KubeObject, role: RoleName, replicas: number) {
  if (role !== 'Worker') return { min: replicas, max: replicas };
  return {
    min: annotationInt(obj, ANNOTATION.minReplicas) ?? replicas,
    max: annotationInt(obj, ANNOTATION.maxReplicas) ?? replicas,
  };
}

const PYTORCH_JOB: KindShape = {
  succeededCondition: 'Succeeded',
  kind: 'PyTorchJob',
  apiVersion: 'kubeflow.org/v1',
  defaultContainer: 'pytorch',
  roles: (obj) => replicaSpecRoles(obj, 'pytorchReplicaSpecs'),
  elastic: (obj) => getObject(obj, ['spec', 'elasticPolicy']) !== undefined,
  bounds(obj, role, replicas) {
    if (role !== 'Worker') return { min: replicas, max: replicas };
    const policy = getObject(obj, ['spec', 'elasticPolicy']);
    if (!policy) return workerBoundsFromAnnotations(obj, role, replicas);
    return {
      min: getNumber(policy, ['minReplicas']) ?? replicas,
      max: getNumber(policy, ['maxReplicas']) ?? replicas,
    };
  },
  priorityClassName: (obj) =>
    getString(obj, ['spec', 'runPolicy', 'schedulingPolicy', 'priorityClass']) ??
    getString(obj, ['spec', 'pytorchReplicaSpecs', 'Worker', 'template', 'spec', 'priorityClassName']),
  podSelector: (obj) => `training.kubeflow.org/job-name=${obj.metadata.name}`,
  suspended: (obj) => getPath(obj, ['spec', 'runPolicy', 'suspend']) === true,
  kueuePodSet: (_obj, role) => role.toLowerCase(),
};

const TF_JOB: KindShape = {
  succeededCondition: 'Succeeded',
  kind: 'TFJob',
  apiVersion: 'kubeflow.org/v1',
  defaultContainer: 'tensorflow',
  roles: (obj) => replicaSpecRoles(obj, 'tfReplicaSpecs'),
  // TFJob workers can join a running job only when the operator is told so.
  elastic: (obj) =>
    getPath(obj, ['spec', 'enableDynamicWorker']) === true ||
    obj.metadata.annotations?.[ANNOTATION.elastic] === 'true',
  bounds(obj, role, replicas) {
    if (role === 'PS') {
      return {
        min: annotationInt(obj, 'trainscaler.io/min-ps-replicas') ?? replicas,
        max: annotationInt(obj, 'trainscaler.io/max-ps-replicas') ?? replicas,
      };
    }
    return workerBoundsFromAnnotations(obj, role, replicas);
  },
  priorityClassName: (obj) =>
    getString(obj, ['spec', 'runPolicy', 'schedulingPolicy', 'priorityClass']) ??
    getString(obj, ['spec', 'tfReplicaSpecs', 'Worker', 'template', 'spec', 'priorityClassName']),
  podSelector: (obj) => `training.kubeflow.org/job-name=${obj.metadata.name}`,
  suspended: (obj) => getPath(obj, ['spec', 'runPolicy', 'suspend']) === true,
  kueuePodSet: (_obj, role) => role.toLowerCase(),
};

const STATEFUL_SET: KindShape = {
  kind: 'StatefulSet',
  apiVersion: 'apps/v1',
  defaultContainer: undefined,
  roles: () => [
    {
      role: 'Worker',
      replicasPath: ['spec', 'replicas'],
      podSpecPath: ['spec', 'template', 'spec'],
      defaultReplicas: 1,
    },
  ],
  // A StatefulSet scales natively, but whether the training inside survives it is the user's to say.
  elastic: (obj) => obj.metadata.annotations?.[ANNOTATION.elastic] === 'true',
  bounds: workerBoundsFromAnnotations,
  priorityClassName: (obj) => getString(obj, ['spec', 'template', 'spec', 'priorityClassName']),
  podSelector(obj) {
    const labels = getObject(obj, ['spec', 'selector', 'matchLabels']);
    if (!labels || Object.keys(labels).length === 0) {
      throw new ValidationError(
        '/spec/selector/matchLabels',
        'a StatefulSet without matchLabels cannot be managed',
      );
    }
    return Object.entries(labels)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(',');
  },
  // No suspend field: Kueue gates a StatefulSet's pods and lets it scale only to or from zero.
  suspended: () => false,
  kueuePodSet: () => 'main',
};

const INDEXED = 'Indexed';

function conditionTrue(obj: KubeObject, types: readonly string[]): string | undefined {
  const conditions = getArray(obj, ['status', 'conditions']) ?? [];
  for (const c of conditions) {
    const type = getString(c, ['type']);
    if (type && types.includes(type) && getString(c, ['status']) === 'True') return type;
  }
  return undefined;
}

/**
 * A replica change of an indexed Job template (a batch/v1 Job's spec, or a JobSet replicated job's
 * template.spec): Kubernetes lets parallelism and completions change together on a running Job only when
 * completionMode is Indexed and the two stay equal (elastic indexed Jobs, GA in 1.31); JobSet's webhook with
 * the ElasticJobSet gate takes the same rule and adds >= 1.
 */
function refusesIndexedResize(
  obj: KubeObject,
  jobSpecPath: Path,
  change: Change & { kind: 'replicas' },
  groups: number,
  finished: string | undefined,
): Refusal | undefined {
  const field = jsonPointer([...jobSpecPath, 'parallelism']);
  const mode = getString(obj, [...jobSpecPath, 'completionMode']) ?? 'NonIndexed';
  if (mode !== INDEXED)
    return {
      field: jsonPointer([...jobSpecPath, 'completionMode']),
      why: `completionMode is ${mode}: only Indexed jobs change parallelism and completions together`,
    };
  if (finished) return { field, why: `the job is ${finished}; a finished job is not resized` };
  if (!Number.isInteger(change.to) || change.to < groups)
    return { field, why: `parallelism must be >= 1 (asked ${change.to / groups})` };
  if (change.to % groups !== 0)
    return {
      field,
      why: `${change.to} pods are not a multiple of the ${groups} child Jobs (replicas is immutable)`,
    };
  return undefined;
}

/** Changes that need the pod template (resources, node affinity), which a running Job and JobSet keep fixed. */
function refusesTemplateChange(kind: string, change: Change): Refusal | undefined {
  if (change.kind === 'resources')
    return {
      field: '/spec',
      why: `a running ${kind}'s pod template is immutable (resources cannot change without recreating it)`,
    };
  if (change.kind === 'avoid-node' || change.kind === 'prefer-node')
    return {
      field: '/spec',
      why: `a running ${kind}'s pod template is immutable (node affinity changes only while suspended and never started)`,
    };
  return undefined;
}

const BATCH_JOB: KindShape = {
  succeededCondition: 'Complete',
  kind: 'Job',
  apiVersion: 'batch/v1',
  defaultContainer: undefined,
  roles: () => [
    {
      role: 'Worker',
      replicasPath: ['spec', 'parallelism'],
      tandemPaths: [['spec', 'completions']],
      podSpecPath: ['spec', 'template', 'spec'],
      // The API server defaults an absent parallelism to 1.
      defaultReplicas: 1,
    },
  ],
  // Kubernetes resizes an indexed Job; whether the training inside survives it is the user's to say.
  elastic: (obj) => obj.metadata.annotations?.[ANNOTATION.elastic] === 'true',
  bounds: workerBoundsFromAnnotations,
  priorityClassName: (obj) => getString(obj, ['spec', 'template', 'spec', 'priorityClassName']),
  // Set by the Job controller on every pod it creates (ownership is still checked by owner reference).
  podSelector: (obj) => `batch.kubernetes.io/job-name=${obj.metadata.name}`,
  refuses(obj, change) {
    if (change.kind !== 'replicas') return refusesTemplateChange('Job', change);
    return refusesIndexedResize(obj, ['spec'], change, 1, conditionTrue(obj, ['Complete', 'Failed']));
  },
  ownerActsForIt: true,
  // Kueue sets kueue.x-k8s.io/stopping while it suspends a Job and restores its pod sets; until that is
  // removed the Job does not count as suspended (pkg/controller/jobs/job IsSuspended).
  suspended: (obj) =>
    getPath(obj, ['spec', 'suspend']) === true &&
    obj.metadata.annotations?.['kueue.x-k8s.io/stopping'] !== 'true',
  kueuePodSet: () => 'main',
};

const JOBSET_NAME_LABEL = 'jobset.sigs.k8s.io/jobset-name';
const REPLICATED_JOB_LABEL = 'jobset.sigs.k8s.io/replicatedjob-name';
/** Names of the replicated job that trains, by convention (Kubeflow Trainer's runtimes name it `node`). */
const WORKER_REPLICATED_JOBS = ['node', 'worker', 'workers', 'trainer'];

/** The index of the replicated job that trains: the annotation's, else a conventional name, else the only one. */
function workerReplicatedJob(obj: KubeObject): { index: number; name: string } {
  const jobs = getArray(obj, ['spec', 'replicatedJobs']);
  if (!jobs || jobs.length === 0)
    throw new ValidationError('/spec/replicatedJobs', 'missing replicated jobs');
  const names = jobs.map((j) => getString(j, ['name']) ?? '');
  const wanted = obj.metadata.annotations?.[ANNOTATION.replicatedJob];
  let index = wanted === undefined ? -1 : names.indexOf(wanted);
  if (wanted !== undefined && index < 0)
    throw new ValidationError(
      jsonPointer(['metadata', 'annotations', ANNOTATION.replicatedJob]),
      `no replicated job named '${wanted}' (have: ${names.join(', ')})`,
    );
  if (index < 0) index = names.findIndex((n) => WORKER_REPLICATED_JOBS.includes(n));
  if (index < 0 && names.length === 1) index = 0;
  const name = names[index];
  if (index < 0 || !name)
    throw new ValidationError(
      '/spec/replicatedJobs',
      `which replicated job trains is ambiguous (${names.join(', ')}): set the annotation ${ANNOTATION.replicatedJob}`,
    );
  return { index, name };
}

const JOB_SET: KindShape = {
  succeededCondition: 'Completed',
  kind: 'JobSet',
  apiVersion: 'jobset.x-k8s.io/v1alpha2',
  defaultContainer: undefined,
  roles(obj) {
    const { index } = workerReplicatedJob(obj);
    const base: Path = ['spec', 'replicatedJobs', index];
    const groups = getNumber(obj, [...base, 'replicas']) ?? 1;
    if (!Number.isInteger(groups) || groups < 1)
      throw new ValidationError(jsonPointer([...base, 'replicas']), 'expected a positive integer');
    return [
      {
        role: 'Worker',
        replicasPath: [...base, 'template', 'spec', 'parallelism'],
        tandemPaths: [[...base, 'template', 'spec', 'completions']],
        groups,
        podSpecPath: [...base, 'template', 'spec', 'template', 'spec'],
        defaultReplicas: 1,
      },
    ];
  },
  elastic: (obj) => obj.metadata.annotations?.[ANNOTATION.elastic] === 'true',
  bounds: workerBoundsFromAnnotations,
  priorityClassName: (obj) =>
    getString(obj, [
      'spec',
      'replicatedJobs',
      workerReplicatedJob(obj).index,
      'template',
      'spec',
      'template',
      'spec',
      'priorityClassName',
    ]),
  podSelector: (obj) =>
    `${JOBSET_NAME_LABEL}=${obj.metadata.name},${REPLICATED_JOB_LABEL}=${workerReplicatedJob(obj).name}`,
  refuses(obj, change, loc) {
    if (change.kind !== 'replicas') return refusesTemplateChange('JobSet', change);
    const { index } = workerReplicatedJob(obj);
    return refusesIndexedResize(
      obj,
      ['spec', 'replicatedJobs', index, 'template', 'spec'],
      change,
      loc?.groups ?? 1,
      conditionTrue(obj, ['Completed', 'Failed']),
    );
  },
  ownerActsForIt: true,
  suspended: (obj) => getPath(obj, ['spec', 'suspend']) === true,
  // Kueue's JobSet integration: one pod set per replicated job, named after it (lower-cased).
  kueuePodSet: (obj) => workerReplicatedJob(obj).name.toLowerCase(),
};

/**
 * Kubeflow Trainer v2.3 TrainJob. Its size and resources are `spec.trainer` (numNodes, resourcesPerNode), which
 * the CRD makes immutable as a whole (CEL `self == oldSelf`, suspended or not); `runtimePatches`, writable only
 * while suspended, carry metadata, scheduling and env fields but no size or resources; and Trainer re-applies
 * its JobSet (server-side apply, force) whenever the TrainJob is or was suspended, so a change to the child
 * is undone on the next suspend/resume. trainscaler therefore reads TrainJobs (their size, GPUs and pods
 * count in every decision about the cluster) and changes none.
 */
const TRAIN_JOB: KindShape = {
  succeededCondition: 'Complete',
  kind: 'TrainJob',
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  defaultContainer: 'node',
  roles(obj) {
    if (getNumber(obj, ['spec', 'trainer', 'numNodes']) === undefined)
      throw new ValidationError(
        '/spec/trainer/numNodes',
        'not set: the size then comes from the training runtime, which trainscaler does not read',
      );
    return [
      {
        role: 'Worker',
        replicasPath: ['spec', 'trainer', 'numNodes'],
        podSpecPath: [],
        resourcesPath: ['spec', 'trainer', 'resourcesPerNode'],
        defaultReplicas: 1,
      },
    ];
  },
  elastic: () => false,
  bounds: (_obj, _role, replicas) => ({ min: replicas, max: replicas }),
  priorityClassName: () => undefined,
  // Trainer names the JobSet after the TrainJob; its torch runtimes train in the replicated job `node`.
  podSelector: (obj) => `${JOBSET_NAME_LABEL}=${obj.metadata.name},${REPLICATED_JOB_LABEL}=node`,
  refuses(_obj, change) {
    const field = change.kind === 'replicas' ? '/spec/trainer/numNodes' : '/spec/trainer';
    return {
      field,
      why:
        'Kubeflow Trainer v2.3 makes spec.trainer immutable (CEL self == oldSelf, even while suspended) and ' +
        'runtimePatches carry no size or resources; trainscaler reads TrainJobs and changes none',
    };
  },
  image: (obj) => getString(obj, ['spec', 'trainer', 'image']),
  suspended: (obj) => getPath(obj, ['spec', 'suspend']) === true,
  kueuePodSet: () => 'node',
};

const SHAPES: Record<JobKind, KindShape> = {
  PyTorchJob: PYTORCH_JOB,
  TFJob: TF_JOB,
  StatefulSet: STATEFUL_SET,
  Job: BATCH_JOB,
  JobSet: JOB_SET,
  TrainJob: TRAIN_JOB,
};

export const SUPPORTED_KINDS: readonly JobKind[] = [
  'PyTorchJob',
  'TFJob',
  'StatefulSet',
  'Job',
  'JobSet',
  'TrainJob',
];

export function isSupportedKind(kind: string): kind is JobKind {
  return (SUPPORTED_KINDS as readonly string[]).includes(kind);
}

function shapeFor(kind: string): KindShape {
  if (!isSupportedKind(kind)) throw new UnsupportedJobKindError(kind);
  return SHAPES[kind];
}

export function apiVersionOf(kind: JobKind): string {
  return SHAPES[kind].apiVersion;
}

/**
 * Whether the job's controller reports the run succeeded, by the condition its kind uses: `Succeeded`
 * (training-operator), `Complete` (batch/v1 Job, Trainer's TrainJob), `Completed` (JobSet). A StatefulSet
 * never finishes; an unknown kind has not succeeded.
 */
export function hasSucceeded(obj: { kind?: string; status?: unknown }): boolean {
  return successCondition(obj) !== undefined;
}

/** The job's success condition (see hasSucceeded), when it is True: its lastTransitionTime dates the success. */
export function successCondition(obj: {
  kind?: string;
  status?: unknown;
}): Record<string, unknown> | undefined {
  const kind = obj.kind ?? '';
  const type = isSupportedKind(kind) ? SHAPES[kind].succeededCondition : undefined;
  if (!type) return undefined;
  const conditions = getArray(obj, ['status', 'conditions']) ?? [];
  return conditions.filter(isObject).find((c) => c.type === type && c.status === 'True');
}

/**
 * Whether another object controls this job and re-applies its spec over it (a JobSet's child Jobs, a
 * TrainJob's JobSet, a CronJob's Jobs): such a job is never trainscaler's, its owner is.
 */
export function controlledByItsOwner(obj: {
  kind?: string;
  metadata?: { ownerReferences?: ReadonlyArray<{ controller?: boolean }> };
}): boolean {
  const kind = obj.kind ?? '';
  if (!isSupportedKind(kind) || !SHAPES[kind].ownerActsForIt) return false;
  return (obj.metadata?.ownerReferences ?? []).some((o) => o.controller === true);
}

/** `pointer`: where the resources block (its `requests` and `limits`) lives, for the field an error names. */
function readResources(container: unknown, field: 'requests' | 'limits', pointer: string): Resources {
  const block = getObject(container, ['resources', field]) ?? {};
  const read = (key: string, parse: (v: string | number) => number) => {
    const raw = block[key];
    if (raw === undefined || raw === null) return 0;
    if (typeof raw !== 'string' && typeof raw !== 'number') {
      throw new ValidationError(`${pointer}/${field}/${key}`, 'expected a quantity');
    }
    try {
      return parse(raw);
    } catch (error) {
      throw new ValidationError(`${pointer}/${field}/${key}`, (error as Error).message);
    }
  };
  return {
    cpuMillis: read('cpu', cpuToMillis),
    memoryBytes: read('memory', parseQuantity),
    gpus: read('nvidia.com/gpu', parseQuantity),
  };
}

function findContainer(obj: KubeObject, loc: RoleLocation, preferred: string | undefined) {
  const pointer = jsonPointer([...loc.podSpecPath, 'containers']);
  const containers = getArray(obj, [...loc.podSpecPath, 'containers']);
  if (!containers || containers.length === 0)
    throw new ValidationError(pointer, 'the pod template has no containers');
  const wanted = obj.metadata.annotations?.[ANNOTATION.container] ?? preferred;
  let index = wanted === undefined ? 0 : containers.findIndex((c) => isObject(c) && c.name === wanted);
  if (index < 0) index = 0;
  const container = containers[index];
  const name = getString(container, ['name']);
  if (!name) throw new ValidationError(`${pointer}/${index}/name`, 'container has no name');
  return { index, name, container, pointer: `${pointer}/${index}` };
}

const MONITOR_ENV = 'PET_MONITOR_INTERVAL';

/** The torchelastic facts of an elastic PyTorchJob; undefined for anything else. */
export function torchElasticOf(obj: KubeObject): TorchElasticView | undefined {
  if (obj.kind !== 'PyTorchJob') return undefined;
  const policy = getObject(obj, ['spec', 'elasticPolicy']);
  if (!policy) return undefined;
  const backend = getString(policy, ['rdzvBackend']);
  const rdzvConf: Record<string, string> = {};
  for (const entry of getArray(policy, ['rdzvConf']) ?? []) {
    const key = getString(entry, ['key']);
    const value = getString(entry, ['value']);
    if (key !== undefined && value !== undefined) rdzvConf[key] = value;
  }
  const view: TorchElasticView = {
    c10dStore: backend === undefined || backend === 'c10d',
    rdzvConf,
    tuneRendezvous: obj.metadata.annotations?.[ANNOTATION.tuneRendezvous] === 'true',
    trainscalerLauncher: false,
  };
  const worker = replicaSpecRoles(obj, 'pytorchReplicaSpecs').find((l) => l.role === 'Worker');
  let argv: string[] = [];
  let envValue = (_name: string): string | undefined => undefined;
  if (worker) {
    const { container } = findContainer(obj, worker, PYTORCH_JOB.defaultContainer);
    const envs = getArray(container, ['env']) ?? [];
    envValue = (name) =>
      getString(
        envs.find((e) => getString(e, ['name']) === name),
        ['value'],
      );
    const value = envValue(MONITOR_ENV);
    if (value !== undefined) view.monitorInterval = value;
    argv = [...(getArray(container, ['command']) ?? []), ...(getArray(container, ['args']) ?? [])].filter(
      (a): a is string => typeof a === 'string',
    );
    const env: Record<string, string> = {};
    for (const e of envs) {
      const name = getString(e, ['name']);
      const value = getString(e, ['value']);
      if (name !== undefined && value !== undefined) env[name] = value;
    }
    view.launch = launchSettingsOf({
      command: getArray(container, ['command']) ?? [],
      args: getArray(container, ['args']) ?? [],
      env,
      rdzvConf,
    });
    // One reading of the command for both: the advice and the rescale cost never disagree on the launcher.
    view.trainscalerLauncher = view.launch.launcher === 'trainscaler';
  }
  const budget = effectiveMaxRestarts(getNumber(policy, ['maxRestarts']), envValue(MAX_RESTARTS_ENV), argv);
  view.maxRestarts = budget.value;
  view.maxRestartsFrom = budget.from;
  return view;
}

const MAX_RESTARTS_ENV = 'PET_MAX_RESTARTS';
/** torchrun's own default for --max_restarts (torch 1.13 torch/distributed/run.py), used when nothing sets it. */
const TORCHRUN_DEFAULT_MAX_RESTARTS = 0;

/**
 * The restarts torchrun really allows: elasticPolicy.maxRestarts (the operator passes it as PET_MAX_RESTARTS
 * only when set), else PET_MAX_RESTARTS in the container's env, else --max_restarts / --max-restarts in its
 * command, else torchrun's default of 0. Unset does not mean unlimited: with 0 the first scale-down (a lost
 * member) fails the job.
 */
function effectiveMaxRestarts(
  fromPolicy: number | undefined,
  fromEnv: string | undefined,
  argv: readonly string[],
): { value: number; from: NonNullable<TorchElasticView['maxRestartsFrom']> } {
  if (fromPolicy !== undefined) return { value: fromPolicy, from: 'elasticPolicy' };
  const env = fromEnv === undefined ? Number.NaN : Number(fromEnv);
  if (Number.isInteger(env) && env >= 0) return { value: env, from: 'env' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const match = /^--max[_-]restarts(?:=(\d+))?$/.exec(arg);
    if (!match) continue;
    const value = Number(match[1] ?? argv[i + 1]);
    if (Number.isInteger(value) && value >= 0) return { value, from: 'command' };
  }
  return { value: TORCHRUN_DEFAULT_MAX_RESTARTS, from: 'torchrun default' };
}

function toEpochSeconds(value: string | Date | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
}

/**
 * What the kind refuses whatever the value, asked of its own rules (shape.refuses) with a change that keeps the
 * live value: the same answer buildJobPatch would give, so the two cannot disagree.
 */
function refusalsOf(
  obj: KubeObject,
  shape: KindShape,
  roles: readonly RoleView[],
): Partial<Record<RefusableChange, string>> {
  const refusals: Partial<Record<RefusableChange, string>> = {};
  const worker = roles.find((r) => r.role === 'Worker') ?? roles[0];
  if (!shape.refuses || !worker) return refusals;
  const loc = shape.roles(obj).find((l) => l.role === worker.role);
  const probes: Record<RefusableChange, Change> = {
    replicas: { kind: 'replicas', role: worker.role, from: worker.replicas, to: worker.replicas },
    resources: {
      kind: 'resources',
      role: worker.role,
      resource: 'memory',
      field: 'limits',
      from: worker.limits.memoryBytes,
      to: worker.limits.memoryBytes,
    },
    'avoid-node': { kind: 'avoid-node', role: worker.role, node: '' },
    'prefer-node': { kind: 'prefer-node', role: worker.role, node: '' },
    'evict-pod': { kind: 'evict-pod', pod: '' },
    pause: { kind: 'pause', reason: '' },
    rendezvous: { kind: 'rendezvous', setting: 'last_call_timeout', value: '' },
  };
  for (const [kind, change] of Object.entries(probes) as [RefusableChange, Change][]) {
    // A count of 0 is refused for its value (parallelism >= 1), not for what it is: not a refusal of the kind.
    if (kind === 'replicas' && worker.replicas < (worker.replicaMultiple ?? 1)) continue;
    const refusal = shape.refuses(obj, change, loc);
    if (refusal) refusals[kind] = new UnsupportedChangeError(shape.kind, refusal.field, refusal.why).message;
  }
  return refusals;
}

/**
 * Reads any supported job into the one view the policies understand. Throws ValidationError on malformed jobs.
 * `scope` decides whether the job is managed (opt-in, lib/management.ts).
 */
export function readJob(obj: KubeObject, scope: ManagementScope = DEFAULT_MANAGEMENT_SCOPE): JobView {
  const shape = shapeFor(obj.kind);
  const annotations = obj.metadata.annotations ?? {};
  const roles: RoleView[] = shape.roles(obj).map((loc) => {
    const replicasRaw = getPath(obj, loc.replicasPath);
    const perGroup = replicasRaw === undefined ? loc.defaultReplicas : replicasRaw;
    if (typeof perGroup !== 'number' || !Number.isInteger(perGroup) || perGroup < 0) {
      throw new ValidationError(jsonPointer(loc.replicasPath), 'expected a non-negative integer');
    }
    const replicas = perGroup * (loc.groups ?? 1);
    const { index, name, container, pointer } = loc.resourcesPath
      ? {
          index: 0,
          name: shape.defaultContainer ?? 'node',
          container: { resources: getPath(obj, loc.resourcesPath) },
          pointer: jsonPointer(loc.resourcesPath),
        }
      : findContainer(obj, loc, shape.defaultContainer);
    const resourcesPointer = loc.resourcesPath ? pointer : `${pointer}/resources`;
    const bounds = shape.bounds(obj, loc.role, replicas);
    return {
      role: loc.role,
      replicas,
      minReplicas: Math.min(bounds.min, bounds.max),
      maxReplicas: bounds.max,
      containerName: name,
      containerIndex: index,
      requests: readResources(container, 'requests', resourcesPointer),
      limits: readResources(container, 'limits', resourcesPointer),
      ...((loc.groups ?? 1) > 1 ? { replicaMultiple: loc.groups } : {}),
    };
  });
  const image = shape.image
    ? shape.image(obj)
    : roles.length > 0
      ? getString(obj, [...workerPodSpecPath(obj, shape), 'containers', 0, 'image'])
      : undefined;
  const view: JobView = {
    ref: { kind: shape.kind, namespace: obj.metadata.namespace ?? 'default', name: obj.metadata.name },
    uid: obj.metadata.uid ?? '',
    resourceVersion: obj.metadata.resourceVersion ?? '',
    priority: 0,
    elastic: shape.elastic(obj),
    signature: annotations[ANNOTATION.signature] ?? `${shape.kind}:${image ?? obj.metadata.name}`,
    roles,
    managed: false,
    // trainscaler's state is not the job's to hold (its owner can edit the job): loadSnapshot reads it from the
    // job's ScaledTrainingJob (lib/cluster/job-state.ts). A view read from the job alone starts fresh.
    state: { oomCount: 0, paused: false },
  };
  const refusals = refusalsOf(obj, shape, roles);
  if (Object.keys(refusals).length > 0) view.refusals = refusals;
  // A count its API will not change (a NonIndexed or finished Job) is fixed, whatever the annotation says.
  if (refusals.replicas) view.elastic = false;
  const management = managementOf({ ...obj.metadata, namespace: view.ref.namespace }, scope);
  view.managed = management.managed;
  if (!management.managed) view.unmanagedReason = management.why;
  const controller = obj.metadata.ownerReferences?.find((o) => o.controller === true);
  if (shape.ownerActsForIt && controller && view.managed) {
    view.managed = false;
    view.unmanagedReason = `controlled by ${controller.kind} ${controller.name}, which re-applies its own spec over it (manage the ${controller.kind})`;
  }
  const queueName = obj.metadata.labels?.[QUEUE_NAME_LABEL];
  if (queueName) view.kueue = `label ${QUEUE_NAME_LABEL}=${queueName}`;
  const priorityClassName = shape.priorityClassName(obj);
  if (priorityClassName) view.priorityClassName = priorityClassName;
  const local = annotationInt(obj, ANNOTATION.localBatchSize);
  if (local) view.localBatchSize = local;
  const global = annotationInt(obj, ANNOTATION.globalBatchSize);
  if (global) view.globalBatchSize = global;
  const target = annotationInt(obj, ANNOTATION.targetSamples);
  if (target) view.targetSamples = target;
  const created = toEpochSeconds(obj.metadata.creationTimestamp);
  if (created !== undefined) view.creationTimestamp = created;
  const torchElastic = torchElasticOf(obj);
  if (torchElastic) view.torchElastic = torchElastic;
  return view;
}

function workerPodSpecPath(obj: KubeObject, shape: KindShape): Path {
  const locs = shape.roles(obj);
  return (locs.find((l) => l.role === 'Worker') ?? locs[0])?.podSpecPath ?? [];
}

const COMPLETION_INDEX_LABEL = 'batch.kubernetes.io/job-completion-index';

/**
 * A JobSet pod's index as the guardrails need it, when its replicated job runs several child Jobs: each child
 * Job drops its highest completion indices on a shrink, so a shrink to `to` pods (to / groups per Job) starts
 * no placed pod anew exactly when every placed pod's completion index c is below to / groups, i.e. when `to`
 * >= groups * (c + 1): the value returned is that bound minus one (placedReplicasOf takes index + 1). Undefined
 * for every other kind and for a single child Job, where the completion index is the pod's index already.
 */
export function guardrailPodIndex(
  obj: KubeObject,
  labels: Record<string, string> | undefined,
): number | undefined {
  if (obj.kind !== 'JobSet') return undefined;
  const groups = JOB_SET.roles(obj)[0]?.groups ?? 1;
  const completion = Number(labels?.[COMPLETION_INDEX_LABEL]);
  if (groups === 1 || !Number.isInteger(completion)) return undefined;
  return groups * (completion + 1) - 1;
}

export function podSelectorFor(obj: KubeObject): string {
  return shapeFor(obj.kind).podSelector(obj);
}

export function roleOf(view: JobView, role: RoleName): RoleView | undefined {
  return view.roles.find((r) => r.role === role);
}

/**
 * The minimal JSON Patch for a set of changes: only the decided fields, parents created only when absent,
 * never a whole container list. The first op pins metadata.resourceVersion to the version the plan was made
 * on, so the API server rejects the patch with 409 if anyone wrote in between.
 */
export function buildJobPatch(
  obj: KubeObject,
  changes: readonly Change[],
  annotations: Record<string, string>,
): JsonPatchOp[] {
  const shape = shapeFor(obj.kind);
  const locations = new Map(shape.roles(obj).map((l) => [l.role, l]));
  const ops: JsonPatchOp[] = [];
  if (obj.metadata.resourceVersion) {
    ops.push({ op: 'replace', path: '/metadata/resourceVersion', value: obj.metadata.resourceVersion });
  }
  const created = new Set<string>();
  const ensureObject = (path: Path) => {
    const pointer = jsonPointer(path);
    if (getPath(obj, path) !== undefined || created.has(pointer)) return;
    ops.push({ op: 'add', path: pointer, value: {} });
    created.add(pointer);
  };
  // Every change is checked against the kind's API before the first op is built: one it forbids fails the
  // whole plan, so nothing of it is written.
  for (const change of changes) {
    const loc = 'role' in change ? locations.get(change.role) : undefined;
    const refusal = shape.refuses?.(obj, change, loc);
    if (refusal) throw new UnsupportedChangeError(shape.kind, refusal.field, refusal.why);
  }
  for (const change of changes) {
    if (change.kind === 'replicas') {
      const loc = locations.get(change.role);
      if (!loc) throw new ValidationError(`/spec`, `job has no ${change.role} role`);
      const value = change.to / (loc.groups ?? 1);
      for (const path of [loc.replicasPath, ...(loc.tandemPaths ?? [])]) {
        const op = getPath(obj, path) === undefined ? 'add' : 'replace';
        ops.push({ op, path: jsonPointer(path), value });
      }
    } else if (change.kind === 'resources') {
      const loc = locations.get(change.role);
      if (!loc) throw new ValidationError(`/spec`, `job has no ${change.role} role`);
      const { index } = findContainer(obj, loc, shape.defaultContainer);
      const resourcesPath = [...loc.podSpecPath, 'containers', index, 'resources'];
      ensureObject(resourcesPath);
      ensureObject([...resourcesPath, change.field]);
      const value = change.resource === 'cpu' ? formatCpuMillis(change.to) : formatMemoryBytes(change.to);
      ops.push({ op: 'add', path: jsonPointer([...resourcesPath, change.field, change.resource]), value });
    } else if (change.kind === 'rendezvous') {
      ops.push(...rendezvousOps(obj, change, locations.get('Worker'), shape.defaultContainer, ensureObject));
    } else if (change.kind === 'avoid-node') {
      const loc = locations.get(change.role);
      if (!loc) throw new ValidationError(`/spec`, `job has no ${change.role} role`);
      ops.push(...avoidNodeOps(obj, loc.podSpecPath, change.node, ensureObject));
    } else if (change.kind === 'prefer-node') {
      const loc = locations.get(change.role);
      if (!loc) throw new ValidationError(`/spec`, `job has no ${change.role} role`);
      ops.push(...preferNodeOps(obj, loc.podSpecPath, change.node, ensureObject));
    }
  }
  if (Object.keys(annotations).length > 0) {
    if (!obj.metadata.annotations) {
      ops.push({ op: 'add', path: '/metadata/annotations', value: annotations });
    } else {
      for (const [key, value] of Object.entries(annotations)) {
        ops.push({ op: 'add', path: jsonPointer(['metadata', 'annotations', key]), value });
      }
    }
  }
  return ops;
}

/**
 * One rendezvous setting: an rdzvConf entry {key, value} (training-operator v1.9.3's CRD) or an env var of the
 * Worker's training container; the value replaced in place when the key is there, appended otherwise.
 */
function rendezvousOps(
  obj: KubeObject,
  change: Change & { kind: 'rendezvous' },
  worker: RoleLocation | undefined,
  defaultContainer: string | undefined,
  ensureObject: (path: Path) => void,
): JsonPatchOp[] {
  if (obj.kind !== 'PyTorchJob' || !getObject(obj, ['spec', 'elasticPolicy']))
    throw new ValidationError('/spec/elasticPolicy', 'rendezvous settings need an elastic PyTorchJob');
  let listPath: Path;
  let entry: Record<string, string>;
  let keyField: string;
  if (change.setting === 'last_call_timeout') {
    listPath = ['spec', 'elasticPolicy', 'rdzvConf'];
    entry = { key: change.setting, value: change.value };
    keyField = 'key';
  } else {
    if (!worker) throw new ValidationError('/spec', 'job has no Worker role');
    const { index } = findContainer(obj, worker, defaultContainer);
    listPath = [...worker.podSpecPath, 'containers', index, 'env'];
    entry = { name: change.setting, value: change.value };
    keyField = 'name';
  }
  const list = getArray(obj, listPath);
  if (list === undefined) {
    ensureObject(listPath.slice(0, -1));
    return [{ op: 'add', path: jsonPointer(listPath), value: [entry] }];
  }
  const at = list.findIndex((e) => getString(e, [keyField]) === change.setting);
  if (at < 0) return [{ op: 'add', path: jsonPointer([...listPath, '-']), value: entry }];
  return [{ op: 'replace', path: jsonPointer([...listPath, at, 'value']), value: change.value }];
}

/** At most this many nodes are avoided by trainscaler's terms; a new one replaces the oldest. */
const MAX_AVOIDED_NODES = 3;
/** trainscaler's node terms, told apart from the user's by weight and operator. */
const AVOID_TERM = { weight: 100, operator: 'NotIn' } as const;
/** Below the avoidance's weight, so a node avoided for straggling stays avoided. */
const PREFER_TERM = { weight: 50, operator: 'In' } as const;
type NodeTermShape = typeof AVOID_TERM | typeof PREFER_TERM;

function nodeTerm(shape: NodeTermShape, node: string) {
  return {
    weight: shape.weight,
    preference: { matchFields: [{ key: 'metadata.name', operator: shape.operator, values: [node] }] },
  };
}

/** The node a term of this shape names (as nodeTerm writes it); undefined for any other term. */
function nodeOfTerm(term: unknown, shape: NodeTermShape): string | undefined {
  const fields = getArray(term, ['preference', 'matchFields']);
  if (getNumber(term, ['weight']) !== shape.weight || fields?.length !== 1) return undefined;
  const [field] = fields;
  const values = getArray(field, ['values']);
  if (getString(field, ['key']) !== 'metadata.name' || getString(field, ['operator']) !== shape.operator)
    return undefined;
  return values?.length === 1 && typeof values[0] === 'string' ? values[0] : undefined;
}

/**
 * The pod template's preferred node affinity terms, and where they live. When there are none yet, the
 * parents are created and `initial` is the patch that adds the first term.
 */
function preferredTermsAt(
  obj: KubeObject,
  podSpecPath: Path,
  term: object,
  ensureObject: (path: Path) => void,
): { listPath: Path; existing: unknown[] } | { initial: JsonPatchOp[] } {
  const listPath = [
    ...podSpecPath,
    'affinity',
    'nodeAffinity',
    'preferredDuringSchedulingIgnoredDuringExecution',
  ];
  const existing = getArray(obj, listPath);
  if (existing !== undefined) return { listPath, existing };
  ensureObject([...podSpecPath, 'affinity']);
  ensureObject([...podSpecPath, 'affinity', 'nodeAffinity']);
  return { initial: [{ op: 'add', path: jsonPointer(listPath), value: [term] }] };
}

/**
 * A preferred (soft) node anti-affinity term `metadata.name NotIn [node]`, appended to the pod template's
 * preferred node affinity: the scheduler picks another node when one fits, the same node otherwise. Nothing
 * when the template already avoids that node; the oldest of trainscaler's terms is replaced beyond
 * MAX_AVOIDED_NODES, so the list stays bounded. The user's own terms are never touched.
 */
function avoidNodeOps(
  obj: KubeObject,
  podSpecPath: Path,
  node: string,
  ensureObject: (path: Path) => void,
): JsonPatchOp[] {
  const term = nodeTerm(AVOID_TERM, node);
  const terms = preferredTermsAt(obj, podSpecPath, term, ensureObject);
  if ('initial' in terms) return terms.initial;
  const { listPath, existing } = terms;
  const ours = existing
    .map((t, index) => ({ index, avoided: nodeOfTerm(t, AVOID_TERM) }))
    .filter((t): t is { index: number; avoided: string } => t.avoided !== undefined);
  if (ours.some((t) => t.avoided === node)) return [];
  const oldest = ours[0];
  if (ours.length >= MAX_AVOIDED_NODES && oldest !== undefined)
    return [{ op: 'replace', path: jsonPointer([...listPath, oldest.index]), value: term }];
  return [{ op: 'add', path: jsonPointer([...listPath, '-']), value: term }];
}

/**
 * A preferred (soft) node affinity term `metadata.name In [node]`, appended to the pod template's preferred
 * node affinity: the scheduler puts the role's new pods on that node while it has room, elsewhere otherwise.
 * One such term at most: a later one replaces trainscaler's earlier preference (the user's terms stay).
 */
function preferNodeOps(
  obj: KubeObject,
  podSpecPath: Path,
  node: string,
  ensureObject: (path: Path) => void,
): JsonPatchOp[] {
  const term = nodeTerm(PREFER_TERM, node);
  const terms = preferredTermsAt(obj, podSpecPath, term, ensureObject);
  if ('initial' in terms) return terms.initial;
  const { listPath, existing } = terms;
  const ours = existing.findIndex((t) => nodeOfTerm(t, PREFER_TERM) !== undefined);
  if (ours < 0) return [{ op: 'add', path: jsonPointer([...listPath, '-']), value: term }];
  if (nodeOfTerm(existing[ours], PREFER_TERM) === node) return [];
  return [{ op: 'replace', path: jsonPointer([...listPath, ours]), value: term }];
}

export function refOf(obj: KubeObject): JobRef {
  return {
    kind: shapeFor(obj.kind).kind,
    namespace: obj.metadata.namespace ?? 'default',
    name: obj.metadata.name,
  };
}

/** What Kueue's rules need to know of a job from the job itself (lib/kueue/kueue-guard.ts). */
export interface KueueJobFacts {
  /** The LocalQueue its `kueue.x-k8s.io/queue-name` label names, when it has one. */
  queueName?: string;
  /** A batch/v1 Job annotated `kueue.x-k8s.io/elastic-job: "true"`: Kueue resizes it through workload slices. */
  elasticSlices: boolean;
  suspended: boolean;
  podSetOf: Partial<Record<RoleName, string>>;
}

export function kueueFactsOf(obj: KubeObject): KueueJobFacts {
  const shape = shapeFor(obj.kind);
  const podSetOf: Partial<Record<RoleName, string>> = {};
  for (const loc of shape.roles(obj)) podSetOf[loc.role] = shape.kueuePodSet(obj, loc.role);
  const facts: KueueJobFacts = {
    // Kueue supports workload slices for batch/v1 Job (and Ray kinds) only; its webhook refuses the
    // annotation elsewhere (jobframework.ValidateElasticJobAnnotation).
    elasticSlices: shape.kind === 'Job' && obj.metadata.annotations?.[ELASTIC_JOB_ANNOTATION] === 'true',
    suspended: shape.suspended(obj),
    podSetOf,
  };
  const queueName = obj.metadata.labels?.[QUEUE_NAME_LABEL];
  if (queueName) facts.queueName = queueName;
  return facts;
}
