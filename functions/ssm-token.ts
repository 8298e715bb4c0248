// The Lambda webhook's token: an SSM Parameter Store SecureString, read with decryption on the first request
// of a cold start and then at most once per TTL (a rotated parameter is picked up within it). The function's
// role may read exactly this one parameter (serverless.yml).
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { cachedToken, type TokenSource } from './webhook-auth.js';

export const SSM_TOKEN_TTL_MS = 5 * 60_000;

export function ssmTokenSource(
  parameterName: string,
  options: { client?: SSMClient; ttlMs?: number; onRefreshError?: (error: unknown) => void } = {},
): TokenSource {
  const client = options.client ?? new SSMClient({});
  const load = async () => {
    const answer = await client.send(new GetParameterCommand({ Name: parameterName, WithDecryption: true }));
    const token = answer.Parameter?.Value?.trim();
    return token ? token : undefined;
  };
  return cachedToken(load, options.ttlMs ?? SSM_TOKEN_TTL_MS, Date.now, options.onRefreshError);
}
