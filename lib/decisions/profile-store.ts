import { createHash } from 'node:crypto';
import type { ClusterClient } from '../cluster/cluster-client.js';
import { ConflictError } from '../errors.js';
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

/** Merge a run into its signature's profile; guarded by the ConfigMap's resourceVersion, retried on conflict. */
export async function recordRun(
  cluster: ClusterClient,
  store: ProfileStoreRef,
  run: FinishedRun,
  now: number,
  dryRun: boolean,
): Promise<JobProfile> {
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
    try {
      await cluster.putConfigMap(
        store.namespace,
        store.configMapName,
        { ...(configMap?.data ?? {}), [key]: serialized },
        configMap?.metadata?.resourceVersion,
        { dryRun },
      );
      return merged;
    } catch (error) {
      if (error instanceof ConflictError && attempt < 4) continue;
      throw error;
    }
  }
}
