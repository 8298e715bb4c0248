import { ValidationError } from '../errors.js';
import { matches, validate } from '../schemas/validate.js';
import type { JobKind, JobRef } from '../types.js';

export interface AlarmTrigger {
  ref: JobRef;
  alertname: string;
  source: 'alertmanager' | 'cloudwatch';
}

interface AlertmanagerWebhook {
  alerts: {
    status: 'firing' | 'resolved';
    labels: Record<string, string> & {
      alertname: string;
      namespace: string;
      job_kind: JobKind;
      job_name: string;
    };
  }[];
}
interface SnsNotification {
  Message: string;
}
type SnsEnvelope = SnsNotification | { Records: { Sns: SnsNotification }[] };
interface CloudWatchAlarm {
  AlarmName: string;
  NewStateValue: 'ALARM' | 'OK' | 'INSUFFICIENT_DATA';
  Trigger: { Dimensions: { name: string; value: string }[] };
}
interface EventBridgeAlarmChange {
  detail: {
    alarmName: string;
    state: { value: string };
    configuration?: { metrics?: { metricStat?: { metric?: { dimensions?: Record<string, string> } } }[] };
  };
}

function key(ref: JobRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

function dedupe(triggers: AlarmTrigger[]): AlarmTrigger[] {
  const seen = new Map<string, AlarmTrigger>();
  for (const t of triggers) if (!seen.has(key(t.ref))) seen.set(key(t.ref), t);
  return [...seen.values()];
}

function refFromDimensions(dimensions: Record<string, string>, field: string): JobRef {
  return validate<JobRef>(
    'JobRef',
    { kind: dimensions.job_kind, namespace: dimensions.namespace, name: dimensions.job_name },
    field,
  );
}

function fromCloudWatchMessage(message: string, field: string): AlarmTrigger[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    throw new ValidationError(field, 'SNS Message is not JSON (expected a CloudWatch alarm)');
  }
  const alarm = validate<CloudWatchAlarm>('CloudWatchAlarm', parsed, field);
  if (alarm.NewStateValue !== 'ALARM') return [];
  const dims = Object.fromEntries(alarm.Trigger.Dimensions.map((d) => [d.name, d.value]));
  return [
    {
      ref: refFromDimensions(dims, `${field}/Trigger/Dimensions`),
      alertname: alarm.AlarmName,
      source: 'cloudwatch',
    },
  ];
}

/**
 * The jobs an alarm is about. Accepts an Alertmanager webhook (v4), an SNS notification or SNS Lambda event
 * carrying a CloudWatch alarm, or an EventBridge "CloudWatch Alarm State Change" event. Resolved alerts and
 * alarms leaving the ALARM state trigger nothing.
 */
export function parseAlarm(payload: unknown): AlarmTrigger[] {
  if (typeof payload === 'object' && payload !== null && 'alerts' in payload) {
    const hook = validate<AlertmanagerWebhook>('AlertmanagerWebhook', payload);
    return dedupe(
      hook.alerts
        .filter((a) => a.status === 'firing')
        .map((a) => ({
          ref: { kind: a.labels.job_kind, namespace: a.labels.namespace, name: a.labels.job_name },
          alertname: a.labels.alertname,
          source: 'alertmanager' as const,
        })),
    );
  }
  if (typeof payload === 'object' && payload !== null && ('Records' in payload || 'Type' in payload)) {
    const sns = validate<SnsEnvelope>('SnsEnvelope', payload);
    const messages =
      'Records' in sns
        ? sns.Records.map((r, i) => ({ m: r.Sns.Message, f: `/Records/${i}/Sns/Message` }))
        : [{ m: sns.Message, f: '/Message' }];
    return dedupe(messages.flatMap(({ m, f }) => fromCloudWatchMessage(m, f)));
  }
  if (matches('EventBridgeEnvelope', payload)) {
    const envelope = payload as { 'detail-type': string; source: string };
    if (envelope['detail-type'] !== 'CloudWatch Alarm State Change') {
      throw new ValidationError(
        '/detail-type',
        `expected 'CloudWatch Alarm State Change', got '${envelope['detail-type']}'`,
      );
    }
    const event = payload as EventBridgeAlarmChange;
    if (event.detail.state?.value !== 'ALARM') return [];
    const dims = event.detail.configuration?.metrics?.[0]?.metricStat?.metric?.dimensions ?? {};
    return [
      {
        ref: refFromDimensions(dims, '/detail/configuration/metrics/0/metricStat/metric/dimensions'),
        alertname: event.detail.alarmName,
        source: 'cloudwatch',
      },
    ];
  }
  throw new ValidationError('', 'not an Alertmanager webhook, SNS notification or EventBridge alarm event');
}
