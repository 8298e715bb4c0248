// moto's server mode (PyPI `moto[server]`, installed by `npm run setup`): a maintained emulator of the AWS
// APIs, started here on a free 127.0.0.1 port and stopped after the tests. It stands in for AWS, which
// cannot be reached from here; EventBridge rules deliver to SQS inside it as they do in AWS.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { freePort } from '../../../infra/local-stack/processes.js';

export interface Moto {
  endpoint: string;
  /** Static credentials moto accepts (it checks none). */
  credentials: { accessKeyId: string; secretAccessKey: string };
  region: string;
  stop(): Promise<void>;
}

function motoAvailable(): boolean {
  try {
    execFileSync('moto_server', ['--help'], { stdio: 'ignore', timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

/** A node:test `skip` value for unit tests that need the emulator: false when moto_server is installed. */
export const skipWithoutMoto: false | string = motoAvailable()
  ? false
  : 'moto_server is not installed (npm run setup installs moto[server])';

export async function startMoto(timeoutMs = 30_000): Promise<Moto> {
  const port = await freePort();
  const child: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const up = await fetch(`${endpoint}/moto-api/`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `moto_server did not start on ${endpoint} (is moto[server] installed? npm run setup): ${stderr}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    endpoint,
    credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    region: 'us-east-1',
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
