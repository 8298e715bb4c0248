// The TrainingAutoscaler CRD (infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml), the parser that reads it
// (lib/training-autoscaler.ts) and who may write it (infra/k8s/trainingautoscalers-rbac.yaml): the names the
// code uses, a status subresource, the same fields, bounds, enums and defaults in the CRD's schema and the
// parser's (a field one of them lacks would be pruned by the API server or refused by the parser), the CEL rules,
// and the status granted to trainscaler's ServiceAccount and the Lambda group alone, the spec to edit and admin.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import {
  TRAINING_AUTOSCALER_RESOURCE,
  TRAINING_AUTOSCALER_SPEC_SCHEMA,
} from '../../../lib/training-autoscaler.js';

const crd = load(readFileSync('infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml', 'utf8'));
const version = getPath(crd, ['spec', 'versions', 0]);
const spec = getPath(version, ['schema', 'openAPIV3Schema', 'properties', 'spec']);

const KEYWORDS = [
  'type',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'maxItems',
  'maxProperties',
  'default',
];

/**
 * Where two schemas differ: properties, required, enums, bounds and defaults, recursively. The CRD writes an
 * enum with a type (`type: string, enum: [...]`), the parser's with the enum alone.
 */
function differences(a: unknown, b: unknown, at: string): string[] {
  if (!isObject(a) || !isObject(b))
    return a === b ? [] : [`${at}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`];
  const out: string[] = [];
  for (const k of KEYWORDS) {
    if (k === 'type' && (a.enum !== undefined || b.enum !== undefined)) continue;
    if (JSON.stringify(a[k]) !== JSON.stringify(b[k]))
      out.push(`${at}.${k}: ${JSON.stringify(a[k])} vs ${JSON.stringify(b[k])}`);
  }
  if (JSON.stringify(a.enum) !== JSON.stringify(b.enum)) out.push(`${at}.enum`);
  if (
    JSON.stringify([...((a.required as string[]) ?? [])].sort()) !==
    JSON.stringify([...((b.required as string[]) ?? [])].sort())
  )
    out.push(`${at}.required`);
  const pa = isObject(a.properties) ? a.properties : {};
  const pb = isObject(b.properties) ? b.properties : {};
  for (const k of new Set([...Object.keys(pa), ...Object.keys(pb)]))
    out.push(
      ...(k in pa && k in pb ? differences(pa[k], pb[k], `${at}.${k}`) : [`${at}.${k} only on one side`]),
    );
  if (a.items !== undefined || b.items !== undefined) out.push(...differences(a.items, b.items, `${at}[]`));
  if (isObject(a.additionalProperties) || isObject(b.additionalProperties))
    out.push(...differences(a.additionalProperties, b.additionalProperties, `${at}{}`));
  return out;
}

describe('the TrainingAutoscaler CRD', () => {
  it('serves the group, version, kind and plural the code uses, short name tsa, with a status subresource', () => {
    assert.equal(
      getString(crd, ['metadata', 'name']),
      `${TRAINING_AUTOSCALER_RESOURCE.plural}.${TRAINING_AUTOSCALER_RESOURCE.group}`,
    );
    assert.equal(getString(crd, ['spec', 'group']), TRAINING_AUTOSCALER_RESOURCE.group);
    assert.equal(getString(crd, ['spec', 'scope']), 'Namespaced');
    assert.equal(getString(crd, ['spec', 'names', 'kind']), TRAINING_AUTOSCALER_RESOURCE.kind);
    assert.deepEqual(getArray(crd, ['spec', 'names', 'shortNames']), ['tsa']);
    assert.equal(getString(version, ['name']), TRAINING_AUTOSCALER_RESOURCE.version);
    assert.deepEqual(getPath(version, ['subresources', 'status']), {});
    const columns = (getArray(version, ['additionalPrinterColumns']) ?? []).map((c) =>
      getString(c, ['name']),
    );
    assert.deepEqual(columns, [
      'Target',
      'Selector',
      'Min',
      'Max',
      'Mode',
      'Jobs',
      'Kind',
      'Step',
      'Cooldown',
      'Age',
    ]);
  });

  it('holds the spec to what the parser holds it to: fields, bounds, enums and defaults', () => {
    assert.deepEqual(differences(spec, TRAINING_AUTOSCALER_SPEC_SCHEMA, 'spec'), []);
  });

  it('checks with CEL what a schema cannot: one target, min <= max, a step, a supported kind at its apiVersion', () => {
    const rules = (path: string[]) =>
      (getArray(spec, [...path, 'x-kubernetes-validations']) ?? []).map((r) => getString(r, ['rule']));
    assert.deepEqual(rules([]), [
      '!(has(self.targetRef) && has(self.selector))',
      'has(self.targetRef) || has(self.selector)',
      '!has(self.maxWorkers) || self.minWorkers <= self.maxWorkers',
      '!has(self.maxStep) || self.maxStep >= 1',
    ]);
    const [kindRule, versionRule] = rules(['properties', 'targetRef']);
    assert.equal(
      kindRule,
      "self.kind in ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob']",
      'the kinds of SUPPORTED_KINDS',
    );
    for (const [kind, apiVersion] of [
      ['PyTorchJob', 'kubeflow.org/v1'],
      ['TFJob', 'kubeflow.org/v1'],
      ['StatefulSet', 'apps/v1'],
      ['Job', 'batch/v1'],
      ['JobSet', 'jobset.x-k8s.io/v1alpha2'],
      ['TrainJob', 'trainer.kubeflow.org/v1alpha1'],
    ])
      assert.ok(versionRule?.includes(`'${kind}': '${apiVersion}'`), `${kind} at ${apiVersion}`);
  });
});

const rbac = loadAll(readFileSync('infra/k8s/trainingautoscalers-rbac.yaml', 'utf8')).filter(isObject);
const lambda = loadAll(readFileSync('infra/k8s/lambda-access-trainingautoscalers.yaml', 'utf8')).filter(
  isObject,
);
const role = (name: string) =>
  rbac.find((d) => d.kind === 'ClusterRole' && getString(d, ['metadata', 'name']) === name);
const grants = (doc: unknown) =>
  (getArray(doc, ['rules']) ?? []).flatMap((r) =>
    (getArray(r, ['resources']) ?? []).map((res) => `${res}:${(getArray(r, ['verbs']) ?? []).join(',')}`),
  );
const aggregatedTo = (doc: unknown) =>
  ['view', 'edit', 'admin'].filter(
    (r) => getString(doc, ['metadata', 'labels', `rbac.authorization.k8s.io/aggregate-to-${r}`]) === 'true',
  );

describe('who may write a TrainingAutoscaler', () => {
  it('tenants read it through view, and write its spec, not its status, through edit and admin', () => {
    const view = role('trainscaler-trainingautoscalers-view');
    assert.deepEqual(aggregatedTo(view), ['view', 'edit', 'admin']);
    assert.deepEqual(grants(view), ['trainingautoscalers:get,list,watch']);
    const edit = role('trainscaler-trainingautoscalers-edit');
    assert.deepEqual(aggregatedTo(edit), ['edit', 'admin']);
    assert.deepEqual(grants(edit), ['trainingautoscalers:create,update,patch,delete,deletecollection']);
  });

  it('only trainscaler-policies grants the status, bound to trainscaler’s ServiceAccount and the Lambda group', () => {
    const granting = rbac.filter(
      (d) => d.kind === 'ClusterRole' && grants(d).some((g) => g.startsWith('trainingautoscalers/status')),
    );
    assert.deepEqual(
      granting.map((d) => getString(d, ['metadata', 'name'])),
      ['trainscaler-policies'],
    );
    assert.deepEqual(aggregatedTo(granting[0]), [], 'aggregated to no tenant role');
    const bindings = [...rbac, ...lambda].filter(
      (d) => d.kind === 'ClusterRoleBinding' && getString(d, ['roleRef', 'name']) === 'trainscaler-policies',
    );
    assert.deepEqual(
      bindings.flatMap((b) => getArray(b, ['subjects']) ?? []),
      [
        { kind: 'ServiceAccount', name: 'trainscaler', namespace: 'trainscaler-system' },
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'trainscaler-lambda' },
      ],
    );
  });

  it('ships in the kustomization and in the test control plane, CRD before its RBAC', () => {
    const kustomization = load(readFileSync('infra/k8s/kustomization.yaml', 'utf8'));
    const resources = (getArray(kustomization, ['resources']) ?? []).map(String);
    const crdAt = resources.indexOf('crds/trainscaler.io_trainingautoscalers.yaml');
    assert.ok(crdAt >= 0 && resources.indexOf('trainingautoscalers-rbac.yaml') > crdAt);
    const up = readFileSync('infra/cluster/up.sh', 'utf8');
    assert.match(
      up,
      /apply --server-side --force-conflicts -f "\$REPO_ROOT\/infra\/k8s\/crds\/trainscaler\.io_trainingautoscalers\.yaml"/,
    );
    assert.match(up, /apply -f "\$REPO_ROOT\/infra\/k8s\/trainingautoscalers-rbac\.yaml"/);
  });
});
