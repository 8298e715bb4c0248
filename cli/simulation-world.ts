// Reads the measured Pollux tables for `trainscaler simulate --world measured` (and the cluster benchmark):
// the file reading the pure lib/sim modules leave to their caller.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { APP_NAMES, APP_PROFILES, type AppName } from '../lib/sim/app-profiles.js';
import type { GradientNoiseTables, MeasuredTables } from '../lib/sim/measured-app-model.js';
import { buildMeasuredAppTable, type MeasuredAppTable } from '../lib/sim/measured-step-times.js';
import {
  parsePlacementsCsv,
  parseScalabilityCsv,
  parseValidationCsv,
  validationBatchOf,
} from '../lib/sim/pollux-traces.js';
import {
  FITTED_WORLD,
  measuredWorld,
  type SimulationWorld,
  type SimulationWorldName,
} from '../lib/sim/simulation-world.js';
import {
  type GradientNoiseTable,
  type GradientStatsRow,
  gradientNoiseTable,
} from '../lib/sim/statistical-efficiency.js';

export class SimulationWorldError extends Error {
  override name = 'SimulationWorldError';
}

/** traces/APP/{placements,scalability}.csv of every application, capped as app-profiles.ts caps them. */
export function loadMeasuredTables(tracesDir: string): MeasuredTables {
  const tables: Partial<Record<AppName, MeasuredAppTable>> = {};
  for (const app of APP_NAMES) {
    const read = (file: string) => {
      const path = join(tracesDir, app, file);
      if (!existsSync(path))
        throw new SimulationWorldError(
          `the measured world needs ${path}: pass --traces the Pollux traces folder (e.g. ../shared/data/pollux/traces), or --world fitted`,
        );
      return { text: readFileSync(path, 'utf8'), path };
    };
    const placements = read('placements.csv');
    const scalability = read('scalability.csv');
    tables[app] = buildMeasuredAppTable({
      app,
      placements: parsePlacementsCsv(placements.text, placements.path),
      scalability: parseScalabilityCsv(scalability.text, scalability.path),
      maxLocalBatchSize: APP_PROFILES[app].maxLocalBatchSize,
    });
  }
  return tables as MeasuredTables;
}

/** traces/APP/validation-B.csv of every application: the gradient statistics statistical efficiency is played from. */
export function loadGradientNoiseTables(tracesDir: string): GradientNoiseTables {
  const tables: Partial<Record<AppName, GradientNoiseTable>> = {};
  for (const app of APP_NAMES) {
    const dir = join(tracesDir, app);
    const runs = new Map<number, GradientStatsRow[]>();
    for (const file of existsSync(dir) ? readdirSync(dir) : []) {
      const batch = validationBatchOf(file);
      const path = join(dir, file);
      if (batch !== undefined) runs.set(batch, parseValidationCsv(readFileSync(path, 'utf8'), path));
    }
    if (runs.size === 0)
      throw new SimulationWorldError(
        `the measured world needs ${dir}/validation-B.csv (gradient statistics per global batch B): pass --traces the Pollux traces folder (e.g. ../shared/data/pollux/traces), or --world fitted`,
      );
    tables[app] = gradientNoiseTable(runs);
  }
  return tables as GradientNoiseTables;
}

/**
 * Where the traces are when --traces is not given: the `traces` folder beside the workload folder
 * (../shared/data/pollux/workloads-1.0 -> ../shared/data/pollux/traces), for a workload file its folder's.
 */
export function defaultTracesDir(workloadPath: string): string {
  const folder = workloadPath.endsWith('.csv') ? dirname(workloadPath) : workloadPath;
  return resolve(folder, '..', 'traces');
}

/**
 * `statisticalEfficiency`: the measured world plays progress from the gradient statistics
 * (lib/sim/statistical-efficiency.ts); off by default until the benchmark tables are re-run with it.
 */
export function loadSimulationWorld(
  name: SimulationWorldName,
  tracesDir: string,
  options: { statisticalEfficiency?: boolean } = {},
): SimulationWorld {
  if (name === 'fitted') return FITTED_WORLD;
  const statistics = options.statisticalEfficiency ? loadGradientNoiseTables(tracesDir) : undefined;
  return measuredWorld(loadMeasuredTables(tracesDir), tracesDir, statistics);
}
