// The few Go-template forms trainscaler's alert annotations use ({{ $labels.x }}, {{ $value | printf "%.Ng" }},
// {{ $value | printf "%.Nf" }}, {{ $value | humanizePercentage }}), rendered as Prometheus renders them;
// any other form is refused when the rule file is loaded.

const ACTION = /\{\{\s*([^}]*?)\s*\}\}/g;

export function checkTemplate(template: string): void {
  for (const match of template.matchAll(ACTION)) render(match[1] ?? '', {}, 0, true);
}

export function expandTemplate(
  template: string,
  labels: Readonly<Record<string, string>>,
  value: number,
): string {
  return template.replace(ACTION, (_all, action: string) => render(action, labels, value, false));
}

function render(
  action: string,
  labels: Readonly<Record<string, string>>,
  value: number,
  check: boolean,
): string {
  const label = /^\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)$/.exec(action);
  if (label) return labels[label[1] ?? ''] ?? (check ? '' : '<no value>');
  const printf = /^\$value \| printf "%\.(\d+)([gf])"$/.exec(action);
  if (printf) {
    const digits = Number(printf[1]);
    return printf[2] === 'f' ? value.toFixed(digits) : formatG(value, digits);
  }
  if (action === '$value | humanizePercentage') return `${humanize(value * 100)}%`;
  throw new Error(
    `alert template action '{{ ${action} }}' is not supported by the simulator's rule evaluator`,
  );
}

/** Go's %.Ng: N significant digits, trailing zeros removed, exponent form when exp < -4 or exp >= N. */
export function formatG(value: number, digits: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? '+Inf' : '-Inf';
  if (value === 0) return '0';
  const p = Math.max(1, digits);
  const exponent = Number(value.toExponential(p - 1).split('e')[1]);
  if (exponent < -4 || exponent >= p) {
    const [mantissa = '', exp = '0'] = value.toExponential(p - 1).split('e');
    const trimmed = mantissa.includes('.') ? mantissa.replace(/\.?0+$/, '') : mantissa;
    const e = Number(exp);
    return `${trimmed}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  const fixed = value.toFixed(Math.max(0, p - 1 - exponent));
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

/** Prometheus' humanize: %.4g with an SI prefix. */
export function humanize(value: number): string {
  if (value === 0 || !Number.isFinite(value)) return formatG(value, 4);
  let v = value;
  if (Math.abs(v) >= 1) {
    const prefixes = ['', 'k', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < prefixes.length - 1) {
      v /= 1000;
      i++;
    }
    return `${formatG(v, 4)}${prefixes[i]}`;
  }
  const prefixes = ['', 'm', 'u', 'n', 'p', 'f', 'a', 'z', 'y'];
  let i = 0;
  while (Math.abs(v) < 1 && i < prefixes.length - 1) {
    v *= 1000;
    i++;
  }
  return `${formatG(v, 4)}${prefixes[i]}`;
}
