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
});
