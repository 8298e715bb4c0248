// `npm run bench:fits`: the CPU of fitting N jobs' runtime models in one tick, from scratch and through the
// FitCache (no new sample since the last tick; one new sample for every job), as ratios against the
// from-scratch fit in the same process; and the fit as it was before placement grouping (one least-squares
// row per sample), on a few jobs, per job. Also the heap a kept fit takes.
//
//   npm run bench:fits                           1,000 jobs, 360 samples each (6 h at one a minute)
//   npm run bench:fits -- --jobs 200 --samples 120 --reference-jobs 5
//
// Two kinds of sample: without syncTime (what Prometheus gives: the joint fit with its overlap search, the
// costly one) and with it (the simulator's samples: compute and sync fitted apart).

import { fitThroughputModel } from '../../lib/model/fit.js';
import { FitCache } from '../../lib/model/fit-cache.js';
import { fitRuntimeModel } from '../../lib/model/observed-bound.js';
import type { JobRef, StepSample } from '../../lib/types.js';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!(Number.isInteger(value) && value > 0)) throw new Error(`${name} must be a positive whole number`);
  return value;
}

const JOBS = option('--jobs', 1_000);
const SAMPLES = option('--samples', 360);
const REFERENCE_JOBS = option('--reference-jobs', 10);

/** Deterministic pseudo-random numbers in [0, 1). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Job {
  owner: { ref: JobRef; uid: string };
  sample: (i: number) => StepSample;
}

/** A job that has run at one to four placements (it was rescaled), one sample a minute, +-3% noise. */
function job(index: number, withSync: boolean): Job {
  const rand = lcg(index * 7919 + (withSync ? 1 : 0));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const batch = pick([16, 32, 64, 128]);
  const placements = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => {
    const replicas = pick([1, 2, 4, 6, 8, 12, 16]);
    return { replicas, nodes: Math.min(replicas, pick([1, 1, 2, 3, 4])), localBatchSize: batch };
  });
  const compute = 0.1 + 0.4 * rand();
  const sync = 0.2 * rand();
  return {
    owner: {
      ref: { kind: 'PyTorchJob', namespace: `team-${index % 20}`, name: `job-${index}` },
      uid: `uid-${index}`,
    },
    sample: (i) => {
      const p = placements[Math.min(placements.length - 1, Math.floor((i / SAMPLES) * placements.length))];
      const place = p ?? { replicas: 1, nodes: 1, localBatchSize: batch };
      const syncTime = place.replicas > 1 ? sync * Math.log2(place.replicas) * (place.nodes > 1 ? 2 : 1) : 0;
      const stepTime = (compute + syncTime) * (1 + 0.06 * (rand() - 0.5));
      const s: StepSample = { ...place, stepTime, at: 60 * i };
      if (withSync) s.syncTime = Math.min(stepTime, syncTime);
      return s;
    },
  };
}

/** CPU seconds (user + system) and wall seconds of `work`. */
function measure(work: () => void): { cpu: number; wall: number } {
  const cpu = process.cpuUsage();
  const wall = performance.now();
  work();
  const used = process.cpuUsage(cpu);
  return { cpu: (used.user + used.system) / 1e6, wall: (performance.now() - wall) / 1000 };
}

const gc = (globalThis as { gc?: () => void }).gc;

function run(withSync: boolean): void {
  const jobs = Array.from({ length: JOBS }, (_, i) => job(i, withSync));
  // The window of the last tick, and of this one: one sample more, the oldest gone.
  const last = jobs.map((j) => Array.from({ length: SAMPLES }, (_, i) => j.sample(i)));
  const now = last.map((samples, k) => [...samples.slice(1), (jobs[k] as Job).sample(SAMPLES)]);
  const copies = last.map((samples) => samples.map((s) => ({ ...s })));

  const fitAll = (cache: FitCache, windows: StepSample[][]) => () => {
    jobs.forEach((j, k) => {
      cache.fit(j.owner, windows[k] as StepSample[]);
    });
  };
  // Compiled and warmed up before anything is timed.
  for (const samples of now.slice(0, 20)) fitRuntimeModel(samples);
  const cold = measure(() => {
    for (const samples of now) fitRuntimeModel(samples);
  });
  const cache = new FitCache({ maxEntries: 2 * JOBS });
  gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const prime = measure(fitAll(cache, last));
  gc?.();
  const bytesPerEntry = (process.memoryUsage().heapUsed - heapBefore) / JOBS;
  // Next tick, nothing new (the samples read afresh: equal, not the same arrays).
  const unchanged = measure(fitAll(cache, copies));
  // Next tick, one new sample for every job.
  const added = measure(fitAll(cache, now));
  const reference = measure(() => {
    for (const samples of now.slice(0, REFERENCE_JOBS))
      fitThroughputModel([...samples], { groupSamples: false });
  });
  const perJob = (cpu: number, n = JOBS) => `${((1000 * cpu) / n).toFixed(3)} ms/job`;
  const ratio = (cpu: number) => `${(cpu / cold.cpu).toFixed(4)}x cold`;
  const kind = withSync ? 'with syncTime (simulator)' : 'without syncTime (Prometheus)';
  console.log(`\n${JOBS} jobs x ${SAMPLES} samples, ${kind}; CPU s (wall s)`);
  const row = (label: string, m: { cpu: number; wall: number }, extra: string) =>
    console.log(
      `  ${label.padEnd(34)} ${m.cpu.toFixed(3).padStart(9)} (${m.wall.toFixed(3)})  ${perJob(m.cpu).padStart(16)}  ${extra}`,
    );
  row('cold, no cache', cold, '1x cold');
  row('cache, first tick (all cold)', prime, ratio(prime.cpu));
  row('cache, no new samples', unchanged, ratio(unchanged.cpu));
  row('cache, one new sample per job', added, ratio(added.cpu));
  const refPerJob = reference.cpu / Math.min(REFERENCE_JOBS, JOBS);
  console.log(
    `  ${'per-sample rows (before grouping)'.padEnd(34)} ${perJob(reference.cpu, Math.min(REFERENCE_JOBS, JOBS)).padStart(28)}  ` +
      `${(refPerJob / (cold.cpu / JOBS)).toFixed(1)}x cold (on ${Math.min(REFERENCE_JOBS, JOBS)} jobs)`,
  );
  console.log(`  cache stats ${JSON.stringify(cache.stats)}`);
  if (gc)
    console.log(
      `  heap per kept fit ${Math.round(bytesPerEntry)} B: ${((bytesPerEntry * 10_000) / 2 ** 20).toFixed(0)} MiB for 10,000 jobs`,
    );
  else console.log('  heap per kept fit: run with node --expose-gc (npm run bench:fits does)');
}

run(false);
run(true);
