// `trainscaler forward` as a child process (the CLI as deployed, through tsx), its JSON log lines collected.
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface ForwarderProcess {
  url: string;
  logs: Array<Record<string, unknown>>;
  /** Sum of a counter on /metrics over all its label sets. */
  counter(name: string): Promise<number>;
  synced(timeoutMs?: number): Promise<void>;
  stop(): Promise<number | null>;
}

export async function startForwarderProcess(input: {
  args: string[];
  env: Record<string, string>;
  timeoutMs?: number;
}): Promise<ForwarderProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(REPO_ROOT, 'cli/main.ts'),
      'forward',
      '--address',
      '127.0.0.1',
      '--port',
      '0',
      ...input.args,
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...input.env } },
  );
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ msg: line });
      }
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + (input.timeoutMs ?? 60_000);
  let url: string | undefined;
  while (!url) {
    url = logs.find((l) => l.msg === 'trainscaler forward')?.url as string | undefined;
    if (url) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`trainscaler forward did not start: ${stderr}\n${JSON.stringify(logs.slice(-5))}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const base = url;
  return {
    url: base,
    logs,
    async counter(name) {
      const text = await (await fetch(`${base}/metrics`)).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
        .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    },
    async synced(timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        const ok = await fetch(`${base}/healthz`).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) return;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`forwarder not synced after ${timeoutMs} ms`);
    },
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
