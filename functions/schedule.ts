import { actOnJob, type JobSnapshot, loadSnapshot } from '../lib/actuator.js';
import { readJob, refOf } from '../lib/adapters/job-adapter.js';
import type { KubeObject } from '../lib/cluster/cluster-client.js';
import { jobStateLookup } from '../lib/cluster/job-state.js';
import { readView } from '../lib/cluster/listed-cluster-reads.js';
import {
  capacityReading,
  exceptPodsOf,
  exceptWaitingPodsOf,
  loadNodesAndPods,
} from '../lib/cluster/load-capacity.js';
import { listAllJobs } from '../lib/cluster/served-lists.js';
import { DEFAULT_JOB_WORK_LIMITS, jobWorkUnder } from '../lib/decisions/job-work.js';
import {
  type ProfileLookup,
  type ProfileOwner,
  profileKey,
  profileOwnerOf,
  readProfileStore,
} from '../lib/decisions/profile-store.js';
import {
  currentPlacement,
  type RuntimeObservations,
  remainingSecondsOf,
  workerNodesOf,
} from '../lib/decisions/runtime-review.js';
import {
  type HistoryLookup,
  historiesOf,
  NO_HISTORIES,
  priorSamples,
  signatureRescaleCostOf,
} from '../lib/decisions/signature-histories.js';
import { readTickMetrics } from '../lib/decisions/tick-metrics.js';
import { managementScope } from '../lib/management.js';
import { jobKey } from '../lib/metrics/job-readings.js';
import { fitRuntimeModelCached } from '../lib/model/fit-cache.js';
import { modelFor, type ThroughputModel } from '../lib/model/throughput-model.js';
import { decideOnFault } from '../lib/policies/faults.js';
import {
  keptWithoutSamples,
  type MissingSamples,
  MissingSamplesError,
} from '../lib/policies/missing-samples.js';
import { findRole, plural } from '../lib/policies/placement.js';
import { profileModel } from '../lib/policies/profiles.js';
import { summarized } from '../lib/policies/reason.js';
import {
  type Arrival,
  decideRebalance,
  type PendingDemand,
  type RebalanceInput,
  type RebalanceJob,
} from '../lib/policies/rebalance.js';
import { configUnder, rebalanceHold } from '../lib/policy-governance.js';
import { recordPolicyStatuses } from '../lib/policy-status.js';
import { parseSchedule } from '../lib/triggers/schedule-payload.js';
import type { JobRef, JobView, Plan, StepSample } from '../lib/types.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult, Outcome } from './handler-deps.js';
import { containJobError } from './job-errors.js';

interface Observed {
  snapshot: JobSnapshot;
  observed: RuntimeObservations | undefined;
  prior: StepSample[];
  /** Without samples: what the job lacks, and its signature's profile model (the only ground to grow it on). */
  missing?: MissingSamples;
  priors?: ThroughputModel;
}

/**
 * The rebalance tick: read every job, fit each one's model from its metrics, and let the rebalance policy
 * move capacity from the lowest marginal gain to the highest, and from lower to higher priority. Each plan is
 * applied only if the job is still at the version the plan was made on; otherwise the next tick recomputes.
 */
export async function handleSchedule(payload: unknown, given: HandlerDeps): Promise<HandlerResult> {
  parseSchedule(payload);
  // The tick reads each kind once, cluster-wide (or from the runner's caches), whatever the number of jobs;
  // a job is read from the API server again only right before a write to it (lib/cluster/listed-cluster-reads.ts).
  const deps: HandlerDeps = { ...given, cluster: readView(given) };
  const result: HandlerResult = { trigger: 'schedule', outcomes: [], errors: [] };
  // One reading of which pods are leaving serves the whole tick: the stranded jobs' capacity is the same list's.
  // Taken first, it is also when the tick reached the handler: the cool-down of what it writes counts from it.
  const listedAt = deps.clock();
  const state = await loadNodesAndPods(deps.cluster);
  // A queued job is valued by how soon it would finish, from earlier runs of its signature: the store is read
  // at most once a tick, each signature fitted at most once.
  let store: Promise<ProfileLookup> | undefined;
  const profileStore = () => {
    store ??= readProfileStore(deps.cluster, deps.profiles);
    return store;
  };
  const models = new Map<string, Promise<ThroughputModel | undefined>>();
  const profileModelOf = (owner: ProfileOwner) => {
    const key = profileKey(owner);
    let model = models.get(key);
    if (!model) {
      model = profileStore().then((lookup) => {
        const { profile, problem } = lookup(owner);
        if (problem) deps.logger.warn({ profile: owner }, problem);
        const fitted = profileModel(profile);
        return fitted && modelFor(fitted, owner.signature, deps.throughputOracle);
      });
      models.set(key, model);
    }
    return model;
  };
  // A running job's fit also learns from its signature's profile, where that agrees with the job.
  let histories: Promise<HistoryLookup> | undefined;
  const historyOf = (owner: ProfileOwner) => {
    histories ??= profileStore().then(historiesOf, (error: unknown) => {
      deps.logger.warn({ error: String(error) }, 'profile store unreadable: fitting without it');
      return NO_HISTORIES;
    });
    return histories.then((lookup) => lookup(owner));
  };
  const earlierRescaleCostOf = (owner: ProfileOwner) => {
    return profileStore().then(
      (lookup) => signatureRescaleCostOf(lookup(owner).profile),
      () => undefined, // unreadable: warned where the fit reads it; the cost comes from the launch or the default
    );
  };
  const jobs: Observed[] = [];
  const pending: PendingDemand[] = [];
  const arrivals: Arrival[] = [];
  const stranded: JobSnapshot[] = [];
  const listed = await listAllJobs(deps.cluster);
  // trainscaler's state of every job (cool-downs, largest runs, measured costs), in one LIST: never a read per
  // job, and never the jobs' own annotations.
  const states = jobStateLookup(await deps.cluster.listJobStates());
  // Every managed job's metrics in one batch read (a bounded number of PromQL queries, whatever the number of
  // jobs); the loop takes each job's entry, a failed read being that job's error only.
  // Each listed job read into its view once: the batch read picks the managed jobs by it, and the job's
  // review (loadSnapshot) takes the same reading while the job is the one listed (2 s of a 10,000-job tick).
  const listedViews = new WeakMap<KubeObject, JobView>();
  const viewOf = (obj: KubeObject): JobView => {
    let view = listedViews.get(obj);
    if (!view) {
      view = readJob(obj, managementScope(deps.config));
      listedViews.set(obj, view);
    }
    return view;
  };
  const metrics = await readTickMetrics(deps.metrics, listed, managementScope(deps.config), states, viewOf);
  for (const obj of listed) {
    const ref = refOf(obj);
    try {
      const snapshot = await loadSnapshot(
        deps.cluster,
        ref,
        deps.priorityClasses,
        managementScope(deps.config),
        states,
        viewOf,
      );
      // The rebalance weighs each job's own rescale costs once they are measured.
      if (snapshot.view.managed) snapshot.view.state = await metrics.measure(snapshot.view);
      for (const demand of pendingDemands(snapshot)) {
        if (demand.placed === 0 && snapshot.view.managed) {
          const model = await profileModelOf(profileOwnerOf(snapshot.view));
          if (model) demand.model = model;
        }
        pending.push(demand);
      }
      if (snapshot.view.managed) noteArrival(arrivals, snapshot.view);
      if (!snapshot.view.managed || snapshot.pods.every((p) => p.phase === 'Succeeded')) continue;
      if (hasStrandedPods(snapshot)) stranded.push(snapshot);
      // Missing metrics reach here as MissingSamplesError (runtime-review.ts), saying what the job lacks.
      let missing: MissingSamples | undefined;
      const observed = await metrics.observe(ref).catch((error: unknown) => {
        if (!(error instanceof MissingSamplesError)) throw error;
        missing = error.missing;
        return undefined;
      });
      // A job without samples may grow only on its signature's profile (rebalance.ts probeUnmodelled).
      const priors = observed
        ? undefined
        : await profileModelOf(profileOwnerOf(snapshot.view)).catch(() => undefined);
      const prior = observed
        ? priorSamples(
            observed.samples,
            await historyOf(profileOwnerOf(snapshot.view)),
            jobKey(ref),
            deps.logger,
          )
        : [];
      // Before trainscaler has measured a rescale of this job, what earlier runs of its signature measured (the
      // store was read above, for the fit or the profile model).
      const earlier = await earlierRescaleCostOf(profileOwnerOf(snapshot.view));
      if (earlier) snapshot.view.signatureRescaleCost = earlier;
      jobs.push({
        snapshot,
        observed,
        prior,
        ...(missing ? { missing } : {}),
        ...(priors ? { priors } : {}),
      });
    } catch (error) {
      result.errors.push(containJobError(ref, error, deps.logger));
    }
  }
  // A job whose pods partly run and partly wait for room no pod event will bring (a shrink that a guardrail
  // clamped, a node gone): the fault policy's answer to unplaceable pods, as on a pod event, every tick.
  const reviewed = new Set<string>();
  const capacityHolding = capacityReading(state.nodes, state.pods, { now: listedAt });
  const written = actuatorDeps({ ...deps, metrics: metrics.source }, listedAt);
  const runJob = jobWorkUnder(
    deps.jobWork ?? DEFAULT_JOB_WORK_LIMITS,
    Number.isFinite(deps.config.maxClusterGpus),
  );
  const faults = await settleInOrder(
    stranded.map((snapshot) => ({ ref: snapshot.view.ref })),
    ({ ref }) =>
      runJob(ref, (signal) =>
        actOnJob(
          ref,
          (current) =>
            decideOnFault({
              job: current.view,
              pods: current.pods,
              capacity: capacityHolding(exceptPodsOf(ref)),
              config: configUnder(current.governing, deps.config),
              now: deps.clock(),
            }),
          // Most of these reviews change nothing: decided on the listed job, read live only to write.
          { ...written, signal, decideOnListedFirst: true },
        ),
      ),
  );
  for (const { ref, outcome, error } of faults) {
    if (outcome) {
      result.outcomes.push(outcome);
      if (outcome.plan.changes.length > 0) reviewed.add(jobKey(ref));
    } else result.errors.push(containJobError(ref, error, deps.logger));
  }
  const now = deps.clock();
  // Each job's entry is its own work: a job whose model cannot be fitted or asked is reported, not fatal.
  const entries: RebalanceJob[] = [];
  for (const job of jobs) {
    const { view } = job.snapshot;
    if (reviewed.has(jobKey(view.ref))) continue;
    // Scaled to 0 workers by its owner (a Master may still run): no speed to model and not trainscaler's to
    // restart, so the rebalance neither asks its model nor grows it.
    if (findRole(view, 'Worker')?.replicas === 0) {
      result.outcomes.push(keepOutcome(view, deps));
      continue;
    }
    try {
      const entry = rebalanceEntryOf(job, deps);
      // A job whose policy would drop the rebalance's move of it is planned around, not moved.
      const held = rebalanceHold(job.snapshot.governing, view, deps.config, now);
      entries.push(held ? { ...entry, job: { ...view, managed: false, unmanagedReason: held } } : entry);
    } catch (error) {
      result.errors.push(containJobError(job.snapshot.view.ref, error, deps.logger));
    }
  }
  const toPlace = pending.filter((d) => !reviewed.has(jobKey(d.job.ref)));
  const failed = new Set<string>();
  for (const demand of toPlace) if (demand.model) demand.model = answeringFor(demand.job.ref, demand.model);
  const plans = rebalanceIsolated(
    {
      jobs: entries,
      pending: toPlace,
      // The rebalance places the waiting pods of `toPlace` itself (or holds their room): held here as well, a
      // queued job whose pods fit in free room would seem not to, and running jobs would shrink for it.
      capacity: capacityHolding(exceptWaitingPodsOf(toPlace.map((d) => d.job.ref))),
      config: deps.config,
      now,
      arrivals,
    },
    (ref, error) => {
      failed.add(jobKey(ref));
      result.errors.push(containJobError(ref, error, deps.logger));
    },
  );
  const rebalanced = entries.filter((e) => !failed.has(jobKey(e.job.ref)));
  const planned = new Map(jobs.map((j) => [jobKey(j.snapshot.view.ref), j.snapshot.view.resourceVersion]));
  const applied = await settleInOrder(plans, (plan) =>
    runJob(plan.ref, (signal) =>
      actOnJob(plan.ref, (snapshot) => stillValid(plan, snapshot, planned.get(jobKey(plan.ref))), {
        ...written,
        signal,
      }),
    ),
  );
  for (const { ref, outcome, error } of applied) {
    if (outcome) result.outcomes.push(outcome);
    else result.errors.push(containJobError(ref, error, deps.logger));
  }
  // Jobs the rebalance considered and left alone: a "keep" outcome each, so that why is answerable.
  const moved = new Set([...plans.map((p) => jobKey(p.ref)), ...reviewed]);
  for (const { job, missing } of rebalanced) {
    if (!moved.has(jobKey(job.ref))) result.outcomes.push(keepOutcome(job, deps, missing));
  }
  // The policies' own status (matchedJobs, Ready, Conflict), from what this tick listed.
  await recordPolicyStatuses(
    { ...deps, scope: managementScope(deps.config), now: listedAt, dryRun: deps.dryRun },
    listed,
  );
  deps.logger.info(
    {
      trigger: 'schedule',
      jobs: listed.length,
      managed: jobs.length,
      withoutMetrics: jobs.filter((j) => !j.observed).length,
      pendingDemands: pending.length,
      stranded: stranded.length,
      plans: plans.length + reviewed.size,
      applied: result.outcomes.filter((o) => o.applied).length,
      changed: result.outcomes
        .filter((o) => o.plan.changes.length > 0)
        .map((o) => `${o.ref.namespace}/${o.ref.name}: ${o.plan.reason}`),
      errors: result.errors.length,
    },
    'schedule tick',
  );
  return result;
}

/** Some pods of the job run (or are bound) while others wait unbound: the peers may wait for them forever. */
export function hasStrandedPods(snapshot: JobSnapshot): boolean {
  const live = snapshot.pods.filter((p) => p.phase !== 'Succeeded' && p.phase !== 'Failed');
  // Gated pods wait on purpose (Kueue ungates a scale-up's pods once their workload slice is admitted).
  return (
    live.some((p) => p.nodeName) &&
    live.some((p) => p.phase === 'Pending' && !p.nodeName && !p.schedulingGated)
  );
}

function keepOutcome(view: JobSnapshot['view'], deps: HandlerDeps, missing?: MissingSamples): Outcome {
  const plan: Plan = { ref: view.ref, policy: 'rebalance', changes: [], reason: keepReason(view, deps) };
  // Left alone for lack of samples, where nothing that comes first (paused, Kueue, not elastic) says why.
  if (missing && view.elastic && !view.state.paused && !view.kueue) {
    const kept = keptWithoutSamples(findRole(view, 'Worker')?.replicas, missing);
    plan.reason = kept.reason;
    plan.details = kept.details;
  }
  return { ref: view.ref, plan: summarized(plan), applied: false, skipped: 'no-change' };
}

function keepReason(view: JobSnapshot['view'], deps: HandlerDeps): string {
  const workers = findRole(view, 'Worker')?.replicas;
  const what = workers === undefined ? 'no Worker role' : `keep ${plural(workers, 'worker')}`;
  if (workers === 0) return `${what}: scaled to 0 workers by its owner; trainscaler starts none`;
  if (!view.managed) return `${what}: ${view.unmanagedReason ?? 'not managed'}`;
  if (view.state.paused) return `${what}: paused (${view.state.pauseReason ?? 'by trainscaler'})`;
  if (view.kueue)
    return `${what}: managed by Kueue (${view.kueue}); the cluster-wide rebalance leaves it to Kueue's priorities and preemption`;
  if (!view.elastic) return `${what}: not elastic`;
  const last = view.state.lastActionAt;
  if (last !== undefined && deps.clock() - last < deps.config.cooldownSeconds)
    return `${what}: cool-down (last change ${Math.round(deps.clock() - last)} s ago)`;
  return `${what}: no move of a worker to or from this job gains enough`;
}

/** Waiting pods per role, with one pod's requests as the shape (the roles' pods are alike). */
export function pendingDemands(snapshot: JobSnapshot): PendingDemand[] {
  const out: PendingDemand[] = [];
  for (const role of snapshot.view.roles) {
    const pods = snapshot.pods.filter(
      (p) => p.role === role.role && p.phase !== 'Succeeded' && p.phase !== 'Failed',
    );
    const waiting = pods.filter((p) => p.phase === 'Pending' && !p.nodeName && !p.schedulingGated);
    const shape = waiting[0];
    if (!shape) continue;
    out.push({
      job: snapshot.view,
      demand: shape.requests,
      pods: waiting.length,
      role: role.role,
      placed: pods.length - waiting.length,
    });
  }
  return out;
}

/** A managed job's creation and the GPUs its workers asked for: the rebalance keeps room for the next ones. */
function noteArrival(arrivals: Arrival[], view: JobView): void {
  const worker = findRole(view, 'Worker');
  if (view.creationTimestamp === undefined || !worker) return;
  const asked = view.state.askedWorkers ?? worker.replicas;
  arrivals.push({ at: view.creationTimestamp, gpus: asked * worker.requests.gpus });
}

/** One running job as the rebalance sees it: its model, where it runs, how long it has left. */
function rebalanceEntryOf(
  { snapshot, observed, prior, missing, priors }: Observed,
  deps: HandlerDeps,
): RebalanceJob {
  const { view } = snapshot;
  const current = currentPlacement(snapshot, observed?.samples ?? []);
  const fitted = observed
    ? modelFor(
        fitRuntimeModelCached(deps.fitCache, view, observed.samples, prior),
        view.signature,
        deps.throughputOracle,
      )
    : undefined;
  const entry: RebalanceJob = { job: view, model: fitted && answeringFor(view.ref, fitted), current };
  if (missing) entry.missing = missing;
  if (priors) entry.priors = answeringFor(view.ref, priors);
  const workerNodes = workerNodesOf(snapshot.pods, current.replicas);
  if (workerNodes) entry.workerNodes = workerNodes;
  const remaining =
    observed && fitted ? remainingSecondsOf(view, observed, fitted.predict(current).throughput) : undefined;
  if (remaining !== undefined) entry.remainingSeconds = remaining;
  return entry;
}

/** A job's model failed to answer inside the cluster-wide rebalance: whose it was travels with the error. */
class JobModelError extends Error {
  constructor(
    readonly ref: JobRef,
    override readonly cause: unknown,
  ) {
    super(`the model of ${jobKey(ref)} failed`, { cause });
  }
}

/** The model, with any failure of its predictions marked as this job's. */
function answeringFor(ref: JobRef, model: ThroughputModel): ThroughputModel {
  return {
    sampleCount: model.sampleCount,
    distinctScales: model.distinctScales,
    predict(placement) {
      try {
        return model.predict(placement);
      } catch (error) {
        throw new JobModelError(ref, error);
      }
    },
  };
}

/**
 * The rebalance without the jobs whose models fail: each failure is reported for its job (through
 * `failedJob`) and the rebalance is computed again without that job, so one job's model never costs the
 * others their tick. Bounded: every round removes at least one job.
 */
function rebalanceIsolated(
  input: RebalanceInput & { pending: PendingDemand[] },
  failedJob: (ref: JobRef, error: unknown) => void,
): Plan[] {
  let { jobs, pending } = input;
  for (;;) {
    try {
      return decideRebalance({ ...input, jobs, pending });
    } catch (error) {
      if (!(error instanceof JobModelError)) throw error;
      const failed = jobKey(error.ref);
      const before = jobs.length + pending.length;
      jobs = jobs.filter((j) => jobKey(j.job.ref) !== failed);
      pending = pending.filter((d) => jobKey(d.job.ref) !== failed);
      if (jobs.length + pending.length === before) throw error.cause;
      failedJob(error.ref, error.cause);
    }
  }
}

function stillValid(plan: Plan, snapshot: JobSnapshot, plannedVersion: string | undefined): Plan {
  if (snapshot.view.resourceVersion === plannedVersion) return plan;
  return {
    ...plan,
    changes: [],
    reason: 'job changed since the rebalance snapshot; the next tick recomputes',
  };
}

/** Each job's outcome or error, in the order of `jobs` whatever order the work ends in: a tick's result reads alike run to run. */
async function settleInOrder<T extends { ref: JobRef }>(
  jobs: readonly T[],
  work: (job: T) => Promise<Outcome>,
): Promise<Array<{ ref: JobRef; outcome?: Outcome; error?: unknown }>> {
  const settled = await Promise.allSettled(jobs.map(work));
  return jobs.map(({ ref }, i) => {
    const s = settled[i];
    return s?.status === 'fulfilled' ? { ref, outcome: s.value } : { ref, error: s?.reason };
  });
}
