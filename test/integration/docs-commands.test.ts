// Commands of README.md and docs/*.md that no other test ran, run here as written, by bash from the project
// directory, on the real test control plane (KUBECONFIG = its admin kubeconfig): the demo, the cluster's own
// scripts, the kustomizations, the Lambda deployment's RBAC, the webhook Secret for Alertmanager and the
// elastic example job. test/unit/docs-commands.test.ts finds each of these texts here (and fails on a doc
// command found nowhere); this file checks each text is still a command of the docs, then runs it. What each
// changes on the shared cluster is removed afterwards, what was there before is left as it was.
// Needs TRAINSCALER_KUBECONFIG (npm run test:integration starts the cluster).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { onPath } from '../../infra/local-stack/processes.js';
import { docCommands } from '../support/doc-commands.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const kubeconfig = process.env.TRAINSCALER_KUBECONFIG;
const skip = kubeconfig
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (npm run test:integration starts the cluster)';

/** The doc commands this file runs; each must still be a command of the docs. */
const RUN = {
  demo: 'npm run demo',
  demoJson: 'npm run demo -- --json',
  demoReport: 'npm run demo -- --report demo.html',
  clusterUp: 'npm run cluster:up',
  smoke: 'bash infra/cluster/smoke.sh',
  createSystemNamespace: 'kubectl create namespace trainscaler-system',
  token: 'TOKEN=$(openssl rand -hex 32)',
  monitoringSecret:
    'kubectl -n monitoring create secret generic trainscaler-webhook-token --from-literal=token="$TOKEN"',
  lambdaCrds:
    'kubectl apply --server-side -f infra/k8s/crds/trainscaler.io_scaledtrainingjobs.yaml -f infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml',
  lambdaRbac:
    'kubectl apply -f infra/k8s/rbac.yaml -f infra/k8s/scaledtrainingjobs-rbac.yaml -f infra/k8s/trainingautoscalers-rbac.yaml -f infra/k8s/lambda-access.yaml -f infra/k8s/lambda-access-scaledtrainingjobs.yaml -f infra/k8s/lambda-access-trainingautoscalers.yaml',
  forwarder: 'kubectl apply -k infra/k8s/forwarder',
  elasticJob: 'kubectl apply -f infra/examples/elastic-trainer/pytorchjob.yaml',
  elasticPatch: `kubectl patch pytorchjob elastic-trainer --type merge -p '{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":2}}}}'`,
} as const;

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
}

describe('the other commands of the docs, on the test control plane', { skip }, () => {
  let env: NodeJS.ProcessEnv = {};
  const cleanups: (() => void)[] = [];

  /** One doc command (or several, one a line) by bash; returns its result, asserting its exit status. */
  function sh(command: string, status = 0) {
    const result = spawnSync('bash', ['-c', command], { cwd: ROOT, env, encoding: 'utf8', timeout: 600_000 });
    assert.equal(result.status, status, `${command}\n${result.stdout}\n${result.stderr}`);
    return result;
  }
  const kubectl = (...args: string[]) =>
    execFileSync('kubectl', args, { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
  const exists = (...args: string[]) =>
    spawnSync('kubectl', ['get', ...args], { cwd: ROOT, env, encoding: 'utf8' }).status === 0;
  /** Deletes, at the end, the objects of these manifests that are not there now. */
  function removeAfterwardsWhatIsNew(documents: Manifest[]) {
    const fresh = documents.filter(
      (d) =>
        d.kind !== 'Namespace' &&
        d.kind !== 'CustomResourceDefinition' &&
        !exists(d.kind, d.metadata.name, ...(d.metadata.namespace ? ['-n', d.metadata.namespace] : [])),
    );
    cleanups.push(() => {
      for (const d of fresh)
        kubectl(
          'delete',
          '--ignore-not-found',
          d.kind,
          d.metadata.name,
          ...(d.metadata.namespace ? ['-n', d.metadata.namespace] : []),
        );
    });
  }
  const manifests = (yaml: string) =>
    (loadAll(yaml) as (Manifest | null)[]).filter((d): d is Manifest => d !== null && d !== undefined);

  before(() => {
    const kubectlBinary =
      onPath('kubectl') ?? join(process.env.HOME ?? '', '.cache/trainscaler/cluster/bin/kubectl');
    assert.ok(existsSync(kubectlBinary), 'kubectl (infra/cluster uses the same)');
    env = {
      ...process.env,
      KUBECONFIG: kubeconfig,
      PATH: [dirname(kubectlBinary), join(ROOT, 'node_modules/.bin'), process.env.PATH ?? ''].join(delimiter),
    };
    // `npm run demo` runs bin/trainscaler.js, which runs dist/: the sources under test, as `npm ci` builds them.
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, env, stdio: 'ignore', timeout: 300_000 });
  });

  after(() => {
    for (const cleanup of cleanups.reverse()) {
      try {
        cleanup();
      } catch (error) {
        console.error(`cleanup: ${String(error)}`);
      }
    }
  });

  it('runs only commands the docs give', () => {
    const texts = new Set(docCommands(ROOT).map((c) => c.text));
    for (const command of Object.values(RUN)) assert.ok(texts.has(command), `a doc command: ${command}`);
  });

  it('npm run demo prints the summary README.md shows; --json and --report as README.md says', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const summary = (text: string) =>
      text.split('\n').filter((l) => /^(Median JCT|Completion rate|Makespan)/.test(l));
    const shown = summary(readme);
    assert.equal(shown.length, 3, 'README.md shows the three summary lines');
    assert.deepEqual(summary(sh(RUN.demo).stdout), shown);
    const json = JSON.parse(sh(RUN.demoJson).stdout.replace(/^[^{]*/, '')) as {
      summary: Record<'manual' | 'trainscaler', { medianJctSeconds: number; completionRate: number }>;
      jobs: unknown[];
    };
    for (const side of ['manual', 'trainscaler'] as const) {
      assert.equal(typeof json.summary[side].medianJctSeconds, 'number');
      assert.equal(typeof json.summary[side].completionRate, 'number');
    }
    assert.ok(json.jobs.length > 0);
    const page = join(ROOT, 'demo.html');
    cleanups.push(() => rmSync(page, { force: true }));
    sh(RUN.demoReport);
    assert.match(readFileSync(page, 'utf8'), /^<!doctype html>/i);
  });

  it("the cluster's own scripts: cluster:up names the running cluster's kubeconfig, smoke.sh passes", () => {
    const up = sh(RUN.clusterUp).stdout.trim().split('\n').at(-1) ?? '';
    assert.ok(existsSync(up), `cluster:up printed a kubeconfig: ${up}`);
    assert.match(sh(RUN.smoke).stdout, /smoke: \d+ passed, 0 failed/);
  });

  it('the kustomization steps: the namespace is there already (up.sh made it), the forwarder applies', () => {
    assert.match(sh(RUN.createSystemNamespace, 1).stderr, /AlreadyExists|already exists/);
    removeAfterwardsWhatIsNew(manifests(kubectl('kustomize', 'infra/k8s/forwarder')));
    sh(RUN.forwarder);
    kubectl(
      '-n',
      'trainscaler-system',
      'get',
      'deployment/trainscaler-forwarder',
      'configmap/trainscaler-forwarder-ledger',
    );
  });

  it("the webhook token for Alertmanager's namespace", () => {
    if (!exists('namespace', 'monitoring')) {
      kubectl('create', 'namespace', 'monitoring');
      cleanups.push(() => kubectl('delete', 'namespace', 'monitoring', '--wait=false'));
    }
    assert.ok(
      !exists('-n', 'monitoring', 'secret', 'trainscaler-webhook-token'),
      'no Secret left by a run before',
    );
    cleanups.push(() =>
      kubectl('-n', 'monitoring', 'delete', '--ignore-not-found', 'secret', 'trainscaler-webhook-token'),
    );
    sh([RUN.token, RUN.monitoringSecret].join('\n'));
    const token = Buffer.from(
      kubectl(
        '-n',
        'monitoring',
        'get',
        'secret',
        'trainscaler-webhook-token',
        '-o',
        'jsonpath={.data.token}',
      ),
      'base64',
    ).toString();
    assert.match(token, /^[0-9a-f]{64}$/);
  });

  it("the Lambda deployment's CRDs and RBAC apply; the group trainscaler-lambda gets the functions' rights", () => {
    const files = [...RUN.lambdaRbac.matchAll(/-f (\S+)/g)].map((m) => m[1] ?? '');
    removeAfterwardsWhatIsNew(files.flatMap((f) => manifests(readFileSync(join(ROOT, f), 'utf8'))));
    sh(RUN.lambdaCrds);
    sh(RUN.lambdaRbac);
    const can = (verb: string, resource: string) =>
      spawnSync(
        'kubectl',
        [
          'auth',
          'can-i',
          verb,
          resource,
          '--all-namespaces',
          '--as',
          'lambda',
          '--as-group',
          'trainscaler-lambda',
        ],
        { env, encoding: 'utf8' },
      ).stdout.trim();
    assert.equal(can('patch', 'pytorchjobs.kubeflow.org'), 'yes');
    assert.equal(can('delete', 'pytorchjobs.kubeflow.org'), 'no');
  });

  it('the elastic example job applies and scales by the patch docs/real-training.md gives', () => {
    kubectl('delete', '--ignore-not-found', 'pytorchjob', 'elastic-trainer', '--wait=false');
    cleanups.push(() =>
      kubectl('delete', '--ignore-not-found', 'pytorchjob', 'elastic-trainer', '--wait=false'),
    );
    sh(RUN.elasticJob);
    sh(RUN.elasticPatch);
    assert.equal(
      kubectl(
        'get',
        'pytorchjob',
        'elastic-trainer',
        '-o',
        'jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}',
      ),
      '2',
    );
  });
});
