// What a `npm run bench:cluster` run keeps for its README tables: per load, every (workload, policy) run's
// summary and its jobs' outcomes (trimmed to what the tables read), and the multi-tenant aggregates. Saved as
// JSON with --save FILE, so that runs made at different times (the baselines once, trainscaler after each
// change) can be merged into one set of tables with --tables-from FILE,FILE (later files win).
import { readFileSync } from 'node:fs';
import type {
  JobOutcome,
  PolicyAggregate,
  RunSummary,
  SimulationPolicy,
  WorkloadRun,
} from '../../cli/simulate.js';
import type { WorldRescaleCost } from '../../lib/sim/world-rescale-cost.js';

export type JobRecord = Pick<
  JobOutcome,
  'name' | 'application' | 'state' | 'jctSeconds' | 'queuedSeconds' | 'rescales' | 'preemptions'
>;

/** A run's summary as saved; runs saved before the meter split its idle GPUs (2026-12-06) lack the split. */
export type RecordedSummary = Omit<RunSummary, 'idleGpuHoursBeyondTwoTicksBeside'> &
  Partial<Pick<RunSummary, 'idleGpuHoursBeyondTwoTicksBeside'>>;

export interface RunRecord {
  workload: string;
  policy: SimulationPolicy;
  summary: RecordedSummary;
  jobs: JobRecord[];
  /** Where this run came from (command, commit, date), so a merged table can say which rows are whose. */
  source?: string;
}

export interface MultiTenantRecord {
  workload: string;
  policy: SimulationPolicy;
  aggregate: PolicyAggregate;
  source?: string;
}

export interface BenchRecord {
  world: string;
  /** What every re-formed world cost in these runs (--rescale-cost); absent in records saved before it existed. */
  rescaleCost?: WorldRescaleCost;
  /** Replayed runs; the load of a run is its workload's folder (workloads-1.0/workload-3 -> workloads-1.0). */
  runs: RunRecord[];
  multiTenant: MultiTenantRecord[];
}

export function runRecord(run: WorkloadRun, source?: string): RunRecord {
  return {
    workload: run.workload,
    policy: run.policy,
    summary: run.summary,
    jobs: run.jobs.map((j) => ({
      name: j.name,
      application: j.application,
      state: j.state,
      jctSeconds: j.jctSeconds,
      queuedSeconds: j.queuedSeconds,
      rescales: j.rescales,
      ...(j.preemptions === undefined ? {} : { preemptions: j.preemptions }),
    })),
    ...(source === undefined ? {} : { source }),
  };
}

/** Several records as one: a (workload, policy) run, or multi-tenant row, of a later record replaces an earlier one. */
export function mergeRecords(records: readonly BenchRecord[]): BenchRecord {
  const worlds = [...new Set(records.map((r) => r.world))];
  if (worlds.length > 1)
    throw new Error(`cannot merge runs of different worlds (${worlds.join(', ')}) into one table`);
  // Records saved before --rescale-cost existed were all run at the launcher's cost.
  const costs = [...new Set(records.map((r) => r.rescaleCost?.name ?? 'launcher'))];
  if (costs.length > 1)
    throw new Error(`cannot merge runs of different rescale costs (${costs.join(', ')}) into one table`);
  const runs = new Map<string, RunRecord>();
  const tenants = new Map<string, MultiTenantRecord>();
  for (const record of records) {
    for (const run of record.runs) runs.set(`${run.workload}\u0000${run.policy}`, run);
    for (const row of record.multiTenant) tenants.set(`${row.workload}\u0000${row.policy}`, row);
  }
  const rescaleCost = records.find((r) => r.rescaleCost)?.rescaleCost;
  return {
    world: worlds[0] ?? 'measured',
    ...(rescaleCost ? { rescaleCost } : {}),
    runs: [...runs.values()],
    multiTenant: [...tenants.values()],
  };
}

export function readRecord(path: string): BenchRecord {
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<BenchRecord>;
  if (!Array.isArray(parsed.runs) || !Array.isArray(parsed.multiTenant) || typeof parsed.world !== 'string')
    throw new Error(`${path} is not a bench:cluster record (written by --save FILE)`);
  return parsed as BenchRecord;
}
