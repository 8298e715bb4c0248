// Puts forwarded events on the EventBridge bus within PutEvents' limits (at most 10 entries and 256 KiB a
// request), retrying throttled calls and failed entries (FailedEntryCount) with bounded exponential backoff,
// and dropping, with a reason, what still fails after the last attempt or cannot be sent at all.

import type { PutEventsRequestEntry, PutEventsResponse } from '@aws-sdk/client-eventbridge';
import { EVENT_SOURCE, type Forward } from './classify.js';

export const MAX_ENTRIES_PER_PUT = 10;
export const MAX_PUT_BYTES = 256 * 1024;

export type DropReason = 'too-large' | 'queue-full' | 'retries-exhausted' | 'rejected' | 'shutdown';

export interface PublisherOptions {
  busName: string;
  /** PutEvents (the real client's `send(new PutEventsCommand(...))`). */
  putEvents: (entries: PutEventsRequestEntry[]) => Promise<PutEventsResponse>;
  onSent: (item: Forward) => void;
  onDropped: (item: Forward, reason: DropReason, detail: string) => void;
  onRetry?: (entries: number, cause: string) => void;
  /** Attempts per entry, the first included. */
  maxAttempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** How long the first event of a batch waits for others. */
  lingerMs?: number;
  /** Events waiting to be put; beyond that new ones are dropped (queue-full). */
  maxQueued?: number;
  sleep?: (ms: number) => Promise<void>;
}

/** The size EventBridge counts for an entry (AWS "Calculating PutEvents event entry size"). */
export function entrySize(entry: PutEventsRequestEntry): number {
  const bytes = (s: string | undefined) => (s ? Buffer.byteLength(s, 'utf8') : 0);
  let size = entry.Time ? 14 : 0;
  size += bytes(entry.Source) + bytes(entry.DetailType) + bytes(entry.Detail);
  for (const resource of entry.Resources ?? []) size += bytes(resource);
  return size;
}

/** Consecutive batches of at most 10 entries and 256 KiB, in order. Each entry must fit on its own. */
export function batches<T>(items: readonly T[], sizeOf: (item: T) => number): T[][] {
  const result: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (current.length === MAX_ENTRIES_PER_PUT || (current.length > 0 && bytes + size > MAX_PUT_BYTES)) {
      result.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) result.push(current);
  return result;
}

const RETRYABLE_ENTRY_CODES = new Set(['ThrottlingException', 'InternalFailure', 'InternalException']);
const RETRYABLE_ERRORS = new Set([
  'ThrottlingException',
  'InternalException',
  'InternalFailure',
  'ServiceUnavailableException',
  'TimeoutError',
  'RequestTimeout',
]);

/** Throttling, 5xx and network failures are worth another try; a 4xx (denied, invalid) is not. */
export function retryableError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const name = 'name' in error ? String(error.name) : '';
  if (RETRYABLE_ERRORS.has(name)) return true;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (status === undefined) return 'code' in error || name === 'Error'; // no response: the network failed
  return status === 429 || status >= 500;
}

interface Pending {
  item: Forward;
  entry: PutEventsRequestEntry;
  size: number;
}

export class Publisher {
  private readonly queue: Pending[] = [];
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly lingerMs: number;
  private readonly maxQueued: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(private readonly options: PublisherOptions) {
    this.maxAttempts = options.maxAttempts ?? 5;
    this.baseDelayMs = options.baseDelayMs ?? 200;
    this.maxDelayMs = options.maxDelayMs ?? 5_000;
    this.lingerMs = options.lingerMs ?? 100;
    this.maxQueued = options.maxQueued ?? 10_000;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Queues one event; false when it was dropped instead (too large, queue full, stopping). */
  enqueue(item: Forward): boolean {
    const entry: PutEventsRequestEntry = {
      EventBusName: this.options.busName,
      Source: EVENT_SOURCE,
      DetailType: item.detailType,
      Detail: JSON.stringify(item.detail),
    };
    const size = entrySize(entry);
    if (this.stopping) return this.drop(item, 'shutdown', 'forwarder stopping');
    if (size > MAX_PUT_BYTES) return this.drop(item, 'too-large', `${size} bytes > ${MAX_PUT_BYTES}`);
    if (this.queue.length >= this.maxQueued) return this.drop(item, 'queue-full', `${this.maxQueued} queued`);
    this.queue.push({ item, entry, size });
    this.schedule();
    return true;
  }

  /** Puts what is queued (bounded by the retries), then resolves; later events are dropped. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.queue.length > 0 && !this.running) this.running = this.pump();
    await this.running;
  }

  /** Resolves when the queue is empty and nothing is being put (tests, shutdown). */
  async idle(): Promise<void> {
    for (let i = 0; i < 10_000 && (this.running || this.timer || this.queue.length > 0); i++) {
      await (this.running ?? new Promise((resolve) => setTimeout(resolve, 5)));
    }
  }

  private drop(item: Forward, reason: DropReason, detail: string): false {
    this.options.onDropped(item, reason, detail);
    return false;
  }

  private schedule(): void {
    if (this.running || this.timer) return;
    const start = () => {
      this.timer = undefined;
      this.running = this.pump().finally(() => {
        this.running = undefined;
        if (this.queue.length > 0) this.schedule();
      });
    };
    if (this.queue.length >= MAX_ENTRIES_PER_PUT) start();
    else this.timer = setTimeout(start, this.lingerMs);
  }

  private async pump(): Promise<void> {
    while (this.queue.length > 0) {
      const [batch] = batches(this.queue.slice(0, MAX_ENTRIES_PER_PUT), (p) => p.size);
      if (!batch) return;
      this.queue.splice(0, batch.length);
      await this.putWithRetries(batch);
    }
  }

  private backoff(attempt: number): number {
    const cap = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
    return cap / 2 + Math.random() * (cap / 2);
  }

  private async putWithRetries(batch: Pending[]): Promise<void> {
    let pending = batch;
    for (let attempt = 1; pending.length > 0; attempt++) {
      const last = attempt >= this.maxAttempts;
      let response: PutEventsResponse;
      try {
        response = await this.options.putEvents(pending.map((p) => p.entry));
      } catch (error) {
        const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        if (last || !retryableError(error)) {
          for (const p of pending) this.drop(p.item, last ? 'retries-exhausted' : 'rejected', detail);
          return;
        }
        this.options.onRetry?.(pending.length, detail);
        await this.sleep(this.backoff(attempt));
        continue;
      }
      const results = response.Entries ?? [];
      const retry: Pending[] = [];
      pending.forEach((p, i) => {
        const result = results[i];
        if (result?.EventId && !result.ErrorCode) {
          this.options.onSent(p.item);
          return;
        }
        const code = result?.ErrorCode ?? 'NoResult';
        const detail = `${code}: ${result?.ErrorMessage ?? 'no entry result'}`;
        if (!RETRYABLE_ENTRY_CODES.has(code) && code !== 'NoResult') this.drop(p.item, 'rejected', detail);
        else if (last) this.drop(p.item, 'retries-exhausted', detail);
        else retry.push(p);
      });
      if (retry.length > 0) {
        this.options.onRetry?.(retry.length, `FailedEntryCount ${response.FailedEntryCount ?? retry.length}`);
        await this.sleep(this.backoff(attempt));
      }
      pending = retry;
    }
  }
}
