// The trainer-facing API, on loopback only: the Python hook posts cumulative progress here and learns from
// the answer when to checkpoint. Nothing outside the pod can reach it, so nothing outside can forge progress.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { JobShape } from './config.js';
import type { DrainCoordinator } from './drain.js';
import { BodyTooLargeError, readBody, sendJson } from './http-util.js';
import type { ProgressReport } from './progress-tracker.js';

export class ReportError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** A trainer's clock this far off is not trusted for timing; the sidecar's own arrival time is used. */
const MAX_CLOCK_SKEW_SECONDS = 600;

function count(body: Record<string, unknown>, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    throw new ReportError(field, `${field} must be a non-negative number`);
  return value;
}

function shapeField(body: Record<string, unknown>, field: keyof JobShape): string | undefined {
  const value = count(body, field);
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value === 0)
    throw new ReportError(field, `${field} must be a positive integer`);
  return String(value);
}

/** Validates a report body: {step, samples?, at?, replicas?, nodes?, local_batch_size?}. */
export function parseReport(text: string, now: number): ProgressReport {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ReportError('', 'body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ReportError('', 'body must be a JSON object');
  const fields = body as Record<string, unknown>;
  const step = count(fields, 'step');
  if (step === undefined) throw new ReportError('step', 'step is required');
  const at = count(fields, 'at');
  const report: ProgressReport = {
    step,
    at: at !== undefined && Math.abs(at - now) <= MAX_CLOCK_SKEW_SECONDS ? at : now,
  };
  const samples = count(fields, 'samples');
  if (samples !== undefined) report.samples = samples;
  const shape: Partial<JobShape> = {};
  for (const key of ['replicas', 'nodes', 'local_batch_size'] as const) {
    const value = shapeField(fields, key);
    if (value !== undefined) shape[key] = value;
  }
  if (Object.keys(shape).length > 0) report.shape = shape;
  return report;
}

export interface HookApiDeps {
  onReport(report: ProgressReport): void;
  drain: DrainCoordinator;
  /** Epoch seconds. */
  clock: () => number;
}

export function createHookServer(deps: HookApiDeps): Server {
  const drainState = () => ({ drain: deps.drain.draining, acknowledged: deps.drain.acknowledged });
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/progress' && req.method === 'POST') {
      const report = parseReport(await readBody(req, 16 * 1024), deps.clock());
      deps.drain.trainerSeen();
      deps.onReport(report);
      sendJson(res, 200, drainState());
    } else if (path === '/drain' && req.method === 'GET') {
      deps.drain.trainerSeen();
      sendJson(res, 200, drainState());
    } else if (path === '/checkpointed' && req.method === 'POST') {
      await readBody(req, 16 * 1024);
      deps.drain.acknowledge();
      sendJson(res, 200, drainState());
    } else {
      sendJson(res, 404, { error: `no route ${req.method} ${path}` });
    }
  };
  return createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) return;
      if (error instanceof ReportError) sendJson(res, 400, { error: error.message, field: error.field });
      else if (error instanceof BodyTooLargeError) sendJson(res, 413, { error: error.message });
      else sendJson(res, 500, { error: String(error) });
    });
  });
}
