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
  /** Profiles one namespace may keep (TRAINSCALER_PROFILES_PER_NAMESPACE); unset: the limits' own. */
  perNamespace?: number;
}

/**
 * Whose profile: a signature within one namespace. The signature is the user's to set (an annotation), so a
 * profile shared across namespaces would let one tenant's runs size another tenant's jobs; each namespace keeps
 * its own.
 */
export interface ProfileOwner {
  namespace: string;
  signature: string;
}

export function profileOwnerOf(job: { ref: { namespace: string }; signature: string }): ProfileOwner {
  return { namespace: job.ref.namespace, signature: job.signature };
}

/** How a profile is named in logs and reasons. */
function describeOwner(owner: ProfileOwner): string {
  return `${owner.signature} in ${owner.namespace}`;
}

/**
 * ConfigMap keys allow [-._a-zA-Z0-9] and at most 253 characters. The namespace (a DNS label: no dot, at most 63
 * characters) leads, so a key says whose it is; a hash of both keeps two signatures that sanitise alike apart.
 */
export function profileKey(owner: ProfileOwner): string {
  const readable = owner.signature.replace(/[^-._a-zA-Z0-9]/g, '_').slice(0, 180);
  const hash = createHash('sha256')
    .update(`${owner.namespace}\n${owner.signature}`)
    .digest('hex')
    .slice(0, 8);
  return `${owner.namespace}.${readable}.${hash}`;
}

/** The namespace a key belongs to (what precedes its first dot). */
function namespaceOfKey(key: string): string {
  return key.slice(0, Math.max(0, key.indexOf('.')));
}

export interface LoadedProfile {
  profile: JobProfile | undefined;
  /** Set when the stored entry could not be read; the caller proceeds without a profile and reports it. */
  problem?: string;
}

export async function loadProfile(
  cluster: ClusterClient,
  store: ProfileStoreRef,
  owner: ProfileOwner,
): Promise<LoadedProfile> {
  return (await readProfileStore(cluster, store))(owner);
}

export type ProfileLookup = (owner: ProfileOwner) => LoadedProfile;

/** One read of the store, then any number of profiles looked up in it (a tick reads it once). */
export async function readProfileStore(
  cluster: ClusterClient,
  store: ProfileStoreRef,
): Promise<ProfileLookup> {
  const configMap = await cluster.getConfigMap(store.namespace, store.configMapName);
  return (owner) => {
    const raw = configMap?.data?.[profileKey(owner)];
    if (!raw) return { profile: undefined };
    try {
      return { profile: parseProfile(raw) };
    } catch (error) {
      return {
        profile: undefined,
        problem: `profile for ${describeOwner(owner)} is unreadable: ${(error as Error).message}`,
      };
    }
  };
}

/**
 * The store is one ConfigMap shared by every tenant, and a ConfigMap holds at most 1 MiB: without bounds one
 * tenant's signatures could crowd out everyone's profiles, or fill it so that every profile write fails.
 * maxProfiles x maxProfileBytes stays well under 1 MiB. A namespace at its own cap makes room among its own
 * profiles, so however many signatures one tenant writes, it never drops another tenant's.
 */
export interface ProfileLimits {
  /** Longest signature accepted (a user-set annotation). */
  maxSignatureLength: number;
  /** Largest serialized profile accepted. */
  maxProfileBytes: number;
  /** Profiles kept; the least recently updated are dropped to make room. */
  maxProfiles: number;
  /** Profiles kept for one namespace; its least recently updated are dropped to make room for its next. */
  maxProfilesPerNamespace: number;
}

export const DEFAULT_PROFILE_LIMITS: ProfileLimits = {
  maxSignatureLength: 253,
  maxProfileBytes: 8 * 1024,
  maxProfiles: 100,
  maxProfilesPerNamespace: 20,
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

/**
 * The store's entries with room for `key`: first the oldest others of its namespace dropped until that namespace
 * holds at most maxProfilesPerNamespace, then the oldest of any namespace until at most maxProfiles remain.
 */
function makeRoom(
  data: Record<string, string>,
  key: string,
  limits: ProfileLimits,
): { data: Record<string, string>; dropped: string[] } {
  const kept = { ...data };
  const dropped: string[] = [];
  const dropOldest = (among: string[], excess: number) => {
    if (excess <= 0) return;
    const oldestFirst = among
      .map((k) => ({ k, at: ageOf(data[k] ?? '', limits) }))
      .sort((a, b) => a.at - b.at || a.k.localeCompare(b.k));
    for (const { k } of oldestFirst.slice(0, excess)) {
      delete kept[k];
      dropped.push(k);
    }
  };
  const namespace = namespaceOfKey(key);
  const neighbours = Object.keys(kept).filter((k) => k !== key && namespaceOfKey(k) === namespace);
  dropOldest(neighbours, neighbours.length + 1 - limits.maxProfilesPerNamespace);
  const others = Object.keys(kept).filter((k) => k !== key);
  dropOldest(others, others.length + 1 - limits.maxProfiles);
  return { data: kept, dropped };
}

/**
 * Merge a run into its namespace's profile of its signature; guarded by the ConfigMap's resourceVersion, retried on conflict.
 * A signature or a profile over the limits is refused (ValidationError, nothing written); when the store is
 * full the least recently updated profiles are dropped, with a warning.
 */
export async function recordRun(
  cluster: ClusterClient,
  store: ProfileStoreRef,
  run: FinishedRun & { namespace: string },
  now: number,
  dryRun: boolean,
  options: { logger?: StoreLogger; limits?: ProfileLimits } = {},
): Promise<JobProfile> {
  const base = options.limits ?? DEFAULT_PROFILE_LIMITS;
  const limits = { ...base, maxProfilesPerNamespace: store.perNamespace ?? base.maxProfilesPerNamespace };
  if (run.signature.length > limits.maxSignatureLength)
    throw new ValidationError(
      jsonPointer(['metadata', 'annotations', ANNOTATION.signature]),
      `signature of ${run.signature.length} characters; at most ${limits.maxSignatureLength}`,
    );
  for (let attempt = 1; ; attempt++) {
    const configMap = await cluster.getConfigMap(store.namespace, store.configMapName);
    const key = profileKey(run);
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
          'profile store full (or the namespace at its share): dropped the least recently updated profiles',
        );
      return merged;
    } catch (error) {
      if (error instanceof ConflictError && attempt < 4) continue;
      throw error;
    }
  }
}
