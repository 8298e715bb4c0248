// infra/k8s against the real test API server: it must be accepted by a server-side dry run (schema,
// admission, RBAC objects), and the ServiceAccount it binds must be allowed everything `trainscaler run`
// does. Needs TRAINSCALER_KUBECONFIG (infra/cluster/up.sh prints the path).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const kubeconfig = process.env.TRAINSCALER_KUBECONFIG;
const skip = kubeconfig
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (start the test API server: infra/cluster/up.sh)';
const SA = 'system:serviceaccount:trainscaler-system:trainscaler';

async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await run('kubectl', ['--kubeconfig', kubeconfig ?? '', ...args], { timeout: 60_000 });
  return stdout;
}

describe('infra/k8s on the test API server', { skip }, () => {
  it('is accepted by a server-side dry-run apply', async () => {
    const out = await kubectl('apply', '--dry-run=server', '-k', 'infra/k8s');
    for (const object of [
      'namespace/trainscaler-system',
      'serviceaccount/trainscaler',
      'clusterrole.rbac.authorization.k8s.io/trainscaler',
      'clusterrolebinding.rbac.authorization.k8s.io/trainscaler',
      'configmap/trainscaler-config-',
      'service/trainscaler',
      'deployment.apps/trainscaler',
      'poddisruptionbudget.policy/trainscaler',
      'networkpolicy.networking.k8s.io/trainscaler',
    ]) {
      assert.match(
        out,
        new RegExp(
          `^${object.replaceAll('.', '\\.')}\\S* (created|configured|unchanged) \\(server dry run\\)$`,
          'm',
        ),
        object,
      );
    }
  });

  it('accepts the binding of the Lambda roles group to the ClusterRole', async () => {
    const out = await kubectl('apply', '--dry-run=server', '-f', 'infra/k8s/lambda-access.yaml');
    assert.match(
      out,
      /^clusterrolebinding\.rbac\.authorization\.k8s\.io\/trainscaler-lambda created \(server dry run\)$/m,
    );
  });

  it('grants the ServiceAccount every verb the runner and the handlers use', async () => {
    const needs: string[][] = [
      // informers (cluster-wide list + watch)
      ['list', 'pytorchjobs.kubeflow.org', '-A'],
      ['watch', 'pytorchjobs.kubeflow.org', '-A'],
      ['list', 'tfjobs.kubeflow.org', '-A'],
      ['watch', 'tfjobs.kubeflow.org', '-A'],
      ['list', 'statefulsets.apps', '-A'],
      ['watch', 'statefulsets.apps', '-A'],
      ['list', 'pods', '-A'],
      ['watch', 'pods', '-A'],
      ['list', 'nodes'],
      // leader election in its own namespace
      ['get', 'leases.coordination.k8s.io', '-n', 'trainscaler-system'],
      ['create', 'leases.coordination.k8s.io', '-n', 'trainscaler-system'],
      ['update', 'leases.coordination.k8s.io', '-n', 'trainscaler-system'],
      // handlers
      ['patch', 'pytorchjobs.kubeflow.org', '-A'],
      ['patch', 'tfjobs.kubeflow.org', '-A'],
      ['patch', 'statefulsets.apps', '-A'],
      ['create', 'pods', '--subresource=eviction', '-A'],
      ['create', 'events', '-A'],
      ['get', 'configmaps', '-n', 'trainscaler-system'],
      ['create', 'configmaps', '-n', 'trainscaler-system'],
      ['update', 'configmaps', '-n', 'trainscaler-system'],
    ];
    const denied: string[] = [];
    for (const args of needs) {
      const answer = await kubectl('auth', 'can-i', '--as', SA, ...args).catch(
        (e: { stdout?: string }) => e.stdout ?? '',
      );
      if (answer.trim() !== 'yes') denied.push(args.join(' '));
    }
    assert.deepEqual(denied, []);
  });

  it('lets the ServiceAccount patch pods (its leader label) in its own namespace only', async () => {
    const canI = (...args: string[]) =>
      kubectl('auth', 'can-i', '--as', SA, ...args).then(
        (out) => out.trim(),
        (e: { stdout?: string }) => (e.stdout ?? '').trim(),
      );
    assert.equal(await canI('patch', 'pods', '-n', 'trainscaler-system'), 'yes');
    assert.equal(await canI('patch', 'pods', '-n', 'default'), 'no');
    assert.equal(await canI('patch', 'pods', '-A'), 'no');
    assert.equal(await canI('update', 'pods', '-n', 'trainscaler-system'), 'no');
  });
});
