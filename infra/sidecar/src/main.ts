// Entry point of the sidecar container. Configuration: see config.ts and README ("GPU-worker sidecar").
// On SIGTERM it asks the trainer to checkpoint (drain.ts), keeps serving /metrics meanwhile, and exits when
// the trainer has checkpointed or the grace period is over; a second signal exits at once.
// First: refuses an unsupported Node.js before the other modules load.
import './node-version.js';
import { loadSidecarConfig, SidecarConfigError } from './config.js';
import { startSidecar } from './sidecar.js';

function log(message: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields })}\n`);
}

async function main(): Promise<void> {
  let config: ReturnType<typeof loadSidecarConfig>;
  try {
    config = loadSidecarConfig(process.env);
  } catch (error) {
    if (error instanceof SidecarConfigError) {
      log('invalid configuration', { variable: error.variable, error: error.message });
      process.exit(2);
    }
    throw error;
  }
  const sidecar = await startSidecar(config, { log: (m) => log(m), stdout: process.stdout });
  log('listening', { metrics: sidecar.metricsUrl, hook: sidecar.hookUrl, labels: config.identity });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log('second signal, exiting now', { signal });
      process.exit(1);
    }
    stopping = true;
    log('draining: asking the trainer to checkpoint', { signal, graceSeconds: config.drain.graceSeconds });
    const result = await sidecar.drainTrainer();
    log('drained', { result });
    await sidecar.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  log('sidecar failed', { error: error instanceof Error ? error.message : String(error) });
  process.exit(1);
});
