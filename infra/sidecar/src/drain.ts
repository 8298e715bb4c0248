// What happens when the pod is told to stop (a scale-down, an eviction, a straggler replacement): the
// sidecar asks the trainer to checkpoint NOW, then waits for it to say it has, at most the grace period.
// Two ways to ask, for the two kinds of trainer:
//  - a trainer with the Python hook sees `drain: true` in the answer to its next report (or its next poll
//    of GET /drain) and calls checkpoint_done() when it has saved;
//  - any other trainer watches for TRAINSCALER_DRAIN_FILE on a shared volume and deletes it when it has saved.
import { access, rm, writeFile } from 'node:fs/promises';

export type DrainResult = 'acknowledged' | 'timeout' | 'nobody-to-tell';

export class DrainCoordinator {
  #draining = false;
  #acknowledged = false;
  #trainerSeen = false;
  #waiters: (() => void)[] = [];

  constructor(private readonly file: string | undefined) {}

  get draining(): boolean {
    return this.#draining;
  }

  get acknowledged(): boolean {
    return this.#acknowledged;
  }

  /** The hook has talked to us: it will see the drain request, so it is worth waiting for. */
  trainerSeen(): void {
    this.#trainerSeen = true;
  }

  acknowledge(): void {
    if (!this.#draining || this.#acknowledged) return;
    this.#acknowledged = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Starts draining and resolves when the trainer has checkpointed, or after the grace period. */
  async drain(graceMs: number, pollMs = 200): Promise<DrainResult> {
    if (!this.#draining) {
      this.#draining = true;
      if (this.file) await writeFile(this.file, `${new Date().toISOString()}\n`);
    }
    if (this.#acknowledged) return 'acknowledged';
    if (!this.#trainerSeen && !this.file) return 'nobody-to-tell';
    const deadline = Date.now() + graceMs;
    return new Promise<DrainResult>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (result: DrainResult) => {
        if (timer) clearTimeout(timer);
        resolve(result);
      };
      this.#waiters.push(() => finish('acknowledged'));
      const check = async () => {
        if (this.#acknowledged) return;
        if (this.file && !(await exists(this.file))) {
          this.acknowledge();
          return;
        }
        const left = deadline - Date.now();
        if (left <= 0) finish('timeout');
        else timer = setTimeout(check, Math.min(pollMs, left));
      };
      void check();
    });
  }

  /** Removes a drain file left behind, so that a restarted trainer does not checkpoint at once. */
  async clear(): Promise<void> {
    if (this.file) await rm(this.file, { force: true });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
