// The emulated Prometheus TSDB: series by metric name, samples appended in time order, staleness markers
// written the way Prometheus writes them (a scraped series missing from its target's next scrape, a target
// gone, a recording rule's series missing from its next evaluation), and samples older than the longest
// range any rule reads dropped so that a day-long replay keeps bounded memory.
import { type Labels, METRIC_NAME, type SeriesSource, type StoredSeries } from './promql.js';

export interface WrittenSample {
  labels: Labels;
  value: number;
}

function seriesKey(labels: Labels): string {
  return JSON.stringify(
    Object.keys(labels)
      .sort()
      .map((k) => [k, labels[k]]),
  );
}

export class SeriesStore implements SeriesSource {
  readonly #byName = new Map<string, Map<string, StoredSeries>>();
  /** What each writer (a scrape target or a recording rule) wrote last time: absent now means stale. */
  readonly #lastWrite = new Map<string, Set<string>>();
  readonly #names = new Map<string, string>();

  seriesOf(name: string): Iterable<StoredSeries> {
    return this.#byName.get(name)?.values() ?? [];
  }

  /** The whole output of one writer at `at`: its series not in `samples` get a staleness marker. */
  write(writer: string, samples: readonly WrittenSample[], at: number): void {
    const written = new Set<string>();
    for (const sample of samples) {
      const name = sample.labels[METRIC_NAME];
      if (!name) throw new Error(`a series without ${METRIC_NAME}: ${JSON.stringify(sample.labels)}`);
      const key = seriesKey(sample.labels);
      written.add(key);
      this.#names.set(key, name);
      this.#append(name, key, sample.labels, at, sample.value);
    }
    for (const key of this.#lastWrite.get(writer) ?? []) {
      if (written.has(key)) continue;
      const name = this.#names.get(key);
      const series = name ? this.#byName.get(name)?.get(key) : undefined;
      if (series && series.values[series.values.length - 1] !== null)
        this.#append(name ?? '', key, series.labels, at, null);
    }
    if (written.size > 0) this.#lastWrite.set(writer, written);
    else this.#lastWrite.delete(writer);
  }

  /** Writers not seen since this call's list (targets that disappeared) get every series marked stale. */
  retireWritersExcept(active: ReadonlySet<string>, prefix: string, at: number): void {
    for (const writer of [...this.#lastWrite.keys()])
      if (writer.startsWith(prefix) && !active.has(writer)) this.write(writer, [], at);
  }

  /** Drops samples before `before` and series with nothing left. */
  trim(before: number): void {
    for (const [name, series] of this.#byName) {
      for (const [key, s] of series) {
        let drop = 0;
        while (drop < s.times.length && (s.times[drop] ?? 0) < before) drop++;
        if (drop === 0) continue;
        if (drop === s.times.length) {
          series.delete(key);
          this.#names.delete(key);
          continue;
        }
        s.times.splice(0, drop);
        s.values.splice(0, drop);
      }
      if (series.size === 0) this.#byName.delete(name);
    }
  }

  #append(name: string, key: string, labels: Labels, at: number, value: number | null): void {
    let family = this.#byName.get(name);
    if (!family) {
      family = new Map();
      this.#byName.set(name, family);
    }
    let series = family.get(key);
    if (!series) {
      series = { labels: { ...labels }, times: [], values: [] };
      family.set(key, series);
    }
    const last = series.times[series.times.length - 1];
    if (last !== undefined && last >= at) throw new Error(`out-of-order sample for ${key} at ${at}`);
    series.times.push(at);
    series.values.push(value);
  }
}
