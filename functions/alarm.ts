import { actOnJob } from '../lib/actuator.js';
import { readView } from '../lib/cluster/listed-cluster-reads.js';
import { loadCapacity } from '../lib/cluster/load-capacity.js';
import { managingJobOf } from '../lib/cluster/owner-chain.js';
import { profileOwnerOf, readProfileStore } from '../lib/decisions/profile-store.js';
import { decideRuntime, observeJob } from '../lib/decisions/runtime-review.js';
import {
  historiesOf,
  NO_HISTORIES,
  priorSamples,
  signatureRescaleCostOf,
} from '../lib/decisions/signature-histories.js';
import { MissingMetricsError } from '../lib/errors.js';
import { keptWithoutSamples, MissingSamplesError } from '../lib/policies/missing-samples.js';
import { findRole } from '../lib/policies/placement.js';
import { configUnder } from '../lib/policy-governance.js';
import { parseAlarm } from '../lib/triggers/alarm-payload.js';
import type { JobView, Plan } from '../lib/types.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';
import { containJobError } from './job-errors.js';

/** Metric alarm (Alertmanager webhook, CloudWatch via SNS or EventBridge): review each job it names. */
export async function handleAlarm(payload: unknown, deps: HandlerDeps): Promise<HandlerResult> {
  const triggeredAt = deps.clock();
  const triggers = parseAlarm(payload);
  const result: HandlerResult = { trigger: 'alarm', outcomes: [], errors: [] };
  if (triggers.length === 0) return { ...result, ignored: 'no firing alert' };
  // Nodes and pods from the runner's caches (no request), else one paginated list each: never a read per job.
  const { capacity } = await loadCapacity(readView(deps), deps.clock());
  const profiles = await readProfileStore(deps.cluster, deps.profiles).catch((error: unknown) => {
    // A profile only sharpens a running job's fit; without one the job is judged on its own samples.
    deps.logger.warn({ error: String(error) }, 'profile store unreadable: fitting without it');
    return undefined;
  });
  const historyOf = profiles ? historiesOf(profiles) : NO_HISTORIES;
  /** The view with what earlier runs of its signature measured a rescale to cost, when they did. */
  const withEarlierCosts = (view: JobView): JobView => {
    const earlier = profiles && signatureRescaleCostOf(profiles(profileOwnerOf(view)).profile);
    return earlier ? { ...view, signatureRescaleCost: earlier } : view;
  };
  for (const trigger of triggers) {
    let ref = trigger.ref;
    try {
      // A TrainJob's series name its JobSet (infra/prometheus/prometheus.yml): review the TrainJob.
      ref = await managingJobOf((r) => deps.cluster.getJob(r), ref);
      const observed = await observeJob(deps.metrics, ref).catch(async (error: unknown) => {
        // No series for a job that does not exist: say "not found" (getJob throws NotFoundError).
        if (error instanceof MissingMetricsError) await deps.cluster.getJob(ref);
        // A job without step-time samples is never grown on an alert: a "keep" that says what is missing, so
        // that the alert leaves a trace `explain` shows.
        if (error instanceof MissingSamplesError) return error;
        throw error;
      });
      if (observed instanceof MissingSamplesError) {
        const { missing } = observed;
        result.outcomes.push(
          await actOnJob(
            ref,
            (snapshot) => keepWithoutSamples(snapshot.view, missing),
            actuatorDeps(deps, triggeredAt),
          ),
        );
        continue;
      }
      const outcome = await actOnJob(
        ref,
        (snapshot) =>
          decideRuntime(
            { ...snapshot, view: withEarlierCosts(snapshot.view) },
            observed,
            capacity,
            configUnder(snapshot.governing, deps.config),
            deps.clock(),
            deps.throughputOracle,
            priorSamples(
              observed.samples,
              historyOf(profileOwnerOf(snapshot.view)),
              `${ref.kind} ${ref.namespace}/${ref.name}`,
              deps.logger,
            ),
            deps.fitCache,
          ),
        actuatorDeps(deps, triggeredAt),
      );
      result.outcomes.push(outcome);
    } catch (error) {
      result.errors.push(containJobError(ref, error, deps.logger));
    }
  }
  return result;
}

/** The review of a job that has no step-time samples: nothing changes, and the reason says what is missing. */
function keepWithoutSamples(view: JobView, missing: MissingSamplesError['missing']): Plan {
  const kept = keptWithoutSamples(findRole(view, 'Worker')?.replicas, missing);
  return { ref: view.ref, policy: 'tuning', changes: [], reason: kept.reason, details: kept.details };
}
