// Text tables and the HTML page of `trainscaler simulate`. The page is inline SVG and CSS only (like the
// demo's report): it can be attached to an issue as one file.
import type { IdleBeside } from '../lib/sim/idle-capacity.js';
import { escapeHtml } from './demo-report-html.js';
import type { PolicyAggregate, RunSummary, SimulationResult, WorkloadRun } from './simulate.js';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const ratio = (requested: number, used: number) => (used > 0 ? `${(requested / used).toFixed(2)}x` : '-');
const secs = (x: number | null) => (x === null ? '-' : String(Math.round(x)));

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  '),
    )
    .join('\n');
}

const RUN_HEADER = [
  'workload',
  'policy',
  'done',
  'avg JCT s',
  'median JCT s',
  'makespan s',
  'GPU util',
  'rescales/job',
  'idle GPU-h while jobs could grow',
  'of it > 2 ticks',
  'beside growing / shrunk / left alone',
];

function runRow(run: WorkloadRun): string[] {
  const s: RunSummary = run.summary;
  return [
    run.workload,
    run.policy,
    `${s.completed}/${s.jobs}`,
    secs(s.avgJctSeconds),
    secs(s.medianJctSeconds),
    secs(s.makespanSeconds),
    pct(s.gpuUtilisation),
    s.rescalesPerJob.toFixed(2),
    s.idleGpuHoursWhileJobsCouldGrow.toFixed(1),
    s.idleGpuHoursBeyondTwoTicks.toFixed(1),
    besideText(s.idleGpuHoursBeyondTwoTicksBeside),
  ];
}

/** Idle GPU-h beyond two ticks as `growing / shrunk / left alone`. */
export function besideText(b: IdleBeside): string {
  return `${b.growing.toFixed(1)} / ${b.shrunk.toFixed(1)} / ${b.leftAlone.toFixed(1)}`;
}

function meanRow(policy: string, a: PolicyAggregate): string[] {
  return [
    `mean of ${a.workloads}`,
    policy,
    pct(a.meanCompletionRate),
    secs(a.meanAvgJctSeconds),
    secs(a.meanMedianJctSeconds),
    secs(a.meanMakespanSeconds),
    pct(a.meanGpuUtilisation),
    a.meanRescalesPerJob.toFixed(2),
    a.meanIdleGpuHoursWhileJobsCouldGrow.toFixed(1),
    a.meanIdleGpuHoursBeyondTwoTicks.toFixed(1),
    besideText(a.meanIdleGpuHoursBeyondTwoTicksBeside),
  ];
}

function spreadText(s: { max: number; maxJob: string | null }): string {
  return `${s.max}${s.maxJob ? ` (${s.maxJob})` : ''}`;
}

/** Per policy, over every job of its runs: the mean rescales per job and the most any one job had. */
export function renderRescalesPerJob(result: Pick<SimulationResult, 'policies'>): string {
  const rows = Object.entries(result.policies).flatMap(([policy, a]) =>
    a
      ? [
          `  ${policy}: mean ${a.rescalesPerJob.mean.toFixed(2)}, max ${spreadText(a.rescalesPerJob)}; re-formed worlds (any cause, each charged the rescale cost) mean ${a.rescalesPerJob.reformedWorlds.mean.toFixed(2)}, max ${spreadText(a.rescalesPerJob.reformedWorlds)}`,
        ]
      : [],
  );
  return ['Rescales per job (every job of the runs; the most for one job):', ...rows].join('\n');
}

/**
 * Average JCT per workload with every policy side by side, their mean, and the peer figures, which come from
 * another simulator (the Pollux artifact's) and are labelled so.
 */
export function renderPolicyComparison(result: SimulationResult): string {
  const policies = Object.keys(result.policies);
  const workloads = [...new Set(result.runs.map((r) => r.workload))];
  const rows: string[][] = [['avg JCT s', ...policies]];
  for (const w of workloads)
    rows.push([
      w,
      ...policies.map((p) =>
        secs(result.runs.find((r) => r.workload === w && r.policy === p)?.summary.avgJctSeconds ?? null),
      ),
    ]);
  rows.push([
    `mean of ${workloads.length}`,
    ...policies.map((p) =>
      secs(result.policies[p as keyof SimulationResult['policies']]?.meanAvgJctSeconds ?? null),
    ),
  ]);
  const peers = Object.entries(result.published)
    .map(([name, v]) => `${name} ${v.toLocaleString('en-US')} s`)
    .join(', ');
  return [
    'Average JCT, every policy side by side (this simulator, same run):',
    table(rows),
    `Peer figures from ${result.publishedSource}: ${peers}`,
  ].join('\n');
}

export function renderSimulationTables(result: SimulationResult): string {
  const lines: string[] = [];
  const c = result.cluster;
  lines.push(
    `SIMULATED cluster ${c.nodes} nodes x ${c.gpusPerNode} GPUs, world ${result.world.toUpperCase()} (step times: ${result.world === 'measured' ? 'the measured Pollux tables' : 'the fitted profiles'}), decision interval ${result.decisionIntervalSeconds} s, rescale cost ${result.rescaleCostSeconds.up} s up / ${result.rescaleCostSeconds.down} s down for every policy (--rescale-cost ${result.rescaleCostSeconds.name}, ${result.rescaleCostSeconds.source}; a growing elastic job trains on while its new pods start; trainscaler learns it per job from the job's metrics), seed ${result.seed}`,
    result.triggers,
    '',
  );
  const rows = [RUN_HEADER, ...result.runs.map(runRow)];
  for (const [policy, a] of Object.entries(result.policies)) if (a) rows.push(meanRow(policy, a));
  lines.push(table(rows), '');
  lines.push(renderPolicyComparison(result), '');
  lines.push(renderRescalesPerJob(result), '');
  if (result.multiTenant) {
    lines.push('Multi-tenant (time-averaged shares of the cluster; requested by bound pods vs really used):');
    const mt: string[][] = [
      [
        'policy',
        'median JCT s',
        'completion',
        'CPU req',
        'CPU used',
        'req/used',
        'mem req',
        'mem used',
        'req/used',
      ],
    ];
    for (const [policy, a] of Object.entries(result.policies)) {
      if (!a) continue;
      mt.push([
        policy,
        secs(a.meanMedianJctSeconds),
        pct(a.meanCompletionRate),
        pct(a.meanCpuRequested),
        pct(a.meanCpuUsed),
        ratio(a.meanCpuRequested, a.meanCpuUsed),
        pct(a.meanMemoryRequested),
        pct(a.meanMemoryUsed),
        ratio(a.meanMemoryRequested, a.meanMemoryUsed),
      ]);
    }
    lines.push(table(mt), '', 'Multi-tenant assumptions:', ...result.multiTenant.map((l) => `  - ${l}`), '');
  }
  lines.push('Assumptions:', ...result.assumptions.map((l) => `  - ${l}`), '');
  return `${lines.join('\n')}\n`;
}

const COLORS: Record<string, string> = {
  manual: '#7a869a',
  backfill: '#1098ad',
  tiresias: '#7048e8',
  threshold: '#2f9e44',
  trainscaler: '#d9480f',
};
const W = 720;
const H = 220;
const M = { left: 64, right: 12, top: 24, bottom: 36 };

function barChart(
  title: string,
  groups: string[],
  series: Array<{ label: string; values: number[] }>,
  refs: Array<[string, number]>,
): string {
  const innerW = W - M.left - M.right;
  const innerH = H - M.top - M.bottom;
  const max = Math.max(1, ...series.flatMap((s) => s.values), ...refs.map(([, v]) => v)) * 1.1;
  const y = (v: number) => M.top + innerH - (v / max) * innerH;
  const groupW = innerW / Math.max(1, groups.length);
  const barW = (groupW * 0.8) / Math.max(1, series.length);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}"><title>${escapeHtml(title)}</title>`,
  ];
  groups.forEach((g, gi) => {
    series.forEach((s, si) => {
      const v = s.values[gi] ?? 0;
      const x = M.left + gi * groupW + groupW * 0.1 + si * barW;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${(barW - 1).toFixed(1)}" height="${(M.top + innerH - y(v)).toFixed(1)}" fill="${COLORS[s.label] ?? '#888'}"><title>${escapeHtml(`${g} ${s.label}: ${Math.round(v)} s`)}</title></rect>`,
      );
    });
    parts.push(
      `<text x="${(M.left + gi * groupW + groupW / 2).toFixed(1)}" y="${H - 18}" font-size="10" text-anchor="middle">${escapeHtml(g.replace(/^.*\//, ''))}</text>`,
    );
  });
  for (const [name, v] of refs) {
    parts.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#1c7ed6" stroke-dasharray="4,3"/><text x="${W - M.right}" y="${(y(v) - 3).toFixed(1)}" font-size="10" text-anchor="end" fill="#1c7ed6">${escapeHtml(`${name} ${v} s (another simulator)`)}</text>`,
    );
  }
  for (const f of [0, 0.5, 1]) {
    const v = (max / 1.1) * f;
    parts.push(
      `<text x="${M.left - 6}" y="${(y(v) + 4).toFixed(1)}" font-size="10" text-anchor="end">${Math.round(v)}</text>`,
    );
  }
  parts.push(`<text x="${M.left}" y="14" font-size="11">${escapeHtml(title)}</text></svg>`);
  return parts.join('');
}

function busyChart(run: WorkloadRun, gpus: number, xMax: number): string {
  const innerW = W - M.left - M.right;
  const innerH = 120 - M.top - 20;
  const x = (t: number) => M.left + (t / Math.max(1, xMax)) * innerW;
  const y = (v: number) => M.top + innerH - (v / gpus) * innerH;
  const d = run.gpusBusy
    .map(([t, v], i) => `${i === 0 ? 'M' : 'L'}${x(t).toFixed(1)},${y(v).toFixed(1)}`)
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="120" role="img"><title>${escapeHtml(`${run.workload} ${run.policy}: GPUs busy`)}</title><path d="${d}" fill="none" stroke="${COLORS[run.policy] ?? '#888'}" stroke-width="1.5"/><text x="${M.left}" y="14" font-size="11">${escapeHtml(`${run.workload} ${run.policy}: GPUs held by running training containers (of ${gpus}), over ${(xMax / 3600).toFixed(1)} h`)}</text></svg>`;
}

export function renderSimulationHtml(result: SimulationResult): string {
  const workloads = [...new Set(result.runs.map((r) => r.workload))];
  const policies = Object.keys(result.policies);
  const series = (pick: (s: RunSummary) => number | null) =>
    policies.map((p) => ({
      label: p,
      values: workloads.map(
        (w) =>
          pick(result.runs.find((r) => r.workload === w && r.policy === p)?.summary ?? ({} as RunSummary)) ??
          0,
      ),
    }));
  const refs = Object.entries(result.published);
  const gpus = result.cluster.nodes * result.cluster.gpusPerNode;
  const xMax = Math.max(1, ...result.runs.map((r) => r.summary.makespanSeconds));
  return [
    '<!doctype html><html><head><meta charset="utf-8"><title>trainscaler simulate</title>',
    '<style>body{font-family:system-ui,sans-serif;margin:24px;max-width:760px}pre{font-size:11px;overflow-x:auto}</style></head><body>',
    '<h1>trainscaler simulate <small>(SIMULATED cluster)</small></h1>',
    barChart(
      'average JCT per workload (s)',
      workloads,
      series((s) => s.avgJctSeconds),
      refs,
    ),
    barChart(
      'median JCT per workload (s)',
      workloads,
      series((s) => s.medianJctSeconds),
      [],
    ),
    barChart(
      'makespan per workload (s)',
      workloads,
      series((s) => s.makespanSeconds),
      [],
    ),
    ...result.runs.map((r) => busyChart(r, gpus, xMax)),
    `<h2>Tables and assumptions</h2><pre>${escapeHtml(renderSimulationTables(result))}</pre>`,
    '</body></html>\n',
  ].join('\n');
}
