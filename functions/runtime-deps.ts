import pino from 'pino';
import { KubernetesClusterClient, loadKubeConfig } from '../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { PrometheusMetricsSource } from '../lib/metrics/prometheus-metrics-source.js';
import type { HandlerDeps } from './handler-deps.js';

type Env = Record<string, string | undefined>;

function numberFrom(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0)
    throw new ConfigError(`${name} must be a non-negative number, got '${raw}'`);
  return value;
}

/** Policy knobs from the environment (TRAINSCALER_COOLDOWN_SECONDS, ...), validated: a typo fails at start. */
export function policyConfigFromEnv(env: Env): PolicyConfig {
  const allowlist = (env.TRAINSCALER_NAMESPACES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    ...DEFAULT_POLICY_CONFIG,
    cooldownSeconds: numberFrom(env, 'TRAINSCALER_COOLDOWN_SECONDS', DEFAULT_POLICY_CONFIG.cooldownSeconds),
    rescaleCostSeconds: numberFrom(
      env,
      'TRAINSCALER_RESCALE_COST_SECONDS',
      DEFAULT_POLICY_CONFIG.rescaleCostSeconds,
    ),
    maxReplicaStep: numberFrom(env, 'TRAINSCALER_MAX_REPLICA_STEP', DEFAULT_POLICY_CONFIG.maxReplicaStep),
    maxMemoryBytes: numberFrom(env, 'TRAINSCALER_MAX_MEMORY_BYTES', DEFAULT_POLICY_CONFIG.maxMemoryBytes),
    namespaceAllowlist: allowlist,
  };
}

/** Clients for a real cluster and Prometheus, from the environment. Fails with a ConfigError naming the variable. */
export async function loadRuntimeDeps(env: Env): Promise<HandlerDeps> {
  const prometheusUrl = env.PROMETHEUS_URL;
  if (!prometheusUrl)
    throw new ConfigError('PROMETHEUS_URL is not set (the Prometheus that scrapes the trainscaler sidecars)');
  try {
    new URL(prometheusUrl);
  } catch {
    throw new ConfigError(`PROMETHEUS_URL is not a URL: '${prometheusUrl}'`);
  }
  const kubeOptions: { kubeconfig?: string; inCluster?: boolean } = {};
  if (env.KUBECONFIG) kubeOptions.kubeconfig = env.KUBECONFIG;
  else if (env.KUBERNETES_SERVICE_HOST) kubeOptions.inCluster = true;
  const clock = () => Math.floor(Date.now() / 1000);
  return {
    cluster: new KubernetesClusterClient(loadKubeConfig(kubeOptions)),
    metrics: new PrometheusMetricsSource(prometheusUrl, clock),
    clock,
    config: policyConfigFromEnv(env),
    dryRun: env.TRAINSCALER_DRY_RUN === 'true',
    logger: pino({ level: env.LOG_LEVEL ?? 'info' }),
    profiles: {
      namespace: env.TRAINSCALER_PROFILES_NAMESPACE ?? 'trainscaler-system',
      configMapName: env.TRAINSCALER_PROFILES_CONFIGMAP ?? 'trainscaler-profiles',
    },
  };
}
