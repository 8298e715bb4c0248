// Kubernetes resource quantities ('500m', '2', '4Gi', '1.5e3', '128M') to numbers and back.
// Written here rather than taken from @kubernetes/client-node so that the pure core (and the demo)
// does not load the whole API client.

const BINARY: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/;

/**
 * Quantities already parsed: a cluster's pods repeat a few request strings ('4', '10Gi'), and a 10,000-job tick
 * parses each of its 100,000 pods' requests and limits. Bounded: cleared when full. Invalid ones are not kept.
 */
const parsed = new Map<string, number>();
const MAX_PARSED = 4096;

/** Parses a quantity to a plain number in base units (cores for CPU, bytes for memory). */
export function parseQuantity(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`invalid quantity ${value}`);
    return value;
  }
  let number = parsed.get(value);
  if (number === undefined) {
    number = parseQuantityString(value);
    if (parsed.size >= MAX_PARSED) parsed.clear();
    parsed.set(value, number);
  }
  return number;
}

function parseQuantityString(value: string): number {
  const match = QUANTITY.exec(value.trim());
  if (!match) throw new Error(`invalid quantity '${value}'`);
  const [, number, exponent, suffix = ''] = match;
  const base = Number(number);
  if (exponent) return base * 10 ** Number(exponent.slice(1));
  const factor = BINARY[suffix] ?? DECIMAL[suffix];
  if (factor === undefined) throw new Error(`invalid quantity suffix in '${value}'`);
  return base * factor;
}

export function cpuToMillis(value: string | number): number {
  return Math.round(parseQuantity(value) * 1000);
}

export function formatCpuMillis(millis: number): string {
  const rounded = Math.round(millis);
  return rounded % 1000 === 0 ? String(rounded / 1000) : `${rounded}m`;
}

/** Memory as the largest binary unit that keeps it whole, so patches read like what a person writes. */
export function formatMemoryBytes(bytes: number): string {
  const whole = Math.ceil(bytes);
  for (const unit of ['Ti', 'Gi', 'Mi', 'Ki'] as const) {
    const factor = BINARY[unit] as number;
    if (whole % factor === 0) return `${whole / factor}${unit}`;
  }
  return String(whole);
}
