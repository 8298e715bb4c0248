import type { ActuatorDeps } from '../lib/actuator.js';
import { managementScope } from '../lib/management.js';
import type { HandlerDeps } from './handler-deps.js';

/** `triggeredAt`: when the trigger reached the handler (its first clock reading), which the cool-down counts from. */
export function actuatorDeps(deps: HandlerDeps, triggeredAt: number): ActuatorDeps {
  const out: ActuatorDeps = {
    triggeredAt,
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
