import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { loadAll } from 'js-yaml';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';

function kubectlAvailable(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

const skip = kubectlAvailable() ? false : 'kubectl is not installed (needed for `kubectl kustomize`)';

function render(): unknown[] {
  const yaml = execFileSync('kubectl', ['kustomize', 'infra/k8s'], { encoding: 'utf8', timeout: 30_000 });
  // Plain YAML, not client-node's loadAllYaml: its typed models rename fields (NetworkPolicy `from`).
  return loadAll(yaml);
}

function find(docs: unknown[], kind: string, name?: string): unknown {
  const found = docs.find(
    (d) =>
      isObject(d) && d.kind === kind && (name === undefined || getString(d, ['metadata', 'name']) === name),
  );
  assert.ok(found, `${kind}${name ? ` ${name}` : ''} is rendered`);
  return found;
}

describe('infra/k8s kustomization', { skip }, () => {
  const docs = skip ? [] : render();

  it('renders every object into trainscaler-system, with the RBAC from rbac.yaml', () => {
    const kinds = docs.map((d) => (isObject(d) ? d.kind : undefined)).sort();
    for (const kind of [
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'Deployment',
      'Namespace',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Service',
      'ServiceAccount',
    ])
      assert.ok(kinds.includes(kind), `${kind} rendered`);
    for (const doc of docs) {
      const kind = isObject(doc) ? doc.kind : '';
      if (['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(String(kind))) continue;
      assert.equal(
        getString(doc, ['metadata', 'namespace']),
        'trainscaler-system',
        `${String(kind)} namespace`,
      );
    }
  });

  it('runs two replicas of `trainscaler run` as the ServiceAccount, with identity from the downward API', () => {
    const deployment = find(docs, 'Deployment', 'trainscaler');
    assert.equal(getPath(deployment, ['spec', 'replicas']), 2);
    const pod = getPath(deployment, ['spec', 'template', 'spec']);
    assert.equal(getString(pod, ['serviceAccountName']), 'trainscaler');
    const container = getPath(pod, ['containers', 0]);
    assert.deepEqual(getPath(container, ['args']), ['run']);
    const env = (getArray(container, ['env']) ?? []).map((e) =>
      getString(e, ['valueFrom', 'fieldRef', 'fieldPath']),
    );
    assert.deepEqual(env, ['metadata.name', 'metadata.namespace']);
    assert.equal(getPath(container, ['securityContext', 'readOnlyRootFilesystem']), true);
    // The settings ConfigMap is referenced under its hashed name.
    const configMap = find(docs, 'ConfigMap');
    const configName = getString(configMap, ['metadata', 'name']) ?? '';
    assert.match(configName, /^trainscaler-config-[a-z0-9]+$/);
    assert.equal(getString(container, ['envFrom', 0, 'configMapRef', 'name']), configName);
    assert.match(getString(configMap, ['data', 'PROMETHEUS_URL']) ?? '', /^https?:\/\//);
  });

  it('keeps one replica through voluntary disruptions', () => {
    const pdb = find(docs, 'PodDisruptionBudget', 'trainscaler');
    assert.equal(getPath(pdb, ['spec', 'minAvailable']), 1);
    const deployment = find(docs, 'Deployment', 'trainscaler');
    assert.deepEqual(
      getPath(pdb, ['spec', 'selector', 'matchLabels']),
      getPath(deployment, ['spec', 'selector', 'matchLabels']),
    );
  });

  it('admits traffic only to the HTTP port and only from the monitoring namespace', () => {
    const policy = find(docs, 'NetworkPolicy', 'trainscaler');
    assert.deepEqual(getPath(policy, ['spec', 'policyTypes']), ['Ingress', 'Egress']);
    const ingress = getArray(policy, ['spec', 'ingress']) ?? [];
    assert.equal(ingress.length, 1);
    assert.deepEqual(getPath(ingress[0], ['from']), [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
    assert.deepEqual(getPath(ingress[0], ['ports']), [{ protocol: 'TCP', port: 'http' }]);
    const egressPorts = (getArray(policy, ['spec', 'egress']) ?? []).flatMap((rule) =>
      (getArray(rule, ['ports']) ?? []).map((p) => getPath(p, ['port'])),
    );
    assert.deepEqual(egressPorts.sort(), [443, 53, 53, 6443, 9090].sort());
  });
});
