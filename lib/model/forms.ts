// Model forms: how a placement maps to the features whose non-negative weights are the step-time
// parameters. Step time = (T_compute^gamma + T_sync^gamma)^(1/gamma), each part linear in its parameters.
import type { Placement } from './throughput-model.js';

export type FormName = 'allreduce' | 'allreduce-detailed' | 'pollux' | 'optimus';

/** A placement in the normalised units the forms use. */
export interface Scaled {
  /** Replicas (workers). */
  K: number;
  /** Nodes, clamped to [1, K]. */
  N: number;
  /** Parameter servers (>= 1 for the PS form, 0 otherwise). */
  P: number;
  /** Per-replica batch divided by the reference batch of the fit (the median of the samples). */
  mu: number;
}

export interface ParamPrior {
  name: string;
  /** Prior mean, as a multiple of the reference compute time t0 (seconds). */
  mean: number;
  /** Prior standard deviation, as a multiple of t0. */
  sd: number;
}

export interface ModelForm {
  name: FormName;
  compute: readonly ParamPrior[];
  sync: readonly ParamPrior[];
  computeFeatures(p: Scaled): number[];
  /** All zeros where the form has no synchronisation (one all-reduce replica). */
  syncFeatures(p: Scaled): number[];
}

export function scalePlacement(p: Placement, refBatch: number, ps: boolean): Scaled {
  const K = Math.max(1, p.replicas);
  const N = Math.min(K, Math.max(1, p.nodes));
  return { K, N, P: ps ? Math.max(1, p.ps ?? 1) : 0, mu: p.localBatchSize / refBatch };
}

/**
 * Replicas-per-node contention coefficient beyond two nodes, per unit of ln(K/N). Chosen on placements.csv
 * only: the value in {0, 0.1, 0.15, ..., 0.4} (with the two-node coefficient in {1, 1/ln 2, 2}) that minimises
 * the mean held-out MAPE of the six applications in `npm run bench:model` (fit on placements 1, 4, 44).
 */
export const CONTENTION_BEYOND_TWO_NODES = 0.25;

/**
 * Inter-node synchronisation shape L(K, N), in units of a two-node ring with one replica per node (N >= 2):
 * - the ring all-reduce's bandwidth term, 2 (N - 1) / N (each of the N nodes sends and receives
 *   2 (N - 1) / N of the gradient; Patarasuk & Yuan 2009, the alpha-beta cost model of NCCL/Horovod rings):
 *   sync grows with the node count even at one replica per node, by up to 2x from two nodes;
 * - contention among the K/N replicas sharing one node's network link, logarithmic in K/N: log2(K/N) on two
 *   nodes (placements.csv: on two nodes sync grows with the replicas about as ln K, e.g. bert 11:12:13:14 =
 *   0.39:0.61:0.73:0.82 of 44), CONTENTION_BEYOND_TWO_NODES * ln(K/N) on three nodes or more (placements.csv:
 *   44 -> 444 roughly halves the sync).
 * The earlier shape ln K / ln N matched two to four nodes but predicted no growth with nodes at one replica per
 * node and a contention that fades as 1/ln N, so it extrapolated 15-50% optimistically to 6-16 nodes.
 */
export function interNodeShape(K: number, N: number): number {
  if (N < 2) return 0;
  const ring = (2 * (N - 1)) / N;
  const perNode = Math.log(K / N);
  return ring + (N === 2 ? perNode / Math.LN2 : CONTENTION_BEYOND_TWO_NODES * perNode);
}

const COMPUTE_PRIORS: readonly ParamPrior[] = [
  // With a single batch size observed, split the time half fixed, half per sample (as Pollux does).
  { name: 'compute.fixed', mean: 0.5, sd: 1 },
  { name: 'compute.perSample', mean: 0.5, sd: 1 },
];

/** trainscaler's all-reduce form (the default). */
export const ALLREDUCE_FORM: ModelForm = {
  name: 'allreduce',
  compute: [
    ...COMPUTE_PRIORS,
    // Fixed per-step cost that only data-parallel replicas pay (gradient bucketing, hooks).
    { name: 'compute.replicated', mean: 0, sd: 0.3 },
  ],
  sync: [
    { name: 'sync.local', mean: 0.05, sd: 0.3 },
    { name: 'sync.localPerReplica', mean: 0.02, sd: 0.1 },
    { name: 'sync.net', mean: 0.2, sd: 1 },
    { name: 'sync.netPerInverseBatch', mean: 0, sd: 0.3 },
  ],
  computeFeatures: (p) => [1, p.mu, p.K > 1 ? 1 : 0],
  syncFeatures: (p) => {
    if (p.K <= 1) return [0, 0, 0, 0];
    if (p.N <= 1) return [1, p.K - 2, 0, 0];
    const L = interNodeShape(p.K, p.N);
    // Exposed sync shrinks with the batch: more backward compute to overlap the all-reduce with.
    return [0, 0, L, L / p.mu];
  },
};

/**
 * A richer all-reduce form for describing a job measured at many placements (the simulator's ground truth,
 * lib/sim/app-profiles.ts), not for online fitting from a few scales: compute also grows with the replicas
 * sharing a node (data loading, PCIe), and the inter-node sync has separate terms for two nodes and for
 * the per-node contention, each with its batch-overlap counterpart.
 */
export const DETAILED_ALLREDUCE_FORM: ModelForm = {
  name: 'allreduce-detailed',
  compute: [
    ...COMPUTE_PRIORS,
    { name: 'compute.replicated', mean: 0, sd: 0.3 },
    { name: 'compute.replicatedPerSample', mean: 0, sd: 0.3 },
    { name: 'compute.sharedNode', mean: 0, sd: 0.3 },
    { name: 'compute.sharedNodePerSample', mean: 0, sd: 0.3 },
  ],
  sync: [
    { name: 'sync.local', mean: 0.05, sd: 0.3 },
    { name: 'sync.localPerReplica', mean: 0.02, sd: 0.1 },
    { name: 'sync.localPerInverseBatch', mean: 0, sd: 0.3 },
    { name: 'sync.net', mean: 0.2, sd: 1 },
    { name: 'sync.netPerInverseBatch', mean: 0, sd: 0.3 },
    { name: 'sync.netFixed', mean: 0, sd: 0.3 },
    { name: 'sync.netFixedPerInverseBatch', mean: 0, sd: 0.3 },
    { name: 'sync.twoNodes', mean: 0, sd: 0.3 },
    { name: 'sync.twoNodesPerInverseBatch', mean: 0, sd: 0.3 },
  ],
  computeFeatures: (p) => {
    const r = p.K > 1 ? 1 : 0;
    const shared = Math.log(p.K / p.N);
    return [1, p.mu, r, r * p.mu, shared, shared * p.mu];
  },
  syncFeatures: (p) => {
    if (p.K <= 1) return [0, 0, 0, 0, 0, 0, 0, 0, 0];
    if (p.N <= 1) return [1, p.K - 2, 1 / p.mu, 0, 0, 0, 0, 0, 0];
    const L = interNodeShape(p.K, p.N);
    const two = p.N === 2 ? Math.log(p.K / p.N) : 0;
    return [0, 0, 0, L, L / p.mu, 1, 1 / p.mu, two, two / p.mu];
  },
};

/** The Pollux (OSDI'21) form: T_sync = alpha + beta * (K - 2), one pair within a node, one across nodes. */
export const POLLUX_FORM: ModelForm = {
  name: 'pollux',
  compute: COMPUTE_PRIORS,
  sync: [
    { name: 'sync.local', mean: 0.05, sd: 0.3 },
    // Pollux regularises the retrogression (beta) terms towards 0 to prefer an optimistic model.
    { name: 'sync.localPerReplica', mean: 0, sd: 0.1 },
    { name: 'sync.net', mean: 0.2, sd: 1 },
    { name: 'sync.netPerReplica', mean: 0, sd: 0.1 },
  ],
  computeFeatures: (p) => [1, p.mu],
  syncFeatures: (p) => {
    if (p.K <= 1) return [0, 0, 0, 0];
    return p.N <= 1 ? [1, p.K - 2, 0, 0] : [0, 0, 1, p.K - 2];
  },
};

/**
 * Optimus (EuroSys'18) form for parameter-server jobs with w workers and p servers:
 * T = a + b*m + c*w/p + d*w + e*p (the w/p term is each server's share of the gradient traffic).
 */
export const OPTIMUS_FORM: ModelForm = {
  name: 'optimus',
  compute: COMPUTE_PRIORS,
  sync: [
    { name: 'ps.trafficPerServer', mean: 0.1, sd: 1 },
    { name: 'ps.perWorker', mean: 0.01, sd: 0.3 },
    { name: 'ps.perServer', mean: 0.01, sd: 0.3 },
  ],
  computeFeatures: (p) => [1, p.mu],
  syncFeatures: (p) => [p.K / p.P, p.K, p.P],
};

export const FORMS: Record<FormName, ModelForm> = {
  allreduce: ALLREDUCE_FORM,
  'allreduce-detailed': DETAILED_ALLREDUCE_FORM,
  pollux: POLLUX_FORM,
  optimus: OPTIMUS_FORM,
};
