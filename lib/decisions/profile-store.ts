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
 * maxProfiles x maxProfileBytes stays well under 1 MiB. A namespace's writes make room only among its own
 * profiles (at its share, or when the store is full), never among another namespace's live ones: however many
 * signatures one tenant writes, it drops no other tenant's profile. A full store in which a namespace has no
 * profile of its own to replace stores none for it (with a warning) until room frees.
 */
export interface ProfileLimits {
  /** Longest signature accepted (a user-set annotation). */
  maxSignatureLength: number;
  /** Largest serialized profile accepted. */
  maxProfileBytes: number;
  /** Profiles kept in the store. */
  maxProfiles: number;
  /** Profiles kept for one namespace; its least recently updated are dropped to make room for its next. */
  maxProfilesPerNamespace: number;
  /**
   * A profile not updated for this long (seconds) is abandoned (its namespace or signature no longer runs):
   * a full store drops it for any namespace's new profile. Until then only its own namespace replaces it.
   */
  abandonedAfterSeconds: number;
}

export const DEFAULT_PROFILE_LIMITS: ProfileLimits = {
  maxSignatureLength: 253,
  maxProfileBytes: 8 * 1024,
  maxProfiles: 100,
  maxProfilesPerNamespace: 20,
  abandonedAfterSeconds: 30 * 24 * 3600,
};

interface StoreLogger {
  warn(obj: object, msg?: string): void;
}

/** A stored entry as the store's bounds see it. */
interface StoredEntry {
  key: string;
  /** When it was last updated (epoch seconds); -Infinity when unreadable or oversized. */
  at: number;
  /**
   * Whose it is: the namespace its key names, when the key is the one profileKey gives its profile; undefined
   * for an unreadable, oversized or hand-made entry, or one keyed before profiles were per namespace.
   */
  namespace: string | undefined;
}

function entryOf(key: string, raw: string, limits: ProfileLimits): StoredEntry {
  if (Buffer.byteLength(raw) > limits.maxProfileBytes)
    return { key, at: Number.NEGATIVE_INFINITY, namespace: undefined };
  try {
    const profile = parseProfile(raw);
    const namespace = namespaceOfKey(key);
    const owned = profileKey({ namespace, signature: profile.signature }) === key;
    return { key, at: profile.updatedAt, namespace: owned ? namespace : undefined };
  } catch {
    return { key, at: Number.NEGATIVE_INFINITY, namespace: undefined };
  }
}

const oldestFirst = (a: StoredEntry, b: StoredEntry) => a.at - b.at || a.key.localeCompare(b.key);

/**
 * The store's entries with room for `key` (of `namespace`), or undefined when there is none a namespace may
 * take. First the namespace's own oldest are dropped until it holds at most maxProfilesPerNamespace. Then, while
 * the store is over maxProfiles: entries nobody owns, then abandoned profiles of any namespace, then the
 * namespace's own oldest. Never another namespace's profile updated within abandonedAfterSeconds.
 */
function makeRoom(
  data: Record<string, string>,
  key: string,
  namespace: string,
  limits: ProfileLimits,
  now: number,
): { data: Record<string, string>; dropped: string[] } | undefined {
  const kept = { ...data };
  const dropped: string[] = [];
  const drop = (entries: StoredEntry[], count: number) => {
    for (const { key: k } of entries.slice(0, Math.max(0, count))) {
      delete kept[k];
      dropped.push(k);
    }
  };
  const others = () =>
    Object.keys(kept)
      .filter((k) => k !== key)
      .map((k) => entryOf(k, kept[k] ?? '', limits))
      .sort(oldestFirst);
  const own = (entries: StoredEntry[]) => entries.filter((e) => e.namespace === namespace);
  drop(own(others()), own(others()).length + 1 - limits.maxProfilesPerNamespace);
  const excess = () => others().length + 1 - limits.maxProfiles;
  const abandoned = (e: StoredEntry) => now - e.at > limits.abandonedAfterSeconds;
  drop(
    others().filter((e) => e.namespace === undefined),
    excess(),
  );
  drop(
    others().filter((e) => e.namespace !== namespace && abandoned(e)),
    excess(),
  );
  drop(own(others()), excess());
  return excess() > 0 ? undefined : { data: kept, dropped };
}

/**
 * Merge a run into its namespace's profile of its signature; guarded by the ConfigMap's resourceVersion, retried on conflict.
 * A signature or a profile over the limits is refused (ValidationError, nothing written). Room is made as
 * makeRoom says, with a warning; when a full store has none this namespace may take, nothing is written (a
 * warning; the merged profile is returned unstored).
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
    const room = makeRoom(configMap?.data ?? {}, key, run.namespace, limits, now);
    if (!room) {
      options.logger?.warn(
        { store, namespace: run.namespace, signature: run.signature, maxProfiles: limits.maxProfiles },
        "profile store full of other namespaces' profiles: this run's profile is not stored",
      );
      return merged;
    }
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
          "profile store full (or the namespace at its share): dropped the namespace's least recently updated profiles, or abandoned or unreadable ones",
        );
      return merged;
    } catch (error) {
      if (error instanceof ConflictError && attempt < 4) continue;
      throw error;
    }
  }
}
