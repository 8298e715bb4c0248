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

describe('LeaderElector: what it says and when it campaigns', () => {
  function logged() {
    const lines: string[] = [];
    const at = (level: string) => (obj: object, msg?: string) =>
      lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
    return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error') } };
  }

  it('refuses a renew deadline not shorter than the lease', () => {
    const lock = new MemoryLease();
    for (const renewDeadlineMs of [15_000, 20_000])
      assert.throws(
        () =>
          new LeaderElector({ lock, identity: 'a', timing: { leaseDurationMs: 15_000, renewDeadlineMs } }),
        /^Error: renewDeadline must be shorter than leaseDuration, or two leaders could overlap$/,
      );
    assert.ok(new LeaderElector({ lock, identity: 'a', timing: { renewDeadlineMs: 14_999 } }));
  });

  it('logs each step of a term, and returns the delay before the next step', async () => {
    const lease = new MemoryLease();
    const clock = { now: 0 };
    const { lines, logger } = logged();
    const a = new LeaderElector({
      lock: lease,
      identity: 'a',
      clock: () => clock.now,
      wallClock: () => new Date(clock.now),
      random: () => 0.5,
      logger,
      onStartedLeading: () => {
        throw new Error('start hook broke');
      },
    });
    assert.equal(a.currentHolder(), '');
    assert.equal(await a.tick(), 5_000, 'a leader renews every retry period');
    assert.equal(a.currentHolder(), 'a');
    assert.deepEqual(lines, [
      'info became leader {"lease":"lease test/trainscaler-leader","identity":"a"}',
      'error onStartedLeading failed {"error":"Error: start hook broke"}',
    ]);
    lines.length = 0;
    lease.failReads = true;
    clock.now = 5_000;
    assert.equal(await a.tick(), 1_000, 'a failed renewal is retried sooner');
    assert.deepEqual(lines, [
      'warn cannot read lease {"lease":"lease test/trainscaler-leader","error":"Error: connection refused"}',
    ]);
    lease.failReads = false;
    lines.length = 0;
    const update = lease.update.bind(lease);
    lease.update = async () => {
      throw new Error('etcd unavailable');
    };
    clock.now = 6_000;
    assert.equal(await a.tick(), 1_000);
    assert.deepEqual(lines, [
      'warn cannot update lease {"lease":"lease test/trainscaler-leader","error":"Error: etcd unavailable"}',
    ]);
    lines.length = 0;
    lease.update = update;
    if (!lease.record) throw new Error('no lease');
    await lease.update({ ...lease.record, holderIdentity: 'b' });
    clock.now = 7_000;
    assert.equal(await a.tick(), 5_500, 'a follower polls with jitter');
    assert.deepEqual(lines, [
      'warn lost leadership {"lease":"lease test/trainscaler-leader","identity":"a","holder":"b"}',
    ]);
    assert.equal(a.currentHolder(), 'b');
    lines.length = 0;
    clock.now = 8_000;
    assert.equal(await a.tick(), 5_500);
    assert.deepEqual(lines, [], 'a conflict or a held lease is routine: nothing logged');
  });

  it('a leader that cannot renew steps down at the deadline, even with no other holder seen', async () => {
    const lease = new MemoryLease();
    const clock = { now: 0 };
    const events: string[] = [];
    const a = new LeaderElector({
      lock: lease,
      identity: 'a',
      clock: () => clock.now,
      random: () => 0,
      onStoppedLeading: () => {
        events.push('stopped');
      },
    });
    await a.tick();
    lease.failReads = true;
    clock.now = 9_999;
    assert.equal(await a.tick(), 1_000);
    assert.deepEqual(events, []);
    clock.now = 10_000;
    assert.equal(await a.tick(), 5_000);
    assert.deepEqual(events, ['stopped']);
  });

  it('keeps the resourceVersion it read on an update, and releases only a lease it holds', async () => {
    const lease = new MemoryLease();
    const clock = { now: 0 };
    const { lines, logger } = logged();
    const a = new LeaderElector({ lock: lease, identity: 'a', clock: () => clock.now, logger });
    await a.tick();
    clock.now = 5_000;
    await a.tick();
    assert.equal(lease.record?.resourceVersion, '2', 'renewed over the version it read');
    await a.stop({ release: false });
    assert.equal(lease.record?.holderIdentity, 'a', 'not released when asked not to');
    const b = new LeaderElector({ lock: lease, identity: 'b', clock: () => clock.now, logger });
    clock.now = 30_000;
    await b.tick();
    clock.now = 45_000;
    await b.tick();
    assert.equal(b.isLeader(), true);
    lines.length = 0;
    const reads = lease.get.bind(lease);
    lease.get = async () => {
      throw new Error('gone');
    };
    await b.stop();
    assert.deepEqual(lines, [
      'warn cannot release lease {"lease":"lease test/trainscaler-leader","error":"Error: gone"}',
    ]);
    lease.get = reads;
  });

  it('campaigns on its own timers once started, and stops and releases on stop()', async () => {
    const lease = new MemoryLease();
    const { lines, logger } = logged();
    const events: string[] = [];
    let failWall = true;
    const a = new LeaderElector({
      lock: lease,
      identity: 'a',
      logger,
      timing: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 20 },
      wallClock: () => {
        if (failWall) {
          failWall = false;
          throw new Error('clock broke');
        }
        return new Date();
      },
      onStartedLeading: () => {
        events.push('started');
      },
      onStoppedLeading: () => {
        events.push('stopped');
      },
    });
    a.start();
    a.start(); // a second start is a no-op
    const until = Date.now() + 3_000;
    while (!a.isLeader() && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    assert.equal(a.isLeader(), true, 'performance.now() is the default clock');
    const lease1 = a.admit();
    assert.ok(lease1 && lease1.remainingMs > 0 && lease1.remainingMs <= 2_000);
    await a.stop();
    assert.equal(a.isLeader(), false);
    assert.equal(lease.record?.holderIdentity, '');
    assert.equal(lease.record?.leaseDurationSeconds, 1);
    assert.deepEqual(events, ['started', 'stopped']);
    assert.ok(lines.includes('error leader election step failed {"error":"Error: clock broke"}'));
    assert.ok(
      lines.includes('info released leadership {"lease":"lease test/trainscaler-leader","identity":"a"}'),
    );
    assert.equal(lease1.signal.aborted, true);
  });
});
