import { TrainscalerError } from '../lib/errors.js';
import type { JobRef } from '../lib/types.js';
import type { JobError, Logger } from './handler-deps.js';

/** The code of a per-job failure that is not a TrainscalerError: a bug, reached through one job's data. */
export const INTERNAL_ERROR_CODE = 'INTERNAL';

/**
 * A per-job failure becomes that job's error in the trigger's result, whatever was thrown: what one tenant's
 * job makes the code do must never stop the other jobs of the same trigger (a schedule tick serves every
 * tenant). Typed errors keep their code; anything else is reported as INTERNAL and logged as an error, with
 * its stack, since it is a bug that one job's data reached.
 */
export function containJobError(ref: JobRef, error: unknown, logger: Logger): JobError {
  if (!(error instanceof TrainscalerError)) {
    const message = error instanceof Error ? error.message : String(error);
    logger.error(
      {
        job: ref,
        code: INTERNAL_ERROR_CODE,
        error: message,
        ...(error instanceof Error && error.stack ? { stack: error.stack } : {}),
      },
      'no decision for job: unexpected error',
    );
    return { ref, code: INTERNAL_ERROR_CODE, message };
  }
  if (error.code === 'NOT_FOUND') {
    // Deleted between the trigger and the read: routine after a job ends, nothing to decide.
    logger.debug?.({ job: ref, code: error.code }, 'job gone before its review');
  } else {
    logger.warn({ job: ref, code: error.code, error: error.message }, 'no decision for job');
  }
  return { ref, code: error.code, message: error.message };
}
