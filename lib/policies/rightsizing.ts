// CPU/memory right-sizing from observed peaks. Requests are what the scheduler packs by, so an oversized
// request wastes a node slot and an undersized one invites eviction; limits are only ever raised here,
// because lowering a memory limit is how a right-sizer turns into an OOM killer.

import type { PolicyConfig } from '../config.js';
import type { Change, ContainerUsage, JobView, Plan, RoleName, RoleView } from '../types.js';
import { formatBytes, formatMillicores, formatPercent } from './format.js';
import { planWithinKind } from './kind-limits.js';
import { explained, oneLine } from './reason.js';

export interface RightsizingInput {
  job: JobView;
  usage: ContainerUsage[];
  config: PolicyConfig;
  now: number;
}

/** Granularity of written requests, so that quantities stay readable and small noise does not move them. */
export const CPU_STEP_MILLIS = 100;
export const MEMORY_STEP_BYTES = 64 * 1024 ** 2;

type Resource = 'cpu' | 'memory';

export function decideRightsizing(input: RightsizingInput): Plan {
  const { job, usage, config, now } = input;
  const plan = (changes: Change[], reason: string, details: string[] = []): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'rightsizing', changes, ...explained(reason, details) });

  if (job.state.paused) {
    return plan([], `job is paused (${job.state.pauseReason ?? 'no reason recorded'}); not right-sizing`);
  }
  const lastActionAt = job.state.lastActionAt;
  if (lastActionAt !== undefined && now - lastActionAt < config.cooldownSeconds) {
    const left = Math.ceil(config.cooldownSeconds - (now - lastActionAt));
    return plan([], `in cooldown for ${left} s more after the last change; not right-sizing`);
  }
  const refused = job.refusals?.resources;
  if (refused !== undefined) return plan([], `not right-sizing: ${refused}`);

  const changes: Change[] = [];
  const notes: string[] = [];
  const changed: string[] = [];
  const kept: string[] = [];
  for (const role of rightsizedRoles(job)) {
    const samples = usage.filter((u) => u.role === role.role);
    for (const resource of ['cpu', 'memory'] as const) {
      const result = rightsizeResource(role, resource, samples, config);
      changes.push(...result.changes);
      notes.push(result.note);
      (result.changes.length > 0 ? changed : kept).push(result.short);
    }
  }
  if (notes.length === 0) return plan([], 'no Worker or PS role to right-size');
  // One line: what changed, each with the peak that justified it (or why each request stays).
  const summary =
    changed.length > 0 ? `requests: ${changed.join(', ')}` : `keep requests: ${kept.join(', ')}`;
  return plan(changes, oneLine(summary), notes);
}

/** Workers (and parameter servers of TFJobs) are the replicated roles whose size is worth tuning. */
function rightsizedRoles(job: JobView): RoleView[] {
  const names: RoleName[] = job.ref.kind === 'TFJob' ? ['Worker', 'PS'] : ['Worker'];
  return job.roles.filter((r) => names.includes(r.role));
}

function rightsizeResource(
  role: RoleView,
  resource: Resource,
  samples: ContainerUsage[],
  config: PolicyConfig,
): { changes: Change[]; note: string; short: string } {
  const label = `${role.role} ${resource}`;
  const format = resource === 'cpu' ? formatMillicores : formatBytes;
  const read = (u: ContainerUsage) => (resource === 'cpu' ? u.cpuMillis : u.memoryBytes);
  // A running training container never uses zero CPU or memory: zero or garbage means the metric is missing.
  const observed = samples.map(read).filter((v) => Number.isFinite(v) && v > 0);
  if (observed.length === 0)
    return { changes: [], note: `${label}: no usage data, leaving it`, short: `${label} no usage data` };

  const peak = Math.max(...observed);
  const step = resource === 'cpu' ? CPU_STEP_MILLIS : MEMORY_STEP_BYTES;
  let target = Math.max(step, roundUp(peak * (1 + config.rightsizeHeadroom), step));
  if (resource === 'memory' && target > config.maxMemoryBytes) {
    if (peak > config.maxMemoryBytes) {
      return {
        changes: [],
        note: `${label}: peak ${format(peak)} is above the cap ${format(config.maxMemoryBytes)}, leaving it`,
        short: `${label} peak above the cap`,
      };
    }
    target = config.maxMemoryBytes;
  }

  const current = resource === 'cpu' ? role.requests.cpuMillis : role.requests.memoryBytes;
  const basis = `peak ${format(peak)} over ${observed.length} pod${observed.length === 1 ? '' : 's'} +${formatPercent(config.rightsizeHeadroom)} headroom = ${format(target)}`;
  const off = current > 0 ? Math.abs(current - target) / current : Number.POSITIVE_INFINITY;
  if (off <= config.rightsizeTolerance) {
    return {
      changes: [],
      note: `${label}: request ${format(current)} is within ${formatPercent(config.rightsizeTolerance)} of ${basis}, keeping it`,
      short: `${label} within ${formatPercent(config.rightsizeTolerance)}`,
    };
  }

  const changes: Change[] = [
    { kind: 'resources', role: role.role, resource, field: 'requests', from: current, to: target },
  ];
  const offText = current > 0 ? `off by ${formatPercent(off)}` : 'no request set';
  let note = `${label}: request ${format(current)} -> ${format(target)} (${basis}; ${offText} > ${formatPercent(config.rightsizeTolerance)})`;
  // A request above the limit is rejected by the API server; an unset limit (0) has nothing to raise.
  const limit = resource === 'cpu' ? role.limits.cpuMillis : role.limits.memoryBytes;
  if (limit > 0 && target > limit) {
    changes.push({ kind: 'resources', role: role.role, resource, field: 'limits', from: limit, to: target });
    note += `, limit raised ${format(limit)} -> ${format(target)}`;
  }
  return { changes, note, short: `${label} ${format(current)} -> ${format(target)} (peak ${format(peak)})` };
}

/** Rounds up to a multiple of `step`, ignoring float noise (3000 * 1.1 must stay 3300, not become 3400). */
function roundUp(value: number, step: number): number {
  return Math.ceil(value / step - 1e-9) * step;
}
