// What the forwarder has put on the bus, per object uid: the last fingerprint (lib/forwarder/classify.ts).
// Kept in one ConfigMap so that a restarted forwarder's first list, which shows every pod and job again,
// re-sends nothing: without it a restart would re-deliver every OOM kill still visible in a pod's lastState.
// Two maps: `inFlight` (queued, not yet acknowledged by PutEvents) also blocks duplicates, but only
// `acknowledged` is saved, so a crash before the put loses nothing: the next start forwards it again.

import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';

export const LEDGER_KEY = 'ledger.json';
/** A ConfigMap holds at most 1 MiB; ~80 bytes an entry keeps the newest 10,000 well below. */
export const MAX_LEDGER_ENTRIES = 10_000;

export interface LedgerStore {
  load(): Promise<Record<string, string>>;
  save(entries: Record<string, string>): Promise<void>;
}

export class Ledger {
  private readonly acknowledged = new Map<string, string>();
  private readonly inFlight = new Map<string, string>();
  private dirty = false;

  constructor(private readonly maxEntries = MAX_LEDGER_ENTRIES) {}

  restore(entries: Record<string, string>): void {
    for (const [uid, fingerprint] of Object.entries(entries)) this.acknowledged.set(uid, fingerprint);
  }

  lastForwarded(uid: string): string | undefined {
    return this.inFlight.get(uid) ?? this.acknowledged.get(uid);
  }

  queued(uid: string, fingerprint: string): void {
    this.inFlight.set(uid, fingerprint);
  }

  acknowledge(uid: string, fingerprint: string): void {
    if (this.inFlight.get(uid) === fingerprint) this.inFlight.delete(uid);
    // Re-inserting moves the uid to the end: the oldest entries are the ones trimmed.
    this.acknowledged.delete(uid);
    this.acknowledged.set(uid, fingerprint);
    this.dirty = true;
  }

  /** A dropped event may be forwarded again by the object's next update. */
  dropped(uid: string, fingerprint: string): void {
    if (this.inFlight.get(uid) === fingerprint) this.inFlight.delete(uid);
  }

  /** A deleted object is never listed again. */
  forget(uid: string): void {
    this.inFlight.delete(uid);
    if (this.acknowledged.delete(uid)) this.dirty = true;
  }

  /** Keeps only uids still in the cluster (after the first list every live object has been seen). */
  retainOnly(live: ReadonlySet<string>): void {
    for (const uid of [...this.acknowledged.keys()]) {
      if (!live.has(uid)) {
        this.acknowledged.delete(uid);
        this.dirty = true;
      }
    }
  }

  get size(): number {
    return this.acknowledged.size;
  }

  /** The entries to save when something changed since the last call, the newest `maxEntries`. */
  takeChanges(): Record<string, string> | undefined {
    if (!this.dirty) return undefined;
    this.dirty = false;
    const entries = [...this.acknowledged.entries()].slice(-this.maxEntries);
    return Object.fromEntries(entries);
  }

  /** Undo takeChanges after a failed save, so the next flush tries again. */
  markDirty(): void {
    this.dirty = true;
  }
}

function isNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'code' in error && error.code === 404;
}

/** The ledger in ConfigMap `namespace/name` (key ledger.json), written whole by its only writer. */
export class ConfigMapLedgerStore implements LedgerStore {
  private readonly core: CoreV1Api;

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly name: string,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  async load(): Promise<Record<string, string>> {
    let configMap: V1ConfigMap;
    try {
      configMap = await this.core.readNamespacedConfigMap({ namespace: this.namespace, name: this.name });
    } catch (error) {
      if (isNotFound(error)) return {};
      throw error;
    }
    const raw = configMap.data?.[LEDGER_KEY];
    if (!raw) return {};
    const parsed: unknown = JSON.parse(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
  }

  async save(entries: Record<string, string>): Promise<void> {
    const data = { [LEDGER_KEY]: JSON.stringify(entries) };
    try {
      // Only `data` is replaced (labels and kubectl's annotations stay); no resourceVersion pin: the one
      // forwarder replica is the only writer and its state is the newest.
      await this.core.patchNamespacedConfigMap({
        namespace: this.namespace,
        name: this.name,
        body: [{ op: 'add', path: '/data', value: data }],
      });
    } catch (error) {
      if (!isNotFound(error)) throw error;
      // infra/k8s/forwarder ships the ConfigMap; creating it needs a permission the Role does not grant.
      const body: V1ConfigMap = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: this.name,
          namespace: this.namespace,
          labels: { 'app.kubernetes.io/name': 'trainscaler-forwarder' },
        },
        data,
      };
      await this.core.createNamespacedConfigMap({ namespace: this.namespace, body });
    }
  }
}

/** For `--ledger none` and tests: nothing survives a restart. */
export class MemoryLedgerStore implements LedgerStore {
  saved: Record<string, string> = {};
  saves = 0;
  async load(): Promise<Record<string, string>> {
    return { ...this.saved };
  }
  async save(entries: Record<string, string>): Promise<void> {
    this.saved = { ...entries };
    this.saves += 1;
  }
}
