// `trainscaler run`: the same handlers as the Lambda functions, driven from inside (or against) a cluster.
// Every replica serves /healthz and /metrics; only the one holding the Lease runs informers, the schedule
// and handlers. Writes go through a client fenced on leadership, so a handler that outlives its replica's
// lease cannot write either: `fencedCluster` builds the cluster client with the fence under its retries.

import type { KubeConfig } from '@kubernetes/client-node';
import { CronJob, validateCronExpression } from 'cron';
import { handleAlarm } from '../../functions/alarm.js';
import { handleClusterEvent } from '../../functions/cluster-event.js';
import type { Handler, HandlerDeps, HandlerResult } from '../../functions/handler-deps.js';
import { handleSchedule } from '../../functions/schedule.js';
import { handleSubmit } from '../../functions/submit.js';
import { NO_TOKEN, type TokenSource, UNCONFIGURED_WARNING } from '../../functions/webhook-auth.js';
import type { ClusterClient } from '../cluster/cluster-client.js';
import { OutcomeStore } from '../decisions/outcome-store.js';
import { ConfigError } from '../errors.js';
import { DecisionLog } from './decision-log.js';
import { EventRouter, type RoutedTask } from './event-router.js';
import { LeaderFencedClusterClient, type WriteFence } from './fenced-cluster-client.js';
import { startHttpServer } from './http-server.js';
import { informerReadSource } from './informer-reads.js';
import { type InformerSet, startInformers } from './informers.js';
import { type LeaderElectionTiming, LeaderElector, type LeaseLock } from './leader-election.js';
import { kubernetesLeaderLabelPatch, type LeaderLabelPatch, LeaderPodLabel } from './leader-pod-label.js';
import { KubernetesLeaseLock } from './lease-lock.js';
import { RunnerMetrics, type Trigger } from './metrics.js';
import { KeyedWorkQueue, namespaceLane } from './work-queue.js';

export const DEFAULT_LEASE_NAME = 'trainscaler-leader';
/**
 * Every minute, as the Lambda deployment's rate(1 minute): Pollux and Tiresias reschedule every 60 s, and at five
 * minutes a job waited 84 s on average from arrival to its first step, much of it for the tick that makes room for
 * it (README "The schedule ticks every minute").
 */
export const DEFAULT_SCHEDULE = '* * * * *';

/** The schedule tick's queue key: a tick that finds the previous one still waiting coalesces with it. */
const SCHEDULE_KEY = 'schedule';

export interface RunnerHandlers {
  alarm: Handler;
  clusterEvent: Handler;
  schedule: Handler;
  submit: Handler;
}

export interface RunnerOptions {
  kubeConfig: KubeConfig;
  deps: HandlerDeps;
  /** Unique per replica: the pod name in a cluster. */
  identity: string;
  /** Namespace of the Lease. */
  namespace: string;
  leaseName?: string;
  host: string;
  port: number;
  /** Cron expression (five fields, or six with seconds), UTC. */
  schedule?: string;
  timing?: Partial<LeaderElectionTiming>;
  statefulSetSelector?: string;
  submitGraceMs?: number;
  /**
   * The webhook's bearer token. Without one the webhook answers 401 to every request (and start-up warns):
   * it is never open by default.
   */
  webhookToken?: TokenSource;
  /** This replica's pod (POD_NAME): the leader labels it so the Service routes to it. */
  podName?: string;
  /** The pod's namespace (POD_NAMESPACE), when it is not the Lease's `namespace`. */
  podNamespace?: string;
  /**
   * Builds the handlers' cluster client around the fence, so that the fence sits under any retrying layer and
   * every attempt passes it (see buildClusterClient). Without it, deps.cluster is fenced from outside, which is
   * only right for a client that does not retry (tests).
   */
  fencedCluster?: (fence: WriteFence) => ClusterClient;
  /** Tests replace handlers, the lock and the pod label patch. */
  leaderLabelPatch?: LeaderLabelPatch;
  handlers?: Partial<RunnerHandlers>;
  lock?: LeaseLock;
  /** Every handler result with outcomes, after the decision log. */
  onOutcomes?: (trigger: Trigger, result: HandlerResult) => void;
  /**
   * Keep every policy's last outcome per job in ConfigMaps of this namespace, for `trainscaler explain`
   * (lib/decisions/outcome-store.ts); written through the leader-fenced client.
   */
  outcomeStoreNamespace?: string;
}

export interface Runner {
  readonly url: string;
  readonly identity: string;
  readonly metrics: RunnerMetrics;
  isLeader(): boolean;
  /**
   * Graceful stop: no new work, the handler in flight finishes (the lease is still renewed meanwhile), then
   * the lease is released (unless `release: false`, which leaves it to expire, as a crash would).
   */
  stop(options?: { release?: boolean }): Promise<void>;
}

interface Work {
  queue: KeyedWorkQueue;
  informers: InformerSet;
  cron: CronJob;
}

export async function startRunner(options: RunnerOptions): Promise<Runner> {
  const schedule = options.schedule ?? DEFAULT_SCHEDULE;
  const valid = validateCronExpression(schedule);
  if (!valid.valid)
    throw new ConfigError(`schedule '${schedule}' is not a cron expression: ${String(valid.error)}`);
  const { logger } = options.deps;
  const decisionLog = new DecisionLog({ logger });
  let outcomeStore: OutcomeStore | undefined;
  const metrics = new RunnerMetrics({
    clock: options.deps.clock,
    onOutcomes: (trigger, result) => {
      decisionLog.record(trigger, result);
      if (outcomeStore) {
        const stored = outcomeStore.record(trigger, result).catch((error: unknown) => {
          logger.warn({ trigger, error: String(error) }, 'could not store the last outcomes');
        });
        track(stored);
      }
      options.onOutcomes?.(trigger, result);
    },
  });
  const leaseName = options.leaseName ?? DEFAULT_LEASE_NAME;
  const lock = options.lock ?? new KubernetesLeaseLock(options.kubeConfig, options.namespace, leaseName);
  const handlers: RunnerHandlers = {
    alarm: handleAlarm,
    clusterEvent: handleClusterEvent,
    schedule: handleSchedule,
    submit: handleSubmit,
    ...options.handlers,
  };

  let stopping = false;
  let work: Work | undefined;
  const inFlight = new Set<Promise<unknown>>();
  const track = (promise: Promise<unknown>) => {
    const settled = promise.then(
      () => {},
      () => {},
    );
    inFlight.add(settled);
    settled.finally(() => inFlight.delete(settled));
  };

  const labelPatch =
    options.leaderLabelPatch ??
    (options.podName
      ? kubernetesLeaderLabelPatch(
          options.kubeConfig,
          options.podNamespace ?? options.namespace,
          options.podName,
        )
      : undefined);
  // Removes a label a previous container of this pod may have left, before anything else.
  const podLabel = labelPatch ? new LeaderPodLabel({ patch: labelPatch, logger }) : undefined;
  const elector: LeaderElector = new LeaderElector({
    lock,
    identity: options.identity,
    ...(options.timing ? { timing: options.timing } : {}),
    logger,
    onStartedLeading: () => {
      startWork();
      podLabel?.set(true);
    },
    onStoppedLeading: () => {
      // Unlabelled first, so that the Service stops sending alerts here while the work winds down.
      podLabel?.set(false);
      return stopWork();
    },
  });
  // New work starts only on a leader that is not shutting down; work already running may write for as long
  // as the lease is held (it is renewed until that work has finished).
  const isLeader = () => !stopping && elector.isLeader();
  const deps: HandlerDeps = {
    ...options.deps,
    cluster: options.fencedCluster
      ? options.fencedCluster(elector)
      : new LeaderFencedClusterClient(options.deps.cluster, elector),
  };
  // A tick (and an alert's capacity) reads jobs and pods from the informers' caches (lib/runner/informer-reads.ts).
  deps.clusterReads = () => (work ? informerReadSource(work.informers, deps.cluster) : undefined);
  if (options.outcomeStoreNamespace)
    outcomeStore = new OutcomeStore({
      cluster: deps.cluster,
      namespace: options.outcomeStoreNamespace,
      dryRun: deps.dryRun,
      clock: deps.clock,
    });

  async function invoke(trigger: Trigger, handler: Handler, payload: unknown): Promise<void> {
    if (!isLeader()) return;
    const started = performance.now();
    try {
      const result = await handler(payload, deps);
      // Counts the outcomes and logs each decision (rate-limited) through onOutcomes.
      metrics.recordResult(trigger, result, (performance.now() - started) / 1000);
    } catch (error) {
      metrics.recordFailure(trigger, error, (performance.now() - started) / 1000);
      logger.error(
        { trigger, error: error instanceof Error ? error.message : String(error) },
        'handler failed',
      );
    }
  }

  function startWork(): void {
    if (work || stopping) return;
    // Namespaces take turns and each holds at most a tenth of the queue: one tenant's churn delays another's
    // fault by a task, and never pushes out the schedule tick.
    const queue = new KeyedWorkQueue({
      laneOf: namespaceLane,
      maxPendingPerLane: 1_000,
      urgent: (key) => key === SCHEDULE_KEY,
      onDrop: () => metrics.droppedEvents.inc(),
      onError: (key, error) => logger.error({ key, error: String(error) }, 'queued task failed'),
    });
    const enqueue = (key: string, run: () => Promise<void>) => {
      queue.enqueue(key, () => {
        const promise = run();
        track(promise);
        return promise.finally(() => metrics.queueDepth.set(queue.size));
      });
      metrics.queueDepth.set(queue.size);
    };
    let informers: InformerSet | undefined;
    const router = new EventRouter({
      ...(options.submitGraceMs !== undefined ? { submitGraceMs: options.submitGraceMs } : {}),
      // With a StatefulSet selector, pods of StatefulSets outside it (databases, ...) are not trainscaler's.
      ...(options.statefulSetSelector
        ? {
            ownerWatched: (kind: string, namespace: string, name: string) =>
              kind !== 'StatefulSet' || (informers?.has(kind, namespace, name) ?? false),
          }
        : {}),
    });
    const dispatch = (task: RoutedTask) => {
      // A policy's change: the tick, now (its key is the tick's: they coalesce).
      if (task.trigger === 'schedule')
        return enqueue(SCHEDULE_KEY, () => invoke('schedule', handlers.schedule, {}));
      const handler = task.trigger === 'submit' ? handlers.submit : handlers.clusterEvent;
      enqueue(task.key, () => invoke(task.trigger, handler, task.payload));
    };
    informers = startInformers(options.kubeConfig, {
      onEvent: (event) => {
        for (const task of router.route(event)) dispatch(task);
      },
      logger,
      policies: true,
      ...(options.statefulSetSelector ? { statefulSetSelector: options.statefulSetSelector } : {}),
    });
    informers.synced.then(() => logger.info({}, 'informers synced'));
    const cron = CronJob.from({
      cronTime: schedule,
      timeZone: 'UTC',
      start: true,
      // A tick that finds the previous one still queued coalesces with it.
      onTick: () => enqueue(SCHEDULE_KEY, () => invoke('schedule', handlers.schedule, {})),
    });
    work = { queue, informers, cron };
    metrics.leader.set(1);
  }

  async function stopWork(): Promise<void> {
    const current = work;
    work = undefined;
    metrics.leader.set(0);
    if (current) {
      await current.cron.stop();
      await current.informers.stop();
      await current.queue.close();
    }
    await Promise.all([...inFlight]);
  }

  const http = await startHttpServer({
    host: options.host,
    port: options.port,
    metrics,
    isLeader,
    deps,
    webhookToken: options.webhookToken ?? NO_TOKEN,
    track,
  });
  if (!options.webhookToken) logger.warn({}, UNCONFIGURED_WARNING);
  elector.start();
  logger.info({ identity: options.identity, lease: lock.description, url: http.url }, 'runner started');

  let stopped: Promise<void> | undefined;
  return {
    url: http.url,
    identity: options.identity,
    metrics,
    isLeader,
    stop(stopOptions = {}) {
      stopped ??= (async () => {
        stopping = true;
        await stopWork();
        await elector.stop({ release: stopOptions.release ?? true });
        podLabel?.set(false);
        await podLabel?.settle(3_000);
        podLabel?.stop();
        await http.close();
        logger.info({ identity: options.identity }, 'runner stopped');
      })();
      return stopped;
    },
  };
}
