// Replays a per-worker step-time trace through the production straggler path, at its resolution:
//  1. the sidecar: its own ProgressTracker, fed once a second (the Python hook's cadence) with the
//     cumulative step count the trace implies, exporting the mean over TRAINSCALER_STEP_WINDOW_SECONDS (60);
//  2. Prometheus: a scrape every 15 s (prometheus.yml), read back by query_range at the straggler query step
//     over the lookback, each point the latest scrape at or before it (within the 5 min staleness);
//  3. the alarm function: a review every 60 s (Alertmanager's repeat on the straggler route while the alert
//     fires), calling the same decideOnStragglers the function calls, with its cooldown after an eviction.
// The trace is what happened: a replacement does not change it (the CLI says so).

import { ProgressTracker } from '../infra/sidecar/src/progress-tracker.js';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../lib/config.js';
import {
  decideOnStragglers,
  detectStragglers,
  STRAGGLER_LOOKBACK_SECONDS,
  STRAGGLER_QUERY_STEP_SECONDS,
  type WorkerStatus,
  withStragglerReplacement,
} from '../lib/policies/stragglers.js';
import type { JobAutoscalerState, JobView, PodView, WorkerStepTimes } from '../lib/types.js';

export interface ReplayOptions {
  config?: PolicyConfig;
  sidecarWindowSeconds?: number;
  scrapeSeconds?: number;
  /** Seconds between the trace's start and the first scrape: scrapes are not aligned with anything. */
  scrapeOffsetSeconds?: number;
  queryStepSeconds?: number;
  lookbackSeconds?: number;
  reviewSeconds?: number;
}

export interface VerdictEpisode {
  status: Exclude<WorkerStatus, 'ok'>;
  from: number;
  to: number | null;
  /** The review that first gave this verdict (not in the CLI's JSON: `from` is when the detector dates it). */
  flaggedAt: number;
}

export interface ReplayResult {
  workers: { worker: number; episodes: VerdictEpisode[] }[];
  replacements: { at: number; worker: number }[];
  /** Reviews with their eviction, for a reader who wants the reasons. */
  reviews: number;
}

const STALENESS_SECONDS = 300;
const HOOK_REPORT_SECONDS = 1;

/** The sidecar's gauge as Prometheus stored it: one sample per scrape per worker. */
export function scrapeSidecars(
  trace: WorkerStepTimes[],
  windowSeconds: number,
  scrapeSeconds: number,
  offsetSeconds: number,
): WorkerStepTimes[] {
  return trace.map((s) => {
    const samples = [...s.samples].sort((a, b) => a.at - b.at);
    const out: WorkerStepTimes = { worker: s.worker, samples: [] };
    if (s.pod !== undefined) out.pod = s.pod;
    const first = samples[0];
    const last = samples[samples.length - 1];
    if (first === undefined || last === undefined) return out;
    const tracker = new ProgressTracker(windowSeconds, { replicas: '', nodes: '', local_batch_size: '' });
    let steps = 0;
    let next = 0; // index of the first trace sample after the current second
    let nextScrape = first.at + offsetSeconds;
    for (let t = first.at; t <= last.at + windowSeconds; t += HOOK_REPORT_SECONDS) {
      while (next < samples.length && (samples[next]?.at ?? 0) <= t) next += 1;
      const current = samples[next - 1] ?? first;
      if (t <= last.at) {
        // Fractional steps keep the mean exact whatever unit the trace's step times are in.
        if (t > first.at) steps += HOOK_REPORT_SECONDS / current.stepTime;
        tracker.observe({ step: steps, at: t });
      }
      while (nextScrape <= t) {
        const mean = tracker.meanStepTime(nextScrape);
        if (mean !== undefined && nextScrape <= last.at) out.samples.push({ at: nextScrape, stepTime: mean });
        nextScrape += scrapeSeconds;
      }
    }
    return out;
  });
}

/** What query_range returns at `end`: per worker, the latest scrape at or before each grid point. */
export function queryRange(
  scraped: WorkerStepTimes[],
  end: number,
  lookbackSeconds: number,
  stepSeconds: number,
): WorkerStepTimes[] {
  const out: WorkerStepTimes[] = [];
  for (const s of scraped) {
    const samples: WorkerStepTimes['samples'] = [];
    let i = 0;
    for (let at = end - lookbackSeconds; at <= end; at += stepSeconds) {
      while (i < s.samples.length && (s.samples[i]?.at ?? 0) <= at) i += 1;
      const latest = s.samples[i - 1];
      if (latest !== undefined && at - latest.at <= STALENESS_SECONDS)
        samples.push({ at, stepTime: latest.stepTime });
    }
    if (samples.length > 0) out.push({ worker: s.worker, ...(s.pod ? { pod: s.pod } : {}), samples });
  }
  return out;
}

export function replayStragglers(trace: WorkerStepTimes[], options: ReplayOptions = {}): ReplayResult {
  const config = options.config ?? DEFAULT_POLICY_CONFIG;
  const window = options.sidecarWindowSeconds ?? 60;
  const scrape = options.scrapeSeconds ?? 15;
  const step = options.queryStepSeconds ?? STRAGGLER_QUERY_STEP_SECONDS;
  const lookback = options.lookbackSeconds ?? STRAGGLER_LOOKBACK_SECONDS;
  const every = options.reviewSeconds ?? 60;
  const scraped = scrapeSidecars(trace, window, scrape, options.scrapeOffsetSeconds ?? 7);

  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const s of trace)
    for (const x of s.samples) {
      start = Math.min(start, x.at);
      end = Math.max(end, x.at);
    }
  const pods = trace.map((s): PodView => podFor(s.worker));
  const open = new Map<number, VerdictEpisode>();
  const episodes = new Map<number, VerdictEpisode[]>(trace.map((s) => [s.worker, []]));
  const replacements: ReplayResult['replacements'] = [];
  // What the actuator keeps between reviews: the cool-down's start and the slots' replacements (back-off).
  let state: JobAutoscalerState = { oomCount: 0, paused: false };
  let reviews = 0;

  for (let now = start + every; now <= end; now += every) {
    reviews += 1;
    const series = queryRange(scraped, now, lookback, step);
    const report = detectStragglers(series, config, now);
    for (const w of report.workers) {
      const current = open.get(w.worker);
      const status = w.status === 'ok' ? undefined : w.status;
      if (current && current.status !== status) {
        current.to = now;
        open.delete(w.worker);
      }
      if (status !== undefined && !open.has(w.worker)) {
        const episode: VerdictEpisode = { status, from: w.since ?? now, to: null, flaggedAt: now };
        open.set(w.worker, episode);
        episodes.get(w.worker)?.push(episode);
      }
    }
    const job = jobView(trace.length, state);
    const plan = decideOnStragglers({ job, series, pods, config, now, report });
    for (const change of plan.changes) {
      if (change.kind !== 'evict-pod') continue;
      const pod = pods.find((p) => p.name === change.pod);
      if (pod) replacements.push({ at: now, worker: pod.index });
      state = { ...withStragglerReplacement(state, plan, now), lastActionAt: now };
    }
  }
  return {
    workers: [...episodes].map(([worker, list]) => ({ worker, episodes: list })),
    replacements,
    reviews,
  };
}

function podFor(worker: number): PodView {
  const none = { cpuMillis: 0, memoryBytes: 0, gpus: 0 };
  return {
    name: `worker-${worker}`,
    namespace: 'replay',
    role: 'Worker',
    index: worker,
    phase: 'Running',
    restartCount: 0,
    requests: none,
    limits: none,
  };
}

function jobView(workers: number, state: JobAutoscalerState): JobView {
  const none = { cpuMillis: 0, memoryBytes: 0, gpus: 0 };
  return {
    ref: { kind: 'PyTorchJob', namespace: 'replay', name: 'trace' },
    uid: 'replay',
    resourceVersion: '1',
    priority: 0,
    elastic: false,
    signature: 'replay',
    roles: [
      {
        role: 'Worker',
        replicas: workers,
        minReplicas: workers,
        maxReplicas: workers,
        containerName: 'trainer',
        containerIndex: 0,
        requests: none,
        limits: none,
      },
    ],
    managed: true,
    state,
  };
}
