// `kubectl trainscaler ...`: kubectl finds bin/kubectl-trainscaler.js on PATH (as npm install -g puts it there)
// and runs the CLI, whose help then names the command the user typed. Runs the real kubectl.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const plugins = mkdtempSync(join(tmpdir(), 'kubectl-plugins-'));
symlinkSync(join(ROOT, 'bin/kubectl-trainscaler.js'), join(plugins, 'kubectl-trainscaler'));
after(() => rmSync(plugins, { recursive: true, force: true }));

// The plugin's `#!/usr/bin/env node` must find Node 22: this process's node first, then the plugin directory.
const PATH = [dirname(process.execPath), plugins, process.env.PATH ?? ''].join(delimiter);
const kubectl = (args: string[]) =>
  spawnSync('kubectl', args, { encoding: 'utf8', env: { ...process.env, PATH }, timeout: 60_000 });

describe('kubectl plugin', {
  skip: kubectl(['version', '--client']).error && 'kubectl is not on PATH',
}, () => {
  it('kubectl lists it', () => {
    const listed = kubectl(['plugin', 'list']);
    assert.match(listed.stdout, /kubectl-trainscaler$/m, listed.stderr);
  });

  it('kubectl trainscaler --help: the CLI, named as the user typed it, with status, explain and recommend', () => {
    const help = kubectl(['trainscaler', '--help']);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^Usage: kubectl trainscaler /m);
    assert.match(help.stdout, /^ {2}status /m);
    assert.match(help.stdout, /^ {2}explain /m);
    assert.match(help.stdout, /^ {2}recommend /m);
  });
});
