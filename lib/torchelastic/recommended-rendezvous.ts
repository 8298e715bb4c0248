// What makes a rescale of an elastic PyTorchJob (torchelastic, c10d rendezvous) cheap, and what a rescale
// costs with it, in one place: the submit advice recommends (or, with trainscaler.io/tune-rendezvous, sets)
// these settings, `npm run bench:rescale` measures exactly them against torchrun's defaults, and the
// measured figures below are the policies' default rescale costs (config.ts) and the simulator's.
// Read against torch 1.13's torch/distributed/elastic.

/**
 * The rendezvous settings: the agent checks for joining/failed nodes every second (torchrun's default: 5 s)
 * and completes a rendezvous 2 s after its minimum is reached (default last call: 30 s). A shorter last call
 * risks a second restart: a node waiting for the next round polls the store once a second (1 s cache), so it
 * can take ~2 s to join; joining late puts it on the wait list of yet another round.
 */
export const RECOMMENDED_RENDEZVOUS = { PET_MONITOR_INTERVAL: 1, last_call_timeout: 2 } as const;

/**
 * The launcher trainscaler recommends in place of `torchrun` (the same arguments and PET_* environment):
 * `python3 -m trainscaler_hook.launch` from the trainscaler Python hook. It leaves the rendezvous when its pod
 * is stopped instead of waiting for its heartbeat to expire (a scale-down's largest part on torch 1.13), tells
 * the surviving workers so they need not wait for a signal, and starts workers as forks of a process that
 * imported torch before the pod joined the rendezvous (a scale-up's largest part).
 */
export const RECOMMENDED_LAUNCHER = ['python3', '-m', 'trainscaler_hook.launch'] as const;

/**
 * The environment plain torchrun needs for a scale-up to work at all on torch >= 2.4: without it the agents
 * share the rendezvous store with the workers, and rank 0 publishes the store's address in its first round only,
 * so a node joining a later round (every scale-up) waits for it until the store's 60 s timeout and the rescale
 * fails (measured with torch 2.15.0: `DistStoreError: wait timeout`). trainscaler's launcher sets it itself unless
 * the job does.
 */
export const RECOMMENDED_TORCHRUN_ENV = { TORCH_DISABLE_SHARE_RDZV_TCP_STORE: '1' } as const;

/** What a torch >= 2.4 scale-up without RECOMMENDED_TORCHRUN_ENV waits before it fails: the store's timeout. */
export const SHARED_STORE_WAIT_SECONDS = 60;

/** The torchrun flags equal to RECOMMENDED_RENDEZVOUS (for a launcher started by hand, not by the operator). */
export function recommendedTorchrunFlags(): string[] {
  return [
    `--monitor_interval=${RECOMMENDED_RENDEZVOUS.PET_MONITOR_INTERVAL}`,
    `--rdzv_conf=last_call_timeout=${RECOMMENDED_RENDEZVOUS.last_call_timeout}`,
  ];
}

/**
 * What a rescale costs an elastic job, seconds. `pause`: the time the job trains not at all, from the last
 * step at the old size to the first step at the new one (torchelastic re-forms the world; a joining pod
 * starts and warms up BEFORE this, while the old world keeps training, so a pod's start is no part of it).
 * Medians of 3 repetitions of `npm run bench:rescale` (torchrun agents as host processes, elastic 1:4, one
 * agent joining / one leaving, torch 1.13 CPU, gloo) on the project machine (2 cores), 2026-11-30, load
 * average 28-33 (other work on the machine). `recommended`: RECOMMENDED_LAUNCHER with RECOMMENDED_RENDEZVOUS;
 * `torchrunDefaults`: plain torchrun, default flags; `torchrunRecommendedFlags`: plain torchrun with
 * RECOMMENDED_RENDEZVOUS only (same machine, load 25-30). The end-to-end `npm run test:training` (a
 * PyTorchJob under the training-operator, the launcher, grown by the alarm function, shrunk by the schedule;
 * load ~20) agreed: pauses 2.8 s up / 2.9 s down, and 6.2 s from the decision to the first step at the new
 * size when growing (pod creation and warm-up while the old world trained) / 2.9 s when shrinking.
 */
export const MEASURED_RESCALE_PAUSE_SECONDS = {
  recommended: { up: 3.3, down: 3.6 },
  torchrunDefaults: { up: 39.8, down: 47.1 },
  torchrunRecommendedFlags: { up: 11.2, down: 22.2 },
  source:
    '`npm run bench:rescale` on the project machine, 2026-11-30, load average 28-33: trainscaler\'s launcher with the recommended rendezvous, medians of 3; README "A real elastic job"',
  torchrunRecommendedFlagsSource:
    '`npm run bench:rescale -- --only torchrunRecommendedFlags` on the project machine, 2026-11-30, load average 25-30: plain torchrun with the recommended rendezvous flags, medians of 3; docs/real-training.md',
} as const;

/**
 * The same bench on torch 2.15.0 from PyPI (the current release, what `npm run setup` installs), 2026-12-07,
 * medians of 3, load average 9-10 (docs/real-training.md): `recommended` as above; `torchrunDefaults`: plain
 * torchrun with its defaults and RECOMMENDED_TORCHRUN_ENV (without it no scale-up completed). Plain torchrun with
 * the recommended flags was measured on torch 1.13 only (`torchrunRecommendedFlags` above).
 */
export const MEASURED_RESCALE_PAUSE_SECONDS_TORCH_2_15 = {
  recommended: { up: 3.2, down: 3.2 },
  torchrunDefaults: { up: 37.5, down: 49.4 },
  source:
    '`npm run bench:rescale` with torch 2.15.0, 2026-12-07, load average 9-10, medians of 3; docs/real-training.md',
} as const;

/** torchrun's default rendezvous last call (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), seconds. */
export const TORCHRUN_DEFAULT_LAST_CALL_SECONDS = 30;
