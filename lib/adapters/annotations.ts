// Every annotation trainscaler reads or writes, in one place. Job facts (signature, batch sizes, bounds)
// are set by users; decision/history are trainscaler's audit record on the job. `state` is where earlier
// versions kept trainscaler's state: no longer written, and ignored when found (a job's owner can edit it; the
// state lives in the job's ScaledTrainingJob status, lib/cluster/job-state.ts).
export const ANNOTATION = {
  managed: 'trainscaler.io/managed',
  signature: 'trainscaler.io/signature',
  container: 'trainscaler.io/container',
  replicatedJob: 'trainscaler.io/replicated-job',
  localBatchSize: 'trainscaler.io/local-batch-size',
  globalBatchSize: 'trainscaler.io/global-batch-size',
  targetSamples: 'trainscaler.io/target-samples',
  minReplicas: 'trainscaler.io/min-replicas',
  maxReplicas: 'trainscaler.io/max-replicas',
  elastic: 'trainscaler.io/elastic',
  tuneRendezvous: 'trainscaler.io/tune-rendezvous',
  state: 'trainscaler.io/state',
  lastDecision: 'trainscaler.io/last-decision',
  history: 'trainscaler.io/history',
} as const;

/** RFC 6901 escaping, for annotation keys inside JSON Patch paths. */
export function jsonPointer(segments: readonly (string | number)[]): string {
  return segments.map((s) => `/${String(s).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}
