// Straggler detection for synchronous data-parallel jobs: every step waits for the slowest worker, so one
// slow worker slows the whole job. Two different things look alike in raw step times:
//  - a transient straggler (a noisy neighbour, a throttled GPU) that replacing the pod can cure, and
//  - a persistent skew (a slower GPU model, a worse network path) that replacing the pod will not cure.
// A worker is judged twice: against its OWN usual pace (so a persistent skew is not a straggler), and
// against the job's typical FAST pace (so a worker that is not slower than the fast workers is never one).
//
// One forward pass over the lookback window, at each instant:
//  - pace  = the worker's step time / the job's fast pace (20th percentile of the workers' step times): job-wide
//    changes (a resize, a slower phase) cancel out, and a 5/5 split does not flip it;
//  - usual = median of the worker's last BASELINE_SAMPLES normal paces. Slow samples never enter it, so a
//    slow spell is not absorbed however long it lasts (the baseline is frozen while the worker is slow);
//  - the job's common drift = median over workers of pace / usual, divided out: when several of the fast
//    workers slow down together the fast pace itself moves, and this puts it back. Up to half the workers
//    minus one may slow down together without moving the median.

import type { PolicyConfig } from '../config.js';
import type { Change, JobView, Plan, PodView, WorkerStepTimes } from '../types.js';
import { formatRatio } from './format.js';
import { planWithinKind } from './kind-limits.js';

export type WorkerStatus = 'ok' | 'straggler' | 'persistently-slow';

export interface WorkerStragglerStatus {
  worker: number;
  pod?: string;
  /** Node of the worker's latest sample, when the metrics carry it. */
  node?: string;
  status: WorkerStatus;
  /** The worker's latest pace: its step time / the job's fast pace (corrected for the job's common drift). */
  recentRatio?: number;
  /** The worker's usual pace on the same scale: median of its recent normal samples. */
  baselineRatio?: number;
  /** Epoch seconds since which the worker has been in this status (first sample of the episode). */
  since?: number;
  /** Samples that could be compared with enough peers; no verdict other than 'ok' is given on fewer. */
  comparableSamples: number;
  /** Straggler episodes (closed or open) seen in the lookback window, with the node each began on. */
  episodes: StragglerEpisode[];
}

export interface StragglerEpisode {
  from: number;
  /** Last slow sample of a closed episode; undefined while it lasts. */
  to?: number;
  node?: string;
}

export interface StragglerReport {
  at: number;
  workers: WorkerStragglerStatus[];
  /** How much slower than the job's fast pace a worker must usually be to count as persistently slow. */
  persistentFactor: number;
}

/**
 * The production resolution: the sidecar's 60 s mean gauge, scraped every 15 s, queried at a 15 s step over
 * two hours (one query_range per review, 481 points per worker). A 60 s step gives two points in a two-minute
 * spell, too few to tell a spell from noise; two hours keep the pace before a one-hour spell in view.
 */
export const STRAGGLER_QUERY_STEP_SECONDS = 15;
export const STRAGGLER_LOOKBACK_SECONDS = 2 * 3600;

/** Fewer workers than this at a sample and the "job" is just one or two workers: no comparison. */
const MIN_PEERS = 3;
/** The usual pace is the median of this many latest normal samples (30 min at the production step). */
const BASELINE_SAMPLES = 120;
/** No verdict before a worker has this many normal samples (2 min at the production step). */
const MIN_BASELINE_SAMPLES = 8;
/** Persistent skew is only called on this many normal samples (10 min at the production step). */
const PERSISTENT_MIN_SAMPLES = 40;

/**
 * A steady gap costs the job at every step, so it is worth reporting at three quarters of the margin that
 * flags a transient spike (x1.15 at the default x1.2); below that, workers on the same GPU model differ by
 * normal noise (job 1 of the PAI traces: three workers steadily x1.11 the others, not worth a report).
 */
export function persistentSlowFactor(config: PolicyConfig): number {
  return 1 + ((config.stragglerFactor - 1) * 3) / 4;
}

interface WorkerTrack {
  worker: number;
  pod?: string;
  node?: string;
  samples: { at: number; stepTime: number; node?: string }[];
  history: number[];
  /** Median of `history`, cached until the next push: read twice per worker per point. */
  usual?: number;
  comparable: number;
  straggling: boolean;
  run: number;
  runStart: number;
  since?: number;
  firstComparable?: number;
  recent?: number;
  episodes: StragglerEpisode[];
  lastSlowAt?: number;
}

export function detectStragglers(
  series: WorkerStepTimes[],
  config: PolicyConfig,
  now: number,
): StragglerReport {
  const tracks: WorkerTrack[] = series.map((s) => ({
    worker: s.worker,
    ...(s.pod !== undefined ? { pod: s.pod } : {}),
    samples: s.samples
      .filter((x) => x.at <= now && Number.isFinite(x.at) && Number.isFinite(x.stepTime) && x.stepTime > 0)
      .sort((a, b) => a.at - b.at),
    history: [],
    comparable: 0,
    straggling: false,
    run: 0,
    runStart: 0,
    episodes: [],
  }));
  const interval = typicalInterval(tracks.map((t) => t.samples));
  const minRun = Math.max(1, config.stragglerMinSamples);

  for (const at of grid(tracks, interval)) {
    const present: { track: WorkerTrack; stepTime: number }[] = [];
    for (const track of tracks) {
      const sample = latestWithin(track.samples, at, interval);
      if (sample === undefined) continue;
      if (sample.node !== undefined) track.node = sample.node;
      present.push({ track, stepTime: sample.stepTime });
    }
    if (present.length < MIN_PEERS) continue;
    const fast = fastPaceOf(present.map((p) => p.stepTime)) ?? 1;
    const drifts = present
      .filter((p) => p.track.history.length >= MIN_BASELINE_SAMPLES)
      .map((p) => p.stepTime / fast / usualOf(p.track));
    const drift = drifts.length >= MIN_PEERS ? median(drifts) : 1;

    for (const { track, stepTime } of present) {
      const pace = stepTime / fast / drift;
      track.comparable += 1;
      track.firstComparable ??= at;
      track.recent = pace;
      if (track.history.length < MIN_BASELINE_SAMPLES) {
        remember(track, pace);
        continue;
      }
      const usual = usualOf(track);
      const slowerThanUsual = pace >= usual * config.stragglerFactor;
      // Never a straggler while not slower than the job's fast pace: replacing it could not speed the job up.
      const slow = slowerThanUsual && pace > 1;
      if (slow) track.lastSlowAt = at;
      stepEpisode(track, slow, at, minRun);
      if (!track.straggling && track.run === 0 && !slowerThanUsual) remember(track, pace);
    }
  }

  const persistentFactor = persistentSlowFactor(config);
  const workers = tracks.map((t): WorkerStragglerStatus => {
    const base = {
      worker: t.worker,
      ...(t.pod !== undefined ? { pod: t.pod } : {}),
      ...(t.node !== undefined ? { node: t.node } : {}),
      comparableSamples: t.comparable,
      episodes: t.episodes,
    };
    if (t.history.length < MIN_BASELINE_SAMPLES || t.recent === undefined) return { ...base, status: 'ok' };
    const withRatios = { ...base, recentRatio: t.recent, baselineRatio: usualOf(t) };
    if (t.straggling) return { ...withRatios, status: 'straggler', since: t.since ?? t.runStart };
    if (t.history.length >= PERSISTENT_MIN_SAMPLES && usualOf(t) > persistentFactor) {
      return { ...withRatios, status: 'persistently-slow', since: t.firstComparable ?? t.runStart };
    }
    return { ...withRatios, status: 'ok', ...(t.since !== undefined ? { since: t.since } : {}) };
  });
  return { at: now, workers, persistentFactor };
}

function usualOf(track: WorkerTrack): number {
  track.usual ??= median(track.history);
  return track.usual;
}

function remember(track: WorkerTrack, pace: number): void {
  track.history.push(pace);
  if (track.history.length > BASELINE_SAMPLES) track.history.shift();
  track.usual = undefined;
}

/**
 * A worker becomes a straggler after `minRun` consecutive slow samples and stops being one after `minRun`
 * consecutive normal ones, so that one fast step inside a slow spell does not make the verdict flap.
 */
function stepEpisode(track: WorkerTrack, slow: boolean, at: number, minRun: number): void {
  if (slow === track.straggling) {
    track.run = 0;
    return;
  }
  if (track.run === 0) track.runStart = at;
  track.run += 1;
  if (track.run < minRun) return;
  track.straggling = !track.straggling;
  track.since = track.runStart;
  track.run = 0;
  if (track.straggling) {
    track.episodes.push({ from: track.runStart, ...(track.node !== undefined ? { node: track.node } : {}) });
  } else {
    const open = track.episodes[track.episodes.length - 1];
    if (open) open.to = track.lastSlowAt ?? track.runStart;
  }
}

// --- Decision --------------------------------------------------------------------------------------------

export interface StragglerInput {
  job: JobView;
  series: WorkerStepTimes[];
  pods: PodView[];
  config: PolicyConfig;
  now: number;
  /** The detector's report for these series at `now`, when the caller has computed it already. */
  report?: StragglerReport;
}

/** Pods of one job that straggled on the same node this many times in the lookback window: the node is named. */
const REPEAT_NODE_EPISODES = 2;

export function decideOnStragglers(input: StragglerInput): Plan {
  const { job, series, pods, config, now } = input;
  const plan = (changes: Change[], reason: string): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'straggler', changes, reason });

  if (job.state.paused) {
    return plan(
      [],
      `job is paused (${job.state.pauseReason ?? 'no reason recorded'}); not checking stragglers`,
    );
  }
  // Right after a write (possibly our own eviction) the window still holds the replaced pod's slow steps.
  const lastActionAt = job.state.lastActionAt;
  const cooldown = Math.max(config.cooldownSeconds, config.stragglerCooldownSeconds);
  if (lastActionAt !== undefined && now - lastActionAt < cooldown) {
    const left = Math.ceil(cooldown - (now - lastActionAt));
    return plan([], `in cooldown for ${left} s more after the last change; not checking stragglers`);
  }

  const report = input.report ?? detectStragglers(series, config, now);
  const notes: string[] = [];
  const stragglers = report.workers
    .filter((w) => w.status === 'straggler')
    .sort((a, b) => excess(b) - excess(a) || a.worker - b.worker);

  let changes: Change[] | undefined;
  for (const straggler of stragglers) {
    const pod = podOf(straggler, pods);
    const what = describeStraggler(straggler, pod, config);
    if (changes !== undefined) {
      notes.push(`${what}; left for a later decision (one eviction at a time)`);
    } else if (pod === undefined) {
      notes.push(`${what}; no pod found for it, not evicting`);
    } else if (pod.phase !== 'Running') {
      notes.push(`${what}; its pod is ${pod.phase}, not evicting`);
    } else if (job.torchElastic?.c10dStore && pod.role === 'Worker' && pod.index === 0) {
      // Measured: removing worker-0 of a c10d job kills the whole job; a slow step costs less.
      notes.push(
        `${what}; reported, not evicting: ${pod.name} is worker-0, the host of the job's c10d rendezvous ` +
          'store, and removing it kills the whole job',
      );
    } else {
      changes = [{ kind: 'evict-pod', pod: pod.name }];
      let steer = '';
      const steerRefused = job.refusals?.['avoid-node'];
      if (pod.nodeName !== undefined && steerRefused !== undefined) {
        // A running Job's or JobSet's pod template is immutable: no steering, the eviction alone.
        steer = ` (not steered away from ${pod.nodeName}: ${steerRefused})`;
      } else if (pod.nodeName !== undefined && job.ref.kind !== 'StatefulSet') {
        // Written before the eviction, so the pod the operator recreates already prefers other nodes.
        changes.unshift({ kind: 'avoid-node', role: pod.role, node: pod.nodeName });
        steer = `, preferring nodes other than ${pod.nodeName} for it`;
      } else if (pod.nodeName !== undefined) {
        // A StatefulSet rolls every pod when its template changes: the replacement may land on the same node.
        steer = ` (a StatefulSet: its template is left alone, so the replacement may land on ${pod.nodeName} again)`;
      }
      notes.push(`${what}; evicting ${pod.name} so the controller replaces it${steer}`);
    }
  }

  const slow = report.workers.filter((w) => w.status === 'persistently-slow');
  if (slow.length > 0) {
    const list = slow
      .map(
        (w) => `worker ${w.worker} (${formatRatio(w.baselineRatio ?? 0)} the fast pace since t=${w.since})`,
      )
      .join(', ');
    notes.push(
      `persistently slow, not evicting (a replacement would be as slow): ${list}; more than ${formatRatio(report.persistentFactor)} the job's fast pace`,
    );
  }
  const repeat = repeatNodes(report, pods);
  if (repeat.length > 0) notes.push(repeat.join('; '));
  if (stragglers.length === 0) notes.unshift('no straggler');
  return plan(changes ?? [], notes.join('; '));
}

/**
 * Nodes on which this job's pods kept straggling: named so that an operator can look at them. trainscaler
 * never cordons or taints a node; the node may be fine and the cause elsewhere.
 */
function repeatNodes(report: StragglerReport, pods: PodView[]): string[] {
  const count = new Map<string, number>();
  for (const w of report.workers) {
    const fallback = podOf(w, pods)?.nodeName;
    for (const e of w.episodes) {
      const node = e.node ?? fallback;
      if (node !== undefined) count.set(node, (count.get(node) ?? 0) + 1);
    }
  }
  return [...count]
    .filter(([, n]) => n >= REPEAT_NODE_EPISODES)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(
      ([node, n]) =>
        `node ${node}: this job's pods straggled on it ${n} times in the last ${STRAGGLER_LOOKBACK_SECONDS / 3600} h (reported only; trainscaler does not cordon or taint)`,
    );
}

function excess(w: WorkerStragglerStatus): number {
  return (w.recentRatio ?? 0) / (w.baselineRatio ?? 1);
}

/** The series names its pod when the metrics carry it; otherwise the worker number is the Worker replica index. */
function podOf(worker: WorkerStragglerStatus, pods: PodView[]): PodView | undefined {
  if (worker.pod !== undefined) return pods.find((p) => p.name === worker.pod);
  return pods.find((p) => p.role === 'Worker' && p.index === worker.worker);
}

function describeStraggler(w: WorkerStragglerStatus, pod: PodView | undefined, config: PolicyConfig): string {
  const who = pod ? `${pod.name} (worker ${w.worker})` : `worker ${w.worker}`;
  const node = pod?.nodeName ?? w.node;
  const where = node !== undefined ? ` on node ${node}` : '';
  return `${who} straggling${where} since t=${w.since}: pace ${formatRatio(w.recentRatio ?? 0)} the job's fast pace vs its usual ${formatRatio(w.baselineRatio ?? 0)} (threshold ${formatRatio(config.stragglerFactor)} its usual for ${config.stragglerMinSamples} samples)`;
}

// --- Statistics and alignment ----------------------------------------------------------------------------

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] ?? Number.NaN;
  if (sorted.length % 2 === 1) return hi;
  return ((sorted[mid - 1] ?? hi) + hi) / 2;
}

/**
 * 20th percentile (nearest rank; the 2nd fastest of 6-10 workers): the pace the job's fast workers keep,
 * robust to one unusually fast worker, and inside the fast group of a 5/5 split.
 */
function fastPaceOf(stepTimes: number[]): number | undefined {
  if (stepTimes.length === 0) return undefined;
  const sorted = [...stepTimes].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length * 0.2) - 1)];
}

/** The usual gap between a worker's consecutive samples; 1 s when no worker has two. */
function typicalInterval(all: { at: number }[][]): number {
  const gaps: number[] = [];
  for (const samples of all) {
    for (let i = 1; i < samples.length; i++) {
      const gap = (samples[i]?.at ?? 0) - (samples[i - 1]?.at ?? 0);
      if (gap > 0) gaps.push(gap);
    }
  }
  return gaps.length > 0 ? median(gaps) : 1;
}

/**
 * Instants to compare workers at, one interval apart and ending at the latest sample: Prometheus range
 * results share these timestamps exactly; workers that report a few seconds apart are matched by
 * `latestWithin`.
 */
function grid(tracks: WorkerTrack[], interval: number): number[] {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const t of tracks) {
    const a = t.samples[0]?.at;
    const b = t.samples[t.samples.length - 1]?.at;
    if (a !== undefined && a < first) first = a;
    if (b !== undefined && b > last) last = b;
  }
  if (!Number.isFinite(first) || !Number.isFinite(last)) return [];
  const out: number[] = [];
  for (let at = last; at >= first; at -= interval) out.push(at);
  return out.reverse();
}

/** The latest sample at or before `at` and less than one interval older (Prometheus's instant semantics). */
function latestWithin<T extends { at: number }>(sorted: T[], at: number, interval: number): T | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid]?.at ?? 0) <= at) lo = mid + 1;
    else hi = mid;
  }
  const found = sorted[lo - 1];
  return found !== undefined && at - found.at < interval ? found : undefined;
}
