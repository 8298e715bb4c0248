// trainscaler's runner for the quick start: what `trainscaler run` starts (lib/runner/run-command.ts), with the
// quick start's compressed timings and its namespace as the only one it acts in. Its JSON log goes to a file;
// the quick start tells the decisions in plain lines instead.
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import type { HandlerDeps, HandlerResult } from '../../functions/handler-deps.js';
import { buildClusterClient } from '../../functions/runtime-deps.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { PrometheusMetricsSource } from '../../lib/metrics/prometheus-metrics-source.js';
import { FitCache } from '../../lib/model/fit-cache.js';
import type { Trigger } from '../../lib/runner/metrics.js';
import { type Runner, startRunner } from '../../lib/runner/runner.js';
import { COOLDOWN_SECONDS, METRICS_STEP_SECONDS, QUICKSTART_SCHEDULE } from './timing.js';

export const OWN_NAMESPACE = 'trainscaler-system';

export interface QuickstartRunnerOptions {
  /** trainscaler's ServiceAccount (infra/k8s/rbac.yaml): the runner acts with exactly its rights. */
  kubeConfig: KubeConfig;
  prometheusUrl: string;
  /** The only namespace the runner acts in (TRAINSCALER_NAMESPACES): other jobs on the cluster are left alone. */
  namespace: string;
  port: number;
  /** The bearer token Alertmanager sends to the webhook. */
  token: string;
  logFile: string;
  onOutcomes: (trigger: Trigger, result: HandlerResult) => void;
}

export function startQuickstartRunner(options: QuickstartRunnerOptions): Promise<Runner> {
  const clock = () => Math.floor(Date.now() / 1000);
  const deps: HandlerDeps = {
    cluster: buildClusterClient(options.kubeConfig),
    metrics: new PrometheusMetricsSource(options.prometheusUrl, clock, {
      stepSeconds: METRICS_STEP_SECONDS,
      maxPointsPerSeries: 11_000,
      timeoutMs: 10_000,
    }),
    clock,
    config: {
      ...DEFAULT_POLICY_CONFIG,
      cooldownSeconds: COOLDOWN_SECONDS,
      namespaceAllowlist: [options.namespace],
    },
    dryRun: false,
    logger: pino({ level: 'info' }, pino.destination({ dest: options.logFile, sync: true })),
    profiles: { namespace: OWN_NAMESPACE, configMapName: 'trainscaler-profiles' },
    fitCache: new FitCache(),
  };
  return startRunner({
    kubeConfig: options.kubeConfig,
    deps,
    fencedCluster: (fence) => buildClusterClient(options.kubeConfig, fence),
    identity: `quickstart-${process.pid}`,
    namespace: OWN_NAMESPACE,
    host: '127.0.0.1',
    port: options.port,
    webhookToken: async () => options.token,
    // Once a year instead of every minute: on this idle cluster the schedule would grow the job into the free
    // room on its own within a minute, and the quick start shows what the alert does (timing.ts says so).
    schedule: QUICKSTART_SCHEDULE,
    outcomeStoreNamespace: OWN_NAMESPACE,
    onOutcomes: options.onOutcomes,
  });
}
