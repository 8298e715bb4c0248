// Job-arrival workloads for `trainscaler simulate`: the Pollux workloads (Philly-derived arrivals, with the
// GPU count and global batch size each user asked for, `name,time,application,num_replicas,batch_size`),
// the samples each job must process to reach its application's target, and the manifests submitted for them.
// Read from a path the user gives: a clone has no ../shared data, so nothing here depends on it.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { KubeObject } from '../cluster/cluster-client.js';
import { APP_PROFILES, type AppName, isAppName } from './app-profiles.js';
import { pytorchJobManifest } from './training-job-manifests.js';
import type { SimulatedLaunch } from './world-rescale-cost.js';

export interface WorkloadJob {
  name: string;
  /** Seconds after the start of the workload. */
  time: number;
  application: AppName;
  /** GPUs (one replica per GPU) the user asked for. */
  replicas: number;
  /** Global batch size the user asked for; kept fixed whatever the worker count. */
  batchSize: number;
}

export interface Workload {
  /** File name without extension, e.g. 'workload-3'; prefixed by its folder when read from one. */
  name: string;
  path: string;
  jobs: WorkloadJob[];
}

export class WorkloadError extends Error {
  override name = 'WorkloadError';
}

const COLUMNS = ['name', 'time', 'application', 'num_replicas', 'batch_size'] as const;

/** Parses one workload CSV (no quoting: the Pollux files have none); `where` names it in errors. */
export function parseWorkloadCsv(text: string, where: string): WorkloadJob[] {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  const index = new Map(header.map((h, i) => [h, i]));
  for (const column of COLUMNS) {
    if (!index.has(column)) throw new WorkloadError(`${where}: missing column '${column}' in the header`);
  }
  return lines.slice(1).map((line, n) => {
    const cells = line.split(',').map((c) => c.trim());
    const at = `${where}:${n + 2}`;
    const cell = (column: (typeof COLUMNS)[number]) => cells[index.get(column) ?? -1] ?? '';
    const number = (column: (typeof COLUMNS)[number], integer: boolean) => {
      const value = Number(cell(column));
      if (
        cell(column) === '' ||
        !Number.isFinite(value) ||
        value < 0 ||
        (integer && !Number.isInteger(value))
      )
        throw new WorkloadError(`${at}: ${column} must be a non-negative ${integer ? 'integer' : 'number'}`);
      return value;
    };
    const application = cell('application');
    if (!isAppName(application)) throw new WorkloadError(`${at}: unknown application '${application}'`);
    const replicas = number('num_replicas', true);
    const batchSize = number('batch_size', true);
    if (replicas < 1 || batchSize < 1)
      throw new WorkloadError(`${at}: num_replicas and batch_size must be >= 1`);
    const name = cell('name');
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name))
      throw new WorkloadError(`${at}: name '${name}' is not a valid Kubernetes object name`);
    return { name, time: number('time', false), application, replicas, batchSize };
  });
}

/**
 * A workload file, or every `workload-*.csv` (else every `*.csv`) in a folder, in numeric order.
 * A missing path is the common mistake on a clone without ../shared: the error says what to pass.
 */
export function loadWorkloads(path: string): Workload[] {
  if (!existsSync(path)) {
    throw new WorkloadError(
      `workload path '${path}' does not exist: pass --workload a CSV file (name,time,application,num_replicas,batch_size) or a folder of them, e.g. ../shared/data/pollux/workloads-1.0`,
    );
  }
  const read = (file: string, name: string): Workload => ({
    name,
    path: file,
    jobs: parseWorkloadCsv(readFileSync(file, 'utf8'), file),
  });
  if (!statSync(path).isDirectory()) return [read(path, basename(path).replace(/\.csv$/, ''))];
  const csvs = readdirSync(path).filter((f) => f.endsWith('.csv'));
  const preferred = csvs.filter((f) => /^workload-\d+\.csv$/.test(f));
  const files = (preferred.length > 0 ? preferred : csvs).sort(
    (a, b) => numberIn(a) - numberIn(b) || a.localeCompare(b),
  );
  if (files.length === 0) throw new WorkloadError(`workload folder '${path}' has no .csv file`);
  const folder = basename(path);
  return files.map((f) => read(join(path, f), `${folder}/${f.replace(/\.csv$/, '')}`));
}

function numberIn(file: string): number {
  const match = /(\d+)/.exec(file);
  return match ? Number(match[1]) : Number.POSITIVE_INFINITY;
}

/**
 * Samples to the application's target at global batch B: from the Pollux artifact's
 * traces/APP/validation-B.csv, the last row (the run that reached the quality target of the Pollux paper
 * within max_epochs: bert 2, cifar10 100, deepspeech2 80, imagenet 90, ncf 10, yolov3 50), as
 * last iteration x B. E.g. bert at B=12: 14,774 x 12 = 177,288 = 2 epochs of SQuAD (88.6k examples);
 * cifar10 at 128: 39,062 x 128 = 5.0M = 100 epochs of 50k images. Larger batches need more samples (lower
 * statistical efficiency), which is why the target depends on B. Kept as constants so a clone without the
 * data simulates the same; `npx tsx test/bench/cluster.bench.ts --check-targets` re-derives them.
 */
export const TARGET_SAMPLES_BY_BATCH: Record<AppName, ReadonlyArray<readonly [number, number]>> = {
  bert: [
    [12, 177_288],
    [24, 178_248],
    [48, 179_136],
    [96, 180_960],
    [192, 180_480],
    [384, 184_320],
  ],
  cifar10: [
    [128, 4_999_936],
    [256, 5_216_512],
    [512, 5_434_880],
    [1024, 5_859_328],
    [2048, 6_508_544],
    [4096, 8_237_056],
  ],
  deepspeech2: [
    [20, 570_720],
    [40, 588_440],
    [80, 614_640],
    [160, 646_560],
    [320, 724_480],
    [640, 910_720],
  ],
  imagenet: [
    [200, 115_305_000],
    [400, 117_198_000],
    [800, 120_184_800],
    [1600, 125_524_800],
    [3200, 134_793_600],
    [6400, 153_420_800],
    [12800, 185_100_800],
  ],
  ncf: [
    [256, 49_708_544],
    [512, 49_712_128],
    [1024, 49_792_000],
    [2048, 49_782_784],
    [4096, 49_856_512],
    [8192, 50_151_424],
    [16384, 50_282_496],
    [32768, 50_724_864],
  ],
  yolov3: [
    [8, 827_552],
    [16, 846_480],
    [32, 877_760],
    [64, 932_928],
    [128, 1_033_600],
    [256, 1_231_104],
    [512, 1_609_216],
  ],
};

/** Target samples at global batch B: log-log interpolation between the measured batches, clamped outside. */
export function targetSamples(app: AppName, batchSize: number): number {
  const table = TARGET_SAMPLES_BY_BATCH[app];
  const first = table[0];
  const last = table[table.length - 1];
  if (!first || !last) throw new RangeError(`no target table for '${app}'`);
  if (batchSize <= first[0]) return first[1];
  if (batchSize >= last[0]) return last[1];
  for (let i = 1; i < table.length; i++) {
    const lo = table[i - 1];
    const hi = table[i];
    if (!lo || !hi || batchSize > hi[0]) continue;
    const f = Math.log(batchSize / lo[0]) / Math.log(hi[0] / lo[0]);
    return Math.round(Math.exp(Math.log(lo[1]) + f * Math.log(hi[1] / lo[1])));
  }
  return last[1];
}

export const WORKLOAD_NAMESPACE = 'workload';
export const DEFAULT_PRIORITY_CLASS = 'team-default';
export const HIGH_PRIORITY_CLASS = 'production-high';
export const WORKLOAD_PRIORITY_CLASSES: Record<string, number> = {
  [DEFAULT_PRIORITY_CLASS]: 100,
  [HIGH_PRIORITY_CLASS]: 1000,
};

/** How one job deviates from a well-sized submission (multi-tenant extension); all factors of the app's need. */
export interface TenantTraits {
  highPriority: boolean;
  /** CPU request = factor x the app's CPU need (>= 1: over-request; the limit stays at the request). */
  cpuRequestFactor: number;
  /** Memory request = factor x the app's memory need; < 1 means the limit is too small: OOMKilled. */
  memoryRequestFactor: number;
}

export const WELL_SIZED: TenantTraits = {
  highPriority: false,
  cpuRequestFactor: 1,
  memoryRequestFactor: 1.25,
};

/**
 * The PyTorchJob submitted for a workload job: one GPU per worker, the user's worker count (capped at the
 * cluster's GPUs), the user's global batch kept fixed (trainscaler.io/global-batch-size), the target its
 * user declares (the world's samples to its target at that batch; targetSamples by default), and elastic
 * bounds 1..clusterGpus so that an autoscaler may use the whole cluster.
 */
export function workloadJobManifest(
  job: WorkloadJob,
  clusterGpus: number,
  traits: TenantTraits = WELL_SIZED,
  launch?: SimulatedLaunch,
  target: number = targetSamples(job.application, job.batchSize),
): KubeObject {
  const profile = APP_PROFILES[job.application];
  const manifest = pytorchJobManifest({
    ...(launch ? { launch } : {}),
    name: job.name,
    namespace: WORKLOAD_NAMESPACE,
    app: job.application,
    priorityClassName: traits.highPriority ? HIGH_PRIORITY_CLASS : DEFAULT_PRIORITY_CLASS,
    workers: Math.min(job.replicas, clusterGpus),
    minReplicas: 1,
    maxReplicas: clusterGpus,
    sizing: {
      gpus: 1,
      cpuMillis: Math.round(profile.cpuMillis * traits.cpuRequestFactor),
      // Rounded to MiB: quantities stay short and exact.
      memoryBytes: Math.round((profile.memoryBytes * traits.memoryRequestFactor) / 2 ** 20) * 2 ** 20,
    },
    globalBatchSize: job.batchSize,
    targetSamples: target,
    backoffLimit: 3,
  });
  // Finished pods are deleted with their job (a real runPolicy option): a replay of hundreds of jobs would
  // otherwise list thousands of Succeeded pods on every capacity read.
  const spec = manifest.spec as { runPolicy: { cleanPodPolicy: string } };
  spec.runPolicy.cleanPodPolicy = 'All';
  return manifest;
}
