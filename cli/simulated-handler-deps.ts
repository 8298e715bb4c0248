import type { HandlerDeps, Logger } from '../functions/handler-deps.js';
import { DEFAULT_POLICY_CONFIG } from '../lib/config.js';
import { DEFAULT_JOB_WORK_LIMITS } from '../lib/decisions/job-work.js';
import { FitCache } from '../lib/model/fit-cache.js';
import type { SimulatedCluster } from '../lib/sim/simulated-cluster.js';

const QUIET_LOGGER: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/** The production handlers' dependencies, wired to a simulated cluster (its clock, its metrics). */
export function simulatedHandlerDeps(
  sim: SimulatedCluster,
  priorityClasses: Record<string, number>,
): HandlerDeps {
  return {
    cluster: sim,
    metrics: sim,
    clock: sim.clock.now,
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger: QUIET_LOGGER,
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
    priorityClasses,
    // One per simulation run, across all its ticks, as the runner keeps one across its process.
    fitCache: new FitCache(),
    // One job's writes at a time, in the plan's order. The simulated cluster answers at once, so writing side by
    // side would save nothing here, and the order writes reach it (which its operators and scheduler act on)
    // would follow the handlers' await chains: a run would no longer replay alike across code changes.
    jobWork: { ...DEFAULT_JOB_WORK_LIMITS, concurrency: 1 },
  };
}
