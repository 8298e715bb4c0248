import { ValidationError } from '../errors.js';
import { matches } from '../schemas/validate.js';

/** The schedule trigger: an EventBridge Scheduled Event, or an empty object from the in-cluster cron. */
export function parseSchedule(payload: unknown): { source: 'eventbridge' | 'cron' } {
  if (matches('EventBridgeEnvelope', payload)) {
    const detailType = (payload as { 'detail-type': string })['detail-type'];
    if (detailType !== 'Scheduled Event') {
      throw new ValidationError('/detail-type', `expected 'Scheduled Event', got '${detailType}'`);
    }
    return { source: 'eventbridge' };
  }
  if (
    typeof payload === 'object' &&
    payload !== null &&
    !Array.isArray(payload) &&
    Object.keys(payload).length === 0
  ) {
    return { source: 'cron' };
  }
  throw new ValidationError('', 'expected an EventBridge Scheduled Event or {}');
}
