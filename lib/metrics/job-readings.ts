// What a batch read of the metrics answers per job: its value, or the error its own read would have thrown.
// A batch never answers a job with a partial value: a query that Prometheus truncated or refused is every
// asked job's error (lib/metrics/prometheus-metrics-source.ts), and a job the answer does not mention is its
// own MissingMetricsError, as the per-job read says.
import type { JobRef } from '../types.js';

export type JobReading<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Keyed by jobKey(ref); every asked job has an entry. */
export type JobReadings<T> = Map<string, JobReading<T>>;

/** A job's key in a batch answer (and in the schedule tick's maps). */
export function jobKey(ref: Pick<JobRef, 'namespace' | 'name'> & { kind: string }): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

/** A job asked about since an instant (its last rescale). */
export interface SinceAsk {
  ref: JobRef;
  since: number;
}

/** The reading of one job by its own per-job call, as a batch answer's entry. */
export async function settle<T>(read: () => Promise<T>): Promise<JobReading<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * A batch answered by per-job reads, one job at a time: what an in-process source (the simulator) or a source
 * without batch reads gives. Reads of the same job are asked once.
 */
export async function readEach<A extends { ref: JobRef } | JobRef, T>(
  asks: readonly A[],
  read: (ask: A) => Promise<T>,
): Promise<JobReadings<T>> {
  const out: JobReadings<T> = new Map();
  for (const ask of asks) {
    const key = jobKey('ref' in ask ? ask.ref : ask);
    if (!out.has(key)) out.set(key, await settle(() => read(ask)));
  }
  return out;
}
