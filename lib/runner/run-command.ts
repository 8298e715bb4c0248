// `trainscaler run` from its options: configuration from the environment (the same variables as the Lambda
// functions, validated the same way), overridden by flags; then the runner until SIGTERM/SIGINT.

import { hostname } from 'node:os';
import {
  buildClusterClient,
  buildRuntimeDeps,
  loadKubeConfigFor,
  readRuntimeConfig,
} from '../../functions/runtime-deps.js';
import { ConfigError } from '../errors.js';
import { DEFAULT_LEASE_NAME, DEFAULT_SCHEDULE, type Runner, startRunner } from './runner.js';

export interface RunCommandOptions {
  kubeconfig?: string;
  prometheusUrl?: string;
  namespace?: string;
  leaseName?: string;
  identity?: string;
  address: string;
  port: number;
  schedule?: string;
  statefulsetSelector?: string;
  dryRun?: boolean;
}

type Env = Record<string, string | undefined>;

/** Flags win over the environment; in a pod, identity and namespace come from the downward API. */
export function resolveRunSettings(options: RunCommandOptions, env: Env) {
  const merged: Env = { ...env };
  if (options.kubeconfig) {
    merged.KUBECONFIG = options.kubeconfig;
    // An explicit kubeconfig means "this cluster", not the EKS cluster a shell may have configured.
    delete merged.EKS_CLUSTER_NAME;
  }
  if (options.prometheusUrl) merged.PROMETHEUS_URL = options.prometheusUrl;
  if (options.dryRun) merged.TRAINSCALER_DRY_RUN = 'true';
  const config = readRuntimeConfig(merged);
  const namespace = options.namespace || env.POD_NAMESPACE || 'trainscaler-system';
  const identity = options.identity || env.POD_NAME || `${hostname()}-${process.pid}`;
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535)
    throw new ConfigError(`--port must be a TCP port, got '${options.port}'`);
  return {
    config,
    namespace,
    identity,
    leaseName: options.leaseName || DEFAULT_LEASE_NAME,
    schedule: options.schedule || env.TRAINSCALER_SCHEDULE || DEFAULT_SCHEDULE,
    statefulSetSelector: options.statefulsetSelector || env.TRAINSCALER_STATEFULSET_SELECTOR || undefined,
  };
}

/** Shutdown must end before the kubelet's SIGKILL (terminationGracePeriodSeconds 30 in infra/k8s). */
const SHUTDOWN_DEADLINE_MS = 25_000;

export async function runCommand(options: RunCommandOptions, env: Env = process.env): Promise<Runner> {
  const settings = resolveRunSettings(options, env);
  const kubeConfig = await loadKubeConfigFor(settings.config.kube);
  const deps = buildRuntimeDeps(settings.config, kubeConfig);
  const runner = await startRunner({
    kubeConfig,
    deps,
    fencedCluster: (fence) => buildClusterClient(kubeConfig, fence),
    identity: settings.identity,
    namespace: settings.namespace,
    leaseName: settings.leaseName,
    host: options.address,
    port: options.port,
    schedule: settings.schedule,
    ...(settings.statefulSetSelector ? { statefulSetSelector: settings.statefulSetSelector } : {}),
  });
  deps.logger.info(
    { dryRun: settings.config.dryRun, kube: settings.config.kube.mode, schedule: settings.schedule },
    'trainscaler run',
  );
  const shutdown = (signal: string) => {
    deps.logger.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      deps.logger.error({}, 'shutdown deadline passed; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    runner.stop().then(
      () => {
        clearTimeout(deadline);
        process.exitCode = 0;
      },
      (error: unknown) => {
        deps.logger.error({ error: String(error) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  return runner;
}
