// The controller chain from a job to its pods, for kinds that run pods through other objects: a JobSet's pods
// are owned by its child batch/v1 Jobs, a TrainJob's by the Jobs of the JobSet that Trainer creates for it.
// A pod's own owner reference names only its Job; which JobSet (and TrainJob) that Job belongs to is read
// from the Job (and the JobSet) on the API server, never taken from labels, which anyone can set.
import type { V1Pod } from '@kubernetes/client-node';
import { NotFoundError } from '../errors.js';
import type { JobRef } from '../types.js';
import type { KubeObject, OwnerReference } from './cluster-client.js';

type GetJob = (ref: JobRef) => Promise<KubeObject>;

function controllerOf(obj: {
  metadata?: { ownerReferences?: OwnerReference[] };
}): OwnerReference | undefined {
  return obj.metadata?.ownerReferences?.find((o) => o.controller === true);
}

function controlledBy(obj: KubeObject, parent: { kind: string; name: string; uid: string }): boolean {
  const owner = controllerOf(obj);
  return owner?.kind === parent.kind && owner.name === parent.name && owner.uid === parent.uid;
}

async function getOrUndefined(getJob: GetJob, ref: JobRef): Promise<KubeObject | undefined> {
  try {
    return await getJob(ref);
  } catch (error) {
    // Deleted meanwhile (a restart of the JobSet recreates its Jobs): its pods are not the job's any more.
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

/**
 * The uids of the batch/v1 Jobs that own `pods` on behalf of `job` (a JobSet, or the JobSet of a TrainJob):
 * each such Job is read and kept only when its controller is that JobSet, itself controlled by the TrainJob.
 * Empty for kinds that own their pods directly. Reads one object per distinct Job the pods name (and the
 * TrainJob's one JobSet), only when some pod names a Job at all.
 */
export async function childJobsOf(
  job: { ref: JobRef; uid: string },
  pods: readonly V1Pod[],
  getJob: GetJob,
): Promise<Set<string>> {
  const { kind, namespace, name } = job.ref;
  const verified = new Set<string>();
  if (kind !== 'JobSet' && kind !== 'TrainJob') return verified;
  const named = new Map<string, string>();
  for (const pod of pods) {
    const owner = controllerOf(pod);
    if (owner?.kind === 'Job' && owner.apiVersion === 'batch/v1') named.set(owner.uid, owner.name);
  }
  if (named.size === 0) return verified;
  let jobSet = { kind: 'JobSet', name, uid: job.uid };
  if (kind === 'TrainJob') {
    // Trainer names the JobSet after the TrainJob.
    const child = await getOrUndefined(getJob, { kind: 'JobSet', namespace, name });
    if (!child?.metadata.uid || !controlledBy(child, { kind, name, uid: job.uid })) return verified;
    jobSet = { kind: 'JobSet', name, uid: child.metadata.uid };
  }
  for (const [uid, jobName] of named) {
    const child = await getOrUndefined(getJob, { kind: 'Job', namespace, name: jobName });
    if (child?.metadata.uid === uid && controlledBy(child, jobSet)) verified.add(uid);
  }
  return verified;
}
