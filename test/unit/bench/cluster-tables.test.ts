import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PolicyAggregate, SimulationPolicy } from '../../../cli/simulate.js';
import {
  type BenchRecord,
  type JobRecord,
  mergeRecords,
  type RecordedSummary,
  type RunRecord,
} from '../../bench/cluster-record.js';
import {
  bestBaseline,
  meanJctTable,
  multiTenantTable,
  type PeerFigures,
  perApplicationTable,
  perLoadTable,
  perWorkloadTable,
  renderReadmeTables,
} from '../../bench/cluster-tables.js';

// A small synthetic benchmark: two loads, two workloads each, every figure chosen here.
function summary(avg: number | null, extra: Partial<RecordedSummary> = {}): RecordedSummary {
  return {
    jobs: 2,
    completed: 2,
    failed: 0,
    completionRate: 1,
    avgJctSeconds: avg,
    medianJctSeconds: avg === null ? null : avg / 2,
    makespanSeconds: 10_000,
    gpuUtilisation: 0.5,
    rescalesPerJob: 0,
    idleGpuHoursWhileJobsCouldGrow: 4,
    idleGpuHoursBeyondTwoTicks: 1,
    cpuRequested: 0,
    cpuUsed: 0,
    memoryRequested: 0,
    memoryUsed: 0,
    ...extra,
  };
}

function job(application: string, jct: number, wait: number, preemptions?: number): JobRecord {
  return {
    name: `${application}-${jct}`,
    application,
    state: 'completed',
    jctSeconds: jct,
    queuedSeconds: wait,
    rescales: 0,
    ...(preemptions === undefined ? {} : { preemptions }),
  };
}

function run(
  workload: string,
  policy: SimulationPolicy,
  avg: number,
  jobs: JobRecord[] = [job('cifar10', avg, 10)],
  extra: Partial<RecordedSummary> = {},
): RunRecord {
  return { workload, policy, summary: summary(avg, extra), jobs, source: `run of ${policy}` };
}

const record: BenchRecord = {
  world: 'measured',
  runs: [
    run('workloads-0.5/workload-1', 'manual', 3000),
    run('workloads-0.5/workload-2', 'manual', 5000),
    run('workloads-0.5/workload-1', 'backfill', 2000),
    run('workloads-0.5/workload-2', 'backfill', 1000),
    run(
      'workloads-0.5/workload-1',
      'tiresias',
      1500,
      [job('cifar10', 1500, 100, 2), job('ncf', 1500, 300, 0)],
      {
        gpuUtilisation: 0.4,
      },
    ),
    run(
      'workloads-0.5/workload-2',
      'tiresias',
      1900,
      [job('cifar10', 1700, 200, 0), job('ncf', 1700, 0, 0)],
      {
        gpuUtilisation: 0.6,
      },
    ),
    run('workloads-0.5/workload-1', 'trainscaler', 1400, [job('cifar10', 1000, 20), job('ncf', 1800, 40)], {
      idleGpuHoursBeyondTwoTicksBeside: { growing: 1, shrunk: 0, leftAlone: 2 },
    }),
    run('workloads-0.5/workload-2', 'trainscaler', 1800, [job('cifar10', 3000, 60)], {
      rescalesPerJob: 2,
      idleGpuHoursBeyondTwoTicksBeside: { growing: 3, shrunk: 1, leftAlone: 0 },
    }),
    run('workloads-1.0/workload-1', 'backfill', 9000),
    run('workloads-1.0/workload-1', 'tiresias', 7000),
  ],
  multiTenant: [],
};

const peers: PeerFigures = {
  label: "Pollux artifact's own simulator (published)",
  load: '1.0x',
  seconds: { Pollux: 2751, Tiresias: 4038, 'Optimus+Oracle': 5682 },
};

const rowOf = (table: string, start: string) => {
  const line = table.split('\n').find((l) => l.startsWith(`| ${start}`));
  assert.ok(line, `no row starting with '${start}' in\n${table}`);
  return line
    .slice(2, -2)
    .split(' | ')
    .map((c) => c.trim());
};

describe('bench:cluster README tables', () => {
  it('means every policy per load side by side, bolds the lowest and counts trainscaler wins per workload', () => {
    const table = meanJctTable(record, peers);
    const header = rowOf(table, 'load');
    assert.deepEqual(header, [
      'load',
      'manual',
      'backfill',
      'tiresias',
      'threshold',
      'trainscaler',
      'Pollux',
      'Optimus+Oracle',
      'trainscaler wins vs backfill / vs tiresias',
    ]);
    // 0.5x: manual (3000+5000)/2, backfill 1500, tiresias 1700, threshold not run, trainscaler 1600.
    // trainscaler beats backfill on workload-1 only (1400 < 2000; 1800 > 1000), tiresias on both (< 1500, 1900).
    assert.deepEqual(rowOf(table, '0.5x'), [
      '0.5x (2 workloads)',
      '4,000',
      '**1,500**',
      '1,700',
      '-',
      '1,600',
      '-',
      '-',
      '1 of 2 / 2 of 2',
    ]);
    // A load trainscaler did not run: no wins to count, its cell empty.
    assert.deepEqual(rowOf(table, '1.0x (').slice(4), ['-', '-', '-', '-', '- / -']);
    // The peers' row: Tiresias in our tiresias column, the others in their own, labelled as another simulator.
    assert.deepEqual(rowOf(table, "1.0x, Pollux artifact's own simulator (published)"), [
      "1.0x, Pollux artifact's own simulator (published)",
      '-',
      '-',
      '4,038',
      '-',
      '-',
      '2,751',
      '5,682',
      '-',
    ]);
  });

  it('notes a policy run on fewer workloads than its load has', () => {
    const partial = {
      ...record,
      runs: record.runs.filter(
        (r) => r.workload !== 'workloads-0.5/workload-2' || r.policy !== 'trainscaler',
      ),
    };
    assert.equal(rowOf(meanJctTable(partial, peers), '0.5x')[5], '**1,400** (1 of them)');
  });

  it('gives the rest of each run per load and policy, tiresias with its preemptions per job', () => {
    const table = perLoadTable(record);
    // tiresias 0.5x: preemptions/job (2/2 + 0/2) / 2 = 0.5; GPU util (40% + 60%) / 2; median = avg / 2.
    assert.deepEqual(rowOf(table, '0.5x (2) | tiresias'), [
      '0.5x (2)',
      'tiresias',
      '1,700',
      '850',
      '10,000',
      '50.0%',
      '0.00 (0.50 preemptions/job)',
      '4.0',
      '1.0',
      '-', // runs saved before the meter split its idle GPUs
      '100.0%',
    ]);
    assert.equal(rowOf(table, '0.5x (2) | trainscaler')[6], '1.00');
    // The split's means: growing (1 + 3) / 2, shrunk (0 + 1) / 2, left alone (2 + 0) / 2.
    assert.equal(rowOf(table, '0.5x (2) | trainscaler')[9], '2.0 / 0.5 / 1.0');
    // One run without the split leaves no mean of it.
    const older = mergeRecords([
      record,
      { ...record, runs: [run('workloads-0.5/workload-2', 'trainscaler', 1800)] },
    ]);
    assert.equal(rowOf(perLoadTable(older), '0.5x (2) | trainscaler')[9], '-');
    // A policy that was not run keeps its row, empty, so that a later run's row can take its place.
    assert.deepEqual(rowOf(table, '0.5x (0) | threshold').slice(2), Array(9).fill('-'));
  });

  it('lists average JCT per workload, loads and workloads in numeric order', () => {
    const lines = perWorkloadTable(record).split('\n').slice(2);
    assert.deepEqual(
      lines.map((l) => l.split(' | ')[0]),
      ['| 0.5x workload-1', '| 0.5x workload-2', '| 1.0x workload-1'],
    );
    assert.deepEqual(rowOf(perWorkloadTable(record), '0.5x workload-2').slice(1), [
      '5,000',
      '1,000',
      '1,900',
      '-',
      '1,800',
    ]);
  });

  it('names a workload outside a load folder (--workload FILE) once', () => {
    const single: BenchRecord = { world: 'measured', runs: [run('tiny', 'manual', 100)], multiTenant: [] };
    assert.deepEqual(rowOf(perWorkloadTable(single), 'tiny').slice(0, 2), ['tiny', '100']);
    assert.equal(rowOf(meanJctTable(single, peers), 'tiny')[0], 'tiny (1 workload)');
  });

  it('compares trainscaler per application with the best baseline of each load', () => {
    assert.equal(bestBaseline(record, 'workloads-0.5'), 'backfill');
    assert.equal(bestBaseline(record, 'workloads-1.0'), 'tiresias');
    const table = perApplicationTable(record);
    // trainscaler 0.5x: cifar10 jobs 1000 and 3000 (waits 20, 60), ncf one job 1800 (40).
    assert.deepEqual(rowOf(table, '0.5x | trainscaler'), [
      '0.5x',
      'trainscaler',
      '2,000 (40)',
      '1,800 (40)',
      '3',
    ]);
    assert.deepEqual(rowOf(table, '0.5x | backfill'), [
      '0.5x',
      'backfill (best baseline)',
      '1,500 (10)',
      '-',
      '2',
    ]);
    assert.deepEqual(rowOf(table, '1.0x | tiresias'), [
      '1.0x',
      'tiresias (best baseline)',
      '7,000 (10)',
      '-',
      '1',
    ]);
  });

  it('shows multi-tenant rows per workload with the gain against manual', () => {
    const aggregate = (median: number, completion: number): PolicyAggregate => ({
      workloads: 1,
      meanAvgJctSeconds: median * 2,
      meanMedianJctSeconds: median,
      meanMakespanSeconds: 1,
      meanGpuUtilisation: 0,
      meanRescalesPerJob: 0,
      rescalesPerJob: { mean: 0, max: 0, maxJob: null, reformedWorlds: { mean: 0, max: 0, maxJob: null } },
      meanIdleGpuHoursWhileJobsCouldGrow: 0,
      meanIdleGpuHoursBeyondTwoTicks: 0,
      meanIdleGpuHoursBeyondTwoTicksBeside: { growing: 0, shrunk: 0, leftAlone: 0 },
      meanCompletionRate: completion,
      meanCpuRequested: 0.4,
      meanCpuUsed: 0.2,
      meanMemoryRequested: 0.3,
      meanMemoryUsed: 0.1,
    });
    const table = multiTenantTable([
      { workload: 'workloads-1.0/workload-1', policy: 'trainscaler', aggregate: aggregate(600, 1) },
      { workload: 'workloads-1.0/workload-1', policy: 'manual', aggregate: aggregate(1000, 0.9) },
      { workload: 'workloads-0.5/workload-1', policy: 'manual', aggregate: aggregate(500, 0.95) },
    ]);
    const rows = table.split('\n').slice(2);
    assert.deepEqual(
      rows.map((l) => l.split(' | ').slice(0, 2).join(' ')),
      ['0.5x workload-1', '1.0x workload-1'].flatMap((w) =>
        ['manual', 'backfill', 'tiresias', 'threshold', 'trainscaler'].map((p) => `| ${w} ${p}`),
      ),
    );
    assert.deepEqual(rowOf(table, '0.5x workload-1 | trainscaler').slice(2), Array(7).fill('-'));
    assert.deepEqual(rowOf(table, '1.0x workload-1 | trainscaler'), [
      '1.0x workload-1',
      'trainscaler',
      '600',
      '100.0%',
      '-40% / +10.0 points',
      '40.0%',
      '20.0%',
      '30.0%',
      '10.0%',
    ]);
    assert.equal(rowOf(table, '1.0x workload-1 | manual')[4], '-');
  });

  it('says which run produced which rows, and a later record replaces the same run of an earlier one', () => {
    const later: BenchRecord = {
      world: 'measured',
      runs: [{ ...run('workloads-0.5/workload-2', 'trainscaler', 900), source: 'a later run' }],
      multiTenant: [],
    };
    const merged = mergeRecords([record, later]);
    assert.equal(merged.runs.length, record.runs.length);
    assert.equal(rowOf(perWorkloadTable(merged), '0.5x workload-2')[5], '900');
    const text = renderReadmeTables(merged, peers);
    assert.match(text, /^- trainscaler: a later run$/m);
    assert.match(text, /^- trainscaler: run of trainscaler$/m);
    assert.match(text, /^- tiresias: run of tiresias$/m);
    const aggregate = { ...({} as PolicyAggregate), meanMedianJctSeconds: 1, meanCompletionRate: 1 };
    const withTenants = renderReadmeTables(
      {
        ...merged,
        multiTenant: [
          { workload: 'workloads-0.5/workload-1', policy: 'tiresias', aggregate, source: 'run of tiresias' },
          { workload: 'workloads-0.5/workload-1', policy: 'manual', aggregate, source: 'another run' },
        ],
      },
      peers,
    );
    assert.match(withTenants, /^- tiresias \(replay and multi-tenant\): run of tiresias$/m);
    assert.match(withTenants, /^- multi-tenant manual: another run$/m);
    assert.throws(() => mergeRecords([record, { ...later, world: 'fitted' }]), /different worlds/);
  });
});
