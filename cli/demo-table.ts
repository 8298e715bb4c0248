// The demo's result for a person at a terminal: one row per job (configuration, JCT and outcome with and
// without trainscaler), the two summary lines the comparison is about, then what trainscaler did and why.
import type { Resources, RoleName } from '../lib/types.js';
import { type DemoJobConfig, type DemoResult, formatClock, type RunSummary } from './demo.js';

const ROLE_ABBREVIATION: Record<RoleName, string> = {
  Worker: 'W',
  Master: 'M',
  PS: 'PS',
  Chief: 'C',
  Evaluator: 'E',
};
const GiB = 1024 ** 3;

function gib(bytes: number): string {
  return `${Number((bytes / GiB).toFixed(1))}Gi`;
}

function cores(millis: number): string {
  return `${Number((millis / 1000).toFixed(2))}c`;
}

function sizing(requests: Resources, limits: Resources): string {
  const parts = [];
  if (requests.gpus > 0) parts.push(`${requests.gpus}g`);
  parts.push(cores(requests.cpuMillis), gib(requests.memoryBytes));
  if (limits.memoryBytes > 0 && limits.memoryBytes !== requests.memoryBytes)
    parts.push(`lim ${gib(limits.memoryBytes)}`);
  return parts.join(' ');
}

/** "1 PS(2c 8Gi) + 2 W(1g 10c 16Gi)": replicas, role, then GPUs, cores, memory request (and limit if different). */
export function formatDemoConfig(config: DemoJobConfig): string {
  return config.roles
    .map((r) => `${r.replicas} ${ROLE_ABBREVIATION[r.role]}(${sizing(r.requests, r.limits)})`)
    .join(' + ');
}

function changedConfig(initial: DemoJobConfig, final: DemoJobConfig): string {
  const a = formatDemoConfig(initial);
  const b = formatDemoConfig(final);
  return a === b ? a : `${a} -> ${b}`;
}

function jct(seconds: number | null): string {
  return seconds === null ? '-' : formatClock(seconds);
}

function percent(fraction: number): string {
  return `${Math.round(fraction * 100)}%`;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function summaryLines(manual: RunSummary, trainscaler: RunSummary, jobs: number): string[] {
  const median = (s: RunSummary) => (s.medianJctSeconds === null ? 'n/a' : formatClock(s.medianJctSeconds));
  const rate = (s: RunSummary) => `${s.completed}/${jobs} (${percent(s.completionRate)}), ${s.failed} failed`;
  return [
    `Median JCT (completed jobs):  manual ${median(manual)}   trainscaler ${median(trainscaler)}`,
    `Completion rate:              manual ${rate(manual)}   trainscaler ${rate(trainscaler)}`,
    `Makespan:                     manual ${formatClock(manual.makespanSeconds)}   trainscaler ${formatClock(trainscaler.makespanSeconds)}`,
  ];
}

export function renderDemoTables(result: DemoResult): string {
  const configs = result.jobs.map((job) => [
    job.name,
    job.kind,
    job.application,
    formatDemoConfig(job.manual.config),
    changedConfig(job.trainscaler.config.initial, job.trainscaler.config.final),
  ]);
  const outcomes = result.jobs.map((job) => [
    job.name,
    jct(job.manual.jctSeconds),
    job.manual.state,
    jct(job.trainscaler.jctSeconds),
    job.trainscaler.state,
    String(job.decisions.length),
  ]);
  const out: string[] = [
    `trainscaler demo on a SIMULATED cluster (${result.scenario}), seed ${result.seed}`,
    `world FITTED: step times from the profiles fitted on the Pollux measurements (lib/sim/app-profiles.ts, the form trainscaler's own model fits), not the measurements themselves`,
    '',
    table(
      ['job', 'kind', 'app', 'manual configuration', 'trainscaler configuration (initial -> final)'],
      configs,
    ),
    '',
    table(['job', 'manual JCT', 'manual', 'trainscaler JCT', 'trainscaler', 'decisions'], outcomes),
    '',
    ...summaryLines(result.summary.manual, result.summary.trainscaler, result.jobs.length),
    '',
    'Configuration: replicas role(GPUs g, cores c, memory request, memory limit when different).',
    'Why the manual configurations are bad:',
    ...result.jobs.map((job) => `  ${job.name}: ${job.story}`),
  ];
  const failures = result.jobs.flatMap((job) =>
    (['manual', 'trainscaler'] as const)
      .filter((run) => job[run].failureReason)
      .map((run) => `  ${job.name} (${run}): ${job[run].failureReason}`),
  );
  if (failures.length > 0) out.push('', 'Failures:', ...failures);
  const decisions = result.jobs
    .flatMap((job) => job.decisions.map((d) => ({ job: job.name, ...d })))
    .sort((a, b) => a.at - b.at || a.job.localeCompare(b.job));
  out.push('', `What trainscaler did (${decisions.length} applied decisions):`);
  for (const d of decisions)
    out.push(`  ${formatClock(d.at)}  ${d.job}  ${d.policy} (${d.trigger}): ${d.reason}`);
  if (result.handlerErrors.length > 0) {
    const byCode = new Map<string, number>();
    for (const e of result.handlerErrors) byCode.set(e.code, (byCode.get(e.code) ?? 0) + 1);
    const counts = [...byCode.entries()].map(([code, n]) => `${code} x${n}`).join(', ');
    out.push('', `Handler errors (no decision was made for these): ${counts}`);
    for (const e of result.handlerErrors.filter((x) => x.code !== 'MISSING_METRICS').slice(0, 10)) {
      out.push(`  ${formatClock(e.at)}  ${e.trigger}${e.job ? ` ${e.job}` : ''}: ${e.message}`);
    }
  }
  return `${out.join('\n')}\n`;
}
