// The sidecar as the container image runs it: one CommonJS file bundled by esbuild from
// infra/sidecar/src (the Dockerfile's build stage does the same), so tests and the benchmark exercise the
// shipped artifact and start it in milliseconds.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export async function bundleSidecar(outDir: string): Promise<string> {
  const outfile = join(outDir, 'sidecar.cjs');
  await build({
    entryPoints: [join(REPO_ROOT, 'infra/sidecar/src/main.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}
