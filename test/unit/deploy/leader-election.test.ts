import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaderElector } from '../../../lib/runner/leader-election.js';
import { MemoryLease } from './memory-lease.js';

function harness() {
  const lease = new MemoryLease();
  const clock = { now: 0 };
  const events: string[] = [];
  const elector = (identity: string) =>
    new LeaderElector({
      lock: lease,
      identity,
      clock: () => clock.now,
      wallClock: () => new Date(1_700_000_000_000 + clock.now),
      random: () => 0,
      onStartedLeading: () => {
        events.push(`${identity} started`);
      },
      onStoppedLeading: () => {
        events.push(`${identity} stopped`);
      },
    });
  return { lease, clock, events, elector };
}

describe('LeaderElector', () => {
  it('lets the first replica lead and keeps the second a follower while the leader renews', async () => {
    const { lease, clock, events, elector } = harness();
    const a = elector('a');
    const b = elector('b');
    await a.tick();
    await b.tick();
    assert.equal(a.isLeader(), true);
    assert.equal(b.isLeader(), false);
    assert.equal(lease.record?.holderIdentity, 'a');
    assert.equal(lease.record?.leaseDurationSeconds, 15);
    const acquired = lease.record?.acquireTime.getTime();
    for (let t = 5_000; t <= 60_000; t += 5_000) {
      clock.now = t;
      await a.tick();
      await b.tick();
      assert.equal(a.isLeader(), true, `a leads at ${t} ms`);
      assert.equal(b.isLeader(), false, `b follows at ${t} ms`);
    }
    assert.equal(lease.record?.acquireTime.getTime(), acquired, 'renewals keep the acquire time');
    assert.equal(lease.record?.renewTime.getTime(), 1_700_000_060_000);
    assert.deepEqual(events, ['a started']);
  });

  it('takes over a lease that stopped being renewed only leaseDuration after last seeing it change', async () => {
    const { lease, clock, elector } = harness();
    const a = elector('a');
    const b = elector('b');
    await a.tick();
    clock.now = 3_000;
    await b.tick(); // b first sees the lease at 3 s; a then dies without releasing
    clock.now = 17_999;
    await b.tick();
    assert.equal(b.isLeader(), false, 'not before 15 s after it was last seen to change');
    clock.now = 18_000;
    await b.tick();
    assert.equal(b.isLeader(), true);
    assert.equal(lease.record?.holderIdentity, 'b');
    assert.equal(lease.record?.leaseTransitions, 1);
  });

  it('stops counting itself leader renewDeadline after its last renewal, before anyone may take over', async () => {
    const { lease, clock, events, elector } = harness();
    const a = elector('a');
    await a.tick();
    lease.failReads = true;
    clock.now = 5_000;
    await a.tick();
    assert.equal(a.isLeader(), true, 'one failed renewal is tolerated');
    clock.now = 9_999;
    assert.equal(a.isLeader(), true);
    clock.now = 10_000;
    assert.equal(a.isLeader(), false, 'the fence drops at the deadline even before the next step');
    await a.tick();
    assert.deepEqual(events, ['a started', 'a stopped']);
  });

  it('steps down at once when it finds another holder on the lease', async () => {
    const { lease, clock, events, elector } = harness();
    const a = elector('a');
    await a.tick();
    if (!lease.record) throw new Error('no lease');
    await lease.update({ ...lease.record, holderIdentity: 'intruder' });
    clock.now = 5_000;
    await a.tick();
    assert.equal(a.isLeader(), false);
    assert.deepEqual(events, ['a started', 'a stopped']);
  });

  it('hands over at the next poll when the leader releases on stop', async () => {
    const { lease, clock, events, elector } = harness();
    const a = elector('a');
    const b = elector('b');
    await a.tick();
    await b.tick();
    await a.stop({ release: true });
    assert.equal(lease.record?.holderIdentity, '');
    clock.now = 5_000;
    await b.tick();
    assert.equal(b.isLeader(), true);
    assert.deepEqual(events, ['a started', 'a stopped', 'b started']);
  });

  it('lets exactly one of two replicas win a race for a free lease', async () => {
    for (let round = 0; round < 20; round++) {
      const { lease, elector } = harness();
      const a = elector('a');
      const b = elector('b');
      await Promise.all([a.tick(), b.tick()]);
      assert.equal(Number(a.isLeader()) + Number(b.isLeader()), 1);
      assert.equal(lease.record?.holderIdentity, a.isLeader() ? 'a' : 'b');
    }
  });

  it('never has two leaders when both poll concurrently over time', async () => {
    const { lease, clock, elector } = harness();
    const replicas = [elector('a'), elector('b'), elector('c')];
    for (let t = 0; t < 120_000; t += 1_000) {
      clock.now = t;
      // The current leader "crashes" (stops renewing) every 40 s.
      const stalled = Math.floor(t / 40_000);
      await Promise.all(
        replicas.filter((_, i) => i !== stalled % 3 || t % 40_000 < 1_000).map((r) => r.tick()),
      );
      assert.ok(replicas.filter((r) => r.isLeader()).length <= 1, `at most one leader at ${t} ms`);
    }
    assert.ok(lease.record?.holderIdentity);
  });

  it('dates a held GET by its answer: a follower never takes over while the old leader may still write', async () => {
    // The fault: the follower's GET is sent at 2 s and held on the way for 10 s; meanwhile the leader renews
    // at 10 s (it may write until 20 s) and then dies. Dated by the GET's sending (2 s), that renewal would
    // look expired at 17 s.
    const { lease, clock, elector } = harness();
    const a = elector('a');
    const b = elector('b');
    await a.tick();
    await b.tick();
    let answer: (() => void) | undefined;
    const heldGet = lease.get.bind(lease);
    lease.get = () => new Promise((resolve) => (answer = () => resolve(heldGet())));
    clock.now = 2_000;
    const held = b.tick();
    lease.get = heldGet;
    clock.now = 10_000;
    await a.tick(); // the renewal the held GET will show; a dies after it
    assert.equal(a.admit()?.remainingMs, 10_000, 'a may write until 20 s');
    clock.now = 12_000;
    answer?.();
    await held;
    for (const t of [17_000, 20_000, 26_999]) {
      clock.now = t;
      await b.tick();
      assert.equal(b.isLeader(), false, `b waits at ${t} ms`);
    }
    assert.equal(a.isLeader(), false, 'a stopped writing at 20 s');
    clock.now = 27_000;
    await b.tick();
    assert.equal(b.isLeader(), true, 'leaseDuration after the answer arrived');
  });

  it("dates the leader's renewal by when its update was sent, not by its GET nor by the answer", async () => {
    const { lease, clock, elector } = harness();
    const a = elector('a');
    await a.tick();
    const get = lease.get.bind(lease);
    const update = lease.update.bind(lease);
    // The GET takes 3 s, the update 2 s more: sent at 8 s, answered at 10 s.
    lease.get = async () => {
      const record = await get();
      clock.now += 3_000;
      return record;
    };
    lease.update = async (record) => {
      const written = await update(record);
      clock.now += 2_000;
      return written;
    };
    clock.now = 5_000;
    await a.tick();
    assert.equal(clock.now, 10_000);
    assert.equal(a.admit()?.remainingMs, 8_000, 'the deadline is 10 s after the update was sent at 8 s');
    clock.now = 17_999;
    assert.equal(a.isLeader(), true);
    clock.now = 18_000;
    assert.equal(a.isLeader(), false);
  });
});
