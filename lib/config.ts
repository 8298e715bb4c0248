// Policy knobs with production defaults. Handlers read overrides from the environment/ConfigMap and
// pass a full PolicyConfig down; policies never read the environment themselves.
import { DEFAULT_OWN_NAMESPACE } from './management.js';
import { MEASURED_RESCALE_PAUSE_SECONDS } from './torchelastic/recommended-rendezvous.js';

export interface PolicyConfig {
  /** Seconds after a write during which tuning and rebalance leave a job alone (faults still act). */
  cooldownSeconds: number;
  /**
   * Seconds of lost progress adding workers costs: the re-rendezvous pause only (the new pods start while the
   * old world trains on). A job's own growths are measured patch to first step, which includes that start, so
   * they are reported, not charged (lib/policies/rescale-cost.ts).
   */
  scaleUpCostSeconds: number;
  /** The same for removing workers, until the job's own scale-down has been measured. */
  scaleDownCostSeconds: number;
  /** Hysteresis: a scale change must improve throughput by at least this fraction. */
  minRelativeGain: number;
  /** The gain over the remaining run must exceed the rescale cost by this factor. */
  gainOverCostFactor: number;
  /** At most this many workers added or removed per decision. */
  maxReplicaStep: number;
  /** Memory raised by this factor after an OOM kill, bounded by the cap. */
  oomMemoryFactor: number;
  /** Absolute memory cap per pod, bytes. */
  maxMemoryBytes: number;
  /** Restarts of a pod within the crash-loop window that stop trainscaler acting on the job. */
  crashLoopRestarts: number;
  /** Right-sizing: requests = observed peak * (1 + headroom). */
  rightsizeHeadroom: number;
  /** Right-sizing acts only when the request is off by more than this fraction. */
  rightsizeTolerance: number;
  /**
   * Straggler: a worker is slow when its pace exceeds its own usual pace by this factor (and it is slower than
   * the job's fast pace)... 1.2 so that a 1.25x slowdown is caught through noise and the sidecar's mean window.
   */
  stragglerFactor: number;
  /** ...for at least this many consecutive samples (5 x the 15 s query step: a minute). */
  stragglerMinSamples: number;
  /**
   * Straggler reviews wait at least this long after a write (or cooldownSeconds, if longer): a replaced pod keeps
   * its name, and its predecessor's slow points leave the review only after the sidecar's 60 s mean and 5 normal
   * 15 s points; at the 120 s cool-down a healthy replacement could be flagged on them and evicted again.
   */
  stragglerCooldownSeconds: number;
  /**
   * From binding to a running container (image pull, container start) of a pod that replaces a straggler,
   * until the job's own growth has measured its start (rescaleCost.upToFirstStep): part of what a
   * replacement costs the job.
   */
  podStartSeconds: number;
  /**
   * TRAINSCALER_NAMESPACES: every job in these namespaces is managed without opting in, and when the list is
   * non-empty trainscaler acts in no other namespace. Empty: only jobs that opt in (lib/management.ts).
   */
  namespaceAllowlist: string[];
  /** trainscaler's own namespace(s) (its Lease, its profile store): never managed, like kube-*. */
  ownNamespaces: string[];
  /**
   * Cluster-wide GPU budget: trainscaler never makes a change that would take the GPUs requested across the
   * cluster (every unfinished pod, plus the job's own declared size) above this. Infinity = no budget.
   * Reductions are always allowed.
   */
  maxClusterGpus: number;
}

export const DEFAULT_POLICY_CONFIG: PolicyConfig = {
  // Two schedule ticks: the job is measured at its new size for a tick before it can move again, and a
  // restart measured at 3.3-3.6 s costs at most 3% of a job that moves at every chance. 300 s held jobs four
  // ticks past that (README "The schedule ticks every minute").
  cooldownSeconds: 120,
  // Measured (bench:rescale, recommended rendezvous); a job's own measurements replace them.
  scaleUpCostSeconds: MEASURED_RESCALE_PAUSE_SECONDS.recommended.up,
  scaleDownCostSeconds: MEASURED_RESCALE_PAUSE_SECONDS.recommended.down,
  minRelativeGain: 0.05,
  gainOverCostFactor: 2,
  maxReplicaStep: 4,
  oomMemoryFactor: 1.5,
  maxMemoryBytes: 256 * 1024 ** 3,
  crashLoopRestarts: 5,
  rightsizeHeadroom: 0.2,
  rightsizeTolerance: 0.25,
  stragglerFactor: 1.2,
  stragglerMinSamples: 5,
  stragglerCooldownSeconds: 300,
  // The simulator's pod start (lib/sim/simulated-cluster.ts): 20 s from binding to a running container.
  podStartSeconds: 20,
  namespaceAllowlist: [],
  ownNamespaces: [DEFAULT_OWN_NAMESPACE],
  maxClusterGpus: Number.POSITIVE_INFINITY,
};
