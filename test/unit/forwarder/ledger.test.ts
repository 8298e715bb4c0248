import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Ledger } from '../../../lib/forwarder/ledger.js';
import { MinuteTally } from '../../../lib/forwarder/metrics.js';

describe('forwarder ledger', () => {
  it('blocks a queued fact before it is acknowledged, and saves only acknowledged ones', () => {
    const ledger = new Ledger();
    ledger.queued('a', 'Failed');
    assert.equal(ledger.lastForwarded('a'), 'Failed');
    assert.equal(ledger.takeChanges(), undefined);
    ledger.acknowledge('a', 'Failed');
    assert.deepEqual(ledger.takeChanges(), { a: 'Failed' });
    assert.equal(ledger.takeChanges(), undefined);
  });

  it('lets a dropped fact be forwarded again', () => {
    const ledger = new Ledger();
    ledger.queued('a', 'Failed');
    ledger.dropped('a', 'Failed');
    assert.equal(ledger.lastForwarded('a'), undefined);
  });

  it('survives a restart through what it saved', () => {
    const first = new Ledger();
    first.acknowledge('a', 'OOMKilled/pytorch/1');
    const saved = first.takeChanges() ?? {};
    const second = new Ledger();
    second.restore(saved);
    assert.equal(second.lastForwarded('a'), 'OOMKilled/pytorch/1');
  });

  it('forgets deleted objects and, after the first list, objects no longer in the cluster', () => {
    const ledger = new Ledger();
    ledger.restore({ a: 'Failed', b: 'Failed', c: 'Submitted' });
    ledger.forget('a');
    ledger.retainOnly(new Set(['b']));
    assert.deepEqual(ledger.takeChanges(), { b: 'Failed' });
  });

  it('keeps the newest entries within its bound', () => {
    const ledger = new Ledger(2);
    for (const uid of ['a', 'b', 'c']) ledger.acknowledge(uid, 'Failed');
    ledger.acknowledge('a', 'Evicted');
    assert.deepEqual(ledger.takeChanges(), { c: 'Failed', a: 'Evicted' });
  });
});

describe('forwarder summary line', () => {
  it('says what was forwarded, dropped and retried, then starts over', () => {
    const tally = new MinuteTally();
    tally.sent('OOMKilled');
    tally.sent('JobSubmitted');
    tally.sent('JobSubmitted');
    tally.drop('retries-exhausted');
    tally.retry(3);
    assert.equal(
      tally.summary(60),
      'forwarded 3 (JobSubmitted 2, OOMKilled 1), dropped 1 (retries-exhausted 1), retried 3 in the last 60 s',
    );
    assert.equal(tally.summary(60), 'forwarded 0, dropped 0, retried 0 in the last 60 s');
  });
});
