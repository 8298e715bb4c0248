// Sharing the cluster between elastic jobs, one worker at a time. Order matters: pending higher-priority
// work is admitted first (by shrinking lower-priority elastic jobs, which is gentler than the scheduler
// preempting pods), then idle capacity goes where it speeds a job up the most, then workers that add
// almost nothing move to jobs that would gain more. Gains are fractions of each job's own speed per GPU,
// so a 2-worker job and a 64-worker job compete on equal terms.

import { podsFitting, release, reserve } from '../cluster/capacity.js';
import type { PolicyConfig } from '../config.js';
import type { Placement, ThroughputModel } from '../model/throughput-model.js';
import type { ClusterCapacity, JobView, Plan, Resources, RoleView } from '../types.js';
import { formatPercent } from './format.js';
import {
  expectedThroughput,
  findRole,
  formatChange,
  formatDuration,
  formatRateChange,
  localBatchFor,
  nodesAfterResize,
  pessimisticThroughput,
  plural,
  podsPerNode,
} from './placement.js';
import {
  ASSUMED_REMAINING_SECONDS,
  cooldownRemaining,
  describeRemaining,
  scaleDownPaysOff,
  scaleUpCost,
  scaleUpPaysOff,
  timeSaved,
} from './tuning.js';

export interface RebalanceJob {
  job: JobView;
  model: ThroughputModel | undefined;
  current: Placement;
  remainingSeconds?: number;
}

/** Pods a pending job needs placed to run, all of one shape. */
export interface PendingDemand {
  job: JobView;
  demand: Resources;
  pods: number;
}

export interface RebalanceInput {
  jobs: RebalanceJob[];
  pending?: PendingDemand[];
  capacity: ClusterCapacity;
  config: PolicyConfig;
  now: number;
}

interface Note {
  delta: number;
  detail: string;
}

interface Slot {
  key: string;
  entry: RebalanceJob;
  worker: RoleView;
  perNode: number;
  k0: number;
  k: number;
  /** Elastic, managed, not paused, out of cool-down and not mid-rescale. */
  movable: boolean;
  /** A job moves one way per decision; growing and shrinking it in one plan would be churn. */
  direction: -1 | 0 | 1;
  remaining: number;
  notes: Map<string, Note>;
  predictions: Map<number, number | undefined>;
}

export function decideRebalance(input: RebalanceInput): Plan[] {
  const { config } = input;
  const slots = buildSlots(input);
  let cap = input.capacity;

  cap = admitPending(slots, input.pending ?? [], cap, config);
  cap = growIntoIdle(slots, cap, config);
  cap = probeUnmodelled(slots, cap, config);
  reclaimLowValueWorkers(slots, cap, config);

  return slots.filter((s) => s.k !== s.k0).map((s) => planFor(s, config));
}

function buildSlots(input: RebalanceInput): Slot[] {
  const slots: Slot[] = [];
  const seen = new Set<string>();
  for (const entry of input.jobs) {
    const { job, current } = entry;
    const key = refKey(job);
    const worker = findRole(job, 'Worker');
    const identity = `${job.ref.kind}:${key}`;
    if (!worker || seen.has(identity)) continue;
    seen.add(identity);
    const movable =
      job.managed &&
      job.elastic &&
      !job.state.paused &&
      cooldownRemaining(job, input.now, input.config) === 0 &&
      worker.replicas === current.replicas;
    slots.push({
      key,
      entry,
      worker,
      perNode: podsPerNode(input.capacity, worker.requests),
      k0: current.replicas,
      k: current.replicas,
      movable,
      direction: 0,
      remaining: entry.remainingSeconds ?? ASSUMED_REMAINING_SECONDS,
      notes: new Map(),
      predictions: new Map(),
    });
  }
  return slots.sort(
    (a, b) => compareStrings(a.key, b.key) || compareStrings(a.entry.job.ref.kind, b.entry.job.ref.kind),
  );
}

/** Pending jobs in priority order; each is admitted only if the shrinks it needs free enough room. */
function admitPending(
  slots: Slot[],
  pending: PendingDemand[],
  capacity: ClusterCapacity,
  config: PolicyConfig,
): ClusterCapacity {
  let cap = capacity;
  const ordered = [...pending].sort(
    (a, b) => b.job.priority - a.job.priority || compareStrings(refKey(a.job), refKey(b.job)),
  );
  for (const p of ordered) {
    if (p.pods <= 0) continue;
    if (podsFitting(cap, p.demand) >= p.pods) {
      cap = reserve(cap, p.demand, p.pods);
      continue;
    }
    const before = slots.map((s) => ({ k: s.k, direction: s.direction }));
    const taken = new Map<Slot, number>();
    let trial = cap;
    while (podsFitting(trial, p.demand) < p.pods) {
      const victim = slots
        .filter((s) => canShrink(s, config) && s.entry.job.priority < p.job.priority)
        .sort(
          (a, b) =>
            a.entry.job.priority - b.entry.job.priority ||
            lossPerGpu(a) - lossPerGpu(b) ||
            compareStrings(a.key, b.key),
        )[0];
      if (!victim) break;
      trial = release(trial, victim.worker.requests, 1);
      victim.k -= 1;
      victim.direction = -1;
      taken.set(victim, (taken.get(victim) ?? 0) + 1);
    }
    if (podsFitting(trial, p.demand) >= p.pods) {
      for (const [victim, n] of taken) {
        addNote(
          victim,
          `admit:${refKey(p.job)}`,
          -n,
          `to admit ${refKey(p.job)} (priority ${p.job.priority} > ${victim.entry.job.priority}, ` +
            `needs ${plural(p.pods, 'pod')})`,
        );
      }
      cap = reserve(trial, p.demand, p.pods);
    } else {
      // Shrinking without admitting the job would only slow everyone down; keep what it can use for it.
      slots.forEach((s, i) => {
        const b = before[i];
        if (b) {
          s.k = b.k;
          s.direction = b.direction;
        }
      });
      cap = reserve(cap, p.demand, Math.min(p.pods, podsFitting(cap, p.demand)));
    }
  }
  return cap;
}

/** One worker at a time to the job that speeds up the most per GPU, while idle capacity lasts. */
function growIntoIdle(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): ClusterCapacity {
  let cap = capacity;
  for (;;) {
    const next = growthOptions(slots, config).find((o) => podsFitting(cap, o.slot.worker.requests) >= 1);
    if (!next) return cap;
    cap = reserve(cap, next.slot.worker.requests, 1);
    grow(next.slot);
    addNote(next.slot, 'idle', 1, 'from idle capacity');
  }
}

/** Jobs without a model get one extra worker, so that the next fit sees a second scale. */
function probeUnmodelled(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): ClusterCapacity {
  let cap = capacity;
  const probes = slots
    .filter(
      (s) => s.entry.model === undefined && s.movable && s.direction === 0 && s.k < s.worker.maxReplicas,
    )
    .sort((a, b) => b.entry.job.priority - a.entry.job.priority || compareStrings(a.key, b.key));
  for (const s of probes) {
    if (s.remaining <= scaleUpCost(config)) continue;
    if (podsFitting(cap, s.worker.requests) < 1) continue;
    cap = reserve(cap, s.worker.requests, 1);
    grow(s);
    addNote(s, 'probe', 1, 'probe: no throughput model yet, a second scale lets one be fitted');
  }
  return cap;
}

/** Moves workers whose contribution is below hysteresis to jobs that gain more per GPU from them. */
function reclaimLowValueWorkers(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): void {
  let cap = capacity;
  for (;;) {
    const recipients = growthOptions(slots, config);
    const victims = slots
      .filter((s) => s.entry.model !== undefined && canShrink(s, config))
      .map((s) => ({ slot: s, lastGain: lastWorkerGain(s), loss: lossPerGpu(s) }))
      .filter(
        (v) =>
          v.lastGain !== undefined &&
          v.lastGain < config.minRelativeGain &&
          scaleDownPaysOff(v.slot.remaining, v.slot.k0, v.slot.k - 1, config),
      )
      .sort(
        (a, b) =>
          a.loss - b.loss ||
          a.slot.entry.job.priority - b.slot.entry.job.priority ||
          compareStrings(a.slot.key, b.slot.key),
      );
    let moved = false;
    for (const r of recipients) {
      for (const v of victims) {
        if (v.slot === r.slot) continue;
        // Reclaiming never takes from a more important job to feed a less important one.
        if (v.slot.entry.job.priority > r.slot.entry.job.priority) continue;
        if (!(r.gainPerGpu > v.loss)) continue;
        const freed = release(cap, v.slot.worker.requests, 1);
        if (podsFitting(freed, r.slot.worker.requests) < 1) continue;
        cap = reserve(freed, r.slot.worker.requests, 1);
        shrink(v.slot);
        grow(r.slot);
        addNote(
          v.slot,
          `to:${r.slot.key}`,
          -1,
          `to ${r.slot.key}: last worker adds only ${formatChange(v.lastGain ?? 0)} (< ` +
            `${formatPercent(config.minRelativeGain)}) while ${r.slot.key} gains ${formatChange(r.gainPerGpu)} per GPU`,
        );
        addNote(r.slot, `from:${v.slot.key}`, 1, `from ${v.slot.key}, where it added nearly nothing`);
        moved = true;
        break;
      }
      if (moved) break;
    }
    if (!moved) return;
  }
}

interface GrowthOption {
  slot: Slot;
  gain: number;
  gainPerGpu: number;
}

/** Jobs that may take one more worker, best gain per GPU first; capacity is the caller's concern. */
function growthOptions(slots: Slot[], config: PolicyConfig): GrowthOption[] {
  const out: GrowthOption[] = [];
  for (const s of slots) {
    if (!canGrow(s, config)) continue;
    const now = predict(s, s.k);
    const next = predict(s, s.k + 1);
    const start = predict(s, s.k0);
    if (now === undefined || next === undefined || start === undefined) continue;
    const gain = next / now - 1;
    // Each added worker must clear hysteresis on its own, or tuning would take it back next round.
    if (gain < config.minRelativeGain) continue;
    if (!scaleUpPaysOff(s.remaining, start, next, config)) continue;
    out.push({ slot: s, gain, gainPerGpu: gain / gpuWeight(s) });
  }
  return out.sort(
    (a, b) =>
      b.gainPerGpu - a.gainPerGpu ||
      b.slot.entry.job.priority - a.slot.entry.job.priority ||
      compareStrings(a.slot.key, b.slot.key),
  );
}

function canGrow(s: Slot, config: PolicyConfig): boolean {
  return (
    s.movable &&
    s.entry.model !== undefined &&
    s.direction >= 0 &&
    s.k < s.worker.maxReplicas &&
    s.k - s.k0 < config.maxReplicaStep
  );
}

function canShrink(s: Slot, config: PolicyConfig): boolean {
  return (
    s.movable &&
    s.direction <= 0 &&
    s.k > Math.max(s.worker.minReplicas, 1) &&
    s.k0 - s.k < config.maxReplicaStep
  );
}

function grow(s: Slot): void {
  s.k += 1;
  s.direction = 1;
}

function shrink(s: Slot): void {
  s.k -= 1;
  s.direction = -1;
}

/** The current size is observed, so it gets the expected value; any other size the cautious one. */
function predict(s: Slot, k: number): number | undefined {
  const model = s.entry.model;
  if (!model || k < 1) return undefined;
  if (s.predictions.has(k)) return s.predictions.get(k);
  const { job, current } = s.entry;
  const placement: Placement = {
    replicas: k,
    nodes: nodesAfterResize(current, k, s.perNode),
    ...(current.ps !== undefined ? { ps: current.ps } : {}),
    localBatchSize: localBatchFor(job, k, current.localBatchSize),
  };
  const tp = k === s.k0 ? expectedThroughput(model, placement) : pessimisticThroughput(model, placement);
  s.predictions.set(k, tp);
  return tp;
}

/** What the job's last worker adds, as the gain of k over k - 1 (the inverse of a scale-up's gain). */
function lastWorkerGain(s: Slot): number | undefined {
  const now = predict(s, s.k);
  const less = predict(s, s.k - 1);
  if (now === undefined || less === undefined) return undefined;
  return now / less - 1;
}

/** Fraction of the job's speed lost per freed GPU by removing one worker; 1/k (linear) without a model. */
function lossPerGpu(s: Slot): number {
  const now = predict(s, s.k);
  const less = predict(s, s.k - 1);
  const loss = now !== undefined && less !== undefined ? Math.max(0, 1 - less / now) : 1 / s.k;
  return loss / gpuWeight(s);
}

/** GPUs a worker holds; CPU-only jobs compare per pod. */
function gpuWeight(s: Slot): number {
  return Math.max(1, s.worker.requests.gpus);
}

function addNote(s: Slot, key: string, delta: number, detail: string): void {
  const note = s.notes.get(key);
  if (note) {
    note.delta += delta;
    note.detail = detail;
  } else {
    s.notes.set(key, { delta, detail });
  }
}

function planFor(s: Slot, config: PolicyConfig): Plan {
  const parts: string[] = [];
  const before = predict(s, s.k0);
  const after = predict(s, s.k);
  if (before !== undefined && after !== undefined) {
    parts.push(`predicted ${formatRateChange(before, after)}`);
  }
  for (const note of s.notes.values()) {
    parts.push(`${note.delta > 0 ? '+' : ''}${note.delta} ${note.detail}`);
  }
  if (s.k > s.k0 && before !== undefined && after !== undefined) {
    parts.push(
      `gain over ${describeRemaining(s.entry.remainingSeconds)} = ${formatDuration(timeSaved(s.remaining, before, after))} ` +
        `> ${config.gainOverCostFactor} x rescale cost ${formatDuration(config.rescaleCostSeconds + config.podStartSeconds)}`,
    );
  }
  return {
    ref: s.entry.job.ref,
    policy: 'rebalance',
    changes: [{ kind: 'replicas', role: 'Worker', from: s.k0, to: s.k }],
    reason: `${s.k0} -> ${s.k} workers: ${parts.join('; ')}`,
  };
}

function refKey(job: JobView): string {
  return `${job.ref.namespace}/${job.ref.name}`;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
