// Bundles each Lambda function on its own: dist/lambda/<function>.mjs exports `handler`, holding only the
// code that trigger reaches (esbuild tree-shakes the other handlers away), so each zip is small and each
// cold start loads one file instead of resolving node_modules. Run: `npx tsx infra/lambda/bundle.ts`.

import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { exitUnlessSupportedNode } from '../../bin/node-version.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const OUT_DIR = join(ROOT, 'dist/lambda');

/** serverless.yml function name -> export of functions/lambda.ts. */
export const LAMBDA_FUNCTIONS = {
  alarm: 'alarm',
  alertmanagerWebhook: 'alertmanagerWebhook',
  clusterEvent: 'clusterEvent',
  schedule: 'schedule',
  submit: 'submit',
} as const;

export type LambdaFunction = keyof typeof LAMBDA_FUNCTIONS;

// The dependencies are CommonJS that require() Node built-ins; an ES module bundle has no `require`, so
// give it one. (ESM output because client-node 2.x is ESM and top-level await must stay possible.)
const REQUIRE_SHIM = [
  "import { createRequire as __trainscalerCreateRequire } from 'node:module';",
  'const require = __trainscalerCreateRequire(import.meta.url);',
].join('\n');

// Before any bundled dependency runs (an older Node crashes in undici with an unrelated error), the bundle
// refuses with one line: the same check as bin/trainscaler.js, its source embedded.
export function lambdaBanner(): string {
  return `${REQUIRE_SHIM}\n(${exitUnlessSupportedNode.toString()})('trainscaler lambda', '; deploy it on the nodejs22.x runtime (serverless.yml)');`;
}

export interface BundleResult {
  name: LambdaFunction;
  file: string;
  bytes: number;
}

export async function bundleLambdas(): Promise<BundleResult[]> {
  await rm(OUT_DIR, { recursive: true, force: true });
  await mkdir(OUT_DIR, { recursive: true });
  const results: BundleResult[] = [];
  for (const [name, exported] of Object.entries(LAMBDA_FUNCTIONS) as Array<[LambdaFunction, string]>) {
    const file = join(OUT_DIR, `${name}.mjs`);
    await build({
      stdin: {
        contents: `export { ${exported} as handler } from './functions/lambda.js';\n`,
        resolveDir: ROOT,
        sourcefile: `lambda-${name}.ts`,
        loader: 'ts',
      },
      bundle: true,
      platform: 'node',
      target: 'node22',
      format: 'esm',
      outfile: file,
      minify: true,
      sourcemap: true,
      sourcesContent: false,
      legalComments: 'none',
      // Error classes name themselves after their constructor (lib/errors.ts); logs must keep saying ApiError.
      keepNames: true,
      banner: { js: lambdaBanner() },
      logLevel: 'warning',
    });
    results.push({ name, file, bytes: (await stat(file)).size });
  }
  return results;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const { file, bytes } of await bundleLambdas()) {
    process.stdout.write(`${relative(ROOT, file).padEnd(40)} ${(bytes / 1024).toFixed(0).padStart(6)} KiB\n`);
  }
}
