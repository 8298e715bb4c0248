// `trainscaler run` from its options: configuration from the environment (the same variables as the Lambda
// functions, validated the same way), overridden by flags; then the runner until SIGTERM/SIGINT.

import { hostname } from 'node:os';
import {
  buildClusterClient,
  buildRuntimeDeps,
  loadKubeConfigFor,
  readRuntimeConfig,
} from '../../functions/runtime-deps.js';
import {
  cachedToken,
  readTokenFile,
  type TokenSource,
  WEBHOOK_TOKEN_TTL_MS,
} from '../../functions/webhook-auth.js';
import { ConfigError } from '../errors.js';
import { DEFAULT_LEASE_NAME, DEFAULT_SCHEDULE, type Runner, startRunner } from './runner.js';
import { runStartupChecks } from './startup-checks.js';

export interface RunCommandOptions {
  kubeconfig?: string;
  prometheusUrl?: string;
  namespace?: string;
  leaseName?: string;
  identity?: string;
  /** Default TRAINSCALER_ADDRESS, else 127.0.0.1: a laptop exposes nothing; the in-cluster manifest sets 0.0.0.0. */
  address?: string;
  port: number;
  schedule?: string;
  statefulsetSelector?: string;
  dryRun?: boolean;
  webhookTokenFile?: string;
}

type Env = Record<string, string | undefined>;

export const DEFAULT_ADDRESS = '127.0.0.1';

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
    address: options.address || env.TRAINSCALER_ADDRESS || DEFAULT_ADDRESS,
    namespace,
    identity,
    leaseName: options.leaseName || DEFAULT_LEASE_NAME,
    schedule: options.schedule || env.TRAINSCALER_SCHEDULE || DEFAULT_SCHEDULE,
    statefulSetSelector: options.statefulsetSelector || env.TRAINSCALER_STATEFULSET_SELECTOR || undefined,
    webhookTokenFile: options.webhookTokenFile || env.TRAINSCALER_WEBHOOK_TOKEN_FILE || undefined,
    podName: env.POD_NAME || undefined,
    podNamespace: env.POD_NAMESPACE || undefined,
  };
}

/**
 * The webhook token from its file, checked now: a named file that cannot be read or is empty is a
 * configuration error at start-up, not a 401 on every alert later. Re-read every minute (Secret rotation).
 */
export async function webhookTokenFromFile(
  path: string,
  log: (error: unknown) => void,
): Promise<TokenSource> {
  let first: string | undefined;
  try {
    first = await readTokenFile(path);
  } catch (error) {
    throw new ConfigError(`webhook token file '${path}' cannot be read: ${(error as Error).message}`);
  }
  if (first === undefined) throw new ConfigError(`webhook token file '${path}' is empty`);
  return cachedToken(() => readTokenFile(path), WEBHOOK_TOKEN_TTL_MS, Date.now, log);
}

/** Shutdown must end before the kubelet's SIGKILL (terminationGracePeriodSeconds 30 in infra/k8s). */
const SHUTDOWN_DEADLINE_MS = 25_000;

export async function runCommand(options: RunCommandOptions, env: Env = process.env): Promise<Runner> {
  const settings = resolveRunSettings(options, env);
  const kubeConfig = await loadKubeConfigFor(settings.config.kube);
  const deps = buildRuntimeDeps(settings.config, kubeConfig);
  const webhookToken = settings.webhookTokenFile
    ? await webhookTokenFromFile(settings.webhookTokenFile, (error) =>
        deps.logger.warn(
          { error: String(error) },
          'cannot re-read the webhook token file; keeping the last token',
        ),
      )
    : undefined;
  const runner = await startRunner({
    kubeConfig,
    deps,
    fencedCluster: (fence) => buildClusterClient(kubeConfig, fence),
    identity: settings.identity,
    namespace: settings.namespace,
    leaseName: settings.leaseName,
    host: settings.address,
    port: options.port,
    schedule: settings.schedule,
    outcomeStoreNamespace: deps.profiles.namespace,
    ...(settings.statefulSetSelector ? { statefulSetSelector: settings.statefulSetSelector } : {}),
    ...(webhookToken ? { webhookToken } : {}),
    ...(settings.podName ? { podName: settings.podName } : {}),
    ...(settings.podNamespace ? { podNamespace: settings.podNamespace } : {}),
  });
  deps.logger.info(
    { dryRun: settings.config.dryRun, kube: settings.config.kube.mode, schedule: settings.schedule },
    'trainscaler run',
  );
  // Not awaited before start: a slow check must not delay the lease or /healthz.
  void runStartupChecks({ prometheusUrl: settings.config.prometheusUrl, kubeConfig }, deps.logger);
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
