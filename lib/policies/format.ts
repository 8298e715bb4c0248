// Quantities as a person reads them in a plan's reason. Reasons end up in logs, events and annotations,
// so they use the units an operator would type into a pod spec (GiB/MiB, cores/millicores).

const KIB = 1024;
const MIB = 1024 ** 2;
const GIB = 1024 ** 3;

/** Bytes as GiB with one decimal from 1 GiB up, else MiB/KiB; e.g. "8.0 GiB", "512 MiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const abs = Math.abs(bytes);
  if (abs >= GIB) return `${(bytes / GIB).toFixed(1)} GiB`;
  if (abs >= MIB) return `${trimDecimal(bytes / MIB)} MiB`;
  if (abs >= KIB) return `${trimDecimal(bytes / KIB)} KiB`;
  return `${bytes} B`;
}

/** Millicores as cores from one core up ("2.5 cores"), else millicores ("500m"). */
export function formatMillicores(millis: number): string {
  if (!Number.isFinite(millis)) return String(millis);
  if (Math.abs(millis) >= 1000) {
    const cores = trimDecimal(millis / 1000, 2);
    return `${cores} ${cores === '1' ? 'core' : 'cores'}`;
  }
  return `${Math.round(millis)}m`;
}

/** A ratio such as 1.5 as "x1.50" (two decimals: policies compare ratios against thresholds like 1.3). */
export function formatRatio(ratio: number): string {
  return `x${ratio.toFixed(2)}`;
}

/** A fraction such as 0.25 as "25%". */
export function formatPercent(fraction: number): string {
  return `${trimDecimal(fraction * 100)}%`;
}

function trimDecimal(value: number, digits = 1): string {
  return Number(value.toFixed(digits)).toString();
}
