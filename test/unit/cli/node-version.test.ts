// Every entry point refuses an unsupported Node.js with one line naming the version it needs, before it loads
// anything that would crash (undici under @kubernetes/client-node throws an unrelated TypeError on Node 20).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { lambdaBanner } from '../../../infra/lambda/bundle.js';
import { nodeVersionProblem, REQUIRED_NODE } from '../../../infra/sidecar/src/node-version.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const OLD = '20.20.2';
// Makes the child believe it runs on an old Node before the entry point is loaded.
const FAKE_OLD_NODE = `data:text/javascript,${encodeURIComponent(
  `Object.defineProperty(process.versions, 'node', { value: '${OLD}' });`,
)}`;

function run(args: string[], node = process.execPath) {
  return spawnSync(node, args, { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
}

function assertRefused(result: ReturnType<typeof run>, program: string, version: string) {
  assert.equal(result.status, 1, `exit status (stderr: ${result.stderr})`);
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, got: ${result.stderr}`);
  assert.match(lines[0] ?? '', new RegExp(`^${program} needs Node\\.js >= 22\\.19 \\(this is ${version}\\)`));
  assert.equal(result.stdout, '');
}

/** The machine's own node, when it is older than the project's (the user's situation the check is for). */
function machineOldNode(): { path: string; version: string } | undefined {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node']) {
    const probe = spawnSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' });
    const version = probe.stdout?.trim();
    if (probe.status === 0 && version && nodeVersionProblem(version)) return { path, version };
  }
  return undefined;
}

describe('unsupported Node.js', () => {
  it('the required version is package.json engines, in every copy of the check', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    assert.equal(pkg.engines.node, `>=${REQUIRED_NODE.join('.')}`);
    assert.match(readFileSync(join(ROOT, 'bin/node-version.js'), 'utf8'), /const required = \[22, 19\];/);
  });

  it('the version comparison', () => {
    for (const ok of ['22.19.0', '22.23.3', '23.0.0', '24.1.0'])
      assert.equal(nodeVersionProblem(ok), undefined);
    for (const bad of ['20.20.2', '22.18.9', '21.99.0', '18.0.0']) assert.ok(nodeVersionProblem(bad), bad);
  });

  it('bin/trainscaler.js refuses with one line before loading the CLI', () => {
    assertRefused(run(['--import', FAKE_OLD_NODE, 'bin/trainscaler.js', 'run']), 'trainscaler', OLD);
    // and runs on this (supported) Node
    const ok = run(['bin/trainscaler.js', 'help']);
    assert.equal(ok.status, 0, ok.stderr);
  });

  it("bin/trainscaler.js on the machine's own older node (/usr/bin/env node outside npm)", (t) => {
    const old = machineOldNode();
    if (!old) {
      t.skip('no Node.js older than 22.19 on this machine');
      return;
    }
    assertRefused(run(['bin/trainscaler.js', 'run'], old.path), 'trainscaler', old.version);
  });

  it('a Lambda bundle refuses before its bundled dependencies run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trainscaler-banner-'));
    try {
      // The banner of infra/lambda/bundle.ts in front of code that would crash like undici on Node 20.
      const entry = join(dir, 'entry.ts');
      writeFileSync(
        entry,
        'throw new TypeError("Cannot read properties of undefined (reading \'bind\')");\n',
      );
      const outfile = join(dir, 'bundle.mjs');
      await build({
        entryPoints: [entry],
        bundle: true,
        platform: 'node',
        format: 'esm',
        outfile,
        banner: { js: lambdaBanner() },
        logLevel: 'silent',
      });
      assertRefused(run(['--import', FAKE_OLD_NODE, outfile]), 'trainscaler lambda', OLD);
      const old = machineOldNode();
      if (old) assertRefused(run([outfile], old.path), 'trainscaler lambda', old.version);
      const current = run([outfile]);
      assert.match(current.stderr, /reading 'bind'/, 'on a supported Node the bundle runs');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the sidecar refuses with one line before loading its modules', () => {
    const result = run(['--import', FAKE_OLD_NODE, '--import', 'tsx', 'infra/sidecar/src/main.ts']);
    assertRefused(result, 'trainscaler-sidecar', OLD);
  });
});
