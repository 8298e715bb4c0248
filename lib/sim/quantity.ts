// The simulated API server's view of resource quantities: the same parser the adapters use, answering
// undefined instead of throwing, so that the simulator can reject an invalid quantity with a 422 as the real
// API server does.
import { formatCpuMillis, formatMemoryBytes, parseQuantity as parseStrict } from '../adapters/quantity.js';

/** The quantity in base units (cores, bytes, devices), or undefined when it is not a valid quantity. */
export function parseQuantity(value: unknown): number | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  try {
    return parseStrict(value);
  } catch {
    return undefined;
  }
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

export const millisToCpuQuantity = formatCpuMillis;
export const bytesToMemoryQuantity = formatMemoryBytes;
