// RECORDED metrics, not live ones: kwok pods run no trainer, so there are no step times to scrape here.
// The live path (sidecar -> Prometheus -> Alertmanager) is tested in test/metrics/. This replays step
// samples given by the test, so that the cluster side of a decision can be checked on a real API server.
import { MissingMetricsError } from '../../../lib/errors.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import type { ContainerUsage, JobRef, StepSample, WorkerStepTimes } from '../../../lib/types.js';

export class RecordedMetricsSource implements MetricsSource {
  constructor(
    private readonly samples: Map<string, StepSample[]>,
    /** Samples processed so far per job (with trainscaler.io/target-samples: a known remaining time). */
    private readonly processed: Map<string, number> = new Map(),
    /** Per-worker step times by job key, for the straggler policy; none by default. */
    private readonly workers: Map<string, WorkerStepTimes[]> = new Map(),
  ) {}

  static key(ref: Pick<JobRef, 'namespace' | 'name'>): string {
    return `${ref.namespace}/${ref.name}`;
  }

  async stepSamples(ref: JobRef): Promise<StepSample[]> {
    const samples = this.samples.get(RecordedMetricsSource.key(ref));
    if (!samples || samples.length === 0)
      throw new MissingMetricsError(`no recorded samples for ${ref.name}`);
    return samples;
  }

  async containerUsage(ref: JobRef): Promise<ContainerUsage[]> {
    throw new MissingMetricsError(`no recorded usage for ${ref.name}`);
  }

  async workerStepTimes(ref: JobRef): Promise<WorkerStepTimes[]> {
    const series = this.workers.get(RecordedMetricsSource.key(ref));
    if (!series || series.length === 0)
      throw new MissingMetricsError(`no recorded per-worker times for ${ref.name}`);
    return series;
  }

  async samplesProcessed(ref: JobRef): Promise<number | undefined> {
    return this.processed.get(RecordedMetricsSource.key(ref));
  }
}

/** Step times of a job that scales almost linearly (compute-bound), observed at 1 and 2 workers on one node. */
export function wellScalingSamples(now: number): StepSample[] {
  const out: StepSample[] = [];
  for (let i = 0; i < 10; i++) {
    out.push({
      replicas: 1,
      nodes: 1,
      localBatchSize: 64,
      stepTime: 0.2 * (1 + 0.01 * (i % 3)),
      syncTime: 0,
      at: now - 3600 + i * 60,
    });
    out.push({
      replicas: 2,
      nodes: 1,
      localBatchSize: 64,
      stepTime: 0.205 * (1 + 0.01 * (i % 3)),
      syncTime: 0.005,
      at: now - 1800 + i * 60,
    });
  }
  return out;
}
