// Statistical efficiency, played from the gradient statistics the Pollux artifact measured
// (traces/APP/validation-B.csv: grad_sqr and grad_var per epoch of a run at global batch B).
//
// A larger global batch averages more samples per step, so a step makes more progress, but less than
// proportionally once the batch exceeds the gradient noise. With the gradient's squared norm |g|^2
// (grad_sqr) and the variance of one B0-sample estimate (grad_var) at the current point of training, a step
// at batch B = s * B0 makes the progress of
//
//     gain(B) = (grad_var + grad_sqr) / (grad_var / s + grad_sqr)
//
// steps at B0, the app's smallest measured batch (McCandlish et al., "An Empirical Model of Large-Batch
// Training", 2018; Pollux, OSDI'21, section 3.1: efficiency E = gain / s). Progress is counted in those B0
// steps, and a job completes when it reaches the progress the measured runs reached in the app's epochs,
// whatever its batch: the same target for every policy. The statistics move as training goes on (the noise
// grows), so they are taken at the job's current epoch, interpolated linearly between the measured batches
// that bracket B (clamped outside them).
//
// Checked against the measurements (test/unit/sim/statistical-efficiency.test.ts): at a fixed B up to 8x B0,
// the steps this predicts to the target are within 2% of the steps the run at B took, for every app but
// yolov3, whose runs above 2x B0 took fewer steps than their statistics predict (9% fewer at 8x, 37% at 64x).
// The Pollux artifact's simulator plays the same formula on the same statistics.

export interface GradientStatsRow {
  /** Progress at the end of the epoch, in steps at B0. */
  progress: number;
  /** Optimizer steps the measured run at its batch had taken by then. */
  iteration: number;
  gradSqr: number;
  gradVar: number;
}

export interface GradientNoiseTable {
  /** Measured global batches, ascending; the first is B0, the unit of progress. */
  batches: readonly number[];
  /** rows[i][e]: the run at batches[i], epoch e. */
  rows: ReadonlyArray<readonly GradientStatsRow[]>;
  /** Progress at the end of each epoch: the least any measured run had made (the artifact's epoch boundaries). */
  epochEnds: readonly number[];
}

export class StatisticalEfficiencyError extends Error {
  override name = 'StatisticalEfficiencyError';
}

/** The table of one app from its runs at each measured batch; epochs are those every run has. */
export function gradientNoiseTable(
  runs: ReadonlyMap<number, readonly GradientStatsRow[]>,
): GradientNoiseTable {
  const batches = [...runs.keys()].sort((a, b) => a - b);
  if (batches.length === 0) throw new StatisticalEfficiencyError('no measured batch');
  for (const b of batches)
    if (!(Number.isFinite(b) && b > 0)) throw new StatisticalEfficiencyError(`batch ${b} is not > 0`);
  const rows = batches.map((b) => runs.get(b) ?? []);
  const epochs = Math.min(...rows.map((r) => r.length));
  if (epochs === 0) throw new StatisticalEfficiencyError(`the run at batch ${batches[0]} has no epoch`);
  const epochEnds: number[] = [];
  for (let e = 0; e < epochs; e++) {
    const end = Math.min(...rows.map((r) => r[e]?.progress ?? Number.POSITIVE_INFINITY));
    if (!(end > (epochEnds[e - 1] ?? 0)))
      throw new StatisticalEfficiencyError(`epoch ${e}: progress ${end} does not grow`);
    epochEnds.push(end);
  }
  return { batches, rows: rows.map((r) => r.slice(0, epochs)), epochEnds };
}

/** Progress (B0 steps) at which a job completes. */
export function targetProgress(table: GradientNoiseTable): number {
  return table.epochEnds[table.epochEnds.length - 1] ?? 0;
}

/** The epoch a job at `progress` is in (the last one once the target is reached). */
export function epochAt(table: GradientNoiseTable, progress: number): number {
  const ends = table.epochEnds;
  let lo = 0;
  let hi = ends.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((ends[mid] ?? 0) > progress) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** grad_sqr and grad_var at `batch` in `epoch`: linear between the measured batches around it, clamped. */
export function gradientStatsAt(
  table: GradientNoiseTable,
  batch: number,
  epoch: number,
): { gradSqr: number; gradVar: number } {
  const { batches, rows } = table;
  const at = (i: number) => {
    const row = rows[i]?.[epoch];
    return { gradSqr: row?.gradSqr ?? 0, gradVar: row?.gradVar ?? 0 };
  };
  const upper = batches.findIndex((b) => b >= batch);
  if (upper === -1) return at(batches.length - 1);
  if (upper === 0 || batches[upper] === batch) return at(upper);
  const lo = at(upper - 1);
  const hi = at(upper);
  const bLo = batches[upper - 1] ?? batch;
  const w = (batch - bLo) / ((batches[upper] ?? batch) - bLo);
  return {
    gradSqr: lo.gradSqr + w * (hi.gradSqr - lo.gradSqr),
    gradVar: lo.gradVar + w * (hi.gradVar - lo.gradVar),
  };
}

/** Progress (B0 steps) one optimizer step at global batch `batch` makes in `epoch`. */
export function progressPerStep(table: GradientNoiseTable, batch: number, epoch: number): number {
  const scale = batch / (table.batches[0] ?? batch);
  const { gradSqr, gradVar } = gradientStatsAt(table, batch, epoch);
  const denominator = gradVar / scale + gradSqr;
  // No measured signal (both zero): a step counts as one B0 step, as in the artifact's goodput function.
  return denominator > 0 ? (gradVar + gradSqr) / denominator : 1;
}

/** Samples a job keeping global batch `batch` throughout processes to reach the target. */
export function samplesToTarget(table: GradientNoiseTable, batch: number): number {
  let steps = 0;
  let previous = 0;
  table.epochEnds.forEach((end, epoch) => {
    steps += (end - previous) / progressPerStep(table, batch, epoch);
    previous = end;
  });
  return steps * batch;
}

export interface ProgressAdvance {
  /** Progress (B0 steps) at the end of the interval. */
  progress: number;
  /** Optimizer steps taken in it. */
  steps: number;
  /** Seconds of it spent training (the rest went to the rescale pause, or came after completion). */
  effectiveSeconds: number;
  /** When the target was reached inside the interval. */
  completedAt?: number;
}

/**
 * Progress over [from, to) at one step every `stepTime` seconds at global batch `batch`, none before
 * `stalledUntil`; the rate changes at each epoch boundary crossed, and completion is the exact instant the
 * target is reached.
 */
export function advanceProgress(input: {
  table: GradientNoiseTable;
  progress: number;
  batch: number;
  stepTime: number;
  from: number;
  to: number;
  stalledUntil: number;
}): ProgressAdvance {
  const { table, batch, stepTime } = input;
  const start = Math.max(input.from, input.stalledUntil);
  const target = targetProgress(table);
  let progress = input.progress;
  let t = start;
  let steps = 0;
  if (!(stepTime > 0) || input.to <= start) return { progress, steps, effectiveSeconds: 0 };
  while (t < input.to && progress < target) {
    const epoch = epochAt(table, progress);
    const end = table.epochEnds[epoch] ?? target;
    const perStep = progressPerStep(table, batch, epoch);
    const stepsToEnd = (end - progress) / perStep;
    const stepsLeft = (input.to - t) / stepTime;
    if (stepsToEnd > stepsLeft) {
      progress += stepsLeft * perStep;
      steps += stepsLeft;
      t = input.to;
    } else {
      progress = end;
      steps += stepsToEnd;
      t += stepsToEnd * stepTime;
    }
  }
  const advance: ProgressAdvance = { progress, steps, effectiveSeconds: t - start };
  if (progress >= target && input.progress < target) advance.completedAt = t;
  return advance;
}
