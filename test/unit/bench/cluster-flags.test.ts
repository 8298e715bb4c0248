import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

// The bench parses its flags by hand at the top of the script: a bad --rescale-cost must stop it before it loads
// a world or runs anything (a long --full run that started on a typo would waste an hour).
describe('bench:cluster --rescale-cost', () => {
  it('refuses a bad value naming the flag and the accepted forms, with exit code 2 and nothing run', () => {
    for (const args of [['--rescale-cost', 'slow'], ['--rescale-cost']]) {
      const run = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'test/bench/cluster.bench.ts', '--tables-from', '/nonexistent.json', ...args],
        { encoding: 'utf8' },
      );
      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stderr, /--rescale-cost '[a-z]*': expected launcher, torchrun or a number of seconds/);
      assert.equal(run.stdout, '', 'printed before refusing');
    }
  });
});
