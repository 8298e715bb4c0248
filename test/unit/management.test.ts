import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleAlarm } from '../../functions/alarm.js';
import { readRuntimeConfig } from '../../functions/runtime-deps.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { readJob } from '../../lib/adapters/job-adapter.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { DEFAULT_MANAGEMENT_SCOPE, managementOf } from '../../lib/management.js';
import { alertmanagerWebhook } from '../fixtures/payloads.js';
import { harness, toyJob, writesSince } from './functions/handler-harness.js';

const scope = (namespaceAllowlist: string[] = []) => ({
  namespaceAllowlist,
  ownNamespaces: ['trainscaler-system'],
});
const optedIn = { annotations: { [ANNOTATION.managed]: 'true' } };

describe('opt-in management', () => {
  it('manages a job only when it opts in by annotation or label, or its namespace is listed', () => {
    assert.equal(managementOf({ namespace: 'team-a' }, scope()).managed, false);
    assert.equal(managementOf({ namespace: 'team-a', ...optedIn }, scope()).managed, true);
    assert.equal(
      managementOf({ namespace: 'team-a', labels: { [ANNOTATION.managed]: 'true' } }, scope()).managed,
      true,
    );
    assert.equal(managementOf({ namespace: 'team-a' }, scope(['team-a'])).managed, true);
    // Any other value is not an opt-in.
    const yes = { namespace: 'team-a', annotations: { [ANNOTATION.managed]: 'yes' } };
    assert.equal(managementOf(yes, scope()).managed, false);
  });

  it('"false" opts out even in a listed namespace, by annotation or by label', () => {
    for (const where of ['annotations', 'labels'] as const) {
      const meta = { namespace: 'team-a', ...optedIn, [where]: { [ANNOTATION.managed]: 'false' } };
      assert.equal(managementOf(meta, scope(['team-a'])).managed, false, where);
    }
    const mixed = { namespace: 'team-a', ...optedIn, labels: { [ANNOTATION.managed]: 'false' } };
    assert.equal(managementOf(mixed, scope()).managed, false);
  });

  it('never manages system namespaces or its own, whatever the job says', () => {
    for (const namespace of ['kube-system', 'kube-public', 'kube-node-lease', 'trainscaler-system']) {
      const verdict = managementOf({ namespace, ...optedIn }, scope([namespace]));
      assert.equal(verdict.managed, false, namespace);
    }
  });

  it('with a namespace list, acts in no other namespace even for an opted-in job', () => {
    const verdict = managementOf({ namespace: 'team-b', ...optedIn }, scope(['team-a']));
    assert.deepEqual(verdict, { managed: false, why: 'namespace team-b is not in TRAINSCALER_NAMESPACES' });
  });

  it('readJob: the default scope manages opted-in jobs only, and says why not', () => {
    const job = toyJob();
    assert.equal(readJob(job).managed, true);
    delete job.metadata.annotations?.[ANNOTATION.managed];
    const view = readJob(job);
    assert.equal(view.managed, false);
    assert.match(view.unmanagedReason ?? '', /not opted in/);
    assert.equal(readJob(job, { ...DEFAULT_MANAGEMENT_SCOPE, namespaceAllowlist: ['team-a'] }).managed, true);
    const system = toyJob({ namespace: 'kube-system' });
    assert.equal(readJob(system).managed, false);
  });

  it('an alarm for a job that did not opt in writes nothing; listing its namespace opts it in', async () => {
    const { sim, deps } = harness();
    const job = toyJob({ workers: 1 });
    delete job.metadata.annotations?.[ANNOTATION.managed];
    sim.submitJob(job);
    sim.step(900);
    const mark = sim.writeLog().length;
    const payload = alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' }]);
    const result = await handleAlarm(payload, deps);
    assert.equal(result.outcomes[0]?.skipped, 'not-managed');
    assert.match(result.outcomes[0]?.plan.reason ?? '', /not opted in/);
    assert.deepEqual(writesSince(sim, mark), []);
    const listed = await handleAlarm(payload, {
      ...deps,
      config: { ...DEFAULT_POLICY_CONFIG, namespaceAllowlist: ['team-a'] },
    });
    assert.notEqual(listed.outcomes[0]?.skipped, 'not-managed', listed.outcomes[0]?.plan.reason);
  });

  it('configuration: listing a system namespace or trainscaler’s own fails at start', () => {
    const base = { PROMETHEUS_URL: 'http://127.0.0.1:9', LOG_LEVEL: 'silent' };
    for (const ns of ['kube-system', 'trainscaler-system', 'ops'])
      assert.throws(
        () => readRuntimeConfig({ ...base, POD_NAMESPACE: 'ops', TRAINSCALER_NAMESPACES: `team-a,${ns}` }),
        (e) => e instanceof ConfigError && /TRAINSCALER_NAMESPACES/.test(e.message),
        ns,
      );
    const config = readRuntimeConfig({ ...base, POD_NAMESPACE: 'ops', TRAINSCALER_NAMESPACES: 'team-a' });
    assert.deepEqual(config.policy.ownNamespaces, ['ops', 'trainscaler-system']);
    assert.deepEqual(config.policy.namespaceAllowlist, ['team-a']);
  });
});
