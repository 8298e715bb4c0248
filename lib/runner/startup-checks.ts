// At start-up `trainscaler run` checks that it can reach what every decision needs, and says so in one line
// each: a wrong PROMETHEUS_URL or kubeconfig otherwise shows only as silence. Unreachable is a warning, not
// a failure: Prometheus may come up after trainscaler, and the informers retry the API server on their own.

import { type KubeConfig, VersionApi } from '@kubernetes/client-node';
import axios from 'axios';
import type { Logger } from '../../functions/handler-deps.js';
import { readRequestOptions } from '../cluster/kubernetes-cluster-client.js';
import { redactUrls } from '../redact-url.js';

const TIMEOUT_MS = 5_000;

export interface CheckResult {
  ok: boolean;
  detail: string;
}

/** What failed, in words that hold no credential (a URL's userinfo or query values are hidden). */
function failure(error: unknown): string {
  if (axios.isAxiosError(error))
    return error.response ? `HTTP ${error.response.status}` : redactUrls(error.code ?? error.message);
  return redactUrls(error instanceof Error ? error.message : String(error));
}

/** Prometheus's readiness endpoint, then a trivial query (the API the metrics source uses). */
export async function checkPrometheus(url: string): Promise<CheckResult> {
  try {
    const http = axios.create({ baseURL: url, timeout: TIMEOUT_MS });
    await http.get('/-/ready');
    const { data } = await http.get('/api/v1/query', { params: { query: 'vector(1)' } });
    if (data?.status !== 'success') return { ok: false, detail: 'query API answered without success' };
    return { ok: true, detail: 'ready' };
  } catch (error) {
    return { ok: false, detail: failure(error) };
  }
}

/**
 * The API server's /version, with the credentials the runner will use. A server that does not answer in time
 * has its request cancelled (the connection closed), not left open for the life of the process.
 */
export async function checkApiServer(kubeConfig: KubeConfig, timeoutMs = TIMEOUT_MS): Promise<CheckResult> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  try {
    const version = await Promise.race([
      kubeConfig
        .makeApiClient(VersionApi)
        .getCode({}, readRequestOptions({ signal: controller.signal, timeoutMs })),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const error = new Error(`no answer in ${timeoutMs / 1000} s`);
          controller.abort(error);
          reject(error);
        }, timeoutMs);
      }),
    ]);
    return { ok: true, detail: version.gitVersion };
  } catch (error) {
    return { ok: false, detail: failure(error) };
  } finally {
    clearTimeout(timer);
  }
}

export async function runStartupChecks(
  target: { prometheusUrl: string; kubeConfig: KubeConfig },
  logger: Logger,
): Promise<{ prometheus: CheckResult; apiServer: CheckResult }> {
  const [prometheus, apiServer] = await Promise.all([
    checkPrometheus(target.prometheusUrl),
    checkApiServer(target.kubeConfig),
  ]);
  // Logged without their credentials: PROMETHEUS_URL may be https://user:password@host.
  const cluster = target.kubeConfig.getCurrentCluster()?.server;
  const server = cluster === undefined ? undefined : redactUrls(cluster);
  const shownPrometheus = redactUrls(target.prometheusUrl);
  if (prometheus.ok) logger.info({ prometheus: shownPrometheus }, 'prometheus reachable');
  else
    logger.warn(
      { prometheus: shownPrometheus, error: prometheus.detail },
      'prometheus unreachable: no runtime decision (alarm, rebalance) can be made until it answers',
    );
  if (apiServer.ok) logger.info({ apiServer: server, version: apiServer.detail }, 'API server reachable');
  else
    logger.warn(
      { apiServer: server, error: apiServer.detail },
      'API server unreachable: nothing can be watched or decided until it answers',
    );
  return { prometheus, apiServer };
}
