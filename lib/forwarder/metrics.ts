// What `trainscaler forward` exposes on /metrics, and the counts behind its one-line summary each minute.

import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { ForwardReason } from './classify.js';
import type { DropReason } from './publisher.js';

export class ForwarderMetrics {
  readonly registry = new Registry();
  readonly forwarded: Counter<'reason'>;
  readonly dropped: Counter<'reason'>;
  readonly retried: Counter;
  readonly queued: Gauge;
  readonly ledgerEntries: Gauge;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.forwarded = new Counter({
      name: 'trainscaler_forwarder_events_forwarded_total',
      help: 'Events accepted by PutEvents, by what they report (OOMKilled, Evicted, JobSubmitted, ...)',
      labelNames: ['reason'],
      registers,
    });
    this.dropped = new Counter({
      name: 'trainscaler_forwarder_events_dropped_total',
      help: 'Events that were not put on the bus, by why (retries-exhausted, rejected, too-large, queue-full, shutdown)',
      labelNames: ['reason'],
      registers,
    });
    this.retried = new Counter({
      name: 'trainscaler_forwarder_put_retries_total',
      help: 'Entries sent again after throttling or a failed entry',
      registers,
    });
    this.queued = new Gauge({
      name: 'trainscaler_forwarder_queue_depth',
      help: 'Events waiting for PutEvents',
      registers,
    });
    this.ledgerEntries = new Gauge({
      name: 'trainscaler_forwarder_ledger_entries',
      help: 'Objects whose last forwarded fact is remembered across restarts',
      registers,
    });
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }
}

/** Counts since the last summary line. */
export class MinuteTally {
  private forwarded = new Map<ForwardReason, number>();
  private dropped = new Map<DropReason, number>();
  private retried = 0;

  sent(reason: ForwardReason): void {
    this.forwarded.set(reason, (this.forwarded.get(reason) ?? 0) + 1);
  }

  drop(reason: DropReason): void {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + 1);
  }

  retry(entries: number): void {
    this.retried += entries;
  }

  /** e.g. "forwarded 3 (OOMKilled 1, JobSubmitted 2), dropped 0, retried 0 in the last 60 s"; then resets. */
  summary(seconds: number): string {
    const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const detail = (m: Map<string, number>) =>
      m.size === 0
        ? ''
        : ` (${[...m.entries()]
            .sort()
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`;
    const line = `forwarded ${total(this.forwarded)}${detail(this.forwarded)}, dropped ${total(this.dropped)}${detail(this.dropped)}, retried ${this.retried} in the last ${seconds} s`;
    this.forwarded = new Map();
    this.dropped = new Map();
    this.retried = 0;
    return line;
  }
}
