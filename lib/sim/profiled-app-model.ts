// The applications the demo simulates, played from the step-time figures fitted on the Pollux
// measurements (app-profiles.ts) and their estimated memory and CPU needs.
import type { SimulatedAppModel } from './app-model.js';
import { APP_PROFILES, groundTruthStepTime, groundTruthSyncTime, isAppName } from './app-profiles.js';

function profile(app: string) {
  if (!isAppName(app)) throw new RangeError(`the simulator has no profile for application '${app}'`);
  return APP_PROFILES[app];
}

export const PROFILED_APP_MODEL: SimulatedAppModel = {
  knows: (app) => isAppName(app),
  memoryNeedBytes: (app) => profile(app).memoryBytes,
  cpuMillis: (app) => profile(app).cpuMillis,
  defaultLocalBatchSize: (app) => profile(app).defaultLocalBatchSize,
  defaultTargetSamples: (app) => profile(app).demoTargetSamples,
  stepTime: (app, placement) => groundTruthStepTime(profile(app).name, placement),
  syncTime: (app, placement) => groundTruthSyncTime(profile(app).name, placement),
};
