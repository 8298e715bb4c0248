import axios, { type AxiosInstance, isAxiosError } from 'axios';
import { ApiError, MissingMetricsError } from '../errors.js';
import type { ContainerUsage, JobRef, RoleName, StepSample, WorkerStepTimes } from '../types.js';
import type { MetricsSource } from './metrics-source.js';

/**
 * Step metrics exported by the trainscaler sidecar, and container usage from cAdvisor, read through the
 * Prometheus HTTP API. Series names:
 *   trainscaler_step_time_seconds{namespace,job_kind,job_name,pod,role,worker,replicas,nodes,local_batch_size}
 *   trainscaler_samples_total{namespace,job_kind,job_name,pod}
 *   container_cpu_usage_seconds_total / container_memory_working_set_bytes{namespace,pod,container}
 */
interface MatrixResult {
  metric: Record<string, string>;
  values: [number, string][];
}
interface VectorResult {
  metric: Record<string, string>;
  value: [number, string];
}

const STEP = 60;

function selector(ref: JobRef): string {
  return `namespace="${ref.namespace}",job_kind="${ref.kind}",job_name="${ref.name}"`;
}

export class PrometheusMetricsSource implements MetricsSource {
  private readonly http: AxiosInstance;

  constructor(
    baseURL: string,
    private readonly clock: () => number,
    timeoutMs = 10_000,
  ) {
    this.http = axios.create({ baseURL, timeout: timeoutMs });
  }

  private async query<T>(path: string, params: Record<string, string | number>, what: string): Promise<T[]> {
    try {
      const response = await this.http.get<{ status: string; data?: { result: T[] }; error?: string }>(path, {
        params,
      });
      if (response.data.status !== 'success' || !response.data.data) {
        throw new ApiError(
          `Prometheus ${what}`,
          response.status,
          response.data.error ?? 'unexpected response',
        );
      }
      return response.data.data.result;
    } catch (error) {
      if (error instanceof ApiError) throw error;
      const status = isAxiosError(error) ? error.response?.status : undefined;
      const detail = isAxiosError(error)
        ? (error.response?.data?.error ?? error.code ?? error.message)
        : String(error);
      throw new ApiError(`Prometheus ${what}`, status, String(detail), { cause: error });
    }
  }

  private range(expr: string, windowSeconds: number, what: string): Promise<MatrixResult[]> {
    const end = this.clock();
    return this.query<MatrixResult>(
      '/api/v1/query_range',
      { query: expr, start: end - windowSeconds, end, step: STEP },
      what,
    );
  }

  async stepSamples(ref: JobRef, windowSeconds: number): Promise<StepSample[]> {
    const expr = `avg by (replicas, nodes, local_batch_size) (trainscaler_step_time_seconds{${selector(ref)},role="worker"})`;
    const series = await this.range(expr, windowSeconds, 'step time query');
    const samples: StepSample[] = [];
    for (const s of series) {
      const replicas = Number(s.metric.replicas);
      const nodes = Number(s.metric.nodes);
      const localBatchSize = Number(s.metric.local_batch_size);
      if (!(replicas > 0 && nodes > 0 && localBatchSize > 0)) continue;
      for (const [at, value] of s.values) {
        const stepTime = Number(value);
        if (stepTime > 0) samples.push({ replicas, nodes, localBatchSize, stepTime, at });
      }
    }
    if (samples.length === 0)
      throw new MissingMetricsError(
        `no trainscaler_step_time_seconds series for ${ref.namespace}/${ref.name}`,
      );
    return samples.sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
  }

  async containerUsage(ref: JobRef, windowSeconds: number): Promise<ContainerUsage[]> {
    const pods = `namespace="${ref.namespace}",pod=~"${ref.name}-.*",container!="",container!="POD"`;
    const [cpu, memory, roles] = await Promise.all([
      this.query<VectorResult>(
        '/api/v1/query',
        {
          query: `max by (pod) (max_over_time(rate(container_cpu_usage_seconds_total{${pods}}[5m])[${windowSeconds}s:]))`,
        },
        'CPU usage query',
      ),
      this.query<VectorResult>(
        '/api/v1/query',
        {
          query: `max by (pod) (max_over_time(container_memory_working_set_bytes{${pods}}[${windowSeconds}s]))`,
        },
        'memory usage query',
      ),
      this.query<VectorResult>(
        '/api/v1/query',
        { query: `max by (pod, role) (trainscaler_step_time_seconds{${selector(ref)}})` },
        'role query',
      ),
    ]);
    const roleOf = new Map(roles.map((r) => [r.metric.pod, r.metric.role]));
    const cpuOf = new Map(cpu.map((r) => [r.metric.pod, Number(r.value[1])]));
    const usage = memory
      .filter((m) => m.metric.pod && cpuOf.has(m.metric.pod))
      .map((m) => ({
        pod: m.metric.pod as string,
        role: roleName(roleOf.get(m.metric.pod)),
        cpuMillis: Math.round((cpuOf.get(m.metric.pod) ?? 0) * 1000),
        memoryBytes: Number(m.value[1]),
      }));
    if (usage.length === 0)
      throw new MissingMetricsError(`no container usage for ${ref.namespace}/${ref.name}`);
    return usage;
  }

  async workerStepTimes(ref: JobRef, windowSeconds: number): Promise<WorkerStepTimes[]> {
    const expr = `max by (pod, worker) (trainscaler_step_time_seconds{${selector(ref)},role="worker"})`;
    const series = await this.range(expr, windowSeconds, 'per-worker step time query');
    if (series.length === 0)
      throw new MissingMetricsError(`no per-worker step times for ${ref.namespace}/${ref.name}`);
    return series.map((s) => {
      const entry: WorkerStepTimes = {
        worker: Number(s.metric.worker ?? 0),
        samples: s.values.map(([at, v]) => ({ at, stepTime: Number(v) })).filter((x) => x.stepTime > 0),
      };
      if (s.metric.pod) entry.pod = s.metric.pod;
      return entry;
    });
  }

  async samplesProcessed(ref: JobRef): Promise<number | undefined> {
    const result = await this.query<VectorResult>(
      '/api/v1/query',
      { query: `sum(trainscaler_samples_total{${selector(ref)}})` },
      'progress query',
    );
    const value = result[0]?.value[1];
    return value === undefined ? undefined : Number(value);
  }
}

function roleName(label: string | undefined): RoleName {
  switch (label) {
    case 'ps':
      return 'PS';
    case 'master':
      return 'Master';
    case 'chief':
      return 'Chief';
    default:
      return 'Worker';
  }
}
