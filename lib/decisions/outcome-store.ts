// The last outcome of every policy on every job, "keep" decisions included, for `trainscaler explain`.
//
// Where: one ConfigMap per job namespace, `trainscaler-outcomes-<namespace>`, in trainscaler's own namespace
// (beside the profiles), one key per job (`<Kind>.<name>`), a JSON object per policy. Not on the job: an
// annotation write bumps the job's resourceVersion, which wakes every watcher (the training operator too),
// invalidates rebalance snapshots and races the job's owner, all to say "still nothing to do".
//
// When: only when a job's outcome for a policy changes (decisionSignature: policy, outcome, changes and the
// reason with its figures blanked). An unchanged "keep" is never written, whatever the number of reviews;
// the process remembers what it stored, so a repeat costs no read either. After a restart the first outcome
// per job reads the ConfigMap once and writes only if it differs. Writes are guarded by the ConfigMap's
// resourceVersion and serialised per namespace; dry run sends them as server-side dry runs (nothing stored).

import type { HandlerResult } from '../../functions/handler-deps.js';
import type { Outcome } from '../actuator.js';
import type { ClusterClient } from '../cluster/cluster-client.js';
import { ConflictError } from '../errors.js';
import { decisionSignature, outcomeOf } from '../runner/decision-log.js';
import type { Change, JobRef } from '../types.js';

export const OUTCOMES_CONFIGMAP_PREFIX = 'trainscaler-outcomes-';
/** Entries of jobs not reviewed for this long are dropped when their ConfigMap is next written. */
const RETENTION_SECONDS = 7 * 24 * 3600;
const MAX_ATTEMPTS = 4;

export interface StoredOutcome {
  /** Epoch seconds of the first review with this outcome: every review since has decided the same. */
  at: number;
  trigger: HandlerResult['trigger'];
  outcome: string;
  reason: string;
  changes: Change[];
  /** The decision's details (explain --verbose), at most DETAILS_LIMIT characters in all. */
  details?: string[];
  decisionId?: string;
  signature: string;
}

/**
 * Characters of details kept per stored outcome: one ConfigMap holds every job of a namespace (1 MiB in all),
 * and the full details of an applied decision are in its record on the job (trainscaler.io/history).
 */
export const DETAILS_LIMIT = 1000;

function storedDetails(details: readonly string[] | undefined): string[] | undefined {
  if (!details || details.length === 0) return undefined;
  const kept: string[] = [];
  let left = DETAILS_LIMIT;
  for (const d of details) {
    if (left <= 0) break;
    kept.push(d.length <= left ? d : `${d.slice(0, Math.max(0, left - 1))}…`);
    left -= d.length;
  }
  return kept;
}

/** policy -> its last outcome on the job */
export type JobOutcomes = Record<string, StoredOutcome>;

export function outcomesConfigMapName(namespace: string): string {
  return `${OUTCOMES_CONFIGMAP_PREFIX}${namespace}`;
}

export function outcomesKey(ref: JobRef): string {
  return `${ref.kind}.${ref.name}`;
}

export function parseJobOutcomes(raw: string | undefined): JobOutcomes {
  if (!raw) return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    const out: JobOutcomes = {};
    for (const [policy, value] of Object.entries(parsed as Record<string, unknown>)) {
      const v = value as Partial<StoredOutcome>;
      if (typeof v?.at === 'number' && typeof v.reason === 'string' && typeof v.outcome === 'string')
        out[policy] = value as StoredOutcome;
    }
    return out;
  } catch {
    return {};
  }
}

/** What `trainscaler explain` reads: the stored outcomes of one job (none when nothing is stored). */
export async function readJobOutcomes(
  cluster: ClusterClient,
  storeNamespace: string,
  ref: JobRef,
): Promise<JobOutcomes> {
  const cm = await cluster.getConfigMap(storeNamespace, outcomesConfigMapName(ref.namespace));
  return parseJobOutcomes(cm?.data?.[outcomesKey(ref)]);
}

export interface OutcomeStoreOptions {
  cluster: ClusterClient;
  /** trainscaler's own namespace (TRAINSCALER_PROFILES_NAMESPACE). */
  namespace: string;
  dryRun: boolean;
  /** Epoch seconds. */
  clock: () => number;
}

export class OutcomeStore {
  readonly #options: OutcomeStoreOptions;
  /** `<ns>/<key>/<policy>` -> signature this process stored (or found stored). */
  readonly #stored = new Map<string, string>();
  readonly #chains = new Map<string, Promise<void>>();
  /** Writes made, for tests and figures: a repeated keep must not add one. */
  writes = 0;

  constructor(options: OutcomeStoreOptions) {
    this.#options = options;
  }

  /** Records the outcomes of one handler result; resolves when their namespaces' writes are done. */
  record(trigger: HandlerResult['trigger'], result: HandlerResult): Promise<void> {
    const byNamespace = new Map<string, Outcome[]>();
    for (const outcome of result.outcomes) {
      if (outcome.skipped === 'not-managed') continue;
      const { ref, plan } = outcome;
      const id = `${ref.namespace}/${outcomesKey(ref)}/${plan.policy}`;
      if (this.#stored.get(id) === decisionSignature(outcome)) continue;
      const list = byNamespace.get(ref.namespace) ?? [];
      list.push(outcome);
      byNamespace.set(ref.namespace, list);
    }
    const writes = [...byNamespace].map(([namespace, outcomes]) => {
      const previous = this.#chains.get(namespace) ?? Promise.resolve();
      const next = previous.then(() => this.#write(namespace, trigger, outcomes));
      const settled = next.catch(() => {});
      this.#chains.set(namespace, settled);
      settled.then(() => {
        if (this.#chains.get(namespace) === settled) this.#chains.delete(namespace);
      });
      return next;
    });
    return Promise.all(writes).then(() => {});
  }

  async #write(namespace: string, trigger: HandlerResult['trigger'], outcomes: Outcome[]): Promise<void> {
    const { cluster, dryRun, clock } = this.#options;
    const name = outcomesConfigMapName(namespace);
    for (let attempt = 1; ; attempt++) {
      const cm = await cluster.getConfigMap(this.#options.namespace, name);
      const data: Record<string, string> = { ...(cm?.data ?? {}) };
      const now = clock();
      let changed = false;
      const learned: Array<[string, string]> = [];
      for (const outcome of outcomes) {
        const { ref, plan } = outcome;
        const key = outcomesKey(ref);
        const entries = parseJobOutcomes(data[key]);
        const signature = decisionSignature(outcome);
        learned.push([`${namespace}/${key}/${plan.policy}`, signature]);
        if (entries[plan.policy]?.signature === signature) continue;
        const entry: StoredOutcome = {
          at: now,
          trigger,
          outcome: outcomeOf(outcome),
          reason: plan.reason,
          changes: plan.changes,
          signature,
        };
        if (outcome.decisionId) entry.decisionId = outcome.decisionId;
        const details = storedDetails(plan.details);
        if (details) entry.details = details;
        entries[plan.policy] = entry;
        data[key] = JSON.stringify(entries);
        changed = true;
      }
      if (!changed) {
        for (const [id, signature] of learned) this.#stored.set(id, signature);
        return;
      }
      for (const [key, raw] of Object.entries(data)) {
        const newest = Math.max(0, ...Object.values(parseJobOutcomes(raw)).map((e) => e.at));
        if (now - newest > RETENTION_SECONDS) delete data[key];
      }
      try {
        await cluster.putConfigMap(this.#options.namespace, name, data, cm?.metadata?.resourceVersion, {
          dryRun,
        });
        this.writes++;
        // Remembered in dry run too (nothing was stored): a repeated keep must not cost a request either.
        for (const [id, signature] of learned) this.#stored.set(id, signature);
        return;
      } catch (error) {
        if (error instanceof ConflictError && attempt < MAX_ATTEMPTS) continue;
        throw error;
      }
    }
  }
}
