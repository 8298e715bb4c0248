// The runner's read source for a tick's view (lib/cluster/listed-cluster-reads.ts): every job kind and pods from
// the informers' caches (no request; lib/runner/informers.ts; the TrainingAutoscalers too), and what the informers do not watch (nodes, Kueue
// Workloads, ScaledTrainingJobs) in one paginated LIST per kind and tick. A kind whose informer has not listed
// yet, or is failing and restarting, is listed from the API server as on Lambda.
import type { V1Pod } from '@kubernetes/client-node';
import type { ClusterClient, KubeObject } from '../cluster/cluster-client.js';
import { type ClusterReadSource, listingSource } from '../cluster/listed-cluster-reads.js';
import type { InformerSet } from './informers.js';

export function informerReadSource(
  informers: Pick<InformerSet, 'list'>,
  live: ClusterClient,
): ClusterReadSource {
  const listed = listingSource(live);
  return {
    ...listed,
    // With a StatefulSet selector, the StatefulSets outside it are not trainscaler's: its cache holds none.
    jobs: async (kind) => (informers.list(kind) as KubeObject[] | undefined) ?? listed.jobs(kind),
    // The cache holds the API server's JSON form (timestamps as strings), which every reader of a pod accepts.
    pods: async () => (informers.list('Pod') as V1Pod[] | undefined) ?? listed.pods(),
    trainingAutoscalers: async () =>
      (informers.list('TrainingAutoscaler') as KubeObject[] | undefined) ??
      listed.trainingAutoscalers?.() ??
      [],
  };
}
