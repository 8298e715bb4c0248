// The webhook credential: Alertmanager sends `Authorization: Bearer <token>` (http_config.authorization
// with credentials_file); the runner reads the token from a mounted Secret file, the Lambda function from an
// SSM SecureString. Without a configured token every request is refused: the route is never open by default.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';

/** The expected token, or undefined when none is configured (then nothing is authorised). */
export type TokenSource = () => Promise<string | undefined>;

export type Unauthorized = 'missing' | 'wrong' | 'unconfigured';

/** The token of an `Authorization: Bearer <token>` header, or undefined for any other header. */
export function bearerCredential(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(value ?? '');
  return match?.[1];
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Constant time in the token's content: both sides are hashed to equal-length digests first, so neither the
 * length nor the first differing byte of the expected token shows in the comparison's timing.
 */
export function checkCredential(
  expected: string | undefined,
  header: string | string[] | undefined,
): Unauthorized | undefined {
  if (!expected) return 'unconfigured';
  const presented = bearerCredential(header);
  if (presented === undefined) return 'missing';
  return timingSafeEqual(digest(expected), digest(presented)) ? undefined : 'wrong';
}

/**
 * Caches what `load` returns for `ttlMs`, so a rotated Secret or parameter is picked up without a restart
 * and a request does not wait on a read. Concurrent callers share one load; a failed refresh keeps serving
 * the last value it had (and rejects only when it never had one).
 */
export function cachedToken(
  load: () => Promise<string | undefined>,
  ttlMs: number,
  clock: () => number = Date.now,
  onRefreshError: (error: unknown) => void = () => {},
): TokenSource {
  let value: { token: string | undefined; at: number } | undefined;
  let pending: Promise<string | undefined> | undefined;
  return () => {
    if (value && clock() - value.at < ttlMs) return Promise.resolve(value.token);
    pending ??= load()
      .then(
        (token) => {
          value = { token, at: clock() };
          return token;
        },
        (error: unknown) => {
          if (!value) throw error;
          onRefreshError(error);
          return value.token;
        },
      )
      .finally(() => {
        pending = undefined;
      });
    return pending;
  };
}

/** A token file as Alertmanager's credentials_file reads it: surrounding whitespace is not part of it. */
export async function readTokenFile(path: string): Promise<string | undefined> {
  const token = (await readFile(path, 'utf8')).trim();
  return token === '' ? undefined : token;
}

/** How long a token read from a file or SSM is reused before it is read again. */
export const WEBHOOK_TOKEN_TTL_MS = 60_000;

/** The source for a configuration with no token at all: every request is answered 401. */
export const NO_TOKEN: TokenSource = () => Promise.resolve(undefined);

export const UNCONFIGURED_WARNING =
  'no webhook token configured: /alertmanager answers 401 to every request (set TRAINSCALER_WEBHOOK_TOKEN_FILE, ' +
  'or TRAINSCALER_WEBHOOK_TOKEN_PARAMETER on Lambda)';
