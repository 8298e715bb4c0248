// Turns progress reports into a recent mean step time and counter increments. Reports carry CUMULATIVE
// step (and sample) counts, whoever sends them (the Python hook, a log line, a scraped counter): a lost or
// repeated report then loses nothing, and reports may be coalesced freely.

import type { JobShape } from './config.js';

export interface ProgressReport {
  /** Steps completed so far by this worker (monotonic while the trainer runs). */
  step: number;
  /** Samples processed so far by this worker; derived from the local batch size when absent. */
  samples?: number;
  /** Epoch seconds when the trainer reached `step`. */
  at: number;
  /** The job's scale as the trainer sees it now (after an elastic resize the pod's env is stale). */
  shape?: Partial<JobShape>;
}

export interface ProgressIncrement {
  steps: number;
  samples: number;
  /** The trainer went back (restart, resume from an older checkpoint): the window was cleared. */
  restarted: boolean;
}

interface Point {
  at: number;
  step: number;
}

/** How many points the window keeps at most: enough resolution, bounded memory at any report rate. */
const POINTS_PER_WINDOW = 120;

/**
 * A step that comes this long after the previous one (and over 3 step times) ends a pause: the first step of
 * a world torchelastic re-formed after a rescale (5-45 s measured) rather than a slow step.
 */
const MIN_PAUSE_SECONDS = 2;

export class ProgressTracker {
  #points: Point[] = [];
  #latest: Point | undefined;
  #lastSamples: number | undefined;
  #lastMean: number | undefined;
  #resumedAt: number | undefined;
  /** Seconds per step between the last two reports that moved the step count. */
  #stepInterval: number | undefined;
  #shape: JobShape;

  constructor(
    private readonly windowSeconds: number,
    shape: JobShape,
  ) {
    this.#shape = { ...shape };
  }

  get shape(): Readonly<JobShape> {
    return this.#shape;
  }

  /**
   * Samples this worker has processed by the trainer's own count: the last cumulative count it reported,
   * or steps x local batch size. Unlike the samples counter this survives a pod restart when the trainer
   * resumes its counts from a checkpoint, so summed over workers it is the job's progress.
   */
  get trainerSamples(): number | undefined {
    if (this.#lastSamples !== undefined) return this.#lastSamples;
    const batch = Number(this.#shape.local_batch_size);
    return this.#latest !== undefined && batch > 0 ? this.#latest.step * batch : undefined;
  }

  /** Points kept for the window (bounded whatever the report rate). */
  get windowPoints(): number {
    return this.#points.length;
  }

  /** Epoch seconds of the last report that moved the step count, if any. */
  get lastProgressAt(): number | undefined {
    return this.#latest?.at;
  }

  /**
   * Epoch seconds of the first step after the trainer last started, restarted or resumed from a pause in its
   * progress: the first step of the current world. What a rescale cost is measured up to.
   */
  get resumedAt(): number | undefined {
    return this.#resumedAt;
  }

  observe(report: ProgressReport): ProgressIncrement {
    if (!Number.isFinite(report.step) || report.step < 0 || !Number.isFinite(report.at))
      throw new RangeError(`invalid progress report: step ${report.step} at ${report.at}`);
    const reshaped = report.shape ? this.#applyShape(report.shape) : false;
    const previous = this.#latest;
    const restarted = previous !== undefined && report.step < previous.step;
    if (restarted || reshaped) {
      // Step times measured at another scale, or before a restart, must not blend into the new ones.
      this.#points = [];
      this.#lastMean = undefined;
    }
    const steps = previous && !restarted ? report.step - previous.step : 0;
    const pause = Math.max(MIN_PAUSE_SECONDS, 3 * (this.#stepInterval ?? 0));
    if (previous === undefined || restarted || (steps > 0 && report.at - previous.at > pause))
      this.#resumedAt = report.at;
    if (restarted) this.#stepInterval = undefined;
    else if (previous && steps > 0) this.#stepInterval = (report.at - previous.at) / steps;
    const samples = this.#samplesDelta(report, steps, restarted);
    if (previous === undefined || report.step !== previous.step || restarted || reshaped) {
      const point = { at: report.at, step: report.step };
      this.#latest = point;
      this.#record(point);
      this.#trim(report.at);
    }
    return { steps, samples, restarted };
  }

  /**
   * Mean seconds per step over the recent window: from the last point at or before the window's start
   * (so a step longer than the window still has a value) to the latest report. Undefined before two
   * reports, and once the trainer has made no progress for longer than both the window and twice its
   * last step time: a stalled job has no current step time, and no value beats an invented one.
   */
  meanStepTime(now: number): number | undefined {
    const latest = this.#latest;
    if (latest === undefined) return undefined;
    const idle = now - latest.at;
    if (idle > this.windowSeconds && idle > 2 * (this.#lastMean ?? 0)) return undefined;
    this.#trim(now);
    const anchor = this.#points[0];
    if (anchor === undefined || latest.step <= anchor.step || latest.at <= anchor.at) return this.#lastMean;
    this.#lastMean = (latest.at - anchor.at) / (latest.step - anchor.step);
    return this.#lastMean;
  }

  #applyShape(update: Partial<JobShape>): boolean {
    let changed = false;
    for (const key of ['replicas', 'nodes', 'local_batch_size'] as const) {
      const value = update[key];
      if (value !== undefined && value !== this.#shape[key]) {
        this.#shape[key] = value;
        changed = true;
      }
    }
    return changed;
  }

  #samplesDelta(report: ProgressReport, steps: number, restarted: boolean): number {
    if (report.samples === undefined) {
      const batch = Number(this.#shape.local_batch_size);
      return batch > 0 ? steps * batch : 0;
    }
    const last = this.#lastSamples;
    this.#lastSamples = report.samples;
    if (last === undefined || restarted || report.samples < last) return 0;
    return report.samples - last;
  }

  #record(point: Point): void {
    const last = this.#points[this.#points.length - 1];
    const spacing = this.windowSeconds / POINTS_PER_WINDOW;
    if (last !== undefined && point.step > last.step && point.at - last.at < spacing) return;
    this.#points.push(point);
  }

  /** Drops points before the window, keeping the newest of them as the anchor. */
  #trim(now: number): void {
    const start = now - this.windowSeconds;
    let drop = 0;
    while (
      drop + 1 < this.#points.length &&
      (this.#points[drop + 1]?.at ?? Number.POSITIVE_INFINITY) <= start
    )
      drop += 1;
    if (drop > 0) this.#points.splice(0, drop);
  }
}
