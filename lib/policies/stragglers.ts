// Straggler detection for synchronous data-parallel jobs: every step waits for the slowest worker, so one
// slow worker slows the whole job. Two different things look alike in raw step times:
//  - a transient straggler (a noisy neighbour, a throttled GPU) that replacing the pod can cure, and
//  - a persistent skew (a slower GPU model, a worse network path) that replacing the pod will not cure.
// Each worker is therefore judged against its OWN long-run ratio to the job, not against the job alone.

import type { PolicyConfig } from '../config.js';
import type { Change, JobView, Plan, PodView, WorkerStepTimes } from '../types.js';
import { formatRatio } from './format.js';

export type WorkerStatus = 'ok' | 'straggler' | 'persistently-slow';

export interface WorkerStragglerStatus {
  worker: number;
  pod?: string;
  status: WorkerStatus;
  /** Median of the worker's last `stragglerMinSamples` step times, each divided by the job median at that sample. */
  recentRatio?: number;
  /** The worker's usual ratio to the job median: the median over every comparable sample given. */
  baselineRatio?: number;
  /** Epoch seconds since which the worker has been in this status (first sample of the episode). */
  since?: number;
  /** Samples that could be compared with enough peers; no verdict other than 'ok' is given on fewer. */
  comparableSamples: number;
}

export interface StragglerReport {
  at: number;
  workers: WorkerStragglerStatus[];
  /** How much slower than the job's fastest quartile a worker must usually be to count as persistently slow. */
  persistentFactor: number;
}

/** Fewer workers than this at a sample and the "job median" is just one or two workers: no comparison. */
const MIN_PEERS = 3;

/**
 * A steady gap costs the job at every step, so it is worth reporting at half the margin that flags a
 * transient spike; below that, workers on the same GPU model differ by normal noise.
 */
export function persistentSlowFactor(config: PolicyConfig): number {
  return 1 + (config.stragglerFactor - 1) / 2;
}

/**
 * Persistent skew is only called on ten straggler windows of history (30 samples by default): over a shorter
 * span a slow spell that began before the window looks the same as a steady gap.
 */
const PERSISTENT_HISTORY_WINDOWS = 10;

export function detectStragglers(
  series: WorkerStepTimes[],
  config: PolicyConfig,
  now: number,
): StragglerReport {
  const observed = series.map((s) => ({
    worker: s.worker,
    pod: s.pod,
    samples: s.samples
      .filter((x) => x.at <= now && Number.isFinite(x.at) && Number.isFinite(x.stepTime) && x.stepTime > 0)
      .sort((a, b) => a.at - b.at),
  }));
  const tolerance = typicalInterval(observed.map((o) => o.samples));
  const ratios = observed.map((o) => ratiosToJobMedian(o.samples, observed, tolerance));
  const baselines = ratios.map((r) => (r.length > 0 ? median(r.map((x) => x.ratio)) : undefined));
  const fastPace = lowerQuartile(baselines.filter((b): b is number => b !== undefined));
  const persistentFactor = persistentSlowFactor(config);

  const workers = observed.map((o, i): WorkerStragglerStatus => {
    const own = ratios[i] ?? [];
    const baseline = baselines[i];
    const base = {
      worker: o.worker,
      ...(o.pod !== undefined ? { pod: o.pod } : {}),
      comparableSamples: own.length,
    };
    if (baseline === undefined || own.length < config.stragglerMinSamples) {
      return { ...base, status: 'ok', ...(baseline !== undefined ? { baselineRatio: baseline } : {}) };
    }
    const recentRatio = median(own.slice(-config.stragglerMinSamples).map((x) => x.ratio));
    const episode = currentEpisode(own, baseline * config.stragglerFactor, config.stragglerMinSamples);
    const withRatios = { ...base, recentRatio, baselineRatio: baseline };
    if (episode.straggling) return { ...withRatios, status: 'straggler', since: episode.since };

    const longEnough = own.length >= PERSISTENT_HISTORY_WINDOWS * config.stragglerMinSamples;
    if (longEnough && fastPace !== undefined && baseline > fastPace * persistentFactor) {
      return { ...withRatios, status: 'persistently-slow', since: own[0]?.at ?? episode.since };
    }
    return { ...withRatios, status: 'ok', since: episode.since };
  });

  return { at: now, workers, persistentFactor };
}

interface Ratio {
  at: number;
  ratio: number;
}

/**
 * Each sample divided by the median of all workers' step times at that moment. Workers rarely report at the
 * same instant, so each peer contributes its sample nearest in time, if within one sampling interval.
 */
function ratiosToJobMedian(
  own: { at: number; stepTime: number }[],
  all: { samples: { at: number; stepTime: number }[] }[],
  tolerance: number,
): Ratio[] {
  const out: Ratio[] = [];
  for (const sample of own) {
    const peers: number[] = [];
    for (const other of all) {
      const near = nearest(other.samples, sample.at);
      if (near !== undefined && Math.abs(near.at - sample.at) <= tolerance) peers.push(near.stepTime);
    }
    if (peers.length < MIN_PEERS) continue;
    out.push({ at: sample.at, ratio: sample.stepTime / median(peers) });
  }
  return out;
}

/**
 * Replays the worker's ratios: it becomes a straggler after `minSamples` consecutive slow samples and stops
 * being one after `minSamples` consecutive normal ones, so that a single fast step inside a slow spell
 * does not make the verdict flap.
 */
function currentEpisode(
  ratios: Ratio[],
  slowAbove: number,
  minSamples: number,
): { straggling: boolean; since: number } {
  let straggling = false;
  let since = ratios[0]?.at ?? 0;
  let run = 0;
  let runStart = since;
  for (const { at, ratio } of ratios) {
    const agrees = ratio > slowAbove === straggling;
    if (agrees) {
      run = 0;
      continue;
    }
    if (run === 0) runStart = at;
    run += 1;
    if (run >= minSamples) {
      straggling = !straggling;
      since = runStart;
      run = 0;
    }
  }
  return { straggling, since };
}

// --- Decision --------------------------------------------------------------------------------------------

export interface StragglerInput {
  job: JobView;
  series: WorkerStepTimes[];
  pods: PodView[];
  config: PolicyConfig;
  now: number;
}

export function decideOnStragglers(input: StragglerInput): Plan {
  const { job, series, pods, config, now } = input;
  const plan = (changes: Change[], reason: string): Plan => ({
    ref: job.ref,
    policy: 'straggler',
    changes,
    reason,
  });

  if (job.state.paused) {
    return plan(
      [],
      `job is paused (${job.state.pauseReason ?? 'no reason recorded'}); not checking stragglers`,
    );
  }
  // Right after a write (possibly our own eviction) the window still holds the replaced pod's slow steps.
  const lastActionAt = job.state.lastActionAt;
  if (lastActionAt !== undefined && now - lastActionAt < config.cooldownSeconds) {
    const left = Math.ceil(config.cooldownSeconds - (now - lastActionAt));
    return plan([], `in cooldown for ${left} s more after the last change; not checking stragglers`);
  }

  const report = detectStragglers(series, config, now);
  const notes: string[] = [];
  const stragglers = report.workers
    .filter((w) => w.status === 'straggler')
    .sort((a, b) => excess(b) - excess(a) || a.worker - b.worker);

  let change: Change | undefined;
  for (const straggler of stragglers) {
    const pod = podOf(straggler, pods);
    const what = describeStraggler(straggler, pod?.name, config);
    if (change !== undefined) {
      notes.push(`${what}; left for a later decision (one eviction at a time)`);
    } else if (pod === undefined) {
      notes.push(`${what}; no pod found for it, not evicting`);
    } else if (pod.phase !== 'Running') {
      notes.push(`${what}; its pod is ${pod.phase}, not evicting`);
    } else {
      change = { kind: 'evict-pod', pod: pod.name };
      notes.push(`${what}; evicting ${pod.name} so the controller replaces it`);
    }
  }

  const slow = report.workers.filter((w) => w.status === 'persistently-slow');
  if (slow.length > 0) {
    const list = slow
      .map((w) => `worker ${w.worker} (${formatRatio(w.baselineRatio ?? 0)} of median)`)
      .join(', ');
    notes.push(
      `persistently slow, not evicting (a replacement would be as slow): ${list}; more than ${formatRatio(report.persistentFactor)} the fastest quartile`,
    );
  }
  if (stragglers.length === 0) notes.unshift('no straggler');
  return plan(change ? [change] : [], notes.join('; '));
}

function excess(w: WorkerStragglerStatus): number {
  return (w.recentRatio ?? 0) / (w.baselineRatio ?? 1);
}

/** The series names its pod when the metrics carry it; otherwise the worker number is the Worker replica index. */
function podOf(worker: WorkerStragglerStatus, pods: PodView[]): PodView | undefined {
  if (worker.pod !== undefined) return pods.find((p) => p.name === worker.pod);
  return pods.find((p) => p.role === 'Worker' && p.index === worker.worker);
}

function describeStraggler(
  w: WorkerStragglerStatus,
  podName: string | undefined,
  config: PolicyConfig,
): string {
  const who = podName ? `${podName} (worker ${w.worker})` : `worker ${w.worker}`;
  return `${who} straggling since t=${w.since}: step time ${formatRatio(w.recentRatio ?? 0)} the job median vs its usual ${formatRatio(w.baselineRatio ?? 0)} (threshold ${formatRatio(config.stragglerFactor)} its usual for ${config.stragglerMinSamples} samples)`;
}

// --- Statistics ------------------------------------------------------------------------------------------

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] ?? Number.NaN;
  if (sorted.length % 2 === 1) return hi;
  return ((sorted[mid - 1] ?? hi) + hi) / 2;
}

/** 25th percentile (nearest rank): the pace the job's faster workers keep, robust to one unusually fast worker. */
function lowerQuartile(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length * 0.25) - 1)];
}

/** The usual gap between a worker's consecutive samples; 0 (exact match only) when no worker has two. */
function typicalInterval(all: { at: number }[][]): number {
  const gaps: number[] = [];
  for (const samples of all) {
    for (let i = 1; i < samples.length; i++) {
      const gap = (samples[i]?.at ?? 0) - (samples[i - 1]?.at ?? 0);
      if (gap > 0) gaps.push(gap);
    }
  }
  return gaps.length > 0 ? median(gaps) : 0;
}

/** Sample nearest to `at` in a list sorted by time (the earlier one on a tie). */
function nearest<T extends { at: number }>(sorted: T[], at: number): T | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid]?.at ?? 0) < at) lo = mid + 1;
    else hi = mid;
  }
  const after = sorted[lo];
  const before = sorted[lo - 1];
  if (before === undefined) return after;
  if (after === undefined) return before;
  return at - before.at <= after.at - at ? before : after;
}
