// Reading untyped API objects without `any`: every accessor checks the shape it walks through.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function getPath(root: unknown, path: readonly (string | number)[]): unknown {
  let node: unknown = root;
  for (const segment of path) {
    if (typeof segment === 'number') {
      if (!Array.isArray(node)) return undefined;
      node = node[segment];
    } else {
      if (!isObject(node)) return undefined;
      node = node[segment];
    }
  }
  return node;
}

export function getObject(root: unknown, path: readonly (string | number)[]): JsonObject | undefined {
  const value = getPath(root, path);
  return isObject(value) ? value : undefined;
}

export function getArray(root: unknown, path: readonly (string | number)[]): unknown[] | undefined {
  const value = getPath(root, path);
  return Array.isArray(value) ? value : undefined;
}

export function getNumber(root: unknown, path: readonly (string | number)[]): number | undefined {
  const value = getPath(root, path);
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

export function getString(root: unknown, path: readonly (string | number)[]): string | undefined {
  const value = getPath(root, path);
  return typeof value === 'string' ? value : undefined;
}
