// Which python the training tests and bench:rescale run: the pinned PyPI torch's venv, found where
// infra/dev/install-torch.sh puts it, or a clear error naming the setup step.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  pinnedTorchVersion,
  torchPython,
  torchrunBeside,
  torchVenv,
} from '../../../infra/local-stack/torch-python.js';

test('the pinned version is the torch== line of the requirements file, and nothing else', () => {
  assert.equal(pinnedTorchVersion('# torch==0.0.1 in a comment\ntorch==2.15.0\nnumpy==2.4.6\n'), '2.15.0');
  assert.throws(() => pinnedTorchVersion('torch>=2\nnumpy==2.4.6\n'), /pins no torch==<version>/);
  assert.match(pinnedTorchVersion(), /^\d+\.\d+\.\d+$/, 'the repository pins one exact release');
});

test('the venv is keyed by the pinned version under the trainscaler cache', () => {
  assert.equal(torchVenv({ TRAINSCALER_CACHE: '/c' }), `/c/torch-${pinnedTorchVersion()}`);
  assert.equal(torchVenv({ XDG_CACHE_HOME: '/x' }), `/x/trainscaler/torch-${pinnedTorchVersion()}`);
});

test('a missing venv is an error naming npm run setup; TORCH_PYTHON overrides', () => {
  const cache = mkdtempSync(join(tmpdir(), 'torch-python-'));
  try {
    assert.throws(() => torchPython({ TRAINSCALER_CACHE: cache }), /run npm run setup/);
    const bin = join(torchVenv({ TRAINSCALER_CACHE: cache }), 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'python'), '');
    assert.equal(torchPython({ TRAINSCALER_CACHE: cache }), join(bin, 'python'));
    assert.equal(
      torchPython({ TORCH_PYTHON: '/usr/bin/python3', TRAINSCALER_CACHE: cache }),
      '/usr/bin/python3',
    );
    assert.equal(torchrunBeside(join(bin, 'python'), {}), join(bin, 'torchrun'));
    assert.equal(torchrunBeside(join(bin, 'python'), { TORCHRUN: '/usr/bin/torchrun' }), '/usr/bin/torchrun');
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});
