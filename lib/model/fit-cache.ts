// A job's fitted runtime model kept between ticks: most ticks see the same samples as the last one (or one
// more), and fitting is nearly all of a tick's CPU. It is only a cache: dropping it, or any entry, changes
// nothing but the CPU the next tick spends.

import type { JobRef, StepSample } from '../types.js';
import type { FitWarmStart } from './fit.js';
import { fitRuntimeModelFrom } from './observed-bound.js';
import type { ThroughputModel } from './throughput-model.js';

/** Which job a fit belongs to: its uid, or where there is none its kind, namespace and name. */
export interface FitOwner {
  ref: JobRef;
  uid?: string;
}

export interface FitCacheOptions {
  /**
   * Most jobs kept (default 20,000: twice a 10,000-job cluster); past it, the job fitted least recently goes.
   * About 3 to 4.5 KB a job (npm run bench:fits measures it).
   */
  maxEntries?: number;
}

export interface FitCacheStats {
  /** Fits answered from the cache: the job's samples and prior were the ones its kept fit was made on. */
  hits: number;
  /** Fits made again, started from the job's kept fit (its samples or prior changed). */
  warmFits: number;
  /** Fits of jobs the cache did not hold. */
  coldFits: number;
  /** Entries dropped to stay within maxEntries. */
  evictions: number;
}

interface Entry {
  inputs: string;
  model: ThroughputModel;
  warmStart: FitWarmStart;
}

export const DEFAULT_FIT_CACHE_ENTRIES = 20_000;

export class FitCache {
  readonly #maxEntries: number;
  // A Map iterates in insertion order: re-inserting on every use keeps the least recently used first.
  readonly #entries = new Map<string, Entry>();
  readonly stats: FitCacheStats = { hits: 0, warmFits: 0, coldFits: 0, evictions: 0 };

  constructor(options: FitCacheOptions = {}) {
    const max = options.maxEntries ?? DEFAULT_FIT_CACHE_ENTRIES;
    if (!(Number.isInteger(max) && max >= 1))
      throw new RangeError(`FitCache: maxEntries must be a whole number >= 1, got ${max}`);
    this.#maxEntries = max;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** fitRuntimeModel(samples, prior) for `owner`: the kept fit when its inputs are unchanged. */
  fit(owner: FitOwner, samples: readonly StepSample[], prior: readonly StepSample[] = []): ThroughputModel {
    const key = ownerKey(owner);
    const inputs = `${fingerprint(samples)}|${fingerprint(prior)}`;
    const kept = this.#entries.get(key);
    if (kept) this.#entries.delete(key);
    if (kept?.inputs === inputs) {
      this.#entries.set(key, kept);
      this.stats.hits++;
      return kept.model;
    }
    const { model, warmStart } = fitRuntimeModelFrom(samples, prior, kept?.warmStart);
    if (kept) this.stats.warmFits++;
    else this.stats.coldFits++;
    this.#entries.set(key, { inputs, model, warmStart });
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(oldest);
      this.stats.evictions++;
    }
    return model;
  }

  clear(): void {
    this.#entries.clear();
  }
}

/** fitRuntimeModel through `cache` when there is one. */
export function fitRuntimeModelCached(
  cache: FitCache | undefined,
  owner: FitOwner,
  samples: readonly StepSample[],
  prior: readonly StepSample[] = [],
): ThroughputModel {
  return cache ? cache.fit(owner, samples, prior) : fitRuntimeModelFrom(samples, prior).model;
}

function ownerKey({ ref, uid }: FitOwner): string {
  // JSON: no separator a name could contain makes two jobs one key.
  return uid ? JSON.stringify(['uid', uid]) : JSON.stringify(['ref', ref.kind, ref.namespace, ref.name]);
}

const bits = new Float64Array(1);
const words = new Uint32Array(bits.buffer);

/**
 * The identity of a list of samples: its length, its newest sample's time and two 32-bit hashes of every
 * field of every sample (so a value Prometheus revised under an unchanged timestamp is a change too). Two
 * different lists agree with probability about 2^-64.
 */
export function fingerprint(samples: readonly StepSample[]): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  let newest = Number.NEGATIVE_INFINITY;
  const mix = (v: number | undefined) => {
    // undefined and every number hash apart: NaN is never a valid sample value.
    bits[0] = v === undefined ? Number.NaN : v;
    const lo = words[0] ?? 0;
    const hi = words[1] ?? 0;
    h1 = Math.imul(Math.imul(h1 ^ lo, 0x01000193) ^ hi, 0x01000193);
    h2 = Math.imul(h2 ^ lo, 0x5bd1e995);
    h2 = Math.imul(h2 ^ (h2 >>> 15) ^ hi, 0x5bd1e995);
  };
  for (const s of samples) {
    mix(s.replicas);
    mix(s.nodes);
    mix(s.ps);
    mix(s.localBatchSize);
    mix(s.stepTime);
    mix(s.syncTime);
    mix(s.at);
    if (s.at !== undefined && s.at > newest) newest = s.at;
  }
  return `${samples.length}:${newest}:${(h1 >>> 0).toString(36)}:${(h2 >>> 0).toString(36)}`;
}
