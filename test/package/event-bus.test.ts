// The event bus in what `osls package` produces: the bus the forwarder puts on, the clusterEvent and submit
// rules on it (not on the account's default bus), and the forwarder's policy: events:PutEvents on it only.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Resource {
  Type: string;
  Properties: Record<string, unknown>;
}
let out: string;
let template: {
  Resources: Record<string, Resource>;
  Outputs: Record<string, { Value: unknown; Export?: unknown }>;
};

before(() => {
  out = mkdtempSync(join(tmpdir(), 'trainscaler-sls-bus-'));
  execFileSync('npx', ['osls', 'package', '--package', out, '--param', 'eksClusterName=it-training'], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
  });
  template = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8'));
});

after(() => rmSync(out, { recursive: true, force: true }));

describe('osls package output: the event bus', () => {
  it('creates the bus and puts the clusterEvent and submit rules on it', () => {
    const buses = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::Events::EventBus');
    assert.deepEqual(
      buses.map(([name, r]) => [name, r.Properties.Name]),
      [['EventBus', 'trainscaler-dev']],
    );
    const patterned = Object.values(template.Resources).filter(
      (r) => r.Type === 'AWS::Events::Rule' && r.Properties.EventPattern !== undefined,
    );
    assert.equal(patterned.length, 2);
    for (const rule of patterned) {
      assert.deepEqual(rule.Properties.EventBusName, { 'Fn::GetAtt': ['EventBus', 'Name'] });
      assert.deepEqual((rule.Properties.EventPattern as { source: string[] }).source, [
        'trainscaler.kubernetes',
      ]);
    }
  });

  it('exports a managed policy allowing only events:PutEvents on that bus', () => {
    const policy = template.Resources.ForwarderPolicy;
    assert.ok(policy);
    assert.equal(policy.Type, 'AWS::IAM::ManagedPolicy');
    const statements = (policy.Properties.PolicyDocument as { Statement: Record<string, unknown>[] })
      .Statement;
    assert.deepEqual(statements, [
      { Effect: 'Allow', Action: 'events:PutEvents', Resource: { 'Fn::GetAtt': ['EventBus', 'Arn'] } },
    ]);
    const output = template.Outputs.ForwarderPolicyArn;
    assert.deepEqual(output?.Value, { Ref: 'ForwarderPolicy' });
    assert.deepEqual(output?.Export, { Name: 'trainscaler-dev-forwarder-policy' });
  });
});
