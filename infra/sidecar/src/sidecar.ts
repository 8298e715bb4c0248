// Wires the progress sources, the tracker, the exported series and the two HTTP servers together.
// main.ts adds the process concerns (environment, signals); tests start this directly.
import type { Readable } from 'node:stream';
import { findPodCgroup } from './cgroup.js';
import type { SidecarConfig } from './config.js';
import { DrainCoordinator, type DrainResult } from './drain.js';
import { GpuReader } from './gpu.js';
import { createHookServer } from './hook-api.js';
import { close, listen } from './http-util.js';
import { followFile, followStream, parseLogLine, type Stoppable } from './log-source.js';
import { createSidecarMetrics } from './metrics.js';
import { createMetricsServer } from './metrics-server.js';
import { type ProgressReport, ProgressTracker } from './progress-tracker.js';
import { followEndpoint } from './scrape-source.js';

export interface SidecarOptions {
  /** Epoch seconds; injectable so that tests control step timing. */
  clock?: () => number;
  log?: (message: string) => void;
  /** Standard input for TRAINSCALER_LOG_FILE='-', and where its lines are echoed. */
  stdin?: Readable;
  stdout?: NodeJS.WritableStream;
}

export interface RunningSidecar {
  metricsUrl: string;
  hookUrl: string;
  tracker: ProgressTracker;
  drain: DrainCoordinator;
  /** Feeds a report as any source would (used by sources, tests and benchmarks). */
  report(report: ProgressReport): void;
  /** Asks the trainer to checkpoint and waits for it, at most the grace period. */
  drainTrainer(): Promise<DrainResult>;
  stop(): Promise<void>;
}

const GPU_MIN_INTERVAL_MS = 5000;

async function resolveCgroup(
  source: SidecarConfig['cgroup'],
  log: (message: string) => void,
): Promise<string | undefined> {
  if (source === undefined) {
    log('no TRAINSCALER_CGROUP_PATH or TRAINSCALER_CGROUP_ROOT + TRAINSCALER_POD_UID: no cgroup metrics');
    return undefined;
  }
  if ('path' in source) return source.path;
  const found = await findPodCgroup(source.root, source.podUid);
  if (found === undefined)
    log(`no cgroup for pod ${source.podUid} under ${source.root}: no cgroup metrics will be exported`);
  return found;
}

export async function startSidecar(
  config: SidecarConfig,
  options: SidecarOptions = {},
): Promise<RunningSidecar> {
  const clock = options.clock ?? (() => Date.now() / 1000);
  const log = options.log ?? (() => undefined);
  const tracker = new ProgressTracker(config.stepWindowSeconds, config.shape);
  const drain = new DrainCoordinator(config.drain.file);
  await drain.clear();
  const gpus = new GpuReader(config.nvidiaSmi, GPU_MIN_INTERVAL_MS, log);
  const cgroupPath = await resolveCgroup(config.cgroup, log);
  const metrics = createSidecarMetrics({
    identity: config.identity,
    nodeName: config.nodeName,
    tracker,
    gpus,
    cgroupPath,
    drain,
    clock,
    log,
  });
  const report = (r: ProgressReport) => metrics.record(tracker.observe(r));

  const hookServer = createHookServer({ onReport: report, drain, clock });
  const metricsServer = createMetricsServer(metrics.registry, drain);
  const hookAddress = await listen(hookServer, config.hook.host, config.hook.port);
  let metricsAddress: Awaited<ReturnType<typeof listen>>;
  try {
    metricsAddress = await listen(metricsServer, config.metrics.host, config.metrics.port);
  } catch (error) {
    await close(hookServer);
    throw error;
  }

  const sources: Stoppable[] = [];
  const fromSource = (progress: { step: number; samples?: number }) => report({ ...progress, at: clock() });
  if (config.log) {
    const { pattern, path, pollMs } = config.log;
    const onLine = (line: string) => {
      const progress = parseLogLine(line, pattern);
      if (progress) fromSource(progress);
    };
    sources.push(
      path === '-'
        ? followStream(options.stdin ?? process.stdin, onLine, options.stdout)
        : followFile(path, pollMs, onLine),
    );
  }
  if (config.scrape) sources.push(followEndpoint(config.scrape, fromSource, log));

  const url = (a: { address: string; port: number }) => `http://${a.address}:${a.port}`;
  return {
    metricsUrl: url(metricsAddress),
    hookUrl: url(hookAddress),
    tracker,
    drain,
    report,
    drainTrainer: () => drain.drain(config.drain.graceSeconds * 1000),
    async stop() {
      await Promise.all(sources.map((s) => s.stop()));
      await Promise.all([close(hookServer), close(metricsServer)]);
    },
  };
}
