// trainscaler's per-job state (ScaledTrainingJob status) for the test fakes of ClusterClient: an in-memory
// store with the API server's guards (create once, status writes pinned on resourceVersion), and a way to
// give a job a recorded state as trainscaler would have written it.
import type {
  ClusterClient,
  JobIdentity,
  JobStateObject,
  WriteOptions,
} from '../../lib/cluster/cluster-client.js';
import { jobStateName } from '../../lib/cluster/job-state.js';
import { ConflictError, NotFoundError } from '../../lib/errors.js';
import type { JobAutoscalerState, JobRef } from '../../lib/types.js';

export class MemoryJobStates implements Pick<ClusterClient, 'getJobState' | 'listJobStates' | 'putJobState'> {
  readonly objects = new Map<string, JobStateObject>();
  readonly writes: { job: JobIdentity; status: Record<string, unknown> }[] = [];
  #revision = 0;

  async getJobState(ref: JobRef): Promise<JobStateObject | undefined> {
    const found = this.objects.get(`${ref.namespace}/${jobStateName(ref.kind, ref.name)}`);
    return found ? structuredClone(found) : undefined;
  }

  async listJobStates(): Promise<JobStateObject[]> {
    return [...this.objects.values()].map((o) => structuredClone(o));
  }

  async putJobState(
    job: JobIdentity,
    status: Record<string, unknown>,
    current: JobStateObject | undefined,
    options: WriteOptions,
  ): Promise<JobStateObject> {
    const name = jobStateName(job.ref.kind, job.ref.name);
    const key = `${job.ref.namespace}/${name}`;
    const existing = this.objects.get(key);
    if (current === undefined && existing) throw new ConflictError(`${key} (already exists)`);
    if (current !== undefined) {
      if (!existing) throw new NotFoundError(key);
      if (existing.resourceVersion !== current.resourceVersion) throw new ConflictError(key);
    }
    const next: JobStateObject = {
      namespace: job.ref.namespace,
      name,
      resourceVersion: `s${++this.#revision}`,
      target: { apiVersion: job.apiVersion, kind: job.ref.kind, name: job.ref.name },
      ownerUid: job.uid,
      status: structuredClone(status),
    };
    if (options.dryRun) return next;
    this.objects.set(key, next);
    this.writes.push({ job, status: structuredClone(status) });
    return structuredClone(next);
  }
}

/** Gives the job a state as trainscaler records it (its ScaledTrainingJob's status), created or replaced. */
export async function seedJobState(
  cluster: Pick<ClusterClient, 'getJob' | 'getJobState' | 'putJobState'>,
  ref: JobRef,
  state: Partial<JobAutoscalerState>,
): Promise<void> {
  const job = await cluster.getJob(ref);
  const current = await cluster.getJobState(ref);
  await cluster.putJobState(
    { ref, uid: job.metadata.uid ?? '', apiVersion: job.apiVersion },
    { oomCount: 0, paused: false, ...state },
    current,
    { dryRun: false },
  );
}

/** The job's recorded state (its ScaledTrainingJob's status), or undefined when none was written. */
export async function recordedState(
  cluster: Pick<ClusterClient, 'getJobState'>,
  ref: JobRef,
): Promise<(JobAutoscalerState & Record<string, unknown>) | undefined> {
  const found = await cluster.getJobState(ref);
  return found?.status as (JobAutoscalerState & Record<string, unknown>) | undefined;
}
