// The event forwarder: the runner's informers (every supported job kind, pods), the classifier,
// the ledger of what was already forwarded, and the publisher that puts events on the EventBridge bus.

import type { PutEventsRequestEntry, PutEventsResponse } from '@aws-sdk/client-eventbridge';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ActuatorLogger as Logger } from '../actuator.js';
import type { InformerEvent } from '../runner/event-router.js';
import { type InformerSet, startInformers } from '../runner/informers.js';
import { classify, DEFAULT_GRACE_MS, type Forward } from './classify.js';
import { Ledger, type LedgerStore } from './ledger.js';
import { ForwarderMetrics, MinuteTally } from './metrics.js';
import { Publisher, type PublisherOptions } from './publisher.js';

export interface ForwarderOptions {
  kubeConfig: KubeConfig;
  busName: string;
  putEvents: (entries: PutEventsRequestEntry[]) => Promise<PutEventsResponse>;
  ledgerStore: LedgerStore;
  logger: Logger;
  metrics?: ForwarderMetrics;
  statefulSetSelector?: string;
  graceMs?: number;
  /** Epoch milliseconds. */
  now?: () => number;
  /** How often the ledger is saved when it changed. */
  ledgerFlushMs?: number;
  /** How often the one-line summary is logged. */
  summaryIntervalMs?: number;
  publisher?: Partial<Omit<PublisherOptions, 'busName' | 'putEvents' | 'onSent' | 'onDropped' | 'onRetry'>>;
}

export interface Forwarder {
  /** Resolves when every informer has completed its first list and the ledger was pruned to live objects. */
  readonly synced: Promise<void>;
  readonly metrics: ForwarderMetrics;
  readonly ledger: Ledger;
  /** Resolves when nothing is queued or being put. */
  idle(): Promise<void>;
  /** Saves the ledger now (when it changed). */
  flushLedger(): Promise<void>;
  stop(): Promise<void>;
}

export async function startForwarder(options: ForwarderOptions): Promise<Forwarder> {
  const { logger } = options;
  const metrics = options.metrics ?? new ForwarderMetrics();
  const now = options.now ?? Date.now;
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
  const ledger = new Ledger();
  try {
    ledger.restore(await options.ledgerStore.load());
  } catch (error) {
    // Without it, the first list still re-sends only facts younger than the grace period.
    logger.warn({ error: String(error) }, 'forwarder ledger could not be read; starting without it');
  }
  metrics.ledgerEntries.set(ledger.size);
  const tally = new MinuteTally();

  const publisher = new Publisher({
    ...options.publisher,
    busName: options.busName,
    putEvents: options.putEvents,
    onSent: (item) => {
      ledger.acknowledge(item.uid, item.fingerprint);
      metrics.forwarded.inc({ reason: item.reason });
      tally.sent(item.reason);
      logger.info({ subject: item.subject, reason: item.reason, detailType: item.detailType }, 'forwarded');
    },
    onDropped: (item, reason, detail) => {
      ledger.dropped(item.uid, item.fingerprint);
      metrics.dropped.inc({ reason });
      tally.drop(reason);
      logger.error({ subject: item.subject, reason: item.reason, dropped: reason, detail }, 'event dropped');
    },
    onRetry: (entries, cause) => {
      metrics.retried.inc(entries);
      tally.retry(entries);
      logger.warn({ entries, cause }, 'PutEvents retry');
    },
  });

  const live = new Set<string>();
  // With a StatefulSet selector, pods of the other StatefulSets (databases, ...) are not trainscaler's.
  let informers: InformerSet | undefined;
  const ownerWatched = options.statefulSetSelector
    ? (kind: string, namespace: string, name: string) =>
        kind !== 'StatefulSet' || (informers?.has(kind, namespace, name) ?? false)
    : undefined;
  const onEvent = (event: InformerEvent) => {
    const uid = event.object.metadata.uid;
    if (uid) {
      if (event.type === 'DELETED') {
        live.delete(uid);
        ledger.forget(uid);
      } else live.add(uid);
    }
    const forward: Forward | undefined = classify(event, {
      lastForwarded: uid ? ledger.lastForwarded(uid) : undefined,
      now: now(),
      graceMs,
      ...(ownerWatched ? { ownerWatched } : {}),
    });
    if (!forward) return;
    ledger.queued(forward.uid, forward.fingerprint);
    publisher.enqueue(forward);
    metrics.queued.set(publisher.queued);
  };

  informers = startInformers(options.kubeConfig, {
    onEvent,
    logger,
    ...(options.statefulSetSelector ? { statefulSetSelector: options.statefulSetSelector } : {}),
  });

  let saving: Promise<void> = Promise.resolve();
  const flushLedger = () => {
    saving = saving.then(async () => {
      const changes = ledger.takeChanges();
      metrics.ledgerEntries.set(ledger.size);
      if (!changes) return;
      try {
        await options.ledgerStore.save(changes);
      } catch (error) {
        ledger.markDirty();
        logger.warn({ error: String(error) }, 'forwarder ledger could not be saved; retrying later');
      }
    });
    return saving;
  };

  const started = informers;
  const synced = started.synced.then(() => {
    ledger.retainOnly(live);
    return flushLedger();
  });
  const flushTimer = setInterval(() => void flushLedger(), options.ledgerFlushMs ?? 5_000);
  const summaryMs = options.summaryIntervalMs ?? 60_000;
  const summaryTimer = setInterval(() => {
    metrics.queued.set(publisher.queued);
    logger.info(
      { queued: publisher.queued, ledgerEntries: ledger.size },
      tally.summary(Math.round(summaryMs / 1000)),
    );
  }, summaryMs);
  flushTimer.unref();
  summaryTimer.unref();

  return {
    synced,
    metrics,
    ledger,
    idle: () => publisher.idle(),
    flushLedger,
    async stop() {
      clearInterval(flushTimer);
      clearInterval(summaryTimer);
      await started.stop();
      await publisher.stop();
      await flushLedger();
      logger.info({ ledgerEntries: ledger.size }, tally.summary(Math.round(summaryMs / 1000)));
    },
  };
}
