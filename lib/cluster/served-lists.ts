// A kind whose CRD is not installed (the API server answers 404 to its list) has no objects: most clusters lack
// some of the Kubeflow, JobSet, Trainer, Kueue or trainscaler kinds. Any other failure is the caller's.
import { SUPPORTED_KINDS } from '../adapters/job-adapter.js';
import { NotFoundError } from '../errors.js';
import type { ClusterClient, KubeObject } from './cluster-client.js';

/** The list's items, or none when its kind is not served. */
export function servedOrEmpty<T>(list: Promise<T[]>): Promise<T[]> {
  return list.catch((error: unknown) => {
    if (error instanceof NotFoundError) return [];
    throw error;
  });
}

/** Every job of every supported kind, cluster-wide: one list per kind. */
export async function listAllJobs(cluster: Pick<ClusterClient, 'listJobs'>): Promise<KubeObject[]> {
  const lists = await Promise.all(SUPPORTED_KINDS.map((kind) => servedOrEmpty(cluster.listJobs(kind))));
  return lists.flat();
}
