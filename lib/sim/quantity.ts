// Kubernetes resource quantities ('500m', '4', '16Gi', '1.5e9') as the API server accepts them. The
// simulated API server rejects what the real one rejects, so a client writing a bad quantity finds out
// in the demo rather than in production.

/** The CRD schema's pattern for quantities (kubeflow.org_pytorchjobs.yaml, resources.requests). */
const QUANTITY_PATTERN =
  /^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;

const BINARY_SUFFIX: Record<string, number> = {
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
  Pi: 1024 ** 5,
  Ei: 1024 ** 6,
};
const DECIMAL_SUFFIX: Record<string, number> = {
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

/** The quantity in base units (cores, bytes, devices), or undefined when it is not a valid quantity. */
export function parseQuantity(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string' || !QUANTITY_PATTERN.test(value)) return undefined;
  const match = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$/.exec(value);
  if (!match) return undefined;
  const number = Number(match[1]);
  const suffix = match[2] ?? '';
  const binary = BINARY_SUFFIX[suffix];
  if (binary !== undefined) return number * binary;
  const decimal = DECIMAL_SUFFIX[suffix];
  if (decimal !== undefined) return number * decimal;
  const exponent = /^[eE]([+-]?[0-9.]+)$/.exec(suffix);
  return exponent ? number * 10 ** Number(exponent[1]) : undefined;
}

export function isValidQuantity(value: unknown): boolean {
  return parseQuantity(value) !== undefined;
}

/** CPU quantity to millicores, rounded up like the API server's canonical form. */
export function cpuQuantityToMillis(value: unknown): number | undefined {
  const cores = parseQuantity(value);
  return cores === undefined ? undefined : Math.ceil(Math.round(cores * 1e6) / 1e3);
}

export function memoryQuantityToBytes(value: unknown): number | undefined {
  const bytes = parseQuantity(value);
  return bytes === undefined ? undefined : Math.ceil(bytes);
}

/** Millicores as a quantity string: whole cores as '4', else '1500m'. */
export function millisToCpuQuantity(millis: number): string {
  const rounded = Math.ceil(millis);
  return rounded % 1000 === 0 ? String(rounded / 1000) : `${rounded}m`;
}

/** Bytes as the largest exact binary suffix ('16Gi', '1536Mi'), else plain bytes. */
export function bytesToMemoryQuantity(bytes: number): string {
  const rounded = Math.ceil(bytes);
  for (const suffix of ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki'] as const) {
    const unit = BINARY_SUFFIX[suffix] ?? 1;
    if (rounded >= unit && rounded % unit === 0) return `${rounded / unit}${suffix}`;
  }
  return String(rounded);
}
