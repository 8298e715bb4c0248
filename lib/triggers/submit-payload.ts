import { isSupportedKind } from '../adapters/job-adapter.js';
import { UnsupportedJobKindError } from '../errors.js';
import { matches, validate } from '../schemas/validate.js';
import type { JobRef } from '../types.js';

interface WatchEvent {
  type: string;
  object: { kind: string; metadata: { name: string; namespace?: string } };
}

/** A newly submitted job: `{kind, namespace, name}`, or its watch ADDED event, bare or in an EventBridge envelope. */
export function parseSubmit(payload: unknown): JobRef {
  let prefix = '';
  let body = payload;
  if (matches('EventBridgeEnvelope', payload)) {
    body = (payload as { detail: unknown }).detail;
    prefix = '/detail';
  }
  if (typeof body === 'object' && body !== null && 'object' in body) {
    const event = validate<WatchEvent>('WatchEvent', body, prefix);
    if (!isSupportedKind(event.object.kind)) throw new UnsupportedJobKindError(event.object.kind);
    return validate<JobRef>(
      'JobRef',
      {
        kind: event.object.kind,
        namespace: event.object.metadata.namespace ?? 'default',
        name: event.object.metadata.name,
      },
      `${prefix}/object`,
    );
  }
  if (
    typeof body === 'object' &&
    body !== null &&
    'kind' in body &&
    typeof body.kind === 'string' &&
    !isSupportedKind(body.kind)
  ) {
    throw new UnsupportedJobKindError(body.kind);
  }
  return validate<JobRef>('JobRef', body, prefix);
}
