// Loader for the Alibaba PAI per-worker mini-batch times kept beside the repository (../shared/data),
// read by path so that the data is never copied into the project.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkerStepTimes } from '../../lib/types.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const PAI_DATA_DIR = join(repoRoot, '..', 'shared', 'data', 'pai-minibatch');

/** One series per worker from `job_N_norm.csv` (`,worker,gpu,time,batch_time_norm`); `at` = seconds from start. */
export function loadPaiJob(file: 'job_1_norm.csv' | 'job_2_norm.csv'): WorkerStepTimes[] {
  const [header, ...lines] = readFileSync(join(PAI_DATA_DIR, file), 'utf8').trim().split(/\r?\n/);
  const columns = (header ?? '').split(',');
  const col = (name: string) => {
    const i = columns.indexOf(name);
    if (i < 0) throw new Error(`${file}: no column '${name}' in header '${header}'`);
    return i;
  };
  const [workerCol, timeCol, stepCol] = [col('worker'), col('time'), col('batch_time_norm')];

  const byWorker = new Map<number, WorkerStepTimes>();
  for (const line of lines) {
    const cells = line.split(',');
    const worker = Number(cells[workerCol]);
    const at = Number(cells[timeCol]);
    const stepTime = Number(cells[stepCol]);
    if (![worker, at, stepTime].every(Number.isFinite)) throw new Error(`${file}: bad row '${line}'`);
    let series = byWorker.get(worker);
    if (!series) {
      series = { worker, pod: `worker-${worker}`, samples: [] };
      byWorker.set(worker, series);
    }
    series.samples.push({ at, stepTime });
  }
  return [...byWorker.values()].sort((a, b) => a.worker - b.worker);
}

/** The samples a handler would fetch at `now` with a lookback of `windowSeconds`. */
export function windowAt(series: WorkerStepTimes[], now: number, windowSeconds: number): WorkerStepTimes[] {
  return series.map((s) => ({
    ...s,
    samples: s.samples.filter((x) => x.at <= now && x.at > now - windowSeconds),
  }));
}

/** Every distinct sample time in the data, in order: the instants a replay evaluates at. */
export function sampleTimes(series: WorkerStepTimes[]): number[] {
  return [...new Set(series.flatMap((s) => s.samples.map((x) => x.at)))].sort((a, b) => a - b);
}
