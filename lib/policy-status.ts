// A TrainingAutoscaler's own status, which only trainscaler writes (through the status subresource): the spec
// generation it read (observedGeneration), how many jobs the policy governs (matchedJobs: `kubectl get tsa`'s
// JOBS) and two conditions, Ready (trainscaler could read the policy) and Conflict (a job it selects is also
// claimed by another policy, and is left alone). Worked out from what the schedule tick has already listed
// (every job, every policy): no read per job or per policy. Written only where something a reader sees changed.
import type { ClusterClient, KubeObject, WriteOptions } from './cluster/cluster-client.js';
import { servedOrEmpty } from './cluster/served-lists.js';
import { ConflictError, TrainscalerError } from './errors.js';
import type { ManagementScope } from './management.js';
import {
  InvalidPolicyError,
  type PolicyJob,
  parseTrainingAutoscaler,
  policyFor,
  type TrainingAutoscaler,
} from './training-autoscaler.js';

export interface PolicyCondition {
  type: 'Ready' | 'Conflict';
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface PolicyStatus {
  observedGeneration?: number;
  matchedJobs: number;
  conditions: PolicyCondition[];
}

/** How many of the conflicting jobs a Conflict message names (the rest are counted). */
export const CONFLICT_NAMES_SHOWN = 5;

const idOf = (namespace: string | undefined, name: string) => `${namespace ?? 'default'}/${name}`;
/** Kubernetes' metav1.Time: RFC 3339 to the second. */
const timeOf = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');

/** What each listed policy's status should say, by `namespace/name`. */
export function policyStatuses(input: {
  policies: readonly KubeObject[];
  jobs: readonly PolicyJob[];
  scope: ManagementScope;
  now: number;
}): Map<string, PolicyStatus> {
  const valid: TrainingAutoscaler[] = [];
  const invalid = new Map<string, InvalidPolicyError>();
  for (const raw of input.policies) {
    try {
      valid.push(parseTrainingAutoscaler(raw));
    } catch (error) {
      if (!(error instanceof InvalidPolicyError)) throw error;
      invalid.set(idOf(raw.metadata.namespace, raw.metadata.name), error);
    }
  }
  const matched = new Map<string, number>();
  const conflicts = new Map<string, string[]>();
  for (const job of input.jobs) {
    const resolution = policyFor(job, valid, input.scope, [...invalid.values()]);
    if (resolution.source === 'targetRef' || resolution.source === 'selector') {
      const id = idOf(resolution.policy.namespace, resolution.policy.name);
      matched.set(id, (matched.get(id) ?? 0) + 1);
    } else if (resolution.source === 'conflict') {
      for (const id of resolution.error.policies)
        conflicts.set(id, [...(conflicts.get(id) ?? []), resolution.error.job]);
    }
  }
  const out = new Map<string, PolicyStatus>();
  for (const raw of input.policies) {
    const id = idOf(raw.metadata.namespace, raw.metadata.name);
    const generation = raw.metadata.generation;
    const bad = invalid.get(id);
    const shared = conflicts.get(id) ?? [];
    const conditions: Omit<PolicyCondition, 'lastTransitionTime'>[] = [
      bad
        ? { type: 'Ready', status: 'False', reason: 'InvalidSpec', message: bad.message }
        : {
            type: 'Ready',
            status: 'True',
            reason: 'Accepted',
            message: 'trainscaler reads this policy; matchedJobs counts the jobs it governs',
          },
      shared.length > 0
        ? { type: 'Conflict', status: 'True', reason: 'JobsClaimedTwice', message: conflictText(shared) }
        : {
            type: 'Conflict',
            status: 'False',
            reason: 'NoConflict',
            message: 'no job it selects is claimed by another policy',
          },
    ];
    const previous = conditionsOf(raw.status);
    const status: PolicyStatus = {
      matchedJobs: matched.get(id) ?? 0,
      conditions: conditions.map((c) => {
        const was = previous.find((p) => p.type === c.type);
        const since =
          was?.status === c.status && typeof was.lastTransitionTime === 'string'
            ? was.lastTransitionTime
            : timeOf(input.now);
        return {
          ...c,
          lastTransitionTime: since,
          ...(generation !== undefined ? { observedGeneration: generation } : {}),
        };
      }),
    };
    if (generation !== undefined) status.observedGeneration = generation;
    out.set(id, status);
  }
  return out;
}

function conflictText(jobs: readonly string[]): string {
  const named = jobs.slice(0, CONFLICT_NAMES_SHOWN).join(', ');
  const more = jobs.length > CONFLICT_NAMES_SHOWN ? ` and ${jobs.length - CONFLICT_NAMES_SHOWN} more` : '';
  return `${jobs.length} job(s) it selects are claimed by another TrainingAutoscaler too and are left alone until one policy no longer matches them: ${named}${more}`;
}

function conditionsOf(status: unknown): Partial<PolicyCondition>[] {
  if (typeof status !== 'object' || status === null) return [];
  const conditions = (status as { conditions?: unknown }).conditions;
  return Array.isArray(conditions) ? (conditions as Partial<PolicyCondition>[]) : [];
}

/** The status as a reader compares it: transition times left out (they change only with a status). */
const shown = (status: unknown) =>
  JSON.stringify(status ?? {}, (key, value: unknown) => (key === 'lastTransitionTime' ? undefined : value));

/**
 * Writes each policy's status where it differs from the one read, guarded by the resourceVersion read (a
 * policy changed since is written on the next tick). Nothing in a dry run, nor from a client that cannot
 * write policy status. A failed write is that policy's, reported, never the tick's.
 */
export async function writePolicyStatuses(
  cluster: Pick<ClusterClient, 'putTrainingAutoscalerStatus'>,
  policies: readonly KubeObject[],
  statuses: ReadonlyMap<string, PolicyStatus>,
  options: WriteOptions,
): Promise<{ written: string[]; failed: { policy: string; error: string }[] }> {
  const written: string[] = [];
  const failed: { policy: string; error: string }[] = [];
  if (options.dryRun || !cluster.putTrainingAutoscalerStatus) return { written, failed };
  for (const raw of policies) {
    const id = idOf(raw.metadata.namespace, raw.metadata.name);
    const status = statuses.get(id);
    if (!status || shown(status) === shown(raw.status)) continue;
    try {
      await cluster.putTrainingAutoscalerStatus(raw, { ...status }, options);
      written.push(id);
    } catch (error) {
      if (error instanceof ConflictError) continue;
      failed.push({ policy: id, error: error instanceof TrainscalerError ? error.message : String(error) });
    }
  }
  return { written, failed };
}

/**
 * The schedule tick's step: every policy's status from the jobs and policies the tick listed (the policy
 * LIST is the one the tick's read view already holds). Never fails the tick: what goes wrong is logged.
 */
export async function recordPolicyStatuses(
  deps: {
    cluster: Pick<ClusterClient, 'listTrainingAutoscalers' | 'putTrainingAutoscalerStatus'>;
    scope: ManagementScope;
    now: number;
    dryRun: boolean;
    logger: { info(o: object, m: string): void; warn(o: object, m: string): void };
  },
  jobs: readonly PolicyJob[],
): Promise<void> {
  try {
    const policies = await servedOrEmpty(deps.cluster.listTrainingAutoscalers?.() ?? Promise.resolve([]));
    if (policies.length === 0) return;
    const statuses = policyStatuses({ policies, jobs, scope: deps.scope, now: deps.now });
    const { written, failed } = await writePolicyStatuses(deps.cluster, policies, statuses, {
      dryRun: deps.dryRun,
    });
    if (written.length > 0) deps.logger.info({ policies: written }, 'TrainingAutoscaler status written');
    for (const f of failed) deps.logger.warn(f, 'could not write the TrainingAutoscaler status');
  } catch (error) {
    const detail = error instanceof TrainscalerError ? error.message : String(error);
    deps.logger.warn({ error: detail }, 'TrainingAutoscaler statuses not worked out');
  }
}
