// The payloads the outside world sends trainscaler, as the simulator's stand-ins for Alertmanager and
// Amazon EventBridge: shaped exactly like the real services' JSON so that the production parsers read them.
import type { JobRef } from '../types.js';
import { toRfc3339 } from './simulated-clock.js';

export const THROUGHPUT_REVIEW_ALERT = 'TrainscalerThroughputReview';

/** 64-bit FNV-1a as 16 hex digits: Alertmanager fingerprints are label hashes of that shape. */
function fingerprint(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

/** Alertmanager webhook (version 4) for one firing throughput-review alert about `ref`. */
export function alertmanagerWebhook(ref: JobRef, firingSince: number) {
  const labels = {
    alertname: THROUGHPUT_REVIEW_ALERT,
    job_kind: ref.kind,
    job_name: ref.name,
    namespace: ref.namespace,
    severity: 'info',
  };
  const annotations = {
    summary: `Review the scale of ${ref.kind} ${ref.namespace}/${ref.name}`,
    description: 'Periodic throughput review of a running training job.',
  };
  const groupLabels = { alertname: THROUGHPUT_REVIEW_ALERT, job_name: ref.name, namespace: ref.namespace };
  const expr = `trainscaler_job_running{namespace="${ref.namespace}",job_name="${ref.name}"} == 1`;
  return {
    version: '4',
    groupKey: `{}:{alertname="${THROUGHPUT_REVIEW_ALERT}", job_name="${ref.name}", namespace="${ref.namespace}"}`,
    truncatedAlerts: 0,
    status: 'firing',
    receiver: 'trainscaler',
    groupLabels,
    commonLabels: labels,
    commonAnnotations: annotations,
    externalURL: 'http://alertmanager.monitoring.svc:9093',
    alerts: [
      {
        status: 'firing',
        labels,
        annotations,
        startsAt: toRfc3339(firingSince),
        endsAt: '0001-01-01T00:00:00Z',
        generatorURL: `http://prometheus.monitoring.svc:9090/graph?g0.expr=${encodeURIComponent(expr)}&g0.tab=1`,
        fingerprint: fingerprint(JSON.stringify(labels)),
      },
    ],
  };
}

/** An EventBridge Scheduled Event, as a rule with a rate/cron schedule delivers it. */
export function eventBridgeScheduledEvent(at: number, sequence: number) {
  const id = fingerprint(`schedule-${sequence}-${at}`);
  return {
    version: '0',
    id: `${id.slice(0, 8)}-${id.slice(8, 12)}-4${id.slice(13, 16)}-8${id.slice(1, 4)}-${id.slice(4, 16)}`,
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '123456789012',
    time: toRfc3339(at),
    region: 'us-east-1',
    resources: ['arn:aws:events:us-east-1:123456789012:rule/trainscaler-rebalance'],
    detail: {},
  };
}
