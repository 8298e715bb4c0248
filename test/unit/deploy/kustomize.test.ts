import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { ALERTMANAGER_PATH } from '../../../functions/alertmanager-http.js';
import { getArray, getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import { LEADER_LABEL } from '../../../lib/runner/leader-pod-label.js';
import { renderKustomization, skipWithoutKubectl } from '../../support/kustomize.js';

const skip = skipWithoutKubectl;
// Plain YAML (js-yaml), not client-node's loadAllYaml: its typed models rename fields (NetworkPolicy `from`).
const render = (): unknown[] => renderKustomization('infra/k8s');

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
      // Cluster-scoped (kustomize sets a namespace on the admission policy kinds it does not know yet; the
      // API server drops it).
      const clusterScoped = [
        'Namespace',
        'ClusterRole',
        'ClusterRoleBinding',
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
        'CustomResourceDefinition',
      ];
      if (clusterScoped.includes(String(kind))) continue;
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
    const env = (getArray(container, ['env']) ?? [])
      .map((e) => getString(e, ['valueFrom', 'fieldRef', 'fieldPath']))
      .filter((path) => path !== undefined);
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

describe('infra/k8s and infra/prometheus/alertmanager.yml agree', { skip }, () => {
  const docs = skip ? [] : render();
  const alertmanager = load(readFileSync('infra/prometheus/alertmanager.yml', 'utf8'));
  const receivers = (getArray(alertmanager, ['receivers']) ?? []).filter(
    (r) => getArray(r, ['webhook_configs']) !== undefined,
  );

  it("posts to the Service the kustomization renders, on its port, at the runner's route", () => {
    assert.equal(receivers.length, 1);
    const url = new URL(getString(receivers[0], ['webhook_configs', 0, 'url']) ?? '');
    const service = find(docs, 'Service');
    const name = getString(service, ['metadata', 'name']);
    const namespace = getString(service, ['metadata', 'namespace']);
    assert.ok(
      [`${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`].includes(url.hostname),
      `${url.hostname} names Service ${namespace}/${name}`,
    );
    assert.equal(url.protocol, 'http:');
    assert.equal(Number(url.port), getPath(service, ['spec', 'ports', 0, 'port']));
    assert.equal(url.pathname, ALERTMANAGER_PATH);
    // The Service's targetPort is the container port the runner listens on (`trainscaler run` --port 8080).
    const deployment = find(docs, 'Deployment', 'trainscaler');
    const container = getPath(deployment, ['spec', 'template', 'spec', 'containers', 0]);
    const targetPort = getPath(service, ['spec', 'ports', 0, 'targetPort']);
    const port = (getArray(container, ['ports']) ?? []).find((p) => getPath(p, ['name']) === targetPort);
    assert.equal(getPath(port, ['containerPort']), 8080);
  });

  it("selects only the leader among the Deployment's pods", () => {
    const service = find(docs, 'Service');
    const selector = getPath(service, ['spec', 'selector']) as Record<string, string>;
    assert.equal(selector[LEADER_LABEL], 'true');
    const deployment = find(docs, 'Deployment', 'trainscaler');
    const podLabels = getPath(deployment, ['spec', 'template', 'metadata', 'labels']) as Record<
      string,
      string
    >;
    const { [LEADER_LABEL]: _leader, ...others } = selector;
    for (const [key, value] of Object.entries(others)) assert.equal(podLabels[key], value, key);
    assert.equal(podLabels[LEADER_LABEL], undefined, 'no pod is the leader by its template');
  });

  it('sends the bearer token from a file, and the runner reads its token from the mounted Secret', () => {
    const authorization = getPath(receivers[0], ['webhook_configs', 0, 'http_config', 'authorization']);
    assert.equal(getString(authorization, ['type']), 'Bearer');
    assert.match(getString(authorization, ['credentials_file']) ?? '', /^\/.+/);
    const deployment = find(docs, 'Deployment', 'trainscaler');
    const pod = getPath(deployment, ['spec', 'template', 'spec']);
    const container = getPath(pod, ['containers', 0]);
    const tokenFile = (getArray(container, ['env']) ?? []).find(
      (e) => getString(e, ['name']) === 'TRAINSCALER_WEBHOOK_TOKEN_FILE',
    );
    const path = getString(tokenFile, ['value']) ?? '';
    const mount = (getArray(container, ['volumeMounts']) ?? []).find((m) =>
      path.startsWith(`${getString(m, ['mountPath'])}/`),
    );
    assert.ok(mount, `${path} is inside a mounted volume`);
    const volume = (getArray(pod, ['volumes']) ?? []).find(
      (v) => getString(v, ['name']) === getString(mount, ['name']),
    );
    assert.equal(getString(volume, ['secret', 'secretName']), 'trainscaler-webhook-token');
    assert.equal(path.slice((getString(mount, ['mountPath']) ?? '').length + 1), 'token', 'the Secret key');
  });
});
