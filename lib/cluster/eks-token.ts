// The bearer token EKS accepts from an IAM identity (the aws-iam-authenticator scheme, what `aws eks get-token`
// prints): a presigned STS GetCallerIdentity URL whose signature covers an `x-k8s-aws-id: <cluster>` header,
// so a token minted for one cluster is useless against another. The API server's authenticator replays the
// URL against STS to learn who signed it; nothing here talks to AWS.

import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';

export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/**
 * X-Amz-Expires of the presigned URL. aws-iam-authenticator sends 60 and its server rejects larger values;
 * STS itself honours a presigned GetCallerIdentity for 15 minutes from X-Amz-Date whatever this says.
 */
export const PRESIGN_EXPIRES_SECONDS = 60;
/** How long a token is used: aws-iam-authenticator's own client lifetime (15 min STS window minus 1 min). */
export const TOKEN_LIFETIME_SECONDS = 14 * 60;

export interface EksTokenInput {
  clusterName: string;
  region: string;
  credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** Signing time; injected so tests can fix it. */
  now?: Date;
}

export interface EksToken {
  token: string;
  /** When the token must no longer be sent (epoch milliseconds). */
  expiresAt: number;
}

/** The presigned URL inside the token, with the region's own STS endpoint (not the global one). */
export async function presignGetCallerIdentity(input: EksTokenInput): Promise<URL> {
  const hostname = `sts.${input.region}.amazonaws.com`;
  const signer = new SignatureV4({
    credentials: input.credentials,
    region: input.region,
    service: 'sts',
    sha256: Sha256,
    uriEscapePath: true,
  });
  const signed = await signer.presign(
    {
      method: 'GET',
      protocol: 'https:',
      hostname,
      path: '/',
      query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
      // `host` must be signed explicitly: the signer signs the headers the request carries.
      headers: { host: hostname, [CLUSTER_ID_HEADER]: input.clusterName },
    },
    { expiresIn: PRESIGN_EXPIRES_SECONDS, signingDate: input.now ?? new Date() },
  );
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(signed.query ?? {})) {
    for (const v of typeof value === 'string' ? [value] : (value ?? []))
      pairs.push(`${rfc3986(name)}=${rfc3986(v)}`);
  }
  return new URL(`https://${hostname}/?${pairs.join('&')}`);
}

/** The escaping SigV4 canonicalises with, so the URL carries exactly the bytes that were signed. */
function rfc3986(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** `k8s-aws-v1.` + base64url(presigned URL) without padding. */
export async function createEksToken(input: EksTokenInput): Promise<EksToken> {
  const now = input.now ?? new Date();
  const url = await presignGetCallerIdentity({ ...input, now });
  return {
    token: EKS_TOKEN_PREFIX + Buffer.from(url.toString(), 'utf8').toString('base64url'),
    expiresAt: now.getTime() + TOKEN_LIFETIME_SECONDS * 1000,
  };
}
