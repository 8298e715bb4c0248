// Reading what Kueue knows about a job through the cluster client: the Workloads the job controls (found by
// Kueue's job-uid label, kept by owner reference) and the quota of the ClusterQueue it is queued in. The
// rules themselves are pure (lib/kueue/kueue-guard.ts).
import { kueueFactsOf } from '../adapters/job-adapter.js';
import { getString } from '../adapters/unstructured.js';
import { NotFoundError } from '../errors.js';
import type { KueueJob } from '../kueue/kueue-guard.js';
import { holdingWorkload } from '../kueue/kueue-guard.js';
import {
  type ClusterQueueQuota,
  JOB_UID_LABEL,
  QUEUE_NAME_LABEL,
  readClusterQueue,
  workloadsOfJob,
} from '../kueue/kueue-objects.js';
import type { JobView } from '../types.js';
import type { ClusterClient, KubeObject } from './cluster-client.js';

/**
 * The job as Kueue's rules see it, or undefined when Kueue does not manage it: neither a queue-name label nor
 * an unfinished Workload it controls (a cluster without Kueue answers the Workload list with 404: none).
 */
export async function kueueJobOf(
  cluster: ClusterClient,
  obj: KubeObject,
  view: JobView,
): Promise<KueueJob | undefined> {
  const facts = kueueFactsOf(obj);
  const listed = view.uid
    ? await cluster.listWorkloads(view.ref.namespace, `${JOB_UID_LABEL}=${view.uid}`)
    : [];
  const workloads = workloadsOfJob(listed, { kind: obj.kind, uid: view.uid }).filter((w) => !w.finished);
  const first = workloads[0];
  let managedBy: string;
  if (facts.queueName) managedBy = `label ${QUEUE_NAME_LABEL}=${facts.queueName}`;
  else if (first) managedBy = `its Workload ${first.name}`;
  else return undefined;
  return {
    managedBy,
    elasticSlices: facts.elasticSlices,
    suspended: facts.suspended,
    workloads,
    podSetOf: facts.podSetOf,
  };
}

/**
 * The quota of the ClusterQueue the job is in: the one its admitted Workload names, else the one its LocalQueue
 * points to. A missing queue is reported, not thrown: growth is then not attempted, shrinking still is.
 */
export async function clusterQueueQuotaOf(
  cluster: ClusterClient,
  namespace: string,
  kueue: KueueJob,
  queueName: string | undefined,
): Promise<ClusterQueueQuota | { problem: string }> {
  try {
    let name = holdingWorkload(kueue)?.clusterQueue;
    if (!name) {
      const local = queueName ?? kueue.workloads.at(-1)?.queueName;
      if (!local) return { problem: 'the job names no LocalQueue' };
      const localQueue = await cluster.getLocalQueue(namespace, local);
      name = getString(localQueue, ['spec', 'clusterQueue']);
      if (!name) return { problem: `LocalQueue ${namespace}/${local} names no ClusterQueue` };
    }
    return readClusterQueue(await cluster.getClusterQueue(name));
  } catch (error) {
    if (error instanceof NotFoundError) return { problem: error.message };
    throw error;
  }
}
