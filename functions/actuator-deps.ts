import type { ActuatorDeps } from '../lib/actuator.js';
import { managementScope } from '../lib/management.js';
import type { HandlerDeps } from './handler-deps.js';

export function actuatorDeps(deps: HandlerDeps): ActuatorDeps {
  const out: ActuatorDeps = {
    cluster: deps.cluster,
    clock: deps.clock,
    dryRun: deps.dryRun,
    logger: deps.logger,
    namespaceAllowlist: deps.config.namespaceAllowlist,
    guardrails: deps.config,
    management: managementScope(deps.config),
    metrics: deps.metrics,
  };
  if (deps.priorityClasses) out.priorityClasses = deps.priorityClasses;
  return out;
}
