// AWS Lambda entry points: one per trigger, each a thin wrapper that builds the clients once per
// container (the only module-level state) and hands the event to the same handler the other runtimes use.
// infra/lambda/bundle.ts bundles each export on its own; the /* @__PURE__ */ marks let esbuild drop the
// handlers a function does not export.

import { ConfigError, ValidationError } from '../lib/errors.js';
import { DecisionLog } from '../lib/runner/decision-log.js';
import { handleAlarm } from './alarm.js';
import { handleClusterEvent } from './cluster-event.js';
import type { Handler, HandlerDeps, HandlerResult } from './handler-deps.js';
import {
  buildRuntimeDeps,
  loadKubeConfigFor,
  type RuntimeConfig,
  readRuntimeConfig,
} from './runtime-deps.js';
import { handleSchedule } from './schedule.js';
import { handleSubmit } from './submit.js';

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

interface HttpEvent {
  body?: string | null;
  isBase64Encoded?: boolean;
}

/** Alertmanager's webhook through an API Gateway HTTP API: 400 with the field for bad input, 200 otherwise. */
export async function alertmanagerWebhook(event: HttpEvent): Promise<{ statusCode: number; body: string }> {
  try {
    const text = event.isBase64Encoded
      ? Buffer.from(event.body ?? '', 'base64').toString('utf8')
      : (event.body ?? '');
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      throw new ValidationError('', 'request body is not JSON');
    }
    const result = await handleAlarm(payload, await runtimeDeps());
    return { statusCode: 200, body: JSON.stringify(result) };
  } catch (error) {
    if (error instanceof ValidationError) {
      return { statusCode: 400, body: JSON.stringify({ error: error.message, field: error.field }) };
    }
    throw error;
  }
}
