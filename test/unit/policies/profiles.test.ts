import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { signatureRescaleCostOf } from '../../../lib/decisions/signature-histories.js';
import { ValidationError } from '../../../lib/errors.js';
import {
  type FinishedRun,
  type JobProfile,
  MAX_RESCALE_COSTS,
  MAX_STEP_SUMMARIES,
  mergeRunIntoProfile,
  parseProfile,
  profileSamples,
  psPerWorker,
  serializeProfile,
} from '../../../lib/policies/profiles.js';
import type { StepSample } from '../../../lib/types.js';

const GiB = 1024 ** 3;
const NOW = 1_700_000_000;

function samples(replicas: number, stepTimes: number[], extra: Partial<StepSample> = {}): StepSample[] {
  return stepTimes.map((stepTime) => ({ replicas, nodes: 1, localBatchSize: 32, stepTime, ...extra }));
}

function run(overrides: Partial<FinishedRun> = {}): FinishedRun {
  return {
    signature: 'bert-large',
    samples: [...samples(4, [1.0, 1.2, 0.9]), ...samples(8, [1.5, 1.6, 1.4, 1.7])],
    usage: [
      { pod: 'w-0', role: 'Worker', cpuMillis: 3000, memoryBytes: 10 * GiB },
      { pod: 'w-1', role: 'Worker', cpuMillis: 3500, memoryBytes: 9 * GiB },
      { pod: 'm-0', role: 'Master', cpuMillis: 500, memoryBytes: 2 * GiB },
    ],
    ...overrides,
  };
}

function expectValidation(json: string, field: string): void {
  assert.throws(
    () => parseProfile(json),
    (err: unknown) => err instanceof ValidationError && err.field === field,
    `expected a ValidationError at ${field}`,
  );
}

describe('mergeRunIntoProfile', () => {
  it('starts a profile from a first run: medians per scale, best, peaks per role', () => {
    const p = mergeRunIntoProfile(undefined, run(), NOW);
    assert.equal(p.runs, 1);
    assert.equal(p.signature, 'bert-large');
    assert.equal(p.updatedAt, NOW);
    assert.deepEqual(
      p.steps.map((s) => [s.replicas, s.stepTime, s.samples]),
      [
        [4, 1.0, 3], // odd count: the middle value
        [8, 1.55, 4], // even count: mean of the two middle values
      ],
    );
    // 8 x 32 / 1.55 = 165 samples/s beats 4 x 32 / 1.0 = 128.
    assert.equal(p.best?.replicas, 8);
    assert.ok(Math.abs((p.best?.throughput ?? 0) - (8 * 32) / 1.55) < 1e-9);
    assert.deepEqual(p.peaks.Worker, { cpuMillis: 3500, memoryBytes: 10 * GiB });
    assert.deepEqual(p.peaks.Master, { cpuMillis: 500, memoryBytes: 2 * GiB });
  });

  it('folds a later run in: runs counted, same scale combined by weight, peaks only rise, best kept if higher', () => {
    const first = mergeRunIntoProfile(undefined, run(), NOW);
    const second = mergeRunIntoProfile(
      first,
      run({
        samples: samples(4, [2.0]), // slower than before
        usage: [{ pod: 'w-0', role: 'Worker', cpuMillis: 5000, memoryBytes: 4 * GiB }],
      }),
      NOW + 100,
    );
    assert.equal(second.runs, 2);
    assert.equal(second.updatedAt, NOW + 100);
    const four = second.steps.find((s) => s.replicas === 4);
    assert.equal(four?.samples, 4);
    assert.equal(four?.stepTime, (1.0 * 3 + 2.0 * 1) / 4);
    assert.equal(four?.lastSeenAt, NOW + 100);
    assert.equal(second.steps.find((s) => s.replicas === 8)?.lastSeenAt, NOW);
    assert.deepEqual(second.peaks.Worker, { cpuMillis: 5000, memoryBytes: 10 * GiB });
    assert.equal(second.best?.replicas, 8);
    // The input profile is not mutated.
    assert.equal(first.runs, 1);
    assert.equal(first.steps.find((s) => s.replicas === 4)?.stepTime, 1.0);
  });

  it('replaces the best when a run beats it', () => {
    const first = mergeRunIntoProfile(undefined, run(), NOW);
    const faster = mergeRunIntoProfile(first, run({ samples: samples(6, [0.8], { ps: 3 }) }), NOW + 1);
    assert.deepEqual(faster.best, { replicas: 6, ps: 3, localBatchSize: 32, throughput: (6 * 32) / 0.8 });
    assert.equal(psPerWorker(faster), 0.5);
    assert.equal(psPerWorker(first), undefined);
  });

  it('ignores samples that say nothing about a scale', () => {
    const p = mergeRunIntoProfile(
      undefined,
      run({
        samples: [
          ...samples(4, [1.0]),
          ...samples(4, [0, -1, Number.NaN, Number.POSITIVE_INFINITY]),
          ...samples(0, [1.0]),
          ...samples(2, [1.0], { localBatchSize: 0 }),
        ],
      }),
      NOW,
    );
    assert.deepEqual(
      p.steps.map((s) => [s.replicas, s.samples]),
      [[4, 1]],
    );
  });

  it('refuses to merge a run of another signature', () => {
    const p = mergeRunIntoProfile(undefined, run(), NOW);
    assert.throws(
      () => mergeRunIntoProfile(p, run({ signature: 'gpt' }), NOW),
      (err: unknown) => err instanceof ValidationError && err.field === '/signature',
    );
  });

  it(`keeps at most ${MAX_STEP_SUMMARIES} summaries, dropping the stalest but never a scale's last one`, () => {
    // Scale 1 is the oldest entry but the only one with 1 replica; layouts of scale 2 are the duplicates.
    let p = mergeRunIntoProfile(undefined, run({ samples: samples(1, [1]) }), NOW);
    for (let i = 0; i < 24; i++) {
      p = mergeRunIntoProfile(p, run({ samples: samples(2, [1], { nodes: i + 1 }) }), NOW + 1 + i);
    }
    assert.equal(p.steps.length, MAX_STEP_SUMMARIES);
    assert.ok(p.steps.some((s) => s.replicas === 1));
    const layouts = p.steps.filter((s) => s.replicas === 2).map((s) => s.nodes);
    // 24 layouts of scale 2, 19 kept: the 5 oldest (nodes 1..5) are gone.
    assert.deepEqual(
      layouts,
      Array.from({ length: 19 }, (_, i) => i + 6),
    );
  });

  it('drops the stalest distinct scale once every scale has a single entry', () => {
    let p: JobProfile | undefined;
    for (let r = 1; r <= MAX_STEP_SUMMARIES + 1; r++) {
      p = mergeRunIntoProfile(p, run({ samples: samples(r, [1]) }), NOW + r);
    }
    assert.ok(p);
    assert.equal(p.steps.length, MAX_STEP_SUMMARIES);
    assert.equal(p.steps[0]?.replicas, 2);
  });
});

describe('sync times in profiles', () => {
  const timed = (replicas: number, pairs: Array<[number, number]>): StepSample[] =>
    pairs.map(([stepTime, syncTime]) => ({ replicas, nodes: 1, localBatchSize: 32, stepTime, syncTime }));

  it('keeps the median sync of a scale whose every sample measured it, and none otherwise', () => {
    const profile = mergeRunIntoProfile(
      undefined,
      run({
        samples: [
          ...timed(4, [
            [1.0, 0.2],
            [1.2, 0.4],
            [0.9, 0.3],
          ]),
          ...timed(8, [[1.5, 0.5]]),
          ...samples(8, [1.6]),
        ],
      }),
      NOW,
    );
    const [four, eight] = profile.steps;
    assert.equal(four?.syncTime, 0.3);
    assert.equal(eight?.replicas, 8);
    assert.equal(eight?.syncTime, undefined);
    assert.deepEqual(
      profileSamples(profile).map((s) => s.syncTime),
      [0.3, undefined],
    );
  });

  it('combines sync by weight over the runs that measured it', () => {
    const first = mergeRunIntoProfile(undefined, run({ samples: timed(4, [[1.0, 0.2]]) }), NOW);
    const both = mergeRunIntoProfile(first, run({ samples: timed(4, [[2.0, 0.6]]) }), NOW + 1);
    assert.equal(both.steps[0]?.stepTime, 1.5);
    assert.ok(Math.abs((both.steps[0]?.syncTime ?? 0) - 0.4) < 1e-12);
    // A later run without sync keeps the one measured; a summary written without sync gains it.
    const untimedLater = mergeRunIntoProfile(first, run({ samples: samples(4, [2.0]) }), NOW + 1);
    assert.equal(untimedLater.steps[0]?.syncTime, 0.2);
    const untimedFirst = mergeRunIntoProfile(undefined, run({ samples: samples(4, [2.0, 2.0]) }), NOW);
    const timedLater = mergeRunIntoProfile(untimedFirst, run({ samples: timed(4, [[1.0, 0.3]]) }), NOW + 1);
    assert.equal(timedLater.steps[0]?.syncTime, 0.3);
    assert.equal(
      mergeRunIntoProfile(untimedFirst, run({ samples: samples(4, [1]) }), NOW).steps[0]?.syncTime,
      undefined,
    );
  });

  it('round-trips, and refuses a sync longer than its step', () => {
    const profile = mergeRunIntoProfile(undefined, run({ samples: timed(4, [[1.0, 0.25]]) }), NOW);
    assert.deepEqual(parseProfile(serializeProfile(profile)), profile);
    const o = JSON.parse(serializeProfile(profile));
    o.steps[0].syncTime = 1.5;
    expectValidation(JSON.stringify(o), '/steps/0/syncTime');
    o.steps[0].syncTime = -0.1;
    expectValidation(JSON.stringify(o), '/steps/0/syncTime');
  });
});

describe('serializeProfile / parseProfile', () => {
  const profile = mergeRunIntoProfile(
    undefined,
    run({ samples: [...samples(4, [1.0], { ps: 2 }), ...samples(8, [1.5])] }),
    NOW,
  );

  it('round-trips', () => {
    assert.deepEqual(parseProfile(serializeProfile(profile)), profile);
  });

  it('serialises deterministically whatever the order of steps and keys', () => {
    const shuffled: JobProfile = {
      updatedAt: profile.updatedAt,
      steps: [...profile.steps].reverse(),
      peaks: { Master: profile.peaks.Master, Worker: profile.peaks.Worker },
      runs: profile.runs,
      signature: profile.signature,
      version: profile.version,
      ...(profile.best ? { best: profile.best } : {}),
    };
    assert.equal(serializeProfile(shuffled), serializeProfile(profile));
  });

  it('turns summaries into step samples for a fit', () => {
    assert.deepEqual(profileSamples(profile), [
      { replicas: 4, nodes: 1, ps: 2, localBatchSize: 32, stepTime: 1.0, at: NOW },
      { replicas: 8, nodes: 1, localBatchSize: 32, stepTime: 1.5, at: NOW },
    ]);
  });

  const valid = (): Record<string, unknown> => JSON.parse(serializeProfile(profile));
  const withField = (mutate: (o: Record<string, unknown>) => void): string => {
    const o = valid();
    mutate(o);
    return JSON.stringify(o);
  };

  it('names the field that is wrong', () => {
    expectValidation('{not json', '');
    expectValidation('[]', '');
    expectValidation(
      withField((o) => {
        o.version = 2;
      }),
      '/version',
    );
    expectValidation(
      withField((o) => {
        o.signature = '';
      }),
      '/signature',
    );
    expectValidation(
      withField((o) => {
        delete o.runs;
      }),
      '/runs',
    );
    expectValidation(
      withField((o) => {
        o.runs = 1.5;
      }),
      '/runs',
    );
    expectValidation(
      withField((o) => {
        (o.steps as Record<string, unknown>[])[1] = {
          ...(o.steps as Record<string, unknown>[])[1],
          stepTime: 0,
        };
      }),
      '/steps/1/stepTime',
    );
    expectValidation(
      withField((o) => {
        o.steps = 'many';
      }),
      '/steps',
    );
    expectValidation(
      withField((o) => {
        o.peaks = { Worker: { cpuMillis: -1, memoryBytes: 1 } };
      }),
      '/peaks/Worker/cpuMillis',
    );
    expectValidation(
      withField((o) => {
        o.peaks = { Driver: { cpuMillis: 1, memoryBytes: 1 } };
      }),
      '/peaks/Driver',
    );
    expectValidation(
      withField((o) => {
        o.best = { replicas: 4, localBatchSize: 32, throughput: 'fast' };
      }),
      '/best/throughput',
    );
  });

  it(`rejects more than ${MAX_STEP_SUMMARIES} summaries`, () => {
    const steps = Array.from({ length: MAX_STEP_SUMMARIES + 1 }, (_, i) => ({
      replicas: i + 1,
      nodes: 1,
      localBatchSize: 32,
      stepTime: 1,
      samples: 1,
      lastSeenAt: NOW,
    }));
    expectValidation(
      withField((o) => {
        o.steps = steps;
      }),
      '/steps',
    );
    const atCap = withField((o) => {
      o.steps = steps.slice(0, MAX_STEP_SUMMARIES);
    });
    assert.equal(parseProfile(atCap).steps.length, MAX_STEP_SUMMARIES);
  });
});

describe('measured rescale pauses in profiles', () => {
  const withCosts = (costs: FinishedRun['rescaleCost'][]) =>
    costs.reduce<JobProfile | undefined>(
      (profile, rescaleCost) => mergeRunIntoProfile(profile, run(rescaleCost ? { rescaleCost } : {}), NOW),
      undefined,
    );

  it(`keeps each run's measured pauses, oldest first, the last ${MAX_RESCALE_COSTS} per direction`, () => {
    assert.deepEqual(withCosts([{ up: 4 }, undefined, { up: 5, down: 9 }])?.rescaleCosts, {
      up: [4, 5],
      down: [9],
    });
    const many = withCosts([1, 2, 3, 4, 5, 6, 7].map((up) => ({ up })));
    assert.deepEqual(many?.rescaleCosts?.up, [3, 4, 5, 6, 7]);
    // None measured: no field, and the profile serialises as before the field existed.
    const none = withCosts([undefined, {}]);
    assert.equal(none?.rescaleCosts, undefined);
    assert.doesNotMatch(serializeProfile(none as JobProfile), /rescaleCosts/);
    assert.equal(withCosts([{ up: -1, down: Number.NaN }])?.rescaleCosts, undefined);
  });

  it('round-trips, and refuses what is no list of seconds or too long', () => {
    const profile = withCosts([{ up: 4, down: 9 }]) as JobProfile;
    assert.deepEqual(parseProfile(serializeProfile(profile)), profile);
    const json = (rescaleCosts: unknown) =>
      JSON.stringify({ ...JSON.parse(serializeProfile(profile)), rescaleCosts });
    expectValidation(json([]), '/rescaleCosts');
    expectValidation(json({ up: 3, down: [] }), '/rescaleCosts/up');
    expectValidation(json({ up: [], down: [1, -2] }), '/rescaleCosts/down/1');
    expectValidation(json({ up: ['3'], down: [] }), '/rescaleCosts/up/0');
    expectValidation(json({ up: [1, 2, 3, 4, 5, 6], down: [] }), '/rescaleCosts/up');
    assert.deepEqual(parseProfile(json({ up: [1, 2, 3, 4, 5], down: [] })).rescaleCosts?.up, [1, 2, 3, 4, 5]);
  });

  it('the next run is charged the median of the kept pauses, per direction', () => {
    assert.deepEqual(signatureRescaleCostOf(withCosts([{ up: 40 }, { up: 50, down: 9 }, { up: 45 }])), {
      up: 45,
      upRuns: 3,
      down: 9,
      downRuns: 1,
    });
    assert.deepEqual(signatureRescaleCostOf(withCosts([{ up: 40 }, { up: 50 }])), { up: 45, upRuns: 2 });
    assert.equal(signatureRescaleCostOf(withCosts([undefined])), undefined);
    assert.equal(signatureRescaleCostOf(undefined), undefined);
  });
});
