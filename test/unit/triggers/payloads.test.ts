import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnsupportedJobKindError, ValidationError } from '../../../lib/errors.js';
import { parseAlarm } from '../../../lib/triggers/alarm-payload.js';
import { parseClusterEvent } from '../../../lib/triggers/cluster-event-payload.js';
import { parseSchedule } from '../../../lib/triggers/schedule-payload.js';
import { parseSubmit } from '../../../lib/triggers/submit-payload.js';
import {
  alertmanagerWebhook,
  cloudWatchAlarmMessage,
  eventBridgeAlarmStateChange,
  eventBridgeEnvelope,
  scheduledEvent,
  snsLambdaEvent,
} from '../../fixtures/payloads.js';

const dims = { namespace: 'team-a', job_kind: 'PyTorchJob', job_name: 'bert-finetune' };

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error.field;
    throw error;
  }
  assert.fail('expected a ValidationError');
}

describe('parseAlarm', () => {
  it('takes firing Alertmanager alerts, one trigger per job, resolved ones ignored', () => {
    const hook = alertmanagerWebhook([
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'a' },
      { namespace: 'team-a', kind: 'PyTorchJob', name: 'a' },
      { namespace: 'team-b', kind: 'TFJob', name: 'b', status: 'resolved' },
      { namespace: 'team-c', kind: 'StatefulSet', name: 'c' },
    ]);
    assert.deepEqual(
      parseAlarm(hook).map((t) => `${t.ref.kind}/${t.ref.namespace}/${t.ref.name}`),
      ['PyTorchJob/team-a/a', 'StatefulSet/team-c/c'],
    );
  });

  it('takes a CloudWatch alarm delivered by SNS to Lambda, and as an HTTP notification', () => {
    const [trigger] = parseAlarm(snsLambdaEvent(cloudWatchAlarmMessage(dims)));
    assert.deepEqual(trigger?.ref, { kind: 'PyTorchJob', namespace: 'team-a', name: 'bert-finetune' });
    assert.equal(trigger?.source, 'cloudwatch');
    const record = snsLambdaEvent(cloudWatchAlarmMessage(dims)).Records[0];
    assert.ok(record);
    assert.equal(parseAlarm(record.Sns).length, 1);
    assert.equal(
      parseAlarm(snsLambdaEvent(cloudWatchAlarmMessage(dims, 'OK'))).length,
      0,
      'OK state triggers nothing',
    );
  });

  it('takes an EventBridge CloudWatch Alarm State Change event', () => {
    assert.equal(parseAlarm(eventBridgeAlarmStateChange(dims))[0]?.ref.name, 'bert-finetune');
    assert.equal(parseAlarm(eventBridgeAlarmStateChange(dims, 'OK')).length, 0);
  });

  it('names the offending field of malformed alarms', () => {
    const hook = alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'a' }]);
    const labels: Partial<typeof dims> | undefined = hook.alerts[0]?.labels;
    if (labels) delete labels.job_name;
    assert.equal(
      fieldOf(() => parseAlarm(hook)),
      '/alerts/0/labels/job_name',
    );
    const badKind = alertmanagerWebhook([{ namespace: 'team-a', kind: 'MPIJob', name: 'a' }]);
    assert.equal(
      fieldOf(() => parseAlarm(badKind)),
      '/alerts/0/labels/job_kind',
    );
    const badName = alertmanagerWebhook([{ namespace: 'Team_A', kind: 'PyTorchJob', name: 'a' }]);
    assert.equal(
      fieldOf(() => parseAlarm(badName)),
      '/alerts/0/labels/namespace',
    );
    assert.equal(
      fieldOf(() => parseAlarm(snsLambdaEvent('not json'))),
      '/Records/0/Sns/Message',
    );
    const noDims = snsLambdaEvent(cloudWatchAlarmMessage({ namespace: 'team-a' }));
    assert.match(
      fieldOf(() => parseAlarm(noDims)),
      /^\/Records\/0\/Sns\/Message\/Trigger\/Dimensions/,
    );
    assert.equal(
      fieldOf(() => parseAlarm(null)),
      '',
    );
    assert.equal(
      fieldOf(() => parseAlarm(scheduledEvent())),
      '/detail-type',
    );
  });
});

describe('parseClusterEvent', () => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'bert-finetune-worker-1',
      namespace: 'team-a',
      labels: {
        'training.kubeflow.org/job-name': 'bert-finetune',
        'training.kubeflow.org/operator-name': 'pytorchjob-controller',
      },
    },
  };

  it('resolves a pod watch event to its job, bare or in an EventBridge envelope', () => {
    const bare = parseClusterEvent({ type: 'MODIFIED', object: pod });
    assert.equal(bare.subject, 'pod');
    assert.deepEqual(bare.subject === 'pod' && bare.ref, {
      kind: 'PyTorchJob',
      namespace: 'team-a',
      name: 'bert-finetune',
    });
    const wrapped = parseClusterEvent(
      eventBridgeEnvelope('Kubernetes Watch Event', { type: 'MODIFIED', object: pod }),
    );
    assert.equal(wrapped.subject, 'pod');
  });

  it('ignores pods of no job and rejects unknown object kinds', () => {
    const lone = { ...pod, metadata: { name: 'x', namespace: 'team-a' } };
    assert.equal(parseClusterEvent({ type: 'ADDED', object: lone }).subject, 'ignored');
    assert.equal(
      fieldOf(() =>
        parseClusterEvent({ type: 'ADDED', object: { kind: 'Deployment', metadata: { name: 'x' } } }),
      ),
      '/object/kind',
    );
    assert.equal(
      fieldOf(() => parseClusterEvent({ type: 'BOOM', object: pod })),
      '/type',
    );
    assert.equal(
      fieldOf(() => parseClusterEvent(eventBridgeEnvelope('x', { object: pod }))),
      '/detail/type',
    );
  });
});

describe('parseSubmit and parseSchedule', () => {
  it('accepts a job reference or the job watch ADDED event', () => {
    assert.deepEqual(parseSubmit({ kind: 'TFJob', namespace: 'team-b', name: 'wide-deep' }), {
      kind: 'TFJob',
      namespace: 'team-b',
      name: 'wide-deep',
    });
    const added = {
      type: 'ADDED',
      object: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', metadata: { name: 'j', namespace: 'n' } },
    };
    assert.equal(parseSubmit(eventBridgeEnvelope('Kubernetes Watch Event', added)).name, 'j');
  });

  it('rejects unknown kinds with a typed error and bad names with the field', () => {
    assert.throws(() => parseSubmit({ kind: 'MPIJob', namespace: 'a', name: 'b' }), UnsupportedJobKindError);
    assert.equal(
      fieldOf(() => parseSubmit({ kind: 'TFJob', namespace: 'a' })),
      '/name',
    );
  });

  it('accepts an EventBridge Scheduled Event or {} and nothing else', () => {
    assert.equal(parseSchedule(scheduledEvent()).source, 'eventbridge');
    assert.equal(parseSchedule({}).source, 'cron');
    assert.equal(
      fieldOf(() => parseSchedule({ foo: 1 })),
      '',
    );
    assert.equal(
      fieldOf(() => parseSchedule(eventBridgeEnvelope('Other', {}))),
      '/detail-type',
    );
  });
});
