// npm run bench:scale [-- --json] [-- --jobs 100,1000] [-- --smoke] [-- --time-limit 600] [-- --api-latency-ms 2]
//
// The cost of one schedule tick as the number of managed jobs grows (issue 41): for each N, N managed elastic
// PyTorchJobs on the simulated cluster (scale-world.ts), one handleSchedule tick with every step sample new to
// trainscaler, a second right after with none new, and one alert (handleAlarm) naming one job. Requests are
// counted as the production clients would send them (scale-counting.ts), not as the simulator is called.
// Each N runs in a child process of its own, so that its peak RSS is its own and a tick that outlasts the time
// limit can be stopped with the counts it had reached. Logs go to stderr; --json prints one JSON object.
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { handleAlarm } from '../../functions/alarm.js';
import type { HandlerDeps } from '../../functions/handler-deps.js';
import { handleSchedule } from '../../functions/schedule.js';
import { refOf } from '../../lib/adapters/job-adapter.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { FitCache } from '../../lib/model/fit-cache.js';
import {
  type CountSnapshot,
  countingClusterClient,
  countingMetricsSource,
  RequestCounter,
} from './scale-counting.js';
import {
  buildScaleWorld,
  DEFAULT_TRAINED_SECONDS,
  PROFILES_NAMESPACE,
  type ScaleWorld,
} from './scale-world.js';

const DEFAULT_JOBS = [100, 1000, 10_000];
const DEFAULT_TIME_LIMIT_SECONDS = 600;
/** Less than the simulator's sample interval (60 s): no new step sample between the two ticks. */
const SECOND_TICK_AFTER_SECONDS = 30;
/** After the second tick: past the next step sample of every job (one a minute). */
const LIVE_HEAP_TICK_AFTER_SECONDS = 60;

interface TickCounts {
  apiReadsPerTick: number;
  apiWritesPerTick: number;
  apiRequestsByVerbAndResource: Record<string, number>;
  /** Objects the tick's lists returned (the size of its reads, where the request count is not). */
  apiObjectsListedPerTick: number;
  promqlQueriesPerTick: number;
  promqlQueriesByMethod: CountSnapshot['promqlQueriesByMethod'];
}

interface AlertCost {
  apiReads: number;
  apiWrites: number;
  apiRequestsByVerbAndResource: Record<string, number>;
  apiObjectsListed: number;
  promqlQueries: number;
  seconds: number;
}

/** One N. The counts at the top level are the first tick's (every sample new). */
interface Run extends TickCounts {
  jobs: number;
  pods: number;
  nodes: number;
  queuedJobs: number;
  tickSecondsNoNewSamples: number | null;
  tickSecondsAllNewSamples: number | null;
  tickCpuSecondsAllNewSamples: number | null;
  tickCpuSecondsNoNewSamples?: number;
  /**
   * Of each tick's wall seconds, those spent inside the simulated world answering the tick's calls (its lists,
   * its Prometheus, the joining of its shards): work a real API server and Prometheus do elsewhere. The tick's
   * own seconds are the difference.
   */
  tickWorldSecondsAllNewSamples?: number;
  tickWorldSecondsNoNewSamples?: number;
  /** The child process's peak RSS: the simulated world's objects included. */
  peakRssBytes: number;
  rssAfterBuildBytes: number;
  buildSeconds: number;
  /** The second tick's counts (no new sample). */
  noNewSamples: TickCounts | null;
  /** Jobs whose newest step sample changed between the ticks: 0, or the second tick is not "no new sample". */
  jobsWithNewSamplesBeforeSecondTick?: number;
  alertRequests: AlertCost | null;
  /** The runner's own memory, apart from the simulated world's (runnerMemory). */
  runnerMemory?: RunnerMemory;
  /** Set when a tick was stopped at the time limit: its counts so far (at least these) are in the run. */
  exceeded?: { phase: Phase; afterSeconds: number; note: string };
}

/**
 * The handlers' memory apart from the simulated world's, which shares the process: the world is built, a full
 * GC taken, and the alert and both ticks measured from that baseline. Growths are upper bounds: they also hold
 * garbage not yet collected and what the world itself added for the tick's writes (its write log, Events,
 * ScaledTrainingJobs). The listed objects are measured apart: the simulator shares them with the handlers
 * here, where the runner's informer caches hold copies of their own.
 */
interface RunnerMemory {
  /** RSS with the code loaded, before the world is built: where a runner process starts. */
  rssBeforeWorldBytes: number;
  /** After the world is built and a full GC: the baseline. */
  baselineRssBytes: number;
  baselineHeapUsedBytes: number;
  /** Peak RSS (process lifetime, so the build's peak if higher) over the baseline. */
  tickPeakRssGrowthBytes: number;
  /** Largest heap in use sampled every 50 ms during the alert and the ticks, over the baseline. */
  tickPeakHeapGrowthBytes: number;
  /**
   * Heap still in use after both ticks and a full GC, over the baseline: what is kept between ticks (the
   * fits; and what the world keeps of the writes: its write log, Events, ScaledTrainingJobs).
   */
  retainedHeapGrowthBytes: number;
  /** Of it, the fits kept between ticks (FitCache), measured by letting them go after the second tick. */
  fitCacheHeapBytes: number;
  /** Heap of one copy of everything a tick lists (jobs, pods, nodes, ScaledTrainingJobs, Workloads). */
  listedObjectsHeapBytes: number;
  /** rssBeforeWorld + listed objects + the larger tick peak growth: the runner's RSS, estimated from above. */
  runnerRssEstimateBytes: number;
  /** The live heap measured through a tick (tickLivePeak); absent when that tick did not run. */
  tickLivePeak?: LivePeak;
  /**
   * rssBeforeWorld + listed objects + tickLivePeak.peakGrowthBytes (the fits the tick makes included): the
   * runner's memory at its peak, live objects only (V8 collects its garbage when the heap grows, so its RSS
   * runs above this by what it has not collected yet, which --max-old-space-size bounds).
   */
  runnerPeakEstimateBytes?: number;
}

/**
 * A third tick, 60 s after the second, with every job's step samples new and no fit kept (every fit made cold,
 * as in a runner's first tick; it writes less than the first tick, whose world records its 7,801 writes), run
 * with full GCs at points spread through it (the requests it sends, each fit, the models' predictions in the
 * rebalance, each clock reading): the heap in use right after each is what the tick holds live there, garbage
 * excluded. Its seconds are not reported (the GCs are in them).
 */
interface LivePeak {
  /** Full GCs taken during the tick. */
  samples: number;
  /** Heap in use after a full GC right before the tick (no fit kept; the world so far). */
  heapBeforeTickBytes: number;
  /** The largest heap in use right after one of those GCs, over heapBeforeTickBytes. */
  peakGrowthBytes: number;
  /**
   * Heap still in use after the tick and a full GC, over heapBeforeTickBytes: what the tick left (the fits it
   * made, the world's records of its writes). peakGrowthBytes holds that part too.
   */
  retainedGrowthBytes: number;
  /** Plans the tick applied (each a write the world records). */
  plansApplied: number;
  /** Jobs with a step sample the second tick did not see (every job running by then). */
  jobsWithNewSamples: number;
}

type Phase =
  | 'building the world'
  | 'alert'
  | 'tick, all samples new'
  | 'tick, no new sample'
  | 'tick, live heap measured'
  | 'done';

interface Progress {
  phase: Phase;
  /** Epoch ms the phase began. */
  since: number;
  counts?: CountSnapshot;
  partial: Partial<Run>;
}

function tickCounts(s: CountSnapshot): TickCounts {
  return {
    apiReadsPerTick: s.apiReads,
    apiWritesPerTick: s.apiWrites,
    apiRequestsByVerbAndResource: s.apiRequestsByVerbAndResource,
    apiObjectsListedPerTick: s.apiObjectsListed,
    promqlQueriesPerTick: s.promqlQueries,
    promqlQueriesByMethod: s.promqlQueriesByMethod,
  };
}

const log = (message: string) => process.stderr.write(`[bench:scale] ${message}\n`);
/** A full GC (the child runs with --expose-gc), twice so that what the first freed is gone too. */
const fullGc = () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the child needs --expose-gc');
  gc();
  gc();
};
const rssPeak = () => process.resourceUsage().maxRSS * 1024;
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * Full GCs at points of a tick, at most one per `everyCpuMs` of the tick's own time (the GCs' excluded), each
 * followed by a reading of the heap in use: the largest is the tick's live peak (LivePeak). Idle until started.
 */
class LiveHeapSampler {
  samples = 0;
  peak = 0;
  #due = 0;
  #everyCpuMs = Number.POSITIVE_INFINITY;
  active = false;

  /** `everyCpuMs`: the process's CPU milliseconds between readings (CPU, not wall: a loaded machine stretches wall time). */
  start(everyCpuMs: number, peak: number): void {
    this.#everyCpuMs = everyCpuMs;
    this.peak = peak;
    this.active = true;
    this.#due = cpuMs() + everyCpuMs;
  }

  /** Called from the tick's hooks: a full GC and a reading when one is due. */
  readonly point = (): void => {
    if (!this.active || cpuMs() < this.#due) return;
    fullGc();
    this.peak = Math.max(this.peak, process.memoryUsage().heapUsed);
    this.samples += 1;
    this.#due = cpuMs() + this.#everyCpuMs;
  };

  stop(): void {
    this.point();
    this.active = false;
  }
}

/** The runner's fit cache, with a live-heap reading point at each fit and each prediction of a fitted model. */
class SampledFitCache extends FitCache {
  constructor(readonly sampler: LiveHeapSampler) {
    super();
  }

  override fit(...args: Parameters<FitCache['fit']>): ReturnType<FitCache['fit']> {
    const { point } = this.sampler;
    point();
    const model = super.fit(...args);
    if (!this.sampler.active) return model;
    return {
      sampleCount: model.sampleCount,
      distinctScales: model.distinctScales,
      predict: (placement) => {
        point();
        return model.predict(placement);
      },
    };
  }
}

// ---- child: one N -----------------------------------------------------------------------------------------

async function runOne(
  jobs: number,
  progressFile: string,
  trainedSeconds: number,
  apiLatencyMs: number,
): Promise<void> {
  let progress: Progress = { phase: 'building the world', since: Date.now(), partial: { jobs } };
  let lastWrite = 0;
  const save = (force = false) => {
    const now = performance.now();
    if (!force && now - lastWrite < 50) return;
    lastWrite = now;
    progress.partial.peakRssBytes = rssPeak();
    writeFileSync(progressFile, JSON.stringify(progress));
  };
  const enter = (phase: Phase, counter?: RequestCounter) => {
    progress = { ...progress, phase, since: Date.now(), counts: counter?.snapshot() };
    save(true);
  };
  save(true);
  const rssBeforeWorldBytes = process.memoryUsage().rss;
  const built = performance.now();
  const world = buildScaleWorld(jobs, trainedSeconds);
  const buildSeconds = (performance.now() - built) / 1000;
  log(
    `N=${jobs}: ${world.pods} pods on ${world.nodes} nodes, ${world.queuedJobs} jobs queued, built in ${buildSeconds.toFixed(1)} s`,
  );
  progress.partial = {
    ...progress.partial,
    pods: world.pods,
    nodes: world.nodes,
    queuedJobs: world.queuedJobs,
    buildSeconds,
    rssAfterBuildBytes: process.memoryUsage().rss,
  };
  // Idle except in the live-heap tick; its interval is set from the first tick's length (about 20 readings).
  const sampler = new LiveHeapSampler();
  let counter = new RequestCounter((c) => {
    progress.counts = c.snapshot();
    save();
  });
  const fresh = () => {
    counter = new RequestCounter((c) => {
      progress.counts = c.snapshot();
      save();
      sampler.point();
    });
    return counter;
  };
  const fitCache = new SampledFitCache(sampler);
  // One client for the run, as the runner keeps one (the Lambda one per cold start): only the counter changes.
  const deps: HandlerDeps = {
    cluster: countingClusterClient(world.cluster, () => counter, apiLatencyMs),
    metrics: countingMetricsSource(world.metrics, () => counter, world.clock),
    clock: () => {
      sampler.point();
      return world.clock();
    },
    config: DEFAULT_POLICY_CONFIG,
    dryRun: false,
    logger: {
      info: () => {},
      warn: () => {},
      error: (obj, msg) => log(`handler error: ${msg ?? ''} ${JSON.stringify(obj).slice(0, 300)}`),
    },
    profiles: { namespace: PROFILES_NAMESPACE, configMapName: 'trainscaler-profiles' },
    // As the runner keeps it (functions/runtime-deps.ts): fits live across ticks.
    fitCache,
  };

  fullGc();
  const baseline = process.memoryUsage();
  let peakHeap = baseline.heapUsed;
  const heapSampler = setInterval(() => {
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  }, 50);

  // The alert first: a tick stopped at the time limit ends the process, and the alert is cheap. It reviews one
  // job of N (a per-job cache would hold that one warm for the first tick).
  enter('alert', fresh());
  const alertStart = performance.now();
  const { kind, namespace, name } = world.runningJob;
  const alert = await handleAlarm(
    {
      version: '4',
      status: 'firing',
      alerts: [
        {
          status: 'firing',
          labels: { alertname: 'TrainscalerSlowStep', namespace, job_kind: kind, job_name: name },
        },
      ],
    },
    deps,
  );
  const alertSeconds = (performance.now() - alertStart) / 1000;
  if (alert.errors.length > 0) log(`alert errors: ${JSON.stringify(alert.errors)}`);
  const a = counter.snapshot();
  progress.partial.alertRequests = {
    apiReads: a.apiReads,
    apiWrites: a.apiWrites,
    apiRequestsByVerbAndResource: a.apiRequestsByVerbAndResource,
    apiObjectsListed: a.apiObjectsListed,
    promqlQueries: a.promqlQueries,
    seconds: alertSeconds,
  };

  /** One schedule tick: its result, wall and CPU seconds, and the wall seconds spent inside the world's calls. */
  const timedTick = async () => {
    const cpu = process.cpuUsage();
    const worldBusy = world.busyMs();
    const start = performance.now();
    const result = await handleSchedule({}, deps);
    const seconds = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    return {
      result,
      seconds,
      cpuSeconds: (used.user + used.system) / 1e6,
      worldSeconds: (world.busyMs() - worldBusy) / 1000,
    };
  };

  enter('tick, all samples new', fresh());
  const first = await timedTick();
  const { result } = first;
  log(
    `N=${jobs}: first tick ${first.seconds.toFixed(1)} s, ${result.outcomes.filter((o) => o.applied).length} plans applied, ${result.errors.length} job errors`,
  );
  progress.partial = {
    ...progress.partial,
    ...tickCounts(counter.snapshot()),
    tickSecondsAllNewSamples: first.seconds,
    tickCpuSecondsAllNewSamples: first.cpuSeconds,
    tickWorldSecondsAllNewSamples: first.worldSeconds,
  };

  // Right after, with the cluster 30 s on: the scheduler has placed the pods the first tick's writes asked for
  // (what a real cluster does between two ticks), and no job has a step sample the first tick did not see
  // (one a minute at most); the world is checked for that, outside the count.
  const newest = await newestSamples(world);
  world.step(SECOND_TICK_AFTER_SECONDS);
  const after = await newestSamples(world);
  const newSamples = [...after].filter(([job, at]) => at !== newest.get(job)).length;
  if (newSamples > 0) log(`N=${jobs}: ${newSamples} jobs have a new step sample before the second tick`);
  progress.partial.jobsWithNewSamplesBeforeSecondTick = newSamples;
  enter('tick, no new sample', fresh());
  const second = await timedTick();
  progress.partial = {
    ...progress.partial,
    tickSecondsNoNewSamples: second.seconds,
    tickCpuSecondsNoNewSamples: second.cpuSeconds,
    tickWorldSecondsNoNewSamples: second.worldSeconds,
    noNewSamples: tickCounts(counter.snapshot()),
    peakRssBytes: rssPeak(),
  };
  clearInterval(heapSampler);
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  const tickPeakRssGrowthBytes = rssPeak() - baseline.rss;
  fullGc();
  const retainedHeapGrowthBytes = process.memoryUsage().heapUsed - baseline.heapUsed;

  // The fits kept between ticks (made by the first), measured by letting them go.
  const heapWithFits = process.memoryUsage().heapUsed;
  fitCache.clear();
  fullGc();
  const fitCacheHeapBytes = heapWithFits - process.memoryUsage().heapUsed;

  // The live heap through a third tick with every sample new and no fit kept (LivePeak): about 20 full GCs.
  world.step(LIVE_HEAP_TICK_AFTER_SECONDS);
  const beforeThird = await newestSamples(world);
  const renewed = [...beforeThird].filter(([job, at]) => at !== after.get(job)).length;
  enter('tick, live heap measured', fresh());
  fullGc();
  const heapBeforeTickBytes = process.memoryUsage().heapUsed;
  sampler.start((first.cpuSeconds * 1000) / 20, heapBeforeTickBytes);
  const third = await handleSchedule({}, deps);
  sampler.stop();
  fullGc();
  const tickLivePeak: LivePeak = {
    samples: sampler.samples,
    heapBeforeTickBytes,
    peakGrowthBytes: sampler.peak - heapBeforeTickBytes,
    retainedGrowthBytes: process.memoryUsage().heapUsed - heapBeforeTickBytes,
    plansApplied: third.outcomes.filter((o) => o.applied).length,
    jobsWithNewSamples: renewed,
  };
  fitCache.clear();
  const listedObjectsHeapBytes = await listedObjectsHeap(world);
  progress.partial.runnerMemory = {
    rssBeforeWorldBytes,
    baselineRssBytes: baseline.rss,
    baselineHeapUsedBytes: baseline.heapUsed,
    tickPeakRssGrowthBytes,
    tickPeakHeapGrowthBytes: peakHeap - baseline.heapUsed,
    retainedHeapGrowthBytes,
    fitCacheHeapBytes,
    listedObjectsHeapBytes,
    runnerRssEstimateBytes:
      rssBeforeWorldBytes +
      listedObjectsHeapBytes +
      Math.max(tickPeakRssGrowthBytes, peakHeap - baseline.heapUsed),
    tickLivePeak,
    runnerPeakEstimateBytes: rssBeforeWorldBytes + listedObjectsHeapBytes + tickLivePeak.peakGrowthBytes,
  };
  enter('done');
}

/** The heap one copy of a tick's lists takes (read from the world directly, not counted). */
async function listedObjectsHeap(world: ScaleWorld): Promise<number> {
  const lists = await Promise.all([
    world.cluster.listPods(undefined),
    world.cluster.listNodes(),
    world.cluster.listJobs('PyTorchJob'),
    world.cluster.listJobStates(),
    world.cluster.listWorkloads(undefined, '').catch(() => []),
  ]);
  fullGc();
  const before = process.memoryUsage().heapUsed;
  const copy = structuredClone(lists);
  fullGc();
  const bytes = process.memoryUsage().heapUsed - before;
  return copy.length > 0 ? bytes : 0;
}

/** Each job's newest step sample time, read from the world directly (not counted). */
async function newestSamples(world: ScaleWorld): Promise<Map<string, number>> {
  const newest = new Map<string, number>();
  for (const job of await world.cluster.listJobs('PyTorchJob')) {
    const ref = refOf(job);
    const samples = await world.metrics.stepSamples(ref, 6 * 3600).catch(() => []);
    newest.set(`${ref.namespace}/${ref.name}`, samples.at(-1)?.at ?? 0);
  }
  return newest;
}

// ---- parent -----------------------------------------------------------------------------------------------

interface Options {
  jobs: number[];
  json: boolean;
  timeLimitSeconds: number;
  trainedSeconds: number;
  apiLatencyMs: number;
}

function parseOptions(argv: string[]): Options {
  const options: Options = {
    jobs: DEFAULT_JOBS,
    json: false,
    timeLimitSeconds: DEFAULT_TIME_LIMIT_SECONDS,
    trainedSeconds: DEFAULT_TRAINED_SECONDS,
    apiLatencyMs: 0,
  };
  const positive = (flag: string, raw: string | undefined) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n <= 0)
      throw new Error(`${flag} takes a positive whole number, got '${raw}'`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') options.json = true;
    else if (arg === '--smoke') options.jobs = [100];
    else if (arg === '--jobs') options.jobs = (argv[++i] ?? '').split(',').map((n) => positive('--jobs', n));
    else if (arg === '--time-limit') options.timeLimitSeconds = positive('--time-limit', argv[++i]);
    else if (arg === '--api-latency-ms') {
      const raw = argv[++i];
      options.apiLatencyMs = Number(raw);
      if (!(options.apiLatencyMs >= 0)) throw new Error(`--api-latency-ms takes a number >= 0, got '${raw}'`);
    } else if (arg === '--trained-minutes')
      options.trainedSeconds = 60 * positive('--trained-minutes', argv[++i]);
    else
      throw new Error(
        `unknown argument '${arg}' (--json, --smoke, --jobs N,M, --time-limit S, --trained-minutes M, --api-latency-ms L)`,
      );
  }
  return options;
}

function readProgress(file: string): Progress | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Progress;
  } catch {
    return undefined; // not written yet, or caught mid-write: the next poll reads it
  }
}

const EMPTY_COUNTS: TickCounts = {
  apiReadsPerTick: 0,
  apiWritesPerTick: 0,
  apiRequestsByVerbAndResource: {},
  apiObjectsListedPerTick: 0,
  promqlQueriesPerTick: 0,
  promqlQueriesByMethod: {},
};

function runOf(progress: Progress, exceeded?: Run['exceeded']): Run {
  const p = progress.partial;
  // A first tick stopped at the limit: its partial counts are the run's.
  const stoppedFirst = exceeded?.phase === 'tick, all samples new' && progress.counts;
  const counts = stoppedFirst && progress.counts ? tickCounts(progress.counts) : undefined;
  const stoppedSecond = exceeded?.phase === 'tick, no new sample' && progress.counts;
  return {
    jobs: p.jobs ?? 0,
    pods: p.pods ?? 0,
    nodes: p.nodes ?? 0,
    queuedJobs: p.queuedJobs ?? 0,
    ...EMPTY_COUNTS,
    ...pickCounts(p),
    ...counts,
    tickSecondsNoNewSamples: p.tickSecondsNoNewSamples ?? null,
    tickSecondsAllNewSamples: p.tickSecondsAllNewSamples ?? null,
    tickCpuSecondsAllNewSamples: p.tickCpuSecondsAllNewSamples ?? null,
    ...(p.tickCpuSecondsNoNewSamples === undefined
      ? {}
      : { tickCpuSecondsNoNewSamples: p.tickCpuSecondsNoNewSamples }),
    ...(p.tickWorldSecondsAllNewSamples === undefined
      ? {}
      : { tickWorldSecondsAllNewSamples: p.tickWorldSecondsAllNewSamples }),
    ...(p.tickWorldSecondsNoNewSamples === undefined
      ? {}
      : { tickWorldSecondsNoNewSamples: p.tickWorldSecondsNoNewSamples }),
    peakRssBytes: p.peakRssBytes ?? 0,
    rssAfterBuildBytes: p.rssAfterBuildBytes ?? 0,
    buildSeconds: p.buildSeconds ?? 0,
    noNewSamples: p.noNewSamples ?? (stoppedSecond && progress.counts ? tickCounts(progress.counts) : null),
    alertRequests: p.alertRequests ?? null,
    ...(p.jobsWithNewSamplesBeforeSecondTick === undefined
      ? {}
      : { jobsWithNewSamplesBeforeSecondTick: p.jobsWithNewSamplesBeforeSecondTick }),
    ...(p.runnerMemory ? { runnerMemory: p.runnerMemory } : {}),
    ...(exceeded ? { exceeded } : {}),
  };
}

function pickCounts(p: Partial<Run>): Partial<TickCounts> {
  const out: Partial<TickCounts> = {};
  if (p.apiReadsPerTick !== undefined) out.apiReadsPerTick = p.apiReadsPerTick;
  if (p.apiWritesPerTick !== undefined) out.apiWritesPerTick = p.apiWritesPerTick;
  if (p.apiRequestsByVerbAndResource) out.apiRequestsByVerbAndResource = p.apiRequestsByVerbAndResource;
  if (p.apiObjectsListedPerTick !== undefined) out.apiObjectsListedPerTick = p.apiObjectsListedPerTick;
  if (p.promqlQueriesPerTick !== undefined) out.promqlQueriesPerTick = p.promqlQueriesPerTick;
  if (p.promqlQueriesByMethod) out.promqlQueriesByMethod = p.promqlQueriesByMethod;
  return out;
}

/** A process's peak RSS so far (Linux VmHWM), for a child stopped before it could report its own. */
function peakRssOf(pid: number | undefined): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Runs one N in a child process; stops it when a tick outlasts the limit. */
function runChild(jobs: number, options: Options, dir: string): Promise<Run> {
  const file = join(dir, `progress-${jobs}.json`);
  const child = fork(
    fileURLToPath(import.meta.url),
    ['--child', String(jobs), file, String(options.trainedSeconds), String(options.apiLatencyMs)],
    { execArgv: ['--expose-gc', '--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  return new Promise((resolve, reject) => {
    let exceeded: Run['exceeded'];
    let peakAtStop = 0;
    const poll = setInterval(() => {
      const progress = readProgress(file);
      if (!progress || progress.phase === 'building the world' || progress.phase === 'done') return;
      const seconds = (Date.now() - progress.since) / 1000;
      if (exceeded || seconds <= options.timeLimitSeconds) return;
      exceeded = {
        phase: progress.phase,
        afterSeconds: Math.round(seconds),
        note: `stopped at the ${options.timeLimitSeconds} s limit; the counts of this phase are those reached (at least)`,
      };
      log(`N=${jobs}: ${progress.phase} exceeded ${options.timeLimitSeconds} s: stopped`);
      peakAtStop = peakRssOf(child.pid);
      child.kill('SIGKILL');
    }, 1000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearInterval(poll);
      const progress = readProgress(file);
      if (!progress)
        return reject(new Error(`N=${jobs}: the child wrote no progress (exit ${code ?? signal})`));
      if (progress.phase !== 'done' && !exceeded)
        return reject(
          new Error(`N=${jobs}: the child failed in '${progress.phase}' (exit ${code ?? signal})`),
        );
      const run = runOf(progress, exceeded);
      run.peakRssBytes = Math.max(run.peakRssBytes, peakAtStop);
      resolve(run);
    });
  });
}

const MiB = 2 ** 20;
const fmt = (n: number | null, digits = 1) => (n === null ? '-' : n.toFixed(digits));

/** A phase's seconds, or `>N` where the phase was stopped at the limit after N s. */
function seconds(run: Run, phase: Phase, value: number | null): string {
  if (run.exceeded?.phase === phase) return `>${run.exceeded.afterSeconds}`;
  return fmt(value);
}

function table(runs: Run[]): string {
  const header = [
    'jobs',
    'pods',
    'API reads',
    'API writes',
    'objects listed',
    'PromQL',
    'tick s (all new)',
    'CPU s (all new)',
    'tick s (none new)',
    'of it world s',
    'reads/PromQL (none new)',
    'peak RSS MiB',
    'runner RSS est. MiB',
    'runner peak est. MiB',
    'alert API/PromQL/listed',
  ];
  const rows = runs.map((r) => [
    String(r.jobs),
    String(r.pods),
    String(r.apiReadsPerTick),
    String(r.apiWritesPerTick),
    String(r.apiObjectsListedPerTick),
    String(r.promqlQueriesPerTick),
    seconds(r, 'tick, all samples new', r.tickSecondsAllNewSamples),
    fmt(r.tickCpuSecondsAllNewSamples),
    seconds(r, 'tick, no new sample', r.tickSecondsNoNewSamples),
    fmt(r.tickWorldSecondsNoNewSamples ?? null),
    r.noNewSamples ? `${r.noNewSamples.apiReadsPerTick}/${r.noNewSamples.promqlQueriesPerTick}` : '-',
    fmt(r.peakRssBytes / MiB, 0),
    r.runnerMemory ? fmt(r.runnerMemory.runnerRssEstimateBytes / MiB, 0) : '-',
    r.runnerMemory?.runnerPeakEstimateBytes === undefined
      ? '-'
      : fmt(r.runnerMemory.runnerPeakEstimateBytes / MiB, 0),
    r.alertRequests
      ? `${r.alertRequests.apiReads + r.alertRequests.apiWrites}/${r.alertRequests.promqlQueries}/${r.alertRequests.apiObjectsListed}`
      : '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i] ?? 0)).join(' | ')} |`;
  const out = [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line), ''];
  for (const r of runs) {
    out.push(`N=${r.jobs} first tick, requests: ${JSON.stringify(r.apiRequestsByVerbAndResource)}`);
    out.push(`N=${r.jobs} first tick, PromQL by method: ${JSON.stringify(r.promqlQueriesByMethod)}`);
    if (r.alertRequests)
      out.push(
        `N=${r.jobs} alert, requests: ${JSON.stringify(r.alertRequests.apiRequestsByVerbAndResource)}`,
      );
    if (r.runnerMemory) out.push(`N=${r.jobs} runner memory: ${JSON.stringify(r.runnerMemory)}`);
    if (r.exceeded)
      out.push(
        `N=${r.jobs} EXCEEDED: ${r.exceeded.phase} after ${r.exceeded.afterSeconds} s (${r.exceeded.note})`,
      );
  }
  return out.join('\n');
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--child') {
    await runOne(Number(argv[1]), argv[2] ?? '', Number(argv[3]), Number(argv[4] ?? 0));
    return;
  }
  const options = parseOptions(argv);
  const dir = mkdtempSync(join(tmpdir(), 'bench-scale-'));
  try {
    const runs: Run[] = [];
    for (const jobs of options.jobs) {
      log(`N=${jobs}: building the world (${options.trainedSeconds / 60} simulated minutes of training)`);
      const started = Date.now();
      runs.push(await runChild(jobs, options, dir));
      log(`N=${jobs}: done in ${((Date.now() - started) / 1000).toFixed(0)} s wall`);
    }
    const latency = `API requests answered after ${options.apiLatencyMs} ms each`;
    process.stdout.write(
      options.json
        ? `${JSON.stringify({ apiLatencyMs: options.apiLatencyMs, runs })}\n`
        : `${latency}\n${table(runs)}\n`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`bench:scale: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
