import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import { renderKustomization, skipWithoutKubectl } from '../../support/kustomize.js';

const skip = skipWithoutKubectl;

function find(docs: unknown[], kind: string): Record<string, unknown> {
  const found = docs.find((d) => isObject(d) && d.kind === kind);
  assert.ok(isObject(found), `${kind} is rendered`);
  return found;
}

describe('infra/k8s/forwarder kustomization', { skip }, () => {
  const docs = skip ? [] : renderKustomization('infra/k8s/forwarder');

  it('grants list and watch of exactly the kinds it forwards, and nothing else cluster-wide', () => {
    const rules = (getArray(find(docs, 'ClusterRole'), ['rules']) ?? []).filter(isObject);
    const grants = rules.flatMap((r) =>
      (r.resources as string[]).map(
        (res) => `${(r.apiGroups as string[]).join()}/${res}:${(r.verbs as string[]).join()}`,
      ),
    );
    assert.deepEqual(grants.sort(), [
      '/pods:list,watch',
      'apps/statefulsets:list,watch',
      'kubeflow.org/pytorchjobs:list,watch',
      'kubeflow.org/tfjobs:list,watch',
    ]);
  });

  it('lets it read and patch only its ledger ConfigMap', () => {
    const rules = getArray(find(docs, 'Role'), ['rules']) ?? [];
    assert.deepEqual(rules, [
      {
        apiGroups: [''],
        resources: ['configmaps'],
        resourceNames: ['trainscaler-forwarder-ledger'],
        verbs: ['get', 'patch'],
      },
    ]);
    const ledger = docs.find(
      (d) =>
        isObject(d) &&
        d.kind === 'ConfigMap' &&
        getString(d, ['metadata', 'name']) === 'trainscaler-forwarder-ledger',
    );
    assert.ok(isObject(ledger) && ledger.data === undefined, 'the shipped ledger has no data to overwrite');
  });

  it('runs one replica of `trainscaler forward` under its ServiceAccount, replaced not rolled', () => {
    const deployment = find(docs, 'Deployment');
    assert.equal(getPath(deployment, ['spec', 'replicas']), 1);
    assert.equal(getString(deployment, ['spec', 'strategy', 'type']), 'Recreate');
    assert.equal(
      getString(deployment, ['spec', 'template', 'spec', 'serviceAccountName']),
      'trainscaler-forwarder',
    );
    const container = (getArray(deployment, ['spec', 'template', 'spec', 'containers']) ?? [])[0];
    assert.deepEqual(getPath(container, ['args'])?.toString().split(',').slice(0, 3), [
      'forward',
      '--bus',
      '$(TRAINSCALER_EVENT_BUS)',
    ]);
  });
});
