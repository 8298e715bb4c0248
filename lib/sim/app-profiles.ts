// Ground truth for the simulated cluster: per-application step-time figures and resource needs, kept in
// code so that a clone without ../shared data can still simulate.
//
// Provenance: the step-time parameters were fitted from the Pollux measurements (Qiao et al., OSDI'21;
// data from petuum/adaptdl, branch osdi21-artifact, simulator/traces/APP/placements.csv, Apache-2.0) by
// fitThroughputModel (lib/model/fit.ts) with the detailed all-reduce form on ALL rows of each application's
// placements.csv (placement digit string -> replicas = digit sum, nodes = digit count; local_bsz,
// step_time, sync_time as measured; compute and sync fitted separately by NNLS in relative error, gamma by
// 1-D search). Regenerate with `npm run bench:model -- --profiles`. In-sample MAPE of these figures
// over all rows: bert 4.1%, cifar10 7.4%, deepspeech2 8.1%, imagenet 6.9%, ncf 7.6%, yolov3 6.6%; on
// scalability.csv (6-16 nodes, not fitted): 4.1%, 13.1%, 9.6%, 13.9%, 15.4%, 7.0% (the inter-node shape before
// the ring bandwidth term, ln K / ln N, gave 15.8-26.4% there: 13-26% too optimistic at 8 nodes).
// Memory and CPU needs are estimates (host memory of one worker pod), not measurements.
import {
  evaluateStepTime,
  evaluateSyncTime,
  type FittedParameters,
  type Placement,
} from '../model/throughput-model.js';

export type AppName = 'bert' | 'cifar10' | 'deepspeech2' | 'imagenet' | 'ncf' | 'yolov3';

export const APP_NAMES: readonly AppName[] = ['bert', 'cifar10', 'deepspeech2', 'imagenet', 'ncf', 'yolov3'];

export interface AppProfile {
  name: AppName;
  /** Fitted step-time parameters; evaluate with groundTruthStepTime. */
  stepTime: FittedParameters;
  /** Host memory one replica's pod needs, bytes. */
  memoryBytes: number;
  /** CPU one replica's pod needs, millicores. */
  cpuMillis: number;
  /** Median local_bsz over the measured rows. */
  defaultLocalBatchSize: number;
  /** Largest per-replica batch measured (yolov3: capped at 8 as in the Pollux setup). */
  maxLocalBatchSize: number;
  /**
   * The "manual configuration" a user typically asks for: the median replica count of this application in
   * the Pollux workloads, with the local batch = asked global batch / replicas, capped at maxLocalBatchSize.
   */
  manual: { replicas: number; localBatchSize: number };
  /** Samples a SHORT demo job must process: about 40 simulated minutes on the manual configuration. */
  demoTargetSamples: number;
}

const GiB = 1024 ** 3;

export const APP_PROFILES: Record<AppName, AppProfile> = {
  bert: {
    name: 'bert',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 8,
      t0: 0.6482,
      compute: [0.1803, 0.4608, 0, 0, 0, 0],
      sync: [0.04438, 0.02399, 0.007685, 0.4103, 0.1218, 0, 0, 0.2498, 0],
      gamma: 1.004,
      residualStdev: 0.05508,
    },
    memoryBytes: 10 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 8,
    maxLocalBatchSize: 12,
    manual: { replicas: 12, localBatchSize: 12 },
    demoTargetSamples: 170_000,
  },
  cifar10: {
    name: 'cifar10',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 182,
      t0: 0.139,
      compute: [0.01665, 0.1226, 0, 0.002305, 0, 0.002697],
      sync: [0.00156, 0.003946, 0.0003305, 0.02449, 0.005879, 0.003425, 0.001358, 0, 0],
      gamma: 1.009,
      residualStdev: 0.09484,
    },
    memoryBytes: 3 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 182,
    maxLocalBatchSize: 1024,
    manual: { replicas: 8, localBatchSize: 256 },
    demoTargetSamples: 17_000_000,
  },
  deepspeech2: {
    name: 'deepspeech2',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 28,
      t0: 0.8576,
      compute: [0.2154, 0.666, 0, 0, 0.09426, 0],
      sync: [0.04132, 0.02983, 0.002072, 0.1529, 0.008803, 0.03207, 0, 0, 0],
      gamma: 1,
      residualStdev: 0.09718,
    },
    memoryBytes: 6 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 28,
    maxLocalBatchSize: 80,
    manual: { replicas: 8, localBatchSize: 40 },
    demoTargetSamples: 430_000,
  },
  imagenet: {
    name: 'imagenet',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 69,
      t0: 0.3796,
      compute: [0.06698, 0.3028, 0, 0.0002257, 0, 0.003954],
      sync: [0.002, 0.0008755, 0, 0.02126, 0.02875, 0, 0, 0.02762, 0],
      gamma: 1.003,
      residualStdev: 0.08924,
    },
    memoryBytes: 8 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 81,
    maxLocalBatchSize: 200,
    manual: { replicas: 32, localBatchSize: 200 },
    demoTargetSamples: 15_000_000,
  },
  ncf: {
    name: 'ncf',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 363,
      t0: 0.007227,
      compute: [0.007018, 0.0001687, 0, 0, 0, 7.113e-5],
      sync: [0.002703, 0.0009603, 0, 0.009318, 0, 0.001925, 0, 0, 0],
      gamma: 1.003,
      residualStdev: 0.09951,
    },
    memoryBytes: 2 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 363,
    maxLocalBatchSize: 32768,
    manual: { replicas: 1, localBatchSize: 32768 },
    demoTargetSamples: 3_200_000_000,
  },
  yolov3: {
    name: 'yolov3',
    stepTime: {
      form: 'allreduce-detailed',
      refBatch: 8,
      t0: 0.418,
      compute: [0.1764, 0.1841, 0, 0, 0.02521, 0.01645],
      sync: [0.002487, 0.03576, 0.0164, 0.4129, 0.01693, 0, 0, 0.02623, 0],
      gamma: 1.006,
      residualStdev: 0.08447,
    },
    memoryBytes: 6 * GiB,
    cpuMillis: 4000,
    defaultLocalBatchSize: 8,
    maxLocalBatchSize: 8,
    manual: { replicas: 4, localBatchSize: 8 },
    demoTargetSamples: 160_000,
  },
};

export function isAppName(name: string): name is AppName {
  return (APP_NAMES as readonly string[]).includes(name);
}

/** The simulated "true" seconds per step of `app` at `placement` (deterministic, no noise). */
export function groundTruthStepTime(app: AppName, placement: Placement): number {
  const profile = APP_PROFILES[app];
  if (!profile) throw new Error(`unknown application '${app}'`);
  if (!(placement.replicas >= 1 && placement.nodes >= 1 && placement.localBatchSize > 0)) {
    throw new Error(`groundTruthStepTime: invalid placement ${JSON.stringify(placement)}`);
  }
  return evaluateStepTime(profile.stepTime, placement);
}

/** The part of groundTruthStepTime spent in gradient synchronisation (what a DDP comm hook would time). */
export function groundTruthSyncTime(app: AppName, placement: Placement): number {
  const profile = APP_PROFILES[app];
  if (!profile) throw new Error(`unknown application '${app}'`);
  return evaluateSyncTime(profile.stepTime, placement);
}
