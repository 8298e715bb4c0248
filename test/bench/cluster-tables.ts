// The README's cluster-benchmark tables, as markdown, from what a `npm run bench:cluster` run recorded (or
// several runs merged): `--full` prints them at its end, so every table in the README is reproduced by a
// command. Pure: a record in, text out.
import { SIMULATION_POLICIES, type SimulationPolicy } from '../../cli/simulate.js';
import { besideText } from '../../cli/simulate-report.js';
import { type IdleBeside, meanIdleBeside } from '../../lib/sim/idle-capacity.js';
import type { BenchRecord, MultiTenantRecord, RunRecord } from './cluster-record.js';

/** Published peer figures (another simulator), which column each goes in, and how the row is labelled. */
export interface PeerFigures {
  label: string;
  /** The load they were measured at, e.g. '1.0x'. */
  load: string;
  seconds: Record<string, number>;
}

const BASELINES: readonly SimulationPolicy[] = ['manual', 'backfill', 'tiresias', 'threshold'];
/** Peers that are the same scheduler as one of our baselines share its column. */
const PEER_COLUMN: Record<string, SimulationPolicy> = {
  Tiresias: 'tiresias',
  'manual with backfill': 'backfill',
};

const num = (x: number | null | undefined) =>
  x === null || x === undefined || Number.isNaN(x) ? '-' : Math.round(x).toLocaleString('en-US');
const pct = (x: number | null | undefined) =>
  x === null || x === undefined || Number.isNaN(x) ? '-' : `${(x * 100).toFixed(1)}%`;
const signed = (x: number, digits: number) => `${x > 0 ? '+' : ''}${x.toFixed(digits)}`;
const mean = (values: readonly number[]) =>
  values.length > 0 ? values.reduce((s, v) => s + v, 0) / values.length : null;

/** A markdown table; columns from `numericFrom` up to (not including) `numericTo` are right-aligned. */
function markdown(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  numericFrom = 1,
  numericTo = header.length,
): string {
  const align = header.map((_, i) => (i >= numericFrom && i < numericTo ? '---:' : '---'));
  return [header, align, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

/** 'workloads-1.0/workload-3' -> load 'workloads-1.0', shown as '1.0x'. */
export function loadOf(workload: string): string {
  return workload.includes('/') ? (workload.split('/')[0] ?? workload) : workload;
}
export function loadLabel(load: string): string {
  const m = /^workloads-([\d.]+)$/.exec(load);
  return m ? `${m[1]}x` : load;
}
function workloadLabel(workload: string): string {
  return workload.includes('/') ? workload.slice(workload.indexOf('/') + 1) : workload;
}
/** 'workloads-1.0/workload-3' -> '1.0x workload-3'; a workload outside a load folder keeps its name. */
function fullLabel(workload: string): string {
  return workload.includes('/') ? `${loadLabel(loadOf(workload))} ${workloadLabel(workload)}` : workload;
}
const numberIn = (s: string) => Number(/([\d.]+)/.exec(s)?.[1] ?? Number.POSITIVE_INFINITY);
const byNumber = (a: string, b: string) => numberIn(a) - numberIn(b) || a.localeCompare(b);

function loadsOf(runs: readonly RunRecord[]): string[] {
  return [...new Set(runs.map((r) => loadOf(r.workload)))].sort(byNumber);
}

function runsAt(record: BenchRecord, load: string, policy: SimulationPolicy): RunRecord[] {
  return record.runs.filter((r) => loadOf(r.workload) === load && r.policy === policy);
}

function meanOf(runs: readonly RunRecord[], pick: (r: RunRecord) => number | null): number | null {
  return mean(runs.map(pick).filter((v): v is number => v !== null && !Number.isNaN(v)));
}

/** Workloads of a load where trainscaler's average JCT is below the baseline's, of those both completed. */
function wins(record: BenchRecord, load: string, baseline: SimulationPolicy): string {
  const theirs = new Map(runsAt(record, load, baseline).map((r) => [r.workload, r.summary.avgJctSeconds]));
  let both = 0;
  let won = 0;
  for (const ours of runsAt(record, load, 'trainscaler')) {
    const other = theirs.get(ours.workload);
    if (ours.summary.avgJctSeconds === null || other === null || other === undefined) continue;
    both += 1;
    if (ours.summary.avgJctSeconds < other) won += 1;
  }
  return both > 0 ? `${won} of ${both}` : '-';
}

/** (a) Mean of average JCT per load, every policy side by side, the peers' row, trainscaler's wins. */
export function meanJctTable(record: BenchRecord, peers: PeerFigures): string {
  const peerOnly = Object.keys(peers.seconds).filter((name) => !(name in PEER_COLUMN));
  const header = ['load', ...SIMULATION_POLICIES, ...peerOnly, 'trainscaler wins vs backfill / vs tiresias'];
  const rows = loadsOf(record.runs).map((load) => {
    const workloads = new Set(record.runs.filter((r) => loadOf(r.workload) === load).map((r) => r.workload));
    const means = SIMULATION_POLICIES.map((policy) => {
      const runs = runsAt(record, load, policy);
      return { runs: runs.length, value: meanOf(runs, (r) => r.summary.avgJctSeconds) };
    });
    const best = Math.min(...means.map((m) => m.value ?? Number.POSITIVE_INFINITY));
    return [
      `${loadLabel(load)} (${workloads.size} workload${workloads.size === 1 ? '' : 's'})`,
      ...means.map(({ runs, value }) => {
        const text = num(value);
        const partial = runs > 0 && runs < workloads.size ? ` (${runs} of them)` : '';
        return value !== null && value === best ? `**${text}**${partial}` : `${text}${partial}`;
      }),
      ...peerOnly.map(() => '-'),
      `${wins(record, load, 'backfill')} / ${wins(record, load, 'tiresias')}`,
    ];
  });
  const peerCell = (policy: SimulationPolicy) => {
    const name = Object.keys(PEER_COLUMN).find((n) => PEER_COLUMN[n] === policy && n in peers.seconds);
    if (!name) return '-';
    const label = name.toLowerCase() === policy ? '' : ` (${name})`;
    return `${num(peers.seconds[name])}${label}`;
  };
  rows.push([
    `${peers.load}, ${peers.label}`,
    ...SIMULATION_POLICIES.map(peerCell),
    ...peerOnly.map((name) => num(peers.seconds[name])),
    '-',
  ]);
  return markdown(header, rows, 1, header.length - 1);
}

/** (b) Per load and policy: the rest of each run, mean over the load's workloads. */
export function perLoadTable(record: BenchRecord): string {
  const header = [
    'load',
    'policy',
    'avg JCT s',
    'median JCT s',
    'makespan s',
    'GPU util',
    'rescales/job',
    'idle GPU-h while jobs could grow',
    'of it > 2 ticks',
    'of that, beside jobs growing / shrunk / left alone',
    'completed',
  ];
  const rows: string[][] = [];
  for (const load of loadsOf(record.runs))
    for (const policy of SIMULATION_POLICIES) {
      // Every policy has its row, '-' when it was not run: a later run's rows can be pasted in place.
      const runs = runsAt(record, load, policy);
      const m = (pick: (r: RunRecord) => number | null) => meanOf(runs, pick);
      const fixed = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));
      const preemptions = m((r) => r.jobs.reduce((s, j) => s + (j.preemptions ?? 0), 0) / r.jobs.length);
      const rescales = fixed(
        m((r) => r.summary.rescalesPerJob),
        2,
      );
      rows.push([
        `${loadLabel(load)} (${runs.length})`,
        policy,
        num(m((r) => r.summary.avgJctSeconds)),
        num(m((r) => r.summary.medianJctSeconds)),
        num(m((r) => r.summary.makespanSeconds)),
        pct(m((r) => r.summary.gpuUtilisation)),
        policy === 'tiresias' && preemptions !== null
          ? `${rescales} (${preemptions.toFixed(2)} preemptions/job)`
          : rescales,
        fixed(
          m((r) => r.summary.idleGpuHoursWhileJobsCouldGrow),
          1,
        ),
        fixed(
          m((r) => r.summary.idleGpuHoursBeyondTwoTicks),
          1,
        ),
        besideCell(runs),
        pct(m((r) => r.summary.completionRate)),
      ]);
    }
  return markdown(header, rows, 2);
}

/** The idle GPU-h beyond two ticks by what the jobs beside them did; '-' unless every run recorded it. */
function besideCell(runs: readonly RunRecord[]): string {
  const split = runs.map((r) => r.summary.idleGpuHoursBeyondTwoTicksBeside);
  if (split.length === 0 || !split.every((b): b is IdleBeside => b !== undefined)) return '-';
  return besideText(meanIdleBeside(split));
}

/** (c) Average JCT per workload, every policy side by side. */
export function perWorkloadTable(record: BenchRecord): string {
  const workloads = [...new Set(record.runs.map((r) => r.workload))].sort(
    (a, b) => byNumber(loadOf(a), loadOf(b)) || byNumber(workloadLabel(a), workloadLabel(b)),
  );
  const rows = workloads.map((w) => [
    fullLabel(w),
    ...SIMULATION_POLICIES.map((p) =>
      num(record.runs.find((r) => r.workload === w && r.policy === p)?.summary.avgJctSeconds),
    ),
  ]);
  return markdown(['avg JCT s', ...SIMULATION_POLICIES], rows);
}

/** The baseline with the lowest mean of average JCT at a load. */
export function bestBaseline(record: BenchRecord, load: string): SimulationPolicy | null {
  let best: { policy: SimulationPolicy; value: number } | null = null;
  for (const policy of BASELINES) {
    const value = meanOf(runsAt(record, load, policy), (r) => r.summary.avgJctSeconds);
    if (value !== null && (best === null || value < best.value)) best = { policy, value };
  }
  return best?.policy ?? null;
}

/**
 * (d) Per application: mean JCT over the application's completed jobs in all of a load's workloads, mean wait
 * before the first step in brackets, for trainscaler and the best baseline of that load.
 */
export function perApplicationTable(record: BenchRecord): string {
  const apps = [...new Set(record.runs.flatMap((r) => r.jobs.map((j) => j.application)))].sort();
  const rows: string[][] = [];
  for (const load of loadsOf(record.runs)) {
    const best = bestBaseline(record, load);
    const policies: SimulationPolicy[] = ['trainscaler', ...(best ? [best] : [])];
    for (const policy of policies) {
      const jobs = runsAt(record, load, policy).flatMap((r) => r.jobs);
      rows.push([
        loadLabel(load),
        policy === best ? `${policy} (best baseline)` : policy,
        ...apps.map((app) => {
          const done = jobs.filter((j) => j.application === app && j.jctSeconds !== null);
          const jct = mean(done.map((j) => j.jctSeconds ?? 0));
          const wait = mean(done.map((j) => j.queuedSeconds ?? 0));
          return jct === null ? '-' : `${num(jct)} (${num(wait)})`;
        }),
        num(jobs.length),
      ]);
    }
  }
  return markdown(['load', 'policy', ...apps, 'jobs'], rows, 2);
}

/** (e) Multi-tenant: median JCT, completion and CPU/memory requested vs used, with trainscaler's gains vs manual. */
export function multiTenantTable(rows: readonly MultiTenantRecord[]): string {
  const workloads = [...new Set(rows.map((r) => r.workload))].sort(
    (a, b) => byNumber(loadOf(a), loadOf(b)) || a.localeCompare(b),
  );
  const out: string[][] = [];
  for (const w of workloads) {
    const manual = rows.find((r) => r.workload === w && r.policy === 'manual')?.aggregate;
    for (const policy of SIMULATION_POLICIES) {
      const a = rows.find((r) => r.workload === w && r.policy === policy)?.aggregate;
      const vsManual =
        a && manual && policy !== 'manual' && a.meanMedianJctSeconds !== null && manual.meanMedianJctSeconds
          ? `${signed(100 * (a.meanMedianJctSeconds / manual.meanMedianJctSeconds - 1), 0)}% / ${signed(100 * (a.meanCompletionRate - manual.meanCompletionRate), 1)} points`
          : '-';
      out.push([
        fullLabel(w),
        policy,
        num(a?.meanMedianJctSeconds),
        pct(a?.meanCompletionRate),
        vsManual,
        pct(a?.meanCpuRequested),
        pct(a?.meanCpuUsed),
        pct(a?.meanMemoryRequested),
        pct(a?.meanMemoryUsed),
      ]);
    }
  }
  return markdown(
    [
      'workload',
      'policy',
      'median JCT s',
      'completion',
      'vs manual: median JCT / completion',
      'CPU requested',
      'CPU used',
      'memory requested',
      'memory used',
    ],
    out,
    2,
  );
}

/** Which command, commit and date produced which policy's rows (a merged record can hold several). */
function sources(record: BenchRecord): string[] {
  const by = new Map<string, { replay: Set<string>; tenants: Set<string> }>();
  const entry = (source: string | undefined) => {
    const key = source ?? 'unknown source';
    const found = by.get(key) ?? { replay: new Set<string>(), tenants: new Set<string>() };
    by.set(key, found);
    return found;
  };
  for (const r of record.runs) entry(r.source).replay.add(r.policy);
  for (const r of record.multiTenant) entry(r.source).tenants.add(r.policy);
  const list = (s: Set<string>) => SIMULATION_POLICIES.filter((p) => s.has(p)).join(', ');
  return [...by].map(([source, { replay, tenants }]) => {
    const what =
      list(replay) === list(tenants)
        ? `${list(replay)} (replay and multi-tenant)`
        : [replay.size > 0 ? list(replay) : '', tenants.size > 0 ? `multi-tenant ${list(tenants)}` : '']
            .filter((t) => t !== '')
            .join('; ');
    return `- ${what}: ${source}`;
  });
}

/** Every README table, in the README's order, each under its heading. */
export function renderReadmeTables(record: BenchRecord, peers: PeerFigures): string {
  const parts: string[] = [`World ${record.world}, seed 1. Figures by:`, ...sources(record), ''];
  if (record.runs.length > 0)
    parts.push(
      'Mean of average JCT over the workloads of each load, seconds (bold: the lowest), and the workloads on which trainscaler beats each baseline:',
      '',
      meanJctTable(record, peers),
      '',
      'Per load and policy, mean over its workloads:',
      '',
      perLoadTable(record),
      '',
      'Average JCT per workload, seconds:',
      '',
      perWorkloadTable(record),
      '',
      'Per application, mean JCT over its completed jobs in all workloads of the load, seconds (mean wait before the first step in brackets), trainscaler and the best baseline:',
      '',
      perApplicationTable(record),
      '',
    );
  if (record.multiTenant.length > 0)
    parts.push(
      'Multi-tenant (seeded tenants; shares of the whole cluster, time-averaged):',
      '',
      multiTenantTable(record.multiTenant),
      '',
    );
  return parts.join('\n');
}
