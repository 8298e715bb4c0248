// What makes a rescale of an elastic PyTorchJob (torchelastic, c10d rendezvous) cheap, in one place: the submit
// advice recommends (or, with trainscaler.io/tune-rendezvous, sets) these, and `npm run bench:rescale`
// measures exactly these against torchrun's defaults. Read against torch 1.13's torch/distributed/elastic.

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

/** The torchrun flags equal to RECOMMENDED_RENDEZVOUS (for a launcher started by hand, not by the operator). */
export function recommendedTorchrunFlags(): string[] {
  return [
    `--monitor_interval=${RECOMMENDED_RENDEZVOUS.PET_MONITOR_INTERVAL}`,
    `--rdzv_conf=last_call_timeout=${RECOMMENDED_RENDEZVOUS.last_call_timeout}`,
  ];
}
