// Progress from the trainer's own log lines, for training code nobody wants to touch: a regular
// expression with a named group `step` (and optionally `samples`) applied to each new line of a file the
// trainer writes (a shared emptyDir), or to the sidecar's standard input in wrapper mode.
import { open, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

export interface LogProgress {
  step: number;
  samples?: number;
}

export function parseLogLine(line: string, pattern: RegExp): LogProgress | undefined {
  const groups = pattern.exec(line)?.groups;
  if (!groups?.step) return undefined;
  const step = Number(groups.step);
  if (!Number.isFinite(step) || step < 0) return undefined;
  const progress: LogProgress = { step };
  if (groups.samples !== undefined) {
    const samples = Number(groups.samples);
    if (Number.isFinite(samples) && samples >= 0) progress.samples = samples;
  }
  return progress;
}

export interface Stoppable {
  stop(): Promise<void>;
}

/** Each line of a stream (stdin in wrapper mode), passed on unchanged so the trainer's output is not lost. */
export function followStream(input: Readable, onLine: (line: string) => void, echo?: NodeJS.WritableStream) {
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  lines.on('line', (line) => {
    echo?.write(`${line}\n`);
    onLine(line);
  });
  return {
    stop: async () => {
      lines.close();
    },
  };
}

/** Largest chunk read per poll, so that a burst of logging cannot stall the event loop. */
const MAX_CHUNK = 1024 * 1024;

/**
 * Follows a file like `tail -F`: starts at its end when it already exists (lines written before the
 * sidecar started carry no usable timing), from its start when it appears later, and again from the start
 * when it is truncated or replaced (log rotation). Polling, because inotify does not cross every volume type.
 */
export function followFile(path: string, pollMs: number, onLine: (line: string) => void): Stoppable {
  let offset: number | undefined;
  let inode: number | undefined;
  let partial = '';
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  const poll = async (first: boolean) => {
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(path);
    } catch {
      // Missing at start: read it whole once it appears. Missing later: it is being rotated.
      if (!first) offset = 0;
      inode = undefined;
      return; // not there (yet, or between rotation steps)
    }
    if (offset === undefined) offset = first ? info.size : 0;
    if (inode !== undefined && info.ino !== inode) {
      offset = 0;
      partial = '';
    }
    inode = info.ino;
    if (info.size < offset) {
      offset = 0;
      partial = '';
    }
    if (info.size === offset) return;
    const length = Math.min(info.size - offset, MAX_CHUNK);
    const handle = await open(path, 'r');
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      offset += bytesRead;
      const text = partial + buffer.subarray(0, bytesRead).toString('utf8');
      const lines = text.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) onLine(line.replace(/\r$/, ''));
    } finally {
      await handle.close();
    }
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = poll(false)
        .catch(() => undefined)
        .finally(schedule);
    }, pollMs);
    timer.unref();
  };
  running = poll(true)
    .catch(() => undefined)
    .finally(schedule);

  return {
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
