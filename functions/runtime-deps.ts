// Real clients from the environment, shared by the Lambda entry points and `trainscaler run`. Reading the
// configuration is synchronous and separate from building clients, so a typo fails at cold start with a
// ConfigError naming the variable, before any network call.

import { EKSClient } from '@aws-sdk/client-eks';
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import type { ClusterClient } from '../lib/cluster/cluster-client.js';
import { loadEksKubeConfig } from '../lib/cluster/eks-kubeconfig.js';
import { KubernetesClusterClient, loadKubeConfig } from '../lib/cluster/kubernetes-cluster-client.js';
import { RetryingClusterClient } from '../lib/cluster/retrying-cluster-client.js';
import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from '../lib/config.js';
import { DEFAULT_PROFILE_LIMITS, type ProfileStoreRef } from '../lib/decisions/profile-store.js';
import { ConfigError } from '../lib/errors.js';
import { DEFAULT_OWN_NAMESPACE, isSystemNamespace } from '../lib/management.js';
import { PrometheusMetricsSource } from '../lib/metrics/prometheus-metrics-source.js';
import { FitCache } from '../lib/model/fit-cache.js';
import { redactUrls } from '../lib/redact-url.js';
import { LeaderFencedClusterClient, type WriteFence } from '../lib/runner/fenced-cluster-client.js';
import type { HandlerDeps } from './handler-deps.js';

type Env = Record<string, string | undefined>;

/** Where the Kubernetes API is and how to authenticate, in the order the variables are consulted. */
export type KubeAccess =
  /** AWS Lambda: endpoint and CA from eks:DescribeCluster, token signed with the function's role. */
  | { mode: 'eks'; clusterName: string; region: string }
  | { mode: 'kubeconfig'; path: string }
  /** A pod: the mounted ServiceAccount token. */
  | { mode: 'in-cluster' }
  /** ~/.kube/config, as kubectl. */
  | { mode: 'default' };

export interface RuntimeConfig {
  prometheusUrl: string;
  kube: KubeAccess;
  policy: PolicyConfig;
  dryRun: boolean;
  logLevel: string;
  profiles: Required<ProfileStoreRef>;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
// EKS cluster names: 1-100 characters, alphanumerics, hyphens and underscores, starting alphanumeric.
const EKS_CLUSTER_NAME = /^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A non-negative number, or with `whole` a whole number from `whole.min` to `whole.max`. */
function numberFrom(env: Env, name: string, fallback: number, whole?: { min: number; max: number }): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!whole && (!Number.isFinite(value) || value < 0))
    throw new ConfigError(`${name} must be a non-negative number, got '${raw}'`);
  if (whole && (!Number.isInteger(value) || value < whole.min || value > whole.max))
    throw new ConfigError(`${name} must be a whole number from ${whole.min} to ${whole.max}, got '${raw}'`);
  return value;
}

/** 'true' / 'false' / unset only: a misspelt TRAINSCALER_DRY_RUN must not silently mean "write". */
function booleanFrom(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(`${name} must be 'true' or 'false', got '${raw}'`);
}

function dnsLabelFrom(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!DNS_LABEL.test(raw)) throw new ConfigError(`${name} must be a Kubernetes object name, got '${raw}'`);
  return raw;
}

/**
 * trainscaler's own namespaces, never managed: the pod's (POD_NAMESPACE, from the downward API) and the
 * profile store's.
 */
function ownNamespacesFrom(env: Env): string[] {
  const profiles = dnsLabelFrom(env, 'TRAINSCALER_PROFILES_NAMESPACE', DEFAULT_OWN_NAMESPACE);
  const pod = dnsLabelFrom(env, 'POD_NAMESPACE', profiles);
  return [...new Set([pod, profiles])];
}

/** Policy knobs from the environment (TRAINSCALER_COOLDOWN_SECONDS, ...), validated: a typo fails at start. */
export function policyConfigFromEnv(env: Env): PolicyConfig {
  const allowlist = (env.TRAINSCALER_NAMESPACES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const ownNamespaces = ownNamespacesFrom(env);
  for (const ns of allowlist) {
    if (!DNS_LABEL.test(ns)) throw new ConfigError(`TRAINSCALER_NAMESPACES: '${ns}' is not a namespace name`);
    // Listing one would never take effect (lib/management.ts): say so at start rather than silently ignore it.
    if (isSystemNamespace(ns) || ownNamespaces.includes(ns))
      throw new ConfigError(
        `TRAINSCALER_NAMESPACES: '${ns}' is a system namespace or trainscaler's own; trainscaler never acts there`,
      );
  }
  return {
    ...DEFAULT_POLICY_CONFIG,
    cooldownSeconds: numberFrom(env, 'TRAINSCALER_COOLDOWN_SECONDS', DEFAULT_POLICY_CONFIG.cooldownSeconds),
    scaleUpCostSeconds: numberFrom(
      env,
      'TRAINSCALER_SCALE_UP_COST_SECONDS',
      DEFAULT_POLICY_CONFIG.scaleUpCostSeconds,
    ),
    scaleDownCostSeconds: numberFrom(
      env,
      'TRAINSCALER_SCALE_DOWN_COST_SECONDS',
      DEFAULT_POLICY_CONFIG.scaleDownCostSeconds,
    ),
    maxReplicaStep: numberFrom(env, 'TRAINSCALER_MAX_REPLICA_STEP', DEFAULT_POLICY_CONFIG.maxReplicaStep),
    maxMemoryBytes: numberFrom(env, 'TRAINSCALER_MAX_MEMORY_BYTES', DEFAULT_POLICY_CONFIG.maxMemoryBytes),
    maxClusterGpus: numberFrom(env, 'TRAINSCALER_MAX_CLUSTER_GPUS', DEFAULT_POLICY_CONFIG.maxClusterGpus),
    namespaceAllowlist: allowlist,
    ownNamespaces,
  };
}

/** EKS_CLUSTER_NAME (Lambda) > KUBECONFIG > in-cluster ServiceAccount > ~/.kube/config. */
export function kubeAccessFromEnv(env: Env): KubeAccess {
  const clusterName = env.EKS_CLUSTER_NAME;
  if (clusterName) {
    if (!EKS_CLUSTER_NAME.test(clusterName))
      throw new ConfigError(`EKS_CLUSTER_NAME is not an EKS cluster name: '${clusterName}'`);
    // Lambda always sets AWS_REGION; elsewhere the SDK's other variable is accepted too.
    const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
    if (!region) throw new ConfigError('AWS_REGION is not set (needed with EKS_CLUSTER_NAME)');
    if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(region))
      throw new ConfigError(`AWS_REGION is not an AWS region: '${region}'`);
    return { mode: 'eks', clusterName, region };
  }
  if (env.KUBECONFIG) return { mode: 'kubeconfig', path: env.KUBECONFIG };
  // On Lambda there is no ~/.kube/config to fall back to: say what is missing instead of failing obscurely.
  if (env.AWS_LAMBDA_FUNCTION_NAME)
    throw new ConfigError('EKS_CLUSTER_NAME is not set (required on AWS Lambda: the EKS cluster to manage)');
  if (env.KUBERNETES_SERVICE_HOST) return { mode: 'in-cluster' };
  return { mode: 'default' };
}

/** Everything the environment says, validated; throws a ConfigError naming the first bad variable. */
export function readRuntimeConfig(env: Env): RuntimeConfig {
  const prometheusUrl = env.PROMETHEUS_URL;
  if (!prometheusUrl)
    throw new ConfigError('PROMETHEUS_URL is not set (the Prometheus that scrapes the trainscaler sidecars)');
  let parsed: URL;
  try {
    parsed = new URL(prometheusUrl);
  } catch {
    throw new ConfigError(`PROMETHEUS_URL is not a URL: '${redactUrls(prometheusUrl)}'`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new ConfigError(`PROMETHEUS_URL must be http(s), got '${redactUrls(prometheusUrl)}'`);
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);
  return {
    prometheusUrl,
    kube: kubeAccessFromEnv(env),
    policy: policyConfigFromEnv(env),
    dryRun: booleanFrom(env, 'TRAINSCALER_DRY_RUN', false),
    logLevel,
    profiles: {
      namespace: dnsLabelFrom(env, 'TRAINSCALER_PROFILES_NAMESPACE', 'trainscaler-system'),
      configMapName: env.TRAINSCALER_PROFILES_CONFIGMAP || 'trainscaler-profiles',
      // Above the store's bound a namespace's share would never be reached: the store-wide drop would act first.
      perNamespace: numberFrom(
        env,
        'TRAINSCALER_PROFILES_PER_NAMESPACE',
        DEFAULT_PROFILE_LIMITS.maxProfilesPerNamespace,
        { min: 1, max: DEFAULT_PROFILE_LIMITS.maxProfiles },
      ),
    },
  };
}

/** Credentials for the API server; for EKS this calls eks:DescribeCluster once. */
export async function loadKubeConfigFor(access: KubeAccess, eks?: EKSClient): Promise<KubeConfig> {
  if (access.mode === 'eks') {
    return loadEksKubeConfig({
      clusterName: access.clusterName,
      region: access.region,
      eks: eks ?? new EKSClient({ region: access.region }),
    });
  }
  try {
    if (access.mode === 'kubeconfig') return loadKubeConfig({ kubeconfig: access.path });
    if (access.mode === 'in-cluster') return loadKubeConfig({ inCluster: true });
    return loadKubeConfig();
  } catch (error) {
    const variable =
      access.mode === 'kubeconfig' ? `KUBECONFIG '${access.path}'` : `${access.mode} credentials`;
    throw new ConfigError(
      `cannot load ${variable}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * The API server client: reads and guarded patches retried with jittered backoff (a lost response is settled
 * by re-reading). A fence (the runner's leadership) goes under the retries, so every attempt passes it.
 */
export function buildClusterClient(kubeConfig: KubeConfig, fence?: WriteFence): ClusterClient {
  const server = new KubernetesClusterClient(kubeConfig);
  return new RetryingClusterClient(fence ? new LeaderFencedClusterClient(server, fence) : server);
}

/** Handler dependencies on a KubeConfig already loaded (the runner shares it with its informers). */
export function buildRuntimeDeps(config: RuntimeConfig, kubeConfig: KubeConfig): HandlerDeps {
  const clock = () => Math.floor(Date.now() / 1000);
  return {
    cluster: buildClusterClient(kubeConfig),
    metrics: new PrometheusMetricsSource(config.prometheusUrl, clock),
    clock,
    config: config.policy,
    dryRun: config.dryRun,
    logger: pino({ level: config.logLevel }),
    profiles: config.profiles,
    // Lives as long as these deps: the runner's process, or on Lambda the warm container (runtimeDepsLoader
    // builds the deps once per container); a cold start begins empty and only fits from scratch once.
    fitCache: new FitCache(),
  };
}

/** Clients for a real cluster and Prometheus, from the environment. Fails with a ConfigError naming the variable. */
export async function loadRuntimeDeps(env: Env): Promise<HandlerDeps> {
  const config = readRuntimeConfig(env);
  return buildRuntimeDeps(config, await loadKubeConfigFor(config.kube));
}
