// GPU utilisation and memory through nvidia-smi, where the node's NVIDIA runtime puts it in the container.
// Where it does not exist the sidecar simply reports no GPU series: CPU-only pods and test machines are
// normal, not errors.
import { execFile } from 'node:child_process';

export interface GpuReading {
  index: number;
  /** 0..1 */
  utilization: number;
  memoryUsedBytes: number;
  memoryTotalBytes: number;
}

export const NVIDIA_SMI_ARGS = [
  '--query-gpu=utilization.gpu,memory.used,memory.total',
  '--format=csv,noheader,nounits',
];

const MiB = 1024 * 1024;

/** One line per GPU, "util %, used MiB, total MiB"; lines with [N/A] or garbage are skipped, not guessed. */
export function parseNvidiaSmiCsv(output: string): GpuReading[] {
  const gpus: GpuReading[] = [];
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  lines.forEach((line, index) => {
    const fields = line.split(',').map((f) => Number(f.trim()));
    const [util, used, total] = fields;
    if (fields.length !== 3 || util === undefined || used === undefined || total === undefined) return;
    if (![util, used, total].every(Number.isFinite)) return;
    gpus.push({
      index,
      utilization: util / 100,
      memoryUsedBytes: used * MiB,
      memoryTotalBytes: total * MiB,
    });
  });
  return gpus;
}

export type GpuProbe =
  | { status: 'ok'; gpus: GpuReading[] }
  | { status: 'absent' }
  | { status: 'failed'; error: string };

export function probeGpus(command: string, timeoutMs = 5000): Promise<GpuProbe> {
  return new Promise((resolve) => {
    execFile(command, NVIDIA_SMI_ARGS, { timeout: timeoutMs, maxBuffer: 64 * 1024 }, (error, stdout) => {
      if (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'EACCES') resolve({ status: 'absent' });
        else resolve({ status: 'failed', error: error.message.split('\n')[0] ?? String(error) });
        return;
      }
      resolve({ status: 'ok', gpus: parseNvidiaSmiCsv(stdout) });
    });
  });
}

/**
 * Runs nvidia-smi at most once per `minIntervalMs` (a scrape must not fork a process every time) and
 * stops trying for good once the binary is known to be absent.
 */
export class GpuReader {
  #absent = false;
  #last: { at: number; gpus: GpuReading[] } | undefined;
  #inflight: Promise<GpuReading[]> | undefined;

  constructor(
    private readonly command: string | undefined,
    private readonly minIntervalMs: number,
    private readonly log: (message: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    if (command === undefined) this.#absent = true;
  }

  get absent(): boolean {
    return this.#absent;
  }

  read(): Promise<GpuReading[]> {
    if (this.#absent || this.command === undefined) return Promise.resolve([]);
    if (this.#last && this.now() - this.#last.at < this.minIntervalMs)
      return Promise.resolve(this.#last.gpus);
    this.#inflight ??= this.#probe(this.command).finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #probe(command: string): Promise<GpuReading[]> {
    const probe = await probeGpus(command);
    if (probe.status === 'absent') {
      this.#absent = true;
      this.log(`${command} not found: no GPU metrics will be exported`);
      return [];
    }
    const gpus = probe.status === 'ok' ? probe.gpus : [];
    if (probe.status === 'failed') this.log(`${command} failed: ${probe.error}`);
    this.#last = { at: this.now(), gpus };
    return gpus;
  }
}
