import { createHash, randomBytes } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION } from './adapters/annotations.js';
import {
  buildJobPatch,
  guardrailPodIndex,
  kueueFactsOf,
  podSelectorFor,
  readJob,
  roleOf,
} from './adapters/job-adapter.js';
import { ownedByJob, readPod } from './adapters/pod-view.js';
import type { ClusterClient, JobStateObject, JsonPatchOp, KubeObject } from './cluster/cluster-client.js';
import { eventMessage, FULL_REASON_IN_ANNOTATION, FULL_REASON_IN_LOG } from './cluster/event-message.js';
import {
  type JobStateLookup,
  type JobStateStatus,
  STATUS_CHANGES_LIMIT,
  STATUS_REASON_LIMIT,
  type StatusDecision,
  trustedStateOf,
  writeJobState,
} from './cluster/job-state.js';
import { clusterQueueQuotaOf, kueueJobOf } from './cluster/kueue-state.js';
import { liveReads, readsBeforeWrite } from './cluster/listed-cluster-reads.js';
import { childJobsOf } from './cluster/owner-chain.js';
import { DEFAULT_POLICY_CONFIG } from './config.js';
import { measureLastRescale } from './decisions/rescale-measurement.js';
import { ApiError, ConflictError, TrainscalerError } from './errors.js';
import {
  applyGuardrails,
  declaredGpus,
  type GuardrailConfig,
  type GuardrailContext,
  gpusPerReplica,
  placedReplicasOf,
  protectedPodsOf,
  reductionRestartsNothing,
  spendsRestart,
} from './guardrails.js';
import { applyKueueRules, type KueueJob, touchesPodSets } from './kueue/kueue-guard.js';
import { DEFAULT_MANAGEMENT_SCOPE, type ManagementScope } from './management.js';
import type { MetricsSource } from './metrics/metrics-source.js';
import {
  type PodResizeResult,
  planPodResizes,
  resizeTargetsOf,
  sendPodResizes,
  withPodResizes,
} from './pod-resizes.js';
import { summarized } from './policies/reason.js';
import { withStragglerReplacement } from './policies/stragglers.js';
import {
  conditionsOf,
  configUnder,
  type GoverningPolicy,
  governView,
  resolveJobPolicy,
  statusPolicyOf,
  withinPolicy,
} from './policy-governance.js';
import type { Change, JobAutoscalerState, JobRef, JobView, Plan, PodView } from './types.js';

export interface ActuatorLogger {
  /** Optional: loggers without a debug level drop those lines. */
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ActuatorDeps {
  cluster: ClusterClient;
  clock: () => number;
  dryRun: boolean;
  logger: ActuatorLogger;
  namespaceAllowlist: readonly string[];
  priorityClasses?: Record<string, number>;
  /** Which jobs are managed (opt-in); default: namespaceAllowlist, never kube-* or trainscaler-system. */
  management?: ManagementScope;
  /** Guardrail knobs; unset ones take the production defaults (DEFAULT_POLICY_CONFIG). */
  guardrails?: Partial<GuardrailConfig>;
  /** Where the job's last rescale is measured (lib/decisions/rescale-measurement.ts); none: not measured. */
  metrics?: MetricsSource;
  /**
   * Epoch seconds at which the trigger behind this decision reached its handler. The cool-down counts from it,
   * not from the write: a schedule tick writes its plans after reading every job and its metrics, seconds
   * after the tick, and the tick two minutes on reads the job seconds after its own start, so counted from
   * the write a 120 s cool-down held every job a third tick. Absent: the write's time.
   */
  triggeredAt?: number;
  /**
   * Aborted when the caller stops waiting for this job (a tick's per-job deadline, lib/decisions/job-work.ts):
   * no write of the decision starts after that. A write begun before it completes with what follows it (the
   * state after the job), since the decision is real once the job holds it.
   */
  signal?: AbortSignal;
  /**
   * Decide first on what `cluster` (a tick's read view) already listed, and read the job from the API server
   * only when that decision would write: a review that leaves most jobs alone (the schedule tick's fault review
   * of jobs with waiting pods) then costs no request per job. A decision that writes is made again on the live
   * job, whose resourceVersion its patch pins. Unset: decided on the live job only.
   */
  decideOnListedFirst?: boolean;
}

/** What the actuator read, handed to the policy so that it decides on exactly the version it will patch. */
export interface JobSnapshot {
  obj: KubeObject;
  view: JobView;
  pods: PodView[];
  rawPods: V1Pod[];
  /** Set when Kueue manages the job: its Workloads and what Kueue's rules need (lib/kueue/kueue-guard.ts). */
  kueue?: KueueJob;
  /** The job's ScaledTrainingJob as read, whose status `view.state` comes from (lib/cluster/job-state.ts). */
  stateObject?: JobStateObject;
  /**
   * The policy the job is managed under (lib/policy-governance.ts): its TrainingAutoscaler, or the policy its
   * opt-in implies. `view` already shows it (managed, Worker bounds); its step and cool-down are in
   * configUnder(governing, config).
   */
  governing?: GoverningPolicy;
}

export interface Outcome {
  ref: JobRef;
  plan: Plan;
  /** True when something was written; false for no-op plans and dry runs. */
  applied: boolean;
  decisionId?: string;
  patch?: JsonPatchOp[];
  /**
   * `kueue`: Kueue's rules held the plan's changes back (its reason says which and why). `eviction-refused`:
   * the API server refused an eviction the plan needs (a PodDisruptionBudget): nothing was written.
   * `recommend`: the job's TrainingAutoscaler is in mode Recommend: the plan is what Auto would write; nothing
   * was written to the job, the recommendation went to its ScaledTrainingJob's status.
   */
  skipped?:
    | 'no-change'
    | 'dry-run'
    | 'not-managed'
    | 'namespace-not-allowed'
    | 'kueue'
    | 'eviction-refused'
    | 'recommend';
  /** Conflicts met and retried before the outcome. */
  conflicts?: number;
  /** The in-place resizes sent (pods/resize), one per pod, when the plan changed CPU or memory. */
  podResizes?: PodResizeResult[];
  /** Evictions the API server refused (HTTP 429: a PodDisruptionBudget), with what it said. */
  evictionsRefused?: RefusedEviction[];
}

export interface RefusedEviction {
  pod: string;
  detail: string;
}

export type Decide = (snapshot: JobSnapshot) => Plan | Promise<Plan>;

export interface DecisionRecord {
  id: string;
  at: number;
  policy: Plan['policy'];
  reason: string;
  /** The plan's details (advice, priors, the arithmetic): what the one-line reason leaves out. */
  details?: string[];
  changes: Change[];
  /**
   * Unique per write attempt. Duplicate triggers make the same decision (same id); after a lost response,
   * this tells a client whether the write on the job is its own or a duplicate's (whose Event is not ours
   * to repeat).
   */
  write?: string;
}

const MAX_ATTEMPTS = 4;
const HISTORY_LENGTH = 10;

function isNoOp(change: Change): boolean {
  return (change.kind === 'replicas' || change.kind === 'resources') && change.from === change.to;
}

/**
 * Same job, same observed version, same plan -> same id: triggers racing on one read make one decision, which
 * the retrying client can look for after a lost response, and the audit Event is named after.
 */
export function decisionIdOf(view: JobView, plan: Plan): string {
  const material = JSON.stringify([view.uid, view.resourceVersion, plan.policy, plan.changes]);
  return createHash('sha256').update(material).digest('hex').slice(0, 16);
}

/**
 * The job, its pods, trainscaler's state of it and the policy it is under. The state comes from the job's
 * ScaledTrainingJob, read here, or from `states` when the caller listed them all at once (the schedule: one
 * LIST a tick); the policy from the TrainingAutoscalers of its namespace (through a tick's view: one LIST a
 * tick). Throws when policies conflict over the job or one cannot be read: the job is left alone.
 */
export async function loadSnapshot(
  cluster: ClusterClient,
  ref: JobRef,
  priorityClasses?: Record<string, number>,
  management: ManagementScope = DEFAULT_MANAGEMENT_SCOPE,
  states?: JobStateLookup,
  /** readJob(obj, management), where the caller has that reading already (a tick reads each listed job once). */
  viewOf: (obj: KubeObject) => JobView = (obj) => readJob(obj, management),
): Promise<JobSnapshot> {
  const obj = await cluster.getJob(ref);
  const view = viewOf(obj);
  const governing = governView(view, obj, await resolveJobPolicy(cluster, obj, management));
  const stateObject = states ? states(ref) : await cluster.getJobState(ref);
  view.state = trustedStateOf(obj, stateObject);
  // The selector is a label anyone can set: keep only the pods the job really owns (owner reference, through
  // the child Jobs of a JobSet or TrainJob, read back to the job).
  const selected = await cluster.listPods(ref.namespace, podSelectorFor(obj));
  const childJobs = await childJobsOf(view, selected, (child) => cluster.getJob(child));
  const rawPods = selected.filter((p) => ownedByJob(p, view, childJobs));
  const container = roleOf(view, 'Worker')?.containerName ?? view.roles[0]?.containerName;
  const pods = rawPods.map((p) => {
    const pod = readPod(p, container);
    const index = guardrailPodIndex(obj, p.metadata?.labels);
    return index === undefined ? pod : { ...pod, index };
  });
  // The API server resolves priority classes on pods, not on custom resources: take it from the pods.
  const podPriority = Math.max(...rawPods.map((p) => p.spec?.priority ?? Number.NEGATIVE_INFINITY));
  const classPriority = view.priorityClassName ? priorityClasses?.[view.priorityClassName] : undefined;
  view.priority = Number.isFinite(podPriority) ? podPriority : (classPriority ?? 0);
  const snapshot: JobSnapshot = { obj, view, pods, rawPods };
  if (stateObject) snapshot.stateObject = stateObject;
  if (governing) snapshot.governing = governing;
  const kueue = await kueueJobOf(cluster, obj, view);
  if (kueue) {
    view.kueue = kueue.managedBy;
    snapshot.kueue = kueue;
  }
  return snapshot;
}

function readHistory(obj: KubeObject): DecisionRecord[] {
  const raw = obj.metadata.annotations?.[ANNOTATION.history];
  if (!raw) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? (parsed as DecisionRecord[]) : [];
  } catch {
    return [];
  }
}

/** The operator's guardrails, with the step and cool-down of the job's policy. */
function guardrailConfig(deps: ActuatorDeps, governing: GoverningPolicy | undefined): GuardrailConfig {
  const d = DEFAULT_POLICY_CONFIG;
  const operator: GuardrailConfig = {
    // deps.namespaceAllowlist is enforced before anything is read (actOnJob).
    namespaceAllowlist: deps.guardrails?.namespaceAllowlist ?? [],
    maxReplicaStep: deps.guardrails?.maxReplicaStep ?? d.maxReplicaStep,
    cooldownSeconds: deps.guardrails?.cooldownSeconds ?? d.cooldownSeconds,
    maxMemoryBytes: deps.guardrails?.maxMemoryBytes ?? d.maxMemoryBytes,
    maxClusterGpus: deps.guardrails?.maxClusterGpus ?? d.maxClusterGpus,
  };
  const { maxReplicaStep, cooldownSeconds } = configUnder(governing, {
    ...d,
    maxReplicaStep: operator.maxReplicaStep,
    cooldownSeconds: operator.cooldownSeconds,
  });
  return { ...operator, maxReplicaStep, cooldownSeconds };
}

/**
 * GPUs requested across the cluster: every unfinished pod of other jobs, plus this job at its declared size
 * (its own pods may still be pending or not yet created by the operator after an earlier scale-up).
 */
async function clusterGpusAllocated(cluster: ClusterClient, snapshot: JobSnapshot): Promise<number> {
  const own = new Set(snapshot.rawPods.map((p) => p.metadata?.uid ?? p.metadata?.name));
  let total = declaredGpus(snapshot.view);
  for (const pod of await cluster.listPods(undefined)) {
    const phase = pod.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed' || own.has(pod.metadata?.uid ?? pod.metadata?.name))
      continue;
    total += readPod(pod).requests.gpus;
  }
  return total;
}

/** Whether the plan asks for more replicas of a GPU role than the job has now (its `from` is not trusted). */
function addsGpus(plan: Plan, view: JobView): boolean {
  return plan.changes.some((c) => {
    if (c.kind !== 'replicas') return false;
    const role = view.roles.find((r) => r.role === c.role);
    return role !== undefined && c.to > role.replicas && gpusPerReplica(role) > 0;
  });
}

/** Worker pods running now: with JobAutoscalerState.largestRunWorkers, a size the job has run at. */
export function runningWorkersOf(pods: readonly PodView[]): number {
  return pods.filter((p) => p.role === 'Worker' && p.phase === 'Running').length;
}

/** Changes that only say where pods created later should go: no running pod notices them. */
const MOVES_NO_POD: ReadonlySet<Change['kind']> = new Set(['prefer-node']);

function nextState(
  view: JobView,
  plan: Plan,
  record: DecisionRecord,
  context: GuardrailContext,
  runningWorkers: number,
  triggeredAt: number | undefined,
): JobAutoscalerState {
  const state: JobAutoscalerState = { ...view.state, lastDecisionId: record.id };
  // The cool-down counts from a write that changed how the job runs. A node preference alone moves no pod and
  // restarts nothing: counting it would hold a job just submitted out of the rebalance for the whole cool-down.
  if (plan.changes.some((c) => !MOVES_NO_POD.has(c.kind)))
    state.lastActionAt = Math.min(triggeredAt ?? record.at, record.at);
  // Counted on the write, before torchelastic restarts: a decision is written once (resourceVersion pin).
  if (plan.changes.some((c) => spendsRestart(c, view, context)))
    state.scaleDowns = (view.state.scaleDowns ?? 0) + 1;
  // Before trainscaler's first write the Worker replicas are the user's: the size sharing measures against.
  const worker = view.roles.find((r) => r.role === 'Worker');
  if (view.state.askedWorkers === undefined && view.state.lastActionAt === undefined && worker)
    state.askedWorkers = worker.replicas;
  if (runningWorkers > (view.state.largestRunWorkers ?? 0)) state.largestRunWorkers = runningWorkers;
  // Remembered so that a later review measures its cost from the job's metrics; a resize that restarts
  // nothing (no pod of the job placed, or only never-placed replicas removed) has no pause to measure.
  const rescale = plan.changes.find(
    (c): c is Extract<Change, { kind: 'replicas' }> =>
      c.kind === 'replicas' && c.role === 'Worker' && c.from !== c.to,
  );
  if (rescale && !context.queued && !reductionRestartsNothing(rescale, context))
    state.lastRescale = { at: record.at, from: rescale.from, to: rescale.to };
  const pause = plan.changes.find((c) => c.kind === 'pause');
  if (pause) {
    state.paused = true;
    state.pauseReason = pause.reason;
  }
  if (
    plan.policy === 'fault' &&
    plan.changes.some((c) => c.kind === 'resources' && c.resource === 'memory')
  ) {
    state.oomCount = view.state.oomCount + 1;
  }
  // A straggler's slot replaced again while still slow waits out a growing back-off (lib/policies/stragglers.ts).
  return withStragglerReplacement(state, plan, record.at);
}

/**
 * Read the job, let the policy decide on what was read, write the minimal patch guarded by the read
 * resourceVersion, and leave an audit trail (annotation + Event). On a conflict, start over from a fresh
 * read so that no update is lost and no decision is made on stale state.
 */
export async function actOnJob(ref: JobRef, decide: Decide, deps: ActuatorDeps): Promise<Outcome> {
  if (deps.namespaceAllowlist.length > 0 && !deps.namespaceAllowlist.includes(ref.namespace)) {
    return {
      ref,
      plan: {
        ref,
        policy: 'tuning',
        changes: [],
        reason: `namespace ${ref.namespace} is not in the allowlist`,
      },
      applied: false,
      skipped: 'namespace-not-allowed',
    };
  }
  let conflicts = 0;
  // Attempt 0 decides on the listed objects only (decideOnListedFirst), and ends only where it writes nothing.
  for (let attempt = deps.decideOnListedFirst ? 0 : 1; ; attempt++) {
    const management = deps.management ?? {
      ...DEFAULT_MANAGEMENT_SCOPE,
      namespaceAllowlist: deps.namespaceAllowlist,
    };
    // Through a tick's read view (lib/cluster/listed-cluster-reads.ts) the job itself is still read from the API
    // server, for the resourceVersion its patch pins; a retry after a conflict reads everything from it.
    const reads =
      attempt === 0 ? deps.cluster : attempt === 1 ? readsBeforeWrite(deps.cluster) : liveReads(deps.cluster);
    const snapshot = await loadSnapshot(reads, ref, deps.priorityClasses, management);
    const { obj, view } = snapshot;
    const stateRead = view.state;
    // The decision sees, and the write keeps, what the job's last rescale cost.
    if (view.managed) view.state = await measureLastRescale(deps.metrics, view);
    if (!view.managed) {
      const reason = view.unmanagedReason ?? 'not managed';
      const plan: Plan = { ref, policy: 'tuning', changes: [], reason };
      return { ref, plan, applied: false, skipped: 'not-managed' };
    }
    const decided = await decide(snapshot);
    const config = guardrailConfig(deps, snapshot.governing);
    const context: GuardrailContext = {
      job: view,
      config,
      now: deps.clock(),
      queued: snapshot.pods.every((p) => !p.nodeName),
      placedReplicas: placedReplicasOf(snapshot.pods),
      protectedPods: protectedPodsOf(view, snapshot.pods),
    };
    if (Number.isFinite(config.maxClusterGpus) && addsGpus(decided, view)) {
      if (attempt === 0) continue; // a growth: decided again on the live job
      // Live, not the tick's list: the jobs this tick has grown already count against the budget.
      context.clusterGpusAllocated = await clusterGpusAllocated(liveReads(deps.cluster), snapshot);
    }
    // Every plan passes the guardrails before it can be written, whichever policy made it.
    const guarded = applyGuardrails(decided, context);
    if (guarded.violations.length > 0)
      deps.logger.warn({ job: ref, policy: decided.policy, violations: guarded.violations }, 'plan clamped');
    let plan: Plan = { ...guarded.plan, changes: guarded.plan.changes.filter((c) => !isNoOp(c)) };
    // Then the job's policy: the actions it does not allow are dropped, and the reason says which.
    const filter = withinPolicy(plan, snapshot.governing);
    plan = filter.plan;
    // Kueue's rules below only drop changes: a plan without any here writes nothing, unless it is a
    // recommendation (written to the job's status). Anything that writes is decided again on the live job.
    if (attempt === 0 && (plan.changes.length > 0 || snapshot.governing?.policy.mode === 'Recommend'))
      continue;
    // Then Kueue's rules, for a job Kueue manages: nothing Kueue would answer with a suspension, no growth
    // beyond the ClusterQueue's free quota.
    let heldByKueue = false;
    if (snapshot.kueue && plan.changes.some(touchesPodSets)) {
      const quota = await clusterQueueQuotaOf(
        deps.cluster,
        ref.namespace,
        snapshot.kueue,
        kueueFactsOf(obj).queueName,
      );
      const ruled = applyKueueRules({ plan, job: view, kueue: snapshot.kueue, quota });
      if (ruled.notes.length > 0) {
        heldByKueue = true;
        deps.logger.info(
          { job: ref, policy: plan.policy, kueue: ruled.notes },
          'plan held back by Kueue rules',
        );
      }
      plan = ruled.plan;
    }
    // One line for Events, history and the log; the rest of a long reason goes to the plan's details.
    plan = summarized(plan);
    const governing = snapshot.governing;
    const policyStatus = governing && {
      policy: statusPolicyOf(governing),
      conditions: conditionsOf({
        governing,
        filter,
        wanted: workersAfter(decided, view),
        coolingDown:
          deps.clock() - (view.state.lastActionAt ?? Number.NEGATIVE_INFINITY) < config.cooldownSeconds,
        now: deps.clock(),
        previous: isRecord(snapshot.stateObject?.status) ? snapshot.stateObject.status.conditions : undefined,
      }),
    };
    if (governing?.policy.mode === 'Recommend' && policyStatus) {
      deps.signal?.throwIfAborted();
      // Decided exactly as under Auto; nothing is written to the job, its pods or its Events.
      await recordRecommendation(deps, { ref, uid: view.uid, apiVersion: obj.apiVersion }, snapshot, {
        before: stateRead,
        state: view.state,
        plan,
        observedWorkers: runningWorkersOf(snapshot.pods),
        ...policyStatus,
      });
      return { ref, plan, applied: false, skipped: 'recommend', conflicts };
    }
    if (plan.changes.length === 0)
      return { ref, plan, applied: false, skipped: heldByKueue ? 'kueue' : 'no-change', conflicts };
    // CPU/memory changes reach the running pods in place where the API server serves pods/resize (discovery).
    const served = resizeTargetsOf(plan.changes).size > 0 && (await podResizeServed(deps, ref));
    const podResizes = planPodResizes(snapshot, plan, served);
    const kept = plan; // its evictions of OOM-killed pods, should their in-place resize be refused
    plan = withPodResizes(plan, podResizes);
    const refusedNow = await evictionsRefused(deps, ref, evictedPods(plan.changes), true);
    if (refusedNow.length > 0) {
      deps.signal?.throwIfAborted();
      await recordRefusal(deps, view, obj, plan, refusedNow);
      return {
        ref,
        plan,
        applied: false,
        skipped: 'eviction-refused',
        conflicts,
        evictionsRefused: refusedNow,
      };
    }
    // No duplicate check here: the id covers the resourceVersion read, which every write bumps, so a
    // decision already written can never be found again under the same id. Duplicate triggers are stopped by
    // the resourceVersion pin (all but one patch conflict and re-read) and then by what the winner wrote
    // (the cool-down, or a plan that is a no-op on the new live values); a lost response is settled by the
    // retrying client, which looks for the id on the job.
    const id = decisionIdOf(view, plan);
    const record: DecisionRecord = {
      id,
      at: deps.clock(),
      policy: plan.policy,
      reason: plan.reason,
      ...(plan.details && plan.details.length > 0 ? { details: plan.details } : {}),
      changes: plan.changes,
      write: randomBytes(6).toString('hex'),
    };
    const runningWorkers = runningWorkersOf(snapshot.pods);
    const state = nextState(view, plan, record, context, runningWorkers, deps.triggeredAt);
    // The job carries only the audit record (its owner can edit it); the state goes to the job's
    // ScaledTrainingJob below, whose status only trainscaler can write.
    const annotations = {
      [ANNOTATION.lastDecision]: JSON.stringify(record),
      [ANNOTATION.history]: JSON.stringify([...readHistory(obj), record].slice(-HISTORY_LENGTH)),
    };
    const patch = buildJobPatch(obj, plan.changes, annotations);
    deps.signal?.throwIfAborted();
    try {
      await deps.cluster.patchJob(ref, patch, { dryRun: deps.dryRun });
    } catch (error) {
      if (error instanceof ConflictError && attempt < MAX_ATTEMPTS) {
        conflicts++;
        deps.logger.info({ job: ref, attempt }, 'conflict on patch; re-reading and recomputing');
        continue;
      }
      throw error;
    }
    if (deps.dryRun) {
      // Debug: the runner logs every decision once, rate-limited (lib/runner/decision-log.ts).
      deps.logger.debug?.(
        { job: ref, decisionId: id, patch, reason: plan.reason },
        'dry run: decision not written',
      );
      return { ref, plan, applied: false, skipped: 'dry-run', decisionId: id, patch, conflicts };
    }
    // Job first, state second. State first would make the actuator's own retry after a 409 on the job read the
    // cool-down it had just recorded and drop the decision it never wrote; and a decision is only real once the
    // job holds it. A failure between the two leaves the job's last-decision record ahead of the status, which
    // trustedStateOf reads as the start of a cool-down (only ever more cautious).
    await recordState(deps, { ref, uid: view.uid, apiVersion: obj.apiVersion }, snapshot, {
      before: stateRead,
      after: state,
      extra: {
        observedWorkers: runningWorkers,
        desiredWorkers: workersAfter(plan, view) ?? runningWorkers,
        ...policyStatus,
        lastDecision: {
          id,
          at: record.at,
          policy: plan.policy,
          reason: plan.reason.slice(0, STATUS_REASON_LIMIT),
          changes: plan.changes.slice(0, STATUS_CHANGES_LIMIT),
        },
      },
    });
    // After the template: a conflict on the job above leaves every pod untouched.
    const resized = await sendPodResizes(deps.cluster, snapshot, plan, podResizes, () =>
      loadSnapshot(liveReads(deps.cluster), ref, deps.priorityClasses, management),
    );
    const failed = resized.filter((r) => r.result === 'failed');
    // An OOM-killed pod whose resize the API server refused is recreated at the new size the old way.
    const evictions = [
      ...evictedPods(plan.changes),
      ...kept.changes.flatMap((c) =>
        c.kind === 'evict-pod' && c.toResize && failed.some((f) => f.pod === c.pod) ? [c.pod] : [],
      ),
    ];
    // Refused only if the budget was spent between the dry run above and now (or for an OOM-killed pod whose
    // resize was refused, not asked before): the job's patch stands, and the Event says the pod stayed.
    const refused = await evictionsRefused(deps, ref, evictions, false);
    if (failed.length > 0)
      deps.logger.warn({ job: ref, decisionId: id, failed }, 'in-place resize refused; pods keep their size');
    let told = plan;
    if (failed.length > 0)
      told = {
        ...told,
        reason: `${told.reason}; resize refused: ${failed.map((f) => `${f.pod} (${f.detail ?? 'no detail'})`).join(', ')}`,
      };
    if (refused.length > 0) told = { ...told, reason: `${told.reason}; ${refusalText(refused)}` };
    await recordEvent(deps, view, obj, told, id, refused.length > 0);
    deps.logger.info(
      { job: ref, decisionId: id, policy: plan.policy, reason: plan.reason },
      'decision applied',
    );
    const outcome: Outcome = { ref, plan, applied: true, decisionId: id, patch, conflicts };
    if (resized.length > 0) outcome.podResizes = resized;
    if (refused.length > 0) outcome.evictionsRefused = refused;
    return outcome;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The Worker count the plan leaves the job at (its Worker change, else the job's), if it has workers. */
function workersAfter(plan: Plan, view: JobView): number | undefined {
  const change = plan.changes.find(
    (c): c is Extract<Change, { kind: 'replicas' }> => c.kind === 'replicas' && c.role === 'Worker',
  );
  return change?.to ?? view.roles.find((r) => r.role === 'Worker')?.replicas;
}

/**
 * A Recommend policy's decision into the job's ScaledTrainingJob status: the recommendation (the Worker count
 * and the plan's one-line reason), the policy and the conditions; the state is kept as read (nothing was done,
 * no cool-down starts). Written only when something a reader sees changed, so that a recommendation repeated
 * every tick costs no write; never in a dry run. A failure is logged: the job was not touched either way.
 */
async function recordRecommendation(
  deps: ActuatorDeps,
  job: { ref: JobRef; uid: string; apiVersion: string },
  snapshot: JobSnapshot,
  r: {
    before: JobAutoscalerState;
    state: JobAutoscalerState;
    plan: Plan;
    observedWorkers: number;
  } & Required<Pick<JobStateStatus, 'policy' | 'conditions'>>,
): Promise<void> {
  if (deps.dryRun) return;
  const workers = workersAfter(r.plan, snapshot.view) ?? r.observedWorkers;
  const reason = r.plan.reason.slice(0, STATUS_REASON_LIMIT);
  const found = snapshot.stateObject?.ownerUid === job.uid ? snapshot.stateObject.status : undefined;
  const seen = (v: unknown) =>
    JSON.stringify(v, (key, value: unknown) =>
      key === 'lastTransitionTime' || key === 'at' ? undefined : value,
    );
  const shown = { workers, reason, policy: r.policy, conditions: r.conditions, observed: r.observedWorkers };
  if (
    isRecord(found) &&
    seen(shown) ===
      seen({
        workers: isRecord(found.recommendation) ? found.recommendation.workers : undefined,
        reason: isRecord(found.recommendation) ? found.recommendation.reason : undefined,
        policy: found.policy,
        conditions: found.conditions,
        observed: found.observedWorkers,
      })
  )
    return;
  const extra: Omit<JobStateStatus, keyof JobAutoscalerState> = {
    observedWorkers: r.observedWorkers,
    desiredWorkers: workers,
    recommendation: { workers, reason, at: deps.clock() },
    policy: r.policy,
    conditions: r.conditions,
  };
  if (isRecord(found) && isRecord(found.lastDecision))
    extra.lastDecision = found.lastDecision as unknown as StatusDecision;
  try {
    await writeJobState(
      deps.cluster,
      job,
      { before: r.before, after: r.state, extra },
      snapshot.stateObject,
      { dryRun: false },
    );
  } catch (error) {
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.error({ job: job.ref, error: detail }, 'could not record the recommendation');
  }
}

/**
 * The decision's state into the job's ScaledTrainingJob. The job write already happened: a failure here is
 * logged and told as a Warning Event on the job, and the decision stands (its last-decision record on the
 * job holds the cool-down until a later write records the state).
 */
async function recordState(
  deps: ActuatorDeps,
  job: { ref: JobRef; uid: string; apiVersion: string },
  snapshot: JobSnapshot,
  update: Parameters<typeof writeJobState>[2],
): Promise<void> {
  try {
    const { conflicts } = await writeJobState(deps.cluster, job, update, snapshot.stateObject, {
      dryRun: false,
    });
    if (conflicts > 0) deps.logger.info({ job: job.ref, conflicts }, 'state re-read and written again');
  } catch (error) {
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.error({ job: job.ref, error: detail }, 'could not record the job state');
    try {
      await deps.cluster.createEvent(
        {
          involved: job,
          type: 'Warning',
          reason: 'TrainscalerStateNotRecorded',
          message: eventMessage(
            `decision applied, its state not recorded (cool-down kept from the job's last decision): ${detail}`,
            FULL_REASON_IN_LOG,
          ),
        },
        { dryRun: false },
      );
    } catch (eventError) {
      const why = eventError instanceof TrainscalerError ? eventError.message : String(eventError);
      deps.logger.error({ job: job.ref, error: why }, 'could not record the audit Event');
    }
  }
}

/** Discovery that fails is answered as "not served": the template-only (and eviction) path is always safe. */
async function podResizeServed(deps: ActuatorDeps, ref: JobRef): Promise<boolean> {
  try {
    return (await deps.cluster.servesPodResize?.()) === true;
  } catch (error) {
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.warn({ job: ref, error: detail }, 'pods/resize discovery failed; resizing no pod in place');
    return false;
  }
}

function evictedPods(changes: readonly Change[]): string[] {
  return changes.flatMap((c) => (c.kind === 'evict-pod' ? [c.pod] : []));
}

/**
 * Sends the evictions (or, with `probe`, their server-side dry runs) and returns those the API server refused
 * with HTTP 429: a PodDisruptionBudget that allows no disruption now (or the server shedding load, which also
 * processed nothing). Any other failure is thrown as before.
 *
 * Why a dry run before the job's patch, rather than evicting first: the patch must land before the eviction
 * (the pod the controller recreates is made from the patched template: the node to avoid, the new memory), so
 * the eviction cannot go first. The Eviction API's dry run runs the same PodDisruptionBudget check and
 * disrupts nothing, so a refusal is known before anything is written: no decision recorded, no cool-down
 * started, the job as it was, and the next trigger asks again. What remains is a budget spent by someone else
 * between the dry run and the eviction, milliseconds; that refusal is not hidden (Warning Event, outcome).
 */
async function evictionsRefused(
  deps: ActuatorDeps,
  ref: JobRef,
  pods: readonly string[],
  probe: boolean,
): Promise<RefusedEviction[]> {
  const refused: RefusedEviction[] = [];
  for (const pod of pods) {
    try {
      await deps.cluster.evictPod(ref.namespace, pod, { dryRun: probe });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 429)) throw error;
      refused.push({ pod, detail: error.message });
    }
  }
  if (refused.length > 0 && !probe)
    deps.logger.warn({ job: ref, refused }, 'eviction refused after the job was patched; the pod stays');
  return refused;
}

function refusalText(refused: readonly RefusedEviction[]): string {
  return `eviction refused, the pod stays: ${refused.map((r) => `${r.pod} (${r.detail})`).join(', ')}`;
}

/**
 * A plan refused before anything was written: a Warning Event says so. Named after the decision and the
 * refusal, so that triggers retrying the same decision on the same job version record it once.
 */
async function recordRefusal(
  deps: ActuatorDeps,
  view: JobView,
  obj: KubeObject,
  plan: Plan,
  refused: readonly RefusedEviction[],
): Promise<void> {
  const reason = `${plan.reason}; not applied: ${refusalText(refused)}; nothing written, the cool-down unchanged`;
  deps.logger.warn({ job: view.ref, policy: plan.policy, reason }, 'plan not applied: eviction refused');
  try {
    await deps.cluster.createEvent(
      {
        involved: { ref: view.ref, uid: view.uid, apiVersion: obj.apiVersion },
        type: 'Warning',
        reason: 'TrainscalerEvictionRefused',
        message: eventMessage(reason, FULL_REASON_IN_LOG),
        decisionId: `${decisionIdOf(view, plan)}-refused`,
      },
      { dryRun: deps.dryRun },
    );
  } catch (error) {
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.error({ job: view.ref, error: detail }, 'could not record the refused eviction');
  }
}

async function recordEvent(
  deps: ActuatorDeps,
  view: JobView,
  obj: KubeObject,
  plan: Plan,
  decisionId: string,
  evictionRefused: boolean,
): Promise<void> {
  const warning = evictionRefused || plan.policy === 'fault' || plan.changes.some((c) => c.kind === 'pause');
  try {
    await deps.cluster.createEvent(
      {
        involved: { ref: view.ref, uid: view.uid, apiVersion: obj.apiVersion },
        type: warning ? 'Warning' : 'Normal',
        reason: `Trainscaler${plan.policy[0]?.toUpperCase()}${plan.policy.slice(1)}`,
        message: eventMessage(plan.reason, FULL_REASON_IN_ANNOTATION),
        decisionId,
      },
      { dryRun: false },
    );
  } catch (error) {
    // The job write already happened and its annotation is the durable record; a lost Event must not undo it.
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.error({ job: view.ref, error: detail }, 'could not record the audit Event');
  }
}
