// AWS Lambda entry points: one per trigger, each a thin wrapper that builds the clients once per
// container (the only module-level state) and hands the event to the same handler the other runtimes use.
// infra/lambda/bundle.ts bundles each export on its own; the /* @__PURE__ */ marks let esbuild drop the
// handlers a function does not export.

import { randomUUID } from 'node:crypto';
import { ConfigError } from '../lib/errors.js';
import { DecisionLog } from '../lib/runner/decision-log.js';
import { handleAlarm } from './alarm.js';
import { answerBody, handleAlertBody, MAX_BODY_BYTES } from './alertmanager-http.js';
import { handleClusterEvent } from './cluster-event.js';
import type { Handler, HandlerDeps, HandlerResult, Logger } from './handler-deps.js';
import {
  buildRuntimeDeps,
  loadKubeConfigFor,
  type RuntimeConfig,
  readRuntimeConfig,
} from './runtime-deps.js';
import { handleSchedule } from './schedule.js';
import { ssmTokenSource } from './ssm-token.js';
import { handleSubmit } from './submit.js';
import {
  checkCredential,
  NO_TOKEN,
  type TokenSource,
  UNCONFIGURED_WARNING,
  type Unauthorized,
} from './webhook-auth.js';

type Env = Record<string, string | undefined>;

/**
 * Validates the configuration now (cold start) and starts building the clients (eks:DescribeCluster) during
 * the init phase. A bad configuration is logged once here and rejects every invocation with the same
 * ConfigError; a failed build (network, throttling) is forgotten so the next invocation retries it.
 */
export function runtimeDepsLoader(env: Env, log: (line: string) => void = console.error) {
  let config: RuntimeConfig | undefined;
  let configError: ConfigError | undefined;
  try {
    config = readRuntimeConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    configError = error;
    log(JSON.stringify({ level: 'error', code: error.code, msg: error.message }));
  }
  let pending: Promise<HandlerDeps> | undefined;
  const start = (valid: RuntimeConfig) => {
    const building = loadKubeConfigFor(valid.kube).then((kc) => buildRuntimeDeps(valid, kc));
    building.catch(() => {
      if (pending === building) pending = undefined;
    });
    return building;
  };
  if (config) pending = start(config);
  return (): Promise<HandlerDeps> => {
    if (!config) return Promise.reject(configError);
    pending ??= start(config);
    return pending;
  };
}

let loader: (() => Promise<HandlerDeps>) | undefined;

function runtimeDeps(): Promise<HandlerDeps> {
  loader ??= runtimeDepsLoader(process.env);
  return loader();
}

// Module init is the cold start: on Lambda, validate and begin connecting before the first event arrives
// (elsewhere, e.g. a test importing this file, nothing happens until a handler is called).
if (process.env.AWS_LAMBDA_FUNCTION_NAME) runtimeDeps().catch(() => {});

// One line per decision, "keep" included, as `trainscaler run` logs them; rate-limited within a warm container.
let decisionLog: DecisionLog | undefined;

export function lambda(handler: Handler) {
  return async (event: unknown): Promise<HandlerResult> => {
    const deps = await runtimeDeps();
    const result = await handler(event, deps);
    decisionLog ??= new DecisionLog({ logger: deps.logger });
    decisionLog.record(result.trigger, result);
    return result;
  };
}

export const alarm = /* @__PURE__ */ lambda(handleAlarm);
export const clusterEvent = /* @__PURE__ */ lambda(handleClusterEvent);
export const schedule = /* @__PURE__ */ lambda(handleSchedule);
export const submit = /* @__PURE__ */ lambda(handleSubmit);

/**
 * The parts of an API Gateway HTTP API (payload format 2.0) event the webhook reads. HTTP APIs lower-case
 * header names; requestContext.requestId is API Gateway's own id, so logs and access logs share it.
 */
export interface HttpApiEvent {
  headers?: Record<string, string | undefined>;
  requestContext?: { requestId?: string };
  body?: string | null;
  isBase64Encoded?: boolean;
}

export interface HttpApiResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export interface AlertmanagerWebhookOptions {
  token: TokenSource;
  deps: () => Promise<HandlerDeps>;
  /** One JSON line per call (CloudWatch Logs). */
  log?: (line: string) => void;
  maxBodyBytes?: number;
}

/**
 * A 401 as a CloudWatch embedded-metric log line: CloudWatch turns it into the metric
 * trainscaler/trainscaler_webhook_unauthorized_total without an API call from the function.
 */
function unauthorizedMetricLine(reason: Unauthorized, requestId: string): string {
  return JSON.stringify({
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [
        {
          Namespace: 'trainscaler',
          Dimensions: [['reason']],
          Metrics: [{ Name: 'trainscaler_webhook_unauthorized_total', Unit: 'Count' }],
        },
      ],
    },
    reason,
    requestId,
    trainscaler_webhook_unauthorized_total: 1,
    level: 'warn',
    msg: 'webhook unauthorized',
  });
}

function jsonLogger(log: (line: string) => void): Logger {
  const line = (level: string) => (obj: object, msg?: string) =>
    log(JSON.stringify({ level, ...obj, ...(msg ? { msg } : {}) }));
  return { info: line('info'), warn: line('warn'), error: line('error') };
}

/**
 * Alertmanager's webhook through an API Gateway HTTP API route. The credential is checked before the body
 * is decoded; the answer carries only the status and the request id (details are logged under it):
 * 401 missing/wrong credential (or none configured), 413 body over the limit, 400 bad payload, 200 handled,
 * 500/503 failures Alertmanager retries.
 */
export function createAlertmanagerWebhook(options: AlertmanagerWebhookOptions) {
  const log = options.log ?? console.log;
  const logger = jsonLogger(log);
  const maxBody = options.maxBodyBytes ?? MAX_BODY_BYTES;
  return async (event: HttpApiEvent): Promise<HttpApiResult> => {
    const requestId = event.requestContext?.requestId ?? randomUUID();
    const answer = (statusCode: number, headers: Record<string, string> = {}): HttpApiResult => ({
      statusCode,
      headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...headers },
      body: answerBody(statusCode, requestId),
    });
    let expected: string | undefined;
    try {
      expected = await options.token();
    } catch (error) {
      logger.error({ requestId, error: String(error) }, 'webhook token unavailable');
      return answer(503, { 'retry-after': '10' });
    }
    const denied = checkCredential(expected, event.headers?.authorization);
    if (denied) {
      log(unauthorizedMetricLine(denied, requestId));
      return answer(401, { 'www-authenticate': 'Bearer' });
    }
    const raw = event.body ?? '';
    // Base64 of n bytes is about 4n/3 characters: judge the size before decoding anything.
    const bytes = event.isBase64Encoded ? Math.floor((raw.length * 3) / 4) : Buffer.byteLength(raw, 'utf8');
    if (bytes > maxBody) {
      logger.warn({ requestId, bytes }, 'alertmanager webhook rejected: body over the limit');
      return answer(413);
    }
    const text = event.isBase64Encoded ? Buffer.from(raw, 'base64').toString('utf8') : raw;
    return answer(await handleAlertBody(text, options.deps, logger, requestId));
  };
}

let webhookToken: TokenSource | undefined;

/** The token source from the environment, once per container; warns once when none is configured. */
function lambdaWebhookToken(env: Env): TokenSource {
  if (webhookToken) return webhookToken;
  const parameter = env.TRAINSCALER_WEBHOOK_TOKEN_PARAMETER;
  if (!parameter) {
    console.error(JSON.stringify({ level: 'warn', msg: UNCONFIGURED_WARNING }));
    webhookToken = NO_TOKEN;
  } else {
    webhookToken = ssmTokenSource(parameter, {
      onRefreshError: (error) =>
        console.error(
          JSON.stringify({
            level: 'warn',
            error: String(error),
            msg: 'cannot re-read the webhook token; keeping the last',
          }),
        ),
    });
  }
  return webhookToken;
}

export const alertmanagerWebhook = /* @__PURE__ */ createAlertmanagerWebhook({
  token: () => lambdaWebhookToken(process.env)(),
  deps: runtimeDeps,
});
