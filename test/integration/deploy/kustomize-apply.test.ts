// infra/k8s against the real test API server: it must be accepted by a server-side dry run (schema,
// admission, RBAC objects), and the ServiceAccount it binds must be allowed everything `trainscaler run`
// does. Needs TRAINSCALER_KUBECONFIG (infra/cluster/up.sh prints the path).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  type ApiAccess,
  FUNCTIONS_ACCESS,
  INFORMER_ACCESS,
  LEASE_ACCESS,
  RUNNER_ACCESS,
} from '../../../lib/cluster/api-access.js';

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
      'clusterrole.rbac.authorization.k8s.io/trainscaler-watch',
      'clusterrolebinding.rbac.authorization.k8s.io/trainscaler-watch',
      'role.rbac.authorization.k8s.io/trainscaler-profiles',
      'role.rbac.authorization.k8s.io/trainscaler-leader',
      'rolebinding.rbac.authorization.k8s.io/trainscaler-profiles',
      'rolebinding.rbac.authorization.k8s.io/trainscaler-leader',
      'role.rbac.authorization.k8s.io/trainscaler-outcomes',
      'rolebinding.rbac.authorization.k8s.io/trainscaler-outcomes',
      'validatingadmissionpolicy.admissionregistration.k8s.io/trainscaler-configmap-names',
      'configmap/trainscaler-config-',
      'service/trainscaler',
      'deployment.apps/trainscaler',
      'poddisruptionbudget.policy/trainscaler',
      'networkpolicy.networking.k8s.io/trainscaler',
      'customresourcedefinition.apiextensions.k8s.io/trainingautoscalers.trainscaler.io',
      'clusterrole.rbac.authorization.k8s.io/trainscaler-policies',
      'clusterrolebinding.rbac.authorization.k8s.io/trainscaler-policies',
      'clusterrole.rbac.authorization.k8s.io/trainscaler-trainingautoscalers-edit',
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

  it('accepts the binding of the Lambda roles group to the ClusterRole and the profile store Role', async () => {
    const out = await kubectl('apply', '--dry-run=server', '-f', 'infra/k8s/lambda-access.yaml');
    assert.match(
      out,
      /^clusterrolebinding\.rbac\.authorization\.k8s\.io\/trainscaler-lambda created \(server dry run\)$/m,
    );
    assert.match(
      out,
      /^rolebinding\.rbac\.authorization\.k8s\.io\/trainscaler-lambda-profiles created \(server dry run\)$/m,
    );
  });

  it('the API server allows the ServiceAccount every request the code makes (lib/cluster/api-access.ts)', async () => {
    const denied: string[] = [];
    for (const access of RUNNER_ACCESS) {
      const answer = await canI(['--as', SA], access);
      if (answer !== 'yes') denied.push(JSON.stringify(access));
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

  it('and denies it what the code never does: other verbs, other names, Leases and ConfigMaps elsewhere', async () => {
    const forbidden: string[][] = [
      ['update', 'pytorchjobs.kubeflow.org', '-A'],
      ['delete', 'pytorchjobs.kubeflow.org', '-A'],
      // Jobs and JobSets are patched (resized); TrainJobs only read; none is updated or deleted.
      ['patch', 'trainjobs.trainer.kubeflow.org', '-A'],
      ['update', 'jobsets.jobset.x-k8s.io', '-A'],
      ['delete', 'jobs.batch', '-A'],
      ['create', 'jobs.batch', '-A'],
      ['delete', 'pods', '-A'],
      ['patch', 'events', '-A'],
      ['get', 'secrets', '-A'],
      ['get', 'configmaps', '-n', 'team-a'],
      ['update', 'configmaps/kube-proxy', '-n', 'kube-system'],
      // ConfigMaps in trainscaler-system are got and updated by any name (the outcome store's names are not
      // known in advance); configmap-names-policy.yaml refuses writes to other names at admission
      // (test/integration/runner-as-service-account.test.ts).
      ['delete', 'configmaps/trainscaler-profiles', '-n', 'trainscaler-system'],
      ['update', 'leases.coordination.k8s.io/kube-scheduler', '-n', 'kube-system'],
      ['create', 'leases.coordination.k8s.io', '-n', 'kube-system'],
      ['update', 'leases.coordination.k8s.io/other', '-n', 'trainscaler-system'],
    ];
    const allowed: string[] = [];
    for (const args of forbidden) {
      const answer = await kubectl('auth', 'can-i', '--as', SA, ...args).catch(
        (e: { stdout?: string }) => e.stdout ?? '',
      );
      if (answer.trim() !== 'no') allowed.push(args.join(' '));
    }
    assert.deepEqual(allowed, []);
  });

  it('the Lambda group gets what the functions use and no watch, no Lease', async () => {
    // The functions keep each job's state and read the policies as the runner does: those bindings ship
    // beside lambda-access.yaml.
    await kubectl(
      'apply',
      '-f',
      'infra/k8s/lambda-access.yaml',
      '-f',
      'infra/k8s/lambda-access-scaledtrainingjobs.yaml',
      '-f',
      'infra/k8s/lambda-access-trainingautoscalers.yaml',
    );
    try {
      const lambda = [
        '--as',
        'arn:aws:sts::123456789012:assumed-role/alarm',
        '--as-group',
        'trainscaler-lambda',
      ];
      const denied: string[] = [];
      for (const access of FUNCTIONS_ACCESS)
        if ((await canI(lambda, access)) !== 'yes') denied.push(JSON.stringify(access));
      assert.deepEqual(denied, []);
      for (const access of [...INFORMER_ACCESS, ...LEASE_ACCESS].filter((a) => a.verb !== 'list'))
        assert.equal(await canI(lambda, access), 'no', JSON.stringify(access));
    } finally {
      await kubectl(
        'delete',
        '--ignore-not-found',
        '-f',
        'infra/k8s/lambda-access.yaml',
        '-f',
        'infra/k8s/lambda-access-scaledtrainingjobs.yaml',
        '-f',
        'infra/k8s/lambda-access-trainingautoscalers.yaml',
      );
    }
  });
});

/** `kubectl auth can-i` for one row of the access table: yes or no. */
async function canI(identity: string[], access: ApiAccess): Promise<string> {
  const [resource, subresource] = access.resource.split('/');
  const qualified = access.group ? `${resource}.${access.group}` : (resource ?? '');
  const args = ['auth', 'can-i', ...identity, access.verb];
  if (access.scope.where === 'cluster') args.push(qualified, '-A');
  else {
    const named = access.verb === 'create' ? qualified : `${qualified}/${access.scope.resourceName}`;
    args.push(named, '-n', 'trainscaler-system');
  }
  if (subresource) args.push(`--subresource=${subresource}`);
  const answer = await kubectl(...args).catch((e: { stdout?: string }) => e.stdout ?? '');
  return answer.trim();
}
