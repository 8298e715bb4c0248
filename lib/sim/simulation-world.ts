// The world a simulation plays: where the "true" step times come from, and the sentences that say so,
// printed with every result. FITTED: the parametric profiles of app-profiles.ts, the same form trainscaler's
// own model fits online (so its model is right by construction; kept for the demo, which must run on a
// clone without data). MEASURED: the Pollux artifact's tables, as its simulator plays them.
import type { SimulatedAppModel } from './app-model.js';
import { APP_PROFILES } from './app-profiles.js';
import { type MeasuredTables, measuredAppModel } from './measured-app-model.js';
import { MEASURED_WORLD_RULES } from './measured-step-times.js';
import { PROFILED_APP_MODEL } from './profiled-app-model.js';

export const SIMULATION_WORLDS = ['measured', 'fitted'] as const;
export type SimulationWorldName = (typeof SIMULATION_WORLDS)[number];

export interface SimulationWorld {
  name: SimulationWorldName;
  apps: SimulatedAppModel;
  /** One sentence each; printed with the results. */
  assumptions: readonly string[];
}

export const FITTED_WORLD: SimulationWorld = {
  name: 'fitted',
  apps: PROFILED_APP_MODEL,
  assumptions: [
    "world FITTED: step times from the application profiles fitted on the Pollux placements.csv (lib/sim/app-profiles.ts) with the same parametric form trainscaler's throughput model fits online, so its model is right by construction here; its step times are shorter than measured on scalability.csv, by 11-36% at 8 nodes and 22-98% at 16 (mean over each application's rows; bench:cluster prints the table)",
  ],
};

/** The MEASURED world; `source` says where the tables were read (printed). */
export function measuredWorld(tables: MeasuredTables, source: string): SimulationWorld {
  const caps = Object.values(APP_PROFILES)
    .map((p) => `${p.name} ${tables[p.name].maxLocalBatchSize}`)
    .join(', ');
  return {
    name: 'measured',
    apps: measuredAppModel(tables),
    assumptions: [
      `world MEASURED: step and sync times from the Pollux artifact's measurements (${source}: traces/APP/placements.csv and scalability.csv), played as its simulator plays them; resource needs as in lib/sim/app-profiles.ts`,
      ...MEASURED_WORLD_RULES,
      `largest local batch a replica processes at once: ${caps}`,
    ],
  };
}
