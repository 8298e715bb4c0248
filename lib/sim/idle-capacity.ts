// Work conservation, measured against the simulated world's truth: GPUs that no bound pod holds while a
// running elastic job below its maximum would take them at a real gain above the rescale cost (its next
// worker saves more than the cost over the rest of its run, at the application's true step times). Every
// policy is measured the same way; a policy that leaves growth to alerts or long ticks shows it here.
import type { V1Pod } from '@kubernetes/client-node';
import { readJob, roleOf } from '../adapters/job-adapter.js';
import type { KubeObject } from '../cluster/cluster-client.js';
import type { SimulatedAppModel } from './app-model.js';
import type { SimulatedJobStatus } from './simulated-cluster.js';

export interface WorldFacts {
  apps: SimulatedAppModel;
  gpusPerNode: number;
  rescaleCostSeconds: number;
}

/** Where a job's training pods are bound and how many more of its worker pods fit, node by node (one order). */
export interface RoomAround {
  perNode: readonly number[];
  room: readonly number[];
}

/**
 * Workers a running elastic job would take now, in steps that each save more than a rescale costs. A step may
 * add up to a node's worth of workers: the worker that opens a new node pays the inter-node all-reduce for
 * all the others and may be slower on its own, while filling that node is faster (an 8-worker job on two
 * 4-GPU nodes that would run best at 12 is not content at 8).
 *
 * With `where`, the job is timed where it runs, and its new workers where the free GPUs are: first on its own
 * nodes, then on the nodes with the most room (the fewest nodes the free GPUs allow). The measured world
 * times a job by its exact per-node placement, so four idle GPUs on four nodes do not speed a job up the way
 * one empty node would; counting them as wanted at the packed gain charged a policy for growth that the
 * cluster's free GPUs could not give. Without `where`, or while the job's bound pods are not its spec's
 * count (a resize under way), its workers are taken as packed on full nodes.
 */
export function workersWorthAdding(
  job: KubeObject,
  status: SimulatedJobStatus,
  world: WorldFacts,
  where?: RoomAround,
): number {
  const view = readJob(job);
  const worker = roleOf(view, 'Worker');
  if (!view.elastic || !worker || status.phase !== 'Running') return 0;
  const remaining = status.targetSamples - status.processedSamples;
  if (!(remaining > 0)) return 0;
  const placed = where && sum(where.perNode) === worker.replicas ? where : undefined;
  const perNodeAt = placed ? growInto(placed) : undefined;
  const timeLeft = (k: number): number | undefined => {
    const localBatchSize =
      view.globalBatchSize !== undefined
        ? view.globalBatchSize / k
        : (view.localBatchSize ?? world.apps.defaultLocalBatchSize(status.app));
    const perNode = perNodeAt?.(k - worker.replicas);
    if (perNodeAt && !perNode) return undefined;
    const nodes = perNode ? perNode.length : Math.ceil(k / world.gpusPerNode);
    const placement = { replicas: k, nodes, localBatchSize, ...(perNode ? { perNode } : {}) };
    return remaining / ((k * localBatchSize) / world.apps.stepTime(status.app, placement));
  };
  let k = worker.replicas;
  for (;;) {
    const now = timeLeft(k);
    if (now === undefined) break;
    const top = Math.min(worker.maxReplicas, k + Math.max(1, world.gpusPerNode));
    let next = k + 1;
    for (; next <= top; next++) {
      const after = timeLeft(next);
      if (after === undefined) {
        next = top + 1; // no room for more workers
        break;
      }
      if (now - after > world.rescaleCostSeconds) break;
    }
    if (next > top) break;
    k = next;
  }
  return k - worker.replicas;
}

/** The job's per-node counts with `extra` workers added where they fit best, or undefined if they do not fit. */
function growInto(where: RoomAround): (extra: number) => number[] | undefined {
  const order = where.room
    .map((room, i) => ({ i, room, own: (where.perNode[i] ?? 0) > 0 }))
    .filter((n) => n.room > 0)
    .sort((a, b) => Number(b.own) - Number(a.own) || b.room - a.room || a.i - b.i);
  return (extra) => {
    const counts = [...where.perNode];
    let left = extra;
    for (const n of order) {
      if (left <= 0) break;
      const here = Math.min(n.room, left);
      counts[n.i] = (counts[n.i] ?? 0) + here;
      left -= here;
    }
    return left > 0 ? undefined : counts.filter((c) => c > 0);
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** GPUs no bound pod holds. */
export function unheldGpus(clusterGpus: number, pods: readonly V1Pod[]): number {
  let held = 0;
  for (const pod of pods) {
    const phase = pod.status?.phase;
    if (!pod.spec?.nodeName || phase === 'Succeeded' || phase === 'Failed') continue;
    held += Number(pod.spec.containers[0]?.resources?.requests?.['nvidia.com/gpu'] ?? 0);
  }
  return held > clusterGpus ? 0 : clusterGpus - held;
}

/** A running job as one sample sees it: its workers (the spec's count) and the workers it would take. */
export interface SampledJob {
  key: string;
  workers: number;
  wanted: number;
}

/**
 * Where GPU time idle beyond the grace period sat, by what happened to the jobs that wanted it within that
 * period: a job resized up (growing, at most as fast as the step bound and the cool-down allow), one resized
 * down, or one left at its size. It tells a policy that leaves GPUs idle from guardrails that pace its growth.
 */
export interface IdleBeside {
  growing: number;
  shrunk: number;
  leftAlone: number;
}

/** Several splits' mean, key by key (a load's workloads); all zero for none. */
export function meanIdleBeside(splits: readonly IdleBeside[]): IdleBeside {
  const mean = (key: keyof IdleBeside) =>
    splits.length === 0 ? 0 : splits.reduce((s, b) => s + b[key], 0) / splits.length;
  return { growing: mean('growing'), shrunk: mean('shrunk'), leftAlone: mean('leftAlone') };
}

/**
 * Accumulates idle-but-wanted GPU time from samples taken every `intervalSeconds`: all of it, and the part
 * idle for longer than `graceSeconds` (a GPU counts there only while at least that many GPUs have been idle
 * and wanted through the whole grace period). That part is shared among the jobs that want workers, by the
 * workers each wants, and filed under what their worker counts did through the grace period (`beside`).
 */
export class IdleWhileWantedMeter {
  readonly #interval: number;
  readonly #window: number;
  readonly #recent: number[] = [];
  /** Each job's worker counts at the samples of the grace period, oldest first. */
  #workers = new Map<string, number[]>();
  totalGpuSeconds = 0;
  beyondGraceGpuSeconds = 0;
  readonly beside: IdleBeside = { growing: 0, shrunk: 0, leftAlone: 0 };

  constructor(intervalSeconds: number, graceSeconds: number) {
    this.#interval = intervalSeconds;
    this.#window = Math.max(1, Math.ceil(graceSeconds / intervalSeconds) + 1);
  }

  sample(idleGpus: number, jobs: readonly SampledJob[]): void {
    const wanted = jobs.reduce((s, j) => s + j.wanted, 0);
    const now = Math.max(0, Math.min(idleGpus, wanted));
    this.#recent.push(now);
    if (this.#recent.length > this.#window) this.#recent.shift();
    const workers = new Map<string, number[]>();
    for (const job of jobs)
      workers.set(job.key, [...(this.#workers.get(job.key) ?? []), job.workers].slice(-this.#window));
    this.#workers = workers;
    this.totalGpuSeconds += now * this.#interval;
    if (this.#recent.length < this.#window) return;
    const beyond = Math.min(...this.#recent) * this.#interval;
    if (beyond <= 0) return;
    this.beyondGraceGpuSeconds += beyond;
    for (const job of jobs)
      this.beside[movement(workers.get(job.key) ?? [])] += (beyond * job.wanted) / wanted;
  }
}

/** A growth within the period counts first: a job shrunk and regrown was growing again. */
function movement(counts: readonly number[]): keyof IdleBeside {
  const steps = counts.slice(1).map((c, i) => c - (counts[i] ?? c));
  if (steps.some((d) => d > 0)) return 'growing';
  return steps.some((d) => d < 0) ? 'shrunk' : 'leftAlone';
}
