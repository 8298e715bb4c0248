// Replays the production alert rules and Alertmanager timings faster: every duration in a rule's range
// selectors, subqueries and `for:`, and Alertmanager's group_wait/group_interval/repeat_interval, is divided
// by the same factor. Thresholds are ratios or rates per second, so they need no change: the same rules
// fire on the same shapes of data, in seconds instead of minutes.

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

/** Prometheus duration ('1h30m', '5m', '90s') to seconds. */
export function durationSeconds(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text)
    throw new Error(`not a Prometheus duration: '${text}'`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * (UNIT_SECONDS[p[2] ?? 's'] ?? 1), 0);
}

function compressed(text: string, factor: number): string {
  const ms = Math.max(1, Math.round((durationSeconds(text) * 1000) / factor));
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

const DURATION = String.raw`(?:\d+(?:ms|s|m|h|d))+`;

/** Rule files: `[5m]`, `[1h:1m]` and `for: 10m`. */
export function compressRuleDurations(yaml: string, factor: number): string {
  return yaml
    .replace(
      new RegExp(String.raw`\[(${DURATION})(?::(${DURATION})?)?\]`, 'g'),
      (_m, range: string, res?: string) =>
        res === undefined
          ? _m.includes(':')
            ? `[${compressed(range, factor)}:]`
            : `[${compressed(range, factor)}]`
          : `[${compressed(range, factor)}:${compressed(res, factor)}]`,
    )
    .replace(
      new RegExp(String.raw`^(\s*for:\s*)(${DURATION})[ \t]*$`, 'gm'),
      (_m, key: string, d: string) => `${key}${compressed(d, factor)}`,
    );
}

/** Alertmanager configuration: the route timers. */
export function compressAlertmanagerTimers(yaml: string, factor: number): string {
  return yaml.replace(
    new RegExp(String.raw`^(\s*(?:group_wait|group_interval|repeat_interval):\s*)(${DURATION})[ \t]*$`, 'gm'),
    (_m, key: string, d: string) => `${key}${compressed(d, factor)}`,
  );
}
