import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import {
  defaultHpaSpec,
  EMPTY_HPA_STATE,
  freeGpus,
  gpuUtilisation,
  type HpaState,
  hpaRecommendation,
  recordScaleEvent,
} from '../../../lib/sim/baselines/threshold.js';

const SPEC = defaultHpaSpec(1, 64);

/** One sync with the default HPA (target 0.8) and an empty history. */
function once(current: number, utilisation: number, spec = SPEC) {
  return hpaRecommendation({ spec, currentReplicas: current, utilisation, now: 1000 }, EMPTY_HPA_STATE);
}

describe('hpaRecommendation (the emulated HPA of the threshold baseline)', () => {
  it('scales to ceil(current x utilisation / target) outside the 0.1 tolerance, and not inside it', () => {
    // 0.87 / 0.8 = 1.0875: inside the tolerance, no change.
    assert.equal(once(10, 0.87).replicas, 10);
    assert.equal(once(10, 0.87).metricReplicas, 10);
    // 0.89 / 0.8 = 1.1125: outside, ceil(10 x 1.1125) = ceil(11.125) = 12.
    assert.equal(once(10, 0.89).replicas, 12);
    // 0.73 / 0.8 = 0.9125: inside, no change.
    assert.equal(once(10, 0.73).replicas, 10);
    // 0.71 / 0.8 = 0.8875: outside, ceil(8.875) = 9; no history, so the scale-down is immediate.
    assert.equal(once(10, 0.71).replicas, 9);
    // A busy single worker: ceil(1 x 1.25) = 2.
    assert.equal(once(1, 1).replicas, 2);
  });

  it('caps a scale-up at max(+4 pods, +100 %) per 15 s period, counting writes already made in the period', () => {
    // Target 0.2 and full utilisation ask for 5x, more than the default policies allow.
    const eager = defaultHpaSpec(1, 1000, 0.2);
    assert.equal(once(2, 1, eager).metricReplicas, 10);
    assert.equal(once(2, 1, eager).replicas, 6, 'max(2 + 4, 2 x 2) = 6');
    assert.equal(once(10, 1, eager).replicas, 20, 'max(10 + 4, 2 x 10) = 20');
    // 2 -> 6 written at t=995: at t=1000 the 15 s period started at 2 replicas, so 6 is already the limit.
    const afterWrite = recordScaleEvent(EMPTY_HPA_STATE, 995, 2, 6);
    const soon = hpaRecommendation(
      { spec: eager, currentReplicas: 6, utilisation: 1, now: 1000 },
      afterWrite,
    );
    assert.equal(soon.replicas, 6);
    assert.match(soon.reason, /capped by the scale-up policy/);
    // 60 s later (the baseline's interval) the write is outside every 15 s period: max(6 + 4, 12) = 12.
    const later = hpaRecommendation(
      { spec: eager, currentReplicas: 6, utilisation: 1, now: 1055 },
      afterWrite,
    );
    assert.equal(later.replicas, 12);
  });

  it('keeps the highest recommendation of the last 300 s before scaling down', () => {
    let state: HpaState = EMPTY_HPA_STATE;
    let current = 8;
    const sync = (now: number, utilisation: number) => {
      const rec = hpaRecommendation({ spec: SPEC, currentReplicas: current, utilisation, now }, state);
      state = recordScaleEvent(rec.state, now, current, rec.replicas);
      current = rec.replicas;
      return rec;
    };
    assert.equal(sync(0, 0.8).replicas, 8); // on target: recommendation 8
    assert.equal(sync(60, 0.4).metricReplicas, 4); // the metric asks 4 ...
    assert.equal(current, 8); // ... but 8 (t=0) is in the window
    assert.equal(sync(120, 0.6).replicas, 8); // metric 6
    assert.equal(sync(180, 0.4).replicas, 8);
    assert.equal(sync(240, 0.4).replicas, 8);
    // t=300: the 8 of t=0 has left the window (it keeps recommendations newer than now - 300 s); the
    // highest left is the 6 of t=120.
    const at300 = sync(300, 0.4);
    assert.equal(at300.replicas, 6);
    assert.match(at300.reason, /metric asks 4, the stabilisation window keeps 6, 8 -> 6/);
    // The window (after t=60) holds the 6 of t=120, the 4s of t=180..300 and 3 (now, ceil(6 x 0.5)): 6 ...
    assert.equal(sync(360, 0.4).replicas, 6);
    // ... until t=420, when the 6 of t=120 has left it: the highest is the 4 of t=180.
    assert.equal(sync(420, 0.4).replicas, 4);
  });

  it('scales up at once: no stabilisation window for scale-up', () => {
    const state = hpaRecommendation(
      { spec: SPEC, currentReplicas: 4, utilisation: 0.4, now: 0 },
      EMPTY_HPA_STATE,
    ).state;
    // A low recommendation 60 s ago does not hold back a scale-up now.
    const up = hpaRecommendation({ spec: SPEC, currentReplicas: 4, utilisation: 1, now: 60 }, state);
    assert.equal(up.replicas, 5);
  });

  it('stays within minReplicas and maxReplicas', () => {
    const bounded = defaultHpaSpec(2, 11);
    // Metric: ceil(10 x 1.25) = 13 > 11.
    const up = once(10, 1, bounded);
    assert.equal(up.replicas, 11);
    assert.match(up.reason, /capped at maxReplicas/);
    // Metric: ceil(4 x 0.1 / 0.8) = 1 < 2.
    const down = once(4, 0.1, bounded);
    assert.equal(down.replicas, 2);
    assert.match(down.reason, /held at minReplicas/);
    // A target already outside the bounds is brought to them whatever the metric says.
    assert.equal(once(20, 0.8, bounded).replicas, 11);
    assert.equal(once(1, 0.8, bounded).replicas, 2);
  });
});

describe('threshold baseline metric and capacity', () => {
  it('GPU utilisation is 1 - sync/step over the samples of the current world size only', () => {
    const samples = [
      { replicas: 4, nodes: 1, localBatchSize: 8, stepTime: 1, syncTime: 0.5 },
      { replicas: 2, nodes: 1, localBatchSize: 16, stepTime: 1, syncTime: 0.1 },
      { replicas: 2, nodes: 1, localBatchSize: 16, stepTime: 2, syncTime: 0.6 },
      { replicas: 2, nodes: 1, localBatchSize: 16, stepTime: 1 }, // no sync time measured: ignored
    ];
    assert.ok(Math.abs((gpuUtilisation(samples, 2) ?? 0) - 0.8) < 1e-12); // mean of 0.9 and 0.7
    assert.equal(gpuUtilisation(samples, 4), 0.5);
    assert.equal(gpuUtilisation(samples, 3), undefined);
  });

  it('free GPUs = allocatable minus requests of pods that are not finished, pending ones included', () => {
    const node = (gpus: number): V1Node => ({ status: { allocatable: { 'nvidia.com/gpu': String(gpus) } } });
    const pod = (phase: string, gpus: number): V1Pod => ({
      spec: { containers: [{ name: 'c', resources: { requests: { 'nvidia.com/gpu': String(gpus) } } }] },
      status: { phase },
    });
    const pods = [pod('Running', 1), pod('Pending', 2), pod('Succeeded', 1), pod('Failed', 1)];
    assert.equal(freeGpus([node(4), node(4)], pods), 5);
  });
});
