// What a rescale should cost a job, estimated from how it is launched, for as long as trainscaler has not
// measured it on the job (nor on earlier runs of its signature). Anchored on what `npm run bench:rescale`
// measured (lib/torchelastic/recommended-rendezvous.ts): the rendezvous' last call is waited on every rescale, so
// each second of last_call_timeout above the recommended 2 s adds about a second (0.94 s up / 0.97 s down per
// second between the two measured plain-torchrun rows, last call 2 s and 30 s; 1 s for the launcher, measured at
// 2 s only), and a monitor interval above 1 s adds up to its excess (the agent notices a change once per
// interval). join_timeout and close_timeout are not waited on a rescale of a running job. The torch version is
// not in the pod spec: the current release (2.15) is assumed, whose default monitor interval is 0.1 s and whose
// scale-ups need TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.
import type { LaunchSettings } from './launch-settings.js';
import {
  MEASURED_RESCALE_PAUSE_SECONDS,
  MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15,
  RECOMMENDED_RENDEZVOUS,
  RECOMMENDED_TORCHRUN_ENV,
  SHARED_STORE_WAIT_SECONDS,
  TORCHRUN_DEFAULT_LAST_CALL_SECONDS,
} from './recommended-rendezvous.js';

export interface EstimatedCost {
  seconds: number;
  /** How the launch was read, for the decision's reason (e.g. "plain torchrun with default rendezvous settings"). */
  basis: string;
}

export interface LaunchCostEstimate {
  up: EstimatedCost;
  down: EstimatedCost;
}

const SHARE_STORE_ENV = Object.keys(RECOMMENDED_TORCHRUN_ENV)[0] ?? '';
const round = (seconds: number) => Math.round(seconds * 10) / 10;

/**
 * Whether the agents share the rendezvous store with the workers (torch >= 2.4 unless
 * TORCH_DISABLE_SHARE_RDZV_TCP_STORE is "1"): trainscaler's launcher sets it to "1" unless the job sets it; plain
 * torchrun shares it unless the job sets it. False for a launch it does not recognise (nothing known).
 */
export function sharesRendezvousStore(launch: LaunchSettings): boolean {
  if (launch.launcher === 'trainscaler')
    return launch.disableShareStore !== undefined && launch.disableShareStore !== '1';
  return launch.launcher === 'torchrun' && launch.disableShareStore !== '1';
}

/** The estimate for a launch trainscaler recognises; undefined for an unknown one (the default applies). */
export function launchCostEstimate(launch: LaunchSettings): LaunchCostEstimate | undefined {
  if (launch.launcher === 'unknown') return undefined;
  const lastCall = launch.lastCallTimeout ?? TORCHRUN_DEFAULT_LAST_CALL_SECONDS;
  const recommendedLastCall = RECOMMENDED_RENDEZVOUS.last_call_timeout;
  const extraLastCall = Math.max(0, lastCall - recommendedLastCall);
  const extraMonitor = Math.max(
    0,
    (launch.monitorInterval ?? 0) - RECOMMENDED_RENDEZVOUS.PET_MONITOR_INTERVAL,
  );
  const recommended = extraLastCall === 0 && extraMonitor === 0;
  const given = [
    launch.lastCallTimeout === undefined ? '' : `last_call_timeout ${launch.lastCallTimeout} s`,
    launch.monitorInterval === undefined ? '' : `monitor interval ${launch.monitorInterval} s`,
  ].filter((s) => s !== '');
  const settings = recommended
    ? 'the recommended rendezvous settings'
    : given.length === 0
      ? 'default rendezvous settings'
      : given.join(', ');
  let up: number;
  let down: number;
  let what: string;
  const sharedStore = sharesRendezvousStore(launch);
  if (launch.launcher === 'trainscaler') {
    const measured = MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15.recommended;
    up = measured.up + extraLastCall + extraMonitor;
    down = measured.down + extraLastCall + extraMonitor;
    what = "trainscaler's launcher";
  } else {
    const low = MEASURED_RESCALE_PAUSE_SECONDS.torchrunRecommendedFlags;
    const high = MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15.torchrunDefaults;
    const span = TORCHRUN_DEFAULT_LAST_CALL_SECONDS - recommendedLastCall;
    up = low.up + (extraLastCall * (high.up - low.up)) / span + extraMonitor;
    down = low.down + (extraLastCall * (high.down - low.down)) / span + extraMonitor;
    what = 'plain torchrun';
  }
  const basis = `${what} with ${settings}`;
  return {
    up: sharedStore
      ? {
          seconds: round(up + SHARED_STORE_WAIT_SECONDS),
          basis: `${basis} and without ${SHARE_STORE_ENV}=1 (the store's ${SHARED_STORE_WAIT_SECONDS} s timeout added, torch >= 2.4)`,
        }
      : { seconds: round(up), basis },
    down: { seconds: round(down), basis },
  };
}
