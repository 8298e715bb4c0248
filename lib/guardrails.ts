// Guardrails: the last check every plan passes before the actuator writes it. Policies already aim to stay
// inside these bounds; the guardrails do not trust them to (a policy bug, a hand-built plan, a stale config)
// and clamp or drop whatever would leave them. Pure: everything the check needs is passed in.
// Every bound is measured from the job's live values (the JobView read from the cluster), never from the `from`
// a plan carries: a plan saying {from: 41, to: 40} on a job at 2 replicas is a step of 38, not of 1. The plan
// that comes out carries the live `from`, so what is written and audited is what really changes.
import type { PolicyConfig } from './config.js';
import { plural } from './policies/placement.js';
import { oneLine, SUMMARY_LIMIT } from './policies/reason.js';
import type { Change, JobView, Plan, PodView, RoleView } from './types.js';

export type GuardrailConfig = Pick<
  PolicyConfig,
  'maxReplicaStep' | 'cooldownSeconds' | 'maxMemoryBytes' | 'maxClusterGpus'
> & { namespaceAllowlist: readonly string[] };

export interface GuardrailContext {
  job: JobView;
  config: GuardrailConfig;
  /** Epoch seconds. */
  now: number;
  /**
   * GPUs requested across the cluster now, counting this job at its declared size (so that its own pods
   * still pending are counted). Needed only when maxClusterGpus is finite and the plan adds GPUs.
   */
  clusterGpusAllocated?: number;
  /**
   * No pod of the job is placed on a node (never started, or every pod lost): the cool-down and the step
   * bound exist to spare a running job back-to-back restarts, and shrinking a queued job restarts nothing,
   * so replica reductions of a queued job pass them. Growth is never exempt.
   */
  queued?: boolean;
  /**
   * Per role, the fewest replicas that keep every pod of the role placed on a node (its highest placed index +
   * 1; operators remove the highest indices first). Reducing a role to at least this many removes only pods
   * that never started, so it restarts nothing either and passes the same two guards.
   */
  placedReplicas?: Readonly<Record<string, number>>;
  /**
   * Pods no plan may evict or replace, with why (protectedPodsOf): worker-0 of an elastic c10d PyTorchJob
   * hosts the rendezvous store, and removing it kills the whole job (measured).
   */
  protectedPods?: ReadonlyMap<string, string>;
}

/** GuardrailContext.protectedPods from the job and its pods. */
export function protectedPodsOf(job: JobView, pods: readonly PodView[]): Map<string, string> {
  const protectedPods = new Map<string, string>();
  if (!job.torchElastic?.c10dStore) return protectedPods;
  for (const pod of pods) {
    // An OOM-killed worker-0 already took the store down with it, and only a pod recreated at the raised
    // memory stops the job from being killed again: the fault policy may replace it.
    if (pod.role === 'Worker' && pod.index === 0 && pod.lastTermination?.reason !== 'OOMKilled')
      protectedPods.set(pod.name, `${pod.name} is worker-0, the host of the job's c10d rendezvous store`);
  }
  return protectedPods;
}

/**
 * Whether a replica reduction restarts nothing: no pod of the job is placed, or it removes only replicas that
 * were never placed (operators remove the highest indices first).
 */
export function reductionRestartsNothing(
  change: Change,
  ctx: Pick<GuardrailContext, 'queued' | 'placedReplicas'>,
): boolean {
  return (
    change.kind === 'replicas' &&
    change.to < change.from &&
    (ctx.queued === true ||
      (ctx.placedReplicas !== undefined && change.to >= (ctx.placedReplicas[change.role] ?? 0)))
  );
}

/**
 * Whether writing this (live-measured) change spends one of a torchelastic job's maxRestarts: a reduction of
 * its workers that removes a running worker. Growth spends none; nor does removing pods that never ran (an
 * unschedulable or evicted pod: its loss, if any, was spent when it happened, not by trainscaler).
 */
export function spendsRestart(
  change: Change,
  job: JobView,
  ctx: Pick<GuardrailContext, 'queued' | 'placedReplicas'>,
): boolean {
  return (
    job.torchElastic !== undefined &&
    change.kind === 'replicas' &&
    change.role === 'Worker' &&
    change.to < change.from &&
    !reductionRestartsNothing(change, ctx)
  );
}

/** GuardrailContext.placedReplicas from the job's pods. */
export function placedReplicasOf(pods: readonly PodView[]): Record<string, number> {
  const placed: Record<string, number> = {};
  for (const pod of pods) {
    if (!pod.nodeName || pod.phase === 'Succeeded' || pod.phase === 'Failed') continue;
    placed[pod.role] = Math.max(placed[pod.role] ?? 0, pod.index + 1);
  }
  return placed;
}

export interface GuardedPlan {
  plan: Plan;
  /** One line per guardrail that changed the plan, for the log and the decision's reason. */
  violations: string[];
}

/** Policies exempt from the cool-down: a fault (OOM kill, eviction) must be answered at once. */
const COOLDOWN_EXEMPT: ReadonlySet<Plan['policy']> = new Set(['fault']);

export function gpusPerReplica(role: RoleView): number {
  return Math.max(role.requests.gpus, role.limits.gpus, 0);
}

/** GPUs the job declares at its current spec (replicas x GPUs per replica over all roles). */
export function declaredGpus(job: JobView): number {
  return job.roles.reduce((sum, r) => sum + r.replicas * gpusPerReplica(r), 0);
}

type Sized = Change & { kind: 'replicas' | 'resources' };

/** A change with the role it touches, when it touches one (replicas, resources). */
interface Located {
  change: Change;
  role?: RoleView;
}

/** The value the job has now for what the change touches. */
function liveValue(change: Sized, role: RoleView): number {
  if (change.kind === 'replicas') return role.replicas;
  const side = role[change.field];
  return change.resource === 'memory' ? side.memoryBytes : side.cpuMillis;
}

/** Replicas are whole and may be 0; a resource amount is a positive number. */
function isValidTarget(change: Sized): boolean {
  if (change.kind === 'replicas') return Number.isInteger(change.to) && change.to >= 0;
  return Number.isFinite(change.to) && change.to > 0;
}

/**
 * The change measured from the job's live value. A change to a role the job does not have cannot be written
 * (undefined: dropped); an invalid target (fractional or negative replicas, NaN) is no change at all.
 */
function locate(change: Change, roles: Map<string, RoleView>, violations: string[]): Located | undefined {
  if (change.kind !== 'replicas' && change.kind !== 'resources') return { change };
  const role = roles.get(change.role);
  const what = change.kind === 'replicas' ? 'replicas' : `${change.resource} ${change.field}`;
  if (!role) {
    violations.push(`${change.role} ${what}: the job has no ${change.role} role`);
    return undefined;
  }
  const from = liveValue(change, role);
  if (change.from !== from)
    violations.push(`${change.role} ${what} from ${change.from} is stale: live ${from}`);
  if (isValidTarget(change)) return { change: { ...change, from }, role };
  violations.push(`${change.role} ${what} ${change.to} is not a valid target`);
  return { change: { ...change, from, to: from }, role };
}

/**
 * A count the kind can write: a multiple of the role's replicaMultiple (a JobSet's child Jobs), rounded
 * towards the live count, which is one, so the result stays within every bound the target was clamped to
 * (range, step, GPU budget) and never moves further than asked.
 */
function roundToMultiple(located: Located, violations: string[]): Located {
  const { change, role } = located;
  const multiple = role?.replicaMultiple ?? 1;
  if (change.kind !== 'replicas' || multiple <= 1 || change.to % multiple === 0) return located;
  const to =
    change.to > change.from
      ? Math.floor(change.to / multiple) * multiple
      : Math.ceil(change.to / multiple) * multiple;
  violations.push(
    `${change.role} replicas ${change.to} rounded to ${to} (a multiple of its ${multiple} child Jobs, towards the live ${change.from})`,
  );
  return { change: { ...change, to }, role };
}

function clampReplicas(
  change: Change & { kind: 'replicas' },
  role: RoleView,
  step: number,
  largestRun: number,
): number {
  const to = Math.min(Math.max(change.to, role.minReplicas), role.maxReplicas);
  // The step bound wins over the range: a job outside its bounds moves towards them one step at a time.
  // Without a step bound (a queued job shrinking) the change may only go down, even towards the bounds.
  if (!Number.isFinite(step)) return Math.min(to, change.from);
  const maxStep = Math.max(0, Math.floor(step));
  // Growing back to a size the job has run at is no step into the unknown: the bound starts above it.
  const top = Math.max(change.from + maxStep, change.role === 'Worker' ? largestRun : 0);
  return Math.min(Math.max(to, change.from - maxStep), top);
}

function guardChange(
  { change, role }: Located,
  config: GuardrailConfig,
  step: number,
  largestRun: number,
  violations: string[],
): Located {
  if (change.kind === 'replicas' && role) {
    const to = clampReplicas(change, role, step, largestRun);
    if (to !== change.to)
      violations.push(`${change.role} replicas ${change.to} clamped to ${to} (bounds, max step)`);
    return { change: { ...change, to }, role };
  }
  if (change.kind === 'resources' && change.resource === 'memory' && change.to > config.maxMemoryBytes) {
    // Never raise above the cap; a value already above it may only come down.
    const capped = Math.max(config.maxMemoryBytes, Math.min(change.from, change.to));
    violations.push(`${change.role} memory ${change.to} capped at ${capped} bytes`);
    return { change: { ...change, to: capped }, role };
  }
  return { change, role };
}

/**
 * Applies every guardrail to a plan and returns the plan that may be written. Changes are clamped where a
 * smaller change is still meaningful (replicas, memory) and dropped where not (anything in a cool-down,
 * anything outside the namespace allowlist, a role the job does not have).
 */
export function applyGuardrails(plan: Plan, ctx: GuardrailContext): GuardedPlan {
  const { job, config, now } = ctx;
  const violations: string[] = [];
  const drop = (why: string): GuardedPlan => {
    violations.push(why);
    return { plan: { ...withViolations(plan, violations), changes: [] }, violations };
  };
  if (plan.changes.length === 0) return { plan, violations };
  if (config.namespaceAllowlist.length > 0 && !config.namespaceAllowlist.includes(job.ref.namespace)) {
    return drop(`namespace ${job.ref.namespace} is not in the allowlist`);
  }
  const roles = new Map(job.roles.map((r) => [r.role, r]));
  const live: Located[] = [];
  for (const change of plan.changes) {
    const located = locate(change, roles, violations);
    if (located) live.push(located);
  }
  // Never changed: infinitely long ago.
  const sinceLast = now - (job.state.lastActionAt ?? Number.NEGATIVE_INFINITY);
  // A reduction restarts nothing when no pod of the job is placed, or when it removes only replicas that were
  // never placed (operators remove the highest indices first): it passes the cool-down and the step bound.
  const restartsNothing = ({ change }: Located): boolean => reductionRestartsNothing(change, ctx);
  const shrinksQueued = live.every(restartsNothing);
  if (!COOLDOWN_EXEMPT.has(plan.policy) && !shrinksQueued && sinceLast < config.cooldownSeconds) {
    return drop(`cool-down: last change ${Math.max(0, Math.round(sinceLast))} s ago`);
  }
  let guardedChanges = live.map((located) =>
    guardChange(
      located,
      config,
      restartsNothing(located) ? Number.POSITIVE_INFINITY : config.maxReplicaStep,
      job.state.largestRunWorkers ?? 0,
      violations,
    ),
  );
  if (Number.isFinite(config.maxClusterGpus))
    guardedChanges = withinGpuBudget(guardedChanges, ctx, violations);
  guardedChanges = withinRestartBudget(guardedChanges, ctx, violations);
  guardedChanges = sparingProtectedPods(guardedChanges, ctx, violations);
  guardedChanges = rendezvousOnlyWhereAllowed(guardedChanges, ctx, violations);
  // Last: every bound above is then already met, and rounding towards the live count keeps it met.
  guardedChanges = guardedChanges.map((located) => roundToMultiple(located, violations));
  const guarded: Plan = {
    ...(violations.length > 0 ? withViolations(plan, violations) : plan),
    changes: guardedChanges.map((l) => l.change),
  };
  return { plan: guarded, violations };
}

/**
 * The plan's one-line reason says a guardrail changed it, with what it did when that fits in the line; every
 * clamp in full is a detail.
 */
function withViolations(plan: Plan, violations: readonly string[]): Plan {
  const told = `${plan.reason} [guardrail: ${violations.join('; ')}]`;
  if (told.length <= SUMMARY_LIMIT) return { ...plan, reason: told };
  const more = violations.length > 1 ? ` (+${violations.length - 1} more)` : '';
  const room = SUMMARY_LIMIT - plan.reason.length - ' [guardrail: ]'.length - more.length;
  const mark =
    room >= 30
      ? ` [guardrail: ${oneLine(violations[0] ?? '', room)}${more}]`
      : ` [${plural(violations.length, 'guardrail')}]`;
  return {
    ...plan,
    reason: `${oneLine(plan.reason, SUMMARY_LIMIT - mark.length)}${mark}`,
    details: [...(plan.details ?? []), ...violations.map((v) => `guardrail: ${v}`)],
  };
}

function withinGpuBudget(changes: Located[], ctx: GuardrailContext, violations: string[]): Located[] {
  const allocated = ctx.clusterGpusAllocated ?? Number.POSITIVE_INFINITY; // unknown allocation: add nothing
  let room = Math.max(0, ctx.config.maxClusterGpus - allocated);
  return changes.map((located) => {
    const { change, role } = located;
    if (change.kind !== 'replicas' || !role || change.to <= change.from) return located;
    const per = gpusPerReplica(role);
    if (per === 0) return located;
    const affordable = Math.floor(room / per);
    const added = Math.min(change.to - change.from, affordable);
    room -= added * per;
    if (added === change.to - change.from) return located;
    violations.push(
      `${change.role} replicas ${change.to} limited to ${change.from + added} by the cluster GPU budget ` +
        `(${ctx.config.maxClusterGpus})`,
    );
    return { change: { ...change, to: change.from + added }, role };
  });
}

/**
 * Each scale-down of a torchelastic job spends one of its maxRestarts; when they run out the job fails. Stop
 * shrinking it while one restart is left, kept in reserve for a real failure.
 */
function withinRestartBudget(changes: Located[], ctx: GuardrailContext, violations: string[]): Located[] {
  const maxRestarts = ctx.job.torchElastic?.maxRestarts;
  if (maxRestarts === undefined) return changes;
  const used = ctx.job.state.scaleDowns ?? 0;
  if (used < maxRestarts - 1) return changes;
  return changes.map((located) => {
    const { change } = located;
    if (change.kind !== 'replicas' || !spendsRestart(change, ctx.job, ctx)) return located;
    violations.push(
      `${change.role} replicas ${change.to} kept at ${change.from}: ${used} of the job's maxRestarts ` +
        `${maxRestarts} already spent on scale-downs, and each scale-down spends one; the last is kept in ` +
        'reserve for a real failure',
    );
    return { ...located, change: { ...change, to: change.from } };
  });
}

/**
 * Protected pods (worker-0 of an elastic c10d job) are never evicted or replaced, and never removed by a scale
 * to zero, whatever policy planned it. The node preference written with a refused eviction goes with it.
 */
function sparingProtectedPods(changes: Located[], ctx: GuardrailContext, violations: string[]): Located[] {
  const protectedPods = ctx.protectedPods;
  if (!protectedPods || protectedPods.size === 0) return changes;
  let refused = false;
  const kept: Located[] = [];
  for (const located of changes) {
    const { change } = located;
    const why = change.kind === 'evict-pod' ? protectedPods.get(change.pod) : undefined;
    if (why !== undefined) {
      refused = true;
      violations.push(`not evicting ${why}: removing it kills the whole job (reported, not evicted)`);
      continue;
    }
    if (change.kind === 'replicas' && change.role === 'Worker' && change.to === 0 && change.from > 0) {
      violations.push('Worker replicas 0 raised to 1: worker-0 hosts the c10d rendezvous store');
      kept.push({ ...located, change: { ...change, to: 1 } });
      continue;
    }
    kept.push(located);
  }
  return refused ? kept.filter(({ change }) => change.kind !== 'avoid-node') : kept;
}

/** Rendezvous settings are the user's: written only to a job that allows it (trainscaler.io/tune-rendezvous). */
function rendezvousOnlyWhereAllowed(
  changes: Located[],
  ctx: GuardrailContext,
  violations: string[],
): Located[] {
  if (ctx.job.torchElastic?.tuneRendezvous === true) return changes;
  return changes.filter(({ change }) => {
    if (change.kind !== 'rendezvous') return true;
    violations.push(`${change.setting} not set: the job does not allow trainscaler.io/tune-rendezvous`);
    return false;
  });
}
