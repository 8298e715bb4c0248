import { TrainscalerError } from '../lib/errors.js';
import type { JobRef } from '../lib/types.js';
import type { JobError, Logger } from './handler-deps.js';

/**
 * A per-job failure that must not stop the other jobs of the same trigger. Only typed errors are contained;
 * anything else is a bug and propagates.
 */
export function containJobError(ref: JobRef, error: unknown, logger: Logger): JobError {
  if (!(error instanceof TrainscalerError)) throw error;
  if (error.code === 'NOT_FOUND') {
    // Deleted between the trigger and the read: routine after a job ends, nothing to decide.
    logger.debug?.({ job: ref, code: error.code }, 'job gone before its review');
  } else {
    logger.warn({ job: ref, code: error.code, error: error.message }, 'no decision for job');
  }
  return { ref, code: error.code, message: error.message };
}
