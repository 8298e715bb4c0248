// Reads the step logs of infra/examples/elastic-trainer/train.py (one JSON line per committed step per rank)
// and derives what the rescale benchmark and tests assert: pauses between world sizes and exactly-once data.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface StepRecord {
  t: number;
  epoch: number;
  step: number;
  world: number;
  worldId: number;
  rank: number;
  ids: number[];
}

export function readStepLogs(dir: string): StepRecord[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
  } catch {
    return [];
  }
  const records: StepRecord[] = [];
  for (const file of files) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let raw: Record<string, unknown>;
      try {
        raw = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue; // a line cut short by a kill mid-write
      }
      records.push({
        t: Number(raw.t),
        epoch: Number(raw.epoch),
        step: Number(raw.step),
        world: Number(raw.world),
        worldId: Number(raw.world_id),
        rank: Number(raw.rank),
        ids: Array.isArray(raw.ids) ? raw.ids.map(Number) : [],
      });
    }
  }
  return records.sort((a, b) => a.t - b.t);
}

/**
 * The pause of a rescale: from the last step logged at the old world size to the first step logged at the
 * new one, both after `after` (epoch seconds). Undefined while the new size has not stepped yet.
 */
export function rescalePause(
  records: StepRecord[],
  from: number,
  to: number,
  after: number,
): number | undefined {
  const later = records.filter((r) => r.t >= after);
  const first = later.find((r) => r.world === to);
  if (!first) return undefined;
  const before = records.filter((r) => r.world === from && r.t <= first.t);
  const last = before[before.length - 1];
  return last ? first.t - last.t : undefined;
}

/**
 * The steps that count: for each (epoch, step) the records of the world that logged it last (a step re-done
 * after a restart from an older checkpoint replaces the lost one). Returns the sample ids of each epoch in step
 * order and the duplicates among them.
 */
export function committedSamples(
  records: StepRecord[],
): Map<number, { ids: number[]; duplicates: number[] }> {
  const latest = new Map<string, StepRecord[]>();
  for (const r of records) {
    const key = `${r.epoch}:${r.step}`;
    const kept = latest.get(key);
    if (!kept || kept[0]?.worldId !== r.worldId) {
      if (!kept || (kept[0]?.t ?? 0) <= r.t) latest.set(key, [r]);
    } else kept.push(r);
  }
  const byEpoch = new Map<number, { ids: number[]; duplicates: number[] }>();
  const steps = [...latest.values()].sort((a, b) => (a[0]?.step ?? 0) - (b[0]?.step ?? 0));
  for (const group of steps) {
    const epoch = group[0]?.epoch ?? 0;
    const entry = byEpoch.get(epoch) ?? { ids: [], duplicates: [] };
    for (const r of group.sort((a, b) => a.rank - b.rank)) entry.ids.push(...r.ids);
    byEpoch.set(epoch, entry);
  }
  for (const entry of byEpoch.values()) {
    const seen = new Set<number>();
    for (const id of entry.ids) {
      if (seen.has(id)) entry.duplicates.push(id);
      seen.add(id);
    }
  }
  return byEpoch;
}

export interface MeasuredThroughput {
  samplesPerSecond: number;
  steps: number;
  seconds: number;
}

/**
 * Samples per second the job committed at world size `world` between `after` and `until` (epoch seconds),
 * from its step logs: the samples of every step after the first counted one, over the time between the first
 * and the last (a step's time is its last rank's record). The first `skip` steps at that size are left out:
 * a new world's first steps include its warm-up. Undefined with fewer than 2 steps to count.
 */
export function throughputAt(
  records: StepRecord[],
  world: number,
  after: number,
  skip = 0,
  until = Number.POSITIVE_INFINITY,
): MeasuredThroughput | undefined {
  const steps = new Map<string, { t: number; samples: number }>();
  for (const r of records) {
    if (r.world !== world || r.t < after || r.t > until) continue;
    const key = `${r.worldId}:${r.step}`;
    const entry = steps.get(key) ?? { t: r.t, samples: 0 };
    entry.t = Math.max(entry.t, r.t);
    entry.samples += r.ids.length;
    steps.set(key, entry);
  }
  const ordered = [...steps.values()].sort((a, b) => a.t - b.t).slice(skip);
  const first = ordered[0];
  const last = ordered[ordered.length - 1];
  if (!first || !last || ordered.length < 2 || !(last.t > first.t)) return undefined;
  const samples = ordered.slice(1).reduce((sum, s) => sum + s.samples, 0);
  return {
    samplesPerSecond: samples / (last.t - first.t),
    steps: ordered.length - 1,
    seconds: last.t - first.t,
  };
}

/** One line of a trainer's phases-<node>.log: when a world formed (start) or stopped (stop). */
export interface PhaseRecord {
  worldId: number;
  rank: number;
  /** Start of a worker: the agent started it, imports done, process group formed, checkpoint loaded. */
  started?: number;
  imported?: number;
  grouped?: number;
  ready?: number;
  /** Stop of a worker at a step boundary: the world agreed to stop, the worker exits. */
  stopping?: number;
  exiting?: number;
}

export function readPhaseLogs(dir: string): PhaseRecord[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.startsWith('phases-') && f.endsWith('.log'));
  } catch {
    return [];
  }
  const records: PhaseRecord[] = [];
  const time = (v: unknown) => (typeof v === 'number' ? v : undefined);
  for (const file of files) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let raw: Record<string, unknown>;
      try {
        raw = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      records.push({
        worldId: Number(raw.world_id),
        rank: Number(raw.rank),
        started: time(raw.started),
        imported: time(raw.imported),
        grouped: time(raw.grouped),
        ready: time(raw.ready),
        stopping: time(raw.stopping),
        exiting: time(raw.exiting),
      });
    }
  }
  return records;
}

/** Where a rescale pause went, in seconds; the parts add up to the pause. */
export interface PauseBreakdown {
  /** last step at the old size -> the last old worker exited (stop agreement, checkpoint, waiting for a signal) */
  stop: number;
  /** -> the agent started the last new worker (agent notices, re-rendezvous, last call, heartbeat expiry) */
  rendezvous: number;
  /** -> its imports were done (python and torch start) */
  imports: number;
  /** -> the gloo process group formed */
  processGroup: number;
  /** -> checkpoint loaded, model wrapped in DDP */
  load: number;
  /** -> the first step at the new size logged */
  firstStep: number;
}

export const BREAKDOWN_PARTS: (keyof PauseBreakdown)[] = [
  'stop',
  'rendezvous',
  'imports',
  'processGroup',
  'load',
  'firstStep',
];

/**
 * The pause of rescalePause split at the phases the trainers logged: each boundary is the latest over the
 * ranks of the world (the first step waits for all of them). A phase a killed worker did not log takes no
 * time (its part moves to the next one). Undefined while the new size has not stepped yet.
 */
export function rescaleBreakdown(
  records: StepRecord[],
  phases: PhaseRecord[],
  from: number,
  to: number,
  after: number,
): PauseBreakdown | undefined {
  const first = records.find((r) => r.t >= after && r.world === to);
  if (!first) return undefined;
  const last = records.filter((r) => r.world === from && r.t <= first.t).at(-1);
  if (!last) return undefined;
  const latest = (worldId: number, key: keyof PhaseRecord) => {
    const times = phases
      .filter((p) => p.worldId === worldId)
      .map((p) => p[key])
      .filter((t): t is number => t !== undefined && t >= last.t && t <= first.t);
    return times.length > 0 ? Math.max(...times) : undefined;
  };
  const marks = [
    last.t,
    latest(last.worldId, 'exiting'),
    latest(first.worldId, 'started'),
    latest(first.worldId, 'imported'),
    latest(first.worldId, 'grouped'),
    latest(first.worldId, 'ready'),
    first.t,
  ];
  // A missing mark is the previous one (that part took no time); marks never run backwards.
  const filled: number[] = [];
  for (const mark of marks) filled.push(Math.max(mark ?? filled.at(-1) ?? last.t, filled.at(-1) ?? last.t));
  const part = (i: number) => (filled[i + 1] ?? 0) - (filled[i] ?? 0);
  return {
    stop: part(0),
    rendezvous: part(1),
    imports: part(2),
    processGroup: part(3),
    load: part(4),
    firstStep: part(5),
  };
}

/** One change of world in the trainer's step logs. */
export interface WorldChange {
  fromWorld: number;
  toWorld: number;
  /** the old world's last step and the new world's first */
  lastStep: number;
  firstStep: number;
  /** steps the new world trained again (it resumed from a checkpoint older than the old world's last step) */
  redone: number;
  /** steps neither world trained (it resumed from past the old world's last step) */
  lost: number;
  /** the new world went on in the epoch the old one stopped in */
  midEpoch: boolean;
}

/** The world changes of a run: its records (every rank's) in time order, wherever the world id changes. */
export function worldChanges(records: StepRecord[]): WorldChange[] {
  const ordered = [...records].sort((a, b) => a.t - b.t);
  const changes: WorldChange[] = [];
  for (let i = 1; i < ordered.length; i++) {
    const last = ordered[i - 1];
    const first = ordered[i];
    if (!last || !first || last.worldId === first.worldId) continue;
    changes.push({
      fromWorld: last.world,
      toWorld: first.world,
      lastStep: last.step,
      firstStep: first.step,
      redone: Math.max(0, last.step - (first.step - 1)),
      lost: Math.max(0, first.step - 1 - last.step),
      midEpoch: last.epoch === first.epoch,
    });
  }
  return changes;
}
