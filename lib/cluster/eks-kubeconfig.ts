// A client-node KubeConfig for an EKS cluster reached from AWS Lambda, where there is no kubeconfig file and
// no `aws` CLI for an exec plugin: the endpoint and CA come from eks:DescribeCluster, the bearer token is
// minted in-process (eks-token.ts) and re-minted before it expires, on the request path, so a warm Lambda
// container or a long-running watch never sends a stale token.

import {
  DescribeClusterCommand,
  type DescribeClusterCommandOutput,
  type EKSClient,
} from '@aws-sdk/client-eks';
import { KubeConfig } from '@kubernetes/client-node';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { ApiError, ConfigError } from '../errors.js';
import { createEksToken, type EksToken } from './eks-token.js';

export interface EksClusterInfo {
  name: string;
  /** https://... */
  endpoint: string;
  /** Base64 PEM, as DescribeCluster returns it and a kubeconfig's certificate-authority-data expects it. */
  certificateAuthorityData: string;
}

/** Endpoint and CA of the cluster; a cluster that is not ACTIVE yet has neither, which is a clear error. */
export async function describeEksCluster(eks: EKSClient, name: string): Promise<EksClusterInfo> {
  let cluster: DescribeClusterCommandOutput['cluster'];
  try {
    ({ cluster } = await eks.send(new DescribeClusterCommand({ name })));
  } catch (error) {
    const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new ApiError(`eks:DescribeCluster ${name}`, undefined, detail, { cause: error });
  }
  const endpoint = cluster?.endpoint;
  const certificateAuthorityData = cluster?.certificateAuthority?.data;
  if (!endpoint || !certificateAuthorityData)
    throw new ConfigError(
      `EKS cluster '${name}' has no endpoint or certificate authority yet (status ${cluster?.status ?? 'unknown'})`,
    );
  return { name, endpoint, certificateAuthorityData };
}

/** Renew this long before expiry, so a token never expires between being read and reaching the server. */
export const REFRESH_MARGIN_MS = 2 * 60 * 1000;

export interface EksTokenSourceOptions {
  clusterName: string;
  region: string;
  credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** Epoch milliseconds; injected so tests can move time. */
  clock?: () => number;
  mint?: typeof createEksToken;
}

/** Caches one token and mints the next when the current one is within REFRESH_MARGIN_MS of expiring. */
export class EksTokenSource {
  private current: EksToken | undefined;
  private minting: Promise<EksToken> | undefined;
  private readonly clock: () => number;
  private readonly mint: typeof createEksToken;

  constructor(private readonly options: EksTokenSourceOptions) {
    this.clock = options.clock ?? Date.now;
    this.mint = options.mint ?? createEksToken;
  }

  async token(): Promise<string> {
    const now = this.clock();
    if (this.current && now < this.current.expiresAt - REFRESH_MARGIN_MS) return this.current.token;
    // Concurrent requests share one signing instead of each minting its own.
    this.minting ??= this.mint({
      clusterName: this.options.clusterName,
      region: this.options.region,
      credentials: this.options.credentials,
      now: new Date(now),
    }).finally(() => {
      this.minting = undefined;
    });
    this.current = await this.minting;
    return this.current.token;
  }
}

const AUTH_PROVIDER = 'trainscaler-eks';
type Authenticator = Parameters<KubeConfig['addAuthenticator']>[0];

function isOurs(authProvider: unknown): boolean {
  return typeof authProvider === 'object' && authProvider !== null && 'name' in authProvider
    ? authProvider.name === AUTH_PROVIDER
    : false;
}

/**
 * One cluster, one user, one context. The user names a custom auth provider instead of carrying a token:
 * client-node asks the provider on every request (API calls and watches alike), which is where the token is
 * refreshed.
 */
export function eksKubeConfig(cluster: EksClusterInfo, tokens: { token(): Promise<string> }): KubeConfig {
  const authenticator: Authenticator = {
    isAuthProvider: (user) => isOurs(user.authProvider),
    applyAuthentication: async (_user, opts) => {
      const headers = opts.headers && !Array.isArray(opts.headers) ? opts.headers : {};
      opts.headers = { ...headers, Authorization: `Bearer ${await tokens.token()}` };
    },
  };
  const kc = new KubeConfig();
  kc.addAuthenticator(authenticator);
  kc.loadFromOptions({
    clusters: [
      {
        name: cluster.name,
        server: cluster.endpoint,
        caData: cluster.certificateAuthorityData,
        skipTLSVerify: false,
      },
    ],
    users: [{ name: AUTH_PROVIDER, authProvider: { name: AUTH_PROVIDER, config: {} } }],
    contexts: [{ name: cluster.name, cluster: cluster.name, user: AUTH_PROVIDER }],
    currentContext: cluster.name,
  });
  return kc;
}

/** DescribeCluster, then a KubeConfig whose token is signed with the same credentials the EKS client uses. */
export async function loadEksKubeConfig(options: {
  clusterName: string;
  region: string;
  eks: EKSClient;
}): Promise<KubeConfig> {
  const cluster = await describeEksCluster(options.eks, options.clusterName);
  const tokens = new EksTokenSource({
    clusterName: options.clusterName,
    region: options.region,
    credentials: options.eks.config.credentials,
  });
  return eksKubeConfig(cluster, tokens);
}
