// The python of the pinned PyPI torch (infra/dev/torch-requirements.txt), installed by npm run setup
// (infra/dev/install-torch.sh) into a venv under the trainscaler cache: what the training tests' pods and
// npm run bench:rescale run. TORCH_PYTHON overrides it (e.g. /usr/bin/python3 for Debian's torch 1.13).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const TORCH_REQUIREMENTS = join(REPO_ROOT, 'infra', 'dev', 'torch-requirements.txt');

/** The torch version pinned in the requirements file (its `torch==` line). */
export function pinnedTorchVersion(requirements = readFileSync(TORCH_REQUIREMENTS, 'utf8')): string {
  const pinned = /^torch==(\S+)/m.exec(requirements)?.[1];
  if (!pinned) throw new Error(`${TORCH_REQUIREMENTS} pins no torch==<version>`);
  return pinned;
}

/** Where install-torch.sh puts the venv (the same cache root as the cluster binaries and images). */
export function torchVenv(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env.TRAINSCALER_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'trainscaler');
  return join(cache, `torch-${pinnedTorchVersion()}`);
}

/** TORCH_PYTHON, or the venv's python; a clear error when setup has not installed it. */
export function torchPython(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TORCH_PYTHON) return env.TORCH_PYTHON;
  const python = join(torchVenv(env), 'bin', 'python');
  if (!existsSync(python)) {
    throw new Error(
      `no torch ${pinnedTorchVersion()} at ${python}: run npm run setup (infra/dev/install-torch.sh)`,
    );
  }
  return python;
}

/** The torchrun beside a python (TORCHRUN overrides it). */
export function torchrunBeside(python: string, env: NodeJS.ProcessEnv = process.env): string {
  return env.TORCHRUN ?? join(dirname(python), 'torchrun');
}

/** The torch version a python imports (e.g. 2.15.0+cu132 -> 2.15.0), to print beside what was measured with it. */
export function torchVersionOf(python: string): string {
  const printed = execFileSync(python, ['-c', 'import torch; print(torch.__version__)'], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONWARNINGS: 'ignore' },
  });
  return printed.trim().replace(/\+.*$/, '');
}
