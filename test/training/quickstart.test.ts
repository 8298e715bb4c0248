// `npm run quickstart` end to end, as a new user runs it (README "Quick start"): inside test:training's cluster
// (with-cluster.sh reuses it and leaves it up), the real example job, Prometheus, Alertmanager and trainscaler's
// runner. Asserted: the printed story in order (the throughput, the alert, trainscaler's decision on that alert
// with its reason, the job at its new size, the throughput after), then everything it started stopped, exit 0.
// Needs what the training test needs (root, the PyPI torch of npm run setup, prometheus, prometheus-alertmanager); bounded.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assertStory } from '../support/quickstart-story.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TIMEOUT_MS = 8 * 60_000;

test('npm run quickstart prints the throughput, the alert, the decision and its reason, the new size, the throughput after', async () => {
  const started = Date.now();
  const child = spawn('npm', ['run', '--silent', 'quickstart'], {
    cwd: REPO_ROOT,
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGINT'), TIMEOUT_MS);
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  clearTimeout(timer);
  assert.equal(code, 0, `exit ${code}\n${stdout}\n--- stderr\n${stderr}`);
  assertStory(stdout);
  // No JSON log lines on the terminal: they go to the runner's log file.
  assert.doesNotMatch(stdout, /^\{"level"/m);
  console.log(`  quickstart took ${((Date.now() - started) / 1000).toFixed(0)} s; it printed:\n${stdout}`);
});
