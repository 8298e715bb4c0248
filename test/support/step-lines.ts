// Reads what an unmodified training script prints (infra/examples/plain-ddp/train.py: one line per step, one
// when it resumes, one per checkpoint), timestamped by the reader as the lines arrive, and derives what the
// rescale benchmark asserts: the pause between world sizes, and that a restart redid only the steps after the
// script's last checkpoint (fewer than its checkpoint interval) and skipped none.

export interface StepLine {
  kind: 'step';
  /** seconds since the epoch, when the reader received the line */
  t: number;
  step: number;
  epoch: number;
  /** the step's batch in its epoch, 1-based, of `batches` */
  batch: number;
  batches: number;
  rank: number;
  world: number;
}

export interface ResumeLine {
  kind: 'resume';
  t: number;
  /** the checkpoint's step (0: none) */
  step: number;
  epoch: number;
  rank: number;
  world: number;
}

export interface CheckpointLine {
  kind: 'checkpoint';
  t: number;
  step: number;
  rank: number;
  world: number;
}

export type ScriptLine = StepLine | ResumeLine | CheckpointLine;

// torchrun's --tee prefixes each worker line with its role and local rank ("[default0]:"). A worker killed
// between print()'s two writes leaves its line without "\n": the next line of that agent's output (its new
// worker's "resumed ...") is appended to it, so the resume and checkpoint lines are found anywhere in a line.
const STEP = /^(?:\[[^\]]*\]:)?step (\d+) epoch (\d+) batch (\d+)\/(\d+) rank (\d+)\/(\d+)(?: |$)/;
const RESUME = /resumed from step (\d+) epoch (\d+) sample \d+ rank (\d+)\/(\d+)$/;
const CHECKPOINT = /checkpoint step (\d+) rank (\d+)\/(\d+)$/;

const numbers = (match: RegExpExecArray) => match.slice(1).map(Number);

/** One line of the script's output, or undefined for anything else (torchrun's logs, warnings). */
export function parseScriptLine(line: string, t: number): ScriptLine | undefined {
  const text = line.trimEnd();
  const resume = RESUME.exec(text);
  if (resume) {
    const [step = 0, epoch = 0, rank = 0, world = 0] = numbers(resume);
    return { kind: 'resume', t, step, epoch, rank, world };
  }
  const checkpoint = CHECKPOINT.exec(text);
  if (checkpoint) {
    const [step = 0, rank = 0, world = 0] = numbers(checkpoint);
    return { kind: 'checkpoint', t, step, rank, world };
  }
  const stepLine = STEP.exec(text);
  if (stepLine) {
    const [step = 0, epoch = 0, batch = 0, batches = 0, rank = 0, world = 0] = numbers(stepLine);
    return { kind: 'step', t, step, epoch, batch, batches, rank, world };
  }
  return undefined;
}

/**
 * Splits a stream into lines as chunks arrive: feed each chunk with its arrival time, get the complete lines
 * it ended (a line's time is when its last part arrived); a partial line waits for the next chunk.
 */
export function lineReader(): (chunk: string, t: number) => { line: string; t: number }[] {
  let partial = '';
  return (chunk, t) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    return parts.map((line) => ({ line, t }));
  };
}

/**
 * The pause of a rescale from the script's output: from the last step line at the old world size to the
 * first step line at the new one after `after` (epoch seconds). Undefined while the new size has not stepped.
 */
export function stdoutPause(
  lines: ScriptLine[],
  from: number,
  to: number,
  after: number,
): number | undefined {
  const window = pauseWindow(lines, from, to, after);
  return window && window.first.t - window.last.t;
}

/** The old world's last step line before the new world's first one after `after`: the pause's two ends. */
function pauseWindow(
  lines: ScriptLine[],
  from: number,
  to: number,
  after: number,
): { last: StepLine; first: StepLine } | undefined {
  const steps = lines.filter((l): l is StepLine => l.kind === 'step');
  const first = steps.find((l) => l.t >= after && l.world === to);
  if (!first) return undefined;
  const last = steps.filter((l) => l.world === from && l.t <= first.t).at(-1);
  return last && { last, first };
}

/** One restart of the script (a world formed again) as rank 0 printed it. */
export interface Restart {
  /** when the new world's rank 0 said it resumed */
  t: number;
  fromWorld: number;
  toWorld: number;
  /** the old world's last step */
  lastStep: number;
  /** the step of the checkpoint it resumed from */
  resumedFrom: number;
  /** steps trained again: those after the checkpoint the old world had already done */
  redone: number;
  /** the old world stopped inside an epoch and the new one went on in the same epoch (unknown: undefined) */
  midEpoch?: boolean;
}

export interface StepAccounting {
  restarts: Restart[];
  /** what breaks "no step lost, none redone beyond the last checkpoint"; empty when it held */
  problems: string[];
}

/**
 * Checks the script's steps across its restarts, from rank 0's lines (rank 0 exists in every world and is the
 * one that checkpoints), in the order they arrived: every world resumes from the last checkpoint rank 0
 * reported (0: none), steps follow one another without a gap or a repeat inside a world, and a restart
 * redoes at most `checkpointEvery` steps: the ones since that checkpoint, `checkpointEvery - 1` at most, or
 * `checkpointEvery` when rank 0 was stopped while saving the next one (seen: the step line printed, the save
 * cut short, the previous checkpoint whole); more means a checkpoint was
 * missed or lost).
 */
export function accountSteps(lines: ScriptLine[], checkpointEvery: number): StepAccounting {
  const restarts: Restart[] = [];
  const problems: string[] = [];
  let checkpoint = 0;
  let last: StepLine | undefined;
  let next: number | undefined;
  let pending: Restart | undefined; // a restart whose first step is still to come
  let pendingFrom: StepLine | undefined;
  for (const line of lines) {
    if (line.rank !== 0) continue;
    if (line.kind === 'resume') {
      if (line.step !== checkpoint)
        problems.push(
          `rank 0 at world size ${line.world} resumed from step ${line.step}, but the last checkpoint was step ${checkpoint}`,
        );
      if (last) {
        const redone = last.step - line.step;
        pending = {
          t: line.t,
          fromWorld: last.world,
          toWorld: line.world,
          lastStep: last.step,
          resumedFrom: line.step,
          redone,
        };
        pendingFrom = last;
        restarts.push(pending);
        if (redone > checkpointEvery)
          problems.push(
            `the restart at world size ${line.world} redid ${redone} steps (${line.step + 1}..${last.step}): more than the checkpoint interval allows (${checkpointEvery})`,
          );
        if (redone < 0)
          problems.push(
            `the restart at world size ${line.world} resumed from step ${line.step}, after the last step trained (${last.step})`,
          );
      }
      next = line.step + 1;
    } else if (line.kind === 'step') {
      if (next !== undefined && line.step !== next)
        problems.push(
          `step ${line.step} at world size ${line.world} followed step ${next - 1}: ${line.step > next ? `steps ${next}..${line.step - 1} were lost` : 'a step was repeated without a restart'}`,
        );
      if (pending && pendingFrom) {
        pending.midEpoch =
          pendingFrom.batch < pendingFrom.batches && line.epoch === pendingFrom.epoch && line.batch > 1;
        pending = undefined;
      }
      last = line;
      next = line.step + 1;
    } else {
      if (last && line.step !== last.step)
        problems.push(`rank 0 reported a checkpoint of step ${line.step} after step ${last.step}`);
      checkpoint = line.step;
    }
  }
  return { restarts, problems };
}

/** What torchrun's agent logs at INFO (LOGLEVEL=INFO) about a re-formation, stamped as it arrives. */
export interface AgentLine {
  t: number;
  /** the agent starts a rendezvous round (its workers stopped) / the round completed, it starts workers */
  event: 'rendezvousing' | 'rendezvoused';
}

/** A line of a torchrun agent's log (torch 1.13 and 2.x word these the same), or undefined. */
export function parseAgentLine(line: string, t: number): AgentLine | undefined {
  if (line.includes("Rendezvous'ing worker group")) return { t, event: 'rendezvousing' };
  if (line.includes('Rendezvous complete for workers')) return { t, event: 'rendezvoused' };
  return undefined;
}

/** Where a pause of the unmodified script went, in seconds; the parts add up to the pause. */
export interface StdoutBreakdown {
  /** last step at the old size -> the first agent began the new rendezvous (noticing, stopping the workers) */
  stop: number;
  /** -> the last agent's rendezvous completed (last call, heartbeat expiry of a departed agent) */
  rendezvous: number;
  /** -> the last new worker said it resumed (process start, imports, process group, checkpoint load) */
  workerStart: number;
  /** -> the first step at the new size */
  firstStep: number;
}

export const STDOUT_BREAKDOWN_PARTS: (keyof StdoutBreakdown)[] = [
  'stop',
  'rendezvous',
  'workerStart',
  'firstStep',
];

/**
 * The pause of stdoutPause split at what the agents logged and the new workers printed; a mark missing from
 * the window (e.g. agents not at INFO) takes no time, its part moves to the next one.
 */
export function stdoutBreakdown(
  lines: ScriptLine[],
  agents: AgentLine[],
  from: number,
  to: number,
  after: number,
): StdoutBreakdown | undefined {
  const window = pauseWindow(lines, from, to, after);
  if (!window) return undefined;
  const { last, first } = window;
  const inside = (t: number) => t >= last.t && t <= first.t;
  const began = agents.filter((a) => a.event === 'rendezvousing' && inside(a.t)).at(0)?.t;
  const formed = agents.filter((a) => a.event === 'rendezvoused' && inside(a.t)).at(-1)?.t;
  const resumed = lines.filter((l) => l.kind === 'resume' && l.world === to && inside(l.t)).at(-1)?.t;
  const marks = [last.t, began, formed, resumed, first.t];
  const filled: number[] = [];
  for (const mark of marks) filled.push(Math.max(mark ?? filled.at(-1) ?? last.t, filled.at(-1) ?? last.t));
  const part = (i: number) => (filled[i + 1] ?? 0) - (filled[i] ?? 0);
  return { stop: part(0), rendezvous: part(1), workerStart: part(2), firstStep: part(3) };
}
