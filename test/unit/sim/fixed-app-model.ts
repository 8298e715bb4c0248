// A test application whose numbers can be checked by hand: step time 0.1 s + 0.01 s per replica +
// 0.05 s per extra node, 8 GiB memory need, 4 cores.
import type { Placement } from '../../../lib/model/throughput-model.js';
import type { SimulatedAppModel } from '../../../lib/sim/app-model.js';

export const GiB = 1024 ** 3;

export function fixedStepTime(placement: Placement): number {
  return 0.1 + 0.01 * placement.replicas + 0.05 * (placement.nodes - 1) + 0.001 * placement.localBatchSize;
}

export const FIXED_APP_MODEL: SimulatedAppModel = {
  knows: (app) => app === 'toy',
  memoryNeedBytes: () => 8 * GiB,
  cpuMillis: () => 4000,
  defaultLocalBatchSize: () => 32,
  defaultTargetSamples: () => 1_000_000,
  stepTime: (_app, placement) => fixedStepTime(placement),
};
