// JSON Schemas of every payload a trigger accepts. Shapes follow the producers' published formats:
// Alertmanager webhook v4, SNS notifications (HTTP and Lambda record forms) carrying CloudWatch alarms,
// EventBridge envelopes, and Kubernetes watch events.

const dnsLabel = { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 } as const;
const dnsSubdomain = { type: 'string', pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$', maxLength: 253 } as const;
const jobKind = {
  type: 'string',
  enum: ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob'],
} as const;

export const jobRefSchema = {
  $id: 'JobRef',
  type: 'object',
  required: ['kind', 'namespace', 'name'],
  properties: { kind: jobKind, namespace: dnsLabel, name: dnsSubdomain },
} as const;

export const alertmanagerWebhookSchema = {
  $id: 'AlertmanagerWebhook',
  type: 'object',
  required: ['version', 'status', 'alerts'],
  properties: {
    version: { const: '4' },
    groupKey: { type: 'string' },
    status: { enum: ['firing', 'resolved'] },
    receiver: { type: 'string' },
    alerts: {
      type: 'array',
      minItems: 1,
      maxItems: 1000,
      items: {
        type: 'object',
        required: ['status', 'labels'],
        properties: {
          status: { enum: ['firing', 'resolved'] },
          labels: {
            type: 'object',
            required: ['alertname', 'namespace', 'job_kind', 'job_name'],
            properties: {
              alertname: { type: 'string' },
              namespace: dnsLabel,
              job_kind: jobKind,
              job_name: dnsSubdomain,
            },
            additionalProperties: { type: 'string' },
          },
          annotations: { type: 'object', additionalProperties: { type: 'string' } },
          startsAt: { type: 'string' },
          endsAt: { type: 'string' },
        },
      },
    },
  },
} as const;

const snsNotification = {
  type: 'object',
  required: ['Type', 'Message'],
  properties: {
    Type: { const: 'Notification' },
    MessageId: { type: 'string' },
    TopicArn: { type: 'string' },
    Subject: { type: ['string', 'null'] },
    Message: { type: 'string', maxLength: 262144 },
    Timestamp: { type: 'string' },
  },
} as const;

/** An SNS message as delivered to HTTP subscribers, or the Lambda event with SNS records. */
export const snsEnvelopeSchema = {
  $id: 'SnsEnvelope',
  oneOf: [
    snsNotification,
    {
      type: 'object',
      required: ['Records'],
      properties: {
        Records: {
          type: 'array',
          minItems: 1,
          maxItems: 100,
          items: {
            type: 'object',
            required: ['EventSource', 'Sns'],
            properties: { EventSource: { const: 'aws:sns' }, Sns: snsNotification },
          },
        },
      },
    },
  ],
} as const;

export const cloudWatchAlarmSchema = {
  $id: 'CloudWatchAlarm',
  type: 'object',
  required: ['AlarmName', 'NewStateValue', 'Trigger'],
  properties: {
    AlarmName: { type: 'string' },
    NewStateValue: { enum: ['ALARM', 'OK', 'INSUFFICIENT_DATA'] },
    NewStateReason: { type: 'string' },
    StateChangeTime: { type: 'string' },
    Trigger: {
      type: 'object',
      required: ['Dimensions'],
      properties: {
        MetricName: { type: 'string' },
        Namespace: { type: 'string' },
        Dimensions: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name', 'value'],
            properties: { name: { type: 'string' }, value: { type: 'string' } },
          },
        },
      },
    },
  },
} as const;

export const eventBridgeEnvelopeSchema = {
  $id: 'EventBridgeEnvelope',
  type: 'object',
  required: ['detail-type', 'source', 'detail'],
  properties: {
    version: { type: 'string' },
    id: { type: 'string' },
    'detail-type': { type: 'string', minLength: 1 },
    source: { type: 'string', minLength: 1 },
    account: { type: 'string' },
    time: { type: 'string' },
    region: { type: 'string' },
    resources: { type: 'array', items: { type: 'string' } },
    detail: { type: 'object' },
  },
} as const;

export const watchEventSchema = {
  $id: 'WatchEvent',
  type: 'object',
  required: ['type', 'object'],
  properties: {
    type: { enum: ['ADDED', 'MODIFIED', 'DELETED'] },
    object: {
      type: 'object',
      required: ['kind', 'metadata'],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string', minLength: 1 },
        metadata: {
          type: 'object',
          required: ['name'],
          properties: {
            name: dnsSubdomain,
            namespace: dnsLabel,
            labels: { type: 'object', additionalProperties: { type: 'string' } },
            ownerReferences: {
              type: 'array',
              maxItems: 100,
              items: {
                type: 'object',
                required: ['kind', 'name'],
                properties: {
                  kind: { type: 'string' },
                  name: { type: 'string' },
                  controller: { type: 'boolean' },
                },
              },
            },
          },
        },
      },
    },
  },
} as const;
