// `trainscaler --version`: the version of the installed package, read from its package.json at run time
// rather than copied into the code, so a release bumps one file. The same module runs compiled
// (dist/cli/version.js, package.json two levels up: the npm package and the image) and from source under
// tsx (cli/version.ts, one level up).
import { readFileSync } from 'node:fs';

const CANDIDATES = ['../package.json', '../../package.json'];

export function packageVersion(): string {
  for (const candidate of CANDIDATES) {
    let text: string;
    try {
      text = readFileSync(new URL(candidate, import.meta.url), 'utf8');
    } catch {
      continue;
    }
    const manifest = JSON.parse(text) as { name?: unknown; version?: unknown };
    if (manifest.name === 'trainscaler' && typeof manifest.version === 'string') return manifest.version;
  }
  throw new Error(`no trainscaler package.json at ${CANDIDATES.join(' or ')} of ${import.meta.url}`);
}
