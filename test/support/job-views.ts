// JobView builders for policy tests: one elastic PyTorchJob 'ml/bert' unless a test says otherwise.
import type { JobView, RoleView } from '../../lib/types.js';

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
