// The oldest Node.js trainscaler runs on (package.json "engines"): @kubernetes/client-node 2.x and its
// undici crash on older ones with errors that do not say so. Plain JavaScript without imports, so that it
// runs (and refuses) before anything that would crash is loaded. The Lambda bundles embed the same function
// as their banner (infra/lambda/bundle.ts).

/**
 * Exits with one line on stderr (and status 1) unless this Node.js is >= 22.19.
 * Self-contained (no free variables) because its source is embedded in the Lambda bundles.
 * @param {string} program what refuses to start, for the message
 * @param {string} [hint] how to get the right Node.js there, appended to the line
 * @param {string} [version] the Node.js version to check (default: this process's)
 */
export function exitUnlessSupportedNode(program, hint = '', version = process.versions.node) {
  const required = [22, 19];
  const [major = 0, minor = 0] = String(version).split('.').map(Number);
  if (major > required[0] || (major === required[0] && minor >= required[1])) return;
  process.stderr.write(`${program} needs Node.js >= ${required.join('.')} (this is ${version})${hint}\n`);
  process.exit(1);
}
