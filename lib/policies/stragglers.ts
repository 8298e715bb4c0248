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
import type {
  Change,
  JobAutoscalerState,
  JobView,
  Plan,
  PodView,
  StragglerReplacement,
  WorkerStepTimes,
} from '../types.js';
import { formatPercent, formatRatio } from './format.js';
import { planWithinKind } from './kind-limits.js';
import { formatDuration, plural } from './placement.js';
import { explained, oneLine } from './reason.js';
import { rescaleCostsOf } from './rescale-cost.js';
import { ASSUMED_REMAINING_SECONDS, describeRemaining, timeSaved } from './tuning.js';

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
  /** The worker's step time at the latest instant the job's workers were compared; undefined if absent then. */
  stepTime?: number;
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
  /**
   * The measurement noise of a worker's pace: 1.4826 x the median absolute deviation of its normal paces over
   * their median (a robust standard deviation, relative), the median over workers with a baseline; 0 without.
   */
  paceNoise: number;
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
  /** The worker's step time at the latest instant it was compared with its peers. */
  latestStep?: { at: number; stepTime: number };
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
  // Fewer than one (0 or less) behaves as one: the first slow point flags.
  const minRun = config.stragglerMinSamples;

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
      track.latestStep = { at, stepTime };
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
      if (!track.straggling && !slowerThanUsual) remember(track, pace);
    }
  }

  const persistentFactor = persistentSlowFactor(config);
  const latest = Math.max(...tracks.map((t) => t.latestStep?.at ?? Number.NEGATIVE_INFINITY));
  const workers = tracks.map((t): WorkerStragglerStatus => {
    const base = {
      worker: t.worker,
      ...(t.pod !== undefined ? { pod: t.pod } : {}),
      ...(t.node !== undefined ? { node: t.node } : {}),
      comparableSamples: t.comparable,
      episodes: t.episodes,
      ...(t.latestStep?.at === latest ? { stepTime: t.latestStep.stepTime } : {}),
    };
    if (t.history.length < MIN_BASELINE_SAMPLES) return { ...base, status: 'ok' };
    const withRatios = { ...base, recentRatio: t.recent, baselineRatio: usualOf(t) };
    if (t.straggling) return { ...withRatios, status: 'straggler', since: t.since ?? t.runStart };
    if (t.history.length >= PERSISTENT_MIN_SAMPLES && usualOf(t) > persistentFactor) {
      return { ...withRatios, status: 'persistently-slow', since: t.firstComparable ?? t.runStart };
    }
    return { ...withRatios, status: 'ok', ...(t.since !== undefined ? { since: t.since } : {}) };
  });
  return { at: now, workers, persistentFactor, paceNoise: paceNoiseOf(tracks) };
}

/** Scales a median absolute deviation to a standard deviation under normal noise. */
const MAD_TO_SIGMA = 1.4826;

function paceNoiseOf(tracks: WorkerTrack[]): number {
  const spreads = tracks
    .filter((t) => t.history.length >= MIN_BASELINE_SAMPLES)
    .map((t) => {
      const usual = usualOf(t);
      return (MAD_TO_SIGMA * median(t.history.map((h) => Math.abs(h - usual)))) / usual;
    });
  return spreads.length > 0 ? median(spreads) : 0;
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
//
// In synchronous data-parallel training the job steps at the pace of its slowest worker, so a straggler is
// replaced only when that buys the job time:
//  1. it bounds the job's step time: its step time at the latest instant is within the measurement's noise of
//     the slowest worker's (BOTTLENECK_NOISE_MULTIPLE x the report's paceNoise); a worker slower than its own
//     usual pace but faster than the bottleneck costs the job nothing, and replacing it is a wrong eviction;
//  2. the predicted gain over the remaining run beats the replacement's cost (by gainOverCostFactor, as a
//     rescale must): the job's step time now against the step time with the bottleneck stragglers back at
//     their usual pace, the others as they are, over the job's remaining time (an assumed hour when the job
//     does not declare its target), against one replacement per bottleneck straggler;
//  3. its slot is not in back-off: a slot replaced while it straggled, and still straggling in the same
//     episode, had a replacement as slow; it waits STRAGGLER_BACKOFF_BASE x 2^(replacements - 1), at most
//     STRAGGLER_BACKOFF_MAX_SECONDS, from its last replacement (JobAutoscalerState.stragglerReplacements).
// Otherwise it is reported, with the rule it failed, and nothing is written.

export interface StragglerInput {
  job: JobView;
  series: WorkerStepTimes[];
  pods: PodView[];
  config: PolicyConfig;
  now: number;
  /** The detector's report for these series at `now`, when the caller has computed it already. */
  report?: StragglerReport;
  /** Seconds the job has left at its current pace, when it declares its target (remainingSecondsOf). */
  remainingSeconds?: number;
}

/** Pods of one job that straggled on the same node this many times in the lookback window: the node is named. */
const REPEAT_NODE_EPISODES = 2;

/**
 * Two step times are told apart only beyond this many paceNoise: a pace is already the ratio of two noisy step
 * times (the worker's over the fast pace), so its spread is that of a difference, and two of them cover 95%.
 */
export const BOTTLENECK_NOISE_MULTIPLE = 2;

/** Relative margin within which a worker counts as the job's bottleneck: step time >= slowest / (1 + it). */
export function bottleneckTolerance(report: Pick<StragglerReport, 'paceNoise'>): number {
  return BOTTLENECK_NOISE_MULTIPLE * report.paceNoise;
}

/** The back-off doubles per replacement of a slot that stayed slow, from twice the straggler cool-down... */
export function stragglerBackoffSeconds(count: number, config: PolicyConfig): number {
  const base = 2 * Math.max(config.cooldownSeconds, config.stragglerCooldownSeconds);
  return Math.min(base * 2 ** (Math.max(1, count) - 1), STRAGGLER_BACKOFF_MAX_SECONDS);
}
/** ...up to the lookback: after two hours a spell would have become the worker's usual pace anyway. */
export const STRAGGLER_BACKOFF_MAX_SECONDS = STRAGGLER_LOOKBACK_SECONDS;
/** A slot not replaced for this long starts its count again (twice the longest back-off: never inside one). */
export const STRAGGLER_REPLACEMENT_MEMORY_SECONDS = 2 * STRAGGLER_BACKOFF_MAX_SECONDS;
/** At most this many slots are remembered (the most recently replaced): the state stays small. */
const MAX_REMEMBERED_SLOTS = 64;

export interface ReplacementCost {
  seconds: number;
  text: string;
}

/**
 * What replacing one pod costs the job: the world re-forming without it (the job's measured scale-down pause,
 * else scaleDownCostSeconds) plus the replacement's start to its first step in the world (the job's last
 * growth measured patch to first step, pods' start included; else podStartSeconds + scaleUpCostSeconds).
 * Charged whole: a fixed-world job waits throughout; an elastic one trains on while the pod starts, so this
 * errs on the side of not evicting.
 */
export function replacementCost(
  job: Pick<JobView, 'state'> & Partial<Pick<JobView, 'torchElastic' | 'signatureRescaleCost'>>,
  config: PolicyConfig,
): ReplacementCost {
  const costs = rescaleCostsOf(job, config);
  const start = costs.upToFirstStep ?? config.podStartSeconds + costs.up;
  const pauseFrom = costs.downFrom;
  const startFrom =
    costs.upToFirstStep !== undefined
      ? "the job's last growth, patch to first step, measured"
      : `default: pod start ${formatDuration(config.podStartSeconds)} + join pause ${formatDuration(costs.up)}${costs.upSource === 'default' ? '' : `, ${costs.upFrom}`}`;
  return {
    seconds: costs.down + start,
    text: `${formatDuration(costs.down + start)} a replacement: pause ${formatDuration(costs.down)} (${pauseFrom}) + start to first step ${formatDuration(start)} (${startFrom})`,
  };
}

/**
 * The state after a straggler plan is written at `at`: the evicted slot's replacement counted (the count
 * starts again when its last one is older than STRAGGLER_REPLACEMENT_MEMORY_SECONDS), slots not replaced for
 * that long forgotten. Any other plan leaves the state as it is. The writer of the job's state calls it.
 */
export function withStragglerReplacement(
  state: JobAutoscalerState,
  plan: Plan,
  at: number,
): JobAutoscalerState {
  const evicted = plan.policy === 'straggler' ? plan.changes.find((c) => c.kind === 'evict-pod') : undefined;
  if (evicted === undefined) return state;
  const recent = (state.stragglerReplacements ?? []).filter(
    (r) => at - r.at < STRAGGLER_REPLACEMENT_MEMORY_SECONDS,
  );
  const previous = recent.find((r) => r.pod === evicted.pod);
  const others = recent.filter((r) => r.pod !== evicted.pod).slice(-(MAX_REMEMBERED_SLOTS - 1));
  const entry: StragglerReplacement = { pod: evicted.pod, at, count: (previous?.count ?? 0) + 1 };
  return { ...state, stragglerReplacements: [...others, entry] };
}

/** The stored replacements that are well formed; the rest is dropped (a slot then counts from zero). */
export function parseStragglerReplacements(raw: unknown): StragglerReplacement[] | undefined {
  if (!Array.isArray(raw)) return undefined;
  return raw.filter(
    (r: unknown): r is StragglerReplacement =>
      typeof r === 'object' &&
      r !== null &&
      typeof (r as StragglerReplacement).pod === 'string' &&
      (r as StragglerReplacement).pod !== '' &&
      Number.isFinite((r as StragglerReplacement).at) &&
      Number.isInteger((r as StragglerReplacement).count) &&
      (r as StragglerReplacement).count > 0,
  );
}

interface Candidate {
  straggler: WorkerStragglerStatus;
  stepTime: number;
  pod: PodView;
  what: string;
}

export function decideOnStragglers(input: StragglerInput): Plan {
  const { job, series, pods, config, now } = input;
  const plan = (changes: Change[], reason: string, details: string[] = []): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'straggler', changes, ...explained(reason, details) });

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
  const stragglers = report.workers
    .filter((w) => w.status === 'straggler')
    .sort((a, b) => excess(b) - excess(a) || a.worker - b.worker);
  const slowest = Math.max(...report.workers.map((w) => w.stepTime ?? 0));
  const tolerance = bottleneckTolerance(report);

  const notes = new Map<WorkerStragglerStatus, string>();
  const candidates: Candidate[] = [];
  for (const straggler of stragglers) {
    const pod = podOf(straggler, pods);
    const what = describeStraggler(straggler, pod, config);
    const backoff = pod && backoffLeft(straggler, pod, job.state, config, now);
    const stepTime = straggler.stepTime;
    if (pod === undefined) {
      notes.set(straggler, `${what}; no pod found for it, not evicting`);
    } else if (pod.phase !== 'Running') {
      notes.set(straggler, `${what}; its pod is ${pod.phase}, not evicting`);
    } else if (job.torchElastic?.c10dStore && pod.role === 'Worker' && pod.index === 0) {
      // Measured: removing worker-0 of a c10d job kills the whole job; a slow step costs less.
      notes.set(
        straggler,
        `${what}; reported, not evicting: ${pod.name} is worker-0, the host of the job's c10d rendezvous ` +
          'store, and removing it kills the whole job',
      );
    } else if (stepTime === undefined || stepTime * (1 + tolerance) < slowest) {
      notes.set(
        straggler,
        `${what}; reported, not evicting: ${notTheBottleneck(stepTime, slowest, tolerance)}`,
      );
    } else if (backoff !== undefined) {
      notes.set(straggler, `${what}; reported, not evicting: ${backoff}`);
    } else {
      candidates.push({ straggler, stepTime, pod, what });
    }
  }

  let changes: Change[] = [];
  const [first, ...rest] = candidates;
  if (first !== undefined) {
    const payoff = payoffOf(candidates, report, slowest, job, config, input.remainingSeconds);
    if (payoff.pays) {
      changes = evictionOf(first, job, notes, payoff.text);
      for (const c of rest)
        notes.set(c.straggler, `${c.what}; left for a later decision (one eviction at a time)`);
    } else {
      for (const c of candidates) notes.set(c.straggler, `${c.what}; reported, not evicting: ${payoff.text}`);
    }
  }

  const lines = stragglers.map((s) => notes.get(s) ?? '');
  const slow = report.workers.filter((w) => w.status === 'persistently-slow');
  if (slow.length > 0) {
    const list = slow
      .map(
        (w) => `worker ${w.worker} (${formatRatio(w.baselineRatio ?? 0)} the fast pace since t=${w.since})`,
      )
      .join(', ');
    lines.push(
      `persistently slow, not evicting (a replacement would be as slow): ${list}; more than ${formatRatio(report.persistentFactor)} the job's fast pace`,
    );
  }
  const repeat = repeatNodes(report, pods);
  if (repeat.length > 0) lines.push(repeat.join('; '));
  if (stragglers.length === 0) lines.unshift('no straggler');
  return plan(changes, stragglerSummary(changes, stragglers, slow.length, first), lines);
}

function notTheBottleneck(stepTime: number | undefined, slowest: number, tolerance: number): string {
  if (stepTime === undefined) return 'no step time at the latest instant, so not known to bound the job';
  return (
    `not the job's bottleneck: its step time is ${formatRatio(stepTime / slowest)} the slowest worker's ` +
    `(within ${formatPercent(tolerance)}, the measurement's noise, it would count); the job steps at the ` +
    'pace of its slowest worker, so replacing this one cannot speed it up'
  );
}

/** Why the slot waits, when its last replacement was as slow and its back-off has not expired. */
function backoffLeft(
  w: WorkerStragglerStatus,
  pod: PodView,
  state: JobAutoscalerState,
  config: PolicyConfig,
  now: number,
): string | undefined {
  const last = state.stragglerReplacements?.find((r) => r.pod === pod.name);
  // Straggling since after the last replacement: the replacement ran at its pace for a while, a new spell.
  if (last === undefined || (w.since ?? now) > last.at) return undefined;
  const backoff = stragglerBackoffSeconds(last.count, config);
  if (now - last.at >= backoff) return undefined;
  return (
    `its replacement of t=${last.at} is as slow (straggling since t=${w.since}, before it); after ` +
    `${last.count} such ${last.count === 1 ? 'replacement' : 'replacements'} it is not replaced again for ` +
    `${formatDuration(backoff)} (${Math.ceil(backoff - (now - last.at))} s more; the back-off doubles per ` +
    `replacement, at most ${formatDuration(STRAGGLER_BACKOFF_MAX_SECONDS)})`
  );
}

/**
 * The predicted gain of replacing every candidate (each back at its usual pace, the other workers as they are)
 * over the job's remaining run, against one replacement cost per candidate.
 */
function payoffOf(
  candidates: Candidate[],
  report: StragglerReport,
  stepNow: number,
  job: JobView,
  config: PolicyConfig,
  remainingSeconds: number | undefined,
): { pays: boolean; text: string } {
  const replaced = new Set(candidates.map((c) => c.straggler));
  const others = report.workers.filter((w) => !replaced.has(w)).map((w) => w.stepTime ?? 0);
  const usual = candidates.map((c) => c.stepTime / excess(c.straggler));
  const stepAfter = Math.max(...others, ...usual);
  const remaining = remainingSeconds ?? ASSUMED_REMAINING_SECONDS;
  const gain = timeSaved(remaining, 1 / stepNow, 1 / stepAfter);
  const cost = replacementCost(job, config);
  const charged = config.gainOverCostFactor * candidates.length * cost.seconds;
  const pays = gain > charged;
  const text =
    `predicted gain ${formatDuration(gain)} over ${describeRemaining(remainingSeconds)} (the job's ` +
    `step time ${formatRatio(stepAfter / stepNow)} of now with ${plural(candidates.length, 'bottleneck straggler')} ` +
    `back at usual pace) ${pays ? 'beats' : 'does not beat'} ${formatDuration(charged)} = ` +
    `${config.gainOverCostFactor} x ${candidates.length} x ${cost.text}`;
  return { pays, text };
}

function evictionOf(
  c: Candidate,
  job: JobView,
  notes: Map<WorkerStragglerStatus, string>,
  payoff: string,
): Change[] {
  const { pod, what } = c;
  const changes: Change[] = [{ kind: 'evict-pod', pod: pod.name }];
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
  notes.set(
    c.straggler,
    `${what}; the job's bottleneck, and ${payoff}; evicting ${pod.name} so the controller replaces it${steer}`,
  );
  return changes;
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

/**
 * One line: the pod replaced and its pace (the number that justified it), or how many stragglers were seen and
 * left alone; which workers, where, and the pay-off arithmetic are the details.
 */
function stragglerSummary(
  changes: Change[],
  stragglers: WorkerStragglerStatus[],
  persistentlySlow: number,
  first: Candidate | undefined,
): string {
  const evicted = changes.find((c) => c.kind === 'evict-pod');
  if (evicted && first) {
    const pace = formatRatio(first.straggler.recentRatio ?? 0);
    return oneLine(`replace ${evicted.pod}: straggling at ${pace} the job's fast pace`);
  }
  const slow = persistentlySlow > 0 ? `, ${persistentlySlow} persistently slow` : '';
  if (stragglers.length === 0) return `no straggler${slow}`;
  return `${plural(stragglers.length, 'straggler')} reported, none evicted${slow}`;
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
