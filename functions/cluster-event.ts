import { actOnJob } from '../lib/actuator.js';
import { ANNOTATION } from '../lib/adapters/annotations.js';
import { hasSucceeded, readJob } from '../lib/adapters/job-adapter.js';
import { trustedStateOf } from '../lib/cluster/job-state.js';
import { capacityOf, exceptPodsOf, loadCapacity } from '../lib/cluster/load-capacity.js';
import { recordRun } from '../lib/decisions/profile-store.js';
import { MissingMetricsError } from '../lib/errors.js';
import { type ManagementScope, managementOf, managementScope } from '../lib/management.js';
import { decideOnFault } from '../lib/policies/faults.js';
import type { FinishedRun } from '../lib/policies/profiles.js';
import { configUnder, governView, resolveJobPolicy } from '../lib/policy-governance.js';
import { parseClusterEvent } from '../lib/triggers/cluster-event-payload.js';
import type { JobAutoscalerState } from '../lib/types.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';
import { containJobError } from './job-errors.js';

/**
 * A pod or job changed. Pod changes are checked for faults (OOM kill, eviction, preemption, crash loop);
 * a job that succeeded has its run merged into its signature's profile for the next submission.
 */
export async function handleClusterEvent(payload: unknown, deps: HandlerDeps): Promise<HandlerResult> {
  const triggeredAt = deps.clock();
  const trigger = parseClusterEvent(payload);
  const result: HandlerResult = { trigger: 'cluster-event', outcomes: [], errors: [] };
  if (trigger.subject === 'ignored') return { ...result, ignored: trigger.why };
  const { ref } = trigger;
  try {
    if (trigger.subject === 'job') {
      if (trigger.type === 'DELETED' || !hasSucceeded(trigger.job))
        return { ...result, ignored: 'job event without completion' };
      // The payload says which job; whether it is managed and really succeeded is read from the API server,
      // since a forged or replayed event must not write into the profile store every tenant shares.
      const live = await deps.cluster.getJob(ref);
      const view = readJob(live, managementScope(deps.config));
      governView(view, live, await resolveJobPolicy(deps.cluster, live, managementScope(deps.config)));
      if (!view.managed) return { ...result, ignored: `not managed: ${view.unmanagedReason ?? ''}` };
      if (!hasSucceeded(live))
        return { ...result, ignored: 'the API server does not report the job succeeded' };
      const samples = await deps.metrics.stepSamples(ref, 24 * 3600);
      const usage = await deps.metrics.containerUsage(ref, 24 * 3600).catch((error: unknown) => {
        if (error instanceof MissingMetricsError) return [];
        throw error;
      });
      // The run's measured rescale pauses, from trainscaler's own status of the job (tenants cannot write it,
      // docs/security.md): the next run of the signature starts from them.
      const rescaleCost = measuredRescaleCost(trustedStateOf(live, await deps.cluster.getJobState(ref)));
      await recordRun(
        deps.cluster,
        deps.profiles,
        {
          namespace: ref.namespace,
          signature: view.signature,
          samples,
          usage,
          ...(rescaleCost ? { rescaleCost } : {}),
        },
        deps.clock(),
        deps.dryRun,
        { logger: deps.logger },
      );
      return { ...result, ignored: `profile of ${view.signature} updated` };
    }
    if (trigger.type === 'DELETED') return { ...result, ignored: 'pod deleted' };
    // Whether the job is managed comes before any cluster-wide read: a tenant's churn of pods of jobs
    // trainscaler does not manage costs at most the one GET that tells, and nothing where the namespace does.
    const scope = managementScope(deps.config);
    const excluded = unmanagedNamespace(ref.namespace, scope);
    if (excluded) return { ...result, ignored: `not managed: ${excluded}` };
    // The job's TrainingAutoscaler may opt it in, or out (Off): one LIST of its namespace's policies.
    const job = await deps.cluster.getJob(ref);
    const view = readJob(job, scope);
    governView(view, job, await resolveJobPolicy(deps.cluster, job, scope));
    if (!view.managed) return { ...result, ignored: `not managed: ${view.unmanagedReason ?? ''}` };
    const now = deps.clock();
    const cluster = await loadCapacity(deps.cluster, now);
    const capacity = capacityOf(cluster.nodes, cluster.pods, { holdRoomFor: exceptPodsOf(ref), now });
    const outcome = await actOnJob(
      ref,
      (snapshot) =>
        decideOnFault({
          job: snapshot.view,
          pods: snapshot.pods,
          capacity,
          config: configUnder(snapshot.governing, deps.config),
          now: deps.clock(),
        }),
      actuatorDeps(deps, triggeredAt),
    );
    result.outcomes.push(outcome);
  } catch (error) {
    result.errors.push(containJobError(ref, error, deps.logger));
  }
  return result;
}

/** Why no job of this namespace is managed, whatever the job says (system, trainscaler's own, not listed). */
function unmanagedNamespace(namespace: string, scope: ManagementScope): string | undefined {
  const optedIn = managementOf({ namespace, labels: { [ANNOTATION.managed]: 'true' } }, scope);
  return optedIn.managed ? undefined : optedIn.why;
}

/** A finished run's last measured pauses (a growth's pause, a shrink's patch to first step), if any. */
function measuredRescaleCost(state: JobAutoscalerState): FinishedRun['rescaleCost'] {
  const { upPause, down } = state.rescaleCost ?? {};
  if (upPause === undefined && down === undefined) return undefined;
  return { ...(upPause !== undefined ? { up: upPause } : {}), ...(down !== undefined ? { down } : {}) };
}
