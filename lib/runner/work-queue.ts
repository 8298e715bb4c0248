// The runner's single worker: tasks run one at a time, in arrival order, so two handlers never race on the
// same job from this replica. Work is keyed: a task for a key that is already waiting replaces the waiting
// one (a burst of pod updates of one job becomes one review of that job, which re-reads current state
// anyway). The number of waiting keys is bounded; beyond it new keys are dropped and counted.

export interface WorkQueueOptions {
  maxPending?: number;
  onDrop?: (key: string) => void;
  /** Tasks are expected to handle their own errors; anything escaping lands here. */
  onError?: (key: string, error: unknown) => void;
}

export class KeyedWorkQueue {
  private readonly pending = new Map<string, () => Promise<void>>();
  private readonly maxPending: number;
  private running: Promise<void> | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: WorkQueueOptions = {}) {
    this.maxPending = options.maxPending ?? 10_000;
  }

  get size(): number {
    return this.pending.size;
  }

  /** False when the task was dropped (queue closed, or full and the key not already waiting). */
  enqueue(key: string, task: () => Promise<void>): boolean {
    if (this.closed) return false;
    if (!this.pending.has(key) && this.pending.size >= this.maxPending) {
      this.options.onDrop?.(key);
      return false;
    }
    this.pending.set(key, task);
    if (!this.running) this.running = this.pump();
    return true;
  }

  /** Resolves once nothing is waiting or running. */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Drops what is waiting, refuses new work, and resolves when the task in flight has finished. */
  async close(): Promise<void> {
    this.closed = true;
    this.pending.clear();
    await this.running;
  }

  private async pump(): Promise<void> {
    for (;;) {
      const next = this.pending.entries().next();
      if (next.done) break;
      const [key, task] = next.value;
      this.pending.delete(key);
      try {
        await task();
      } catch (error) {
        this.options.onError?.(key, error);
      }
    }
    this.running = undefined;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
