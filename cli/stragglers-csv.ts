// Reads a per-worker step-time CSV (the Alibaba PAI mini-batch layout or any trace with the same columns)
// into one series per worker. Every rejection names the line and column, so a person can fix the file.

import type { WorkerStepTimes } from '../lib/types.js';

export class StragglerCsvError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = 'StragglerCsvError';
  }
}

const STEP_COLUMNS = ['batch_time_norm', 'step_time'] as const;
const MIN_WORKERS = 3;

/** Columns `worker`, `time` (seconds), and `batch_time_norm` or `step_time`; an unnamed leading index is allowed. */
export function parseStragglerCsv(text: string, file: string): WorkerStepTimes[] {
  const lines = text.split(/\r?\n/);
  const header = (lines[0] ?? '').split(',').map((c) => c.trim());
  if (header.length === 0 || header.every((c) => c === ''))
    throw new StragglerCsvError(file, 'line 1: empty header (expected worker,time,step_time)');
  const column = (name: string) => {
    const i = header.indexOf(name);
    if (i < 0) throw new StragglerCsvError(file, `line 1: no column '${name}' in header '${lines[0] ?? ''}'`);
    return i;
  };
  const workerCol = column('worker');
  const timeCol = column('time');
  const stepName = STEP_COLUMNS.find((c) => header.includes(c));
  if (stepName === undefined)
    throw new StragglerCsvError(
      file,
      `line 1: no step-time column (one of ${STEP_COLUMNS.join(', ')}) in header '${lines[0] ?? ''}'`,
    );
  const stepCol = column(stepName);
  header.forEach((name, i) => {
    if (name === '' && i > 0) throw new StragglerCsvError(file, `line 1: column ${i + 1} has no name`);
  });

  const byWorker = new Map<number, WorkerStepTimes>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.trim() === '') continue;
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length !== header.length)
      throw new StragglerCsvError(
        file,
        `line ${i + 1}: ${cells.length} fields, the header has ${header.length}`,
      );
    const number = (col: number, name: string, check: (n: number) => boolean, expected: string) => {
      const cell = cells[col] ?? '';
      const n = cell === '' ? Number.NaN : Number(cell);
      if (!Number.isFinite(n) || !check(n))
        throw new StragglerCsvError(file, `line ${i + 1}, column '${name}': '${cell}' is not ${expected}`);
      return n;
    };
    const worker = number(workerCol, 'worker', (n) => Number.isInteger(n) && n >= 0, 'a worker index');
    const at = number(timeCol, 'time', () => true, 'a number of seconds');
    const stepTime = number(stepCol, stepName, (n) => n > 0, 'a positive step time');
    let series = byWorker.get(worker);
    if (!series) {
      series = { worker, pod: `worker-${worker}`, samples: [] };
      byWorker.set(worker, series);
    }
    series.samples.push({ at, stepTime });
  }
  if (byWorker.size < MIN_WORKERS)
    throw new StragglerCsvError(
      file,
      `${byWorker.size} worker(s) in column 'worker'; at least ${MIN_WORKERS} are needed to compare a worker with its peers`,
    );
  for (const s of byWorker.values()) s.samples.sort((a, b) => a.at - b.at);
  return [...byWorker.values()].sort((a, b) => a.worker - b.worker);
}
