// Typed errors: every rejection names what was wrong so that a caller (and a person reading a log)
// can tell bad input from a cluster failure without parsing messages.

export type ErrorCode =
  | 'VALIDATION'
  | 'UNSUPPORTED_JOB_KIND'
  | 'UNSUPPORTED_CHANGE'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'FORBIDDEN'
  | 'API_ERROR'
  | 'MISSING_METRICS'
  | 'CONFIG'
  | 'JOB_DEADLINE';

export class TrainscalerError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Input failed validation; `field` is a JSON pointer to the offending field ('' for the whole payload). */
export class ValidationError extends TrainscalerError {
  readonly field: string;
  constructor(field: string, message: string) {
    super('VALIDATION', `invalid input at ${field || '/'}: ${message}`);
    this.field = field;
  }
}

export class UnsupportedJobKindError extends TrainscalerError {
  readonly kind: string;
  constructor(kind: string) {
    super(
      'UNSUPPORTED_JOB_KIND',
      `unsupported job kind '${kind}' (supported: PyTorchJob, TFJob, StatefulSet, Job, JobSet, TrainJob)`,
    );
    this.kind = kind;
  }
}

/**
 * The job's own API forbids this change (an immutable field, a finished job, a completion mode that cannot
 * scale): refused before anything is written, so no part of the plan reaches the job.
 */
export class UnsupportedChangeError extends TrainscalerError {
  readonly field: string;
  constructor(kind: string, field: string, message: string) {
    super('UNSUPPORTED_CHANGE', `${kind} cannot change ${field || '/'}: ${message}`);
    this.field = field;
  }
}

export class NotFoundError extends TrainscalerError {
  constructor(what: string) {
    super('NOT_FOUND', `${what} not found`);
  }
}

/** The object changed between our read and our write (HTTP 409). Callers re-read and recompute. */
export class ConflictError extends TrainscalerError {
  constructor(what: string) {
    super('CONFLICT', `${what} was modified concurrently (resourceVersion conflict)`);
  }
}

export class ForbiddenError extends TrainscalerError {
  constructor(what: string, detail: string) {
    super('FORBIDDEN', `not allowed to ${what}: ${detail}`);
  }
}

export class ApiError extends TrainscalerError {
  readonly status: number | undefined;
  constructor(what: string, status: number | undefined, detail: string, options?: { cause?: unknown }) {
    super('API_ERROR', `${what} failed${status ? ` with HTTP ${status}` : ''}: ${detail}`, options);
    this.status = status;
  }
}

/** No decision is made on missing data: the caller reports this and writes nothing. */
export class MissingMetricsError extends TrainscalerError {
  constructor(what: string) {
    super('MISSING_METRICS', `missing metrics: ${what}`);
  }
}

export class ConfigError extends TrainscalerError {
  constructor(message: string) {
    super('CONFIG', `configuration error: ${message}`);
  }
}

/** How Prometheus left a query's answer incomplete. */
export type IncompleteMetricsReason = 'too-many-samples' | 'timeout' | 'truncated' | 'refused';

/**
 * A batch metrics query (every managed job's series at once) that Prometheus refused (too many samples, its
 * query timeout), that did not answer in time, or whose answer it marked incomplete (warnings): each job it
 * asked about gets this error, so that no decision is made on a partial answer taken for a whole one.
 */
export class IncompleteMetricsError extends ApiError {
  readonly reason: IncompleteMetricsReason;
  readonly jobs: number;
  constructor(
    what: string,
    status: number | undefined,
    reason: IncompleteMetricsReason,
    jobs: number,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${what} of ${jobs} jobs`,
      status,
      `${detail} (${reason}: no decision on a partial answer)`,
      options,
    );
    this.reason = reason;
    this.jobs = jobs;
  }
}
