// charts/trainscaler on the real test API server, installed the way docs/operations.md ("Install with Helm")
// says: `helm upgrade --install` into trainscaler-system, taking over the objects that `kubectl apply` created
// (up.sh applied infra/k8s/rbac.yaml, as an operator moving from the kustomization would have). Then the
// runner is started from what the chart installed: the Deployment's args and the ConfigMap's settings, as
// the ServiceAccount the chart binds, under the chart's admission policies, with one of the Deployment's pods
// as its identity. It takes the Lease, labels that pod as the leader (so the chart's Service selects it) and
// answers an Alertmanager alert. The test cluster runs the Deployment's pods on kwok nodes (no image is run
// there: kwok only marks them Running), so the runner runs as a process here, like the other deploy tests.
// Needs TRAINSCALER_KUBECONFIG (npm run test:integration starts the cluster) and Helm (npm run setup).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort, type Started, start, stop, waitUntil } from '../../../infra/local-stack/processes.js';
import { getArray, getPath, getString } from '../../../lib/adapters/unstructured.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { HELM, skipWithoutHelm } from '../../support/helm.js';
import { postWebhook } from '../../support/webhook-request.js';
import { type TestCluster, testCluster } from '../support/test-cluster.js';

const skip = process.env.TRAINSCALER_KUBECONFIG
  ? skipWithoutHelm
  : 'TRAINSCALER_KUBECONFIG is not set (npm run test:integration starts the cluster)';
const NAMESPACE = 'trainscaler-system';
const LEADER_LABEL = 'trainscaler.io/leader';
// The test cluster may be shared with other test runs, whose runners hold the Lease trainscaler-leader: this
// runner uses a Lease of its own, granted the way an operator grants a renamed Lease (as leader-election.test.ts).
const LEASE = `trainscaler-helm-it-${process.pid}`;
const LEASE_ROLE = 'trainscaler-helm-it-lease';

describe('charts/trainscaler installed on the test API server', { skip }, () => {
  let cluster: TestCluster;
  let dir = '';
  let runner: Started | undefined;
  const kubectl = (...args: string[]) =>
    execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
  const helm = (...args: string[]) =>
    execFileSync(HELM ?? 'helm', ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 300_000,
    });
  const json = (...args: string[]) => JSON.parse(kubectl(...args, '-o', 'json')) as unknown;

  before(() => {
    cluster = testCluster();
    dir = mkdtempSync(join(tmpdir(), 'trainscaler-helm-'));
    kubectl(
      '-n',
      NAMESPACE,
      'create',
      'role',
      LEASE_ROLE,
      '--verb=get,update',
      '--resource=leases.coordination.k8s.io',
      `--resource-name=${LEASE}`,
    );
    kubectl(
      '-n',
      NAMESPACE,
      'create',
      'rolebinding',
      LEASE_ROLE,
      `--role=${LEASE_ROLE}`,
      `--serviceaccount=${NAMESPACE}:trainscaler`,
    );
  });

  after(async () => {
    if (runner) await stop(runner, 10_000);
    // Not `helm uninstall`: it would delete the ServiceAccount (and with it the token of the cluster's
    // kubeconfig-sa, which other tests use) and the RBAC up.sh applied. The cluster may be shared by other
    // test runs: what the chart added to up.sh's objects goes, with the release record (so a rerun installs
    // afresh); the ServiceAccount, RBAC and CRDs stay as the chart left them (the same rules as up.sh's).
    if (cluster) {
      kubectl(
        '-n',
        NAMESPACE,
        'delete',
        '--ignore-not-found',
        'deployment/trainscaler',
        'service/trainscaler',
        'poddisruptionbudget/trainscaler',
        'networkpolicy/trainscaler',
        'configmap/trainscaler-config',
        'configmap/trainscaler-prometheus-rules',
        'secret/trainscaler-webhook-token',
      );
      kubectl('-n', NAMESPACE, 'delete', '--ignore-not-found', 'secret', '-l', 'owner=helm,name=trainscaler');
      kubectl(
        '-n',
        NAMESPACE,
        'delete',
        '--ignore-not-found',
        `rolebinding/${LEASE_ROLE}`,
        `role/${LEASE_ROLE}`,
        `lease/${LEASE}`,
      );
      for (const name of ['trainscaler-leader-label', 'trainscaler-configmap-names'])
        kubectl(
          'delete',
          '--ignore-not-found',
          `validatingadmissionpolicybinding/${name}`,
          `validatingadmissionpolicy/${name}`,
        );
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('installs with `helm upgrade --install`, taking over what kubectl applied, then the webhook Secret', () => {
    // docs/operations.md's "Install with Helm" block (README.md's "Install in a cluster" is the same), run as
    // written by bash, with this cluster's kubeconfig and the Helm npm run setup built first on PATH.
    const install = [
      'kubectl apply --server-side --force-conflicts -f charts/trainscaler/crds/',
      'helm upgrade --install trainscaler charts/trainscaler --namespace trainscaler-system --create-namespace --take-ownership',
      'TOKEN="$(openssl rand -hex 32)" && kubectl -n trainscaler-system create secret generic trainscaler-webhook-token --from-literal=token="$TOKEN"',
    ];
    for (const doc of ['docs/operations.md', 'README.md'])
      assert.ok(
        readFileSync(doc, 'utf8').includes(`\`\`\`sh\n${install.join('\n')}\n\`\`\``),
        `${doc} gives these commands as one block`,
      );
    const out = execFileSync('bash', ['-euo', 'pipefail', '-c', install.join('\n')], {
      encoding: 'utf8',
      env: {
        ...process.env,
        KUBECONFIG: cluster.adminKubeconfig,
        PATH: [HELM?.includes('/') ? dirname(HELM) : '', process.env.PATH ?? '']
          .filter(Boolean)
          .join(delimiter),
      },
      timeout: 300_000,
    });
    assert.match(out, /STATUS: deployed/);
    assert.match(
      helm('list', '--namespace', NAMESPACE),
      /^trainscaler\s+trainscaler-system\s+1\s.*deployed/m,
    );
    for (const object of [
      'deployment/trainscaler',
      'service/trainscaler',
      'configmap/trainscaler-config',
      'configmap/trainscaler-prometheus-rules',
      'poddisruptionbudget/trainscaler',
      'networkpolicy/trainscaler',
      'role/trainscaler-leader-label',
    ])
      kubectl('-n', NAMESPACE, 'get', object);
    for (const object of [
      'validatingadmissionpolicy/trainscaler-leader-label',
      'validatingadmissionpolicy/trainscaler-configmap-names',
      'clusterrole/trainscaler',
      'crd/scaledtrainingjobs.trainscaler.io',
      'crd/trainingautoscalers.trainscaler.io',
    ])
      kubectl('get', object);
  });

  it("starts the runner from the chart's Deployment and settings; it leads, labels its pod and answers an alert", async () => {
    // The Deployment's pods exist (kwok runs them); the runner takes the identity of one, as in the pod.
    const podName = await waitUntil(
      () => {
        const pods = getArray(
          json(
            '-n',
            NAMESPACE,
            'get',
            'pods',
            '-l',
            'app.kubernetes.io/name=trainscaler,app.kubernetes.io/component=controller',
          ),
          ['items'],
        );
        return pods && pods.length >= 1 ? getString(pods[0], ['metadata', 'name']) : undefined;
      },
      90_000,
      "the Deployment's pods",
    );
    const deployment = json('-n', NAMESPACE, 'get', 'deployment', 'trainscaler');
    const container = getPath(deployment, ['spec', 'template', 'spec', 'containers', 0]);
    const args = (getPath(container, ['args']) as string[] | undefined) ?? [];
    assert.deepEqual(args, ['run']);
    const settings = (getPath(json('-n', NAMESPACE, 'get', 'configmap', 'trainscaler-config'), ['data']) ??
      {}) as Record<string, string>;
    // The token of the Secret the chart mounts, where the pod would read it.
    const token = Buffer.from(
      getString(json('-n', NAMESPACE, 'get', 'secret', 'trainscaler-webhook-token'), ['data', 'token']) ?? '',
      'base64',
    ).toString();
    assert.match(token, /^[0-9a-f]{64}$/);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, token);
    const port = await freePort();
    runner = start(
      'trainscaler run',
      process.execPath,
      // The listen address is this machine's loopback, not the pod's 0.0.0.0, and the Lease the test's own;
      // everything else is the chart's.
      [
        '--import',
        'tsx',
        'cli/main.ts',
        ...args,
        '--kubeconfig',
        cluster.saKubeconfig,
        '--port',
        String(port),
        '--lease-name',
        LEASE,
        '--address',
        '127.0.0.1',
      ],
      {
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          ...settings,
          POD_NAME: podName,
          POD_NAMESPACE: NAMESPACE,
          TRAINSCALER_WEBHOOK_TOKEN_FILE: tokenFile,
        },
      },
    );
    const url = `http://127.0.0.1:${port}`;
    await waitUntil(
      async () => {
        const metrics = await fetch(`${url}/metrics`).then(
          (r) => r.text(),
          () => '',
        );
        return /^trainscaler_leader 1$/m.test(metrics) ? true : undefined;
      },
      60_000,
      'the runner to take the Lease',
      () => runner?.output().slice(-3000) ?? '',
    );
    // The leader labels its own pod (the chart's Role trainscaler-leader-label, narrowed by its policy), so
    // the chart's Service, which selects that label, routes Alertmanager to it.
    await waitUntil(
      () =>
        getString(json('-n', NAMESPACE, 'get', 'pod', podName), ['metadata', 'labels', LEADER_LABEL]) ===
        'true'
          ? true
          : undefined,
      30_000,
      `the leader label on ${podName}`,
      () => runner?.output().slice(-3000) ?? '',
    );
    const selector = getPath(json('-n', NAMESPACE, 'get', 'service', 'trainscaler'), ['spec', 'selector']);
    assert.equal(getString(selector, [LEADER_LABEL]), 'true');

    const body = JSON.stringify(
      alertmanagerWebhook([{ namespace: 'default', kind: 'PyTorchJob', name: 'absent' }]),
    );
    // `kubectl -n trainscaler-system get lease <name>` names the holder.
    assert.match(kubectl('-n', NAMESPACE, 'get', 'lease', LEASE), new RegExp(`\\s${podName}\\s`));
    const answer = await postWebhook(`${url}/alertmanager`, body, token);
    assert.equal(answer.status, 200, JSON.stringify(answer.json));
    assert.equal((await postWebhook(`${url}/alertmanager`, body, 'wrong-token')).status, 401);
  });
});
