// AWS Lambda entry points: one per trigger, each a thin wrapper that builds the clients once per
// container (the only module-level state) and hands the event to the same handler the other runtimes use.
import { ValidationError } from '../lib/errors.js';
import { handleAlarm } from './alarm.js';
import { handleClusterEvent } from './cluster-event.js';
import type { Handler, HandlerDeps, HandlerResult } from './handler-deps.js';
import { loadRuntimeDeps } from './runtime-deps.js';
import { handleSchedule } from './schedule.js';
import { handleSubmit } from './submit.js';

let deps: Promise<HandlerDeps> | undefined;

function runtimeDeps(): Promise<HandlerDeps> {
  deps ??= loadRuntimeDeps(process.env);
  return deps;
}

function lambda(handler: Handler) {
  return async (event: unknown): Promise<HandlerResult> => handler(event, await runtimeDeps());
}

export const alarm = lambda(handleAlarm);
export const clusterEvent = lambda(handleClusterEvent);
export const schedule = lambda(handleSchedule);
export const submit = lambda(handleSubmit);

interface HttpEvent {
  body?: string | null;
  isBase64Encoded?: boolean;
}

/** Alertmanager's webhook through an API Gateway HTTP API: 400 with the field for bad input, 200 otherwise. */
export async function alertmanagerWebhook(event: HttpEvent): Promise<{ statusCode: number; body: string }> {
  try {
    const text = event.isBase64Encoded
      ? Buffer.from(event.body ?? '', 'base64').toString('utf8')
      : (event.body ?? '');
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      throw new ValidationError('', 'request body is not JSON');
    }
    const result = await handleAlarm(payload, await runtimeDeps());
    return { statusCode: 200, body: JSON.stringify(result) };
  } catch (error) {
    if (error instanceof ValidationError) {
      return { statusCode: 400, body: JSON.stringify({ error: error.message, field: error.field }) };
    }
    throw error;
  }
}
