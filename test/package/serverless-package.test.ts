// What `osls package` produces from serverless.yml, checked offline: the functions, their triggers, the
// schedule, the dead-letter destinations, and IAM statements scoped to what each function needs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLUSTER = 'it-training';

interface Resource {
  Type: string;
  Properties: Record<string, unknown>;
}
let out: string;
let resources: Record<string, Resource>;

function ofType(type: string): [string, Resource][] {
  return Object.entries(resources).filter(([, r]) => r.Type === type);
}

before(() => {
  out = mkdtempSync(join(tmpdir(), 'trainscaler-sls-'));
  execFileSync(
    'npx',
    [
      'osls',
      'package',
      '--package',
      out,
      '--param',
      `eksClusterName=${CLUSTER}`,
      '--param',
      'prometheusUrl=http://prometheus.monitoring:9090',
    ],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
    },
  );
  const template = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8'));
  resources = template.Resources;
});

after(() => rmSync(out, { recursive: true, force: true }));

describe('osls package output', () => {
  it('has one function per trigger, on Node 22, each from its own bundle', () => {
    const functions = ofType('AWS::Lambda::Function').map(([name, r]) => ({
      name,
      Runtime: r.Properties.Runtime,
      Handler: r.Properties.Handler,
    }));
    assert.deepEqual(functions.map((f) => f.name).sort(), [
      'AlarmLambdaFunction',
      'AlertmanagerWebhookLambdaFunction',
      'ClusterEventLambdaFunction',
      'ScheduleLambdaFunction',
      'SubmitLambdaFunction',
    ]);
    for (const f of functions) {
      assert.equal(f.Runtime, 'nodejs22.x', f.name);
      assert.match(String(f.Handler), /^dist\/lambda\//, f.name);
    }
  });

  it('wires the triggers: SNS for alarms, an HTTP route for Alertmanager, EventBridge rules, a 5-minute schedule', () => {
    assert.equal(ofType('AWS::SNS::Subscription').length, 1);
    const routes = ofType('AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties.RouteKey);
    assert.deepEqual(routes, ['POST /alertmanager']);
    const rules = ofType('AWS::Events::Rule').map(([, r]) => r.Properties);
    const schedule = rules.find((r) => r.ScheduleExpression !== undefined);
    assert.equal(schedule?.ScheduleExpression, 'rate(1 minute)');
    assert.match(JSON.stringify(schedule?.Targets), /ScheduleLambdaFunction/);
    const patterns = rules.filter((r) => r.EventPattern).map((r) => JSON.stringify(r.EventPattern));
    assert.ok(patterns.some((p) => p.includes('Kubernetes Watch Event')));
    assert.ok(patterns.some((p) => p.includes('Kubernetes Job Submitted')));
  });

  it('sends failed asynchronous invocations to the dead-letter queue', () => {
    const configs = ofType('AWS::Lambda::EventInvokeConfig').map(([, r]) => JSON.stringify(r.Properties));
    assert.equal(configs.length, 4, 'alarm, clusterEvent, schedule, submit (the HTTP route is synchronous)');
    for (const c of configs) assert.match(c, /OnFailure.*DeadLetterQueue/);
  });

  it('scopes IAM: no wildcard actions or resources, eks:DescribeCluster on the one cluster only', () => {
    const roles = ofType('AWS::IAM::Role');
    assert.equal(roles.length, 5, 'a role per function');
    for (const [name, role] of roles) {
      const statements = (
        role.Properties.Policies as {
          PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] };
        }[]
      ).flatMap((p) => p.PolicyDocument.Statement);
      for (const s of statements) {
        assert.ok(![s.Action].flat().includes('*'), `${name}: wildcard action`);
        assert.notEqual(s.Resource, '*', `${name}: wildcard resource`);
      }
      const eks = statements.filter((s) => [s.Action].flat().some((a) => String(a).startsWith('eks:')));
      assert.equal(eks.length, 1, `${name}: one EKS statement`);
      assert.deepEqual(eks[0]?.Action, 'eks:DescribeCluster');
      assert.match(JSON.stringify(eks[0]?.Resource), new RegExp(`cluster/${CLUSTER}"`));
    }
  });

  it('lets only the webhook read its token: ssm:GetParameter on the one parameter, kms:Decrypt through SSM for it', () => {
    const policyOf = (role: string) =>
      (
        (resources[role]?.Properties.Policies ?? []) as {
          PolicyDocument: { Statement: { Action: unknown; Resource: unknown; Condition?: unknown }[] };
        }[]
      ).flatMap((p) => p.PolicyDocument.Statement);
    const webhook = policyOf('AlertmanagerWebhookRole');
    const ssm = webhook.filter((s) => [s.Action].flat().some((a) => String(a).startsWith('ssm:')));
    assert.equal(ssm.length, 1);
    assert.equal(ssm[0]?.Action, 'ssm:GetParameter');
    const arn = JSON.stringify(ssm[0]?.Resource);
    assert.match(arn, /:parameter\/trainscaler\/webhook-token"/);
    const kms = webhook.filter((s) => [s.Action].flat().includes('kms:Decrypt'));
    assert.equal(kms.length, 1);
    const condition = JSON.stringify(kms[0]?.Condition);
    assert.match(condition, /kms:ViaService/);
    assert.ok(condition.includes(arn), "decryption only for the parameter's encryption context");
    for (const role of ['AlarmRole', 'ClusterEventRole', 'ScheduleRole', 'SubmitRole'])
      assert.ok(!JSON.stringify(policyOf(role)).match(/ssm:|kms:/), `${role} has no SSM or KMS access`);
    const fn = resources.AlertmanagerWebhookLambdaFunction?.Properties as {
      Environment: { Variables: Record<string, unknown> };
      ReservedConcurrentExecutions?: number;
    };
    assert.equal(fn.Environment.Variables.TRAINSCALER_WEBHOOK_TOKEN_PARAMETER, '/trainscaler/webhook-token');
    assert.equal(fn.ReservedConcurrentExecutions, 4);
  });
});
