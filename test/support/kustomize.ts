// `kubectl kustomize` for the tests that render the manifests as a user's `kubectl apply -k` would.
import { execFileSync } from 'node:child_process';
import { loadAll } from 'js-yaml';

function kubectlAvailable(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

/** A node:test `skip` value: false when kubectl is on PATH, else the reason. */
export const skipWithoutKubectl: false | string = kubectlAvailable()
  ? false
  : 'kubectl is not installed (needed for `kubectl kustomize`)';

/** The documents `kubectl kustomize DIR` renders. */
export function renderKustomization(dir: string): unknown[] {
  return loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 30_000 }));
}
