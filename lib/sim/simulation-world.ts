// The world a simulation plays: where the "true" step times come from, and the sentences that say so,
// printed with every result. FITTED: the parametric profiles of app-profiles.ts, the same form trainscaler's
// own model fits online (so its model is right by construction; kept for the demo, which must run on a
// clone without data). MEASURED: the Pollux artifact's tables, as its simulator plays them.
import type { SimulatedAppModel } from './app-model.js';
import { APP_NAMES, APP_PROFILES, type AppName } from './app-profiles.js';
import { type GradientNoiseTables, type MeasuredTables, measuredAppModel } from './measured-app-model.js';
import { MEASURED_WORLD_RULES } from './measured-step-times.js';
import { PROFILED_APP_MODEL } from './profiled-app-model.js';
import { samplesToTarget, targetProgress } from './statistical-efficiency.js';
import { targetSamples as measuredTargetSamples } from './workload.js';

export const SIMULATION_WORLDS = ['measured', 'fitted'] as const;
export type SimulationWorldName = (typeof SIMULATION_WORLDS)[number];

export interface SimulationWorld {
  name: SimulationWorldName;
  apps: SimulatedAppModel;
  /** Samples a job of `app` keeping global batch `batch` processes to its target: what its user declares. */
  targetSamples(app: AppName, batch: number): number;
  /** One sentence each; printed with the results. */
  assumptions: readonly string[];
}

/** How a job completes where the world plays no statistical efficiency. */
const SAMPLES_TARGET =
  'target: samples to the last row of traces/APP/validation-B.csv (the run reaching the Pollux quality target within max_epochs), log-log interpolated in B (lib/sim/workload.ts); a job completes when it has processed them';

export const FITTED_WORLD: SimulationWorld = {
  name: 'fitted',
  apps: PROFILED_APP_MODEL,
  targetSamples: measuredTargetSamples,
  assumptions: [
    "world FITTED: step times from the application profiles fitted on the Pollux placements.csv (lib/sim/app-profiles.ts) with the same parametric form trainscaler's throughput model fits online, so its model is right by construction here; its step times are shorter than measured on scalability.csv, by 11-36% at 8 nodes and 22-98% at 16 (mean over each application's rows; bench:cluster prints the table)",
    SAMPLES_TARGET,
  ],
};

/** The MEASURED world; `source` says where the tables were read (printed). */
export function measuredWorld(
  tables: MeasuredTables,
  source: string,
  statistics?: GradientNoiseTables,
): SimulationWorld {
  const caps = Object.values(APP_PROFILES)
    .map((p) => `${p.name} ${tables[p.name].maxLocalBatchSize}`)
    .join(', ');
  const base = [
    `world MEASURED: step and sync times from the Pollux artifact's measurements (${source}: traces/APP/placements.csv and scalability.csv), played as its simulator plays them; resource needs as in lib/sim/app-profiles.ts`,
    ...MEASURED_WORLD_RULES,
    `largest local batch a replica processes at once: ${caps}`,
  ];
  if (!statistics)
    return {
      name: 'measured',
      apps: measuredAppModel(tables),
      targetSamples: measuredTargetSamples,
      assumptions: [...base, SAMPLES_TARGET],
    };
  const targets = APP_NAMES.map((app) => {
    const table = statistics[app];
    return `${app} ${Math.round(targetProgress(table)).toLocaleString('en-US')} steps at B0 ${table.batches[0]}`;
  });
  return {
    name: 'measured',
    apps: measuredAppModel(tables, statistics),
    targetSamples: (app, batch) => Math.round(samplesToTarget(statistics[app], batch)),
    assumptions: [
      ...base,
      `progress: statistical efficiency from the measured gradient statistics (${source}: traces/APP/validation-B.csv, grad_sqr and grad_var per epoch), played as the Pollux artifact's simulator plays them: a step at global batch B = s x B0 (B0 the app's smallest measured batch) makes (grad_var + grad_sqr) / (grad_var / s + grad_sqr) steps of progress at B0, the statistics at the job's current epoch, linear between the measured batches around B (lib/sim/statistical-efficiency.ts)`,
      `target: the same progress for every policy and batch, the end of the last epoch every measured run reached (the least of the runs'): ${targets.join(', ')}; a job's declared target samples (trainscaler.io/target-samples) are the samples that progress takes at its batch`,
    ],
  };
}
