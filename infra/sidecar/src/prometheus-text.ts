// Just enough of the Prometheus text exposition format to read one metric's value from a trainer that
// already exports its progress (e.g. a `global_step` gauge): the sidecar re-exports it under trainscaler's
// names and labels instead of asking the user to change the trainer.

/** End of the label block starting at `open` ('{'), honouring quoted values with escapes; -1 if unclosed. */
function labelBlockEnd(line: string, open: number): number {
  let quoted = false;
  for (let i = open + 1; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '}') return i;
  }
  return -1;
}

function sampleValue(token: string | undefined): number | undefined {
  if (token === undefined) return undefined;
  const value = token === '+Inf' ? Number.POSITIVE_INFINITY : token === '-Inf' ? -Infinity : Number(token);
  return Number.isNaN(value) ? undefined : value;
}

/** The value of the first sample named exactly `metric` (any labels), or undefined when it is not there. */
export function metricValue(exposition: string, metric: string): number | undefined {
  for (const raw of exposition.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || !line.startsWith(metric)) continue;
    const next = line[metric.length];
    let rest: string;
    if (next === '{') {
      const end = labelBlockEnd(line, metric.length);
      if (end < 0) continue;
      rest = line.slice(end + 1);
    } else if (next === ' ' || next === '\t') {
      rest = line.slice(metric.length);
    } else {
      continue; // a longer name with the same prefix, e.g. global_step_total for global_step
    }
    const value = sampleValue(rest.trim().split(/\s+/)[0]);
    if (value !== undefined) return value;
  }
  return undefined;
}
