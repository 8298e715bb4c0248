import type { Outcome } from '../lib/actuator.js';
import type { ClusterClient } from '../lib/cluster/cluster-client.js';
import type { ClusterReadSource } from '../lib/cluster/listed-cluster-reads.js';
import type { PolicyConfig } from '../lib/config.js';
import type { JobWorkLimits } from '../lib/decisions/job-work.js';
import type { ProfileStoreRef } from '../lib/decisions/profile-store.js';
import type { MetricsSource } from '../lib/metrics/metrics-source.js';
import type { FitCache } from '../lib/model/fit-cache.js';
import type { ThroughputOracle } from '../lib/model/throughput-model.js';
import type { JobRef } from '../lib/types.js';

export interface Logger {
  /** Optional: loggers without a debug level drop those lines. */
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Everything a handler needs, injected so that the same handler runs on Lambda, in-cluster and in the simulator. */
export interface HandlerDeps {
  cluster: ClusterClient;
  /**
   * Where a schedule tick and an alert's capacity read the cluster's lists from (lib/cluster/listed-cluster-reads.ts):
   * the runner's informer caches. Unset, or undefined before the caches are synced: one paginated LIST per kind.
   */
  clusterReads?: () => ClusterReadSource | undefined;
  metrics: MetricsSource;
  /** Epoch seconds. */
  clock: () => number;
  config: PolicyConfig;
  /** When true nothing is written: plans are computed and reported only. */
  dryRun: boolean;
  logger: Logger;
  /** Where job profiles live (one ConfigMap, one key per namespace and signature), and one namespace's share. */
  profiles: ProfileStoreRef;
  /** Priority class name -> value, for jobs that name a class (the API server resolves pods, not CRDs). */
  priorityClasses?: Record<string, number>;
  /**
   * Simulation only (`simulate --policy trainscaler-oracle`, cli/oracle-model.ts), never set in production:
   * every throughput model a decision uses for a job of `signature` (its fitted runtime model, its
   * signature's profile) is passed through this, which answers with the simulated world's true step times. It
   * measures what the model's errors cost; the policies and the growth rule are unchanged.
   */
  throughputOracle?: ThroughputOracle;
  /**
   * Each running job's fitted model, kept between ticks and refitted only when its samples change (docs/model.md
   * "Fits between ticks"). Absent: every fit starts from scratch, with the same answers.
   */
  fitCache?: FitCache;
  /** How many jobs a tick writes at once and how long each may take (lib/decisions/job-work.ts); absent: the defaults. */
  jobWork?: JobWorkLimits;
}

export type { Outcome };

export interface JobError {
  ref: JobRef;
  code: string;
  message: string;
}

export interface HandlerResult {
  trigger: 'alarm' | 'cluster-event' | 'schedule' | 'submit';
  outcomes: Outcome[];
  /** Per-job failures (missing metrics, API errors) that did not stop the other jobs; nothing was written for them. */
  errors: JobError[];
  /** Set when the trigger was valid but concerned nothing trainscaler manages. */
  ignored?: string;
}

/**
 * Handler signatures (functions/*.ts):
 *   handleAlarm(payload: unknown, deps: HandlerDeps): Promise<HandlerResult>
 *     payload: Alertmanager webhook JSON (alerts[].labels.{namespace, job_kind, job_name}), or an SNS
 *     notification / SNS Lambda event carrying a CloudWatch alarm (dimensions Namespace, JobKind, JobName).
 *     Every firing alert for a job triggers runtime tuning + right-sizing (+ straggler check) of that job.
 *   handleClusterEvent(payload: unknown, deps): Promise<HandlerResult>
 *     payload: a Kubernetes watch event {type, object: Pod} (pods labelled with their job), or the same
 *     wrapped in an EventBridge envelope {source, 'detail-type', detail}. Faults: OOMKilled, Evicted, Failed.
 *   handleSchedule(payload: unknown, deps): Promise<HandlerResult>
 *     payload: EventBridge Scheduled Event or {} (cron). Rebalances all managed jobs; high-priority
 *     pending pods are met by shrinking lower-priority elastic jobs.
 *   handleSubmit(payload: unknown, deps): Promise<HandlerResult>
 *     payload: {kind, namespace, name} or a watch ADDED event of the job. Initial configuration.
 * Invalid payloads throw ValidationError (naming the field) before anything is read or written.
 */
export type Handler = (payload: unknown, deps: HandlerDeps) => Promise<HandlerResult>;
