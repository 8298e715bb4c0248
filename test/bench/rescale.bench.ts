// What a rescale really costs a torchelastic job: the example elastic trainer
// (infra/examples/elastic-trainer/train.py, DDP over gloo on CPU) runs under two torchrun agents on this
// machine, as two pods of an elastic PyTorchJob would. A second agent joining (scale-up 1 -> 2) and leaving
// on SIGTERM (scale-down 2 -> 1, the way a pod deletion stops it) are timed from the trainer's own step log:
// the pause is from the last step at the old size to the first step at the new one. Run with the rendezvous
// settings trainscaler recommends (lib/torchelastic/recommended-rendezvous.ts: its launcher
// `python3 -m trainscaler_hook.launch` with a 1 s monitor interval and a 2 s last call) and with plain torchrun's
// defaults, REPS times each. Each pause is also split into where it went (from the trainer's phases log).
// Run: npm run bench:rescale [-- --reps N] [-- --json]
//      [-- --only recommended|torchrunDefaults|torchrunRecommendedFlags (the flags without the launcher)]
// (needs the pinned PyPI torch: npm run setup; TORCH_PYTHON=/usr/bin/python3 runs it on Debian's torch 1.13)
// Everything binds 127.0.0.1; every wait is bounded.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, type Started, start, stop, waitUntil } from '../../infra/local-stack/processes.js';
import { torchPython, torchrunBeside, torchVersionOf } from '../../infra/local-stack/torch-python.js';
import {
  RECOMMENDED_LAUNCHER,
  recommendedTorchrunFlags,
} from '../../lib/torchelastic/recommended-rendezvous.js';
import { REPO_ROOT } from '../metrics/support/sidecar-bundle.js';
import {
  BREAKDOWN_PARTS,
  committedSamples,
  type PauseBreakdown,
  readPhaseLogs,
  readStepLogs,
  rescaleBreakdown,
  rescalePause,
} from '../support/elastic-train-logs.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
const REPS = Number(values.reps);
// The pinned PyPI torch's venv (npm run setup), or TORCH_PYTHON / TORCHRUN (/usr/bin/python3: Debian's torch 1.13).
const PYTHON = torchPython();
const TORCHRUN = torchrunBeside(PYTHON);
const TORCH_VERSION = torchVersionOf(PYTHON);
const TRAINER = join(REPO_ROOT, 'infra', 'examples', 'elastic-trainer', 'train.py');
const PAUSE_TIMEOUT_MS = 150_000;

interface Launch {
  command: string;
  args: string[];
}

// Plain torchrun on torch >= 2.4 needs this for a scale-up to work at all: without it the joining agent waits
// for the shared store's address until the 60 s store timeout (measured on torch 2.15.0; the launcher sets it
// itself: infra/sidecar/python/trainscaler_hook/launch.py, NO_SHARED_STORE_ENV). Ignored by torch 1.13.
const TORCHRUN_ENV = { TORCH_DISABLE_SHARE_RDZV_TCP_STORE: '1' };

/** trainscaler's recommendation (what `submit` recommends for an elastic PyTorchJob) vs torchrun's defaults. */
export const RENDEZVOUS: Record<string, Launch> = {
  recommended: {
    command: PYTHON, // RECOMMENDED_LAUNCHER's python3, the one with torch
    args: [...RECOMMENDED_LAUNCHER.slice(1), ...recommendedTorchrunFlags()],
  },
  torchrunDefaults: { command: TORCHRUN, args: [] },
};

/** Run only when named with --only: what the recommended flags do without trainscaler's launcher. */
const EXTRA: Record<string, Launch> = {
  torchrunRecommendedFlags: { command: TORCHRUN, args: recommendedTorchrunFlags() },
  // the launcher polls every 0.1 s: does a shorter last call and monitor interval still form one world?
  launcherShortLastCall: {
    command: PYTHON,
    args: [...RECOMMENDED_LAUNCHER.slice(1), '--monitor_interval=0.5', '--rdzv_conf=last_call_timeout=1'],
  },
};

interface Pauses {
  scaleUp: number[];
  scaleDown: number[];
  upParts: PauseBreakdown[];
  downParts: PauseBreakdown[];
  duplicates: number;
}

function agent(name: string, port: number, dir: string, launch: Launch): Started {
  const args = [
    ...launch.args,
    '--nnodes=1:4', // an elasticPolicy whose max is not reached: the rendezvous waits last_call_timeout
    '--nproc_per_node=1',
    '--rdzv_backend=c10d',
    `--rdzv_endpoint=127.0.0.1:${port}`,
    '--rdzv_id=bench',
    '--max_restarts=10',
    '--redirects=2',
    '--tee=1',
    TRAINER,
  ];
  return start(`torchrun-${name}`, launch.command, args, {
    env: {
      ...process.env,
      PYTHONPATH: join(REPO_ROOT, 'infra', 'sidecar', 'python'),
      TRAIN_NODE_NAME: name,
      TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
      TRAIN_LOG_DIR: join(dir, 'logs'),
      TRAIN_DATASET_SIZE: '400000',
      TRAINSCALER_HOOK_URL: 'http://127.0.0.1:9', // no sidecar here: the hook drops its reports quietly
      OMP_NUM_THREADS: '1',
      ...(launch.command === TORCHRUN ? TORCHRUN_ENV : {}),
    },
  });
}

async function stepsAt(dir: string, world: number, after: number, count: number): Promise<void> {
  await waitUntil(
    () =>
      readStepLogs(join(dir, 'logs')).filter((r) => r.world === world && r.t >= after).length >= count ||
      undefined,
    PAUSE_TIMEOUT_MS,
    `${count} steps at world size ${world}`,
  );
}

async function pauseTo(
  dir: string,
  from: number,
  to: number,
  after: number,
  what: () => string,
): Promise<number> {
  return waitUntil(
    () => rescalePause(readStepLogs(join(dir, 'logs')), from, to, after),
    PAUSE_TIMEOUT_MS,
    `first step at size ${to}`,
    what,
  );
}

function breakdown(dir: string, from: number, to: number, after: number): PauseBreakdown | undefined {
  const logs = join(dir, 'logs');
  return rescaleBreakdown(readStepLogs(logs), readPhaseLogs(logs), from, to, after);
}

async function measure(settings: Launch): Promise<Pauses> {
  const result: Pauses = { scaleUp: [], scaleDown: [], upParts: [], downParts: [], duplicates: 0 };
  for (let rep = 0; rep < REPS; rep++) {
    const dir = mkdtempSync(join(tmpdir(), 'trainscaler-rescale-'));
    const port = await freePort();
    const first = agent('worker-0', port, dir, settings);
    let second: Started | undefined;
    const output = () => `${first.output().slice(-3000)}\n${second?.output().slice(-3000) ?? ''}`;
    try {
      await stepsAt(dir, 1, 0, 20);
      const joined = Date.now() / 1000;
      second = agent('worker-1', port, dir, settings);
      result.scaleUp.push(await pauseTo(dir, 1, 2, joined, output));
      await stepsAt(dir, 2, joined, 20);
      const up = breakdown(dir, 1, 2, joined);
      if (up) result.upParts.push(up);
      const left = Date.now() / 1000;
      await stop(second, 30_000); // kubelet: SIGTERM, SIGKILL after the grace period
      result.scaleDown.push(await pauseTo(dir, 2, 1, left, output));
      await stepsAt(dir, 1, left, 5);
      const down = breakdown(dir, 2, 1, left);
      if (down) result.downParts.push(down);
      for (const epoch of committedSamples(readStepLogs(join(dir, 'logs'))).values())
        result.duplicates += epoch.duplicates.length;
    } finally {
      if (second) await stop(second, 5_000);
      await stop(first, 5_000);
      rmSync(dir, { recursive: true, force: true });
    }
    if (!values.json) {
      console.log(
        `  rep ${rep + 1}: scale-up ${fmt(result.scaleUp.at(-1))} s, scale-down ${fmt(result.scaleDown.at(-1))} s`,
      );
      console.log(`    up:   ${partsLine(result.upParts.at(-1))}`);
      console.log(`    down: ${partsLine(result.downParts.at(-1))}`);
    }
  }
  return result;
}

const fmt = (s: number | undefined) => (s === undefined ? '-' : s.toFixed(1));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const partsLine = (parts: PauseBreakdown | undefined) =>
  parts ? BREAKDOWN_PARTS.map((k) => `${k} ${parts[k].toFixed(1)}`).join(', ') : '-';
const medianParts = (all: PauseBreakdown[]): PauseBreakdown | undefined =>
  all.length === 0
    ? undefined
    : (Object.fromEntries(
        BREAKDOWN_PARTS.map((k) => [k, median(all.map((p) => p[k]))]),
      ) as unknown as PauseBreakdown);

const chosen = values.only
  ? Object.entries({ ...RENDEZVOUS, ...EXTRA }).filter(([name]) => name === values.only)
  : Object.entries(RENDEZVOUS);
if (chosen.length === 0)
  throw new Error(`--only must be one of ${Object.keys({ ...RENDEZVOUS, ...EXTRA }).join(', ')}`);
const results: Record<string, Pauses> = {};
for (const [name, settings] of chosen) {
  if (!values.json)
    console.log(`${name} (${[settings.command, ...settings.args].join(' ')}), ${REPS} repetitions:`);
  results[name] = await measure(settings);
}
if (values.json) {
  const round = (xs: number[]) => xs.map((x) => Math.round(x * 10) / 10);
  const out = Object.fromEntries(
    Object.entries(results).map(([k, v]) => [
      k,
      { scaleUp: round(v.scaleUp), scaleDown: round(v.scaleDown) },
    ]),
  );
  console.log(JSON.stringify({ torch: TORCH_VERSION, ...out }));
} else {
  console.log(
    `\npause from the last step at the old size to the first at the new one (median of reps, seconds; torch ${TORCH_VERSION}):`,
  );
  console.log('| rendezvous | scale-up 1->2 | scale-down 2->1 | samples repeated |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, r] of Object.entries(results)) {
    console.log(`| ${name} | ${fmt(median(r.scaleUp))} | ${fmt(median(r.scaleDown))} | ${r.duplicates} |`);
  }
  console.log('\nwhere the pause went (median of reps per part, seconds):');
  console.log(`| rendezvous | direction | ${BREAKDOWN_PARTS.join(' | ')} |`);
  console.log(`| --- | --- |${BREAKDOWN_PARTS.map(() => ' ---: |').join('')}`);
  for (const [name, r] of Object.entries(results)) {
    for (const [direction, all] of [
      ['scale-up', r.upParts],
      ['scale-down', r.downParts],
    ] as const) {
      const parts = medianParts(all);
      if (parts)
        console.log(
          `| ${name} | ${direction} | ${BREAKDOWN_PARTS.map((k) => parts[k].toFixed(1)).join(' | ')} |`,
        );
    }
  }
}
