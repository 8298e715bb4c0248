// What a job's TrainingAutoscaler (lib/training-autoscaler.ts) changes in what trainscaler sees of the job and
// may write to it. Applied where the job's snapshot is built (lib/actuator.ts loadSnapshot), so that every
// handler and policy reads the job as governed: `Off` leaves it unmanaged, `Recommend` and `Auto` narrow its
// worker bounds and set its step, cool-down and allowed actions; the actuator drops what the policy does not
// allow and, under `Recommend`, records the decision in the job's ScaledTrainingJob instead of writing the job.
import { controlledByItsOwner } from './adapters/job-adapter.js';
import type { ClusterClient, KubeObject } from './cluster/cluster-client.js';
import { servedOrEmpty } from './cluster/served-lists.js';
import type { PolicyConfig } from './config.js';
import { TrainscalerError } from './errors.js';
import type { ManagementScope } from './management.js';
import {
  type PolicyActions,
  type PolicyMode,
  type PolicyResolution,
  parseTrainingAutoscalers,
  policyFor,
  policyLimits,
  type TrainingAutoscaler,
  workerBoundsUnder,
} from './training-autoscaler.js';
import type { Change, JobView, Plan } from './types.js';

/** The policy a managed job is under, and the worker bounds it leaves. */
export interface GoverningPolicy {
  policy: TrainingAutoscaler;
  /** `opt-in`: no TrainingAutoscaler; the job's annotation (or namespace) implies the policy of old. */
  source: 'targetRef' | 'selector' | 'opt-in';
  why: string;
  /** The job's own Worker bounds (its elasticPolicy or annotations), before the policy narrowed them. */
  ownWorkers?: { min: number; max: number };
  /** Absent when the job's own bounds and the policy's do not overlap: its size is then left alone. */
  workers?: { min: number; max: number };
}

/** `namespace/name` of a policy, as users write it. */
export const policyId = (p: TrainingAutoscaler) => `${p.namespace}/${p.name}`;

/**
 * The TrainingAutoscalers that may govern a job of `namespace`. A cluster without the CRD has none; any other
 * failure (a list trainscaler is not allowed) is thrown: a policy that cannot be read may say Off.
 */
async function policiesOf(cluster: ClusterClient, namespace: string) {
  const listed = await servedOrEmpty(cluster.listTrainingAutoscalers?.(namespace) ?? Promise.resolve([]));
  return parseTrainingAutoscalers(listed);
}

/** Which policy governs the job, from the TrainingAutoscalers of its namespace. */
export async function resolveJobPolicy(
  cluster: ClusterClient,
  obj: KubeObject,
  scope: ManagementScope,
): Promise<PolicyResolution> {
  const { policies, invalid } = await policiesOf(cluster, obj.metadata.namespace ?? 'default');
  return policyFor(obj, policies, scope, invalid);
}

/**
 * The view as its policy governs it (changed in place), and that policy. Off: not managed, the reason naming
 * the policy. Recommend and Auto: managed (a policy opts the job in as the annotation does, unless its
 * controller re-applies its spec), Worker bounds narrowed to the policy's, rendezvous tuning as the policy
 * allows. A conflict between policies, or a policy that cannot be read, is thrown: the job is left alone and
 * the error names the policies.
 */
export function governView(
  view: JobView,
  obj: KubeObject,
  resolution: PolicyResolution,
): GoverningPolicy | undefined {
  if (resolution.source === 'conflict') throw resolution.error;
  if (resolution.source === 'invalid')
    throw new TrainscalerError(
      'CONFIG',
      `${view.ref.kind} ${view.ref.namespace}/${view.ref.name} ${resolution.why}: ${resolution.errors.map((e) => e.message).join('; ')}`,
    );
  if (resolution.source === 'none') return undefined;
  const { policy, source, why } = resolution;
  if (source === 'opt-in') return view.managed ? { policy, source, why } : undefined;
  if (policy.mode === 'Off') {
    view.managed = false;
    view.unmanagedReason = `TrainingAutoscaler ${policyId(policy)} is in mode Off`;
    return undefined;
  }
  if (controlledByItsOwner(obj)) return undefined; // readJob said why
  view.managed = true;
  delete view.unmanagedReason;
  if (view.torchElastic) view.torchElastic.tuneRendezvous = policy.actions.tuneRendezvous;
  const governing: GoverningPolicy = { policy, source, why };
  const worker = view.roles.find((r) => r.role === 'Worker');
  if (worker) {
    governing.ownWorkers = { min: worker.minReplicas, max: worker.maxReplicas };
    const bounds = workerBoundsUnder(governing.ownWorkers, policy);
    if (bounds) {
      governing.workers = bounds;
      worker.minReplicas = bounds.min;
      worker.maxReplicas = bounds.max;
    }
  }
  return governing;
}

/** The PolicyConfig a job's decisions take: the operator's, with its policy's step and cool-down. */
export function configUnder<C extends PolicyConfig>(governing: GoverningPolicy | undefined, config: C): C {
  if (!governing || governing.source === 'opt-in') return config;
  return { ...config, ...policyLimits(governing.policy, config).config };
}

/**
 * Why the cluster-wide rebalance must move none of this job's workers, if it must not. The rebalance moves
 * workers between jobs in one plan (one job's shrink is another's growth): a move the actuator would then drop
 * for this job (Recommend writes nothing; an action not allowed; the policy's longer cool-down) would still
 * have been counted, and another job grown into room that is never freed. Held, the job keeps its size and
 * the others are planned around it.
 */
export function rebalanceHold(
  governing: GoverningPolicy | undefined,
  view: Pick<JobView, 'state'>,
  config: PolicyConfig,
  now: number,
): string | undefined {
  if (!governing || governing.source === 'opt-in') return undefined;
  const { policy } = governing;
  const name = `TrainingAutoscaler ${policyId(policy)}`;
  if (policy.mode === 'Recommend')
    return `${name} is in mode Recommend: the rebalance moves none of its workers`;
  for (const action of ['resize', 'yieldForRebalance'] as const)
    if (!policy.actions[action])
      return `${name} does not allow ${action}: the rebalance moves none of its workers`;
  const cooldown = configUnder(governing, config).cooldownSeconds;
  const since = now - (view.state.lastActionAt ?? Number.NEGATIVE_INFINITY);
  if (since < cooldown) return `cool-down of ${name} (last change ${Math.max(0, Math.round(since))} s ago)`;
  return undefined;
}

/** The action of the policy a change needs: what a TrainingAutoscaler's `actions` must allow. */
export function actionOf(change: Change, plan: Plan): keyof PolicyActions | undefined {
  switch (change.kind) {
    case 'replicas':
      return plan.policy === 'rebalance' && change.to < change.from ? 'yieldForRebalance' : 'resize';
    case 'resources':
      return 'rightsize';
    case 'evict-pod':
      return change.toResize ? 'rightsize' : 'replaceStragglers';
    case 'avoid-node':
      return 'replaceStragglers';
    case 'prefer-node':
      return 'resize';
    case 'rendezvous':
      return 'tuneRendezvous';
    // A crash-looping job's pause protects it: no policy forbids it.
    case 'pause':
      return undefined;
  }
}

/** What the policy held back of a plan: the actions it does not allow, and sizes outside its bounds. */
export interface PolicyFilter {
  plan: Plan;
  notAllowed: (keyof PolicyActions)[];
  boundsDisjoint: boolean;
}

/**
 * The plan without the changes its policy does not allow. The reason says which action the policy does not
 * allow; a worker count is also left alone when the job's own bounds and the policy's do not overlap.
 */
export function withinPolicy(plan: Plan, governing: GoverningPolicy | undefined): PolicyFilter {
  if (!governing || governing.source === 'opt-in' || plan.changes.length === 0)
    return { plan, notAllowed: [], boundsDisjoint: false };
  const { policy } = governing;
  const notAllowed = new Set<keyof PolicyActions>();
  let boundsDisjoint = false;
  const kept = plan.changes.filter((change) => {
    const action = actionOf(change, plan);
    if (action && !policy.actions[action]) {
      notAllowed.add(action);
      return false;
    }
    if (
      change.kind === 'replicas' &&
      change.role === 'Worker' &&
      governing.ownWorkers &&
      !governing.workers
    ) {
      boundsDisjoint = true;
      return false;
    }
    return true;
  });
  const notes: string[] = [];
  if (notAllowed.size > 0)
    notes.push(`TrainingAutoscaler ${policyId(policy)} does not allow ${[...notAllowed].join(', ')}`);
  if (boundsDisjoint) notes.push(disjointText(governing));
  if (notes.length === 0) return { plan, notAllowed: [], boundsDisjoint };
  return {
    plan: { ...plan, changes: kept, reason: `${plan.reason} [${notes.join('; ')}]` },
    notAllowed: [...notAllowed],
    boundsDisjoint,
  };
}

function disjointText({ policy, ownWorkers }: GoverningPolicy): string {
  const theirs = `${policy.minWorkers}-${policy.maxWorkers ?? '∞'}`;
  const own = ownWorkers ? `${ownWorkers.min}-${ownWorkers.max}` : '?';
  return `TrainingAutoscaler ${policyId(policy)} workers ${theirs} and the job's own ${own} do not overlap: its size is left alone`;
}

/** A condition of a ScaledTrainingJob's status, as the HPA's. */
export interface StatusCondition {
  type: 'Active' | 'AbleToScale' | 'ScalingLimited';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

/** What the status shows of the policy in force (`kubectl get stj`: mode, min, max). */
export interface StatusPolicy {
  name: string;
  mode: PolicyMode;
  minWorkers?: number;
  maxWorkers?: number;
}

export function statusPolicyOf(governing: GoverningPolicy): StatusPolicy {
  const out: StatusPolicy = { name: governing.policy.name, mode: governing.policy.mode };
  const bounds = governing.workers ?? (governing.source === 'opt-in' ? governing.ownWorkers : undefined);
  if (bounds) {
    out.minWorkers = bounds.min;
    out.maxWorkers = bounds.max;
  }
  return out;
}

/** Kubernetes' metav1.Time: RFC 3339 to the second. */
const timeOf = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');

/**
 * The Active, AbleToScale and ScalingLimited conditions after one decision. `wanted`: the Worker count the
 * policy decided before any bound; `previous`: the conditions found, whose transition times are kept where
 * nothing changed.
 */
export function conditionsOf(input: {
  governing: GoverningPolicy;
  filter: Pick<PolicyFilter, 'notAllowed' | 'boundsDisjoint'>;
  wanted: number | undefined;
  coolingDown: boolean;
  now: number;
  previous: unknown;
}): StatusCondition[] {
  const { governing, filter, wanted, coolingDown, now } = input;
  const { policy } = governing;
  const bounds = governing.workers ?? governing.ownWorkers;
  const conditions: Omit<StatusCondition, 'lastTransitionTime'>[] = [
    { type: 'Active', status: 'True', reason: policy.mode, message: governing.why },
  ];
  if (!policy.actions.resize)
    conditions.push({
      type: 'AbleToScale',
      status: 'False',
      reason: 'ResizeNotAllowed',
      message: `TrainingAutoscaler ${policyId(policy)} does not allow resize`,
    });
  else if (filter.boundsDisjoint || (governing.ownWorkers && !governing.workers))
    conditions.push({
      type: 'AbleToScale',
      status: 'False',
      reason: 'BoundsDisjoint',
      message: disjointText(governing),
    });
  else if (coolingDown)
    conditions.push({
      type: 'AbleToScale',
      status: 'False',
      reason: 'CoolDown',
      message: 'the cool-down since the last change has not passed',
    });
  else
    conditions.push({
      type: 'AbleToScale',
      status: 'True',
      reason: 'ReadyForNewScale',
      message: 'the workers may be changed',
    });
  if (bounds && wanted !== undefined && wanted > bounds.max)
    conditions.push({
      type: 'ScalingLimited',
      status: 'True',
      reason: 'TooManyReplicas',
      message: `the desired ${wanted} workers are more than the maximum ${bounds.max}`,
    });
  else if (bounds && wanted !== undefined && wanted < bounds.min)
    conditions.push({
      type: 'ScalingLimited',
      status: 'True',
      reason: 'TooFewReplicas',
      message: `the desired ${wanted} workers are fewer than the minimum ${bounds.min}`,
    });
  else if (filter.notAllowed.length > 0)
    conditions.push({
      type: 'ScalingLimited',
      status: 'True',
      reason: 'ActionNotAllowed',
      message: `TrainingAutoscaler ${policyId(policy)} does not allow ${filter.notAllowed.join(', ')}`,
    });
  else
    conditions.push({
      type: 'ScalingLimited',
      status: 'False',
      reason: 'DesiredWithinRange',
      message: 'the desired count is within the acceptable range',
    });
  const before = Array.isArray(input.previous) ? (input.previous as Partial<StatusCondition>[]) : [];
  return conditions.map((c) => {
    const was = before.find((p) => p.type === c.type);
    const since =
      was?.status === c.status && typeof was.lastTransitionTime === 'string'
        ? was.lastTransitionTime
        : timeOf(now);
    return { ...c, lastTransitionTime: since };
  });
}
