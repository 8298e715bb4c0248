import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedWorkQueue } from '../../../lib/runner/work-queue.js';

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
});
