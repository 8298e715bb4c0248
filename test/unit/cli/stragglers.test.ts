import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseStragglerCsv, StragglerCsvError } from '../../../cli/stragglers-csv.js';
import { PAI_DATA_DIR } from '../../support/pai-data.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const run = promisify(execFile);

const rows = (lines: string[]) => lines.join('\n');

describe('parseStragglerCsv', () => {
  it('reads worker, time and step_time, with or without an unnamed leading index column', () => {
    const plain = parseStragglerCsv(
      rows(['worker,time,step_time', '0,1,0.5', '1,1,0.6', '2,1,0.7', '0,11,0.5']),
      'f',
    );
    assert.deepEqual(
      plain.map((w) => [w.worker, w.samples.length]),
      [
        [0, 2],
        [1, 1],
        [2, 1],
      ],
    );
    const indexed = parseStragglerCsv(
      rows([',worker,gpu,time,batch_time_norm', '0,0,25,1,476', '1,1,25,1,509', '2,2,25,1,468']),
      'f',
    );
    assert.deepEqual(indexed[1]?.samples, [{ at: 1, stepTime: 509 }]);
  });

  const rejects = (text: string, message: RegExp) =>
    assert.throws(
      () => parseStragglerCsv(text, 'trace.csv'),
      (e: unknown) => e instanceof StragglerCsvError && message.test(e.message),
    );

  it('names the missing column', () => {
    rejects(rows(['worker,step_time', '0,1']), /trace\.csv: line 1: no column 'time'/);
    rejects(
      rows(['worker,time,gpu', '0,1,2']),
      /line 1: no step-time column \(one of batch_time_norm, step_time\)/,
    );
  });

  it('names the line and column of a value that is not a number', () => {
    rejects(
      rows(['worker,time,step_time', '0,1,0.5', '1,abc,0.5']),
      /line 3, column 'time': 'abc' is not a number/,
    );
    rejects(
      rows(['worker,time,step_time', '0,1,0.5', '1,1,']),
      /line 3, column 'step_time': '' is not a positive/,
    );
    rejects(
      rows(['worker,time,step_time', 'w1,1,0.5']),
      /line 2, column 'worker': 'w1' is not a worker index/,
    );
    rejects(rows(['worker,time,step_time', '0,1,-2']), /line 2, column 'step_time'/);
    rejects(rows(['worker,time,step_time', '0,1']), /line 2: 2 fields, the header has 3/);
  });

  it('refuses fewer than 3 workers', () => {
    rejects(
      rows(['worker,time,step_time', '0,1,0.5', '1,1,0.5']),
      /2 worker\(s\) in column 'worker'; at least 3/,
    );
  });
});

describe('trainscaler stragglers (the command)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-stragglers-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const cli = (...args: string[]) =>
    run(
      join(REPO, 'node_modules/.bin/node'),
      ['--import', 'tsx', join(REPO, 'cli/main.ts'), 'stragglers', ...args],
      {
        cwd: REPO,
      },
    );

  it('prints job 1’s verdicts and replacement as one JSON object', async () => {
    const { stdout } = await cli('--csv', join(PAI_DATA_DIR, 'job_1_norm.csv'), '--json');
    const out = JSON.parse(stdout) as {
      workers: { worker: number; episodes: { status: string; from: number; to: number | null }[] }[];
      replacements: { at: number; worker: number }[];
    };
    assert.deepEqual(Object.keys(out), ['workers', 'replacements']);
    assert.deepEqual(
      out.workers.map((w) => w.worker),
      [6],
    );
    const [episode] = out.workers[0]?.episodes ?? [];
    assert.deepEqual(Object.keys(episode ?? {}), ['status', 'from', 'to']);
    assert.equal(episode?.status, 'straggler');
    assert.equal(out.replacements.length, 1);
    assert.equal(out.replacements[0]?.worker, 6);
    assert.ok((out.replacements[0]?.at ?? 0) >= (episode?.from ?? 0));
  });

  it('fails with the line and column on bad input, and exit code 1', async () => {
    const bad = join(dir, 'bad.csv');
    await writeFile(bad, rows(['worker,time,step_time', '0,1,0.5', '1,x,0.5', '2,1,0.5']));
    await assert.rejects(cli('--csv', bad), (e: { code?: number; stderr?: string }) => {
      assert.equal(e.code, 1);
      assert.match(e.stderr ?? '', /bad\.csv: line 3, column 'time': 'x' is not a number/);
      return true;
    });
  });
});
