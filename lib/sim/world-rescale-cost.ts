// What a re-formed world costs in a simulated run (`--rescale-cost` of `simulate` and `bench:cluster`): the
// pause the simulated cluster charges every policy's jobs alike. Most users run plain torchrun, whose rescales
// cost several times what trainscaler's launcher costs, so the benchmark's figures are asked at both (issue 44).
// This is the WORLD's cost only: trainscaler's policy is not told it. As in a real deployment it estimates a
// job's cost from the job's pod spec (the simulated workers are launched as the world's cost was measured:
// SimulatedLaunch below) until it has measured the job's own from its metrics.
import { TrainscalerError } from '../errors.js';
import {
  MEASURED_RESCALE_PAUSE_SECONDS,
  RECOMMENDED_LAUNCHER,
  RECOMMENDED_TORCHRUN_ENV,
  recommendedTorchrunFlags,
} from '../torchelastic/recommended-rendezvous.js';

/**
 * How the simulated elastic PyTorchJobs' workers are launched in a world: the pod spec trainscaler reads (as on a
 * cluster) to estimate a job's rescale cost before it has measured one, so it describes the launch whose pauses
 * the world charges.
 */
export interface SimulatedLaunch {
  command: readonly string[];
  env: Readonly<Record<string, string>>;
}

const TORCHRUN_ARGS = ['--nnodes=$(PET_NNODES)', '--nproc-per-node=1', ...recommendedTorchrunFlags()];

/** trainscaler's launcher with the recommended rendezvous flags (it sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE itself). */
export const LAUNCHER_WORKERS: SimulatedLaunch = {
  command: [...RECOMMENDED_LAUNCHER, ...TORCHRUN_ARGS, 'train.py'],
  env: {},
};

/** Plain torchrun with the recommended rendezvous flags and environment. */
export const TORCHRUN_WORKERS: SimulatedLaunch = {
  command: ['torchrun', ...TORCHRUN_ARGS, 'train.py'],
  env: { ...RECOMMENDED_TORCHRUN_ENV },
};

export interface WorldRescaleCost {
  /** `launcher`, `torchrun`, or the seconds given (e.g. `30`). */
  name: string;
  /** Seconds without progress of a re-formed world that only gained members. */
  up: number;
  /** Seconds without progress of a re-formed world that lost or restarted a member (a preempted job's resume too). */
  down: number;
  /** Where the figures come from. */
  source: string;
  /** How the simulated jobs' workers are launched (a number of seconds: the launcher's, as the default world). */
  workers: SimulatedLaunch;
}

/** trainscaler's launcher with the recommended rendezvous, as measured: the simulator's default. */
export const LAUNCHER_RESCALE_COST: WorldRescaleCost = {
  name: 'launcher',
  up: MEASURED_RESCALE_PAUSE_SECONDS.recommended.up,
  down: MEASURED_RESCALE_PAUSE_SECONDS.recommended.down,
  source: `measured: ${MEASURED_RESCALE_PAUSE_SECONDS.source}`,
  workers: LAUNCHER_WORKERS,
};

/** Plain torchrun with the recommended rendezvous flags, as measured. */
export const TORCHRUN_RESCALE_COST: WorldRescaleCost = {
  name: 'torchrun',
  up: MEASURED_RESCALE_PAUSE_SECONDS.torchrunRecommendedFlags.up,
  down: MEASURED_RESCALE_PAUSE_SECONDS.torchrunRecommendedFlags.down,
  source: `measured: ${MEASURED_RESCALE_PAUSE_SECONDS.torchrunRecommendedFlagsSource}`,
  workers: TORCHRUN_WORKERS,
};

export const RESCALE_COST_FORMS = 'launcher, torchrun or a number of seconds (e.g. 30)';

/** A `--rescale-cost` value that is none of the accepted forms. */
export class RescaleCostError extends TrainscalerError {
  readonly value: string;
  constructor(value: string) {
    super(
      'VALIDATION',
      `--rescale-cost '${value}': expected ${RESCALE_COST_FORMS}: launcher = ${LAUNCHER_RESCALE_COST.up} s up / ${LAUNCHER_RESCALE_COST.down} s down, torchrun = ${TORCHRUN_RESCALE_COST.up} s up / ${TORCHRUN_RESCALE_COST.down} s down, SECONDS = that pause for every re-formed world, up and down`,
    );
    this.value = value;
  }
}

/** `launcher`, `torchrun` or SECONDS (a finite number >= 0) as the world's cost; anything else is a RescaleCostError. */
export function parseRescaleCost(value: string): WorldRescaleCost {
  const text = value.trim();
  if (text === 'launcher') return LAUNCHER_RESCALE_COST;
  if (text === 'torchrun') return TORCHRUN_RESCALE_COST;
  // Number('') is 0 and Number('0x1e') is 30: only a plain decimal is a number of seconds.
  if (!/^\d+(\.\d+)?$/.test(text)) throw new RescaleCostError(value);
  const seconds = Number(text);
  if (!Number.isFinite(seconds)) throw new RescaleCostError(value);
  return {
    name: text,
    up: seconds,
    down: seconds,
    source: 'given on the command line (--rescale-cost), the same pause up and down',
    workers: LAUNCHER_WORKERS,
  };
}
