// Synthetic per-worker step-time traces with known stragglers, sampled every 10 s like the Alibaba PAI
// mini-batch traces, and the labelled truth they are scored against.

import { mulberry32, uniform } from '../../lib/sim/prng.js';
import type { WorkerStepTimes } from '../../lib/types.js';

/** A worker running `factor` x its own pace from `from` to `to` (seconds). */
export interface Spell {
  worker: number;
  from: number;
  to: number;
  factor: number;
}

export interface SyntheticJob {
  name: string;
  /** Each worker's own pace (step time); the job's length and sampling. */
  paces: number[];
  seconds: number;
  spells: Spell[];
  /** +- this fraction of uniform noise on every sample. */
  noise?: number;
  seed?: number;
}

export const SAMPLE_SECONDS = 10;

export function synthesize(job: SyntheticJob): WorkerStepTimes[] {
  const prng = mulberry32(job.seed ?? 1);
  const noise = job.noise ?? 0.05;
  return job.paces.map((pace, worker) => {
    const samples: WorkerStepTimes['samples'] = [];
    for (let at = 0; at <= job.seconds; at += SAMPLE_SECONDS) {
      let factor = 1;
      for (const s of job.spells) if (s.worker === worker && at >= s.from && at < s.to) factor *= s.factor;
      samples.push({ at, stepTime: pace * factor * uniform(prng, 1 - noise, 1 + noise) });
    }
    return { worker, pod: `worker-${worker}`, samples };
  });
}

/** Every worker at the same pace, `n` of them. */
export const uniformPaces = (n: number, pace = 1) => Array.from({ length: n }, () => pace);
