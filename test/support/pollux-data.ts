// Loader for the Pollux measurements (file reading; the parsing is lib/sim/pollux-traces.ts) kept beside the project in ../shared/data/pollux (Apache-2.0, from
// petuum/adaptdl branch osdi21-artifact, simulator/). Read by path from the repository root; never copied in.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type MeasuredRow,
  type PlacementRow,
  parseCsvRecords,
  parsePlacement,
  parsePlacementsCsv,
  parseScalabilityCsv,
} from '../../lib/sim/pollux-traces.js';
import type { StepSample } from '../../lib/types.js';

/** The repository root: this file is test/support/pollux-data.ts. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const POLLUX_DIR = resolve(REPO_ROOT, '..', 'shared', 'data', 'pollux');
export const TRACES_DIR = join(POLLUX_DIR, 'traces');

export function polluxAvailable(): boolean {
  return existsSync(TRACES_DIR);
}

/** Parses a simple CSV (no quoting: the Pollux files have none) into header-keyed records. */
export function readCsv(path: string): Record<string, string>[] {
  return parseCsvRecords(readFileSync(path, 'utf8'), path);
}

function num(rec: Record<string, string>, key: string, where: string): number {
  const v = Number(rec[key]);
  if (rec[key] === undefined || rec[key] === '' || !Number.isFinite(v)) {
    throw new Error(`${where}: column ${key} is not a number: ${rec[key]}`);
  }
  return v;
}

/** Applications with a traces/APP/placements.csv, sorted by name. */
export function listTraceApps(): string[] {
  return readdirSync(TRACES_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(TRACES_DIR, d.name, 'placements.csv')))
    .map((d) => d.name)
    .sort();
}

export type { PlacementRow };
export { parsePlacement };
export type ScalabilityRow = MeasuredRow;

/** traces/APP/placements.csv: placement,local_bsz,step_time,sync_time. */
export function loadPlacements(app: string): PlacementRow[] {
  const path = join(TRACES_DIR, app, 'placements.csv');
  return parsePlacementsCsv(readFileSync(path, 'utf8'), path);
}

/** traces/APP/scalability.csv: num_nodes,num_replicas,local_bsz,step_time,sync_time. */
export function loadScalability(app: string): ScalabilityRow[] {
  const path = join(TRACES_DIR, app, 'scalability.csv');
  return parseScalabilityCsv(readFileSync(path, 'utf8'), path);
}

export interface WorkloadJob {
  name: string;
  /** Seconds after the start of the workload. */
  time: number;
  application: string;
  replicas: number;
  batchSize: number;
}

/** workloads-LOAD/workload-N.csv: name,time,application,num_replicas,batch_size. */
export function loadWorkload(load: '0.5' | '1.0' | '1.5', index: number): WorkloadJob[] {
  const path = join(POLLUX_DIR, `workloads-${load}`, `workload-${index}.csv`);
  return readCsv(path).map((rec, i) => {
    const where = `${path}:${i + 2}`;
    return {
      name: rec.name ?? '',
      time: num(rec, 'time', where),
      application: rec.application ?? '',
      replicas: num(rec, 'num_replicas', where),
      batchSize: num(rec, 'batch_size', where),
    };
  });
}

export function toStepSample(row: PlacementRow | ScalabilityRow): StepSample {
  return {
    replicas: row.replicas,
    nodes: row.nodes,
    localBatchSize: row.localBatchSize,
    stepTime: row.stepTime,
    syncTime: row.syncTime,
  };
}
