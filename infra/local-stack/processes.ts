// Child processes for the metrics tests: started with their output kept (for the failure message), and
// stopped for sure at the end (SIGTERM, then SIGKILL), whatever the test's outcome.
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

export interface Started {
  name: string;
  child: ChildProcess;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  exited: Promise<number | null>;
}

export function start(
  name: string,
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Started {
  const child = spawn(command, args, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000); // bounded memory for chatty processes
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => resolve(code));
    child.on('error', (error) => {
      output += `\n[spawn error] ${error.message}`;
      resolve(null);
    });
  });
  return { name, child, output: () => output, exited };
}

export async function stop(process: Started, graceMs = 3000): Promise<void> {
  if (process.child.exitCode !== null || process.child.signalCode !== null) return;
  process.child.kill('SIGTERM');
  const timer = setTimeout(() => process.child.kill('SIGKILL'), graceMs);
  await process.exited;
  clearTimeout(timer);
}

/** Polls `probe` until it returns a value; throws with `describe()` after the timeout. */
export async function waitUntil<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  what: string,
  describe: () => string = () => '',
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A port free on 127.0.0.1 now (for programs that cannot report the port they bound). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The first of `names` found on PATH, or undefined. */
export function onPath(...names: string[]): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of names) {
      const candidate = join(dir, name);
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

export interface MonitoringBinaries {
  prometheus: string;
  promtool: string;
  alertmanager: string;
  amtool: string;
}

/** Debian names the Alertmanager binary prometheus-alertmanager; upstream tarballs name it alertmanager. */
export function monitoringBinaries(): MonitoringBinaries {
  const found = {
    prometheus: onPath('prometheus'),
    promtool: onPath('promtool'),
    alertmanager: onPath('prometheus-alertmanager', 'alertmanager'),
    amtool: onPath('amtool'),
  };
  const missing = Object.entries(found)
    .filter(([, path]) => path === undefined)
    .map(([name]) => name);
  if (missing.length > 0)
    throw new Error(
      `the metrics tests need ${missing.join(', ')} on PATH: install them with ` +
        '`apt-get install -y prometheus prometheus-alertmanager` (Debian/Ubuntu)',
    );
  return found as MonitoringBinaries;
}
