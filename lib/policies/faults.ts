// Reaction to pod faults: OOM kills raise memory, crash loops stop trainscaler, lost pods shrink elastic jobs
// to what the cluster can hold. The plan is a pure function of the view so that a repeated event (the
// handler may see the same pod twice) yields the same, already-applied answer instead of a second raise.

import { freeOnNode, podsFitting, podsFittingOnNode, release, reserve } from '../cluster/capacity.js';
import type { PolicyConfig } from '../config.js';
import type { Change, ClusterCapacity, JobView, Plan, PodView, Resources, RoleView } from '../types.js';
import { formatBytes, formatRatio } from './format.js';
import { planWithinKind } from './kind-limits.js';
import { plural } from './placement.js';
import { explained, oneLine, workersChange } from './reason.js';

export interface FaultInput {
  job: JobView;
  pods: PodView[];
  capacity: ClusterCapacity;
  config: PolicyConfig;
  now: number;
}

/** Memory limits are written in whole MiB so that the quantity in the pod spec stays readable. */
const MEMORY_STEP_BYTES = 1024 ** 2;

export function decideOnFault(input: FaultInput): Plan {
  const { job, pods, capacity, config } = input;
  const plan = (changes: Change[], reason: string, details: string[] = []): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'fault', changes, ...explained(reason, details) });

  if (job.state.paused) {
    return plan([], `job is paused (${job.state.pauseReason ?? 'no reason recorded'}); not acting on faults`);
  }

  const crashLooping = pods.filter((p) => p.restartCount >= config.crashLoopRestarts && !isOomKilled(p));
  if (crashLooping.length > 0) {
    // Restarting or resizing a job that fails on its own would only hide the bug; a person must look.
    const reason = `crash loop: ${crashLooping.map(describeRestarts).join(', ')} (limit ${config.crashLoopRestarts} restarts); pausing trainscaler on this job`;
    return plan(
      [{ kind: 'pause', reason }],
      `crash loop of ${plural(crashLooping.length, 'pod')} (limit ${config.crashLoopRestarts} restarts): trainscaler paused on this job`,
      [reason],
    );
  }

  const oom = decideOnOom(job, pods, config);
  if (oom.pause) {
    return plan(
      [{ kind: 'pause', reason: oom.pause }],
      `${plural(pods.filter(isOomKilled).length, 'pod')} OOMKilled at the memory cap ` +
        `${formatBytes(config.maxMemoryBytes)}: trainscaler paused on this job`,
      [...oom.notes, oom.pause],
    );
  }
  const lost = decideOnLostPods(job, pods, capacity);

  const changes = [...oom.changes, ...lost.changes];
  const notes = [...oom.notes, ...lost.notes];
  if (notes.length === 0) return plan(changes, 'no fault');
  return plan(changes, faultSummary(changes, pods, capacity, notes), notes);
}

/**
 * One line: how many pods met which fault, and what the plan changes (sizes, memory, pods recreated); the pods
 * by name and the arithmetic are the details. Without changes, the first note (cut to one line).
 */
function faultSummary(
  changes: Change[],
  pods: PodView[],
  capacity: ClusterCapacity,
  notes: string[],
): string {
  if (changes.length === 0) return oneLine(notes[0] ?? 'no fault');
  const causes = new Map<string, number>();
  for (const pod of pods) {
    const cause = isOomKilled(pod) ? 'OOMKilled' : lostPodCause(pod, capacity);
    if (cause !== undefined) causes.set(cause, (causes.get(cause) ?? 0) + 1);
  }
  const what: string[] = [];
  for (const c of changes) {
    if (c.kind === 'replicas')
      what.push(c.role === 'Worker' ? workersChange(c.from, c.to) : `${c.role} ${c.from} -> ${c.to}`);
    // The limit when there is one, else the request: the size the pod is held to.
    else if (
      c.kind === 'resources' &&
      c.resource === 'memory' &&
      !what.some((w) => w.startsWith(`${c.role} memory`))
    )
      what.push(`${c.role} memory ${formatBytes(c.from)} -> ${formatBytes(c.to)}`);
  }
  const evicted = changes.filter((c) => c.kind === 'evict-pod').length;
  if (evicted > 0) what.push(`${plural(evicted, 'pod')} recreated`);
  const cause = [...causes].map(([why, n]) => `${plural(n, 'pod')} ${why}`).join(', ');
  return oneLine(cause ? `${cause}: ${what.join(', ')}` : what.join(', '));
}

interface Decision {
  changes: Change[];
  notes: string[];
}

// --- OOM ---------------------------------------------------------------------------------------------

function isEvictedOrPreempted(pod: PodView): boolean {
  return pod.reason === 'Evicted' || pod.reason === 'Preempted';
}

/** The kernel killed the training container for exceeding its memory limit (not a node-pressure eviction). */
function isOomKilled(pod: PodView): boolean {
  if (isEvictedOrPreempted(pod)) return false;
  return pod.lastTermination?.reason === 'OOMKilled' || pod.reason === 'OOMKilled';
}

function decideOnOom(job: JobView, pods: PodView[], config: PolicyConfig): Decision & { pause?: string } {
  const changes: Change[] = [];
  const notes: string[] = [];
  const oomPods = pods.filter(isOomKilled);

  for (const role of job.roles) {
    const killed = oomPods.filter((p) => p.role === role.role);
    if (killed.length === 0) continue;
    // Without a limit the request is what the pod is sized by, so that is what grows.
    const hasLimit = role.limits.memoryBytes > 0;
    const sizedBy = (r: { limits: Resources; requests: Resources }) =>
      hasLimit ? r.limits.memoryBytes : r.requests.memoryBytes;
    const base = sizedBy(role);
    // A pod that ran with less than the role's current size died before our last raise reached it. What it ran
    // with is what its kubelet reports, when it does: an in-place resize may still be pending there.
    const fresh = killed.filter((p) => sizedBy(p.actual ?? p) >= base);
    if (fresh.length === 0) {
      // A container restarts inside its pod with the pod's old size: only a recreated pod gets the new one.
      changes.push(...recreate(killed));
      notes.push(
        `${names(killed)} OOMKilled at ${formatBytes(Math.max(...killed.map((p) => sizedBy(p.actual ?? p))))}, but ${role.role} memory was already raised to ${formatBytes(base)}; evicting so that the controller recreates them at the new size`,
      );
      continue;
    }

    const killedAt = `${names(fresh)} OOMKilled${exitCodeSuffix(fresh)} at ${formatBytes(base)} ${hasLimit ? 'limit' : 'request (no limit set)'}`;
    if (base <= 0) {
      notes.push(`${killedAt}; no memory limit or request to scale from, leaving ${role.role} alone`);
      continue;
    }
    const refused = job.refusals?.resources;
    if (refused !== undefined) {
      // Evicting would bring the pod back at the same size: nothing to do but say why.
      notes.push(`${killedAt}; memory not raised: ${refused}`);
      continue;
    }
    if (base >= config.maxMemoryBytes) {
      return {
        changes: [],
        notes,
        pause: `${killedAt}; OOM at the cap (${formatBytes(config.maxMemoryBytes)}), pausing trainscaler on this job`,
      };
    }
    const raised = Math.min(
      config.maxMemoryBytes,
      Math.ceil((base * config.oomMemoryFactor) / MEMORY_STEP_BYTES) * MEMORY_STEP_BYTES,
    );
    if (raised <= base) {
      notes.push(`${killedAt}; oomMemoryFactor ${config.oomMemoryFactor} does not raise memory, leaving it`);
      continue;
    }
    changes.push(...memoryChanges(role, raised));
    // Pod resources are immutable: the killed pods are evicted so that the controller recreates them at the new size.
    changes.push(...recreate(killed));
    notes.push(
      `${killedAt}; raising ${role.role} memory to ${formatBytes(raised)} (${formatRatio(config.oomMemoryFactor)}, cap ${formatBytes(config.maxMemoryBytes)}) and evicting ${names(killed)} to recreate them at that size`,
    );
  }
  return { changes, notes };
}

/** Evictions of the killed pods that still hold their old size; finished pods are the controller's to replace. */
function recreate(killed: PodView[]): Change[] {
  return killed
    .filter((p) => p.phase !== 'Failed' && p.phase !== 'Succeeded')
    .map((p): Change => ({ kind: 'evict-pod', pod: p.name, toResize: true }));
}

/**
 * The new limit; the request follows only when it equalled the limit (keeps Guaranteed QoS) or when there is
 * no limit (the request is then what was sized). A request below the limit already stays below the new one.
 */
function memoryChanges(role: RoleView, raised: number): Change[] {
  const changes: Change[] = [];
  const from = role.limits.memoryBytes;
  if (from > 0) {
    changes.push({
      kind: 'resources',
      role: role.role,
      resource: 'memory',
      field: 'limits',
      from,
      to: raised,
    });
  }
  const request = role.requests.memoryBytes;
  if (from === 0 || request >= from) {
    changes.push({
      kind: 'resources',
      role: role.role,
      resource: 'memory',
      field: 'requests',
      from: request,
      to: raised,
    });
  }
  return changes;
}

// --- Evicted, preempted, failed, unschedulable ---------------------------------------------------------

const UNPLACEABLE = 'Pending, fits on no node';

/** No live pod of the job is bound to a node or has run: it waits for admission as a whole. */
function isQueued(pods: PodView[]): boolean {
  const live = pods.filter((p) => p.phase !== 'Succeeded' && p.phase !== 'Failed');
  return live.length > 0 && live.every((p) => p.phase === 'Pending' && !p.nodeName && p.restartCount === 0);
}

function lostPodCause(pod: PodView, capacity: ClusterCapacity): string | undefined {
  if (isEvictedOrPreempted(pod)) return pod.reason;
  if (isOomKilled(pod)) return undefined;
  if (pod.phase === 'Failed') return `Failed (${pod.lastTermination?.reason ?? pod.reason ?? 'no reason'})`;
  // A gated pod is held back on purpose (Kueue's workload-slice gate until its slice is admitted), not unplaceable.
  if (pod.phase === 'Pending' && !pod.nodeName && !pod.schedulingGated && !fitsOnSomeNode(capacity, pod)) {
    return UNPLACEABLE;
  }
  return undefined;
}

function fitsOnSomeNode(capacity: ClusterCapacity, pod: PodView): boolean {
  return capacity.nodes.some((n) => n.schedulable && podsFittingOnNode(freeOnNode(n), pod.requests) >= 1);
}

/**
 * A master (chief, PS) that fits nowhere keeps the whole job waiting: the workers wait for it in rendezvous.
 * Workers are the role that may shrink, so as many running workers as it takes make room for it (never
 * below the workers' minimum). Returns the capacity with that room taken and the workers to remove.
 */
function roomForOtherRoles(
  job: JobView,
  pods: PodView[],
  capacity: ClusterCapacity,
  notes: string[],
): { free: ClusterCapacity; workersRemoved: number; placed: Set<string> } {
  const worker = job.roles.find((r) => r.role === 'Worker');
  const placed = new Set<string>();
  let free = capacity;
  let workersRemoved = 0;
  if (!job.elastic || !worker) return { free, workersRemoved, placed };
  const running = pods.filter((p) => p.role === 'Worker' && p.phase === 'Running').length;
  for (const role of job.roles) {
    if (role.role === 'Worker') continue;
    const waiting = pods.filter((p) => p.role === role.role && lostPodCause(p, capacity) === UNPLACEABLE);
    if (waiting.length === 0) continue;
    let removed = workersRemoved;
    let room = free;
    while (
      podsFitting(room, role.requests) < waiting.length &&
      running - removed > Math.max(worker.minReplicas, 1)
    ) {
      removed++;
      room = release(room, worker.requests, 1);
    }
    if (podsFitting(room, role.requests) < waiting.length) continue;
    notes.push(
      `${names(waiting)} Pending, fits on no node: ${plural(removed - workersRemoved, 'running worker')} removed to make room for ${role.role}`,
    );
    workersRemoved = removed;
    free = reserve(room, role.requests, waiting.length);
    placed.add(role.role);
  }
  return { free, workersRemoved, placed };
}

function decideOnLostPods(job: JobView, pods: PodView[], capacity: ClusterCapacity): Decision {
  const changes: Change[] = [];
  const notes: string[] = [];
  // Roles are planned one after another against the same free capacity, so two shrunk roles never count
  // the same free GPU twice. Room for a waiting master comes first: without it no worker trains.
  const room = roomForOtherRoles(job, pods, capacity, notes);
  let free = room.free;
  // An elastic job none of whose pods has a node is queued, not faulted: how many GPUs it gets is the
  // rebalance's admission (rebalance.ts, queuedShare), which ranks it against the running jobs. Shrinking it
  // here to what is free this instant (often its minimum) would start a short job at one worker and leave
  // it to grow a probe per cool-down.
  const queued = job.elastic && isQueued(pods);

  for (const role of job.roles) {
    if (room.placed.has(role.role)) continue;
    const makingRoom = role.role === 'Worker' ? room.workersRemoved : 0;
    const lost = pods
      .filter((p) => p.role === role.role)
      .map((pod) => ({ pod, cause: lostPodCause(pod, capacity) }))
      .filter((l): l is { pod: PodView; cause: string } => l.cause !== undefined)
      .filter((l) => !(queued && l.cause === UNPLACEABLE));
    if (lost.length === 0 && makingRoom === 0) continue;
    const what = [
      ...lost.map((l) => `${l.pod.name} ${l.cause}`),
      ...(makingRoom > 0
        ? [`${plural(makingRoom, 'worker')} fewer for the ${[...room.placed].join(', ')}`]
        : []),
    ].join(', ');

    if (!job.elastic) {
      notes.push(`${what}; job is not elastic, keeping ${role.role} at ${role.replicas} replicas`);
      continue;
    }

    const running = pods.filter((p) => p.role === role.role && p.phase === 'Running').length - makingRoom;
    // A pod bound and still starting holds its room on its node and will run: it is placed, not missing.
    // Counted missing, a job grown 4 -> 8 with two new pods bound and two unplaceable was shrunk to 4, and
    // the two that had room were deleted with the two that had none.
    const starting = pods.filter((p) => p.role === role.role && p.phase === 'Pending' && p.nodeName).length;
    const missing = Math.max(0, role.replicas - makingRoom - running - starting);
    const placeable = Math.min(missing, podsFitting(free, role.requests));
    free = reserve(free, role.requests, placeable);
    const fitting = running + starting + placeable;
    // This policy only shrinks; growing back is the tuning policy's call.
    const target = Math.min(role.replicas, Math.max(role.minReplicas, fitting));
    const fitText = `${running} running${starting > 0 ? ` + ${starting} starting` : ''} + ${placeable} more fit in free capacity = ${fitting}`;

    if (fitting < role.minReplicas) {
      const keep =
        target < role.replicas
          ? `shrinking ${role.role} from ${role.replicas} to ${target}`
          : `keeping ${target} ${role.role} replicas`;
      notes.push(`${what}; ${fitText}, below minReplicas ${role.minReplicas}: ${keep}, pods wait pending`);
    } else if (target < role.replicas) {
      notes.push(`${what}; ${fitText}: shrinking ${role.role} from ${role.replicas} to ${target}`);
    } else {
      notes.push(`${what}; ${fitText}: all ${role.replicas} ${role.role} replicas fit, keeping them`);
    }
    if (target !== role.replicas) {
      changes.push({ kind: 'replicas', role: role.role, from: role.replicas, to: target });
    }
  }
  return { changes, notes };
}

// --- Reason text -----------------------------------------------------------------------------------------

function names(pods: PodView[]): string {
  return pods.map((p) => p.name).join(', ');
}

function exitCodeSuffix(pods: PodView[]): string {
  const codes = [...new Set(pods.map((p) => p.lastTermination?.exitCode).filter((c) => c !== undefined))];
  return codes.length > 0 ? ` (exit ${codes.join('/')})` : '';
}

function describeRestarts(pod: PodView): string {
  const last = pod.lastTermination;
  const lastText = last
    ? `, last ${last.reason}${last.exitCode !== undefined ? ` exit ${last.exitCode}` : ''}`
    : '';
  return `${pod.name} restarted ${pod.restartCount} times${lastText}`;
}
