// The tenants' policy object, TrainingAutoscaler (trainscaler.io/v1alpha1, infra/k8s/crds/
// trainscaler.io_trainingautoscalers.yaml): read into a typed policy, resolved to the one that governs a job,
// and turned into the limits it sets. Pure: no API calls. The handlers apply it through lib/policy-governance.ts.
//
// The API server validates and defaults every object against the CRD (CEL included) before anyone reads it;
// the checks are repeated here because an object can still arrive without them: stored under an older CRD,
// from the simulated cluster, or from a cluster where the CRD was edited. A malformed policy is an error that
// names it, and holds the jobs it might have meant (see policyFor).
import { Ajv } from 'ajv';
import { ANNOTATION } from './adapters/annotations.js';
import { apiVersionOf, isSupportedKind, SUPPORTED_KINDS } from './adapters/job-adapter.js';
import type { PolicyConfig } from './config.js';
import { TrainscalerError, ValidationError } from './errors.js';
import { formatLabelSelector, type LabelSelector, labelSelectorMatches } from './label-selector.js';
import { type ManagementScope, managementOf } from './management.js';
import type { JobKind } from './types.js';

export const TRAINING_AUTOSCALER_RESOURCE = {
  group: 'trainscaler.io',
  version: 'v1alpha1',
  plural: 'trainingautoscalers',
  kind: 'TrainingAutoscaler',
} as const;
export const TRAINING_AUTOSCALER_API_VERSION = `${TRAINING_AUTOSCALER_RESOURCE.group}/${TRAINING_AUTOSCALER_RESOURCE.version}`;

export const POLICY_MODES = ['Off', 'Recommend', 'Auto'] as const;
/** Off: leave the jobs alone. Recommend: decide and show, never write the jobs. Auto: act within the policy. */
export type PolicyMode = (typeof POLICY_MODES)[number];

/** What trainscaler may do to the jobs a policy governs. */
export interface PolicyActions {
  /** Change the number of workers. */
  resize: boolean;
  /** Change the workers' CPU and memory (OOM answers included). */
  rightsize: boolean;
  /** Evict a slow worker so that it is recreated elsewhere. */
  replaceStragglers: boolean;
  /** Give workers up to other jobs (a queued job's share, a more urgent job). */
  yieldForRebalance: boolean;
  /** Set the recommended rendezvous settings on an elastic PyTorchJob at submit. */
  tuneRendezvous: boolean;
}

export const DEFAULT_ACTIONS: Readonly<PolicyActions> = {
  resize: true,
  rightsize: true,
  replaceStragglers: true,
  yieldForRebalance: true,
  // Changes the job's environment: opt-in, as the trainscaler.io/tune-rendezvous annotation is.
  tuneRendezvous: false,
};

/** The default mode of a policy that names none: it shows what trainscaler would do before it does it. */
export const DEFAULT_MODE: PolicyMode = 'Recommend';

export interface TrainingAutoscaler {
  namespace: string;
  name: string;
  /** metadata.generation: what status.observedGeneration reports having read. */
  generation?: number;
  /** One job; exclusive with `selector`. */
  targetRef?: { kind: JobKind; name: string; apiVersion?: string };
  /** Every supported job of the namespace whose labels match; exclusive with `targetRef`. */
  selector?: LabelSelector;
  minWorkers: number;
  /** Unset: the job's own maximum. */
  maxWorkers?: number;
  /** Unset: the operator's maxReplicaStep. */
  maxStep?: number;
  /** Unset: the operator's cooldownSeconds. */
  cooldownSeconds?: number;
  actions: PolicyActions;
  mode: PolicyMode;
}

/** A TrainingAutoscaler that does not hold together; `field` is a JSON pointer into the object. */
export class InvalidPolicyError extends ValidationError {
  readonly policy: string;
  constructor(policy: string, field: string, message: string) {
    super(field, `TrainingAutoscaler ${policy}: ${message}`);
    this.policy = policy;
  }
}

/** Two policies claim one job with equal precedence: the job is left alone until one of them is changed. */
export class PolicyConflictError extends TrainscalerError {
  readonly job: string;
  readonly policies: readonly string[];
  constructor(job: string, by: 'targetRef' | 'selector', policies: readonly string[]) {
    super(
      'CONFIG',
      `${job} is claimed by ${policies.length} TrainingAutoscalers by ${by} (${policies.join(', ')}); ` +
        'trainscaler leaves it alone until one of them no longer matches it',
    );
    this.job = job;
    this.policies = policies;
  }
}

const COUNT = { type: 'integer', minimum: 1, maximum: 100_000 } as const;
const LABEL_VALUE = { type: 'string', maxLength: 63 } as const;

/** The CRD's spec schema (without its CEL rules, checked below), with its defaults. */
const SPEC_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    targetRef: {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'name'],
      properties: {
        apiVersion: { type: 'string', maxLength: 253 },
        kind: { type: 'string', maxLength: 63 },
        name: { type: 'string', minLength: 1, maxLength: 253 },
      },
    },
    selector: {
      type: 'object',
      additionalProperties: false,
      properties: {
        matchLabels: { type: 'object', maxProperties: 64, additionalProperties: LABEL_VALUE },
        matchExpressions: {
          type: 'array',
          maxItems: 32,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['key', 'operator'],
            properties: {
              key: { type: 'string', minLength: 1, maxLength: 317 },
              operator: { enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
              values: { type: 'array', maxItems: 64, items: LABEL_VALUE, default: [] },
            },
          },
        },
      },
    },
    minWorkers: { ...COUNT, default: 1 },
    maxWorkers: COUNT,
    maxStep: { type: 'integer', maximum: 100_000 },
    cooldownSeconds: { type: 'integer', minimum: 0, maximum: 86_400 },
    actions: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: Object.fromEntries(
        Object.entries(DEFAULT_ACTIONS).map(([action, on]) => [action, { type: 'boolean', default: on }]),
      ),
    },
    mode: { enum: POLICY_MODES, default: DEFAULT_MODE },
  },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true, useDefaults: true });
const validSpec = ajv.compile(SPEC_SCHEMA);

/** For the CRD consistency test: the schema the parser holds objects to. */
export const TRAINING_AUTOSCALER_SPEC_SCHEMA = SPEC_SCHEMA;

interface RawSpec {
  targetRef?: { kind: string; name: string; apiVersion?: string };
  selector?: LabelSelector;
  minWorkers: number;
  maxWorkers?: number;
  maxStep?: number;
  cooldownSeconds?: number;
  actions: PolicyActions;
  mode: PolicyMode;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A TrainingAutoscaler as the API server returns it, read and checked: the schema (types, bounds, defaults)
 * and the CEL rules of the CRD (targetRef xor selector, minWorkers <= maxWorkers, maxStep >= 1, a supported
 * kind at its apiVersion, values only for In and NotIn). InvalidPolicyError names the first thing wrong.
 */
export function parseTrainingAutoscaler(raw: unknown): TrainingAutoscaler {
  const metadata = isRecord(raw) && isRecord(raw.metadata) ? raw.metadata : {};
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : '';
  const name = typeof metadata.name === 'string' ? metadata.name : '';
  const id = `${namespace || '?'}/${name || '?'}`;
  const fail = (field: string, message: string): never => {
    throw new InvalidPolicyError(id, field, message);
  };
  if (!namespace || !name) fail('/metadata', 'has no namespace or name');
  if (!isRecord(raw) || raw.kind !== TRAINING_AUTOSCALER_RESOURCE.kind)
    fail('/kind', `is not a ${TRAINING_AUTOSCALER_RESOURCE.kind}`);
  const specIn = isRecord(raw) ? raw.spec : undefined;
  if (!isRecord(specIn)) return fail('/spec', 'has no spec');
  // useDefaults fills the input in place: a copy, so that the caller's object is left as it was.
  const spec: unknown = structuredClone(specIn);
  if (!validSpec(spec)) {
    const error = validSpec.errors?.[0];
    const missing = error?.keyword === 'required' ? `/${String(error.params.missingProperty)}` : '';
    return fail(`/spec${error?.instancePath ?? ''}${missing}`, error?.message ?? 'does not match the schema');
  }
  const s = spec as RawSpec;
  if (s.targetRef && s.selector) fail('/spec', 'sets both targetRef and selector; set one');
  if (!s.targetRef && !s.selector) fail('/spec', 'sets neither targetRef nor selector; it applies to no job');
  if (s.maxWorkers !== undefined && s.minWorkers > s.maxWorkers)
    fail('/spec/minWorkers', `minWorkers (${s.minWorkers}) is greater than maxWorkers (${s.maxWorkers})`);
  if (s.maxStep !== undefined && s.maxStep < 1)
    fail('/spec/maxStep', `maxStep must be at least 1 worker, not ${s.maxStep}`);
  s.selector?.matchExpressions?.forEach((r, i) => {
    const needsValues = r.operator === 'In' || r.operator === 'NotIn';
    if (needsValues !== (r.values ?? []).length > 0)
      fail(
        `/spec/selector/matchExpressions/${i}`,
        `operator ${r.operator} ${needsValues ? 'needs' : 'takes no'} values`,
      );
  });
  const policy: TrainingAutoscaler = {
    namespace,
    name,
    minWorkers: s.minWorkers,
    actions: s.actions,
    mode: s.mode,
  };
  if (s.targetRef) {
    const { kind, name: jobName, apiVersion } = s.targetRef;
    if (!isSupportedKind(kind))
      return fail(
        '/spec/targetRef/kind',
        `trainscaler does not support kind ${kind} (supported: ${SUPPORTED_KINDS.join(', ')})`,
      );
    if (apiVersion !== undefined && apiVersion !== apiVersionOf(kind))
      fail('/spec/targetRef/apiVersion', `${kind} is read at ${apiVersionOf(kind)}, not ${apiVersion}`);
    policy.targetRef =
      apiVersion === undefined ? { kind, name: jobName } : { kind, name: jobName, apiVersion };
  }
  if (s.selector) policy.selector = s.selector;
  if (typeof metadata.generation === 'number') policy.generation = metadata.generation;
  if (s.maxWorkers !== undefined) policy.maxWorkers = s.maxWorkers;
  if (s.maxStep !== undefined) policy.maxStep = s.maxStep;
  if (s.cooldownSeconds !== undefined) policy.cooldownSeconds = s.cooldownSeconds;
  return policy;
}

/** Every policy of a LIST read: the valid ones, and an error for each malformed one (never thrown). */
export function parseTrainingAutoscalers(items: readonly unknown[]): {
  policies: TrainingAutoscaler[];
  invalid: InvalidPolicyError[];
} {
  const policies: TrainingAutoscaler[] = [];
  const invalid: InvalidPolicyError[] = [];
  for (const item of items) {
    try {
      policies.push(parseTrainingAutoscaler(item));
    } catch (error) {
      if (!(error instanceof InvalidPolicyError)) throw error;
      invalid.push(error);
    }
  }
  return { policies, invalid };
}

/** What the resolver needs of a job. */
export interface PolicyJob {
  kind: string;
  apiVersion?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

/** Which policy governs a job, and why; `policy` is the one to apply, absent when the job is left alone. */
export type PolicyResolution =
  | { source: 'targetRef' | 'selector'; policy: TrainingAutoscaler; why: string }
  /** No TrainingAutoscaler, but opted in by annotation, label or TRAINSCALER_NAMESPACES: the implied policy. */
  | { source: 'opt-in'; policy: TrainingAutoscaler; why: string }
  | { source: 'none'; why: string }
  | { source: 'conflict'; error: PolicyConflictError; why: string }
  | { source: 'invalid'; errors: InvalidPolicyError[]; why: string };

const IMPLIED_POLICY_NAME = '(implied by opt-in)';

/**
 * The policy of a job opted in the way it was before TrainingAutoscalers (trainscaler.io/managed, or its
 * namespace in TRAINSCALER_NAMESPACES): trainscaler acts as it always did on such a job. Mode Auto, the job's
 * own worker bounds (its elasticPolicy or trainscaler.io/min-replicas and max-replicas, read by its adapter),
 * the operator's step and cool-down, every action, and rendezvous tuning when the job's
 * trainscaler.io/tune-rendezvous annotation asks for it.
 */
export function impliedPolicy(job: PolicyJob): TrainingAutoscaler {
  return {
    namespace: job.metadata.namespace ?? 'default',
    name: IMPLIED_POLICY_NAME,
    targetRef: { kind: job.kind as JobKind, name: job.metadata.name },
    minWorkers: 1,
    actions: {
      ...DEFAULT_ACTIONS,
      tuneRendezvous: job.metadata.annotations?.[ANNOTATION.tuneRendezvous] === 'true',
    },
    mode: 'Auto',
  };
}

const idOf = (p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`;

/**
 * The policy that governs `job`. In order: a job trainscaler never manages (kube-* and its own namespaces, a
 * namespace outside TRAINSCALER_NAMESPACES when that is set, trainscaler.io/managed: "false", an unsupported
 * kind) has none, whatever policy names it; a policy of the job's namespace naming it by targetRef beats any
 * selector; one selector that matches its labels; with none, a job opted in the old way gets the implied
 * policy (impliedPolicy). Two policies of the same precedence are a conflict: the job is left alone, and the
 * error names both. A malformed policy of the namespace (`invalid`) holds every job of the namespace that no
 * valid targetRef names: which jobs it meant cannot be told, and acting on them under another policy, or the
 * implied one, could do what it forbids.
 */
export function policyFor(
  job: PolicyJob,
  policies: readonly TrainingAutoscaler[],
  scope: ManagementScope,
  invalid: readonly InvalidPolicyError[] = [],
): PolicyResolution {
  const namespace = job.metadata.namespace ?? 'default';
  const jobId = `${job.kind} ${namespace}/${job.metadata.name}`;
  if (!isSupportedKind(job.kind)) return { source: 'none', why: `kind ${job.kind} is not supported` };
  // A policy stands in for the opt-in annotation: the job is refused only where opting in would be.
  const optedOut = [
    job.metadata.annotations?.[ANNOTATION.managed],
    job.metadata.labels?.[ANNOTATION.managed],
  ];
  const asOptedIn = managementOf(
    { namespace, annotations: { [ANNOTATION.managed]: optedOut.includes('false') ? 'false' : 'true' } },
    scope,
  );
  if (!asOptedIn.managed) return { source: 'none', why: asOptedIn.why };

  const own = policies.filter((p) => p.namespace === namespace);
  const byTarget = own.filter(
    (p) =>
      p.targetRef !== undefined &&
      p.targetRef.kind === job.kind &&
      p.targetRef.name === job.metadata.name &&
      (p.targetRef.apiVersion === undefined ||
        job.apiVersion === undefined ||
        p.targetRef.apiVersion === job.apiVersion),
  );
  const [target, ...otherTargets] = byTarget;
  if (target && otherTargets.length > 0) {
    const error = new PolicyConflictError(jobId, 'targetRef', byTarget.map(idOf));
    return { source: 'conflict', error, why: error.message };
  }
  if (target)
    return { source: 'targetRef', policy: target, why: `TrainingAutoscaler ${idOf(target)} targets it` };

  const held = invalid.filter((e) => e.policy.startsWith(`${namespace}/`));
  if (held.length > 0)
    return {
      source: 'invalid',
      errors: held,
      why: `left alone: ${held.length === 1 ? 'a TrainingAutoscaler' : 'TrainingAutoscalers'} of its namespace cannot be read (${held.map((e) => e.policy).join(', ')})`,
    };

  const bySelector = own.filter(
    (p) => p.selector !== undefined && labelSelectorMatches(p.selector, job.metadata.labels),
  );
  const [selected, ...otherSelected] = bySelector;
  if (selected && otherSelected.length > 0) {
    const error = new PolicyConflictError(jobId, 'selector', bySelector.map(idOf));
    return { source: 'conflict', error, why: error.message };
  }
  if (selected?.selector)
    return {
      source: 'selector',
      policy: selected,
      why: `TrainingAutoscaler ${idOf(selected)} selects it (${formatLabelSelector(selected.selector)})`,
    };

  const optIn = managementOf({ ...job.metadata, namespace }, scope);
  if (optIn.managed) return { source: 'opt-in', policy: impliedPolicy(job), why: optIn.why };
  return { source: 'none', why: `no TrainingAutoscaler applies to it, and it is ${optIn.why}` };
}

/** What a policy lets trainscaler do to one job: the knobs the handlers take, with the policy's in force. */
export interface PolicyLimits {
  mode: PolicyMode;
  actions: PolicyActions;
  minWorkers: number;
  /** Unset: the job's own maximum. */
  maxWorkers?: number;
  /** The operator's PolicyConfig with the policy's step (maxReplicaStep) and cool-down (cooldownSeconds). */
  config: PolicyConfig;
}

/**
 * The limits a policy sets, over the operator's PolicyConfig: its maxStep and cooldownSeconds replace the
 * operator's for its jobs (as an HPA's behavior does the controller's defaults); unset, the operator's stay.
 */
export function policyLimits(policy: TrainingAutoscaler, config: PolicyConfig): PolicyLimits {
  const limits: PolicyLimits = {
    mode: policy.mode,
    actions: { ...policy.actions },
    minWorkers: policy.minWorkers,
    config: {
      ...config,
      maxReplicaStep: policy.maxStep ?? config.maxReplicaStep,
      cooldownSeconds: policy.cooldownSeconds ?? config.cooldownSeconds,
    },
  };
  if (policy.maxWorkers !== undefined) limits.maxWorkers = policy.maxWorkers;
  return limits;
}

/**
 * The worker bounds of a job under a policy: the job's own (its elasticPolicy or annotations, from its
 * adapter) narrowed by the policy's, never widened. Undefined when nothing is left (the policy's minimum above
 * the job's maximum, or its maximum below the job's minimum): the job cannot be kept within both, and
 * trainscaler should leave its size alone and say so.
 */
export function workerBoundsUnder(
  own: { min: number; max: number },
  limits: Pick<PolicyLimits, 'minWorkers' | 'maxWorkers'>,
): { min: number; max: number } | undefined {
  const min = Math.max(own.min, limits.minWorkers);
  const max = Math.min(own.max, limits.maxWorkers ?? own.max);
  return min <= max ? { min, max } : undefined;
}
