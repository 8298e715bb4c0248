import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedWorkQueue, namespaceLane } from '../../../lib/runner/work-queue.js';

function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('KeyedWorkQueue', () => {
  it('runs one task at a time in arrival order and coalesces a waiting key onto its latest task', async () => {
    const queue = new KeyedWorkQueue();
    const ran: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const first = gate();
    const task = (label: string, wait?: Promise<void>) => async () => {
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      await wait;
      ran.push(label);
      running -= 1;
    };
    queue.enqueue('a', task('a1', first.opened));
    queue.enqueue('b', task('b1'));
    queue.enqueue('c', task('c1'));
    queue.enqueue('b', task('b2')); // replaces b1, keeps b's place before c
    first.open();
    await queue.idle();
    assert.deepEqual(ran, ['a1', 'b2', 'c1']);
    assert.equal(maxRunning, 1);
  });

  it('bounds the waiting keys and reports what it drops', async () => {
    const dropped: string[] = [];
    const queue = new KeyedWorkQueue({ maxPending: 2, onDrop: (key) => dropped.push(key) });
    const block = gate();
    queue.enqueue('running', () => block.opened);
    await Promise.resolve();
    assert.equal(
      queue.enqueue('x', async () => {}),
      true,
    );
    assert.equal(
      queue.enqueue('y', async () => {}),
      true,
    );
    assert.equal(
      queue.enqueue('z', async () => {}),
      false,
    );
    assert.equal(
      queue.enqueue('x', async () => {}),
      true,
      'a waiting key still coalesces when full',
    );
    assert.deepEqual(dropped, ['z']);
    block.open();
    await queue.idle();
  });

  it('on close drops waiting work, refuses new work and waits for the task in flight', async () => {
    const queue = new KeyedWorkQueue();
    const ran: string[] = [];
    const block = gate();
    queue.enqueue('a', async () => {
      await block.opened;
      ran.push('a');
    });
    queue.enqueue('b', async () => {
      ran.push('b');
    });
    await Promise.resolve();
    const closed = queue.close();
    assert.equal(
      queue.enqueue('c', async () => {}),
      false,
    );
    let done = false;
    closed.then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'close waits for the task in flight');
    block.open();
    await closed;
    assert.deepEqual(ran, ['a']);
  });

  it('keeps going after a task throws', async () => {
    const errors: string[] = [];
    const queue = new KeyedWorkQueue({ onError: (key) => errors.push(key) });
    const ran: string[] = [];
    queue.enqueue('bad', async () => {
      throw new Error('boom');
    });
    queue.enqueue('good', async () => {
      ran.push('good');
    });
    await queue.idle();
    assert.deepEqual(errors, ['bad']);
    assert.deepEqual(ran, ['good']);
  });

  it("one namespace flooding thousands of keys delays the schedule and another tenant's fault by one task", async () => {
    // As the runner builds it (lib/runner/runner.ts).
    const dropped: string[] = [];
    const queue = new KeyedWorkQueue({
      laneOf: namespaceLane,
      maxPendingPerLane: 1_000,
      urgent: (key) => key === 'schedule',
      onDrop: (key) => dropped.push(key),
    });
    const ran: string[] = [];
    const run = (key: string) => queue.enqueue(key, async () => void ran.push(key));
    const block = gate();
    queue.enqueue('pods:PyTorchJob/flood/first', async () => {
      await block.opened;
      ran.push('pods:PyTorchJob/flood/first');
    });
    await Promise.resolve();
    // Pods naming 5,000 different owners (anyone who can create pods can name any owner).
    for (let i = 0; i < 5_000; i++) run(`pods:PyTorchJob/flood/job-${i}`);
    assert.equal(run('pods:PyTorchJob/team-b/faulty'), true, "another tenant's fault is taken");
    assert.equal(run('schedule'), true, 'the schedule is taken');
    assert.equal(
      run('pods:PyTorchJob/flood/job-0'),
      true,
      'a waiting key still coalesces when its lane is full',
    );
    assert.equal(queue.size, 1_002);
    assert.equal(dropped.length, 4_000, "the flood's keys beyond its lane's share");
    assert.ok(dropped.every((k) => k.startsWith('pods:PyTorchJob/flood/')));
    block.open();
    await queue.idle();
    assert.deepEqual(ran.slice(0, 4), [
      'pods:PyTorchJob/flood/first',
      'schedule',
      'pods:PyTorchJob/flood/job-0',
      'pods:PyTorchJob/team-b/faulty',
    ]);
    assert.equal(ran.length, 1_003);
  });

  it('namespaces take turns; the schedule is never dropped, however full the queue', async () => {
    const dropped: string[] = [];
    const queue = new KeyedWorkQueue({
      laneOf: namespaceLane,
      maxPending: 2,
      urgent: (key) => key === 'schedule',
      onDrop: (key) => dropped.push(key),
    });
    const ran: string[] = [];
    const block = gate();
    queue.enqueue('running', () => block.opened);
    await Promise.resolve();
    const run = (key: string) => queue.enqueue(key, async () => void ran.push(key));
    run('pods:PyTorchJob/a/1');
    run('pods:PyTorchJob/a/2');
    assert.equal(run('schedule'), true);
    assert.equal(
      run('submit:TFJob/b/1'),
      true,
      "a full queue makes room by pushing out the longest lane's newest",
    );
    assert.deepEqual(dropped, ['pods:PyTorchJob/a/2']);
    assert.equal(
      run('pods:PyTorchJob/c/1'),
      false,
      'lanes of one key each: nothing is longer, the new key goes',
    );
    assert.equal(run('pods:PyTorchJob/a/3'), false);
    assert.deepEqual(dropped, ['pods:PyTorchJob/a/2', 'pods:PyTorchJob/c/1', 'pods:PyTorchJob/a/3']);
    block.open();
    await queue.idle();
    assert.deepEqual(ran, ['schedule', 'pods:PyTorchJob/a/1', 'submit:TFJob/b/1']);
  });

  it('serves lanes round-robin, each lane first in first out', async () => {
    const queue = new KeyedWorkQueue({ laneOf: namespaceLane });
    const ran: string[] = [];
    const block = gate();
    queue.enqueue('running', () => block.opened);
    await Promise.resolve();
    for (const key of ['job:X/a/1', 'job:X/a/2', 'job:X/a/3', 'job:X/b/1', 'job:X/c/1', 'job:X/b/2'])
      queue.enqueue(key, async () => void ran.push(key));
    block.open();
    await queue.idle();
    assert.deepEqual(ran, ['job:X/a/1', 'job:X/b/1', 'job:X/c/1', 'job:X/a/2', 'job:X/b/2', 'job:X/a/3']);
  });

  it("reads a task key's namespace as its lane", () => {
    assert.equal(namespaceLane('pods:PyTorchJob/team-a/toy'), 'team-a');
    assert.equal(namespaceLane('submit:StatefulSet/team-b/db'), 'team-b');
    assert.equal(namespaceLane('job:Job/c/x'), 'c');
    assert.equal(namespaceLane('schedule'), '');
    assert.equal(namespaceLane('odd:a/b'), '');
  });
});
