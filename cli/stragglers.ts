// `trainscaler stragglers --csv FILE [--json]`: what the production straggler path would have said about a
// recorded per-worker trace (see stragglers-replay.ts for the resolution it emulates).

import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { parseStragglerCsv } from './stragglers-csv.js';
import { type ReplayResult, replayStragglers } from './stragglers-replay.js';

export function registerStragglersCommand(program: Command): void {
  program
    .command('stragglers')
    .description(
      "Replay a per-worker step-time CSV (columns worker, time, batch_time_norm or step_time) through the production straggler path: the sidecar's 60 s mean, a 15 s scrape and query step, a review every 60 s",
    )
    .requiredOption('--csv <file>', 'the trace to replay')
    .option('--json', 'print one JSON object {workers:[{worker,episodes}],replacements:[{at,worker}]}')
    .action(async (options: { csv: string; json?: boolean }) => {
      const text = await readFile(options.csv, 'utf8');
      const result = replayStragglers(parseStragglerCsv(text, options.csv));
      process.stdout.write(options.json ? `${JSON.stringify(toJson(result))}\n` : renderText(result));
    });
}

export interface StragglersJson {
  workers: { worker: number; episodes: { status: string; from: number; to: number | null }[] }[];
  replacements: { at: number; worker: number }[];
}

export function toJson(result: ReplayResult): StragglersJson {
  return {
    workers: result.workers
      .filter((w) => w.episodes.length > 0)
      .map((w) => ({
        worker: w.worker,
        episodes: w.episodes.map(({ status, from, to }) => ({ status, from, to })),
      })),
    replacements: result.replacements.map(({ at, worker }) => ({ at, worker })),
  };
}

export function renderText(result: ReplayResult): string {
  const lines: string[] = [`${result.reviews} reviews, one every 60 s`];
  for (const w of result.workers) {
    if (w.episodes.length === 0) {
      lines.push(`worker ${w.worker}: ok throughout`);
      continue;
    }
    const spans = w.episodes.map((e) => `${e.status} ${e.from}-${e.to ?? 'end'}`);
    lines.push(`worker ${w.worker}: ${spans.join(', ')}`);
  }
  if (result.replacements.length === 0) lines.push('replacements: none');
  for (const r of result.replacements) lines.push(`replace worker ${r.worker} at t=${r.at}`);
  lines.push('(the trace is replayed as recorded: a replacement does not change the step times that follow)');
  return `${lines.join('\n')}\n`;
}
