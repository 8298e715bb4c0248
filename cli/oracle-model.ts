// `simulate --policy trainscaler-oracle`: trainscaler's handlers and policies, unchanged, with every throughput
// model they use answering with the simulated world's true step time at the placement asked about, no spread.
// Not a scheduler a cluster can run (no cluster knows its jobs' true scaling): a diagnostic of how much of
// trainscaler's JCT its model's errors cost, per application, beside `trainscaler` in the same run. The
// world answers (nodes, replicas, local batch) with its own interpolation: a policy asks about a node count,
// not which nodes. Sample and scale counts stay the fitted model's, so the growth rule still probes a job
// seen at one size with one worker: what changes is what each decision predicts, not what it may do.
import type { Placement, Prediction, ThroughputOracle } from '../lib/model/throughput-model.js';
import type { SimulatedAppModel } from '../lib/sim/app-model.js';

export function worldTruthOracle(apps: SimulatedAppModel): ThroughputOracle {
  return (signature, fitted) => {
    if (!apps.knows(signature)) return fitted;
    return {
      sampleCount: fitted.sampleCount,
      distinctScales: fitted.distinctScales,
      predict(placement: Placement): Prediction {
        const replicas = Math.max(1, Math.round(placement.replicas));
        const nodes = Math.min(replicas, Math.max(1, Math.round(placement.nodes)));
        const stepTime = apps.stepTime(signature, {
          replicas,
          nodes,
          localBatchSize: placement.localBatchSize,
        });
        return { stepTime, stdev: 0, throughput: (placement.replicas * placement.localBatchSize) / stepTime };
      },
    };
  };
}
