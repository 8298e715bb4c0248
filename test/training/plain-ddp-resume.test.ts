// The unmodified DDP script (infra/examples/plain-ddp/train.py) resumes where its last checkpoint left it: a
// run stopped after step 25 (checkpoints every 10) starts again from step 20, trains steps 21-25 again with
// exactly the same losses (model, optimizer and data position restored) and goes on; npm run bench:rescale
// relies on this across torchrun's restarts. One process with the environment torchrun would give it (rank 0
// of 1), so it runs the same under any torch. Skipped, saying why, when the pinned torch is not installed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { freePort } from '../../infra/local-stack/processes.js';
import { torchPython } from '../../infra/local-stack/torch-python.js';
import { REPO_ROOT } from '../metrics/support/sidecar-bundle.js';
import { accountSteps, parseScriptLine, type ScriptLine } from '../support/step-lines.js';

const SCRIPT = join(REPO_ROOT, 'infra', 'examples', 'plain-ddp', 'train.py');

function findPython(): string | undefined {
  try {
    return torchPython();
  } catch {
    return undefined;
  }
}
const python = findPython();

async function train(dir: string, maxSteps: number): Promise<string[]> {
  const { stdout } = await promisify(execFile)(
    python ?? 'python3',
    [
      SCRIPT,
      `--checkpoint-dir=${join(dir, 'checkpoints')}`,
      '--checkpoint-every=10',
      `--max-steps=${maxSteps}`,
    ],
    {
      timeout: 240_000,
      env: {
        ...process.env,
        RANK: '0',
        LOCAL_RANK: '0',
        WORLD_SIZE: '1',
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(await freePort()),
        OMP_NUM_THREADS: '1',
      },
    },
  );
  return stdout.split('\n').filter((line) => line.trim());
}

test('the unmodified script resumes from its last checkpoint, redoing only the steps after it', {
  skip: python ? false : 'no pinned torch: run npm run setup (infra/dev/install-torch.sh)',
  timeout: 600_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trainscaler-plain-ddp-'));
  try {
    const first = await train(dir, 25);
    const second = await train(dir, 30);
    assert.equal(first[0], 'resumed from step 0 epoch 0 sample 0 rank 0/1');
    assert.equal(second[0], 'resumed from step 20 epoch 0 sample 320 rank 0/1');
    const stepLines = (lines: string[], from: number, to: number) =>
      lines.filter((line) => {
        const n = Number(/^step (\d+) /.exec(line)?.[1]);
        return n >= from && n <= to;
      });
    assert.equal(stepLines(first, 21, 25).length, 5);
    assert.deepEqual(stepLines(second, 21, 25), stepLines(first, 21, 25), 'the same steps, the same losses');
    assert.deepEqual(
      stepLines(second, 26, 30).map((line) => line.split(' ')[1]),
      ['26', '27', '28', '29', '30'],
    );
    const lines = [...first, ...second]
      .map((line, i) => parseScriptLine(line, i))
      .filter((l): l is ScriptLine => l !== undefined);
    const { restarts, problems } = accountSteps(lines, 10);
    assert.deepEqual(problems, []);
    assert.deepEqual(
      restarts.map((r) => [r.lastStep, r.resumedFrom, r.redone, r.midEpoch]),
      [[25, 20, 5, true]],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
