import axios, { AxiosError, AxiosHeaders, type AxiosInstance, isAxiosError } from 'axios';
import { ApiError, MissingMetricsError } from '../errors.js';
import { STRAGGLER_QUERY_STEP_SECONDS } from '../policies/stragglers.js';
import { redactUrls } from '../redact-url.js';
import type { ContainerUsage, JobRef, RoleName, StepSample, WorkerStepTimes } from '../types.js';
import type { MetricsSource } from './metrics-source.js';

/**
 * The series the trainscaler sidecar (infra/sidecar) exports, read here through the Prometheus HTTP API.
 * Every series carries namespace, job_kind, job_name, pod, role (lower case) and worker; the step time also
 * carries the scale it was measured at: replicas, nodes, local_batch_size (empty when unknown) and node.
 * A test checks these names against the sidecar's, so the two cannot drift apart.
 */
export const SIDECAR_SERIES = {
  stepTime: 'trainscaler_step_time_seconds',
  samples: 'trainscaler_samples_total',
  trainerSamples: 'trainscaler_trainer_samples',
  resumed: 'trainscaler_resumed_timestamp_seconds',
  paused: 'trainscaler_paused_timestamp_seconds',
  cpuUsage: 'trainscaler_cgroup_cpu_usage_seconds_total',
  memoryWorkingSet: 'trainscaler_cgroup_memory_working_set_bytes',
} as const;

/** cAdvisor's series (kubelet), used for container usage when the sidecar exports no cgroup readings. */
const CADVISOR = {
  cpu: 'container_cpu_usage_seconds_total',
  memory: 'container_memory_working_set_bytes',
} as const;

export interface PrometheusSourceOptions {
  /** Per request. */
  timeoutMs?: number;
  /** Resolution of range queries, seconds (widened for long windows, see maxPointsPerSeries). */
  stepSeconds?: number;
  /** Prometheus refuses more than 11,000 points per series; the model needs far fewer. */
  maxPointsPerSeries?: number;
  /**
   * Window of rate() over the CPU counter; the peak of these rates over the window is the usage. Short,
   * because rate() divides by the whole window: over a pod younger than the window it under-reports, and
   * an under-reported peak would shrink the CPU request.
   */
  rateWindowSeconds?: number;
}

interface MatrixResult {
  metric: Record<string, string | undefined>;
  values: [number, string][];
}
interface VectorResult {
  metric: Record<string, string | undefined>;
  value: [number, string];
}
interface PrometheusResponse {
  status?: string;
  data?: { resultType?: string; result?: unknown };
  errorType?: string;
  error?: string;
}

/** PromQL string literal: the label values come from validated job refs, but quoting must not depend on it. */
function literal(value: string): string {
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n')}"`;
}

/**
 * A name matched literally inside a regex matcher (`=~`): every RE2 metacharacter escaped. Names of
 * StatefulSets may hold dots, and an unescaped `.` would match any character, i.e. another job's pods.
 * The result still goes through literal(), which doubles the backslashes for the PromQL string.
 */
export function regexLiteral(value: string): string {
  return value.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

/**
 * The names the job's controller gives its pods: `<job>-<role>-<index>` (training-operator),
 * `<name>-<ordinal>` (StatefulSet), `<job>-<index>-<suffix>` (indexed Job),
 * `<jobset>-<replicated job>-<job index>-<pod index>-<suffix>` (JobSet; a TrainJob's replicated job is `node`).
 * Exact, not a prefix: job `train` must not read `train-2`'s pods (`train-2-worker-0`), except for a JobSet,
 * whose replicated job's name the ref does not carry. Prometheus anchors the regex at both ends. Callers still
 * keep only the pods the job owns on the API server (ownedByJob), since a name is not proof of ownership.
 */
export function podNamePattern(ref: JobRef): string {
  const name = regexLiteral(ref.name);
  const suffix = '[a-z0-9]{5}';
  switch (ref.kind) {
    case 'StatefulSet':
      return `${name}-[0-9]+`;
    case 'Job':
      return `${name}-[0-9]+-${suffix}`;
    case 'JobSet':
      return `${name}-[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9]+-[0-9]+-${suffix}`;
    case 'TrainJob':
      return `${name}-node-[0-9]+-[0-9]+-${suffix}`;
    default:
      return `${name}-(worker|master|ps|chief|evaluator)-[0-9]+`;
  }
}

/**
 * The job's series, by the identity Prometheus gives them (infra/prometheus/prometheus.yml): a TrainJob's pods
 * carry no label of it, only their JobSet's, which Trainer names after the TrainJob: its series are the
 * JobSet's of the same name (the caller still keeps only pods the TrainJob owns, through that JobSet).
 */
export function seriesSelector(ref: JobRef): string {
  const kind = ref.kind === 'TrainJob' ? 'JobSet' : ref.kind;
  return `namespace=${literal(ref.namespace)},job_kind=${literal(kind)},job_name=${literal(ref.name)}`;
}

const selector = seriesSelector;

/** A count from a label; an absent or empty label (Number gives NaN or 0) is no count. */
function positiveCount(label: string | undefined): number | undefined {
  const n = Number(label);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

function job(ref: JobRef): string {
  return `${ref.kind} ${ref.namespace}/${ref.name}`;
}

/**
 * What the HTTP client said, as the cause of an ApiError, without what holds the URL's credentials: an
 * AxiosError carries its config (the URL, the basic-auth pair) and its request (the Authorization header),
 * and a TypeError of a malformed URL its input, all of which a log or an uncaught-error print would show.
 */
export function scrubbedCause(error: unknown): Error {
  if (!isAxiosError(error)) return new Error(redactUrls(String(error)));
  const copy = new AxiosError(redactUrls(error.message), error.code);
  const response = error.response;
  if (response) {
    const { status, statusText, headers, data } = response;
    copy.response = { status, statusText, headers, data, config: { headers: new AxiosHeaders() } };
    copy.status = status;
  }
  return copy;
}

export class PrometheusMetricsSource implements MetricsSource {
  private readonly http: AxiosInstance;
  private readonly stepSeconds: number;
  private readonly maxPoints: number;
  private readonly rateWindow: number;
  private readonly timeoutMs: number;
  /** The base URL as messages show it: without userinfo or query values. */
  private readonly shownURL: string;

  constructor(
    baseURL: string,
    private readonly clock: () => number,
    options: PrometheusSourceOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.stepSeconds = options.stepSeconds ?? 60;
    this.maxPoints = options.maxPointsPerSeries ?? 1000;
    this.rateWindow = options.rateWindowSeconds ?? 60;
    this.shownURL = redactUrls(baseURL);
    // clarifyTimeoutError: a timeout is ETIMEDOUT, not ECONNABORTED (shared with aborted requests).
    this.http = axios.create({
      baseURL,
      timeout: this.timeoutMs,
      transitional: { clarifyTimeoutError: true },
    });
  }

  async stepSamples(ref: JobRef, windowSeconds: number): Promise<StepSample[]> {
    const workers = `${SIDECAR_SERIES.stepTime}{${selector(ref)},role="worker"}`;
    // One end for the three queries, so that their points share timestamps and can be joined.
    const end = this.clock();
    const [means, nodeCounts, workerCounts] = await Promise.all([
      this.range(
        `avg by (replicas, nodes, local_batch_size) (${workers})`,
        windowSeconds,
        'step time query',
        end,
      ),
      // Where the sidecars were not told the node count, count the distinct nodes their pods report.
      this.range(
        `count by (replicas, local_batch_size) (count by (replicas, local_batch_size, node) (${SIDECAR_SERIES.stepTime}{${selector(ref)},role="worker",node!=""}))`,
        windowSeconds,
        'node count query',
        end,
      ),
      // Where they were not told the replica count, count the workers reporting.
      this.range(
        `count by (replicas, local_batch_size) (${workers})`,
        windowSeconds,
        'worker count query',
        end,
      ),
    ]);
    // JSON: an absent label (null) and any label value stay apart, whatever characters the values hold.
    const key = (m: MatrixResult['metric'], at: number) =>
      JSON.stringify([m.replicas, m.local_batch_size, at]);
    const pointsOf = (series: MatrixResult[]) => {
      const map = new Map<string, number>();
      for (const s of series) for (const [at, v] of s.values) map.set(key(s.metric, at), Number(v));
      return map;
    };
    const nodesAt = pointsOf(nodeCounts);
    const workersAt = pointsOf(workerCounts);

    const samples: (StepSample & { at: number })[] = [];
    for (const s of means) {
      const localBatchSize = positiveCount(s.metric.local_batch_size);
      if (localBatchSize === undefined) continue; // a step time at an unknown batch size cannot be modelled
      for (const [at, value] of s.values) {
        const stepTime = Number(value);
        const replicas = positiveCount(s.metric.replicas) ?? workersAt.get(key(s.metric, at));
        const nodes = positiveCount(s.metric.nodes) ?? nodesAt.get(key(s.metric, at));
        if (!(stepTime > 0 && Number.isFinite(stepTime)) || !replicas || !nodes) continue;
        samples.push({ replicas, nodes: Math.min(nodes, replicas), localBatchSize, stepTime, at });
      }
    }
    if (samples.length === 0)
      throw new MissingMetricsError(
        `no ${SIDECAR_SERIES.stepTime} series with a known scale for ${job(ref)} in the last ${windowSeconds} s`,
      );
    return samples.sort((a, b) => a.at - b.at);
  }

  async containerUsage(ref: JobRef, windowSeconds: number): Promise<ContainerUsage[]> {
    const sidecar = await this.usageQueries(
      `max by (pod, role) (max_over_time(rate(${SIDECAR_SERIES.cpuUsage}{${selector(ref)}}[${this.rateWindow}s])[${windowSeconds}s:]))`,
      `max by (pod, role) (max_over_time(${SIDECAR_SERIES.memoryWorkingSet}{${selector(ref)}}[${windowSeconds}s]))`,
      ref,
    );
    if (sidecar.length > 0) return sidecar;
    const pods = `namespace=${literal(ref.namespace)},pod=~${literal(podNamePattern(ref))},container!="",container!="POD"`;
    const cadvisor = await this.usageQueries(
      `max by (pod) (max_over_time(rate(${CADVISOR.cpu}{${pods}}[${this.rateWindow}s])[${windowSeconds}s:]))`,
      `max by (pod) (max_over_time(${CADVISOR.memory}{${pods}}[${windowSeconds}s]))`,
      ref,
    );
    if (cadvisor.length === 0)
      throw new MissingMetricsError(`no container usage (sidecar cgroup or cAdvisor series) for ${job(ref)}`);
    return cadvisor;
  }

  async workerStepTimes(ref: JobRef, windowSeconds: number): Promise<WorkerStepTimes[]> {
    // By node too, so that the straggler policy can name a node on which the job's pods keep straggling; a
    // replaced pod keeps its name, so its series on the old and new node are joined back into one worker.
    const expr = `max by (pod, worker, node) (${SIDECAR_SERIES.stepTime}{${selector(ref)},role="worker"})`;
    const step = Math.min(this.stepSeconds, STRAGGLER_QUERY_STEP_SECONDS);
    // The straggler policy needs the resolution more than the length: at most maxPoints points at its step.
    const window = Math.min(windowSeconds, step * this.maxPoints);
    const series = await this.range(expr, window, 'per-worker step time query', this.clock(), step);
    const byWorker = new Map<string, WorkerStepTimes>();
    for (const s of series) {
      const worker = Number(s.metric.worker ?? 0);
      const key = JSON.stringify([s.metric.pod, worker]);
      const entry = byWorker.get(key) ?? { worker, samples: [] };
      if (s.metric.pod) entry.pod = s.metric.pod;
      for (const [at, v] of s.values) {
        const stepTime = Number(v);
        if (!(stepTime > 0 && Number.isFinite(stepTime))) continue;
        entry.samples.push({ at, stepTime, ...(s.metric.node ? { node: s.metric.node } : {}) });
      }
      byWorker.set(key, entry);
    }
    const workers = [...byWorker.values()].filter((w) => w.samples.length > 0);
    for (const w of workers) w.samples.sort((a, b) => a.at - b.at);
    if (workers.length === 0) throw new MissingMetricsError(`no per-worker step times for ${job(ref)}`);
    return workers;
  }

  async samplesProcessed(ref: JobRef): Promise<number | undefined> {
    // The trainer's own counts first (they survive pod restarts), else what the sidecars counted.
    for (const series of [SIDECAR_SERIES.trainerSamples, SIDECAR_SERIES.samples]) {
      const result = await this.instant(`sum(${series}{${selector(ref)}})`, 'progress query');
      const value = Number(result[0]?.value[1]); // NaN when there is no series
      if (Number.isFinite(value)) return value;
    }
    return undefined;
  }

  /**
   * The earliest first-step-after-a-pause any of the job's workers reported after `since` (each sidecar's
   * trainscaler_resumed_timestamp_seconds holds the exact epoch second, so the scrape interval does not blur
   * it): the first step of the world re-formed after a rescale written at `since`. Looked for over at most
   * maxPointsPerSeries scrape steps back.
   */
  async firstStepAfterPause(ref: JobRef, since: number): Promise<number | undefined> {
    const now = this.clock();
    if (!(now > since)) return undefined;
    const step = STRAGGLER_QUERY_STEP_SECONDS;
    const window = Math.min(Math.ceil(now - since) + step, step * this.maxPoints);
    const resumed = `${SIDECAR_SERIES.resumed}{${selector(ref)},role="worker"} > ${since}`;
    const result = await this.instant(
      `min(min_over_time((${resumed})[${window}s:${step}s]))`,
      'rescale pause query',
    );
    const at = Number(result[0]?.value[1]); // NaN when no worker resumed since
    return Number.isFinite(at) && at > since ? at : undefined;
  }

  /**
   * Seconds the job trained not at all in the pause that its workers ended after `since`: each sidecar exports
   * the exact last step before its latest pause (trainscaler_paused_timestamp_seconds) beside the first step
   * after it; the longest such pause of the workers that resumed after `since` and had trained before it (a
   * joining worker only started). Reads the workers' latest pauses: one after a later rescale would replace it.
   */
  async pauseEndedAfter(ref: JobRef, since: number): Promise<number | undefined> {
    if (!(this.clock() > since)) return undefined;
    const worker = `{${selector(ref)},role="worker"}`;
    const result = await this.instant(
      `max((${SIDECAR_SERIES.resumed}${worker} > ${since}) - ${SIDECAR_SERIES.paused}${worker})`,
      'rescale pause length query',
    );
    const seconds = Number(result[0]?.value[1]); // NaN when no worker resumed from a pause since
    return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined;
  }

  private async usageQueries(cpuExpr: string, memoryExpr: string, ref: JobRef): Promise<ContainerUsage[]> {
    const [cpu, memory, roles] = await Promise.all([
      this.instant(cpuExpr, 'CPU usage query'),
      this.instant(memoryExpr, 'memory usage query'),
      this.instant(`max by (pod, role) (${SIDECAR_SERIES.stepTime}{${selector(ref)}})`, 'role query'),
    ]);
    const roleOf = new Map<string, string | undefined>();
    for (const r of [...roles, ...cpu, ...memory])
      if (r.metric.pod && r.metric.role) roleOf.set(r.metric.pod, r.metric.role);
    const cpuOf = new Map(cpu.map((r) => [r.metric.pod, Number(r.value[1])]));
    const memoryOf = new Map(memory.map((r) => [r.metric.pod, Number(r.value[1])]));
    const pods = new Set([...cpuOf.keys(), ...memoryOf.keys()].filter((p): p is string => Boolean(p)));
    return [...pods].sort().map((pod) => ({
      pod,
      role: roleName(roleOf.get(pod)),
      // A missing reading is 0, which right-sizing treats as "no data" for that resource.
      cpuMillis: Math.round(finiteOr0(cpuOf.get(pod)) * 1000),
      memoryBytes: finiteOr0(memoryOf.get(pod)),
    }));
  }

  private range(
    expr: string,
    windowSeconds: number,
    what: string,
    end = this.clock(),
    stepSeconds = this.stepSeconds,
  ): Promise<MatrixResult[]> {
    const step = Math.max(stepSeconds, Math.ceil(windowSeconds / this.maxPoints));
    return this.query<MatrixResult>(
      '/api/v1/query_range',
      { query: expr, start: end - windowSeconds, end, step },
      'matrix',
      what,
    );
  }

  private instant(expr: string, what: string): Promise<VectorResult[]> {
    return this.query<VectorResult>('/api/v1/query', { query: expr, time: this.clock() }, 'vector', what);
  }

  private async query<T>(
    path: string,
    params: Record<string, string | number>,
    resultType: 'matrix' | 'vector',
    what: string,
  ): Promise<T[]> {
    const label = `Prometheus ${what}`;
    let body: PrometheusResponse | null;
    let status: number;
    try {
      const response = await this.http.get<PrometheusResponse>(path, { params });
      body = response.data;
      status = response.status;
    } catch (error) {
      throw new ApiError(
        label,
        isAxiosError(error) ? error.response?.status : undefined,
        redactUrls(this.describe(error)),
        { cause: scrubbedCause(error) },
      );
    }
    // A body that is not JSON arrives as a string: it has no status either.
    if (body?.status !== 'success')
      throw new ApiError(label, status, body?.error ?? `unexpected response from ${this.shownURL}${path}`);
    const data = body.data;
    if (data?.resultType !== resultType || !Array.isArray(data.result))
      throw new ApiError(label, status, `expected a ${resultType} result, got ${data?.resultType ?? 'none'}`);
    return data.result as T[];
  }

  /** Says which failure it was: unreachable, timed out, or refused by Prometheus (with its own words). */
  private describe(error: unknown): string {
    if (!isAxiosError(error)) return String(error);
    const body = error.response?.data as PrometheusResponse | undefined;
    if (error.response) return body?.error ? `${body.errorType ?? 'error'}: ${body.error}` : error.message;
    if (error.code === 'ETIMEDOUT') return `no answer from ${this.shownURL} within ${this.timeoutMs} ms`;
    return `${this.shownURL} unreachable (${error.code ?? error.message})`;
  }
}

function finiteOr0(value = 0): number {
  return Number.isFinite(value) ? Math.max(value, 0) : 0;
}

function roleName(label: string | undefined): RoleName {
  switch (label) {
    case 'ps':
      return 'PS';
    case 'master':
      return 'Master';
    case 'chief':
      return 'Chief';
    case 'evaluator':
      return 'Evaluator';
    default:
      return 'Worker';
  }
}
