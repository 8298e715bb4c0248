import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import { INFORMER_ACCESS } from '../../../lib/cluster/api-access.js';
import { renderKustomization, skipWithoutKubectl } from '../../support/kustomize.js';

const skip = skipWithoutKubectl;

function find(docs: unknown[], kind: string): Record<string, unknown> {
  const found = docs.find((d) => isObject(d) && d.kind === kind);
  assert.ok(isObject(found), `${kind} is rendered`);
  return found;
}

describe('infra/k8s/forwarder kustomization', { skip }, () => {
  const docs = skip ? [] : renderKustomization('infra/k8s/forwarder');

  it('grants exactly what its informers request (lib/cluster/api-access.ts), and nothing else cluster-wide', () => {
    const rules = (getArray(find(docs, 'ClusterRole'), ['rules']) ?? []).filter(isObject);
    const grants = rules.flatMap((r) =>
      (r.apiGroups as string[]).flatMap((group) =>
        (r.resources as string[]).flatMap((res) =>
          (r.verbs as string[]).map((verb) => `${group}/${res}:${verb}`),
        ),
      ),
    );
    // The forwarder runs the runner's informers (lib/forwarder/forwarder.ts): every job kind and pods.
    const requested = [...new Set(INFORMER_ACCESS.map((a) => `${a.group}/${a.resource}:${a.verb}`))].sort();
    assert.deepEqual([...new Set(grants)].sort(), requested);
    for (const kind of ['batch/jobs', 'jobset.x-k8s.io/jobsets', 'trainer.kubeflow.org/trainjobs'])
      assert.ok(requested.includes(`${kind}:watch`), `${kind} is watched`);
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
