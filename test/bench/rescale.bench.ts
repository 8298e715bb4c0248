// What a rescale really costs a torchelastic job: the example elastic trainer
// (infra/examples/elastic-trainer/train.py, DDP over gloo on CPU) runs under two torchrun agents on this
// machine, as two pods of an elastic PyTorchJob would. A second agent joining (scale-up 1 -> 2) and leaving
// on SIGTERM (scale-down 2 -> 1, the way a pod deletion stops it) are timed from the trainer's own step log:
// the pause is from the last step at the old size to the first step at the new one. Run with the rendezvous
// settings trainscaler recommends and with torchrun's defaults, REPS times each.
// Run: npm run bench:rescale [-- --reps N] [-- --json]   (needs Debian's python3-torch: npm run setup)
// Everything binds 127.0.0.1; every wait is bounded.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, type Started, start, stop, waitUntil } from '../metrics/support/processes.js';
import { REPO_ROOT } from '../metrics/support/sidecar-bundle.js';
import { committedSamples, readStepLogs, rescalePause } from '../support/elastic-train-logs.js';

const { values } = parseArgs({
  options: { reps: { type: 'string', default: '3' }, json: { type: 'boolean', default: false } },
});
const REPS = Number(values.reps);
const TORCHRUN = process.env.TORCHRUN ?? '/usr/bin/torchrun';
const TRAINER = join(REPO_ROOT, 'infra', 'examples', 'elastic-trainer', 'train.py');
const PAUSE_TIMEOUT_MS = 150_000;

/** trainscaler's recommendation (what `submit` recommends for an elastic PyTorchJob) vs torchrun's defaults. */
export const RENDEZVOUS = {
  recommended: ['--monitor_interval=1', '--rdzv_conf=last_call_timeout=2'],
  torchrunDefaults: [] as string[],
};

interface Pauses {
  scaleUp: number[];
  scaleDown: number[];
  duplicates: number;
}

function agent(name: string, port: number, dir: string, settings: string[]): Started {
  const args = [
    '--nnodes=1:4', // an elasticPolicy whose max is not reached: the rendezvous waits last_call_timeout
    '--nproc_per_node=1',
    '--rdzv_backend=c10d',
    `--rdzv_endpoint=127.0.0.1:${port}`,
    '--rdzv_id=bench',
    '--max_restarts=10',
    '--redirects=2',
    '--tee=1',
    ...settings,
    TRAINER,
  ];
  return start(`torchrun-${name}`, TORCHRUN, args, {
    env: {
      ...process.env,
      PYTHONPATH: join(REPO_ROOT, 'infra', 'sidecar', 'python'),
      TRAIN_NODE_NAME: name,
      TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
      TRAIN_LOG_DIR: join(dir, 'logs'),
      TRAIN_DATASET_SIZE: '400000',
      TRAINSCALER_HOOK_URL: 'http://127.0.0.1:9', // no sidecar here: the hook drops its reports quietly
      OMP_NUM_THREADS: '1',
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

async function measure(settings: string[]): Promise<Pauses> {
  const result: Pauses = { scaleUp: [], scaleDown: [], duplicates: 0 };
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
      const left = Date.now() / 1000;
      await stop(second, 30_000); // kubelet: SIGTERM, SIGKILL after the grace period
      result.scaleDown.push(await pauseTo(dir, 2, 1, left, output));
      await stepsAt(dir, 1, left, 5);
      for (const epoch of committedSamples(readStepLogs(join(dir, 'logs'))).values())
        result.duplicates += epoch.duplicates.length;
    } finally {
      if (second) await stop(second, 5_000);
      await stop(first, 5_000);
      rmSync(dir, { recursive: true, force: true });
    }
    if (!values.json)
      console.log(
        `  rep ${rep + 1}: scale-up ${fmt(result.scaleUp.at(-1))} s, scale-down ${fmt(result.scaleDown.at(-1))} s`,
      );
  }
  return result;
}

const fmt = (s: number | undefined) => (s === undefined ? '-' : s.toFixed(1));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const results: Record<string, Pauses> = {};
for (const [name, settings] of Object.entries(RENDEZVOUS)) {
  if (!values.json)
    console.log(`${name} (${settings.join(' ') || 'torchrun defaults'}), ${REPS} repetitions:`);
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
  console.log(JSON.stringify(out));
} else {
  console.log(
    '\npause from the last step at the old size to the first at the new one (median of reps, seconds):',
  );
  console.log('| rendezvous | scale-up 1->2 | scale-down 2->1 | samples repeated |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, r] of Object.entries(results)) {
    console.log(`| ${name} | ${fmt(median(r.scaleUp))} | ${fmt(median(r.scaleDown))} | ${r.duplicates} |`);
  }
}
