// observeJobs and the batched rescale measurement give each job what its per-job reads give it (observeJob,
// measureLastRescale), from a source's batch reads: a job the batch answer lacks is MissingMetricsError (no
// observations, as without series), a failed read is that job's error only, and the per-job reads are not
// asked again for the jobs the batch covered.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { measureLastRescale, withBatchedRescaleReads } from '../../../lib/decisions/rescale-measurement.js';
import { observeJob, observeJobs } from '../../../lib/decisions/runtime-review.js';
import { ApiError, MissingMetricsError } from '../../../lib/errors.js';
import { jobKey, readEach } from '../../../lib/metrics/job-readings.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import type { JobAutoscalerState, JobRef } from '../../../lib/types.js';

const NOW = 1_800_000_000;
const ref = (name: string): JobRef => ({ kind: 'PyTorchJob', namespace: 'team-a', name });
const FULL = ref('full');
const NO_STEPS = ref('no-steps');
const USAGE_FAILS = ref('usage-fails');
const NO_USAGE = ref('no-usage');
const JOBS = [FULL, NO_STEPS, USAGE_FAILS, NO_USAGE];

/** Per-job reads with one behaviour per job, and the calls made to them. */
function perJobSource(calls: string[]): MetricsSource {
  const call = (what: string, r: JobRef) => calls.push(`${what} ${r.name}`);
  return {
    stepSamples: async (r) => {
      call('stepSamples', r);
      if (r === NO_STEPS) throw new MissingMetricsError(`no step samples for ${r.name}`);
      return [{ replicas: 2, nodes: 1, localBatchSize: 32, stepTime: 0.5, at: NOW - 60 }];
    },
    containerUsage: async (r) => {
      call('containerUsage', r);
      if (r === USAGE_FAILS) throw new ApiError('Prometheus CPU usage query', 503, 'unavailable');
      if (r === NO_USAGE) throw new MissingMetricsError(`no usage for ${r.name}`);
      return [{ pod: `${r.name}-worker-0`, role: 'Worker', cpuMillis: 500, memoryBytes: 1024 }];
    },
    workerStepTimes: async (r) => {
      call('workerStepTimes', r);
      return [{ worker: 0, pod: `${r.name}-worker-0`, samples: [{ at: NOW - 60, stepTime: 0.5 }] }];
    },
    samplesProcessed: async (r) => {
      call('samplesProcessed', r);
      return r === NO_USAGE ? undefined : 1000;
    },
    firstStepAfterPause: async (r, since) => {
      call('firstStepAfterPause', r);
      if (r === USAGE_FAILS) throw new ApiError('Prometheus rescale pause query', 503, 'unavailable');
      return r === NO_STEPS ? undefined : since + 40;
    },
    pauseEndedAfter: async (r) => {
      call('pauseEndedAfter', r);
      return 12;
    },
  };
}

/** The same source with batch reads made of its per-job ones, minus the jobs in `dropped`. */
function batchSource(calls: string[], dropped: readonly JobRef[] = []): MetricsSource {
  const own = perJobSource(calls);
  const kept = (refs: readonly JobRef[]) => refs.filter((r) => !dropped.includes(r));
  return {
    ...own,
    stepSamplesOfJobs: (refs, w) => readEach(kept(refs), (r) => own.stepSamples(r, w)),
    containerUsageOfJobs: (refs, w) => readEach(kept(refs), (r) => own.containerUsage(r, w)),
    workerStepTimesOfJobs: (refs, w) => readEach(kept(refs), (r) => own.workerStepTimes(r, w)),
    samplesProcessedOfJobs: (refs) => readEach(kept(refs), (r) => own.samplesProcessed(r)),
    firstStepAfterPauseOfJobs: (asks) =>
      readEach(asks, (a) => own.firstStepAfterPause?.(a.ref, a.since) ?? Promise.resolve(undefined)),
    pauseEndedAfterOfJobs: (asks) =>
      readEach(asks, (a) => own.pauseEndedAfter?.(a.ref, a.since) ?? Promise.resolve(undefined)),
  };
}

const outcome = async <T>(read: () => Promise<T>) => {
  try {
    return { value: await read() };
  } catch (error) {
    return { error: String(error) };
  }
};

describe('observeJobs', () => {
  it("gives each job observeJob's answer: observations, MissingMetricsError, or its own error", async () => {
    const batched = await observeJobs(batchSource([]), JOBS);
    for (const r of JOBS) {
      const entry = batched.get(jobKey(r));
      const shown = entry?.ok ? { value: entry.value } : { error: String(entry?.error) };
      assert.deepEqual(shown, await outcome(() => observeJob(perJobSource([]), r)), r.name);
    }
    const noUsage = batched.get(jobKey(NO_USAGE));
    assert.ok(noUsage?.ok && noUsage.value.usage === undefined, 'missing usage is no usage data');
    const failed = batched.get(jobKey(USAGE_FAILS));
    assert.ok(failed && !failed.ok && failed.error instanceof ApiError, "the failed read is the job's error");
  });

  it('makes a job the batch answer lacks MissingMetricsError, not observations without samples', async () => {
    const batched = await observeJobs(batchSource([], [FULL]), JOBS);
    const lacking = batched.get(jobKey(FULL));
    assert.ok(lacking && !lacking.ok && lacking.error instanceof MissingMetricsError, String(lacking));
    assert.match(String(lacking.error), /no step samples for team-a\/full/);
  });

  it('reads job by job through a source without batch reads', async () => {
    const calls: string[] = [];
    const batched = await observeJobs(perJobSource(calls), [FULL, FULL]);
    assert.equal(batched.size, 1);
    assert.equal(calls.filter((c) => c === 'stepSamples full').length, 1, 'each job read once');
  });
});

describe('withBatchedRescaleReads', () => {
  const stateOf = (at: number, from: number, to: number): JobAutoscalerState => ({
    oomCount: 0,
    paused: false,
    lastRescale: { at, from, to },
  });
  const views = [
    { ref: FULL, state: stateOf(NOW - 300, 2, 4) }, // grew: first step and pause
    { ref: NO_STEPS, state: stateOf(NOW - 300, 4, 2) }, // shrank, not resumed yet
    { ref: USAGE_FAILS, state: stateOf(NOW - 300, 2, 4) }, // its read fails: state unchanged
    { ref: NO_USAGE, state: { oomCount: 0, paused: false } }, // nothing to measure
  ];

  it("gives each job measureLastRescale's answer, with no per-job read for the jobs it covered", async () => {
    const calls: string[] = [];
    const source = await withBatchedRescaleReads(batchSource(calls), views);
    const batchCalls = calls.length;
    for (const view of views)
      assert.deepEqual(
        await measureLastRescale(source, view),
        await measureLastRescale(perJobSource([]), view),
        view.ref.name,
      );
    assert.deepEqual(calls.slice(batchCalls), [], 'answered from the batch');
    assert.deepEqual(
      calls.sort(),
      [
        'firstStepAfterPause full',
        'firstStepAfterPause no-steps',
        'firstStepAfterPause usage-fails',
        'pauseEndedAfter full',
      ],
      'one first step per job awaiting a measurement, one pause per growth seen to resume',
    );
    const full = await measureLastRescale(
      source,
      views[0] ?? { ref: FULL, state: { oomCount: 0, paused: false } },
    );
    assert.deepEqual(full.rescaleCost, { measuredFor: NOW - 300, upToFirstStep: 40, upPause: 12 });
  });

  it('reads on its own a rescale the batch did not read (the job rescaled since)', async () => {
    const calls: string[] = [];
    const source = await withBatchedRescaleReads(batchSource(calls), views);
    calls.length = 0;
    const later = { ref: FULL, state: stateOf(NOW - 100, 4, 6) };
    assert.deepEqual(
      await measureLastRescale(source, later),
      await measureLastRescale(perJobSource([]), later),
    );
    assert.deepEqual(calls, ['firstStepAfterPause full', 'pauseEndedAfter full']);
  });
});
