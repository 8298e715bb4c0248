// What a rescale really costs a torchelastic job, in three rows, each running under two torchrun agents on this
// machine as two pods of an elastic PyTorchJob would: a second agent joins (scale-up 1 -> 2), then leaves on
// SIGTERM (scale-down 2 -> 1, the way a pod deletion stops it); the pause is from the last step at the old size
// to the first step at the new one. REPS times each row:
// - torchrunDefaults: plain torchrun with its defaults, running an UNMODIFIED DDP script
//   (infra/examples/plain-ddp/train.py: no trainscaler code, its own checkpoint every PLAIN_CHECKPOINT_EVERY
//   steps, resumed at start). Timed from the script's stdout as it arrives (each step line is stamped here);
// - torchrunRecommended: the same script under plain torchrun with the rendezvous flags trainscaler recommends
//   (lib/torchelastic/recommended-rendezvous.ts: a 1 s monitor interval, a 2 s last call);
// - hook: the example elastic trainer (infra/examples/elastic-trainer/train.py, which uses trainscaler's hook)
//   under trainscaler's launcher (`python3 -m trainscaler_hook.launch`) with the same flags, timed from the
//   trainer's own step log and split into where each pause went (its phases log).
// Every rep also checks exactly-once at step level: each rescale fell mid-epoch, no step was lost, and no step
// was trained twice beyond the last checkpoint (the plain script redoes the steps since its last checkpoint, at
// most PLAIN_CHECKPOINT_EVERY - 1, by design; the hook trainer checkpoints at the agreed stop and redoes none).
// A rep that breaks this fails the bench.
// Run: npm run bench:rescale [-- --reps N] [-- --json]
//      [-- --only hook|torchrunRecommended|torchrunDefaults|torchrunRecommendedFlags|launcherUnmodified|
//                 launcherShortLastCall]
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
  readPhaseLogs,
  readStepLogs,
  rescaleBreakdown,
  rescalePause,
  worldChanges,
} from '../support/elastic-train-logs.js';
import {
  type AgentLine,
  accountSteps,
  lineReader,
  parseAgentLine,
  parseScriptLine,
  type ScriptLine,
  STDOUT_BREAKDOWN_PARTS,
  type StepLine,
  stdoutBreakdown,
  stdoutPause,
} from '../support/step-lines.js';

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
const PLAIN_SCRIPT = join(REPO_ROOT, 'infra', 'examples', 'plain-ddp', 'train.py');
/** The plain script's checkpoint interval: a restart redoes at most this - 1 steps, or this many when rank 0 was
 * stopped while saving the next checkpoint. */
const PLAIN_CHECKPOINT_EVERY = 50;
/** The example trainer's periodic checkpoint (its TRAIN_CHECKPOINT_EVERY default): its bound when a peer dies. */
const HOOK_CHECKPOINT_EVERY = 20;
// Both scripts' epochs are long enough that no rescale here falls at an epoch's end (asserted).
const DATASET_SIZE = 400_000;
const PAUSE_TIMEOUT_MS = 150_000;

type Script = 'hookTrainer' | 'plain';
type Parts = Record<string, number>;
// The parts a pause is split into: the hook trainer logs its phases; of the plain script only its stdout and
// torchrun's log are seen.
const PARTS: Record<Script, string[]> = { hookTrainer: BREAKDOWN_PARTS, plain: STDOUT_BREAKDOWN_PARTS };

interface Launch {
  command: string;
  args: string[];
  script: Script;
}

// Plain torchrun on torch >= 2.4 needs this for a scale-up to work at all: without it the joining agent waits
// for the shared store's address until the 60 s store timeout (measured on torch 2.15.0; the launcher sets it
// itself: infra/sidecar/python/trainscaler_hook/launch.py, NO_SHARED_STORE_ENV). Ignored by torch 1.13.
const TORCHRUN_ENV = { TORCH_DISABLE_SHARE_RDZV_TCP_STORE: '1' };
// torch 1.13's torchrun fails on Python 3.11 unless the workers' output is redirected (its Std enum); --tee
// copies it back to the agent's stdout, read here. torch 2 passes the workers' stdout through as it is.
const TEE = TORCH_VERSION.startsWith('1.') ? ['--redirects=1', '--tee=1'] : [];

/** The three rows of issue 43, in the order printed: the hook, torchrun with the recommended flags, its defaults. */
export const RENDEZVOUS: Record<string, Launch> = {
  hook: {
    command: PYTHON, // RECOMMENDED_LAUNCHER's python3, the one with torch
    args: [...RECOMMENDED_LAUNCHER.slice(1), ...recommendedTorchrunFlags()],
    script: 'hookTrainer',
  },
  torchrunRecommended: { command: TORCHRUN, args: recommendedTorchrunFlags(), script: 'plain' },
  torchrunDefaults: { command: TORCHRUN, args: [], script: 'plain' },
};

/** Run only when named with --only. */
const EXTRA: Record<string, Launch> = {
  // the example (hook) trainer under plain torchrun with the recommended flags: what they do without the launcher
  torchrunRecommendedFlags: { command: TORCHRUN, args: recommendedTorchrunFlags(), script: 'hookTrainer' },
  // the unmodified script under trainscaler's launcher: what the launcher alone gives a script without the hook
  // (its warm worker starts and graceful leave need no change to the script; the stop agreement does)
  launcherUnmodified: {
    command: PYTHON,
    args: [...RECOMMENDED_LAUNCHER.slice(1), ...recommendedTorchrunFlags()],
    script: 'plain',
  },
  // the launcher polls every 0.1 s: does a shorter last call and monitor interval still form one world?
  launcherShortLastCall: {
    command: PYTHON,
    args: [...RECOMMENDED_LAUNCHER.slice(1), '--monitor_interval=0.5', '--rdzv_conf=last_call_timeout=1'],
    script: 'hookTrainer',
  },
};

interface Pauses {
  scaleUp: number[];
  scaleDown: number[];
  upParts: Parts[];
  downParts: Parts[];
  /** samples processed twice within an epoch (the hook trainer's exactly-once check) */
  duplicates: number;
  /** steps trained again after each rep's scale-up / scale-down (beyond them: a failed rep) */
  redoneUp: number[];
  redoneDown: number[];
  checkpointEvery: number;
}

/** What one rep sees of its job: its steps, the pause of a rescale, and the exactly-once check at the end. */
interface Observed {
  stepsAt(world: number, after: number): number;
  pause(from: number, to: number, after: number): number | undefined;
  breakdown(from: number, to: number, after: number): Parts | undefined;
  /** steps redone by the scale-up and the scale-down; throws when exactly-once (at step level) broke */
  check(): { up: number; down: number; duplicates: number };
}

function agentArgs(launch: Launch, port: number, dir: string): string[] {
  const elastic = [
    '--nnodes=1:4', // an elasticPolicy whose max is not reached: the rendezvous waits last_call_timeout
    '--nproc_per_node=1',
    '--rdzv_backend=c10d',
    `--rdzv_endpoint=127.0.0.1:${port}`,
    '--rdzv_id=bench',
    '--max_restarts=10',
  ];
  if (launch.script === 'hookTrainer')
    return [...launch.args, ...elastic, '--redirects=2', '--tee=1', TRAINER];
  return [
    ...launch.args,
    ...elastic,
    ...TEE,
    PLAIN_SCRIPT,
    `--checkpoint-dir=${join(dir, 'checkpoints')}`,
    `--checkpoint-every=${PLAIN_CHECKPOINT_EVERY}`,
    `--dataset-size=${DATASET_SIZE}`,
  ];
}

function agentEnv(name: string, launch: Launch, dir: string): NodeJS.ProcessEnv {
  const common = {
    ...process.env,
    OMP_NUM_THREADS: '1',
    // the launcher is a module of the hook, beside the script, not in it
    ...(launch.command === TORCHRUN
      ? TORCHRUN_ENV
      : { PYTHONPATH: join(REPO_ROOT, 'infra', 'sidecar', 'python') }),
  };
  // An unmodified script, nothing of trainscaler's; torchrun's agent logs at INFO when its rendezvous rounds
  // begin and complete (it changes nothing else), which splits the plain rows' pauses.
  if (launch.script === 'plain') return { ...common, LOGLEVEL: 'INFO' };
  return {
    ...common,
    PYTHONPATH: join(REPO_ROOT, 'infra', 'sidecar', 'python'),
    TRAIN_NODE_NAME: name,
    TRAIN_CHECKPOINT_DIR: join(dir, 'checkpoints'),
    TRAIN_LOG_DIR: join(dir, 'logs'),
    TRAIN_DATASET_SIZE: String(DATASET_SIZE),
    TRAIN_CHECKPOINT_EVERY: String(HOOK_CHECKPOINT_EVERY),
    TRAINSCALER_HOOK_URL: 'http://127.0.0.1:9', // no sidecar here: the hook drops its reports quietly
  };
}

/** The plain script's lines from an agent's stdout and the agent's own from its stderr, stamped as they
 * arrive (the script cooperates in nothing). */
function readScriptOutput(agent: Started, lines: ScriptLine[], agentLines: AgentLine[]): void {
  const stdout = lineReader();
  agent.child.stdout?.on('data', (chunk: Buffer) => {
    for (const { line, t } of stdout(chunk.toString(), Date.now() / 1000)) {
      const parsed = parseScriptLine(line, t);
      if (parsed) lines.push(parsed);
    }
  });
  const stderr = lineReader();
  agent.child.stderr?.on('data', (chunk: Buffer) => {
    for (const { line, t } of stderr(chunk.toString(), Date.now() / 1000)) {
      const parsed = parseAgentLine(line, t);
      if (parsed) agentLines.push(parsed);
    }
  });
}

function failIf(problems: string[], what: string): void {
  if (problems.length > 0)
    throw new Error(`${what}: exactly-once at step level broke:\n- ${problems.join('\n- ')}`);
}

function observePlain(lines: ScriptLine[], agentLines: AgentLine[]): Observed {
  const steps = () => lines.filter((l): l is StepLine => l.kind === 'step');
  return {
    stepsAt: (world, after) => steps().filter((l) => l.world === world && l.t >= after).length,
    pause: (from, to, after) => stdoutPause(lines, from, to, after),
    breakdown: (from, to, after) => {
      const parts = stdoutBreakdown(lines, agentLines, from, to, after);
      return parts ? { ...parts } : undefined;
    },
    check() {
      const { restarts, problems } = accountSteps(lines, PLAIN_CHECKPOINT_EVERY);
      for (const r of restarts)
        if (r.midEpoch !== true)
          problems.push(
            `the restart ${r.fromWorld} -> ${r.toWorld} after step ${r.lastStep} did not fall mid-epoch`,
          );
      const up = restarts.filter((r) => r.toWorld > r.fromWorld);
      const down = restarts.filter((r) => r.toWorld < r.fromWorld);
      if (up.length === 0 || down.length === 0)
        problems.push(
          `expected a scale-up and a scale-down, saw restarts ${restarts.map((r) => `${r.fromWorld}->${r.toWorld}`).join(', ')}`,
        );
      failIf(problems, 'the plain script');
      const sum = (rs: typeof restarts) => rs.reduce((total, r) => total + r.redone, 0);
      return { up: sum(up), down: sum(down), duplicates: 0 };
    },
  };
}

function observeHookTrainer(dir: string): Observed {
  const logs = join(dir, 'logs');
  return {
    stepsAt: (world, after) => readStepLogs(logs).filter((r) => r.world === world && r.t >= after).length,
    pause: (from, to, after) => rescalePause(readStepLogs(logs), from, to, after),
    breakdown: (from, to, after) => {
      const parts = rescaleBreakdown(readStepLogs(logs), readPhaseLogs(logs), from, to, after);
      return parts ? { ...parts } : undefined;
    },
    check() {
      const records = readStepLogs(logs);
      const changes = worldChanges(records);
      const problems: string[] = [];
      for (const c of changes) {
        const what = `the world change ${c.fromWorld} -> ${c.toWorld} after step ${c.lastStep}`;
        if (c.lost > 0) problems.push(`${what} lost ${c.lost} steps`);
        if (c.redone > HOOK_CHECKPOINT_EVERY - 1) problems.push(`${what} redid ${c.redone} steps`);
        if (!c.midEpoch) problems.push(`${what} did not fall mid-epoch`);
      }
      failIf(problems, 'the example trainer');
      let duplicates = 0;
      for (const epoch of committedSamples(records).values()) duplicates += epoch.duplicates.length;
      const sum = (up: boolean) =>
        changes.filter((c) => c.toWorld > c.fromWorld === up).reduce((total, c) => total + c.redone, 0);
      return { up: sum(true), down: sum(false), duplicates };
    },
  };
}

async function stepsAt(job: Observed, world: number, after: number, count: number): Promise<void> {
  await waitUntil(
    () => job.stepsAt(world, after) >= count || undefined,
    PAUSE_TIMEOUT_MS,
    `${count} steps at world size ${world}`,
  );
}

async function measure(name: string, settings: Launch): Promise<Pauses> {
  const result: Pauses = {
    scaleUp: [],
    scaleDown: [],
    upParts: [],
    downParts: [],
    duplicates: 0,
    redoneUp: [],
    redoneDown: [],
    checkpointEvery: settings.script === 'plain' ? PLAIN_CHECKPOINT_EVERY : HOOK_CHECKPOINT_EVERY,
  };
  for (let rep = 0; rep < REPS; rep++) {
    const dir = mkdtempSync(join(tmpdir(), 'trainscaler-rescale-'));
    const port = await freePort();
    const lines: ScriptLine[] = [];
    const agentLines: AgentLine[] = [];
    const job = settings.script === 'plain' ? observePlain(lines, agentLines) : observeHookTrainer(dir);
    const agent = (agentName: string) => {
      const started = start(`torchrun-${agentName}`, settings.command, agentArgs(settings, port, dir), {
        env: agentEnv(agentName, settings, dir),
      });
      if (settings.script === 'plain') readScriptOutput(started, lines, agentLines);
      return started;
    };
    const first = agent('worker-0');
    let second: Started | undefined;
    const output = () => `${first.output().slice(-3000)}\n${second?.output().slice(-3000) ?? ''}`;
    const pauseTo = (from: number, to: number, after: number) =>
      waitUntil(() => job.pause(from, to, after), PAUSE_TIMEOUT_MS, `first step at size ${to}`, output);
    try {
      await stepsAt(job, 1, 0, 20);
      const joined = Date.now() / 1000;
      second = agent('worker-1');
      result.scaleUp.push(await pauseTo(1, 2, joined));
      await stepsAt(job, 2, joined, 20);
      const up = job.breakdown(1, 2, joined);
      if (up) result.upParts.push(up);
      const left = Date.now() / 1000;
      await stop(second, 30_000); // kubelet: SIGTERM, SIGKILL after the grace period
      result.scaleDown.push(await pauseTo(2, 1, left));
      await stepsAt(job, 1, left, 5);
      const down = job.breakdown(2, 1, left);
      if (down) result.downParts.push(down);
      const checked = job.check();
      result.redoneUp.push(checked.up);
      result.redoneDown.push(checked.down);
      result.duplicates += checked.duplicates;
    } catch (error) {
      throw new Error(`${name}, rep ${rep + 1}: ${(error as Error).message}\n${output()}`);
    } finally {
      if (second) await stop(second, 5_000);
      await stop(first, 5_000);
      rmSync(dir, { recursive: true, force: true });
    }
    say(
      `  rep ${rep + 1}: scale-up ${fmt(result.scaleUp.at(-1))} s, scale-down ${fmt(result.scaleDown.at(-1))} s; steps redone ${result.redoneUp.at(-1)} / ${result.redoneDown.at(-1)} (checkpoint every ${result.checkpointEvery})`,
    );
    say(`    up:   ${partsLine(result.upParts.at(-1))}`);
    say(`    down: ${partsLine(result.downParts.at(-1))}`);
  }
  return result;
}

// With --json the human lines go to stderr: stdout carries the one JSON object.
function say(text: string): void {
  if (values.json) console.error(text);
  else console.log(text);
}
const fmt = (s: number | undefined) => (s === undefined ? '-' : s.toFixed(1));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x: number) => Math.round(x * 10) / 10;

const partsLine = (parts: Parts | undefined) =>
  parts
    ? Object.entries(parts)
        .map(([k, v]) => `${k} ${v.toFixed(1)}`)
        .join(', ')
    : '-';
const medianParts = (all: Parts[]): Parts | undefined => {
  const first = all[0];
  if (!first) return undefined;
  return Object.fromEntries(
    Object.keys(first).map((k) => [k, round(median(all.map((p) => p[k] ?? 0)) ?? 0)]),
  );
};

const chosen = values.only
  ? Object.entries({ ...RENDEZVOUS, ...EXTRA }).filter(([name]) => name === values.only)
  : Object.entries(RENDEZVOUS);
if (chosen.length === 0)
  throw new Error(`--only must be one of ${Object.keys({ ...RENDEZVOUS, ...EXTRA }).join(', ')}`);
const results: Record<string, Pauses> = {};
const scripts: Record<string, Script> = {};
for (const [name, settings] of chosen) {
  say(
    `${name}: ${settings.script === 'plain' ? 'the unmodified script' : 'the example trainer (hook)'} under ${[settings.command, ...settings.args].join(' ')}, ${REPS} repetitions:`,
  );
  results[name] = await measure(name, settings);
  scripts[name] = settings.script;
}
say(
  `\npause from the last step at the old size to the first at the new one (median of reps, seconds; torch ${TORCH_VERSION}):`,
);
say('| row | script | scale-up 1->2 | scale-down 2->1 | steps redone, max up / down | samples repeated |');
say('| --- | --- | ---: | ---: | ---: | ---: |');
for (const [name, r] of Object.entries(results)) {
  const plain = scripts[name] === 'plain';
  say(
    `| ${name} | ${plain ? 'unmodified' : 'hook'} | ${fmt(median(r.scaleUp))} | ${fmt(median(r.scaleDown))} | ${Math.max(...r.redoneUp)} / ${Math.max(...r.redoneDown)} (checkpoint every ${r.checkpointEvery}) | ${plain ? '-' : r.duplicates} |`,
  );
}
for (const script of ['hookTrainer', 'plain'] as const) {
  const rows = Object.entries(results).filter(([name]) => scripts[name] === script);
  if (rows.length === 0) continue;
  say(
    script === 'plain'
      ? "\nwhere the unmodified script's pause went (from its stdout and torchrun's log; median of reps per part, seconds):"
      : "\nwhere the hook trainer's pause went (from its phases log; median of reps per part, seconds):",
  );
  say(`| row | direction | ${PARTS[script].join(' | ')} |`);
  say(`| --- | --- |${PARTS[script].map(() => ' ---: |').join('')}`);
  for (const [name, r] of rows) {
    for (const [direction, all] of [
      ['scale-up', r.upParts],
      ['scale-down', r.downParts],
    ] as const) {
      const parts = medianParts(all);
      if (parts) say(`| ${name} | ${direction} | ${PARTS[script].map((k) => fmt(parts[k])).join(' | ')} |`);
    }
  }
}
if (values.json) {
  const out = Object.fromEntries(
    Object.entries(results).map(([k, v]) => [
      k,
      {
        scaleUp: v.scaleUp.map(round),
        scaleDown: v.scaleDown.map(round),
        stepsRedone: { scaleUp: v.redoneUp, scaleDown: v.redoneDown, checkpointEvery: v.checkpointEvery },
        breakdown: { scaleUp: medianParts(v.upParts), scaleDown: medianParts(v.downParts) },
      },
    ]),
  );
  console.log(JSON.stringify({ torch: TORCH_VERSION, ...out }));
}
