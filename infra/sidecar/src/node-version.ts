// Imported first by main.ts, so that an unsupported Node.js refuses with one line before anything else
// loads. The sidecar image is built from infra/sidecar alone, so this cannot share bin/node-version.js;
// a unit test keeps the two versions equal.

export const REQUIRED_NODE: readonly [number, number] = [22, 19];

export function nodeVersionProblem(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major > REQUIRED_NODE[0] || (major === REQUIRED_NODE[0] && minor >= REQUIRED_NODE[1])) return undefined;
  return `trainscaler-sidecar needs Node.js >= ${REQUIRED_NODE.join('.')} (this is ${version})`;
}

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
