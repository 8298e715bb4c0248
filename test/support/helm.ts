// The Helm CLI for the chart tests: the one infra/tools/build-helm.sh builds into the shared cache (what
// `npm run setup` installs), else one on PATH. Absent outside CI the tests skip and say why; in CI (CI=true)
// an absent Helm is a failure, so the chart is never silently untested.
import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';

function cachedHelm(): string {
  const root =
    process.env.TRAINSCALER_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'trainscaler');
  return join(root, 'tools', 'bin', 'helm');
}

function findHelm(): string | undefined {
  for (const candidate of [cachedHelm(), 'helm']) {
    try {
      if (candidate.includes('/')) accessSync(candidate, constants.X_OK);
      execFileSync(candidate, ['version', '--short'], { stdio: 'ignore', timeout: 10_000 });
      return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

export const HELM: string | undefined = findHelm();

const ABSENT = 'helm is not installed: run `npm run setup` (infra/tools/build-helm.sh builds it)';
if (HELM === undefined && process.env.CI === 'true')
  throw new Error(`${ABSENT}; CI must run the chart tests`);

/** A node:test `skip` value: false when Helm is there, else the reason. */
export const skipWithoutHelm: false | string = HELM === undefined ? ABSENT : false;

/** Runs helm; throws with its output when it fails. */
export function helm(args: string[]): string {
  if (HELM === undefined) throw new Error(ABSENT);
  return execFileSync(HELM, args, { encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The documents `helm template` renders (CRDs included), empty documents dropped. */
export function renderChart(chart: string, namespace: string, extra: string[] = []): unknown[] {
  const text = helm(['template', 'trainscaler', chart, '--namespace', namespace, '--include-crds', ...extra]);
  return loadAll(text).filter((d) => d !== null && d !== undefined);
}
