// The quick start's clock. Production waits minutes before it acts (an alert must hold 10 minutes, a rate is
// taken over 5), which no one watches on a first run; the quick start replays the same rules faster and says so.
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';

/** 1 minute of the production alert rules and Alertmanager timers lasts 2 s. */
export const TIME_FACTOR = 30;
/** The sidecar's step-time window (production 60 s). */
export const SIDECAR_WINDOW_SECONDS = 4;
/** The resolution trainscaler reads the job's metrics at (production 60 s). */
export const METRICS_STEP_SECONDS = 1;
/** How long a job is left alone after a resize (production DEFAULT_POLICY_CONFIG.cooldownSeconds). */
export const COOLDOWN_SECONDS = 40;
/** The rebalance schedule (production every minute), in effect off for the few minutes of the quick start. */
export const QUICKSTART_SCHEDULE = '0 0 1 1 *';
/** A rate window of the compressed rules ([5m] -> 10 s) and a little more: a throughput read covers one size. */
export const RATE_WINDOW_MS = ((5 * 60) / TIME_FACTOR) * 1000 + 2_000;

/** What is compressed and why, for the top of the output. */
export function compressedTimingsText(): string[] {
  return [
    'Timings are compressed so that this takes minutes instead of an hour; thresholds, rule expressions, routes',
    'and policies are the production ones:',
    `  - alert rules and Alertmanager timers run ${TIME_FACTOR}x faster (for: 10m -> 20 s, rate windows 5m -> 10 s,`,
    '    group_wait 30s -> 1 s), as in the training test (infra/local-stack/time-compression.ts);',
    `  - the sidecar averages step times over ${SIDECAR_WINDOW_SECONDS} s (production 60 s), trainscaler reads metrics ` +
      `at ${METRICS_STEP_SECONDS} s resolution (60 s)`,
    `    and leaves a resized job alone for ${COOLDOWN_SECONDS} s (${DEFAULT_POLICY_CONFIG.cooldownSeconds} s);`,
    "  - the contention that makes the alert fire is staged: worker-0's trainer is CPU-throttled",
    '    (infra/local-stack/cpu-throttle.ts, a stand-in for a noisy neighbour) until trainscaler has acted;',
    '  - the every-minute rebalance schedule is off: on this idle cluster it would grow the job into the free',
    '    room on its own within a minute, before any alert; here the alert is what moves trainscaler.',
  ];
}
