// `trainscaler --version` prints the package's version, read from package.json (the image test runs the
// compiled CLI in the image the same way).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { packageVersion } from '../../../cli/version.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const { version } = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { version: string };

describe('trainscaler --version', () => {
  it("is package.json's version", () => {
    assert.equal(packageVersion(), version);
  });

  it('prints it and exits 0', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'cli/main.ts', '--version'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout, `${version}\n`);
  });
});
