// `trainscaler forward`: the event forwarder as a process (infra/k8s/forwarder), until SIGTERM/SIGINT.
// AWS credentials and region come from the SDK's default chain: in EKS the pod's identity (IRSA or EKS Pod
// Identity); AWS_ENDPOINT_URL_EVENTBRIDGE points it at another endpoint (the tests' emulator).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import pino from 'pino';
import { kubeAccessFromEnv, loadKubeConfigFor } from '../../functions/runtime-deps.js';
import { ConfigError } from '../errors.js';
import { DEFAULT_GRACE_MS } from './classify.js';
import { type Forwarder, startForwarder } from './forwarder.js';
import { ConfigMapLedgerStore, type LedgerStore, MemoryLedgerStore } from './ledger.js';

export interface ForwardCommandOptions {
  bus: string;
  kubeconfig?: string;
  region?: string;
  ledgerNamespace?: string;
  ledgerConfigmap: string;
  address: string;
  port: number;
  statefulsetSelector?: string;
  summarySeconds: number;
  graceSeconds?: number;
}

type Env = Record<string, string | undefined>;

// EventBridge accepts a bus name or its ARN.
const BUS_NAME = /^[/.\-_A-Za-z0-9]{1,256}$/;
const BUS_ARN = /^arn:aws[\w-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[/.\-_A-Za-z0-9]{1,256}$/;
const REGION = /^[a-z]{2}(-[a-z]+)+-\d+$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function resolveForwardSettings(options: ForwardCommandOptions, env: Env) {
  if (!BUS_NAME.test(options.bus) && !BUS_ARN.test(options.bus))
    throw new ConfigError(`--bus must be an EventBridge bus name or ARN, got '${options.bus}'`);
  const region = options.region || env.AWS_REGION || env.AWS_DEFAULT_REGION;
  if (!region) throw new ConfigError('no AWS region: pass --region or set AWS_REGION');
  if (!REGION.test(region)) throw new ConfigError(`not an AWS region: '${region}'`);
  const ledgerNamespace = options.ledgerNamespace || env.POD_NAMESPACE || 'trainscaler-system';
  if (!DNS_LABEL.test(ledgerNamespace))
    throw new ConfigError(`--ledger-namespace must be a namespace name, got '${ledgerNamespace}'`);
  if (
    options.ledgerConfigmap !== 'none' &&
    !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(options.ledgerConfigmap)
  )
    throw new ConfigError(
      `--ledger-configmap must be a ConfigMap name or 'none', got '${options.ledgerConfigmap}'`,
    );
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535)
    throw new ConfigError(`--port must be a TCP port, got '${options.port}'`);
  // The forwarder reads the cluster like the runner (KUBECONFIG, in-cluster, ~/.kube/config), never EKS.
  const merged: Env = { ...env, EKS_CLUSTER_NAME: undefined, AWS_LAMBDA_FUNCTION_NAME: undefined };
  if (options.kubeconfig) merged.KUBECONFIG = options.kubeconfig;
  return {
    bus: options.bus,
    region,
    kube: kubeAccessFromEnv(merged),
    ledgerNamespace,
    graceMs: options.graceSeconds === undefined ? DEFAULT_GRACE_MS : options.graceSeconds * 1000,
  };
}

export interface RunningForwarder {
  forwarder: Forwarder;
  server: Server;
  url: string;
  stop(): Promise<void>;
}

export async function forwardCommand(
  options: ForwardCommandOptions,
  env: Env = process.env,
): Promise<RunningForwarder> {
  const settings = resolveForwardSettings(options, env);
  const logger = pino({ level: env.LOG_LEVEL || 'info' });
  const kubeConfig = await loadKubeConfigFor(settings.kube);
  // A hung connection must fail (and be retried) instead of stalling every event behind it.
  const eventBridge = new EventBridgeClient({
    region: settings.region,
    requestHandler: { connectionTimeout: 5_000, requestTimeout: 15_000, throwOnRequestTimeout: true },
  });
  const ledgerStore: LedgerStore =
    options.ledgerConfigmap === 'none'
      ? new MemoryLedgerStore()
      : new ConfigMapLedgerStore(kubeConfig, settings.ledgerNamespace, options.ledgerConfigmap);
  const forwarder = await startForwarder({
    kubeConfig,
    busName: settings.bus,
    putEvents: (entries) => eventBridge.send(new PutEventsCommand({ Entries: entries })),
    ledgerStore,
    logger,
    graceMs: settings.graceMs,
    summaryIntervalMs: options.summarySeconds * 1000,
    ...(options.statefulsetSelector ? { statefulSetSelector: options.statefulsetSelector } : {}),
  });
  let synced = false;
  forwarder.synced.then(
    () => {
      synced = true;
      logger.info({ ledgerEntries: forwarder.ledger.size }, 'forwarder synced');
    },
    () => {},
  );
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      forwarder.metrics.registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': forwarder.metrics.registry.contentType });
          res.end(body);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
      return;
    }
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(synced ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(synced ? 'ok\n' : 'listing\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.address, resolve);
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.address}:${address.port}`;
  logger.info(
    { bus: settings.bus, region: settings.region, kube: settings.kube.mode, url },
    'trainscaler forward',
  );
  const stop = async () => {
    await forwarder.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    eventBridge.destroy();
  };
  return { forwarder, server, url, stop };
}

/** Shutdown must end before the kubelet's SIGKILL (terminationGracePeriodSeconds 30). */
const SHUTDOWN_DEADLINE_MS = 25_000;

export function stopOnSignals(running: RunningForwarder): void {
  const shutdown = () => {
    const deadline = setTimeout(() => process.exit(1), SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    running.stop().then(
      () => {
        clearTimeout(deadline);
        process.exit(0);
      },
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
