// The ScaledTrainingJob CRD (infra/k8s/crds/trainscaler.io_scaledtrainingjobs.yaml) and who may write it
// (infra/k8s/scaledtrainingjobs-rbac.yaml): the names the code uses, a status subresource, an immutable target,
// a schema that keeps every field trainscaler writes (a structural schema silently prunes unknown ones), and
// status writes granted to trainscaler's ServiceAccount alone, read access aggregated to view, edit and admin.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { actOnJob } from '../../../lib/actuator.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import { JOB_STATE_RESOURCE, jobStateName } from '../../../lib/cluster/job-state.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { TOY, toyJob } from '../functions/handler-harness.js';
import { FIXED_APP_MODEL } from '../sim/fixed-app-model.js';

const crd = load(readFileSync('infra/k8s/crds/trainscaler.io_scaledtrainingjobs.yaml', 'utf8'));
const version = getPath(crd, ['spec', 'versions', 0]);
const schema = getPath(version, ['schema', 'openAPIV3Schema']);

/** Every path of `value` missing from the schema (arrays: their items; preserve-unknown-fields: anything below). */
function unknownPaths(value: unknown, node: unknown, at: string): string[] {
  if (!isObject(node)) return [at];
  if (node['x-kubernetes-preserve-unknown-fields'] === true) return [];
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownPaths(v, node.items, `${at}[${i}]`));
  if (!isObject(value)) return [];
  const properties = isObject(node.properties) ? node.properties : {};
  return Object.entries(value).flatMap(([k, v]) =>
    k in properties ? unknownPaths(v, properties[k], `${at}.${k}`) : [`${at}.${k}`],
  );
}

describe('the ScaledTrainingJob CRD', () => {
  it('serves the group, version, kind and plural the code uses, with a status subresource', () => {
    assert.equal(
      getString(crd, ['metadata', 'name']),
      `${JOB_STATE_RESOURCE.plural}.${JOB_STATE_RESOURCE.group}`,
    );
    assert.equal(getString(crd, ['spec', 'group']), JOB_STATE_RESOURCE.group);
    assert.equal(getString(crd, ['spec', 'scope']), 'Namespaced');
    assert.equal(getString(crd, ['spec', 'names', 'kind']), JOB_STATE_RESOURCE.kind);
    assert.equal(getString(crd, ['spec', 'names', 'plural']), JOB_STATE_RESOURCE.plural);
    assert.deepEqual(getArray(crd, ['spec', 'names', 'shortNames']), ['stj']);
    assert.equal(getString(version, ['name']), JOB_STATE_RESOURCE.version);
    assert.deepEqual(getPath(version, ['subresources', 'status']), {});
    const rules = getArray(schema, [
      'properties',
      'spec',
      'properties',
      'targetRef',
      'x-kubernetes-validations',
    ]);
    assert.deepEqual(
      rules?.map((r) => getString(r, ['rule'])),
      ['self == oldSelf'],
    );
    const columns = (getArray(version, ['additionalPrinterColumns']) ?? []).map((c) =>
      getString(c, ['name']),
    );
    // As `kubectl get hpa`: target, min, max, current, desired; then the policy's mode, the last action, age.
    for (const name of ['Kind', 'Target', 'Min', 'Max', 'Current', 'Desired', 'Mode', 'Last action', 'Age'])
      assert.ok(columns.includes(name), name);
    const paths = new Map(
      (getArray(version, ['additionalPrinterColumns']) ?? []).map((c) => [
        getString(c, ['name']),
        getString(c, ['jsonPath']),
      ]),
    );
    assert.equal(paths.get('Min'), '.status.policy.minWorkers');
    assert.equal(paths.get('Max'), '.status.policy.maxWorkers');
    assert.equal(paths.get('Current'), '.status.observedWorkers');
    assert.equal(paths.get('Desired'), '.status.desiredWorkers');
    assert.equal(paths.get('Mode'), '.status.policy.mode');
  });

  it('keeps every field of the status the actuator writes (nothing pruned)', async () => {
    const sim = new SimulatedCluster({ seed: 7, apps: FIXED_APP_MODEL });
    const job = toyJob({ workers: 2, maxReplicas: 8 });
    job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: 'true' };
    sim.submitJob(job);
    sim.step(300);
    const deps = { cluster: sim, clock: sim.clock.now, dryRun: false, namespaceAllowlist: [], metrics: sim };
    const quiet = { info: () => {}, warn: () => {}, error: () => {} };
    const grow = await actOnJob(
      TOY,
      (s) => ({
        ref: TOY,
        policy: 'fault',
        reason: 'oom',
        changes: [
          { kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 0, to: 3 },
          { kind: 'pause', reason: 'why' },
        ],
      }),
      { ...deps, logger: quiet, guardrails: { cooldownSeconds: 0 } },
    );
    assert.equal(grow.applied, true);
    const stored = await sim.getJobState(TOY);
    assert.equal(stored?.name, jobStateName('PyTorchJob', 'toy'));
    const status = {
      ...(stored?.status as object),
      rescaleCost: { upPause: 1, upToFirstStep: 2, down: 3, measuredFor: 4 },
      oomCount: 1,
      scaleDowns: 1,
      largestRunWorkers: 2,
      recommendation: { workers: 3, reason: 'r', at: 1 },
      conditions: [
        {
          type: 'Active',
          status: 'True',
          reason: 'r',
          message: 'm',
          lastTransitionTime: 'x',
          observedGeneration: 1,
        },
      ],
    };
    assert.deepEqual(unknownPaths(status, getPath(schema, ['properties', 'status']), 'status'), []);
    assert.ok('lastRescale' in status && 'lastDecision' in status && 'paused' in status);
    // What `kubectl get stj` shows of a job opted in by annotation: its implied policy and the desired count.
    assert.ok('policy' in status && 'desiredWorkers' in status && 'conditions' in status);
  });
});

const rbac = loadAll(readFileSync('infra/k8s/scaledtrainingjobs-rbac.yaml', 'utf8')).filter(isObject);
const rulesOf = (name: string) =>
  getArray(
    rbac.find((d) => d.kind === 'ClusterRole' && getString(d, ['metadata', 'name']) === name),
    ['rules'],
  ) ?? [];
const resources = (rules: unknown[]) =>
  rules.flatMap((r) =>
    (getArray(r, ['resources']) ?? []).map((res) => `${res}:${(getArray(r, ['verbs']) ?? []).join(',')}`),
  );

describe('who may write a ScaledTrainingJob', () => {
  it('tenants read it through view, edit and admin, and nothing else', () => {
    const view = rbac.find(
      (d) => getString(d, ['metadata', 'name']) === 'trainscaler-scaledtrainingjobs-view',
    );
    for (const role of ['view', 'edit', 'admin'])
      assert.equal(
        getString(view, ['metadata', 'labels', `rbac.authorization.k8s.io/aggregate-to-${role}`]),
        'true',
      );
    assert.deepEqual(resources(rulesOf('trainscaler-scaledtrainingjobs-view')), [
      'scaledtrainingjobs:get,list,watch',
    ]);
  });

  it('only trainscaler-state grants the status, bound to trainscaler’s ServiceAccount', () => {
    const granting = rbac.filter(
      (d) =>
        d.kind === 'ClusterRole' &&
        resources(getArray(d, ['rules']) ?? []).some((r) => r.startsWith('scaledtrainingjobs/status')),
    );
    assert.deepEqual(
      granting.map((d) => getString(d, ['metadata', 'name'])),
      ['trainscaler-state'],
    );
    const binding = rbac.find((d) => d.kind === 'ClusterRoleBinding');
    assert.deepEqual(getArray(binding, ['subjects']), [
      { kind: 'ServiceAccount', name: 'trainscaler', namespace: 'trainscaler-system' },
    ]);
  });
});
