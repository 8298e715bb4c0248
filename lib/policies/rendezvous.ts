// The torchrun rendezvous settings trainscaler recommends, and what a rescale costs with them: measured on
// this project's machine (README "A real elastic job"), torch 1.13, torchrun agents as host processes. One
// place, so that a better measurement or better settings change every user of them at once: the submit
// advice (initial-config.ts), the policies' default rescale costs (config.ts) and the simulator.

/** A 1 s agent monitor interval and a 2 s last call of the rendezvous (torchrun's defaults: 5 s, 30 s). */
export const RECOMMENDED_RENDEZVOUS = { PET_MONITOR_INTERVAL: 1, last_call_timeout: 2 } as const;

/**
 * Pause from the last step at the old size to the first step at the new one, seconds, median of 3
 * repetitions of `npm run bench:rescale` (3 agents elastic 1:4, one joining / one leaving).
 */
export const MEASURED_RESCALE_PAUSE_SECONDS = {
  recommended: { up: 8.6, down: 19.1 },
  torchrunDefaults: { up: 36.9, down: 45.9 },
  source:
    '`npm run bench:rescale` on the project machine (torch 1.13, recommended rendezvous, median of 3; README "A real elastic job")',
} as const;
