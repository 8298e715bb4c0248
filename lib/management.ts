// Which jobs trainscaler may act on at all. Management is opt-in: a job opts in with the annotation (or
// label) trainscaler.io/managed: "true", or because the operator lists its namespace in
// TRAINSCALER_NAMESPACES. "false" always opts out, and the cluster's own namespaces (kube-*) and
// trainscaler's own are never managed, whatever a manifest there says: a workload controller in kube-system
// is nobody's training job.
import { ANNOTATION } from './adapters/annotations.js';

export interface ManagementScope {
  /** Namespaces whose jobs are managed without opting in; when non-empty, the only namespaces acted in. */
  namespaceAllowlist: readonly string[];
  /** trainscaler's own namespaces (where its Lease and profile store live): never managed. */
  ownNamespaces: readonly string[];
}

export const DEFAULT_OWN_NAMESPACE = 'trainscaler-system';

export const DEFAULT_MANAGEMENT_SCOPE: ManagementScope = {
  namespaceAllowlist: [],
  ownNamespaces: [DEFAULT_OWN_NAMESPACE],
};

export type Management = { managed: true; why: string } | { managed: false; why: string };

interface ObjectMeta {
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** kube-system, kube-public, kube-node-lease and any other namespace Kubernetes reserves (kube-*). */
export function isSystemNamespace(namespace: string): boolean {
  return namespace.startsWith('kube-');
}

export function managementOf(metadata: ObjectMeta, scope: ManagementScope): Management {
  const namespace = metadata.namespace ?? 'default';
  if (isSystemNamespace(namespace))
    return { managed: false, why: `namespace ${namespace} is a system namespace` };
  if (scope.ownNamespaces.includes(namespace))
    return { managed: false, why: `namespace ${namespace} is trainscaler's own` };
  const optIn = [metadata.annotations?.[ANNOTATION.managed], metadata.labels?.[ANNOTATION.managed]];
  if (optIn.includes('false')) return { managed: false, why: `${ANNOTATION.managed}=false` };
  const listed = scope.namespaceAllowlist.includes(namespace);
  if (scope.namespaceAllowlist.length > 0 && !listed)
    return { managed: false, why: `namespace ${namespace} is not in TRAINSCALER_NAMESPACES` };
  if (optIn.includes('true')) return { managed: true, why: `${ANNOTATION.managed}=true` };
  if (listed) return { managed: true, why: `namespace ${namespace} is in TRAINSCALER_NAMESPACES` };
  return {
    managed: false,
    why: `not opted in (annotation or label ${ANNOTATION.managed}: "true", or TRAINSCALER_NAMESPACES)`,
  };
}

/** The scope of a PolicyConfig (structural, so that this module needs no import of the config). */
export function managementScope(config: ManagementScope): ManagementScope {
  return { namespaceAllowlist: config.namespaceAllowlist, ownNamespaces: config.ownNamespaces };
}
