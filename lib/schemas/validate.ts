import { Ajv, type ErrorObject } from 'ajv';
import { ValidationError } from '../errors.js';
import {
  alertmanagerWebhookSchema,
  cloudWatchAlarmSchema,
  eventBridgeEnvelopeSchema,
  jobRefSchema,
  snsEnvelopeSchema,
  watchEventSchema,
} from './trigger-schemas.js';

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
const validators = {
  JobRef: ajv.compile(jobRefSchema),
  AlertmanagerWebhook: ajv.compile(alertmanagerWebhookSchema),
  SnsEnvelope: ajv.compile(snsEnvelopeSchema),
  CloudWatchAlarm: ajv.compile(cloudWatchAlarmSchema),
  EventBridgeEnvelope: ajv.compile(eventBridgeEnvelopeSchema),
  WatchEvent: ajv.compile(watchEventSchema),
};

export type SchemaName = keyof typeof validators;

function fieldOf(error: ErrorObject, prefix: string): string {
  const missing = error.keyword === 'required' ? `/${String(error.params.missingProperty)}` : '';
  return `${prefix}${error.instancePath}${missing}`;
}

/** True when the payload matches; no exception, for routing between accepted shapes. */
export function matches(schema: SchemaName, payload: unknown): boolean {
  return validators[schema](payload);
}

/**
 * Validates and narrows, or throws ValidationError naming the first offending field.
 * `prefix` locates a nested payload (e.g. '/detail') inside the outer message.
 */
export function validate<T>(schema: SchemaName, payload: unknown, prefix = ''): T {
  const check = validators[schema];
  if (check(payload)) return payload as T;
  const error = check.errors?.[0];
  if (!error) throw new ValidationError(prefix, `does not match ${schema}`);
  throw new ValidationError(fieldOf(error, prefix), `${error.message ?? 'invalid'} (${schema})`);
}
