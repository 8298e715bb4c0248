// The multi-tenant extension of a workload replay: the same arrivals, but submitted the way tenants of a
// shared cluster submit them. Every draw comes from a PRNG seeded by the run's seed and the workload's jobs, so
// a replay is exact.
import { mulberry32, streamSeed, uniform } from './prng.js';
import { type TenantTraits, WELL_SIZED, type WorkloadJob } from './workload.js';

export interface MultiTenantOptions {
  /** Share of jobs submitted with the high PriorityClass: they preempt default-priority pods on arrival. */
  highPriorityShare: number;
  /** Share of jobs whose memory limit is below the need (OOMKilled 60 s after start). */
  memoryTooSmallShare: number;
  /** Memory request (= limit) of those jobs, as a factor of the need. */
  memoryTooSmallFactor: number;
  /** Share of the remaining jobs that over-request memory, and by how much (uniform range, x need). */
  memoryOverRequestShare: number;
  memoryOverRequestRange: readonly [number, number];
  /** Share of jobs that over-request CPU, and by how much (uniform range, x need). */
  cpuOverRequestShare: number;
  cpuOverRequestRange: readonly [number, number];
  /** Node failures: each node fails as a Poisson process with this mean time between failures (hours); 0 disables. */
  nodeMeanHoursBetweenFailures: number;
}

/**
 * Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, section 3.3.4): 419 unexpected interruptions in a 54-day
 * snapshot of pre-training on 16,384 H100 GPUs in 8-GPU servers (2,048 servers), about 78% of them confirmed
 * or suspected hardware. Counted per server: 2,048 x 54 x 24 / 419 = 6,335 server-hours between interruptions.
 * Every interruption is taken as a node failure (network switches and cables included), so this is an upper
 * bound on the node failure rate. On the 16-node cluster: one every 396 h on average.
 */
export const LLAMA3_NODE_MEAN_HOURS_BETWEEN_FAILURES = (2048 * 54 * 24) / 419;

/**
 * PAI 2020 (Weng et al., "MLaaS in the Wild", NSDI'22, Alibaba PAI trace): about 84% of tasks request more
 * CPU than they use and about 96% more memory; we take the remaining 4% as the under-requesters (OOM).
 * Over-request sizes (1.5-3x CPU, 1.5-4x memory) and 10% high-priority arrivals are our assumptions. Node
 * failures at the Llama 3 interruption rate (LLAMA3_NODE_MEAN_HOURS_BETWEEN_FAILURES); they were one every 6 h
 * cluster-wide before, a figure without a source and about 66x that rate on 16 nodes.
 */
export const DEFAULT_MULTI_TENANT: MultiTenantOptions = {
  highPriorityShare: 0.1,
  memoryTooSmallShare: 0.04,
  memoryTooSmallFactor: 0.75,
  memoryOverRequestShare: 0.96,
  memoryOverRequestRange: [1.5, 4],
  cpuOverRequestShare: 0.84,
  cpuOverRequestRange: [1.5, 3],
  nodeMeanHoursBetweenFailures: LLAMA3_NODE_MEAN_HOURS_BETWEEN_FAILURES,
};

/** One line per assumption, printed with the results. */
export function describeMultiTenant(options: MultiTenantOptions): string[] {
  const pct = (x: number) => `${Math.round(x * 100)}%`;
  return [
    `${pct(options.highPriorityShare)} of jobs arrive with PriorityClass production-high (1000) and preempt default (100) pods`,
    `${pct(options.memoryTooSmallShare)} of jobs set memory request = limit = ${options.memoryTooSmallFactor} x need: OOMKilled 60 s after start`,
    `${pct(options.memoryOverRequestShare)} of the others request ${options.memoryOverRequestRange[0]}-${options.memoryOverRequestRange[1]} x their memory need (PAI 2020: ~96% over-request memory)`,
    `${pct(options.cpuOverRequestShare)} of jobs request ${options.cpuOverRequestRange[0]}-${options.cpuOverRequestRange[1]} x their CPU need (PAI 2020: ~84% over-request CPU)`,
    options.nodeMeanHoursBetweenFailures > 0
      ? `node failures: Poisson, one every ${Math.round(options.nodeMeanHoursBetweenFailures).toLocaleString('en-US')} h per node on average${options.nodeMeanHoursBetweenFailures === LLAMA3_NODE_MEAN_HOURS_BETWEEN_FAILURES ? " (Llama 3's 419 unexpected interruptions in 54 days on 2,048 8-GPU servers, each taken as a node failure; 6 h cluster-wide before, without a source)" : ''}; a failed node's pods are all evicted at once and the node is back at once (a reboot: the simulator has no NotReady/cordon)`
      : 'no node failures',
    'usage: memory = need x U(0.9, 1.0), CPU = need x U(0.85, 1.0) per pod (the simulator); requested/used are time-averaged shares of the cluster',
    "each workload draws its own tenants and node failures, from the run's seed and the workload's jobs (names and arrival times): a workload replays the same whatever command runs it",
  ];
}

/**
 * What names a workload's draws: its jobs (name and arrival), so that the same workload draws the same tenants
 * and failures whichever command replays it and under whatever label, and different workloads draw
 * independently (one stream per seed gave every workload the same traits in job order: at seed 1 not one of
 * the first 152 jobs of any workload was too small, 0 of the 640 jobs at 0.5x against the 4% stated).
 */
export function workloadDrawKey(jobs: readonly Pick<WorkloadJob, 'name' | 'time'>[]): string {
  return jobs.map((j) => `${j.name}@${j.time}`).join(',');
}

/** Per job (in workload order) its traits; well-sized jobs keep memory request = 1.25 x need. */
export function multiTenantTraits(
  jobs: readonly WorkloadJob[],
  seed: number,
  options: MultiTenantOptions = DEFAULT_MULTI_TENANT,
): TenantTraits[] {
  // Its own stream (seed mixed with a constant, then with the workload) so that changing the simulator's draws
  // does not move these.
  const prng = mulberry32(streamSeed((seed ^ 0x5eed7e4a) >>> 0, workloadDrawKey(jobs)));
  return jobs.map(() => {
    const highPriority = prng() < options.highPriorityShare;
    const tooSmall = prng() < options.memoryTooSmallShare;
    const overMemory = prng() < options.memoryOverRequestShare;
    const memoryOver = uniform(prng, ...options.memoryOverRequestRange);
    const overCpu = prng() < options.cpuOverRequestShare;
    const cpuOver = uniform(prng, ...options.cpuOverRequestRange);
    return {
      highPriority,
      memoryRequestFactor: tooSmall
        ? options.memoryTooSmallFactor
        : overMemory
          ? memoryOver
          : WELL_SIZED.memoryRequestFactor,
      cpuRequestFactor: overCpu ? cpuOver : WELL_SIZED.cpuRequestFactor,
    };
  });
}

/**
 * Seconds (from the start) at which a node fails, and which node (index), up to `horizonSeconds`; `workload` is
 * the replay's `workloadDrawKey`.
 */
export function nodeFailureTimes(
  seed: number,
  workload: string,
  nodeCount: number,
  horizonSeconds: number,
  options: MultiTenantOptions = DEFAULT_MULTI_TENANT,
): Array<{ at: number; node: number }> {
  if (!(options.nodeMeanHoursBetweenFailures > 0) || nodeCount < 1) return [];
  const clusterMeanSeconds = (options.nodeMeanHoursBetweenFailures * 3600) / nodeCount;
  const prng = mulberry32(streamSeed((seed ^ 0x0fa11ed0) >>> 0, workload));
  const failures: Array<{ at: number; node: number }> = [];
  for (let t = 0; ; ) {
    t += -Math.log(1 - prng()) * clusterMeanSeconds;
    if (t > horizonSeconds) return failures;
    failures.push({ at: Math.round(t), node: Math.floor(prng() * nodeCount) });
  }
}
