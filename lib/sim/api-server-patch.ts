// JSON Patch (RFC 6902) with the API server's semantics, so that a client that works against the
// simulator also works against a real cluster: the patch applies atomically or not at all, an operation
// whose parent path is missing is rejected (HTTP 422), a failed `test` is a conflict, and a guard on
// /metadata/resourceVersion gives optimistic concurrency (409 when the object moved on).
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { JsonPatchOp, KubeObject } from '../cluster/cluster-client.js';
import { ApiError, ConflictError, ValidationError } from '../errors.js';
import { readSimulatedJobSpec } from './simulated-job-spec.js';

const OPS = new Set(['add', 'remove', 'replace', 'test']);

/** The patched object (a new copy); `current` is left untouched. Throws ConflictError or ApiError(422). */
export function applyJsonPatchLikeApiServer(
  current: KubeObject,
  patch: JsonPatchOp[],
  what: string,
): KubeObject {
  if (!Array.isArray(patch)) throw new ApiError(what, 400, 'a JSON patch must be an array of operations');
  patch.forEach((op, i) => {
    if (!OPS.has(op.op)) throw new ApiError(what, 422, `operation ${i}: unsupported op '${String(op.op)}'`);
    if (typeof op.path !== 'string') throw new ApiError(what, 422, `operation ${i}: missing path`);
    if (op.op !== 'remove' && op.value === undefined)
      throw new ApiError(what, 422, `operation ${i}: missing value`);
  });
  for (const op of patch) {
    const guardsVersion =
      op.path === '/metadata/resourceVersion' && (op.op === 'replace' || op.op === 'test');
    if (guardsVersion && String(op.value) !== current.metadata.resourceVersion) throw new ConflictError(what);
  }

  let next: KubeObject;
  try {
    next = jsonpatch.applyPatch(
      structuredClone(current),
      structuredClone(patch) as Operation[],
      true,
      true,
    ).newDocument;
  } catch (error) {
    if (error instanceof jsonpatch.JsonPatchError) {
      if (error.name === 'TEST_OPERATION_FAILED') throw new ConflictError(what);
      const op = error.operation as { op?: string; path?: string } | undefined;
      throw new ApiError(what, 422, `${error.name} at ${op?.op ?? '?'} ${op?.path ?? '?'}`, { cause: error });
    }
    throw error;
  }

  for (const field of ['apiVersion', 'kind'] as const) {
    if (next[field] !== current[field]) throw new ApiError(what, 422, `${field} is immutable`);
  }
  for (const field of ['name', 'namespace', 'uid', 'creationTimestamp'] as const) {
    if (next.metadata?.[field] !== current.metadata[field]) {
      throw new ApiError(what, 422, `metadata.${field} is immutable`);
    }
  }
  try {
    readSimulatedJobSpec(next);
  } catch (error) {
    if (error instanceof ValidationError) throw new ApiError(what, 422, error.message, { cause: error });
    throw error;
  }
  return next;
}
