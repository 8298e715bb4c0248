// The simulator's notion of "now": advanced only by the simulation, so runs are reproducible and an
// hour of cluster time costs milliseconds.

/** 2026-01-01T00:00:00Z; any fixed instant works, a real-looking one keeps timestamps readable. */
export const SIMULATION_EPOCH_SECONDS = 1_767_225_600;

export class SimulatedClock {
  #now: number;

  constructor(startSeconds: number = SIMULATION_EPOCH_SECONDS) {
    this.#now = startSeconds;
  }

  /** Epoch seconds; pass `clock.now` where a `() => number` clock is expected. */
  readonly now = (): number => this.#now;

  advance(seconds: number): void {
    if (!(seconds >= 0)) throw new RangeError(`cannot advance the clock by ${seconds} s`);
    this.#now += seconds;
  }
}

/** RFC 3339 as the API server writes timestamps (second precision, Z). */
export function toRfc3339(epochSeconds: number): string {
  return new Date(Math.round(epochSeconds * 1000)).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
