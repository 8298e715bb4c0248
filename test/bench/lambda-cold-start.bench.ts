// Cold start of each Lambda bundle, measured the way Lambda pays it: a fresh Node process imports
// dist/lambda/<fn>.mjs (module init, including the eager configuration check and client build) and handles
// one fixture event. Nothing reaches AWS or a cluster: DescribeCluster is answered by a loopback stub, and
// the EKS API endpoint and Prometheus point at 127.0.0.1 ports that refuse connections, so the first
// invocation ends in a fast ApiError and the figures are initialisation, not network.
//
//   npx tsx test/bench/lambda-cold-start.bench.ts [--runs 3] [--no-bundle]

import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { bundleLambdas, LAMBDA_FUNCTIONS, type LambdaFunction, OUT_DIR } from '../../infra/lambda/bundle.js';
import {
  alertmanagerWebhook,
  cloudWatchAlarmMessage,
  eventBridgeEnvelope,
  scheduledEvent,
  snsLambdaEvent,
} from '../fixtures/payloads.js';

const JOB = { namespace: 'ml', kind: 'PyTorchJob', name: 'bert' };

const FIXTURES: Record<LambdaFunction, unknown> = {
  alarm: snsLambdaEvent(
    cloudWatchAlarmMessage({ namespace: 'ml', job_kind: 'PyTorchJob', job_name: 'bert' }),
  ),
  alertmanagerWebhook: { body: JSON.stringify(alertmanagerWebhook([JOB])), isBase64Encoded: false },
  clusterEvent: eventBridgeEnvelope('Kubernetes Watch Event', {
    type: 'MODIFIED',
    object: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'bert-worker-0',
        namespace: 'ml',
        labels: { 'training.kubeflow.org/job-name': 'bert', 'training.kubeflow.org/replica-type': 'worker' },
      },
      status: { phase: 'Running' },
    },
  }),
  schedule: scheduledEvent(),
  submit: eventBridgeEnvelope('Kubernetes Job Submitted', {
    kind: 'PyTorchJob',
    namespace: 'ml',
    name: 'bert',
  }),
};

interface Sample {
  importMs: number;
  invokeMs: number;
  /** spawn -> result line, including Node's own start-up. */
  processMs: number;
  outcome: string;
}

// Runs inside the fresh process: timings around the import and the first invocation only.
const CHILD = `
const t0 = performance.now();
const mod = await import(process.env.BENCH_BUNDLE);
const t1 = performance.now();
let outcome = 'ok';
try { await mod.handler(JSON.parse(process.env.BENCH_EVENT)); }
catch (e) { outcome = (e && e.name ? e.name + ': ' : '') + String(e && e.message).slice(0, 70); }
const t2 = performance.now();
process.stderr.write('BENCH ' + JSON.stringify({ importMs: t1 - t0, invokeMs: t2 - t1, outcome }) + '\\n');
process.exit(0);
`;

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A loopback port nothing listens on: bound, then released. */
async function refusingPort(): Promise<number> {
  const server = createServer();
  const port = await listen(server);
  await new Promise((r) => server.close(r));
  return port;
}

function runOnce(fn: LambdaFunction, env: NodeJS.ProcessEnv): Promise<Sample> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
      env: {
        ...env,
        BENCH_BUNDLE: pathToFileURL(join(OUT_DIR, `${fn}.mjs`)).href,
        BENCH_EVENT: JSON.stringify(FIXTURES[fn]),
        AWS_LAMBDA_FUNCTION_NAME: `trainscaler-bench-${fn}`,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    let result: Omit<Sample, 'processMs'> | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const line = stderr.split('\n').find((l) => l.startsWith('BENCH '));
      if (line && !result) result = JSON.parse(line.slice(6)) as Omit<Sample, 'processMs'>;
    });
    child.on('close', () => {
      clearTimeout(timer);
      if (result) resolve({ ...result, processMs: performance.now() - started });
      else reject(new Error(`${fn}: no result\n${stderr.slice(-2000)}`));
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function main() {
  const args = process.argv.slice(2);
  const runsAt = args.indexOf('--runs');
  const runs = Math.min(10, Math.max(1, runsAt >= 0 ? Number(args[runsAt + 1]) || 3 : 3));
  if (!args.includes('--no-bundle')) await bundleLambdas();

  const kubePort = await refusingPort();
  const prometheusPort = await refusingPort();
  // DescribeCluster stub: a real response shape, pointing the Kubernetes client at the refusing port.
  const eksStub = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        cluster: {
          name: 'bench',
          status: 'ACTIVE',
          endpoint: `https://127.0.0.1:${kubePort}`,
          certificateAuthority: { data: Buffer.from('-----BEGIN CERTIFICATE-----\n').toString('base64') },
        },
      }),
    );
  });
  const eksPort = await listen(eksStub);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    // serverless.yml sets no NODE_OPTIONS (source maps would add ~150 ms to the import).
    NODE_OPTIONS: '',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDBENCHMARK',
    AWS_SECRET_ACCESS_KEY: 'benchmark-secret',
    AWS_SESSION_TOKEN: 'benchmark-session',
    AWS_ENDPOINT_URL_EKS: `http://127.0.0.1:${eksPort}`,
    AWS_MAX_ATTEMPTS: '1',
    EKS_CLUSTER_NAME: 'bench',
    PROMETHEUS_URL: `http://127.0.0.1:${prometheusPort}`,
    LOG_LEVEL: 'silent',
  };

  process.stdout.write(
    `Lambda cold start: ${runs} fresh ${process.version} process(es) per function, median; ` +
      'DescribeCluster stubbed on loopback, API server and Prometheus refusing\n\n',
  );
  process.stdout.write(
    `${'function'.padEnd(20)} ${'bundle KiB'.padStart(10)} ${'import ms'.padStart(10)} ` +
      `${'1st call ms'.padStart(11)} ${'process ms'.padStart(10)}  first call ended with\n`,
  );
  try {
    for (const fn of Object.keys(LAMBDA_FUNCTIONS) as LambdaFunction[]) {
      const bytes = (await stat(join(OUT_DIR, `${fn}.mjs`))).size;
      const samples: Sample[] = [];
      for (let i = 0; i < runs; i++) samples.push(await runOnce(fn, env));
      process.stdout.write(
        `${fn.padEnd(20)} ${(bytes / 1024).toFixed(0).padStart(10)} ` +
          `${median(samples.map((s) => s.importMs))
            .toFixed(0)
            .padStart(10)} ` +
          `${median(samples.map((s) => s.invokeMs))
            .toFixed(0)
            .padStart(11)} ` +
          `${median(samples.map((s) => s.processMs))
            .toFixed(0)
            .padStart(10)}  ${samples[0]?.outcome ?? ''}\n`,
      );
    }
  } finally {
    eksStub.closeAllConnections();
    await new Promise((r) => eksStub.close(r));
  }
}

await main();
