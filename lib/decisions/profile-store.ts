import { createHash } from 'node:crypto';
import { ANNOTATION, jsonPointer } from '../adapters/annotations.js';
import type { ClusterClient } from '../cluster/cluster-client.js';
import { ConflictError, ValidationError } from '../errors.js';
import {
  type FinishedRun,
  type JobProfile,
  mergeRunIntoProfile,
  parseProfile,
  serializeProfile,
} from '../policies/profiles.js';

export interface ProfileStoreRef {
  namespace: string;
  configMapName: string;
}

/** ConfigMap keys allow [-._a-zA-Z0-9]; a hash suffix keeps two signatures that sanitise alike apart. */
export function profileKey(signature: string): string {
  const readable = signature.replace(/[^-._a-zA-Z0-9]/g, '_').slice(0, 200);
  const hash = createHash('sha256').update(signature).digest('hex').slice(0, 8);
  return `${readable}.${hash}`;
}

export interface LoadedProfile {
  profile: JobProfile | undefined;
  /** Set when the stored entry could not be read; the caller proceeds without a profile and reports it. */
  problem?: string;
}

export async function loadProfile(
  cluster: ClusterClient,
  store: ProfileStoreRef,
  signature: string,
): Promise<LoadedProfile> {
  return (await readProfileStore(cluster, store))(signature);
}

/** One read of the store, then any number of signatures looked up in it (a tick reads it once). */
export async function readProfileStore(
  cluster: ClusterClient,
  store: ProfileStoreRef,
): Promise<(signature: string) => LoadedProfile> {
  const configMap = await cluster.getConfigMap(store.namespace, store.configMapName);
  return (signature) => {
    const raw = configMap?.data?.[profileKey(signature)];
    if (!raw) return { profile: undefined };
    try {
      return { profile: parseProfile(raw) };
    } catch (error) {
      return {
        profile: undefined,
        problem: `profile for ${signature} is unreadable: ${(error as Error).message}`,
      };
    }
  };
}

/**
 * The store is one ConfigMap shared by every tenant, and a ConfigMap holds at most 1 MiB: without bounds one
 * tenant's signatures could crowd out everyone's profiles, or fill it so that every profile write fails.
 * maxProfiles x maxProfileBytes stays well under 1 MiB.
 */
export interface ProfileLimits {
  /** Longest signature accepted (a user-set annotation). */
  maxSignatureLength: number;
  /** Largest serialized profile accepted. */
  maxProfileBytes: number;
  /** Profiles kept; the least recently updated are dropped to make room. */
  maxProfiles: number;
}

export const DEFAULT_PROFILE_LIMITS: ProfileLimits = {
  maxSignatureLength: 253,
  maxProfileBytes: 8 * 1024,
  maxProfiles: 100,
};

interface StoreLogger {
  warn(obj: object, msg?: string): void;
}

/** When each stored entry was last updated; unreadable or oversized entries count as the oldest. */
function ageOf(raw: string, limits: ProfileLimits): number {
  if (Buffer.byteLength(raw) > limits.maxProfileBytes) return Number.NEGATIVE_INFINITY;
  try {
    return parseProfile(raw).updatedAt;
  } catch {
    return Number.NEGATIVE_INFINITY;
  }
}

/** The store's entries with room for `key`: the oldest others dropped until at most maxProfiles remain. */
function makeRoom(
  data: Record<string, string>,
  key: string,
  limits: ProfileLimits,
): { data: Record<string, string>; dropped: string[] } {
  const others = Object.keys(data).filter((k) => k !== key);
  const excess = others.length + 1 - limits.maxProfiles;
  if (excess <= 0) return { data, dropped: [] };
  const oldestFirst = others
    .map((k) => ({ k, at: ageOf(data[k] ?? '', limits) }))
    .sort((a, b) => a.at - b.at || a.k.localeCompare(b.k));
  const dropped = oldestFirst.slice(0, excess).map((e) => e.k);
  const kept = { ...data };
  for (const k of dropped) delete kept[k];
  return { data: kept, dropped };
}

/**
 * Merge a run into its signature's profile; guarded by the ConfigMap's resourceVersion, retried on conflict.
 * A signature or a profile over the limits is refused (ValidationError, nothing written); when the store is
 * full the least recently updated profiles are dropped, with a warning.
 */
export async function recordRun(
  cluster: ClusterClient,
  store: ProfileStoreRef,
  run: FinishedRun,
  now: number,
  dryRun: boolean,
  options: { logger?: StoreLogger; limits?: ProfileLimits } = {},
): Promise<JobProfile> {
  const limits = options.limits ?? DEFAULT_PROFILE_LIMITS;
  if (run.signature.length > limits.maxSignatureLength)
    throw new ValidationError(
      jsonPointer(['metadata', 'annotations', ANNOTATION.signature]),
      `signature of ${run.signature.length} characters; at most ${limits.maxSignatureLength}`,
    );
  for (let attempt = 1; ; attempt++) {
    const configMap = await cluster.getConfigMap(store.namespace, store.configMapName);
    const key = profileKey(run.signature);
    const raw = configMap?.data?.[key];
    let previous: JobProfile | undefined;
    try {
      previous = raw ? parseProfile(raw) : undefined;
    } catch {
      previous = undefined; // an unreadable entry is replaced by what this run measured
    }
    const merged = mergeRunIntoProfile(previous, run, now);
    const serialized = serializeProfile(merged);
    if (serialized === raw) return merged;
    const size = Buffer.byteLength(serialized);
    if (size > limits.maxProfileBytes)
      throw new ValidationError('/profile', `${size} bytes serialized; at most ${limits.maxProfileBytes}`);
    const room = makeRoom(configMap?.data ?? {}, key, limits);
    try {
      await cluster.putConfigMap(
        store.namespace,
        store.configMapName,
        { ...room.data, [key]: serialized },
        configMap?.metadata?.resourceVersion,
        { dryRun },
      );
      if (room.dropped.length > 0)
        options.logger?.warn(
          { store, dropped: room.dropped, maxProfiles: limits.maxProfiles },
          'profile store full: dropped the least recently updated profiles',
        );
      return merged;
    } catch (error) {
      if (error instanceof ConflictError && attempt < 4) continue;
      throw error;
    }
  }
}
