import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { APP_NAMES, APP_PROFILES, type AppName, groundTruthStepTime } from '../../../lib/sim/app-profiles.js';
import { loadPlacements, polluxAvailable } from '../../support/pollux-data.js';

const noData = !polluxAvailable() && 'Pollux data (../shared/data/pollux) not present';

/** A handful of measured rows per application: 1 GPU, one full node, two and four nodes. */
const ROWS: Record<AppName, [placement: string, localBatch: number][]> = {
  bert: [
    ['1', 8],
    ['4', 8],
    ['44', 8],
    ['4444', 12],
  ],
  cifar10: [
    ['1', 182],
    ['4', 1024],
    ['44', 182],
    ['2222', 182],
  ],
  deepspeech2: [
    ['1', 28],
    ['44', 28],
    ['444', 28],
    ['4444', 28],
  ],
  imagenet: [
    ['1', 81],
    ['4', 81],
    ['44', 81],
    ['4444', 81],
  ],
  ncf: [
    ['1', 32768],
    ['4', 32],
    ['2222', 1025],
    ['4444', 1025],
  ],
  yolov3: [
    ['1', 16],
    ['4', 8],
    ['44', 8],
    ['4444', 8],
  ],
};

describe('groundTruthStepTime against the Pollux measurements', { skip: noData }, () => {
  for (const app of APP_NAMES) {
    it(`${app}: within 15% of a handful of measured rows`, () => {
      const rows = loadPlacements(app);
      for (const [placement, m] of ROWS[app]) {
        const row = rows.find((r) => r.placement === placement && r.localBatchSize === m);
        assert.ok(row, `${app} has no row ${placement} @ ${m}`);
        const predicted = groundTruthStepTime(app, row);
        const err = Math.abs(predicted - row.stepTime) / row.stepTime;
        assert.ok(err <= 0.15, `${app} ${placement}@${m}: ${predicted} vs measured ${row.stepTime}`);
      }
    });

    it(`${app}: median error over all rows within 10%`, () => {
      const errors = loadPlacements(app)
        .map((r) => Math.abs(groundTruthStepTime(app, r) - r.stepTime) / r.stepTime)
        .sort((a, b) => a - b);
      const median = errors[Math.floor(errors.length / 2)] ?? Number.NaN;
      assert.ok(median <= 0.1, `${app}: median error ${median}`);
    });
  }
});

describe('APP_PROFILES', () => {
  it('has the six applications with the estimated resource needs', () => {
    assert.deepEqual(Object.keys(APP_PROFILES).sort(), [...APP_NAMES].sort());
    const GiB = 1024 ** 3;
    assert.equal(APP_PROFILES.bert.memoryBytes, 10 * GiB);
    assert.equal(APP_PROFILES.ncf.memoryBytes, 2 * GiB);
    for (const app of APP_NAMES) {
      const p = APP_PROFILES[app];
      assert.equal(p.name, app);
      assert.ok(p.cpuMillis >= 1000 && p.cpuMillis <= 8000);
      assert.ok(p.defaultLocalBatchSize > 0 && p.defaultLocalBatchSize <= p.maxLocalBatchSize);
    }
  });

  for (const app of APP_NAMES) {
    it(`${app}: the demo job takes 20-60 simulated minutes on its manual configuration`, () => {
      const p = APP_PROFILES[app];
      const K = p.manual.replicas;
      const m = p.manual.localBatchSize;
      const step = groundTruthStepTime(app, { replicas: K, nodes: Math.ceil(K / 4), localBatchSize: m });
      const minutes = p.demoTargetSamples / ((K * m) / step) / 60;
      assert.ok(minutes >= 20 && minutes <= 60, `${app}: ${minutes.toFixed(1)} min`);
    });

    it(`${app}: more replicas on one node give more (but sublinear) throughput`, () => {
      const m = APP_PROFILES[app].defaultLocalBatchSize;
      const thr = (K: number, N: number) =>
        (K * m) / groundTruthStepTime(app, { replicas: K, nodes: N, localBatchSize: m });
      assert.ok(thr(2, 1) > thr(1, 1) && thr(4, 1) > thr(2, 1), `${app}: throughput must grow on a node`);
      assert.ok(thr(4, 1) < 4 * thr(1, 1), `${app}: scaling must be sublinear`);
      assert.ok(thr(8, 2) < 8 * thr(1, 1), `${app}: scaling across nodes must be sublinear`);
    });
  }

  it('rejects invalid placements', () => {
    assert.throws(
      () => groundTruthStepTime('bert', { replicas: 0, nodes: 1, localBatchSize: 8 }),
      /invalid placement/,
    );
    assert.throws(
      () => groundTruthStepTime('bert', { replicas: 1, nodes: 1, localBatchSize: 0 }),
      /invalid placement/,
    );
  });
});
