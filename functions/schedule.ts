import { actOnJob, type JobSnapshot, loadSnapshot } from '../lib/actuator.js';
import { refOf, SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import { addResources, ZERO_RESOURCES } from '../lib/cluster/capacity.js';
import { loadCapacity } from '../lib/cluster/load-capacity.js';
import { currentPlacement, observeJob, type RuntimeObservations } from '../lib/decisions/runtime-review.js';
import { NotFoundError, TrainscalerError } from '../lib/errors.js';
import { fitThroughputModel } from '../lib/model/throughput-model.js';
import { decideRebalance } from '../lib/policies/rebalance.js';
import { parseSchedule } from '../lib/triggers/schedule-payload.js';
import type { Plan } from '../lib/types.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';
import { containJobError } from './job-errors.js';

interface Observed {
  snapshot: JobSnapshot;
  observed: RuntimeObservations | undefined;
}

async function listAllJobs(deps: HandlerDeps) {
  const lists = await Promise.all(
    SUPPORTED_KINDS.map((kind) =>
      deps.cluster.listJobs(kind).catch((error: unknown) => {
        // A cluster without the Kubeflow CRDs simply has no such jobs.
        if (error instanceof NotFoundError) return [];
        throw error;
      }),
    ),
  );
  return lists.flat();
}

/**
 * The rebalance tick: read every job, fit each one's model from its metrics, and let the rebalance policy
 * move capacity from the lowest marginal gain to the highest, and from lower to higher priority. Each plan is
 * applied only if the job is still at the version the plan was made on; otherwise the next tick recomputes.
 */
export async function handleSchedule(payload: unknown, deps: HandlerDeps): Promise<HandlerResult> {
  parseSchedule(payload);
  const result: HandlerResult = { trigger: 'schedule', outcomes: [], errors: [] };
  const { capacity } = await loadCapacity(deps.cluster);
  const jobs: Observed[] = [];
  const pending: Array<{ job: JobSnapshot['view']; demand: typeof ZERO_RESOURCES; pods: number }> = [];
  for (const obj of await listAllJobs(deps)) {
    const ref = refOf(obj);
    try {
      const snapshot = await loadSnapshot(deps.cluster, ref, deps.priorityClasses);
      const waiting = snapshot.pods.filter((p) => p.phase === 'Pending' && !p.nodeName);
      if (waiting.length > 0) {
        const demand = waiting.reduce((acc, p) => addResources(acc, p.requests), ZERO_RESOURCES);
        pending.push({ job: snapshot.view, demand, pods: waiting.length });
      }
      if (!snapshot.view.managed || snapshot.pods.every((p) => p.phase === 'Succeeded')) continue;
      const observed = await observeJob(deps.metrics, ref).catch((error: unknown) => {
        if (error instanceof TrainscalerError && error.code === 'MISSING_METRICS') return undefined;
        throw error;
      });
      jobs.push({ snapshot, observed });
    } catch (error) {
      result.errors.push(containJobError(ref, error, deps.logger));
    }
  }
  const now = deps.clock();
  const plans = decideRebalance({
    jobs: jobs.map(({ snapshot, observed }) => {
      const entry: Parameters<typeof decideRebalance>[0]['jobs'][number] = {
        job: snapshot.view,
        model: observed ? fitThroughputModel(observed.samples) : undefined,
        current: currentPlacement(snapshot, observed?.samples ?? []),
      };
      return entry;
    }),
    pending,
    capacity,
    config: deps.config,
    now,
  });
  const planned = new Map(jobs.map((j) => [key(j.snapshot.view.ref), j.snapshot.view.resourceVersion]));
  for (const plan of plans) {
    try {
      const outcome = await actOnJob(
        plan.ref,
        (snapshot) => stillValid(plan, snapshot, planned.get(key(plan.ref))),
        actuatorDeps(deps),
      );
      result.outcomes.push(outcome);
    } catch (error) {
      result.errors.push(containJobError(plan.ref, error, deps.logger));
    }
  }
  return result;
}

function key(ref: Plan['ref']): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

function stillValid(plan: Plan, snapshot: JobSnapshot, plannedVersion: string | undefined): Plan {
  if (snapshot.view.resourceVersion === plannedVersion) return plan;
  return {
    ...plan,
    changes: [],
    reason: 'job changed since the rebalance snapshot; the next tick recomputes',
  };
}
