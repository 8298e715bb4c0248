// The publisher against a scripted PutEvents (answers chosen per call): the real API's limits and failure
// shapes, which the emulator in test/aws cannot be made to produce (throttling, partial failures).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PutEventsRequestEntry, PutEventsResponse } from '@aws-sdk/client-eventbridge';
import { DETAIL_TYPE, type Forward } from '../../../lib/forwarder/classify.js';
import {
  batches,
  type DropReason,
  entrySize,
  MAX_PUT_BYTES,
  Publisher,
  retryableError,
} from '../../../lib/forwarder/publisher.js';

function item(n: number, padding = 0): Forward {
  return {
    detailType: DETAIL_TYPE.watchEvent,
    reason: 'OOMKilled',
    uid: `uid-${n}`,
    fingerprint: 'OOMKilled/pytorch/1',
    subject: `Pod/ml/p-${n}`,
    detail: {
      type: 'MODIFIED',
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `p-${n}`,
          namespace: 'ml',
          uid: `uid-${n}`,
          annotations: { pad: 'x'.repeat(padding) },
        },
      },
    },
  };
}

type Answer = (entries: PutEventsRequestEntry[]) => PutEventsResponse | Error;
const ok: Answer = (entries) => ({
  FailedEntryCount: 0,
  Entries: entries.map((_, i) => ({ EventId: `e${i}` })),
});

function harness(answers: Answer[], options: { maxAttempts?: number; maxQueued?: number } = {}) {
  const calls: PutEventsRequestEntry[][] = [];
  const sent: string[] = [];
  const dropped: Array<[string, DropReason]> = [];
  const sleeps: number[] = [];
  let retried = 0;
  const publisher = new Publisher({
    busName: 'trainscaler',
    putEvents: async (entries) => {
      calls.push(entries);
      const answer = (answers[calls.length - 1] ?? ok)(entries);
      if (answer instanceof Error) throw answer;
      return answer;
    },
    onSent: (i) => sent.push(i.uid),
    onDropped: (i, reason) => dropped.push([i.uid, reason]),
    onRetry: (n) => {
      retried += n;
    },
    lingerMs: 1,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...options,
  });
  return { publisher, calls, sent, dropped, sleeps, retried: () => retried };
}

function awsError(name: string, httpStatusCode?: number): Error {
  const error = new Error(name);
  error.name = name;
  Object.assign(error, { $metadata: httpStatusCode === undefined ? {} : { httpStatusCode } });
  return error;
}

describe('forwarder publisher', () => {
  it('counts entry size as EventBridge does (UTF-8 bytes of source, detail-type, detail, resources, time)', () => {
    const entry = { Source: 'ab', DetailType: 'cd', Detail: '{"é":1}', Resources: ['r'] };
    assert.equal(entrySize(entry), 2 + 2 + 8 + 1);
    assert.equal(entrySize({ ...entry, Time: new Date() }), 2 + 2 + 8 + 1 + 14);
  });

  it('splits into batches of at most 10 entries and 256 KiB, in order', () => {
    const sizes = batches(
      Array.from({ length: 23 }, (_, i) => i),
      () => 1,
    ).map((b) => b.length);
    assert.deepEqual(sizes, [10, 10, 3]);
    const big = batches([100_000, 100_000, 62_144, 1, 5], (s) => s).map((b) => b.length);
    assert.deepEqual(big, [3, 2]); // 262144 bytes exactly fit; the next byte does not
    assert.deepEqual(
      batches([MAX_PUT_BYTES, 1], (s) => s).map((b) => b.length),
      [1, 1],
    );
  });

  it('puts 25 events in 3 calls of at most 10 entries with the envelope the rules match', async () => {
    const h = harness([]);
    for (let i = 0; i < 25; i++) h.publisher.enqueue(item(i));
    await h.publisher.idle();
    assert.deepEqual(
      h.calls.map((c) => c.length),
      [10, 10, 5],
    );
    assert.equal(h.sent.length, 25);
    const first = h.calls[0]?.[0];
    assert.equal(first?.Source, 'trainscaler.kubernetes');
    assert.equal(first?.DetailType, 'Kubernetes Watch Event');
    assert.equal(first?.EventBusName, 'trainscaler');
    assert.deepEqual(JSON.parse(first?.Detail ?? ''), item(0).detail);
  });

  it('keeps each call within 256 KiB', async () => {
    const h = harness([]);
    for (let i = 0; i < 6; i++) h.publisher.enqueue(item(i, 100_000));
    await h.publisher.idle();
    for (const call of h.calls) assert.ok(call.reduce((s, e) => s + entrySize(e), 0) <= MAX_PUT_BYTES);
    assert.deepEqual(
      h.calls.map((c) => c.length),
      [2, 2, 2],
    );
  });

  it('drops an event larger than a request can carry, and says so', () => {
    const h = harness([]);
    assert.equal(h.publisher.enqueue(item(1, MAX_PUT_BYTES)), false);
    assert.deepEqual(h.dropped, [['uid-1', 'too-large']]);
  });

  it('retries only the failed entries of a partial failure, with backoff', async () => {
    const partial: Answer = (entries) => ({
      FailedEntryCount: 1,
      Entries: entries.map((_, i) =>
        i === 1 ? { ErrorCode: 'ThrottlingException', ErrorMessage: 'slow down' } : { EventId: `e${i}` },
      ),
    });
    const h = harness([partial]);
    for (let i = 0; i < 3; i++) h.publisher.enqueue(item(i));
    await h.publisher.idle();
    assert.deepEqual(
      h.calls.map((c) => c.length),
      [3, 1],
    );
    assert.equal(JSON.parse(h.calls[1]?.[0]?.Detail ?? '').object.metadata.uid, 'uid-1');
    assert.deepEqual(h.sent.sort(), ['uid-0', 'uid-1', 'uid-2']);
    assert.equal(h.sleeps.length, 1);
    assert.equal(h.retried(), 1);
  });

  it('retries a throttled call with growing, capped delays, then drops after the last attempt', async () => {
    const throttled: Answer = () => awsError('ThrottlingException', 400);
    const h = harness(Array(10).fill(throttled), { maxAttempts: 4 });
    h.publisher.enqueue(item(1));
    await h.publisher.idle();
    assert.equal(h.calls.length, 4);
    assert.deepEqual(h.dropped, [['uid-1', 'retries-exhausted']]);
    assert.equal(h.sleeps.length, 3);
    assert.ok(h.sleeps.every((ms, i) => ms <= 200 * 2 ** i && ms >= (200 * 2 ** i) / 2));
  });

  it('drops at once what the API rejects (denied, malformed) instead of retrying', async () => {
    const denied: Answer = () => awsError('AccessDeniedException', 400);
    const h = harness([denied]);
    h.publisher.enqueue(item(1));
    await h.publisher.idle();
    assert.equal(h.calls.length, 1);
    assert.deepEqual(h.dropped, [['uid-1', 'rejected']]);

    const malformed: Answer = () => ({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'MalformedDetail' }] });
    const m = harness([malformed]);
    m.publisher.enqueue(item(2));
    await m.publisher.idle();
    assert.equal(m.calls.length, 1);
    assert.deepEqual(m.dropped, [['uid-2', 'rejected']]);
  });

  it('drops new events when the queue is full', () => {
    const h = harness([], { maxQueued: 2 });
    h.publisher.enqueue(item(1));
    h.publisher.enqueue(item(2));
    assert.equal(h.publisher.enqueue(item(3)), false);
    assert.deepEqual(h.dropped, [['uid-3', 'queue-full']]);
  });

  it('tells retryable failures (throttling, 5xx, network) from final ones', () => {
    assert.equal(retryableError(awsError('ThrottlingException', 400)), true);
    assert.equal(retryableError(awsError('InternalException', 500)), true);
    assert.equal(retryableError(awsError('Whatever', 503)), true);
    assert.equal(retryableError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })), true);
    assert.equal(retryableError(awsError('AccessDeniedException', 400)), false);
    assert.equal(retryableError(awsError('ValidationException', 400)), false);
  });

  it('puts what is queued before stop resolves, and drops what comes after', async () => {
    const h = harness([]);
    h.publisher.enqueue(item(1));
    await h.publisher.stop();
    assert.deepEqual(h.sent, ['uid-1']);
    assert.equal(h.publisher.enqueue(item(2)), false);
    assert.deepEqual(h.dropped, [['uid-2', 'shutdown']]);
  });
});
