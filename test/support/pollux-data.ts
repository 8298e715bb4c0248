// Loader for the Pollux measurements kept beside the project in ../shared/data/pollux (Apache-2.0, from
// petuum/adaptdl branch osdi21-artifact, simulator/). Read by path from the repository root; never copied in.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
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
  const lines = readFileSync(path, 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.trim() !== '');
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  return lines.slice(1).map((line, n) => {
    const cells = line.split(',');
    if (cells.length !== header.length) {
      throw new Error(`${path}:${n + 2}: ${cells.length} cells, header has ${header.length}`);
    }
    const rec: Record<string, string> = {};
    header.forEach((h, i) => {
      rec[h] = (cells[i] ?? '').trim();
    });
    return rec;
  });
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

export interface PlacementRow {
  /** Digit string, one digit per node = replicas on that node, e.g. '44'. */
  placement: string;
  perNode: number[];
  replicas: number;
  nodes: number;
  localBatchSize: number;
  stepTime: number;
  syncTime: number;
}

export function parsePlacement(placement: string): { perNode: number[]; replicas: number; nodes: number } {
  if (!/^[1-9]+$/.test(placement)) throw new Error(`bad placement '${placement}'`);
  const perNode = [...placement].map(Number);
  return { perNode, replicas: perNode.reduce((s, v) => s + v, 0), nodes: perNode.length };
}

/** traces/APP/placements.csv: placement,local_bsz,step_time,sync_time. */
export function loadPlacements(app: string): PlacementRow[] {
  const path = join(TRACES_DIR, app, 'placements.csv');
  return readCsv(path).map((rec, i) => {
    const where = `${path}:${i + 2}`;
    const placement = rec.placement ?? '';
    return {
      placement,
      ...parsePlacement(placement),
      localBatchSize: num(rec, 'local_bsz', where),
      stepTime: num(rec, 'step_time', where),
      syncTime: num(rec, 'sync_time', where),
    };
  });
}

export interface ScalabilityRow {
  nodes: number;
  replicas: number;
  localBatchSize: number;
  stepTime: number;
  syncTime: number;
}

/** traces/APP/scalability.csv: num_nodes,num_replicas,local_bsz,step_time,sync_time. */
export function loadScalability(app: string): ScalabilityRow[] {
  const path = join(TRACES_DIR, app, 'scalability.csv');
  return readCsv(path).map((rec, i) => {
    const where = `${path}:${i + 2}`;
    return {
      nodes: num(rec, 'num_nodes', where),
      replicas: num(rec, 'num_replicas', where),
      localBatchSize: num(rec, 'local_bsz', where),
      stepTime: num(rec, 'step_time', where),
      syncTime: num(rec, 'sync_time', where),
    };
  });
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
