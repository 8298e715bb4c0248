import axios, { AxiosError, AxiosHeaders, type AxiosInstance, isAxiosError } from 'axios';
import {
  ApiError,
  IncompleteMetricsError,
  type IncompleteMetricsReason,
  MissingMetricsError,
} from '../errors.js';
import { STRAGGLER_QUERY_STEP_SECONDS } from '../policies/stragglers.js';
import { redactUrls } from '../redact-url.js';
import type { ContainerUsage, JobRef, RoleName, StepSample, WorkerStepTimes } from '../types.js';
import { type JobReading, type JobReadings, jobKey, type SinceAsk, settle } from './job-readings.js';
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
  warnings?: unknown;
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

/** Prometheus answered, and said in its warnings that the answer is partial. */
class PartialAnswerError extends ApiError {
  constructor(
    what: string,
    status: number,
    readonly detail: string,
  ) {
    super(what, status, detail);
  }
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
    const samples = samplesFrom(means, nodeCounts, workerCounts);
    if (samples.length === 0)
      throw new MissingMetricsError(
        `no ${SIDECAR_SERIES.stepTime} series with a known scale for ${job(ref)} in the last ${windowSeconds} s`,
      );
    return samples;
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
    const workers = workersFrom(series);
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

  // ---- Batch reads: every asked job in a fixed number of queries -------------------------------------
  //
  // Each query selects the sidecar series by name only (every series of that name is a trainscaler-managed
  // pod's), groups `by` the job's identity labels, and is split per job here; the jobs not asked about are
  // dropped. A query refused or marked incomplete by Prometheus is every asked job's IncompleteMetricsError.

  async stepSamplesOfJobs(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<StepSample[]>> {
    const by = JOB_IDENTITY_LABELS;
    const end = this.clock();
    return this.batch(
      refs,
      (part) => {
        const workers = series(SIDECAR_SERIES.stepTime, 'role="worker"', part);
        return Promise.all([
          this.batchRange(
            `avg by (${by}, replicas, nodes, local_batch_size) (${workers})`,
            windowSeconds,
            'step time query',
            refs.length,
            end,
          ),
          this.batchRange(
            `count by (${by}, replicas, local_batch_size) (count by (${by}, replicas, local_batch_size, node) (${series(SIDECAR_SERIES.stepTime, 'role="worker",node!=""', part)}))`,
            windowSeconds,
            'node count query',
            refs.length,
            end,
          ),
          this.batchRange(
            `count by (${by}, replicas, local_batch_size) (${workers})`,
            windowSeconds,
            'worker count query',
            refs.length,
            end,
          ),
        ]).then(
          ([means, nodes, counts]) => [byIdentity(means), byIdentity(nodes), byIdentity(counts)] as const,
        );
      },
      (ref, [means, nodes, counts]) => {
        const id = identityOf(ref);
        const samples = samplesFrom(means.get(id) ?? [], nodes.get(id) ?? [], counts.get(id) ?? []);
        if (samples.length === 0)
          throw new MissingMetricsError(
            `no ${SIDECAR_SERIES.stepTime} series with a known scale for ${job(ref)} in the last ${windowSeconds} s`,
          );
        return samples;
      },
    );
  }

  async containerUsageOfJobs(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<ContainerUsage[]>> {
    const by = JOB_IDENTITY_LABELS;
    const n = refs.length;
    const sidecar = await this.batch(
      refs,
      (part) =>
        Promise.all([
          this.batchInstant(
            `max by (${by}, pod, role) (max_over_time(rate(${series(SIDECAR_SERIES.cpuUsage, part)}[${this.rateWindow}s])[${windowSeconds}s:]))`,
            'CPU usage query',
            n,
          ),
          this.batchInstant(
            `max by (${by}, pod, role) (max_over_time(${series(SIDECAR_SERIES.memoryWorkingSet, part)}[${windowSeconds}s]))`,
            'memory usage query',
            n,
          ),
          this.batchInstant(
            `max by (${by}, pod, role) (${series(SIDECAR_SERIES.stepTime, part)})`,
            'role query',
            n,
          ),
        ]).then(([cpu, memory, roles]) => [byIdentity(cpu), byIdentity(memory), byIdentity(roles)] as const),
      (ref, [cpu, memory, roles]) => {
        const id = identityOf(ref);
        return {
          usage: usageFrom(cpu.get(id) ?? [], memory.get(id) ?? [], roles.get(id) ?? []),
          roles: roles.get(id) ?? [],
        };
      },
    );
    // Jobs without the sidecar's cgroup series: cAdvisor's, in the namespaces of those jobs only (cAdvisor has
    // a series per container of the cluster), split per job by its pods' names as the per-job query is.
    const fallback = refs.filter((ref) => {
      const read = sidecar.get(jobKey(ref));
      return read?.ok === true && read.value.usage.length === 0;
    });
    const cadvisor =
      fallback.length === 0
        ? undefined
        : await settle(() => {
            const namespaces = [...new Set(fallback.map((r) => r.namespace))].sort().map(regexLiteral);
            const pods = `namespace=~${literal(namespaces.join('|'))},container!="",container!="POD"`;
            return Promise.all([
              this.batchInstant(
                `max by (namespace, pod) (max_over_time(rate(${CADVISOR.cpu}{${pods}}[${this.rateWindow}s])[${windowSeconds}s:]))`,
                'CPU usage query',
                fallback.length,
              ),
              this.batchInstant(
                `max by (namespace, pod) (max_over_time(${CADVISOR.memory}{${pods}}[${windowSeconds}s]))`,
                'memory usage query',
                fallback.length,
              ),
            ]);
          });
    const out: JobReadings<ContainerUsage[]> = new Map();
    for (const ref of refs) {
      const key = jobKey(ref);
      const read = sidecar.get(key);
      if (!read?.ok) {
        out.set(
          key,
          read ?? { ok: false, error: new MissingMetricsError(`no container usage for ${job(ref)}`) },
        );
        continue;
      }
      if (read.value.usage.length > 0 || !cadvisor) {
        out.set(key, { ok: true, value: read.value.usage });
        continue;
      }
      if (!cadvisor.ok) {
        out.set(key, cadvisor);
        continue;
      }
      const own = podNameMatcher(ref);
      const mine = (r: VectorResult) => r.metric.namespace === ref.namespace && own.test(r.metric.pod ?? '');
      const [cpu, memory] = cadvisor.value;
      // The per-job query's own labels: the pod's alone (the namespace is the job's).
      const strip = (r: VectorResult): VectorResult => ({ metric: { pod: r.metric.pod }, value: r.value });
      const usage = usageFrom(cpu.filter(mine).map(strip), memory.filter(mine).map(strip), read.value.roles);
      out.set(
        key,
        usage.length > 0
          ? { ok: true, value: usage }
          : {
              ok: false,
              error: new MissingMetricsError(
                `no container usage (sidecar cgroup or cAdvisor series) for ${job(ref)}`,
              ),
            },
      );
    }
    return out;
  }

  async workerStepTimesOfJobs(
    refs: readonly JobRef[],
    windowSeconds: number,
  ): Promise<JobReadings<WorkerStepTimes[]>> {
    const expr = (part: string) =>
      `max by (${JOB_IDENTITY_LABELS}, pod, worker, node) (${series(SIDECAR_SERIES.stepTime, 'role="worker"', part)})`;
    const step = Math.min(this.stepSeconds, STRAGGLER_QUERY_STEP_SECONDS);
    const window = Math.min(windowSeconds, step * this.maxPoints);
    return this.batch(
      refs,
      async (part) =>
        byIdentity(
          await this.batchRange(
            expr(part),
            window,
            'per-worker step time query',
            refs.length,
            this.clock(),
            step,
          ),
        ),
      (ref, series) => {
        const workers = workersFrom(series.get(identityOf(ref)) ?? []);
        if (workers.length === 0) throw new MissingMetricsError(`no per-worker step times for ${job(ref)}`);
        return workers;
      },
    );
  }

  async samplesProcessedOfJobs(refs: readonly JobRef[]): Promise<JobReadings<number | undefined>> {
    const out: JobReadings<number | undefined> = new Map();
    if (refs.length === 0) return out;
    const sumOf = (name: string) =>
      this.inParts(async (part) =>
        byIdentity(
          await this.batchInstant(
            `sum by (${JOB_IDENTITY_LABELS}) (${series(name, part)})`,
            'progress query',
            refs.length,
          ),
        ),
      );
    // Both at once; a job whose trainer reports needs only the first, as in the per-job read.
    const [trainers, counters] = await Promise.all([
      sumOf(SIDECAR_SERIES.trainerSamples),
      sumOf(SIDECAR_SERIES.samples),
    ]);
    for (const ref of refs) {
      const id = identityOf(ref);
      const trainer = trainers(ref);
      const sidecars = counters(ref);
      const value = (read: typeof trainer) =>
        read.ok ? Number(read.value.get(id)?.[0]?.value[1]) : Number.NaN; // NaN when there is no series
      if (!trainer.ok) out.set(jobKey(ref), trainer);
      else if (Number.isFinite(value(trainer))) out.set(jobKey(ref), { ok: true, value: value(trainer) });
      else if (!sidecars.ok) out.set(jobKey(ref), sidecars);
      else {
        const counted = value(sidecars);
        out.set(jobKey(ref), { ok: true, value: Number.isFinite(counted) ? counted : undefined });
      }
    }
    return out;
  }

  /**
   * firstStepAfterPause of each job, in one query: the distinct resume instants each job's workers reported
   * over the longest window asked (count_values turns each into a label, at the same subquery steps as the
   * per-job query), the earliest after each job's own `since` kept. count_values `without` the pod's own
   * labels, not `by` the job's: Prometheus 2.42 drops a count_values' `by` labels inside a subquery. A resume after `since` is seen only at
   * steps after `since`, all inside the job's own window: the longer window changes no job's answer.
   */
  async firstStepAfterPauseOfJobs(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>> {
    const now = this.clock();
    const step = STRAGGLER_QUERY_STEP_SECONDS;
    const due = asks.filter((a) => now > a.since);
    const window = Math.min(
      Math.max(0, ...due.map((a) => Math.ceil(now - a.since) + step)),
      step * this.maxPoints,
    );
    return this.batchSince(
      asks,
      async (part) =>
        byIdentity(
          await this.batchInstant(
            `max by (${JOB_IDENTITY_LABELS}, at) (max_over_time(count_values without (${PER_POD_LABELS}) ("at", ${series(SIDECAR_SERIES.resumed, 'role="worker"', part)})[${window}s:${step}s]))`,
            'rescale pause query',
            due.length,
          ),
        ),
      (ask, seen) => {
        const after = (seen.get(identityOf(ask.ref)) ?? [])
          .map((r) => Number(r.metric.at))
          .filter((at) => Number.isFinite(at) && at > ask.since);
        return after.length > 0 ? Math.min(...after) : undefined;
      },
    );
  }

  /**
   * pauseEndedAfter of each job, in one query: each worker's pause length labelled with the instant it ended
   * (its resume, turned into a label by count_values and joined back onto the pause), the longest per job and
   * resume instant; each job keeps those that ended after its own `since`, as the per-job query's `> since`.
   */
  async pauseEndedAfterOfJobs(asks: readonly SinceAsk[]): Promise<JobReadings<number | undefined>> {
    const now = this.clock();
    const due = asks.filter((a) => now > a.since);
    return this.batchSince(
      asks,
      async (part) => {
        const resumed = series(SIDECAR_SERIES.resumed, 'role="worker"', part);
        const paused = series(SIDECAR_SERIES.paused, 'role="worker"', part);
        return byIdentity(
          await this.batchInstant(
            `max by (${JOB_IDENTITY_LABELS}, at) ((${resumed} - ${paused}) * ignoring(at) group_left(at) count_values without () ("at", ${resumed}))`,
            'rescale pause length query',
            due.length,
          ),
        );
      },
      (ask, pauses) => {
        const lengths = (pauses.get(identityOf(ask.ref)) ?? [])
          .filter((r) => Number(r.metric.at) > ask.since)
          .map((r) => Number(r.value[1]));
        const seconds = lengths.length > 0 ? Math.max(...lengths) : Number.NaN;
        return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined;
      },
    );
  }

  /** Every ask's reading of one batch read: undefined where `since` is not past (no query then, as per job). */
  private async batchSince<Q>(
    asks: readonly SinceAsk[],
    read: (part: string) => Promise<Q>,
    answer: (ask: SinceAsk, answered: Q) => number | undefined,
  ): Promise<JobReadings<number | undefined>> {
    const now = this.clock();
    const due = asks.filter((a) => now > a.since);
    const out: JobReadings<number | undefined> = new Map();
    const answers = due.length > 0 ? await this.inParts(read) : undefined;
    for (const ask of asks) {
      const key = jobKey(ask.ref);
      if (out.has(key)) continue;
      const answered = answers?.(ask.ref);
      if (!(now > ask.since) || !answered) out.set(key, { ok: true, value: undefined });
      else if (!answered.ok) out.set(key, answered);
      else out.set(key, await settle(async () => answer(ask, answered.value)));
    }
    return out;
  }

  /** Every job's reading of one batch read: its answer, or the read's error for each of them. */
  private async batch<Q, T>(
    refs: readonly JobRef[],
    read: (part: string) => Promise<Q>,
    answer: (ref: JobRef, answered: Q) => T,
  ): Promise<JobReadings<T>> {
    const out: JobReadings<T> = new Map();
    if (refs.length === 0) return out;
    const answers = await this.inParts(read);
    for (const ref of refs) {
      const key = jobKey(ref);
      if (out.has(key)) continue;
      const answered = answers(ref);
      out.set(key, answered.ok ? await settle(async () => answer(ref, answered.value)) : answered);
    }
    return out;
  }

  /**
   * One batch read of every job (`read('')`); when Prometheus refuses it for too many samples, the same read
   * again in NAME_PARTS parts, one after the other, each job answered by its part (a part refused again is the
   * error of its jobs only). At most 1 + NAME_PARTS.length reads, whatever the number of jobs.
   */
  private async inParts<Q>(read: (part: string) => Promise<Q>): Promise<(ref: JobRef) => JobReading<Q>> {
    const whole = await settle(() => read(''));
    const refused =
      !whole.ok && whole.error instanceof IncompleteMetricsError && whole.error.reason === 'too-many-samples';
    if (!refused) return () => whole;
    const parts: JobReading<Q>[] = [];
    for (const part of NAME_PARTS) parts.push(await settle(() => read(part.matcher)));
    return (ref) => parts[NAME_PARTS.findIndex((p) => p.holds.test(ref.name))] ?? whole;
  }

  private batchRange(
    expr: string,
    windowSeconds: number,
    what: string,
    jobs: number,
    end: number,
    stepSeconds = this.stepSeconds,
  ): Promise<MatrixResult[]> {
    const step = Math.max(stepSeconds, Math.ceil(windowSeconds / this.maxPoints));
    return this.complete<MatrixResult>(
      '/api/v1/query_range',
      { query: expr, start: end - windowSeconds, end, step },
      'matrix',
      what,
      jobs,
    );
  }

  private batchInstant(expr: string, what: string, jobs: number): Promise<VectorResult[]> {
    return this.complete<VectorResult>(
      '/api/v1/query',
      { query: expr, time: this.clock() },
      'vector',
      what,
      jobs,
    );
  }

  /**
   * A batch query, POSTed (a long query stays out of the URL), whose answer is used only when whole: a refusal
   * (too many samples, Prometheus's query timeout), no answer in time, or an answer with warnings (Prometheus
   * says it is partial) is an IncompleteMetricsError for the `jobs` asked.
   */
  private async complete<T>(
    path: string,
    params: Record<string, string | number>,
    resultType: 'matrix' | 'vector',
    what: string,
    jobs: number,
  ): Promise<T[]> {
    const label = `Prometheus batch ${what}`;
    try {
      return await this.query<T>(path, params, resultType, label, 'POST');
    } catch (error) {
      if (error instanceof PartialAnswerError)
        throw new IncompleteMetricsError(label, error.status, 'truncated', jobs, error.detail);
      const cause = error instanceof ApiError ? error.cause : undefined;
      const reason = incompleteReason(cause);
      if (!reason) throw error;
      throw new IncompleteMetricsError(
        label,
        error instanceof ApiError ? error.status : undefined,
        reason,
        jobs,
        redactUrls(this.describe(cause)),
        { cause },
      );
    }
  }

  private async usageQueries(cpuExpr: string, memoryExpr: string, ref: JobRef): Promise<ContainerUsage[]> {
    const [cpu, memory, roles] = await Promise.all([
      this.instant(cpuExpr, 'CPU usage query'),
      this.instant(memoryExpr, 'memory usage query'),
      this.instant(`max by (pod, role) (${SIDECAR_SERIES.stepTime}{${selector(ref)}})`, 'role query'),
    ]);
    return usageFrom(cpu, memory, roles);
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
    method: 'GET' | 'POST' = 'GET',
  ): Promise<T[]> {
    const batch = method === 'POST';
    const label = batch ? what : `Prometheus ${what}`;
    let body: PrometheusResponse | null;
    let status: number;
    try {
      const form = new URLSearchParams(
        Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]),
      );
      const response = batch
        ? await this.http.post<PrometheusResponse>(path, form)
        : await this.http.get<PrometheusResponse>(path, { params });
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
    // A batch answer with warnings may lack some jobs' series (a partial answer, a limit hit): not used.
    const warnings = Array.isArray(body.warnings) ? body.warnings.map(String) : [];
    if (batch && warnings.length > 0)
      throw new PartialAnswerError(label, status, `answered with warnings: ${warnings.join('; ')}`);
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

/** The step time series of one job (means, and the node and worker counts of the same scales), as model samples. */
function samplesFrom(
  means: readonly MatrixResult[],
  nodeCounts: readonly MatrixResult[],
  workerCounts: readonly MatrixResult[],
): StepSample[] {
  // JSON: an absent label (null) and any label value stay apart, whatever characters the values hold.
  const key = (m: MatrixResult['metric'], at: number) => JSON.stringify([m.replicas, m.local_batch_size, at]);
  const pointsOf = (series: readonly MatrixResult[]) => {
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
  return samples.sort((a, b) => a.at - b.at);
}

/** One job's per-worker step time series, joined by pod and worker (a replaced pod keeps its name). */
function workersFrom(series: readonly MatrixResult[]): WorkerStepTimes[] {
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
  return workers;
}

/** One job's peak CPU and memory per pod, each pod's role from whichever series names it. */
function usageFrom(
  cpu: readonly VectorResult[],
  memory: readonly VectorResult[],
  roles: readonly VectorResult[],
): ContainerUsage[] {
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

/**
 * The labels that say which job a series is of (infra/prometheus/prometheus.yml relabels them from the pod's
 * discovery metadata): a batch query groups `by` them, and its answer is split per job on them.
 */
export const JOB_IDENTITY_LABELS = 'namespace, job_kind, job_name';

/** A series selector: the name, with the matchers given (empty ones left out). */
function series(name: string, ...matchers: string[]): string {
  const given = matchers.filter(Boolean);
  return given.length > 0 ? `${name}{${given.join(',')}}` : name;
}

/**
 * Parts of the jobs by the first character of their names, together every name (a Kubernetes name starts with
 * a lower-case letter or digit; the last part takes anything else too): a batch Prometheus refuses for too
 * many samples is read again part by part, a bounded number of queries whatever the jobs.
 */
export const NAME_PARTS: readonly { matcher: string; holds: RegExp }[] = [
  { matcher: 'job_name=~"[0-9a-e].*"', holds: /^[0-9a-e]/ },
  { matcher: 'job_name=~"[f-j].*"', holds: /^[f-j]/ },
  { matcher: 'job_name=~"[k-o].*"', holds: /^[k-o]/ },
  { matcher: 'job_name!~"[0-9a-o].*"', holds: /^(?![0-9a-o])/ },
];

/** The labels the scrape job adds that are the pod's, not its job's (infra/prometheus/prometheus.yml). */
const PER_POD_LABELS = 'instance, job, pod, node, worker, role';

/** A job's identity as a batch answer's series carry it (a TrainJob's series are its JobSet's). */
function identityOf(ref: JobRef): string {
  return JSON.stringify([ref.namespace, ref.kind === 'TrainJob' ? 'JobSet' : ref.kind, ref.name]);
}

function identityOfSeries(metric: Record<string, string | undefined>): string {
  return JSON.stringify([metric.namespace, metric.job_kind, metric.job_name]);
}

/** A batch answer's series per job identity. */
function byIdentity<T extends { metric: Record<string, string | undefined> }>(
  results: readonly T[],
): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const r of results) {
    const id = identityOfSeries(r.metric);
    const list = out.get(id);
    if (list) list.push(r);
    else out.set(id, [r]);
  }
  return out;
}

/** The pods of the job by their names, as podNamePattern matches them in Prometheus (anchored). */
function podNameMatcher(ref: JobRef): RegExp {
  return new RegExp(`^(?:${podNamePattern(ref)})$`);
}

/** Why Prometheus's answer is incomplete, from what it said; undefined when it is a plain failure. */
function incompleteReason(error: unknown): IncompleteMetricsReason | undefined {
  if (!isAxiosError(error)) return undefined;
  const body = error.response?.data as PrometheusResponse | undefined;
  const said = `${body?.errorType ?? ''} ${body?.error ?? ''}`.toLowerCase();
  if (said.includes('too many samples')) return 'too-many-samples';
  if (body?.errorType === 'timeout' || error.code === 'ETIMEDOUT' || said.includes('timeout'))
    return 'timeout';
  // Prometheus is overloaded (too many concurrent queries) or restarting: it answered nothing of it.
  if (error.response?.status === 503) return 'refused';
  return undefined;
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
