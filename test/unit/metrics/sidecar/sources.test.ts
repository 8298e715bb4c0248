import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { compileLogPattern, DEFAULT_LOG_PATTERN } from '../../../../infra/sidecar/src/config.js';
import { followFile, followStream, parseLogLine } from '../../../../infra/sidecar/src/log-source.js';
import { metricValue } from '../../../../infra/sidecar/src/prometheus-text.js';
import { scrapeOnce } from '../../../../infra/sidecar/src/scrape-source.js';
import { waitFor } from './wait-for.js';

const defaultPattern = compileLogPattern(DEFAULT_LOG_PATTERN);

describe('log lines', () => {
  it('reads the step (and samples) from common trainer log formats', () => {
    assert.deepEqual(parseLogLine('Epoch 3 | step 1200 | loss 0.42', defaultPattern), { step: 1200 });
    assert.deepEqual(parseLogLine('[rank0] Step: 17 samples=544 lr=0.1', defaultPattern), {
      step: 17,
      samples: 544,
    });
    assert.deepEqual(parseLogLine('step=5', defaultPattern), { step: 5 });
    assert.equal(parseLogLine('loading checkpoint from /ckpt/step-best', defaultPattern), undefined);
    assert.equal(parseLogLine('stepping up the learning rate', defaultPattern), undefined);
  });

  it('takes a custom expression with named groups', () => {
    const pattern = compileLogPattern(String.raw`it (?<step>\d+)/\d+ seen=(?<samples>\d+)`);
    assert.deepEqual(parseLogLine('train it 40/1000 seen=1280', pattern), { step: 40, samples: 1280 });
  });

  it('refuses an expression without a step group, or that does not compile', () => {
    assert.throws(() => compileLogPattern(String.raw`step (\d+)`), /TRAINSCALER_LOG_REGEX.*\(\?<step>/);
    assert.throws(() => compileLogPattern('(?<step>'), /not a valid regular expression/);
  });

  it('follows a file: only lines written after start, then across truncation', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ts-log-'));
    const path = join(dir, 'train.log');
    await writeFile(path, 'step 1\nstep 2\n');
    const seen: string[] = [];
    const follower = followFile(path, 20, (line) => seen.push(line));
    try {
      await new Promise((r) => setTimeout(r, 60));
      await appendFile(path, 'step 3\nstep 4 partial');
      await waitFor(() => seen.includes('step 3'), 3000);
      assert.deepEqual(seen, ['step 3'], 'old lines skipped, the unfinished line held back');
      await appendFile(path, ' done\n');
      await waitFor(() => seen.length === 2, 3000);
      assert.equal(seen[1], 'step 4 partial done');
      await writeFile(path, 'step 1\n'); // truncated: a new run
      await waitFor(() => seen.length === 3, 3000);
      assert.equal(seen[2], 'step 1');
    } finally {
      await follower.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads a file that appears after start from its beginning', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ts-log-'));
    const path = join(dir, 'later.log');
    const seen: string[] = [];
    const follower = followFile(path, 20, (line) => seen.push(line));
    try {
      await new Promise((r) => setTimeout(r, 60));
      await writeFile(path, 'step 1\n');
      await waitFor(() => seen.length === 1, 3000);
      assert.deepEqual(seen, ['step 1']);
    } finally {
      await follower.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('follows standard input in wrapper mode and echoes it', async () => {
    const input = new PassThrough();
    const echo = new PassThrough();
    const echoed: string[] = [];
    echo.on('data', (chunk: Buffer) => echoed.push(chunk.toString()));
    const seen: string[] = [];
    const follower = followStream(input, (line) => seen.push(line), echo);
    input.write('step 1\nstep 2\n');
    await waitFor(() => seen.length === 2, 2000);
    await follower.stop();
    assert.deepEqual(seen, ['step 1', 'step 2']);
    assert.equal(echoed.join(''), 'step 1\nstep 2\n');
  });
});

describe('an existing metrics endpoint', () => {
  const exposition = [
    '# HELP global_step_total unrelated longer name',
    'global_step_total 999',
    '# TYPE global_step gauge',
    'global_step{run="a b}c",rank="0"} 1234 1700000000000',
    'samples_seen 39488',
    'weird_metric NaN',
  ].join('\n');
  let server: ReturnType<typeof createServer>;
  let url: string;
  let status = 200;

  before(async () => {
    server = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(exposition);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('picks the exact metric, not one that shares its prefix, even with braces in label values', () => {
    assert.equal(metricValue(exposition, 'global_step'), 1234);
    assert.equal(metricValue(exposition, 'global_step_total'), 999);
    assert.equal(metricValue(exposition, 'samples_seen'), 39488);
    assert.equal(metricValue(exposition, 'weird_metric'), undefined);
    assert.equal(metricValue(exposition, 'absent'), undefined);
  });

  it('scrapes the step and samples counters', async () => {
    const progress = await scrapeOnce(
      { url, stepMetric: 'global_step', samplesMetric: 'samples_seen', intervalMs: 1000 },
      2000,
    );
    assert.deepEqual(progress, { step: 1234, samples: 39488 });
  });

  it('fails clearly when the metric is missing or the endpoint errors', async () => {
    await assert.rejects(
      scrapeOnce({ url, stepMetric: 'nope', intervalMs: 1000 }, 2000),
      /no sample of nope/,
    );
    status = 503;
    try {
      await assert.rejects(
        scrapeOnce({ url, stepMetric: 'global_step', intervalMs: 1000 }, 2000),
        /HTTP 503/,
      );
    } finally {
      status = 200;
    }
  });
});
