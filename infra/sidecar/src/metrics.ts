// The series the sidecar exports. Names and labels are a contract with infra/prometheus/rules and with
// lib/metrics/prometheus-metrics-source.ts: change them together. Every series carries the identity labels
// (namespace, job_kind, job_name, pod, role, worker) as registry defaults; the step time also carries the
// scale it was measured at (replicas, nodes, local_batch_size) and the node the pod runs on.
import { Counter, Gauge, Registry } from 'prom-client';
import { readCgroup } from './cgroup.js';
import type { IdentityLabels } from './config.js';
import type { DrainCoordinator } from './drain.js';
import type { GpuReader, GpuReading } from './gpu.js';
import type { ProgressIncrement, ProgressTracker } from './progress-tracker.js';

export const METRIC = {
  stepTime: 'trainscaler_step_time_seconds',
  steps: 'trainscaler_steps_total',
  samples: 'trainscaler_samples_total',
  trainerSamples: 'trainscaler_trainer_samples',
  lastProgress: 'trainscaler_last_progress_timestamp_seconds',
  resumed: 'trainscaler_resumed_timestamp_seconds',
  gpuUtilization: 'trainscaler_gpu_utilization_ratio',
  gpuMemoryUsed: 'trainscaler_gpu_memory_used_bytes',
  gpuMemoryTotal: 'trainscaler_gpu_memory_total_bytes',
  cpuUsage: 'trainscaler_cgroup_cpu_usage_seconds_total',
  memoryUsage: 'trainscaler_cgroup_memory_usage_bytes',
  memoryWorkingSet: 'trainscaler_cgroup_memory_working_set_bytes',
  memoryLimit: 'trainscaler_cgroup_memory_limit_bytes',
  draining: 'trainscaler_sidecar_draining',
} as const;

/**
 * Empties a metric. prom-client's reset() leaves an unlabelled metric at 0, and a 0 is a lie for a value
 * we could not read (a memory limit of 0 makes usage/limit infinite): remove() takes that sample away too.
 */
function clear(metric: Gauge | Counter): void {
  metric.reset();
  metric.remove();
}

export interface MetricsInputs {
  identity: IdentityLabels;
  nodeName: string;
  tracker: ProgressTracker;
  gpus: GpuReader;
  /** The cgroup v2 directory to read; no cgroup series without one. */
  cgroupPath: string | undefined;
  drain: DrainCoordinator;
  /** Epoch seconds. */
  clock: () => number;
  log: (message: string) => void;
}

export interface SidecarMetrics {
  registry: Registry;
  /** Counts what a progress report added. Called on the hot path: O(1). */
  record(increment: ProgressIncrement): void;
}

export function createSidecarMetrics(inputs: MetricsInputs): SidecarMetrics {
  const { tracker, gpus, drain, clock } = inputs;
  const registry = new Registry();
  registry.setDefaultLabels({ ...inputs.identity });

  new Gauge({
    name: METRIC.stepTime,
    help: 'Mean seconds per training step over the recent window, at the scale given by the labels',
    labelNames: ['replicas', 'nodes', 'local_batch_size', 'node'],
    registers: [registry],
    collect() {
      // Only the current scale is exported: a series for an old scale would linger as a stale sample.
      this.reset();
      const mean = tracker.meanStepTime(clock());
      if (mean !== undefined) this.set({ ...tracker.shape, node: inputs.nodeName }, mean);
    },
  });
  const steps = new Counter({
    name: METRIC.steps,
    help: 'Training steps completed by this worker',
    registers: [registry],
  });
  const samples = new Counter({
    name: METRIC.samples,
    help: 'Training samples processed by this worker',
    registers: [registry],
  });
  // Present from the start at 0 so that increase() sees the very first steps.
  steps.inc(0);
  samples.inc(0);
  new Gauge({
    name: METRIC.lastProgress,
    help: 'Epoch seconds of the last report that advanced the step count',
    registers: [registry],
    collect() {
      clear(this);
      const at = tracker.lastProgressAt;
      if (at !== undefined) this.set(at);
    },
  });
  new Gauge({
    name: METRIC.resumed,
    help: 'Epoch seconds of the first step after the trainer last started or resumed from a pause (a re-formed world)',
    registers: [registry],
    collect() {
      clear(this);
      const at = tracker.resumedAt;
      if (at !== undefined) this.set(at);
    },
  });
  new Gauge({
    name: METRIC.trainerSamples,
    help: "Samples this worker has processed by the trainer's own cumulative count (survives restarts)",
    registers: [registry],
    collect() {
      clear(this);
      const count = tracker.trainerSamples;
      if (count !== undefined) this.set(count);
    },
  });
  new Gauge({
    name: METRIC.draining,
    help: '1 while the sidecar waits for the trainer to checkpoint before the pod stops',
    registers: [registry],
    collect() {
      this.set(drain.draining ? 1 : 0);
    },
  });

  registerGpuGauges(registry, gpus);
  if (inputs.cgroupPath !== undefined) registerCgroupMetrics(registry, inputs.cgroupPath, inputs.log);

  return {
    registry,
    record(increment) {
      if (increment.steps > 0) steps.inc(increment.steps);
      if (increment.samples > 0) samples.inc(increment.samples);
    },
  };
}

function registerGpuGauges(registry: Registry, gpus: GpuReader): void {
  // One nvidia-smi run feeds all three gauges of a scrape.
  let reading: Promise<GpuReading[]> | undefined;
  const gauge = (name: string, help: string, pick: (g: GpuReading) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['gpu'],
      registers: [registry],
      async collect() {
        this.reset();
        reading ??= gpus.read().finally(() => {
          reading = undefined;
        });
        for (const g of await reading) this.set({ gpu: String(g.index) }, pick(g));
      },
    });
  gauge(METRIC.gpuUtilization, 'GPU utilisation (0-1) from nvidia-smi', (g) => g.utilization);
  gauge(METRIC.gpuMemoryUsed, 'GPU memory in use, bytes', (g) => g.memoryUsedBytes);
  gauge(METRIC.gpuMemoryTotal, 'GPU memory, bytes', (g) => g.memoryTotalBytes);
}

function registerCgroupMetrics(registry: Registry, dir: string, log: (message: string) => void): void {
  let reading: ReturnType<typeof readCgroup> | undefined;
  let failure: string | undefined;
  const read = () => {
    reading ??= readCgroup(dir)
      .catch((error: unknown) => {
        const message = `reading cgroup files in ${dir}: ${error instanceof Error ? error.message : error}`;
        if (message !== failure) log(message);
        failure = message;
        return {};
      })
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };
  new Counter({
    name: METRIC.cpuUsage,
    help: 'CPU time used by the cgroup (cpu.stat usage_usec), seconds',
    registers: [registry],
    async collect() {
      const cpu = (await read()).cpuUsageSeconds;
      // The kernel's counter is the truth: export exactly its value (a prom-client counter has no set()).
      clear(this);
      if (cpu !== undefined) this.inc(cpu);
    },
  });
  const gauge = (
    name: string,
    help: string,
    pick: (r: Awaited<ReturnType<typeof readCgroup>>) => number | undefined,
  ) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        clear(this);
        const value = pick(await read());
        if (value !== undefined) this.set(value);
      },
    });
  gauge(METRIC.memoryUsage, 'memory.current of the cgroup, bytes', (r) => r.memoryUsageBytes);
  gauge(
    METRIC.memoryWorkingSet,
    'memory.current minus inactive file pages, bytes',
    (r) => r.memoryWorkingSetBytes,
  );
  gauge(
    METRIC.memoryLimit,
    'memory.max of the cgroup, bytes (absent when unlimited)',
    (r) => r.memoryLimitBytes,
  );
}
