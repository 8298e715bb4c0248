// A CPU-THROTTLE STAND-IN for the training test: slows one real trainer process the way a CFS quota (a CPU
// limit, or a node whose CPU a neighbour took) does, by stopping it for the rest of each period. The host
// node runs pods without cgroups, so SIGSTOP / SIGCONT does what the kernel's throttling would: the process
// runs `runMs`, then is stopped `stopMs`, over and over. It is a deliberate, named perturbation that makes
// the job's real throughput per worker drop, which is what the production alert
// TrainscalerLowThroughputPerWorker is for ("as contention grows each worker does less"). Bounded: it ends
// by itself after `maxMs`, and stop() always leaves the process running (SIGCONT).
import { readdirSync, readFileSync } from 'node:fs';

export interface Throttle {
  /** Ends the throttling and continues the process; resolves once it is running again. */
  stop(): Promise<void>;
  /** Periods applied so far. */
  readonly periods: number;
}

/**
 * A trainer process: the worker running train.py, or, under trainscaler's launcher, the warm server and the
 * workers it forks (a fork keeps the server's command line; the stub that names train.py only waits for it).
 * Never the agent (torchrun, or the launcher whose arguments name train.py too): stopping it would stall the
 * rendezvous, not the training.
 */
function isTrainer(cmdline: string[]): boolean {
  if (cmdline.some((a) => a.endsWith('torchrun') || a === 'trainscaler_hook.launch')) return false;
  const warmServer = cmdline.includes('trainscaler_hook.warm') && cmdline.includes('serve');
  return warmServer || cmdline.some((a) => a.endsWith('train.py'));
}

/**
 * Pids of the training processes (torchrun's workers, not the agent) started with TRAIN_LOG_DIR=`logDir`
 * and TRAIN_NODE_NAME=`pod`: read from /proc (the test runs as root, like the host node agent).
 */
export function trainerPids(logDir: string, pod: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!isTrainer(cmdline)) continue;
      const environ = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (environ.includes(`TRAIN_LOG_DIR=${logDir}`) && environ.includes(`TRAIN_NODE_NAME=${pod}`))
        pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // exited
    }
  }
}

export function throttle(
  pids: number[],
  options: { runMs: number; stopMs: number; maxMs: number },
): Throttle {
  if (pids.length === 0) throw new Error('throttle: no process to throttle');
  let periods = 0;
  let stopped = false;
  const until = Date.now() + options.maxMs;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const loop = (async () => {
    while (!stopped && Date.now() < until) {
      signal(pids, 'SIGSTOP');
      await sleep(options.stopMs);
      signal(pids, 'SIGCONT');
      periods++;
      if (stopped) break;
      await sleep(options.runMs);
    }
    signal(pids, 'SIGCONT');
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
    get periods() {
      return periods;
    },
  };
}
