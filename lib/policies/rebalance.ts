// Sharing the cluster between elastic jobs, one worker at a time. Order matters: pending higher-priority
// work is admitted first (by shrinking lower-priority elastic jobs, which is gentler than the scheduler
// preempting pods), then idle capacity goes where it speeds a job up the most, then workers that add
// almost nothing move to jobs that would gain more. Gains are fractions of each job's own speed per GPU,
// so a 2-worker job and a 64-worker job compete on equal terms, weighted by how soon the job would finish
// (urgency, softened): a queued or nearly done job is worth more GPUs than one with a day left, but the one with
// a day left is not starved.

import {
  freeOnNode,
  podsFitting,
  podsFittingOnNode,
  release,
  reserve,
  ShrinkingCapacity,
  shapeKey,
} from '../cluster/capacity.js';
import type { PolicyConfig } from '../config.js';
import type { Placement, ThroughputModel } from '../model/throughput-model.js';
import type { ClusterCapacity, JobView, NodeView, Plan, Resources, RoleView } from '../types.js';
import { formatPercent } from './format.js';
import { planWithinKind } from './kind-limits.js';
import type { MissingSamples } from './missing-samples.js';
import {
  expectedThroughput,
  findRole,
  formatChange,
  formatDuration,
  formatRateChange,
  localBatchFor,
  nodesAfterResize,
  nodesSpanned,
  optimisticThroughput,
  pessimisticThroughput,
  plural,
  podsPerNode,
} from './placement.js';
import { explained, oneLine, SUMMARY_LIMIT, workersChange } from './reason.js';
import { describeCost, type RescaleCosts, rescaleCostsOf, scaleDownsLeft } from './rescale-cost.js';
import {
  ASSUMED_REMAINING_SECONDS,
  cooldownRemaining,
  describeRemaining,
  growthLimit,
  scaleDownPaysOff,
  scaleUpCost,
  scaleUpPaysOff,
  timeSaved,
} from './tuning.js';

export interface RebalanceJob {
  job: JobView;
  /** Fitted from the job's own step-time samples; undefined when it has none. */
  model: ThroughputModel | undefined;
  /** What a job without samples lacks (missing-samples.ts), for its keep reason. */
  missing?: MissingSamples;
  /**
   * For a job without samples: the model of its signature's profile (earlier runs), the only ground on which
   * it may grow (probeUnmodelled). Undefined without a profile: then it is never grown.
   */
  priors?: ThroughputModel;
  current: Placement;
  remainingSeconds?: number;
  /**
   * The node of each Worker pod, by replica index (0 first), when every one of them runs on a node: with it
   * a size is predicted on the nodes the job would really span (workerNodesAt), not on a dense packing.
   */
  workerNodes?: readonly string[];
}

/** Pods of one role of a pending job waiting to be placed, all of one shape. */
export interface PendingDemand {
  job: JobView;
  /** Requests of ONE waiting pod. */
  demand: Resources;
  /** Waiting (unplaced) pods. */
  pods: number;
  /** The role the pods belong to; Worker when absent. */
  role?: RoleView['role'];
  /** Pods of the role already placed on a node; a queued job has none. */
  placed?: number;
  /**
   * Throughput model from earlier runs of the job's signature (its profile), when there is one: with the
   * job's targetSamples it says how soon the queued job would finish at each size.
   */
  model?: ThroughputModel;
}

export interface RebalanceInput {
  jobs: RebalanceJob[];
  pending?: PendingDemand[];
  /** Free room, holding none for the waiting pods of `pending`: the rebalance places them or holds their room. */
  capacity: ClusterCapacity;
  config: PolicyConfig;
  now: number;
  /** Managed jobs' creations (finished ones included), from which the room kept for arrivals is judged. */
  arrivals?: readonly Arrival[];
}

export interface Arrival {
  /** Epoch seconds of the job's creation. */
  at: number;
  /** GPUs its workers asked for. */
  gpus: number;
}

/** Arrivals are counted over this window (seconds) to judge the rate at which new jobs ask for GPUs. */
const ARRIVAL_WINDOW_SECONDS = 3600;

/** A lender keeping its workers among equals lends only to a borrower done within 1/this of its remaining time. */
const LEND_HORIZON_FACTOR = 2;

/**
 * A lender keeping its workers among equals lends only to a borrower done within this many cool-downs: the GPU
 * comes back before the lender could act again.
 */
const LEND_COOLDOWNS = 2;

/** Remaining times below this are not told apart: a minute is about a rescale's cost. */
const MIN_REMAINING_SECONDS = 60;

/**
 * Urgency is the job's completion rate (1 / remaining time) raised to this power. At 1 (the greedy completion
 * rate, shortest remaining time first per GPU) the longest jobs lent to every shorter one and ran at about half
 * their users' size, and then finished alone on a cluster where more GPUs no longer sped them up; with
 * sublinear speed-ups the optimal allocation of known-size jobs gives the largest a share that depends on its
 * rank, not on how much larger it is (heSRPT, Berg, Vesilo and Harchol-Balter, arXiv:1903.09346). At 1.0x 0.5
 * beat 0.7 and 1 over all eight workloads; 0.35 and 0 (no weighting) were worse on the workloads they ran before
 * being stopped (README "Urgency, softened").
 */
const URGENCY_EXPONENT = 0.5;

/** A worker moves between two useful jobs only when the recipient gains this many times what the donor loses. */
const RECLAIM_MARGIN = 2;

/**
 * Shortest remaining first among alike jobs (finishFirstAmongAlike) moves a worker only where it adds at least
 * this fraction of a one-worker job's speed: near-linear scaling, where the exchange argument holds and a
 * model's error costs least.
 */
const FINISH_FIRST_MIN_EFFICIENCY = 0.75;

/**
 * ...and only to a job with at least this long to run: below it the urgency weighting already orders jobs,
 * and moving workers between short jobs of one kind in a busy hour cost more than it saved (1.0x workload-2).
 */
const FINISH_FIRST_MIN_REMAINING_SECONDS = 3600;

/**
 * A job measured at several sizes that trainscaler has not changed for this long is probed into idle GPUs on its
 * optimistic prediction (probeOnOptimism): 15 cool-downs, so that a probe given back as slower is retried at most
 * twice an hour (two restarts of a few seconds each) and never on the noise of the ticks right after a change.
 */
const RETRY_REFUSED_GROWTH_SECONDS = 1800;

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
  /** Shrunk within its hold (shrunkWithinHold): it gives, it does not grow back yet. */
  regrowthHeld: boolean;
  /** A job moves one way per decision; growing and shrinking it in one plan would be churn. */
  direction: -1 | 0 | 1;
  remaining: number;
  /** What growing and shrinking this job costs (its own measurements, else the defaults). */
  costs: RescaleCosts;
  /** Worker scale-downs left before only the job's reserved restart remains (Infinity: no budget). */
  shrinksLeft: number;
  /** The Worker replicas its user asked for (askedOf); undefined when trainscaler no longer knows them. */
  asked: number | undefined;
  /** Its workers share one node of a cluster with others, where a worker given away may not come back. */
  onOneOfMany: boolean;
  notes: Map<string, Note>;
  predictions: Map<number, number | undefined>;
  meanPredictions: Map<number, number | undefined>;
  /** Grown into idle capacity, judged on the mean prediction: its plan is explained on the mean. */
  onMean: boolean;
  /** Probed into idle capacity on the optimistic prediction: its plan is explained on that. */
  onOptimism: boolean;
  /** Where its workers run and the room left beside them, when known (layoutOf). */
  layout: WorkerLayout | undefined;
  /**
   * slotGrowthLimit's answer: it reads only what the decision never changes (k0, the model, the layout, the
   * job's state; a slot lives for one decision, under one config), and finishFirstAmongAlike asks it for
   * every pair of alike jobs.
   */
  growthLimit?: ReturnType<typeof growthLimit>;
}

interface WorkerLayout {
  /** Node of each worker, by replica index. */
  nodes: readonly string[];
  /** Workers of its shape that still fit on the nodes it runs on. */
  room: number;
  /** The node it runs on with the most room (worker-0's among equals), where its next workers should land. */
  roomiest?: string;
}

export function decideRebalance(input: RebalanceInput): Plan[] {
  const { config } = input;
  const slots = buildSlots(input);
  let cap = input.capacity;

  // Kueue admits, preempts and orders the jobs it manages by its own priorities and quota: their waiting pods
  // are its to place, and they neither give nor take workers here (lib/kueue/kueue-guard.ts keeps the rest),
  // but their room is held for them.
  const pending: PendingDemand[] = [];
  for (const p of input.pending ?? []) {
    if (p.job.kueue === undefined) pending.push(p);
    else cap = reserve(cap, p.demand, p.pods);
  }
  cap = admitPending(slots, pending, cap, config);
  cap = shedSlowingWorkers(slots, cap, config);
  const kept = keepRoomForArrivals(cap, arrivalHeadroomGpus(input, slots));
  cap = growIntoIdle(slots, kept.capacity, config);
  cap = probeOnOptimism(slots, cap, config, input.now);
  cap = probeUnmodelled(slots, cap, config);
  cap = kept.giveBack(cap);
  cap = reclaimLowValueWorkers(slots, cap, config);
  finishFirstAmongAlike(slots, cap, config);

  return slots.filter((s) => s.k !== s.k0).map((s) => planFor(s, config));
}

function buildSlots(input: RebalanceInput): Slot[] {
  const slots: Slot[] = [];
  const seen = new Set<string>();
  const manyNodes = input.capacity.nodes.filter((n) => n.schedulable).length > 1;
  const nodesByName = new Map(input.capacity.nodes.map((n) => [n.name, n]));
  // Jobs mostly share a few pod shapes; the largest node's room per shape is the same for all of them.
  const perNodeByShape = new Map<string, number>();
  const perNodeFor = (requests: Resources): number => {
    const shape = shapeKey(requests);
    let n = perNodeByShape.get(shape);
    if (n === undefined) {
      n = podsPerNode(input.capacity, requests);
      perNodeByShape.set(shape, n);
    }
    return n;
  };
  for (const entry of input.jobs) {
    const { job, current } = entry;
    const key = refKey(job);
    const worker = findRole(job, 'Worker');
    const identity = `${job.ref.kind}:${key}`;
    if (!worker || seen.has(identity)) continue;
    seen.add(identity);
    const costs = rescaleCostsOf(job, input.config);
    const movable =
      job.managed &&
      job.elastic &&
      job.kueue === undefined &&
      !job.state.paused &&
      cooldownRemaining(job, input.now, input.config) === 0 &&
      worker.replicas === current.replicas;
    slots.push({
      key,
      entry,
      worker,
      perNode: perNodeFor(worker.requests),
      k0: current.replicas,
      k: current.replicas,
      movable,
      direction: 0,
      remaining: entry.remainingSeconds ?? ASSUMED_REMAINING_SECONDS,
      costs,
      regrowthHeld: shrunkWithinHold(job, costs, input.now),
      shrinksLeft: scaleDownsLeft(job),
      asked: askedOf(job, worker),
      onOneOfMany: manyNodes && current.nodes === 1,
      notes: new Map(),
      predictions: new Map(),
      meanPredictions: new Map(),
      onMean: false,
      onOptimism: false,
      layout: layoutOf(entry, worker, nodesByName),
    });
  }
  return slots.sort(
    (a, b) => compareStrings(a.key, b.key) || compareStrings(a.entry.job.ref.kind, b.entry.job.ref.kind),
  );
}

/**
 * Pending jobs in priority order, then longest waiting first. A job is admitted by shrinking lower-priority
 * elastic jobs when that frees room for all its waiting pods; failing that, a queued elastic job is given a
 * share taken from jobs of its own priority or lower (queuedShare).
 */
function admitPending(
  slots: Slot[],
  pending: PendingDemand[],
  capacity: ClusterCapacity,
  config: PolicyConfig,
): ClusterCapacity {
  let cap = capacity;
  const ordered = [...pending].sort(
    (a, b) =>
      b.job.priority - a.job.priority ||
      (a.job.creationTimestamp ?? 0) - (b.job.creationTimestamp ?? 0) ||
      compareStrings(refKey(a.job), refKey(b.job)),
  );
  for (const p of ordered) {
    if (p.pods <= 0) continue;
    if (podsFitting(cap, p.demand) >= p.pods) {
      cap = reserve(cap, p.demand, p.pods);
      continue;
    }
    const admitted = takeFromLowerPriority(slots, p, cap, config);
    if (admitted) {
      cap = admitted;
      continue;
    }
    const own = queuedSlot(slots, p);
    const shared = own ? queuedShare(own, p, slots, cap, config) : undefined;
    // Otherwise keep what the job can use for it, so that growth does not take it first.
    cap = shared ?? reserve(cap, p.demand, Math.min(p.pods, podsFitting(cap, p.demand)));
  }
  return cap;
}

/** Room for every waiting pod from lower-priority jobs only, or undefined (and nothing shrunk). */
function takeFromLowerPriority(
  slots: Slot[],
  p: PendingDemand,
  cap: ClusterCapacity,
  config: PolicyConfig,
): ClusterCapacity | undefined {
  const before = slots.map((s) => ({ k: s.k, direction: s.direction }));
  const taken = new Map<Slot, number>();
  let trial = cap;
  while (podsFitting(trial, p.demand) < p.pods) {
    const victim = cheapestDonor(slots, (s) => canShrink(s, config) && s.entry.job.priority < p.job.priority);
    if (!victim) break;
    trial = release(trial, victim.worker.requests, 1);
    shrink(victim);
    taken.set(victim, (taken.get(victim) ?? 0) + 1);
  }
  if (podsFitting(trial, p.demand) < p.pods) {
    // Shrinking without admitting the job would only slow everyone down.
    restore(slots, before);
    return undefined;
  }
  for (const [victim, n] of taken) {
    addNote(
      victim,
      `admit:${refKey(p.job)}`,
      -n,
      `to admit ${refKey(p.job)} (priority ${p.job.priority} > ${victim.entry.job.priority}, ` +
        `needs ${plural(p.pods, 'pod')})`,
    );
  }
  return reserve(trial, p.demand, p.pods);
}

/** The slot of a pending job that queuedShare may resize: elastic, managed, no worker placed yet. */
function queuedSlot(slots: Slot[], p: PendingDemand): Slot | undefined {
  if ((p.role ?? 'Worker') !== 'Worker' || (p.placed ?? 0) > 0) return undefined;
  const own = slots.find((s) => s.entry.job.ref.kind === p.job.ref.kind && s.key === refKey(p.job));
  if (!own) return undefined;
  const { job } = own.entry;
  if (!job.managed || !job.elastic || job.state.paused) return undefined;
  return own.direction === 0 && own.k === own.k0 ? own : undefined;
}

/**
 * A queued elastic job competes for GPUs like a running one: its next worker is worth 1/size of its speed
 * (linear, it has no model yet; unbounded below minReplicas, since it cannot start without them), and it
 * takes a worker from the job of equal or lower priority that loses the least per GPU while that loss is
 * smaller by more than the hysteresis. Under load this shares the cluster instead of queueing behind whoever
 * came first, which is what long waits in front of short jobs cost. The queued job is shrunk to the share it
 * gets, so its pods can all be placed; it grows later like any running job. Undefined when it cannot reach
 * minReplicas (nothing is shrunk then).
 */
function queuedShare(
  own: Slot,
  p: PendingDemand,
  slots: Slot[],
  cap: ClusterCapacity,
  config: PolicyConfig,
): ClusterCapacity | undefined {
  const before = slots.map((s) => ({ k: s.k, direction: s.direction }));
  const minimum = Math.max(1, own.worker.minReplicas);
  const worth = queuedWorth(own, p, minimum);
  const runFor = queuedRunTime(own, p);
  let granted = Math.min(p.pods, own.k0, podsFitting(cap, p.demand));
  let trial = reserve(cap, p.demand, granted);
  const fromFree = granted;
  const taken = new Map<Slot, number>();
  while (granted < own.k0) {
    const gain = worth(granted);
    const victim = cheapestDonor(
      slots,
      (s) =>
        s !== own &&
        canShrink(s, config) &&
        (s.entry.job.priority < p.job.priority ||
          (s.entry.job.priority === p.job.priority &&
            (sharesWorker(s, config) || lendsBriefly(s, runFor(granted + 1), config)))) &&
        scaleDownPaysOff(s.remaining, s.k0, s.k - 1, s.costs, config),
    );
    if (!victim || !(gain > donorLoss(victim) + config.minRelativeGain)) break;
    const freed = release(trial, victim.worker.requests, 1);
    const more = Math.min(own.k0 - granted, podsFitting(freed, p.demand));
    // A freed worker of another shape that still leaves no room for this job's pod is not taken.
    if (more < 1) break;
    shrink(victim);
    taken.set(victim, (taken.get(victim) ?? 0) + 1);
    trial = reserve(freed, p.demand, more);
    granted += more;
  }
  if (granted < minimum) {
    restore(slots, before);
    return undefined;
  }
  for (const [victim, n] of taken) {
    addNote(
      victim,
      `share:${refKey(p.job)}`,
      -n,
      `to ${refKey(p.job)}, queued at priority ${p.job.priority}: its next worker is worth more than this job's last`,
    );
  }
  if (granted < own.k0) {
    own.k = granted;
    own.direction = -1;
    const sources = [
      fromFree > 0 ? `${fromFree} free` : '',
      granted > fromFree ? `${granted - fromFree} from running jobs losing less per GPU` : '',
    ].filter((x) => x !== '');
    addNote(
      own,
      'queued',
      granted - own.k0,
      `queued with ${plural(own.k0, 'worker')} asked and none placed: starts with ${granted} (${sources.join(', ')}), grows later`,
    );
  }
  return trial;
}

/**
 * What the queued job's next worker is worth per GPU, in lossPerGpu's units: the completion rate it adds
 * (throughput gained / samples to go), per hour. From the profile's model when the job has one and declares
 * its target; otherwise linear with an hour assumed, where the first worker is worth anything (it has no
 * work to compare, and a job that never starts never finishes). The minReplicas a job needs to start
 * count as one bundle.
 */
function queuedWorth(own: Slot, p: PendingDemand, minimum: number): (granted: number) => number {
  const gpus = Math.max(1, p.demand.gpus);
  const queued = queuedThroughput(own, p);
  if (!queued) {
    return (granted) => (granted < minimum ? Number.POSITIVE_INFINITY : 1 / granted) / gpus;
  }
  const rate = (k: number): number =>
    k <= 0 ? 0 : ((queued.at(k) ?? 0) / queued.work) * ASSUMED_REMAINING_SECONDS;
  // The relative gain of one more worker times the urgency at the size granted, as for a running job.
  return (granted) => {
    if (granted < minimum) return softUrgency(rate(minimum)) / minimum / gpus;
    const now = rate(granted);
    return now > 0 ? (((rate(granted + 1) - now) / now) * softUrgency(now)) / gpus : 0;
  };
}

/**
 * The queued job's expected samples/s at k workers packed on nodes like the job's, from its profile's model,
 * and its declared work; undefined without either.
 */
function queuedThroughput(
  own: Slot,
  p: PendingDemand,
): { work: number; at: (k: number) => number | undefined } | undefined {
  const work = p.job.targetSamples ?? 0;
  const model = p.model;
  if (!model || !(work > 0)) return undefined;
  const at = (k: number) =>
    expectedThroughput(model, {
      replicas: k,
      nodes: nodesSpanned(k, own.perNode),
      localBatchSize: localBatchFor(p.job, k, own.entry.current.localBatchSize),
    });
  return { work, at };
}

/** How long the queued job would run at each size; undefined when that is not known (then it is not short). */
function queuedRunTime(own: Slot, p: PendingDemand): (k: number) => number | undefined {
  const queued = queuedThroughput(own, p);
  if (!queued) return () => undefined;
  return (k) => {
    const tp = queued.at(k);
    return tp !== undefined && tp > 0 ? queued.work / tp : undefined;
  };
}

/**
 * Whether a job that keeps its workers among equals (sharesWorker) may still lend one to a queued job of its
 * priority predicted to finish within two cool-downs and within half the lender's remaining time. The
 * protection guards against a worker that never comes back to the lender's node; a borrower that ends this
 * soon frees the GPU there before the lender could act again, and the lender regrows into it. Without the
 * cool-down cap, under steady arrivals the freed GPU went to the next queued job first and lenders stayed
 * small (README "A donor at its own size on one node").
 */
function lendsBriefly(s: Slot, borrowerRunTime: number | undefined, config: PolicyConfig): boolean {
  return (
    borrowerRunTime !== undefined &&
    borrowerRunTime <= LEND_COOLDOWNS * config.cooldownSeconds &&
    borrowerRunTime * LEND_HORIZON_FACTOR <= s.remaining
  );
}

/** The job that loses least by giving a worker: lowest priority first, then smallest loss per GPU. */
function cheapestDonor(slots: Slot[], eligible: (s: Slot) => boolean): Slot | undefined {
  let best: Slot | undefined;
  let bestLoss = 0;
  for (const slot of slots) {
    if (!eligible(slot)) continue;
    const loss = donorLoss(slot);
    const order = best
      ? slot.entry.job.priority - best.entry.job.priority ||
        loss - bestLoss ||
        compareStrings(slot.key, best.key)
      : -1;
    if (order < 0) {
      best = slot;
      bestLoss = loss;
    }
  }
  return best;
}

function restore(slots: Slot[], before: Array<{ k: number; direction: -1 | 0 | 1 }>): void {
  slots.forEach((s, i) => {
    const b = before[i];
    if (b) {
      s.k = b.k;
      s.direction = b.direction;
    }
  });
}

/**
 * A job measured at two sizes or more whose last worker makes it slower (the cautious prediction one worker
 * smaller beats what it runs at now: a probe across a node boundary, say) gives that worker back, even with
 * no one to take it: an idle GPU is better than one that slows its job down, and nothing else undoes such a
 * probe when no alert fires. Only while the speed-up over the remaining time pays for the restart.
 */
function shedSlowingWorkers(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): ClusterCapacity {
  let cap = capacity;
  for (const s of slots) {
    if (oneScale(s)) continue;
    while (canShrink(s, config)) {
      const now = predict(s, s.k);
      const less = predict(s, s.k - 1);
      if (now === undefined || less === undefined || !(less > now)) break;
      if (timeSaved(s.remaining, now, less) <= config.gainOverCostFactor * s.costs.down) break;
      shrink(s);
      cap = release(cap, s.worker.requests, 1);
      addNote(
        s,
        'slower',
        -1,
        `its last worker slows it down (${formatChange(less / now - 1)} with one fewer)`,
      );
    }
  }
  return cap;
}

/**
 * Idle capacity to the job that speeds up the most per GPU, a step at a time (usually one worker; a few when
 * only together they speed the job up, across a node boundary), while idle capacity lasts. Judged on the
 * mean prediction: the caution of step time + 1 sd is there so that a job does not take GPUs from others,
 * or restart, on noise, and an idle GPU is nobody's. Beyond a few dozen workers a worker adds 1-3%, inside
 * one sd of the step time, so on the cautious prediction a job that wanted 35 workers crept up by one probe
 * worker per tick beside idle GPUs; what is wrong on the mean is measured at the new size and given back
 * (shedSlowingWorkers) or taken by a job that gains more (reclaim, admission). Only the job just grown
 * changes its option, so the ranking is kept sorted instead of rebuilt per step handed out.
 */
function growIntoIdle(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): ClusterCapacity {
  const free = new ShrinkingCapacity(capacity);
  const ranked = growthOptions(slots, config, Number.POSITIVE_INFINITY, meanPredict);
  let grown = false;
  for (;;) {
    const next = ranked.shift();
    if (!next) break;
    const { slot, workers } = next;
    const room = free.fitting(slot.worker.requests, workers);
    if (room < workers) {
      // Free capacity only shrinks here: a smaller step may still fit, this one never will.
      const smaller = room > 0 ? growthOption(slot, config, room, meanPredict) : undefined;
      if (smaller) ranked.splice(indexInOrder(ranked, smaller, compareOptions), 0, smaller);
      continue;
    }
    for (let i = 0; i < workers; i++) {
      free.place(slot.worker.requests);
      grow(slot);
    }
    grown = true;
    slot.onMean = true;
    addNote(slot, 'idle', workers, 'from idle capacity');
    const again = growthOption(slot, config, Number.POSITIVE_INFINITY, meanPredict);
    if (again) ranked.splice(indexInOrder(ranked, again, compareOptions), 0, again);
  }
  return grown ? free.snapshot() : capacity;
}

/** Where `item` goes in `ranked` (in `compare`'s order), after every entry that compares equal to it. */
function indexInOrder<T>(ranked: readonly T[], item: T, compare: (a: T, b: T) => number): number {
  let lo = 0;
  let hi = ranked.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const other = ranked[mid];
    if (other !== undefined && compare(other, item) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Donors by what their last worker is worth, least first; then lower priority; then by name. */
function compareVictims(a: Donor, b: Donor): number {
  return (
    a.loss - b.loss ||
    a.slot.entry.job.priority - b.slot.entry.job.priority ||
    compareStrings(a.slot.key, b.slot.key)
  );
}

/**
 * A job seen at one size only and below the size its user asked for, whose mean prediction says no step into
 * idle GPUs gains enough, is still probed when its optimistic prediction (step time - 1 sd, at most linear
 * scaling) says the step would: with one size seen, how the job scales across nodes is the priors' guess, and
 * nothing else ever measures it. An imagenet job asked 48 workers, started at 4 on one node, and its priors
 * put 8 workers on two nodes 25% below 4 on one, so it ran at 4 for 53 h beside a nearly empty cluster
 * (1.5x workload-7). An idle GPU is nobody's: a wrong probe costs a restart and a tick at the slower speed, and
 * is given back once measured (shedSlowingWorkers); uncertainty argues for the probe, not for idling.
 *
 * A job measured at several sizes is probed the same way once it has gone RETRY_REFUSED_GROWTH_SECONDS without
 * a change: what refuses its growth then is a fit of measurements taken at other times and placements (a step
 * onto fragmented nodes, measured slower and given back one worker a tick), and nothing else re-measures it.
 * An imagenet job shed back to 29 workers that way sat there 2.5 h beside 35 idle GPUs, where the measured world
 * runs it 12.7% faster at 45 (1.0x workload-2: 41 of the run's 57.9 idle GPU-h beyond two ticks).
 */
function probeOnOptimism(
  slots: Slot[],
  capacity: ClusterCapacity,
  config: PolicyConfig,
  now: number,
): ClusterCapacity {
  const free = new ShrinkingCapacity(capacity);
  let probed = false;
  const seenOnceBelowAsk = (s: Slot) => oneScale(s) && s.asked !== undefined && s.k0 < s.asked;
  const settled = (s: Slot) => {
    const last = s.entry.job.state.lastActionAt;
    return !oneScale(s) && last !== undefined && now - last >= RETRY_REFUSED_GROWTH_SECONDS;
  };
  const candidates = slots
    .filter((s) => s.k === s.k0 && (seenOnceBelowAsk(s) || settled(s)))
    .sort((a, b) => urgency(b) - urgency(a) || compareStrings(a.key, b.key));
  for (const s of candidates) {
    if (!canGrow(s, config) || reachableGain(s, config, optimisticPredict) < config.minRelativeGain) continue;
    const start = optimisticPredict(s, s.k0) ?? 0;
    const top = Math.min(s.worker.maxReplicas, s.k0 + slotGrowthLimit(s, config).workers);
    let workers = 0;
    let best = start;
    for (let k = Math.min(top, s.k0 + free.fitting(s.worker.requests, top - s.k0)); k > s.k0; k--) {
      const at = optimisticPredict(s, k);
      if (at === undefined || !(at > start) || !scaleUpPaysOff(s.remaining, start, at, s.costs, config))
        continue;
      // Seen at one size, at best linear: every step gains alike per GPU, and the largest that fits and pays
      // measures most (across a node boundary, the filled node rather than one worker paying the inter-node
      // all-reduce for all).
      if (oneScale(s)) {
        workers = k - s.k0;
        break;
      }
      // Measured at several sizes, the optimistic curve bends with the fit: the step that gains most, if that
      // clears the hysteresis (the largest step took a yolov3 job 9 -> 13 workers for +0.7% at best).
      if (at > best && at / start - 1 >= config.minRelativeGain) {
        best = at;
        workers = k - s.k0;
      }
    }
    if (workers === 0) continue;
    for (let i = 0; i < workers; i++) {
      free.place(s.worker.requests);
      grow(s);
    }
    probed = true;
    s.onOptimism = true;
    addNote(
      s,
      'optimism',
      workers,
      oneScale(s)
        ? 'probe from idle capacity: seen at one size, it may scale better than its priors say'
        : `probe from idle capacity: unchanged for ${formatDuration(RETRY_REFUSED_GROWTH_SECONDS)}, its measurements at other sizes may not hold now`,
    );
  }
  return probed ? free.snapshot() : capacity;
}

/**
 * A job without step-time samples of its own (no model) grows only on the priors of its signature's profile:
 * earlier runs of the same program, which reported through a sidecar and survived rescales. One extra worker,
 * when those priors predict it gains at least the hysteresis, so that the next fit sees a second scale. With no
 * profile it is never grown: nothing says it has a sidecar, that it trains, or that it is elastic, and growing
 * it would be a write made blind (it was: "4 -> 5 workers: +1 probe: no throughput model yet" for jobs that had
 * never reported a step). Not across a node boundary: unmeasured, the extra worker would pay for the
 * inter-node all-reduce of all the others (a 4-GPU job made 5 on 4-GPU nodes ran 1.7x slower in the measured
 * world).
 */
function probeUnmodelled(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): ClusterCapacity {
  let cap = capacity;
  const probes = slots
    .filter(
      (s) => s.entry.model === undefined && s.movable && s.direction === 0 && s.k < s.worker.maxReplicas,
    )
    .sort((a, b) => b.entry.job.priority - a.entry.job.priority || compareStrings(a.key, b.key));
  for (const s of probes) {
    if (s.remaining <= scaleUpCost(s.costs, config)) continue;
    if (podsFitting(cap, s.worker.requests) < 1) continue;
    const spanned = Math.max(s.entry.current.nodes, nodesSpanned(s.k, s.perNode));
    if (nodesAfterResize(s.entry.current, s.k + 1, s.perNode) > spanned) continue;
    // No profile, no gain to judge: never grown.
    const gain = priorGain(s, s.k + 1);
    if (gain === undefined || gain < config.minRelativeGain) continue;
    cap = reserve(cap, s.worker.requests, 1);
    grow(s);
    addNote(
      s,
      'priors',
      1,
      `on priors (no samples yet): its signature's profile predicts ${formatChange(gain)}`,
    );
  }
  return cap;
}

/** The gain of k workers over the current size by the priors of the job's profile; undefined without them. */
function priorGain(s: Slot, k: number): number | undefined {
  const { priors } = s.entry;
  if (!priors) return undefined;
  const now = expectedThroughput(priors, placementAt(s, s.k0));
  const at = expectedThroughput(priors, placementAt(s, k));
  return now !== undefined && at !== undefined && now > 0 ? at / now - 1 : undefined;
}

interface Donor {
  slot: Slot;
  lastGain: number | undefined;
  loss: number;
  shares: boolean;
}

/** A job's figures as a donor of one worker to the reclaim pass; undefined when it cannot or should not give one. */
function donorFigures(s: Slot, config: PolicyConfig): Donor | undefined {
  if (s.entry.model === undefined || !canShrink(s, config)) return undefined;
  const donor = { slot: s, lastGain: lastWorkerGain(s), loss: donorLoss(s), shares: sharesWorker(s, config) };
  if (donor.lastGain === undefined) return undefined;
  return scaleDownPaysOff(s.remaining, s.k0, s.k - 1, s.costs, config) ? donor : undefined;
}

const isDefined = <T>(value: T | undefined): value is T => value !== undefined;

/**
 * Moves a worker from one job to another when the recipient gains clearly more per GPU than the donor loses:
 * any gain more when the donor's last worker adds less than the hysteresis, else RECLAIM_MARGIN times the
 * (urgency-weighted) loss, so that a job far from its end lends GPUs to one near it without two jobs trading
 * a worker back and forth on noise.
 */
function reclaimLowValueWorkers(
  slots: Slot[],
  capacity: ClusterCapacity,
  config: PolicyConfig,
): ClusterCapacity {
  let cap = capacity;
  // A slot's growth option and its figures as a donor depend on that slot alone, so after a move only the two
  // slots that moved are worked out again: doing it for every slot after every move made the rebalance
  // quadratic in the number of jobs (70 s of a 3,000-job tick).
  const options = new Map<Slot, GrowthOption | undefined>();
  const donors = new Map<Slot, Donor | undefined>();
  const optionOf = (s: Slot) => {
    if (!options.has(s)) options.set(s, growthOption(s, config, 1));
    return options.get(s);
  };
  const donorOf = (s: Slot) => {
    if (!donors.has(s)) donors.set(s, donorFigures(s, config));
    return donors.get(s);
  };
  // A donor whose loss is not a number can never be outgained; without it the order by loss is total, which
  // the early stop below relies on.
  const victimOf = (s: Slot) => {
    const donor = donorOf(s);
    return donor && !Number.isNaN(donor.loss) ? donor : undefined;
  };
  // A worker moves alone: a recipient whose single next worker speeds it up. Both lists stay in order across
  // rounds, the two slots of a move taken out and put back where they now belong (both orders are total).
  const recipients = slots.map(optionOf).filter(isDefined).sort(compareOptions);
  const victims = slots.map(victimOf).filter(isDefined).sort(compareVictims);
  for (;;) {
    if (recipients.length === 0) return cap;
    // Whether a worker of one shape fits where a worker of another is released: the same answer for every
    // pair of those shapes until the capacity changes (a move, which ends this round).
    const fits = new Map<string, boolean>();
    const fitsInstead = (released: Resources, wanted: Resources) => {
      const key = `${shapeKey(released)}|${shapeKey(wanted)}`;
      let fit = fits.get(key);
      if (fit === undefined) {
        fit = podsFitting(release(cap, released, 1), wanted) >= 1;
        fits.set(key, fit);
      }
      return fit;
    };
    let moved = false;
    for (const r of recipients) {
      for (const v of victims) {
        // Victims come by loss, least first: from here on none is outgained, whether idle or not. Without this
        // stop the last round of a tick weighed every recipient against every donor (10 s at 3,000 jobs).
        if (v.loss >= Math.max(r.gainPerGpu, r.gainPerGpu / RECLAIM_MARGIN)) break;
        if (v.slot === r.slot) continue;
        // Reclaiming never takes from a more important job to feed a less important one.
        if (v.slot.entry.job.priority > r.slot.entry.job.priority) continue;
        if (v.slot.entry.job.priority === r.slot.entry.job.priority && !v.shares) continue;
        // Between alike jobs where finishFirstAmongAlike applies, it owns the moves: it would take this worker
        // back at the next decision (imagenet-126 and -156 of 1.0x workload-1 traded workers at every cool-down
        // for 16 minutes, each trade a restart of both).
        if (endsFirstAmongAlike(v.slot, r.slot) && lastWorkerNearLinear(v.slot)) continue;
        const idle = (v.lastGain ?? 0) < config.minRelativeGain;
        if (!(r.gainPerGpu > (idle ? 1 : RECLAIM_MARGIN) * v.loss)) continue;
        if (!fitsInstead(v.slot.worker.requests, r.slot.worker.requests)) continue;
        cap = reserve(release(cap, v.slot.worker.requests, 1), r.slot.worker.requests, 1);
        shrink(v.slot);
        grow(r.slot);
        const movers = [v.slot, r.slot];
        for (const list of [recipients, victims] as Array<Array<{ slot: Slot }>>) {
          for (const moved of movers) {
            const at = list.findIndex((e) => e.slot === moved);
            if (at >= 0) list.splice(at, 1);
          }
        }
        for (const moved of movers) {
          options.delete(moved);
          donors.delete(moved);
          const option = optionOf(moved);
          if (option) recipients.splice(indexInOrder(recipients, option, compareOptions), 0, option);
          const victim = victimOf(moved);
          if (victim) victims.splice(indexInOrder(victims, victim, compareVictims), 0, victim);
        }
        const why = idle
          ? `last worker adds only ${formatChange(v.lastGain ?? 0)} (< ${formatPercent(config.minRelativeGain)})`
          : `its last worker is worth ${formatChange(v.loss)} per GPU weighted by time left`;
        addNote(
          v.slot,
          `to:${r.slot.key}`,
          -1,
          `to ${r.slot.key}: ${why} while ${r.slot.key} gains ${formatChange(r.gainPerGpu)} per GPU`,
        );
        addNote(
          r.slot,
          `from:${v.slot.key}`,
          1,
          idle
            ? `from ${v.slot.key}, where it added nearly nothing`
            : `from ${v.slot.key}, which has longer to run`,
        );
        moved = true;
        break;
      }
      if (moved) break;
    }
    if (!moved) return cap;
  }
}

/**
 * Shortest remaining first among jobs of one signature, each with a known remaining time: workers move from the
 * one with the longest time left to the one with the shortest while each moved GPU does at least as much work
 * there (throughput gained over the job's one-worker throughput, on the mean prediction) and scales near
 * linearly. The cluster's work rate does not drop, and the donor, still running when the recipient ends, takes
 * the freed GPUs back then: its own end barely moves while the recipient's comes earlier (the exchange argument
 * behind SRPT). The marginal comparisons above cannot see this: two alike jobs of equal size have equal gains
 * per GPU at every exponent, so they split the cluster and end together (three 1.0x imagenet jobs of
 * workload-1 at 20-23 workers each for 5.7 hours).
 */
function finishFirstAmongAlike(slots: Slot[], capacity: ClusterCapacity, config: PolicyConfig): void {
  let cap = capacity;
  const timed = slots
    .filter((s) => s.entry.model !== undefined && s.entry.remainingSeconds !== undefined)
    .sort((a, b) => a.remaining - b.remaining || compareStrings(a.key, b.key));
  // Only jobs of one signature are alike: each looks for donors among its own kind, not the whole cluster.
  // And only among those that may move at all: one that may not never shrinks (canShrink), so leaving it out
  // changes no answer, and a tick in which most jobs cool down weighs the few that may.
  const alike = new Map<string, Slot[]>();
  for (const s of timed) {
    if (!s.movable) continue;
    const kind = alike.get(s.entry.job.signature);
    if (kind) kind.push(s);
    else alike.set(s.entry.job.signature, [s]);
  }
  for (const r of timed) {
    // finishFirstStep would answer 0 for every donor, and nothing would move.
    if (meanPredict(r, r.k0) === undefined || !canGrow(r, config)) continue;
    // Nor would any donor move anything to a job that does not end first (endsFirstAmongAlike) or that no
    // step of its own makes near linear (finishFirstStep): looking for donors anyway was a walk over every
    // pair of alike jobs, 2.4 s of a 10,000-job tick.
    if (r.remaining < FINISH_FIRST_MIN_REMAINING_SECONDS || !mayGainNearLinear(r, config)) continue;
    // Longest remaining first. Each donor is weighed when reached: a donor changes only when it gives, so this
    // is the order and the answers of filtering them all first; and once `r` cannot grow it never changes
    // again in this loop, so no later donor would give it anything.
    const kind = alike.get(r.entry.job.signature) ?? [];
    for (let i = kind.length - 1; i >= 0; i--) {
      const d = kind[i] as Slot;
      if (d.remaining <= r.remaining) break;
      if (!canGrow(r, config)) break;
      if (!endsFirstAmongAlike(r, d)) continue;
      if (!(d.entry.job.priority < r.entry.job.priority || sharesWorker(d, config))) continue;
      const step = finishFirstStep(r, d, cap, config);
      if (step === 0) continue;
      cap = reserve(release(cap, d.worker.requests, step), r.worker.requests, step);
      for (let i = 0; i < step; i++) {
        shrink(d);
        grow(r);
      }
      r.onMean = true;
      addNote(
        d,
        `first:${r.key}`,
        -step,
        `to ${r.key}, alike and ending first: the GPUs come back when it ends`,
      );
      addNote(r, `first:${d.key}`, step, `from ${d.key}, alike and with longer to run`);
    }
  }
}

/**
 * Whether `first` should end before `other`, an alike job (same signature, no higher priority) with longer to
 * run, so that workers move only from `other` to `first`: both have a known remaining time, and `first` has at
 * least FINISH_FIRST_MIN_REMAINING_SECONDS left. Both callers pass only jobs with a model.
 */
function endsFirstAmongAlike(first: Slot, other: Slot): boolean {
  return (
    first !== other &&
    first.entry.remainingSeconds !== undefined &&
    other.entry.remainingSeconds !== undefined &&
    first.remaining >= FINISH_FIRST_MIN_REMAINING_SECONDS &&
    other.remaining > first.remaining &&
    other.entry.job.signature === first.entry.job.signature &&
    other.entry.job.priority <= first.entry.job.priority
  );
}

/**
 * Whether the job's last worker does at least FINISH_FIRST_MIN_EFFICIENCY of a one-worker job's work (mean
 * prediction): where finishFirstAmongAlike would give it back to the job, were it taken.
 */
function lastWorkerNearLinear(s: Slot): boolean {
  return (oneWorkerJobsBetween(s, s.k - 1, s.k) ?? 0) >= FINISH_FIRST_MIN_EFFICIENCY;
}

/**
 * What the job does at `to` workers beyond `from`, in one-worker jobs (mean prediction): the unit in which
 * finishFirstAmongAlike weighs a moved worker. Undefined when the model cannot say.
 */
function oneWorkerJobsBetween(s: Slot, from: number, to: number): number | undefined {
  const one = meanPredict(s, 1);
  const atFrom = meanPredict(s, from);
  const atTo = meanPredict(s, to);
  if (!one || atFrom === undefined || atTo === undefined) return undefined;
  return (atTo - atFrom) / one;
}

/**
 * Whether some step finishFirstStep may weigh for the recipient (within its own growth limits) adds at least
 * FINISH_FIRST_MIN_EFFICIENCY of a one-worker job per worker: without one it answers 0 whatever the donor.
 */
function mayGainNearLinear(r: Slot, config: PolicyConfig): boolean {
  const most = Math.min(r.worker.maxReplicas - r.k, r.k0 + slotGrowthLimit(r, config).workers - r.k);
  for (let j = 1; j <= most; j++) {
    const gained = oneWorkerJobsBetween(r, r.k, r.k + j);
    // finishFirstStep stops at the first step its model cannot weigh, whatever the donor.
    if (gained === undefined) return false;
    if (gained / j >= FINISH_FIRST_MIN_EFFICIENCY) return true;
  }
  return false;
}

/** Workers (up to the growth and shrink limits) the recipient takes from the donor in finishFirstAmongAlike; 0 for none. */
function finishFirstStep(r: Slot, d: Slot, cap: ClusterCapacity, config: PolicyConfig): number {
  const rStart = meanPredict(r, r.k0);
  if (rStart === undefined || !canGrow(r, config) || !canShrink(d, config)) return 0;
  const steps = Math.min(
    r.worker.maxReplicas - r.k,
    r.k0 + slotGrowthLimit(r, config).workers - r.k,
    d.k - Math.max(d.worker.minReplicas, 1),
    config.maxReplicaStep - (d.k0 - d.k),
  );
  let best = 0;
  for (let j = 1; j <= steps; j++) {
    const rAt = meanPredict(r, r.k + j);
    const gained = oneWorkerJobsBetween(r, r.k, r.k + j);
    const lost = oneWorkerJobsBetween(d, d.k - j, d.k);
    if (rAt === undefined || gained === undefined || lost === undefined) break;
    if (!(gained >= lost) || gained / j < FINISH_FIRST_MIN_EFFICIENCY) continue;
    if (!scaleUpPaysOff(r.remaining, rStart, rAt, r.costs, config)) continue;
    if (!scaleDownPaysOff(d.remaining, d.k0, d.k - j, d.costs, config)) continue;
    if (podsFitting(release(cap, d.worker.requests, j), r.worker.requests) < j) continue;
    best = j;
  }
  return best;
}

interface GrowthOption {
  slot: Slot;
  /** Workers the step adds. */
  workers: number;
  gain: number;
  gainPerGpu: number;
}

/**
 * Jobs that may grow, each by its best step of at most `maxStep` workers by `tp` (the cautious prediction
 * unless said otherwise), best gain per GPU first.
 */
function growthOptions(
  slots: Slot[],
  config: PolicyConfig,
  maxStep = Number.POSITIVE_INFINITY,
  tp: Predictor = predict,
): GrowthOption[] {
  const out: GrowthOption[] = [];
  for (const s of slots) {
    const option = growthOption(s, config, maxStep, tp);
    if (option) out.push(option);
  }
  return out.sort(compareOptions);
}

/**
 * The job's best step up (most gain per GPU) of at most `maxStep` workers within the growth rule. A step must
 * speed the job up and pay for its rescale; its workers need not each do so: the worker that opens a new
 * node pays the inter-node all-reduce for all the others and is slower alone, while filling the node is
 * faster (growing one worker at a time left jobs that fill their nodes exactly beside idle GPUs for hours).
 * The decision must clear the hysteresis as a whole: a worker of a 40-worker job adds 2.5% at best, so
 * asking 5% of each one stopped the growth of every job near 20 workers while GPUs idled (tuning judges its
 * scale-ups the same way).
 */
function growthOption(
  s: Slot,
  config: PolicyConfig,
  maxStep = Number.POSITIVE_INFINITY,
  tp: Predictor = predict,
): GrowthOption | undefined {
  if (!canGrow(s, config)) return undefined;
  const now = tp(s, s.k);
  const start = tp(s, s.k0);
  if (now === undefined || start === undefined) return undefined;
  if (reachableGain(s, config, tp) < config.minRelativeGain) return undefined;
  const top = Math.min(s.worker.maxReplicas, s.k0 + slotGrowthLimit(s, config).workers, s.k + maxStep);
  let best: GrowthOption | undefined;
  for (let k = s.k + 1; k <= top; k++) {
    const at = tp(s, k);
    if (at === undefined) continue;
    const gain = at / now - 1;
    if (!(gain > 0) || !scaleUpPaysOff(s.remaining, start, at, s.costs, config)) continue;
    const workers = k - s.k;
    const gainPerGpu = (gain / (workers * gpuWeight(s))) * urgency(s);
    if (!best || gainPerGpu > best.gainPerGpu) best = { slot: s, workers, gain, gainPerGpu };
  }
  return best;
}

/**
 * The best relative gain over k0 this decision could reach within the growth limit, by `tp`. A probe (a job
 * seen at one size) grows by one worker, but what it is for is the step it opens once the job is measured at
 * two sizes: the hysteresis is judged on that, or no probe of a job past 20 workers (one worker, < 5%)
 * would ever be sent into idle GPUs.
 */
function reachableGain(s: Slot, config: PolicyConfig, tp: Predictor): number {
  const start = tp(s, s.k0);
  if (start === undefined) return Number.NEGATIVE_INFINITY;
  const rule = oneScale(s) ? growthLimitOnceMeasured(s, config) : slotGrowthLimit(s, config);
  const limit = Math.min(s.worker.maxReplicas, s.k0 + rule.workers);
  let best = Number.NEGATIVE_INFINITY;
  for (let k = s.k0 + 1; k <= limit; k++) {
    const at = tp(s, k);
    if (at !== undefined) best = Math.max(best, at / start - 1);
  }
  return best;
}

function compareOptions(a: GrowthOption, b: GrowthOption): number {
  return (
    b.gainPerGpu - a.gainPerGpu ||
    b.slot.entry.job.priority - a.slot.entry.job.priority ||
    compareStrings(a.slot.key, b.slot.key)
  );
}

/**
 * GPUs idle capacity keeps for jobs arriving while a job grown into it would hold its size: the GPUs new jobs
 * asked for per second over the last hour, times the regrowth hold of the running jobs (median). Growing a
 * job into GPUs the next arrival takes back costs that job two restarts; at the launcher's cost the hold is
 * about a minute, inside the cool-down, and no room is kept; at 30 s it is 10 minutes of arrivals.
 */
function arrivalHeadroomGpus(input: RebalanceInput, slots: readonly Slot[]): number {
  const arrivals = input.arrivals ?? [];
  const since = input.now - ARRIVAL_WINDOW_SECONDS;
  let gpus = 0;
  for (const a of arrivals) if (a.at > since && a.at <= input.now) gpus += a.gpus;
  if (gpus === 0 || slots.length === 0) return 0;
  const holds = slots.map((s) => regrowthHold(s.costs)).sort((a, b) => a - b);
  const hold = holds[Math.floor(holds.length / 2)] ?? 0;
  // Inside the cool-down the hold changes nothing, and neither does this room: where rescales are cheap, a
  // GPU grown into and given back costs less than a GPU left idle.
  if (hold <= input.config.cooldownSeconds) return 0;
  return Math.floor((gpus / ARRIVAL_WINDOW_SECONDS) * hold);
}

/** Capacity with `gpus` one-GPU pods held out, and how to return them to a capacity derived from it. */
function keepRoomForArrivals(
  capacity: ClusterCapacity,
  gpus: number,
): { capacity: ClusterCapacity; giveBack: (after: ClusterCapacity) => ClusterCapacity } {
  if (gpus <= 0) return { capacity, giveBack: (after) => after };
  const shape: Resources = { cpuMillis: 0, memoryBytes: 0, gpus: 1 };
  const held = reserve(capacity, shape, gpus);
  const heldOn = new Map<string, number>();
  held.nodes.forEach((node, i) => {
    const before = capacity.nodes[i];
    const n = before ? node.allocated.gpus - before.allocated.gpus : 0;
    if (n > 0) heldOn.set(node.name, n);
  });
  return {
    capacity: held,
    giveBack: (after) => ({
      nodes: after.nodes.map((node) => {
        const n = heldOn.get(node.name);
        return n ? { ...node, allocated: { ...node.allocated, gpus: node.allocated.gpus - n } } : node;
      }),
    }),
  };
}

/**
 * A job shrunk keeps its smaller size for this many times what a round trip (a shrink and a growth, its own
 * measured costs else the defaults) costs it before it may grow again: what it gave went to a queued or arriving
 * job, and growing back into the next idle GPUs only to give them to the next arrival was a restart each way
 * (1.0x workload-1 at a 30 s rescale: imagenet-11 grew from idle capacity 39 times and shrank for queued jobs
 * 34 times). At the launcher's 3.3 + 3.6 s the hold is 69 s, inside the cool-down: nothing changes there. Only
 * regrowth waits; the first climb, shrinks and admissions do not (a hold on those cost 13% of the mean JCT).
 */
const REGROWTH_HOLD_ROUND_TRIPS = 10;

/** Seconds a job shrunk keeps its size: REGROWTH_HOLD_ROUND_TRIPS round trips at its rescale costs. */
function regrowthHold(costs: RescaleCosts): number {
  return REGROWTH_HOLD_ROUND_TRIPS * (costs.up + costs.down);
}

function shrunkWithinHold(job: JobView, costs: RescaleCosts, now: number): boolean {
  const last = job.state.lastRescale;
  if (!last || !(last.to < last.from)) return false;
  return now - last.at < regrowthHold(costs);
}

function canGrow(s: Slot, config: PolicyConfig): boolean {
  const model = s.entry.model;
  return (
    s.movable &&
    !s.regrowthHeld &&
    model !== undefined &&
    s.direction >= 0 &&
    s.k < s.worker.maxReplicas &&
    // The growth rule of every path (tuning.ts): one worker at a time until two scales are observed and
    // while the remaining time is unknown.
    s.k - s.k0 < slotGrowthLimit(s, config).workers
  );
}

function slotGrowthLimit(s: Slot, config: PolicyConfig) {
  if (s.growthLimit) return s.growthLimit;
  const limit = growthLimit(
    {
      distinctScales: s.entry.model?.distinctScales ?? 0,
      remainingKnown: s.entry.remainingSeconds !== undefined,
      nodeFill: nodeFill(s),
      regrow: regrowOf(s),
    },
    config,
  );
  s.growthLimit = limit;
  return limit;
}

function regrowOf(s: Slot): { from: number; largestRun?: number } {
  return { from: s.k0, largestRun: s.entry.job.state.largestRunWorkers };
}

/** The growth rule's step once the job has been measured at a second size (what a probe opens). */
function growthLimitOnceMeasured(s: Slot, config: PolicyConfig) {
  return growthLimit(
    {
      distinctScales: 2,
      remainingKnown: s.entry.remainingSeconds !== undefined,
      nodeFill: nodeFill(s),
      regrow: regrowOf(s),
    },
    config,
  );
}

/**
 * Workers that fill the node the job's next worker (from its current size) would open, for a job below the size
 * its user asked for; 0 otherwise. Below its ask the user's size says the job was meant to span more nodes; at
 * or above it, filling a node on priors alone took GPUs that jobs arriving next then lacked (1.0x workload-2:
 * cifar10 jobs started at one worker and grew one a tick, 3,910 -> 4,278 s). On the nodes the job really spans
 * (workerNodesAt): a job at 3 workers on a node another job fills opens a node with its 4th just as one at 4
 * does; judged densely, it was allowed one probe worker, which across the node boundary predicts slower, and a
 * 1.0x imagenet job never grew (0 rescales, 53 h beside idle GPUs).
 */
function nodeFill(s: Slot): number {
  const { current } = s.entry;
  if (s.asked === undefined || s.k0 >= s.asked) return 0;
  if (s.perNode <= 1 || workerNodesAt(s, s.k0 + 1) <= current.nodes) return 0;
  return Math.min(s.perNode, s.asked - s.k0);
}

function oneScale(s: Slot): boolean {
  return (s.entry.model?.distinctScales ?? 0) < 2;
}

function canShrink(s: Slot, config: PolicyConfig): boolean {
  return (
    s.movable &&
    // A shrink the restart-budget guardrail would hold is not planned: its worker would be counted twice.
    (s.direction < 0 || s.shrinksLeft > 0) &&
    s.direction <= 0 &&
    s.k > Math.max(s.worker.minReplicas, 1) &&
    s.k0 - s.k < config.maxReplicaStep
  );
}

/**
 * The size a job's user asked for: recorded on trainscaler's first write (JobAutoscalerState.askedWorkers);
 * before any write, its current replicas. Undefined for a job written by a version that did not record it.
 */
function askedOf(job: JobView, worker: RoleView): number | undefined {
  if (job.state.askedWorkers !== undefined) return job.state.askedWorkers;
  return job.state.lastActionAt === undefined ? worker.replicas : undefined;
}

/**
 * Whether sharing between jobs of equal priority (a queued job's share, a reclaimed worker) may take this
 * job's next worker. Above the size its user asked for, yes: those workers came from idle capacity. A job at
 * or below its asked size whose workers share one node keeps them, unless its last worker adds less than
 * the hysteresis: the GPU it gives goes to another job, so when it grows back its new worker lands on another
 * node and the whole job pays the inter-node all-reduce for the rest of its run (a 4-worker yolov3 job shrunk
 * on its one node and regrown across two ran at about 55% of its speed), a loss the comparison of marginal
 * gains does not see. Higher priority still takes (takeFromLowerPriority).
 */
function sharesWorker(s: Slot, config: PolicyConfig): boolean {
  if (s.asked === undefined || s.k > s.asked || !s.onOneOfMany) return true;
  const last = lastWorkerGain(s);
  return last !== undefined && last < config.minRelativeGain;
}

function grow(s: Slot): void {
  s.k += 1;
  s.direction = 1;
}

function shrink(s: Slot): void {
  s.k -= 1;
  s.direction = -1;
}

type Predictor = (s: Slot, k: number) => number | undefined;

/** The current size is observed, so it gets the expected value; any other size the cautious one. */
function placementAt(s: Slot, k: number): Placement {
  const { job, current } = s.entry;
  return {
    replicas: k,
    nodes: workerNodesAt(s, k),
    ...(current.ps !== undefined ? { ps: current.ps } : {}),
    localBatchSize: localBatchFor(job, k, current.localBatchSize),
  };
}

/**
 * Nodes the job spans at k workers. Without its layout, a dense packing (nodesAfterResize). With it: a shrink
 * removes the highest replica indices (what the training operators and the simulator do), so the nodes left
 * are those of workers 0..k-1: a job whose last worker sits alone on a second node runs on one node one
 * worker smaller, which a dense guess never sees, so the rebalance kept paying the inter-node all-reduce for
 * it. A growth lands beside the job only while its own nodes have room; the rest opens new nodes: a job
 * shrunk on a node whose freed GPUs went to another job regrows across two (a 4-worker yolov3 job at about
 * 41 samples/s instead of 72 in the measured world), which the dense guess predicted as one node and so
 * valued the shrink as if it could be undone. Both ignore which node the scheduler picks among those with
 * room (a lower bound on nodes).
 */
function workerNodesAt(s: Slot, k: number): number {
  const { current } = s.entry;
  const dense = nodesAfterResize(current, k, s.perNode);
  const { layout } = s;
  if (!layout || k === s.k0) return dense;
  if (k < s.k0) return Math.max(1, new Set(layout.nodes.slice(0, k)).size);
  const beyondOwn = Math.max(0, k - s.k0 - layout.room);
  return Math.max(dense, current.nodes + nodesSpanned(beyondOwn, s.perNode));
}

/** The job's worker layout when every worker runs on a known node; undefined otherwise. */
function layoutOf(
  entry: RebalanceJob,
  worker: RoleView,
  nodesByName: ReadonlyMap<string, NodeView>,
): WorkerLayout | undefined {
  const nodes = entry.workerNodes;
  if (!nodes || nodes.length !== entry.current.replicas || nodes.length === 0) return undefined;
  const own = new Set(nodes);
  // The job's counted node span must agree with the layout, or the layout is stale.
  if (own.size !== entry.current.nodes) return undefined;
  let room = 0;
  let roomiest: { name: string; room: number } | undefined;
  // Visited in replica order, so worker-0's node wins a tie.
  for (const name of own) {
    const node = nodesByName.get(name);
    if (!node?.schedulable) continue;
    const fits = podsFittingOnNode(freeOnNode(node), worker.requests);
    room += fits;
    if (fits > (roomiest?.room ?? 0)) roomiest = { name, room: fits };
  }
  return roomiest ? { nodes, room, roomiest: roomiest.name } : { nodes, room };
}

function predict(s: Slot, k: number): number | undefined {
  const model = s.entry.model;
  if (!model || k < 1) return undefined;
  if (s.predictions.has(k)) return s.predictions.get(k);
  // Off the one observed scale the cautious prediction always forecasts a loss (its spread is unbounded), so
  // a one-scale job's probe is judged on the mean, as tuning's probe is.
  const tp =
    k === s.k0 || oneScale(s)
      ? expectedThroughput(model, placementAt(s, k))
      : pessimisticThroughput(model, placementAt(s, k));
  s.predictions.set(k, tp);
  return tp;
}

/** The mean prediction (step time without the 1 sd of caution). */
function meanPredict(s: Slot, k: number): number | undefined {
  const model = s.entry.model;
  if (!model || k < 1) return undefined;
  if (s.meanPredictions.has(k)) return s.meanPredictions.get(k);
  const tp = expectedThroughput(model, placementAt(s, k));
  s.meanPredictions.set(k, tp);
  return tp;
}

/** The optimistic prediction (step time - 1 sd, at most linear from the observed size); the observed size itself. */
function optimisticPredict(s: Slot, k: number): number | undefined {
  const model = s.entry.model;
  const observed = meanPredict(s, s.k0);
  if (!model || k < 1 || observed === undefined) return undefined;
  if (k === s.k0) return observed;
  return optimisticThroughput(model, placementAt(s, k), { replicas: s.k0, throughput: observed });
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
  return (loss / gpuWeight(s)) * urgency(s);
}

/**
 * What giving a worker costs a donor: its loss per GPU, counted dearer the fewer scale-downs its restart
 * budget has left (a restart spent now is one the job cannot give later, to a more urgent job or a real
 * failure): x2 on its last, x1.5 on its second-to-last, nothing extra without a budget. So among donors that
 * lose alike, the one with budget to spare gives.
 */
function donorLoss(s: Slot): number {
  const scarcity = Number.isFinite(s.shrinksLeft) ? 1 + 1 / Math.max(1, s.shrinksLeft) : 1;
  return lossPerGpu(s) * scarcity;
}

/**
 * How much a fraction of this job's speed is worth: a job's completions per second are 1 / remaining, so
 * the same relative speed-up counts for more on a job close to its end, softened by URGENCY_EXPONENT. 1 for a
 * job with the assumed hour left, so that thresholds in relative terms (hysteresis) keep their meaning; a job
 * whose remaining time is unknown gets 1.
 */
function urgency(s: Slot): number {
  return softUrgency(ASSUMED_REMAINING_SECONDS / Math.max(MIN_REMAINING_SECONDS, s.remaining));
}

/** A completion rate in hours⁻¹ (ASSUMED_REMAINING_SECONDS / remaining) as the urgency that weighs gains. */
function softUrgency(completionRate: number): number {
  return completionRate > 0 ? completionRate ** URGENCY_EXPONENT : 0;
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
  const details: string[] = [];
  const tp: Predictor = s.onOptimism ? optimisticPredict : s.onMean ? meanPredict : predict;
  const before = tp(s, s.k0);
  const after = tp(s, s.k);
  const predicted =
    before !== undefined && after !== undefined
      ? `${s.onOptimism ? 'at best' : 'predicted'} ${formatRateChange(before, after)}`
      : undefined;
  if (predicted) details.push(predicted);
  if (s.onOptimism) {
    const mean = meanPredict(s, s.k);
    if (mean !== undefined && before !== undefined)
      details.push(`on the mean ${formatRateChange(before, mean)}`);
  }
  const notes = [...s.notes.values()].map((n) => `${n.delta > 0 ? '+' : ''}${n.delta} ${n.detail}`);
  const summary = rebalanceSummary(s, notes, before, after);
  // The moves the summary does not tell whole.
  details.push(...notes.filter((n) => !summary.includes(n)));
  const limit = slotGrowthLimit(s, config);
  if (s.k > s.k0 && limit.why) details.push(`growth rule: ${limit.why}`);
  const landing = s.k > s.k0 ? s.layout?.roomiest : undefined;
  if (landing) details.push(`new Worker pods prefer node ${landing}, the one it runs on with the most room`);
  if (s.k > s.k0 && before !== undefined && after !== undefined) {
    details.push(
      `gain over ${describeRemaining(s.entry.remainingSeconds)} = ${formatDuration(timeSaved(s.remaining, before, after))} ` +
        `> ${config.gainOverCostFactor} x ${describeCost(s.costs, 'up')}`,
    );
  }
  return planWithinKind(s.entry.job, {
    ref: s.entry.job.ref,
    policy: 'rebalance',
    changes: [
      { kind: 'replicas', role: 'Worker', from: s.k0, to: s.k },
      // Growth is predicted on the nodes the job runs on while they have room (workerNodesAt): the new pods
      // are steered there, or the scheduler opens other nodes.
      ...(landing ? [{ kind: 'prefer-node' as const, role: 'Worker' as const, node: landing }] : []),
    ],
    ...explained(summary, details),
  });
}

/**
 * The one line: the size change, the move that made it (the first note, with more moves counted) and the
 * predicted change of speed, the number that justified it.
 */
function rebalanceSummary(
  s: Slot,
  notes: readonly string[],
  before: number | undefined,
  after: number | undefined,
): string {
  const head = workersChange(s.k0, s.k);
  const [first, ...others] = notes;
  const why =
    first === undefined
      ? ''
      : `${first}${others.length > 0 ? ` (+${plural(others.length, 'more move')})` : ''}`;
  // A move that states its own figure needs no second one.
  const gain =
    before !== undefined && after !== undefined && before > 0 && !why.includes('%')
      ? `${s.onOptimism ? 'at best' : 'predicted'} ${formatChange(after / before - 1)}`
      : '';
  const tail = [why, gain].filter((x) => x !== '').join('; ');
  const line = tail === '' ? head : `${head}: ${tail}`;
  if (line.length <= SUMMARY_LIMIT || gain === '') return oneLine(line);
  // The number stays; the move's wording gives way.
  return `${oneLine(`${head}: ${why}`, SUMMARY_LIMIT - gain.length - 2)}; ${gain}`;
}

function refKey(job: JobView): string {
  return `${job.ref.namespace}/${job.ref.name}`;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
