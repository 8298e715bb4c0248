// The applications played from the MEASURED Pollux tables (measured-step-times.ts): step and sync times as
// measured, resource needs, default batch and demo targets as in the fitted profiles (app-profiles.ts; the
// tables measure time only), and with the measured gradient statistics, progress at each global batch.
import type { SimulatedAppModel } from './app-model.js';
import { APP_NAMES, type AppName, isAppName } from './app-profiles.js';
import { type MeasuredAppTable, measuredStep } from './measured-step-times.js';
import { PROFILED_APP_MODEL } from './profiled-app-model.js';
import type { GradientNoiseTable } from './statistical-efficiency.js';

export type MeasuredTables = Readonly<Record<AppName, MeasuredAppTable>>;

export type GradientNoiseTables = Readonly<Record<AppName, GradientNoiseTable>>;

export function measuredAppModel(
  tables: MeasuredTables,
  statistics?: GradientNoiseTables,
): SimulatedAppModel {
  for (const app of APP_NAMES) {
    if (!tables[app]) throw new RangeError(`measuredAppModel: no measured table for '${app}'`);
  }
  const table = (app: string) => {
    if (!isAppName(app)) throw new RangeError(`the simulator has no measured table for application '${app}'`);
    return tables[app];
  };
  return {
    knows: PROFILED_APP_MODEL.knows,
    memoryNeedBytes: PROFILED_APP_MODEL.memoryNeedBytes,
    cpuMillis: PROFILED_APP_MODEL.cpuMillis,
    defaultLocalBatchSize: PROFILED_APP_MODEL.defaultLocalBatchSize,
    defaultTargetSamples: PROFILED_APP_MODEL.defaultTargetSamples,
    stepTime: (app, placement) => measuredStep(table(app), placement).stepTime,
    syncTime: (app, placement) => measuredStep(table(app), placement).syncTime,
    ...(statistics ? { statistics: (app: string) => (isAppName(app) ? statistics[app] : undefined) } : {}),
  };
}
