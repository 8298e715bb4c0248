// Parsers for the Pollux artifact's measured tables (petuum/adaptdl, branch osdi21-artifact,
// simulator/traces/APP/, Apache-2.0): placements.csv, scalability.csv and validation-B.csv. Text in, rows out: the caller
// reads the files (cli/simulation-world.ts, test/support/pollux-data.ts), so a clone without the data never
// needs them.

import type { GradientStatsRow } from './statistical-efficiency.js';

export class PolluxTraceError extends Error {
  override name = 'PolluxTraceError';
}

/** A simple CSV (no quoting: the Pollux files have none) as header-keyed records; `where` names it in errors. */
export function parseCsvRecords(text: string, where: string): Record<string, string>[] {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  return lines.slice(1).map((line, n) => {
    const cells = line.split(',');
    if (cells.length !== header.length) {
      throw new PolluxTraceError(`${where}:${n + 2}: ${cells.length} cells, header has ${header.length}`);
    }
    const rec: Record<string, string> = {};
    header.forEach((h, i) => {
      rec[h] = (cells[i] ?? '').trim();
    });
    return rec;
  });
}

function positive(rec: Record<string, string>, key: string, where: string): number {
  const v = Number(rec[key]);
  if (rec[key] === undefined || rec[key] === '' || !Number.isFinite(v) || v < 0) {
    throw new PolluxTraceError(`${where}: column ${key} is not a non-negative number: ${rec[key]}`);
  }
  return v;
}

export interface MeasuredRow {
  nodes: number;
  replicas: number;
  localBatchSize: number;
  /** Seconds per optimizer step. */
  stepTime: number;
  /** The gradient-synchronisation part of stepTime. */
  syncTime: number;
}

export interface PlacementRow extends MeasuredRow {
  /** Digit string, one digit per node = replicas on that node, e.g. '44'. */
  placement: string;
  perNode: number[];
}

export function parsePlacement(placement: string): { perNode: number[]; replicas: number; nodes: number } {
  if (!/^[1-9]+$/.test(placement)) throw new PolluxTraceError(`bad placement '${placement}'`);
  const perNode = [...placement].map(Number);
  return { perNode, replicas: perNode.reduce((s, v) => s + v, 0), nodes: perNode.length };
}

function measured(rec: Record<string, string>, where: string) {
  const row = {
    localBatchSize: positive(rec, 'local_bsz', where),
    stepTime: positive(rec, 'step_time', where),
    syncTime: positive(rec, 'sync_time', where),
  };
  if (row.localBatchSize === 0 || row.stepTime === 0)
    throw new PolluxTraceError(`${where}: local_bsz and step_time must be > 0`);
  return row;
}

/** traces/APP/placements.csv: placement,local_bsz,step_time,sync_time. */
export function parsePlacementsCsv(text: string, where: string): PlacementRow[] {
  return parseCsvRecords(text, where).map((rec, i) => {
    const at = `${where}:${i + 2}`;
    const placement = rec.placement ?? '';
    try {
      return { placement, ...parsePlacement(placement), ...measured(rec, at) };
    } catch (error) {
      if (error instanceof PolluxTraceError && !error.message.startsWith(at))
        throw new PolluxTraceError(`${at}: ${error.message}`);
      throw error;
    }
  });
}

/** traces/APP/scalability.csv: num_nodes,num_replicas,local_bsz,step_time,sync_time. */
export function parseScalabilityCsv(text: string, where: string): MeasuredRow[] {
  return parseCsvRecords(text, where).map((rec, i) => {
    const at = `${where}:${i + 2}`;
    const row = {
      nodes: positive(rec, 'num_nodes', at),
      replicas: positive(rec, 'num_replicas', at),
      ...measured(rec, at),
    };
    if (
      !Number.isInteger(row.nodes) ||
      !Number.isInteger(row.replicas) ||
      row.nodes < 1 ||
      row.replicas < row.nodes
    )
      throw new PolluxTraceError(`${at}: needs integer num_nodes >= 1 and num_replicas >= num_nodes`);
    return row;
  });
}

/** traces/APP/validation-B.csv: progress,iteration,metric,grad_sqr,grad_var, one row per epoch. */
export function parseValidationCsv(text: string, where: string): GradientStatsRow[] {
  return parseCsvRecords(text, where).map((rec, i) => {
    const at = `${where}:${i + 2}`;
    return {
      progress: positive(rec, 'progress', at),
      iteration: positive(rec, 'iteration', at),
      gradSqr: positive(rec, 'grad_sqr', at),
      gradVar: positive(rec, 'grad_var', at),
    };
  });
}

/** The global batch B of a validation-B.csv file name; undefined for any other file. */
export function validationBatchOf(file: string): number | undefined {
  const match = /^validation-(\d+)\.csv$/.exec(file);
  return match ? Number(match[1]) : undefined;
}
