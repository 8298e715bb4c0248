// The demo as a self-contained HTML page: per job, workers and throughput over time for both runs, with
// trainscaler's decisions as vertical markers whose tooltip (<title>) gives the reason. Inline SVG and
// CSS only: no scripts, no external resources, so the file can be mailed or attached to an issue.
import { type DemoDecision, type DemoResult, type DemoTimelinePoint, formatClock } from './demo.js';
import { formatDemoConfig } from './demo-table.js';

const WIDTH = 640;
const HEIGHT = 180;
const MARGIN = { left: 56, right: 12, top: 22, bottom: 28 };
const COLORS = { manual: '#7a869a', trainscaler: '#d9480f', decision: '#1c7ed6' } as const;

export function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

interface Series {
  label: string;
  color: string;
  points: Array<[number, number]>;
}

/** Values hold until the next point (step line): a worker count or a tick's mean throughput. */
function stepPath(
  points: Array<[number, number]>,
  x: (t: number) => number,
  y: (v: number) => number,
): string {
  let d = '';
  let previous: number | undefined;
  for (const [t, v] of points) {
    d +=
      previous === undefined
        ? `M${x(t).toFixed(1)},${y(v).toFixed(1)}`
        : `H${x(t).toFixed(1)}V${y(v).toFixed(1)}`;
    previous = v;
  }
  return d;
}

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 2.5, 5, 10].find((s) => s * magnitude >= value) ?? 10;
  return step * magnitude;
}

function formatNumber(value: number): string {
  if (value >= 1e6) return `${Number((value / 1e6).toFixed(1))}M`;
  if (value >= 1e3) return `${Number((value / 1e3).toFixed(1))}k`;
  return String(Number(value.toFixed(1)));
}

export function renderPlot(options: {
  title: string;
  unit: string;
  xMax: number;
  series: Series[];
  decisions: DemoDecision[];
  /** Counts (workers) get whole-number ticks. */
  integer?: boolean;
}): string {
  const innerW = WIDTH - MARGIN.left - MARGIN.right;
  const innerH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const xMax = Math.max(1, options.xMax);
  const highest = Math.max(0, ...options.series.flatMap((s) => s.points.map(([, v]) => v)));
  // Headroom above the highest value keeps a flat line off the frame.
  const yMax = options.integer ? Math.max(2, 2 * Math.ceil((highest + 1) / 2)) : niceMax(highest * 1.1);
  const x = (t: number) => MARGIN.left + (Math.min(t, xMax) / xMax) * innerW;
  const y = (v: number) => MARGIN.top + innerH - (v / yMax) * innerH;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${escapeHtml(options.title)}">`,
    `<title>${escapeHtml(options.title)}</title>`,
  );
  for (const fraction of [0, 0.5, 1]) {
    const value = yMax * fraction;
    parts.push(
      `<line class="grid" x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}"/>`,
      `<text class="tick" x="${MARGIN.left - 6}" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${formatNumber(value)}</text>`,
    );
  }
  const hourStep = xMax > 6 * 3600 ? 7200 : xMax > 2 * 3600 ? 3600 : 1800;
  for (let t = 0; t <= xMax; t += hourStep) {
    parts.push(
      `<text class="tick" x="${x(t).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="middle">${formatClock(t).replace(/:00$/, '')}</text>`,
    );
  }
  parts.push(`<text class="unit" x="${MARGIN.left}" y="12">${escapeHtml(options.unit)}</text>`);
  for (const decision of options.decisions) {
    const tooltip = `${formatClock(decision.at)} ${decision.policy} (${decision.trigger}): ${decision.reason}`;
    parts.push(
      `<g class="decision"><line x1="${x(decision.at).toFixed(1)}" x2="${x(decision.at).toFixed(1)}" y1="${MARGIN.top}" y2="${MARGIN.top + innerH}" stroke="${COLORS.decision}" stroke-dasharray="3,3"/><title>${escapeHtml(tooltip)}</title></g>`,
    );
  }
  for (const series of options.series) {
    if (series.points.length === 0) continue;
    parts.push(
      `<path d="${stepPath(series.points, x, y)}" fill="none" stroke="${series.color}" stroke-width="2"><title>${escapeHtml(series.label)}</title></path>`,
    );
  }
  parts.push('</svg>');
  return parts.join('');
}

function points(timeline: DemoTimelinePoint[] | undefined, pick: (p: DemoTimelinePoint) => number) {
  return (timeline ?? []).map((p): [number, number] => [p.t, pick(p)]);
}

function outcome(run: { jctSeconds: number | null; state: string }): string {
  return run.jctSeconds === null ? run.state : `${run.state} in ${formatClock(run.jctSeconds)}`;
}

export function renderDemoReportHtml(result: DemoResult): string {
  const xMax = Math.max(result.summary.manual.makespanSeconds, result.summary.trainscaler.makespanSeconds);
  const summaryRow = (label: string, pick: (s: DemoResult['summary']['manual']) => string) =>
    `<tr><th>${label}</th><td>${pick(result.summary.manual)}</td><td>${pick(result.summary.trainscaler)}</td></tr>`;
  const sections = result.jobs.map((job) => {
    const manual = result.timelines.manual[job.name];
    const trainscaler = result.timelines.trainscaler[job.name];
    const series = (pick: (p: DemoTimelinePoint) => number): Series[] => [
      { label: 'manual', color: COLORS.manual, points: points(manual, pick) },
      { label: 'trainscaler', color: COLORS.trainscaler, points: points(trainscaler, pick) },
    ];
    const decisions = job.decisions
      .map(
        (d) =>
          `<li><b>${formatClock(d.at)}</b> ${escapeHtml(d.policy)} (${escapeHtml(d.trigger)}): ${escapeHtml(d.reason)}</li>`,
      )
      .join('');
    return [
      `<section><h2>${escapeHtml(job.name)} <small>${escapeHtml(job.kind)} · ${escapeHtml(job.application)}</small></h2>`,
      `<p class="story">${escapeHtml(job.story)}</p>`,
      '<table class="job"><tr><th></th><th>configuration</th><th>outcome</th></tr>',
      `<tr><th>manual</th><td>${escapeHtml(formatDemoConfig(job.manual.config))}</td><td>${escapeHtml(outcome(job.manual))}</td></tr>`,
      `<tr><th>trainscaler</th><td>${escapeHtml(formatDemoConfig(job.trainscaler.config.initial))} → ${escapeHtml(formatDemoConfig(job.trainscaler.config.final))}</td><td>${escapeHtml(outcome(job.trainscaler))}</td></tr></table>`,
      '<div class="plots">',
      renderPlot({
        title: `${job.name}: workers over time`,
        unit: 'workers running',
        xMax,
        series: series((p) => p.workersRunning),
        decisions: job.decisions,
        integer: true,
      }),
      renderPlot({
        title: `${job.name}: throughput over time`,
        unit: 'samples/s',
        xMax,
        series: series((p) => p.throughput),
        decisions: job.decisions,
      }),
      '</div>',
      decisions
        ? `<ol class="decisions">${decisions}</ol>`
        : '<p class="none">trainscaler changed nothing on this job.</p>',
      '</section>',
    ].join('\n');
  });
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>trainscaler demo (simulated cluster, seed ${result.seed})</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;color:#212529;max-width:1400px}
h1{font-size:1.4rem} h2{font-size:1.1rem;margin-top:2rem} small{color:#868e96;font-weight:normal}
table{border-collapse:collapse;margin:.5rem 0} th,td{border:1px solid #dee2e6;padding:.25rem .5rem;text-align:left;font-size:.9rem}
.plots{display:flex;flex-wrap:wrap;gap:1rem} svg{background:#fff;border:1px solid #e9ecef}
.grid{stroke:#e9ecef} .tick,.unit{font-size:10px;fill:#868e96}
.legend span{display:inline-block;margin-right:1rem} .swatch{display:inline-block;width:1rem;height:.2rem;vertical-align:middle;margin-right:.3rem}
.story{color:#495057} .decisions{font-size:.85rem}
</style>
</head>
<body>
<h1>trainscaler demo on a SIMULATED cluster</h1>
<p>World FITTED: step times from the profiles fitted on the Pollux measurements (lib/sim/app-profiles.ts, the form trainscaler's own model fits), not the measurements themselves.</p>
<p>${escapeHtml(result.scenario)}; seed ${result.seed}. The same jobs ran twice: as submitted (manual) and driven by trainscaler's handlers. Dashed blue lines mark trainscaler's decisions; hover for the reason.</p>
<p class="legend"><span><i class="swatch" style="background:${COLORS.manual}"></i>manual</span><span><i class="swatch" style="background:${COLORS.trainscaler}"></i>trainscaler</span><span><i class="swatch" style="background:${COLORS.decision}"></i>decision</span></p>
<table>
<tr><th></th><th>manual</th><th>trainscaler</th></tr>
${summaryRow('median JCT (completed jobs)', (s) => (s.medianJctSeconds === null ? 'n/a' : formatClock(s.medianJctSeconds)))}
${summaryRow('completion rate', (s) => `${s.completed}/${result.jobs.length} (${Math.round(s.completionRate * 100)}%)`)}
${summaryRow('failed', (s) => String(s.failed))}
${summaryRow('makespan', (s) => formatClock(s.makespanSeconds))}
</table>
${sections.join('\n')}
</body>
</html>
`;
}
