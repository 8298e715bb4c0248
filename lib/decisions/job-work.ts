import pLimit from 'p-limit';
import { TrainscalerError } from '../errors.js';
import type { JobRef } from '../types.js';

/**
 * How a tick runs the work of each job it decides for (a fault answered, a plan applied): at most `concurrency`
 * jobs at once, so that a tick's thousands of API round trips overlap, and each job within `deadlineSeconds`,
 * so that one job whose API calls hang costs the tick one slot for that long, not the tick.
 */
export interface JobWorkLimits {
  concurrency: number;
  deadlineSeconds: number;
}

export const DEFAULT_JOB_WORK_LIMITS: JobWorkLimits = { concurrency: 8, deadlineSeconds: 60 };

/** A job's work outlasted its deadline; nothing of it was written after that (see ActuatorDeps.signal). */
export class JobDeadlineError extends TrainscalerError {
  constructor(ref: JobRef, seconds: number) {
    super(
      'JOB_DEADLINE',
      `${ref.kind} ${ref.namespace}/${ref.name}: not decided within ${seconds} s; nothing written, retried next tick`,
    );
  }
}

export type JobWork = <T>(ref: JobRef, work: (signal: AbortSignal) => Promise<T>) => Promise<T>;

/**
 * `serialize`: one job at a time, for a cluster GPU budget, which each write must see the last one's growth
 * against (the guardrail reads the cluster's GPUs right before the write).
 */
export function jobWorkUnder(limits: JobWorkLimits, serialize: boolean): JobWork {
  if (!(Number.isInteger(limits.concurrency) && limits.concurrency >= 1))
    throw new RangeError(`job work concurrency must be an integer >= 1, got ${limits.concurrency}`);
  if (!(limits.deadlineSeconds > 0))
    throw new RangeError(`job work deadline must be > 0 seconds, got ${limits.deadlineSeconds}`);
  const limit = pLimit(serialize ? 1 : limits.concurrency);
  return (ref, work) => limit(() => withinDeadline(ref, limits.deadlineSeconds, work));
}

async function withinDeadline<T>(
  ref: JobRef,
  seconds: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new JobDeadlineError(ref, seconds);
      controller.abort(error);
      reject(error);
    }, seconds * 1000);
  });
  const running = work(controller.signal);
  // Past the deadline the work is abandoned, not awaited: what it still throws (the aborted signal, at its next
  // write) has nobody to tell.
  running.catch(() => undefined);
  try {
    return await Promise.race([running, late]);
  } finally {
    clearTimeout(timer);
  }
}
