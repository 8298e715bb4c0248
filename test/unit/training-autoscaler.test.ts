// The TrainingAutoscaler parser and resolver (lib/training-autoscaler.ts): what a malformed policy is refused
// for, which policy governs a job (targetRef beats selector, equal claims conflict, opted-in jobs keep an
// implied policy), and the limits a policy sets over the operator's PolicyConfig.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { formatLabelSelector, labelSelectorMatches } from '../../lib/label-selector.js';
import { DEFAULT_MANAGEMENT_SCOPE } from '../../lib/management.js';
import {
  InvalidPolicyError,
  PolicyConflictError,
  type PolicyJob,
  parseTrainingAutoscaler,
  parseTrainingAutoscalers,
  policyFor,
  policyLimits,
  type TrainingAutoscaler,
  workerBoundsUnder,
} from '../../lib/training-autoscaler.js';

function raw(name: string, spec: unknown, namespace = 'team-a') {
  return {
    apiVersion: 'trainscaler.io/v1alpha1',
    kind: 'TrainingAutoscaler',
    metadata: { name, namespace, generation: 2 },
    spec,
  };
}
const parse = (name: string, spec: unknown, namespace?: string) =>
  parseTrainingAutoscaler(raw(name, spec, namespace));

function job(name: string, labels: Record<string, string> = {}, extra: Partial<PolicyJob['metadata']> = {}) {
  return {
    kind: 'PyTorchJob',
    apiVersion: 'kubeflow.org/v1',
    metadata: { name, namespace: 'team-a', labels, ...extra },
  };
}

const SCOPE = DEFAULT_MANAGEMENT_SCOPE;

describe('parseTrainingAutoscaler', () => {
  it('reads a policy and fills in the CRD’s defaults, leaving the object read as it was', () => {
    const object = raw('bert', { selector: { matchExpressions: [{ key: 'gpu', operator: 'Exists' }] } });
    const before = structuredClone(object);
    const policy = parseTrainingAutoscaler(object);
    assert.deepEqual(object, before);
    assert.deepEqual(policy, {
      namespace: 'team-a',
      name: 'bert',
      generation: 2,
      selector: { matchExpressions: [{ key: 'gpu', operator: 'Exists', values: [] }] },
      minWorkers: 1,
      actions: {
        resize: true,
        rightsize: true,
        replaceStragglers: true,
        yieldForRebalance: true,
        tuneRendezvous: false,
      },
      mode: 'Recommend',
    });
    const full = parse('llama', {
      targetRef: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'llama' },
      minWorkers: 2,
      maxWorkers: 2,
      maxStep: 1,
      cooldownSeconds: 0,
      actions: { rightsize: false },
      mode: 'Auto',
    });
    assert.deepEqual(full.targetRef, { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'llama' });
    assert.deepEqual([full.minWorkers, full.maxWorkers, full.maxStep, full.cooldownSeconds], [2, 2, 1, 0]);
    assert.equal(full.actions.rightsize, false);
    assert.equal(full.actions.resize, true);
    assert.equal(full.mode, 'Auto');
  });

  const target = { kind: 'TFJob', name: 'x' };
  const malformed: [string, unknown, string, RegExp][] = [
    [
      'min one over max',
      { targetRef: target, minWorkers: 3, maxWorkers: 2 },
      '/spec/minWorkers',
      /\(3\) is greater than maxWorkers \(2\)/,
    ],
    [
      'min over max',
      { targetRef: target, minWorkers: 5, maxWorkers: 2 },
      '/spec/minWorkers',
      /5\) is greater than maxWorkers \(2/,
    ],
    ['a step of 0', { targetRef: target, maxStep: 0 }, '/spec/maxStep', /at least 1 worker, not 0/],
    ['a negative step', { targetRef: target, maxStep: -2 }, '/spec/maxStep', /at least 1 worker/],
    [
      'an unknown kind',
      { targetRef: { kind: 'Deployment', name: 'web' } },
      '/spec/targetRef/kind',
      /does not support kind Deployment \(supported: PyTorchJob, TFJob/,
    ],
    [
      'another apiVersion',
      { targetRef: { ...target, apiVersion: 'kubeflow.org/v2' } },
      '/spec/targetRef/apiVersion',
      /TFJob is read at kubeflow.org\/v1/,
    ],
    ['targetRef and selector', { targetRef: target, selector: {} }, '/spec', /both targetRef and selector/],
    ['neither', { minWorkers: 1 }, '/spec', /neither targetRef nor selector/],
    ['a mode not known', { targetRef: target, mode: 'auto' }, '/spec/mode', /allowed values/],
    [
      'an action not known',
      { targetRef: target, actions: { delete: true } },
      '/spec/actions',
      /additional properties/,
    ],
    ['a field not known', { targetRef: target, minReplicas: 2 }, '/spec', /additional properties/],
    ['a count that is no integer', { targetRef: target, maxWorkers: 2.5 }, '/spec/maxWorkers', /integer/],
    ['0 workers', { targetRef: target, minWorkers: 0 }, '/spec/minWorkers', />= 1/],
    ['a targetRef without a name', { targetRef: { kind: 'TFJob' } }, '/spec/targetRef/name', /required/],
    [
      'In without values',
      { selector: { matchExpressions: [{ key: 'a', operator: 'In' }] } },
      '/spec/selector/matchExpressions/0',
      /In needs values/,
    ],
    [
      'Exists with values',
      { selector: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['b'] }] } },
      '/spec/selector/matchExpressions/0',
      /Exists takes no values/,
    ],
    ['no spec', undefined, '/spec', /has no spec/],
  ];
  for (const [what, spec, field, message] of malformed) {
    it(`refuses ${what}, naming the policy and the field`, () => {
      assert.throws(
        () => parse('bad', spec),
        (e: unknown) =>
          e instanceof InvalidPolicyError &&
          e.field === field &&
          e.policy === 'team-a/bad' &&
          message.test(e.message) &&
          e.message.includes('TrainingAutoscaler team-a/bad'),
      );
    });
  }

  it('refuses an object that is no TrainingAutoscaler or has no name', () => {
    assert.throws(
      () => parseTrainingAutoscaler({ ...raw('x', { selector: {} }), kind: 'ScaledTrainingJob' }),
      (e: unknown) => e instanceof InvalidPolicyError && e.field === '/kind',
    );
    assert.throws(
      () => parseTrainingAutoscaler({ kind: 'TrainingAutoscaler', metadata: { namespace: 'a' }, spec: {} }),
      (e: unknown) => e instanceof InvalidPolicyError && e.field === '/metadata' && e.policy === 'a/?',
    );
  });

  it('reads a LIST into the valid policies and an error per malformed one, throwing none', () => {
    const { policies, invalid } = parseTrainingAutoscalers([
      raw('good', { selector: {} }),
      raw('bad', { targetRef: { kind: 'TFJob', name: 'x' }, maxStep: 0 }),
    ]);
    assert.deepEqual(
      policies.map((p) => p.name),
      ['good'],
    );
    assert.deepEqual(
      invalid.map((e) => e.policy),
      ['team-a/bad'],
    );
  });
});

describe('policyFor: which policy governs a job', () => {
  const byName = parse('by-name', { targetRef: { kind: 'PyTorchJob', name: 'bert-1' }, mode: 'Auto' });
  const bertRuns = parse('bert-runs', { selector: { matchLabels: { app: 'bert' } } });
  const gpuJobs = parse('gpu-jobs', { selector: { matchExpressions: [{ key: 'gpu', operator: 'Exists' }] } });

  it('a targetRef beats a selector that also matches', () => {
    const resolved = policyFor(job('bert-1', { app: 'bert' }), [bertRuns, byName], SCOPE);
    assert.equal(resolved.source, 'targetRef');
    assert.equal('policy' in resolved && resolved.policy.name, 'by-name');
    assert.match(resolved.why, /TrainingAutoscaler team-a\/by-name targets it/);
  });

  it('a selector governs the jobs whose labels match, and only in its own namespace', () => {
    const resolved = policyFor(job('bert-2', { app: 'bert' }), [bertRuns, byName], SCOPE);
    assert.equal(resolved.source, 'selector');
    assert.match(resolved.why, /team-a\/bert-runs selects it \(app=bert\)/);
    const elsewhere = {
      ...job('bert-2', { app: 'bert' }),
      metadata: { name: 'bert-2', namespace: 'team-b', labels: { app: 'bert' } },
    };
    assert.equal(policyFor(elsewhere, [bertRuns, byName], SCOPE).source, 'none');
    assert.equal(policyFor(job('gpt', { app: 'gpt' }), [bertRuns], SCOPE).source, 'none');
  });

  it('a targetRef names one kind: a TFJob of the same name is not governed', () => {
    const tf = { ...job('bert-1'), kind: 'TFJob', apiVersion: 'kubeflow.org/v1' };
    assert.equal(policyFor(tf, [byName], SCOPE).source, 'none');
  });

  it('two selectors that match one job are a conflict naming both; the job is left alone', () => {
    const resolved = policyFor(job('bert-3', { app: 'bert', gpu: 'a100' }), [bertRuns, gpuJobs], SCOPE);
    assert.equal(resolved.source, 'conflict');
    assert.ok(!('policy' in resolved));
    assert.ok(resolved.source === 'conflict' && resolved.error instanceof PolicyConflictError);
    assert.deepEqual(resolved.source === 'conflict' && resolved.error.policies, [
      'team-a/bert-runs',
      'team-a/gpu-jobs',
    ]);
    assert.match(
      resolved.why,
      /PyTorchJob team-a\/bert-3 is claimed by 2 TrainingAutoscalers by selector \(team-a\/bert-runs, team-a\/gpu-jobs\)/,
    );
    // A targetRef settles it.
    const settled = parse('settles', { targetRef: { kind: 'PyTorchJob', name: 'bert-3' } });
    assert.equal(
      policyFor(job('bert-3', { app: 'bert', gpu: 'a100' }), [bertRuns, gpuJobs, settled], SCOPE).source,
      'targetRef',
    );
  });

  it('two targetRefs naming one job are a conflict too', () => {
    const again = parse('again', { targetRef: { kind: 'PyTorchJob', name: 'bert-1' } });
    const resolved = policyFor(job('bert-1'), [byName, again], SCOPE);
    assert.equal(resolved.source, 'conflict');
    assert.match(resolved.why, /by targetRef \(team-a\/by-name, team-a\/again\)/);
  });

  it('a job opted in the old way, with no policy, gets the implied one: Auto, as before', () => {
    const optedIn = job(
      'old',
      {},
      { annotations: { 'trainscaler.io/managed': 'true', 'trainscaler.io/tune-rendezvous': 'true' } },
    );
    const resolved = policyFor(optedIn, [bertRuns], SCOPE);
    assert.equal(resolved.source, 'opt-in');
    assert.ok('policy' in resolved);
    assert.equal(resolved.policy.mode, 'Auto');
    assert.equal(resolved.policy.actions.tuneRendezvous, true);
    assert.equal(resolved.policy.maxStep, undefined);
    assert.equal(resolved.policy.cooldownSeconds, undefined);
    assert.equal(resolved.policy.maxWorkers, undefined);
    const listed = policyFor(job('in-listed-ns'), [], { ...SCOPE, namespaceAllowlist: ['team-a'] });
    assert.equal(listed.source, 'opt-in');
    assert.equal('policy' in listed && listed.policy.actions.tuneRendezvous, false);
    // A policy that matches wins over the implied one (here: Recommend, not Auto).
    const labelled = job('bert-9', { app: 'bert' }, { annotations: { 'trainscaler.io/managed': 'true' } });
    const governed = policyFor(labelled, [bertRuns], SCOPE);
    assert.equal(governed.source, 'selector');
    assert.equal('policy' in governed && governed.policy.mode, 'Recommend');
  });

  it('a job trainscaler never manages has no policy, whatever names it', () => {
    const kube = { ...job('bert-1'), metadata: { name: 'bert-1', namespace: 'kube-system' } };
    const inKube = parse('by-name', { targetRef: { kind: 'PyTorchJob', name: 'bert-1' } }, 'kube-system');
    assert.match(policyFor(kube, [inKube], SCOPE).why, /system namespace/);
    const own = { ...job('bert-1'), metadata: { name: 'bert-1', namespace: 'trainscaler-system' } };
    const inOwn = parse(
      'by-name',
      { targetRef: { kind: 'PyTorchJob', name: 'bert-1' } },
      'trainscaler-system',
    );
    assert.match(policyFor(own, [inOwn], SCOPE).why, /trainscaler's own/);
    const optedOut = job('bert-1', { 'trainscaler.io/managed': 'false' });
    assert.equal(policyFor(optedOut, [byName], SCOPE).source, 'none');
    const optedOutByAnnotation = job('bert-1', {}, { annotations: { 'trainscaler.io/managed': 'false' } });
    assert.match(policyFor(optedOutByAnnotation, [byName], SCOPE).why, /trainscaler.io\/managed=false/);
    const notListed = policyFor(job('bert-1'), [byName], { ...SCOPE, namespaceAllowlist: ['team-b'] });
    assert.match(notListed.why, /not in TRAINSCALER_NAMESPACES/);
    const deployment = { ...job('bert-1'), kind: 'Deployment' };
    assert.match(policyFor(deployment, [bertRuns], SCOPE).why, /kind Deployment is not supported/);
  });

  it('a malformed policy holds the jobs of its namespace that no valid targetRef names', () => {
    const { policies, invalid } = parseTrainingAutoscalers([
      raw('broken', { selector: { matchLabels: { app: 'bert' } }, maxStep: 0 }),
      raw('by-name', { targetRef: { kind: 'PyTorchJob', name: 'bert-1' } }),
      raw('broken-elsewhere', { selector: {}, maxStep: 0 }, 'team-b'),
    ]);
    const optedIn = job('bert-2', { app: 'bert' }, { annotations: { 'trainscaler.io/managed': 'true' } });
    const held = policyFor(optedIn, [...policies, bertRuns], SCOPE, invalid);
    assert.equal(held.source, 'invalid');
    assert.match(held.why, /a TrainingAutoscaler of its namespace cannot be read \(team-a\/broken\)/);
    assert.equal(policyFor(job('bert-1'), policies, SCOPE, invalid).source, 'targetRef');
    const otherNamespace = { ...optedIn, metadata: { ...optedIn.metadata, namespace: 'team-c' } };
    assert.equal(policyFor(otherNamespace, policies, SCOPE, invalid).source, 'opt-in');
  });
});

describe('the limits a policy sets', () => {
  const base: TrainingAutoscaler = parse('p', { selector: {}, minWorkers: 2, maxWorkers: 6 });

  it('its step and cool-down replace the operator’s; unset, the operator’s stay', () => {
    const unset = policyLimits(base, DEFAULT_POLICY_CONFIG);
    assert.equal(unset.config.maxReplicaStep, DEFAULT_POLICY_CONFIG.maxReplicaStep);
    assert.equal(unset.config.cooldownSeconds, DEFAULT_POLICY_CONFIG.cooldownSeconds);
    assert.deepEqual([unset.minWorkers, unset.maxWorkers, unset.mode], [2, 6, 'Recommend']);
    const set = policyLimits({ ...base, maxStep: 1, cooldownSeconds: 600 }, DEFAULT_POLICY_CONFIG);
    assert.equal(set.config.maxReplicaStep, 1);
    assert.equal(set.config.cooldownSeconds, 600);
    assert.equal(set.config.minRelativeGain, DEFAULT_POLICY_CONFIG.minRelativeGain, 'the rest as configured');
    assert.equal(
      policyLimits({ ...base, cooldownSeconds: 0 }, DEFAULT_POLICY_CONFIG).config.cooldownSeconds,
      0,
    );
    assert.equal(
      'maxWorkers' in policyLimits({ ...base, maxWorkers: undefined }, DEFAULT_POLICY_CONFIG),
      false,
    );
  });

  it('narrows the job’s own worker bounds, never widens them, and says when nothing is left', () => {
    assert.deepEqual(workerBoundsUnder({ min: 1, max: 8 }, { minWorkers: 2, maxWorkers: 6 }), {
      min: 2,
      max: 6,
    });
    assert.deepEqual(workerBoundsUnder({ min: 3, max: 4 }, { minWorkers: 1, maxWorkers: 16 }), {
      min: 3,
      max: 4,
    });
    assert.deepEqual(workerBoundsUnder({ min: 1, max: 4 }, { minWorkers: 1 }), { min: 1, max: 4 });
    assert.deepEqual(workerBoundsUnder({ min: 2, max: 4 }, { minWorkers: 4, maxWorkers: 4 }), {
      min: 4,
      max: 4,
    });
    assert.equal(workerBoundsUnder({ min: 1, max: 4 }, { minWorkers: 5 }), undefined);
    assert.equal(workerBoundsUnder({ min: 4, max: 8 }, { minWorkers: 1, maxWorkers: 2 }), undefined);
  });
});

describe('label selectors', () => {
  const labels = { app: 'bert', tier: 'a' };
  it('match as the API server matches them', () => {
    assert.equal(labelSelectorMatches({}, labels), true, 'an empty selector matches everything');
    assert.equal(labelSelectorMatches({ matchLabels: { app: 'bert' } }, labels), true);
    assert.equal(labelSelectorMatches({ matchLabels: { app: 'bert', tier: 'b' } }, labels), false);
    assert.equal(labelSelectorMatches({ matchLabels: { gpu: '' } }, labels), false);
    const expr = (operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist', key: string, values?: string[]) =>
      labelSelectorMatches(
        { matchExpressions: [values ? { key, operator, values } : { key, operator }] },
        labels,
      );
    assert.equal(expr('In', 'tier', ['a', 'b']), true);
    assert.equal(expr('In', 'tier', ['b']), false);
    assert.equal(expr('In', 'gpu', ['a']), false);
    assert.equal(expr('NotIn', 'tier', ['b']), true);
    assert.equal(expr('NotIn', 'tier', ['a']), false);
    assert.equal(expr('NotIn', 'gpu', ['a']), true, 'a missing key satisfies NotIn');
    assert.equal(expr('Exists', 'app'), true);
    assert.equal(expr('Exists', 'gpu'), false);
    assert.equal(expr('DoesNotExist', 'gpu'), true);
    assert.equal(expr('DoesNotExist', 'app'), false);
    assert.equal(labelSelectorMatches({ matchLabels: { app: 'bert' } }, undefined), false);
  });

  it('print as kubectl prints them', () => {
    assert.equal(
      formatLabelSelector({
        matchLabels: { app: 'bert' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['a', 'b'] },
          { key: 'zone', operator: 'NotIn', values: ['x'] },
          { key: 'gpu', operator: 'Exists' },
          { key: 'spot', operator: 'DoesNotExist' },
        ],
      }),
      'app=bert,tier in (a,b),zone notin (x),gpu,!spot',
    );
    assert.equal(formatLabelSelector({}), '(every job)');
  });
});
