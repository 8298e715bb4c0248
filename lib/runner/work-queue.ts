// The runner's single worker: tasks run one at a time, so two handlers never race on the same job from this
// replica. Work is keyed: a task for a key that is already waiting replaces the waiting one (a burst of pod
// updates of one job becomes one review of that job, which re-reads current state anyway).
//
// Keys wait in lanes (the runner's lanes are namespaces) taken in turn, one task per lane per round, so a
// namespace that churns thousands of keys delays another namespace's fault by one task per busy lane, not by
// its whole backlog. Urgent keys (the schedule tick) wait in a lane of their own that runs first and is never
// dropped. The waiting keys are bounded, per lane and in all: a key is dropped (and counted) when its own
// lane is full, and when the queue is full a new key pushes out the newest key of the longest lane, unless its
// own lane is that long already: one lane's flood never keeps another lane's first keys out.

export interface WorkQueueOptions {
  /** Waiting keys in all (urgent ones aside). */
  maxPending?: number;
  /** Waiting keys of one lane; maxPending by default. */
  maxPendingPerLane?: number;
  /** The lane of a key; one lane for all (first in, first out) by default. */
  laneOf?: (key: string) => string;
  /** Keys that run before any other and are never dropped; keep them few (they are not bounded). */
  urgent?: (key: string) => boolean;
  onDrop?: (key: string) => void;
  /** Tasks are expected to handle their own errors; anything escaping lands here. */
  onError?: (key: string, error: unknown) => void;
}

type Task = () => Promise<void>;

export class KeyedWorkQueue {
  private readonly urgentTasks = new Map<string, Task>();
  /** Lanes in the order they are served next; each lane's keys in arrival order. */
  private readonly lanes = new Map<string, Map<string, Task>>();
  private readonly laneOfKey = new Map<string, string>();
  private readonly maxPending: number;
  private readonly maxPendingPerLane: number;
  private running: Promise<void> | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: WorkQueueOptions = {}) {
    this.maxPending = options.maxPending ?? 10_000;
    this.maxPendingPerLane = options.maxPendingPerLane ?? this.maxPending;
  }

  get size(): number {
    return this.urgentTasks.size + this.laneOfKey.size;
  }

  /** False when the task was dropped (queue closed, or its lane or the queue full and the key not waiting). */
  enqueue(key: string, task: Task): boolean {
    if (this.closed) return false;
    if (this.options.urgent?.(key)) {
      this.urgentTasks.set(key, task);
      return this.start();
    }
    const waiting = this.laneOfKey.get(key);
    if (waiting !== undefined) {
      this.lanes.get(waiting)?.set(key, task);
      return this.start();
    }
    const lane = this.options.laneOf?.(key) ?? '';
    const own = this.lanes.get(lane)?.size ?? 0;
    if (own >= this.maxPendingPerLane || (this.laneOfKey.size >= this.maxPending && !this.pushOutFor(own))) {
      this.options.onDrop?.(key);
      return false;
    }
    let keys = this.lanes.get(lane);
    if (!keys) {
      keys = new Map();
      this.lanes.set(lane, keys);
    }
    keys.set(key, task);
    this.laneOfKey.set(key, lane);
    return this.start();
  }

  /** Resolves once nothing is waiting or running. */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Drops what is waiting, refuses new work, and resolves when the task in flight has finished. */
  async close(): Promise<void> {
    this.closed = true;
    this.urgentTasks.clear();
    this.lanes.clear();
    this.laneOfKey.clear();
    await this.running;
  }

  private start(): true {
    this.running ??= this.pump();
    return true;
  }

  /** Room for a key of a lane holding `own` keys: the newest key of a longer lane goes, if there is one. */
  private pushOutFor(own: number): boolean {
    let longest: [string, Map<string, Task>] | undefined;
    for (const entry of this.lanes) if (entry[1].size > (longest?.[1].size ?? 0)) longest = entry;
    if (!longest || longest[1].size <= own + 1) return false;
    const newest = [...longest[1].keys()].at(-1);
    if (newest === undefined) return false;
    this.remove(longest[0], newest);
    this.options.onDrop?.(newest);
    return true;
  }

  private remove(lane: string, key: string): void {
    const keys = this.lanes.get(lane);
    keys?.delete(key);
    if (keys?.size === 0) this.lanes.delete(lane);
    this.laneOfKey.delete(key);
  }

  /** The urgent task first; otherwise the first key of the lane whose turn it is, which then goes last. */
  private next(): [string, Task] | undefined {
    const urgent = this.urgentTasks.entries().next();
    if (!urgent.done) {
      this.urgentTasks.delete(urgent.value[0]);
      return urgent.value;
    }
    const turn = this.lanes.entries().next();
    if (turn.done) return undefined;
    const [lane, keys] = turn.value;
    const first = keys.entries().next();
    if (first.done) return undefined;
    this.remove(lane, first.value[0]);
    if (keys.size > 0) {
      this.lanes.delete(lane);
      this.lanes.set(lane, keys);
    }
    return first.value;
  }

  private async pump(): Promise<void> {
    for (let next = this.next(); next; next = this.next()) {
      const [key, task] = next;
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

/**
 * The runner's lane of a task key: the job's namespace, from `<what>:<Kind>/<namespace>/<name>` (the
 * EventRouter's keys); keys of no namespace share one lane.
 */
export function namespaceLane(key: string): string {
  const ref = key.slice(key.indexOf(':') + 1).split('/');
  return ref.length === 3 ? (ref[1] ?? '') : '';
}
