import type { V1Pod } from '@kubernetes/client-node';
import { actOnJob, decisionIdOf, type JobSnapshot, type Outcome } from '../lib/actuator.js';
import { EVENT_MESSAGE_LIMIT, eventMessage, FULL_REASON_IN_LOG } from '../lib/cluster/event-message.js';
import { capacityOf, exceptPodsOf, loadCapacity, podsOf } from '../lib/cluster/load-capacity.js';
import { loadProfile, profileOwnerOf } from '../lib/decisions/profile-store.js';
import { runningPeersOf } from '../lib/decisions/running-peers.js';
import { modelFor } from '../lib/model/throughput-model.js';
import { decideInitialConfig, rendezvousAdvice } from '../lib/policies/initial-config.js';
import { profileModel } from '../lib/policies/profiles.js';
import { configUnder } from '../lib/policy-governance.js';
import { parseSubmit } from '../lib/triggers/submit-payload.js';
import type { JobView, Plan } from '../lib/types.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';
import { containJobError } from './job-errors.js';

/** A submit event older than this (by the job's creationTimestamp) is late or replayed: the job is not new. */
export const SUBMIT_WINDOW_SECONDS = 300;
/** A training container running longer than this has started training; resizing now would restart it. */
export const STARTED_AFTER_SECONDS = 30;

function runningSince(pod: V1Pod): number | undefined {
  const starts = (pod.status?.containerStatuses ?? [])
    .map((s) => s.state?.running?.startedAt)
    .filter((t): t is Date => t !== undefined)
    .map((t) => new Date(t).getTime() / 1000)
    .filter(Number.isFinite);
  return starts.length > 0 ? Math.min(...starts) : undefined;
}

/**
 * Why the job is past its initial configuration, if it is: initial configuration is for a job that has not
 * started yet. The payload says only which job; whether it is new is read from the live job and its pods.
 */
export function alreadyStarted(snapshot: JobSnapshot, now: number): string | undefined {
  const { view, pods, rawPods } = snapshot;
  if (view.state.lastDecisionId !== undefined || view.state.lastActionAt !== undefined)
    return 'trainscaler already configured it';
  if (view.creationTimestamp !== undefined && now - view.creationTimestamp > SUBMIT_WINDOW_SECONDS)
    return `created ${Math.round(now - view.creationTimestamp)} s ago (a late or replayed submit)`;
  const ran = pods.find((p) => p.restartCount > 0 || p.phase === 'Succeeded' || p.phase === 'Failed');
  if (ran) return `pod ${ran.name} has already run (${ran.phase}, ${ran.restartCount} restarts)`;
  for (const pod of rawPods) {
    const since = runningSince(pod);
    if (since !== undefined && now - since > STARTED_AFTER_SECONDS)
      return `pod ${pod.metadata?.name ?? ''} has been training for ${Math.round(now - since)} s`;
  }
  return undefined;
}

/** A job was submitted: configure its initial size from earlier runs of the same signature and free capacity. */
export async function handleSubmit(payload: unknown, deps: HandlerDeps): Promise<HandlerResult> {
  const triggeredAt = deps.clock();
  const ref = parseSubmit(payload);
  const cluster = await loadCapacity(deps.cluster, triggeredAt);
  let advised: JobView | undefined;
  let outcome: Outcome;
  try {
    outcome = await actOnJob(
      ref,
      async (snapshot): Promise<Plan> => {
        const started = alreadyStarted(snapshot, deps.clock());
        if (started)
          return {
            ref,
            policy: 'initial',
            changes: [],
            reason: `not a new job: ${started}; configuration kept`,
          };
        const { profile, problem } = await loadProfile(
          deps.cluster,
          deps.profiles,
          profileOwnerOf(snapshot.view),
        );
        if (problem) deps.logger.warn({ job: ref }, problem);
        // Only a memory limit of a managed job is ever raised from them: no reads for any other job.
        const limited = snapshot.view.managed && snapshot.view.roles.some((r) => r.limits.memoryBytes > 0);
        const peers = limited
          ? await runningPeersOf(snapshot.view, deps.cluster, deps.metrics, deps.config).catch(
              (error: unknown) => {
                // Sizing goes on without them, as without a profile: the user's numbers stand.
                deps.logger.warn(
                  { job: ref, error: String(error) },
                  'could not read running jobs of the signature',
                );
                return undefined;
              },
            )
          : undefined;
        const fitted = profileModel(profile);
        const model = fitted && modelFor(fitted, snapshot.view.signature, deps.throughputOracle);
        // A job may size itself into what lower-priority pods hold: the scheduler preempts them for it. Its own
        // pods, bound already or not, are what is being sized: their room counts as free.
        const capacity = capacityOf(cluster.nodes, cluster.pods, {
          preemptibleBelow: snapshot.view.priority,
          holdRoomFor: exceptPodsOf(ref),
          resize: podsOf(ref),
          now: deps.clock(),
        });
        if (rendezvousAdvice(snapshot.view)) advised = snapshot.view;
        return decideInitialConfig({
          job: snapshot.view,
          profile,
          model,
          capacity,
          config: configUnder(snapshot.governing, deps.config),
          ...(peers ? { peers } : {}),
        });
      },
      actuatorDeps(deps, triggeredAt),
    );
  } catch (error) {
    // As on every other trigger: a job deleted before its read, or an API error on it, is this job's outcome,
    // logged below error level, not a failed handler (a job applied and deleted at once is routine).
    return { trigger: 'submit', outcomes: [], errors: [containJobError(ref, error, deps.logger)] };
  }
  if (advised && outcome.skipped === 'no-change' && !deps.dryRun)
    await recordAdvice(deps, advised, outcome.plan);
  return { trigger: 'submit', outcomes: [outcome], errors: [] };
}

/**
 * A recommendation that writes nothing to the job (the rendezvous settings, when the user has not allowed
 * trainscaler to set them; the launcher; what elasticPolicy.maxRestarts allows) still reaches the user as an Event on the job, named after the decision so a
 * replayed submit records it once. A decision that writes gets its Event from the actuator.
 */
async function recordAdvice(deps: HandlerDeps, view: JobView, plan: Plan): Promise<void> {
  // The advice is this Event's whole point (nothing else reaches the job's owner), so it carries the details
  // the decision's one-line reason leaves out, once per submit.
  const advice = [plan.reason, ...(plan.details ?? [])].join('; ');
  if (advice.length > EVENT_MESSAGE_LIMIT)
    deps.logger.info({ job: view.ref, reason: advice }, 'torchelastic advice (the Event carries it cut)');
  try {
    await deps.cluster.createEvent(
      {
        involved: { ref: view.ref, uid: view.uid, apiVersion: 'kubeflow.org/v1' },
        type: 'Normal',
        reason: 'TrainscalerInitial',
        message: eventMessage(advice, FULL_REASON_IN_LOG),
        decisionId: decisionIdOf(view, plan),
      },
      { dryRun: false },
    );
  } catch (error) {
    deps.logger.error(
      { job: view.ref, error: String(error) },
      'could not record the torchelastic advice Event',
    );
  }
}
