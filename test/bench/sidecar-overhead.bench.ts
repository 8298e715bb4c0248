// What the sidecar costs beside a training container: its CPU and resident memory, read from /proc of the
// sidecar process over fixed intervals, idle and under 1,000 progress reports a second (HTTP reports as a
// hook posting every step would send, and log lines), against a baseline: an idle Node.js process started
// the same way (and, for CPU, a plain Node.js HTTP server answering the same scrapes). Every phase is
// scraped once a second, as a busy Prometheus would. Also: what one call of the Python hook's report()
// costs the training loop.
// Run: npm run bench:sidecar   (about 40 s; everything on 127.0.0.1, every loop bounded in time)
import { execFileSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Started, start, stop, waitUntil } from '../../infra/local-stack/processes.js';
import { bundleSidecar, REPO_ROOT } from '../metrics/support/sidecar-bundle.js';

const PHASE_SECONDS = 6;
const RATE = 1000;
const TICK_MS = 10;

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

interface Usage {
  cpuSeconds: number;
  rssBytes: number;
}

/**
 * CPU time of every thread of the process (libuv's pool and V8's helpers too), from schedstat in
 * nanoseconds: the 10 ms ticks of /proc/<pid>/stat round an idle process down to zero.
 */
async function cpuSecondsOf(pid: number): Promise<number> {
  try {
    const tasks = await readdir(`/proc/${pid}/task`);
    let ns = 0;
    for (const task of tasks) {
      const schedstat = await readFile(`/proc/${pid}/task/${task}/schedstat`, 'utf8').catch(() => '0');
      ns += Number(schedstat.split(' ')[0]) || 0;
    }
    return ns / 1e9;
  } catch {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces): utime is field 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  }
}

async function usageOf(pid: number): Promise<Usage> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return { cpuSeconds: await cpuSecondsOf(pid), rssBytes: rssKb * 1024 };
}

interface PhaseResult {
  name: string;
  cpuPercent: number;
  rssMiB: number;
  note?: string;
}

/** Measures `pid` over PHASE_SECONDS while `load` runs (it must stop by `deadline`). */
async function measure(
  name: string,
  pid: number,
  load: (deadline: number) => Promise<string | undefined>,
): Promise<PhaseResult> {
  const before = await usageOf(pid);
  const started = performance.now();
  const deadline = Date.now() + PHASE_SECONDS * 1000;
  const note = await load(deadline);
  const wall = (performance.now() - started) / 1000;
  const afterUsage = await usageOf(pid);
  const result: PhaseResult = {
    name,
    cpuPercent: ((afterUsage.cpuSeconds - before.cpuSeconds) / wall) * 100,
    rssMiB: afterUsage.rssBytes / 1024 ** 2,
  };
  if (note) result.note = note;
  return result;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function idle(scrapeUrl: string | undefined) {
  return async (deadline: number) => {
    while (Date.now() < deadline) {
      if (scrapeUrl) await fetch(scrapeUrl).then((r) => r.text());
      await sleep(Math.min(1000, Math.max(0, deadline - Date.now())));
    }
    return undefined;
  };
}

/** 1,000 POST /progress a second over keep-alive connections, paced in 10 ms ticks, scraped each second. */
function httpReports(hookUrl: string, scrapeUrl: string) {
  return async (deadline: number) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const target = new URL(`${hookUrl}/progress`);
    let step = 0;
    let ok = 0;
    let failed = 0;
    const post = () =>
      new Promise<void>((resolve) => {
        step += 1;
        const body = JSON.stringify({ step, samples: step * 32, at: Date.now() / 1000 });
        const req = request(
          { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent },
          (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode === 200) ok++;
              else failed++;
              resolve();
            });
          },
        );
        req.on('error', () => {
          failed++;
          resolve();
        });
        req.end(body);
      });
    const started = Date.now();
    let nextScrape = started + 1000;
    const inflight: Promise<void>[] = [];
    while (Date.now() < deadline) {
      const due = Math.floor(((Date.now() - started) / 1000) * RATE);
      while (step < due && inflight.length < 2000) inflight.push(post());
      if (Date.now() >= nextScrape) {
        nextScrape += 1000;
        await fetch(scrapeUrl).then((r) => r.text());
      }
      await sleep(TICK_MS);
      if (inflight.length > 1000) await Promise.all(inflight.splice(0));
    }
    await Promise.all(inflight);
    agent.destroy();
    const seconds = (Date.now() - started) / 1000;
    return `${Math.round(ok / seconds)} reports/s accepted${failed ? `, ${failed} failed` : ''}`;
  };
}

/** 1,000 log lines a second appended to the file the sidecar follows. */
function logLines(file: string, scrapeUrl: string) {
  return async (deadline: number) => {
    const started = Date.now();
    let step = 0;
    let nextScrape = started + 1000;
    while (Date.now() < deadline) {
      const due = Math.floor(((Date.now() - started) / 1000) * RATE);
      let chunk = '';
      while (step < due) {
        step += 1;
        chunk += `epoch 0 step ${step} samples=${step * 32} loss 0.1234\n`;
      }
      if (chunk) await appendFile(file, chunk);
      if (Date.now() >= nextScrape) {
        nextScrape += 1000;
        await fetch(scrapeUrl).then((r) => r.text());
      }
      await sleep(TICK_MS);
    }
    return `${Math.round(step / ((Date.now() - started) / 1000))} lines/s written`;
  };
}

async function startSidecar(name: string, js: string, env: Record<string, string>): Promise<Started> {
  const sidecar = start(name, process.execPath, [js], {
    env: {
      PATH: process.env.PATH ?? '',
      TRAINSCALER_NAMESPACE: 'bench',
      TRAINSCALER_JOB_KIND: 'PyTorchJob',
      TRAINSCALER_JOB_NAME: 'overhead',
      TRAINSCALER_POD: 'overhead-worker-0',
      TRAINSCALER_REPLICAS: '1',
      TRAINSCALER_LOCAL_BATCH_SIZE: '32',
      TRAINSCALER_METRICS_HOST: '127.0.0.1',
      TRAINSCALER_METRICS_PORT: '0',
      TRAINSCALER_HOOK_PORT: '0',
      TRAINSCALER_NVIDIA_SMI: 'off',
      ...env,
    },
  });
  await waitUntil(() => /"msg":"listening"/.test(sidecar.output()) || undefined, 15_000, `${name} to listen`);
  return sidecar;
}

function urlsOf(sidecar: Started): { metrics: string; hook: string } {
  const line = /^\{.*"msg":"listening".*$/m.exec(sidecar.output())?.[0] ?? '{}';
  return JSON.parse(line) as { metrics: string; hook: string };
}

/** Microseconds per report() call of the Python hook, posting to a live sidecar in the background. */
function hookCallCost(hookUrl: string): string {
  const script = [
    'import time',
    'from trainscaler_hook import Reporter',
    `r = Reporter(${JSON.stringify(hookUrl)}, interval=1.0)`,
    'n = 200000',
    't = time.perf_counter()',
    'for i in range(n): r.report(i, i * 32)',
    'dt = time.perf_counter() - t',
    'r.close()',
    'print(f"{dt / n * 1e6:.2f}")',
  ].join('\n');
  try {
    const out = execFileSync('python3', ['-c', script], {
      env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'infra/sidecar/python') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    return `${out.trim()} µs per report() call (200,000 calls, Python ${execFileSync('python3', ['-c', 'import platform; print(platform.python_version())'], { encoding: 'utf8' }).trim()})`;
  } catch (error) {
    return `not measured: ${error instanceof Error ? error.message.split('\n')[0] : error}`;
  }
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'trainscaler-bench-'));
  const running: Started[] = [];
  try {
    const js = await bundleSidecar(dir);
    const cgroup = join(dir, 'cgroup');
    await mkdir(cgroup);
    await writeFile(join(cgroup, 'cpu.stat'), 'usage_usec 1000000\n');
    await writeFile(join(cgroup, 'memory.current'), '1073741824\n');
    await writeFile(join(cgroup, 'memory.max'), '4294967296\n');
    const results: PhaseResult[] = [];

    const baseline = start('baseline', process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)']);
    running.push(baseline);
    await sleep(1000);
    const baselinePid = baseline.child.pid ?? 0;
    results.push(await measure('baseline: idle node process', baselinePid, idle(undefined)));
    await stop(baseline);

    // A second reference: the least a Node.js process answering the same scrapes costs.
    const echo = start('http-baseline', process.execPath, [
      '-e',
      "const s = require('node:http').createServer((q, r) => r.end('x 1\\n')); s.listen(0, '127.0.0.1', () => console.log(s.address().port))",
    ]);
    running.push(echo);
    const echoPort = await waitUntil(() => /^(\d+)$/m.exec(echo.output())?.[1], 10_000, 'http baseline');
    await sleep(1000);
    results.push(
      await measure(
        'reference: node http server, 1/s',
        echo.child.pid ?? 0,
        idle(`http://127.0.0.1:${echoPort}/`),
      ),
    );
    await stop(echo);

    const sidecar = await startSidecar('sidecar', js, { TRAINSCALER_CGROUP_PATH: cgroup });
    running.push(sidecar);
    const urls = urlsOf(sidecar);
    const pid = sidecar.child.pid ?? 0;
    await sleep(1000);
    results.push(await measure('sidecar idle (scraped 1/s)', pid, idle(`${urls.metrics}/metrics`)));
    results.push(
      await measure(
        `sidecar, ${RATE} HTTP reports/s`,
        pid,
        httpReports(urls.hook, `${urls.metrics}/metrics`),
      ),
    );
    const hookCost = hookCallCost(urls.hook);
    await stop(sidecar);

    const logFile = join(dir, 'train.log');
    await writeFile(logFile, '');
    const tailer = await startSidecar('sidecar-log', js, {
      TRAINSCALER_CGROUP_PATH: cgroup,
      TRAINSCALER_LOG_FILE: logFile,
      TRAINSCALER_LOG_POLL_MS: '500',
    });
    running.push(tailer);
    await sleep(1000);
    results.push(
      await measure(
        `sidecar, ${RATE} log lines/s`,
        tailer.child.pid ?? 0,
        logLines(logFile, `${urlsOf(tailer).metrics}/metrics`),
      ),
    );
    await stop(tailer);

    const base = results[0] as PhaseResult;
    const reference = results[1] as PhaseResult;
    console.log(`sidecar overhead: ${PHASE_SECONDS} s per phase, CPU as % of one core, RSS at phase end`);
    console.log(`node ${process.version}; CPU from /proc/<pid>/task/*/schedstat\n`);
    console.log(
      `${'phase'.padEnd(34)} ${'CPU %'.padStart(7)} ${'RSS MiB'.padStart(8)} ${'CPU x base'.padStart(11)} ${'RSS x base'.padStart(11)} ${'CPU x ref'.padStart(10)}  note`,
    );
    for (const r of results) {
      // An idle Node.js process may use no measurable CPU at all: then there is no ratio to give.
      const cpuRatio = base.cpuPercent > 0 ? (r.cpuPercent / base.cpuPercent).toFixed(0) : 'n/a (0)';
      console.log(
        `${r.name.padEnd(34)} ${r.cpuPercent.toFixed(3).padStart(7)} ${r.rssMiB.toFixed(1).padStart(8)} ${cpuRatio.padStart(11)} ${(r.rssMiB / base.rssMiB).toFixed(2).padStart(11)} ${(r.cpuPercent / reference.cpuPercent).toFixed(1).padStart(10)}  ${r.note ?? ''}`,
      );
    }
    console.log(`\nPython hook: ${hookCost}`);
  } finally {
    await Promise.all(running.map((p) => stop(p)));
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
