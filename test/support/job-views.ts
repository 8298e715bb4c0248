// JobView builders for policy tests: one elastic PyTorchJob 'ml/bert' unless a test says otherwise.
import type { JobView, Resources, RoleView } from '../../lib/types.js';

export function jobView(overrides: Partial<JobView>, roles: RoleView[]): JobView {
  return {
    ref: { kind: 'PyTorchJob', namespace: 'ml', name: 'bert' },
    uid: 'uid-1',
    resourceVersion: '1',
    priority: 0,
    elastic: true,
    signature: 'sig',
    roles,
    managed: true,
    state: { oomCount: 0, paused: false },
    ...overrides,
  };
}

/** A Worker role of 4 replicas within [1, 8], requests = limits unless the overrides say otherwise. */
export function workerRole(requests: Resources, overrides: Partial<RoleView> = {}): RoleView {
  return {
    role: 'Worker',
    replicas: 4,
    minReplicas: 1,
    maxReplicas: 8,
    containerName: 'pytorch',
    containerIndex: 0,
    requests: { ...requests },
    limits: { ...requests },
    ...overrides,
  };
}
