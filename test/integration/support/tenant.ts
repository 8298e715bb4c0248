// A tenant team as a namespace admin sets one up: a ServiceAccount of the namespace bound to the built-in
// `edit` ClusterRole, and a kubeconfig with its token.
import assert from 'node:assert/strict';
import { KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { TestCluster } from './test-cluster.js';

export async function tenantKubeConfig(cluster: TestCluster, namespace: string): Promise<KubeConfig> {
  const { core, kc } = cluster.admin;
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'tenant' } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'tenant-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace }],
    },
  });
  const token = await core.createNamespacedServiceAccountToken({
    namespace,
    name: 'tenant',
    body: { spec: { expirationSeconds: 3600 } },
  });
  const server = kc.getCurrentCluster();
  assert.ok(server && token.status?.token);
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [{ ...server, name: 'test' }],
    users: [{ name: 'tenant', token: token.status.token }],
    contexts: [{ name: 'tenant', cluster: 'test', user: 'tenant', namespace }],
    currentContext: 'tenant',
  });
  return out;
}
