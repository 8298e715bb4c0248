// RBAC grants exactly what the code requests. Three checks: (1) each caller (KubernetesClusterClient method by
// method, the runner's informers, the leader Lease, the outcome store, the forwarder's ledger, the CLI's
// explain and history) is driven against a recording HTTP server on 127.0.0.1 and its requests, as RBAC
// names them, must equal its row in lib/cluster/api-access.ts; (2) `trainscaler run` as a whole (its Lease,
// informers, leader label and outcome store wired as run-command wires them) asks for nothing RUNNER_ACCESS
// does not list, so a caller the per-caller checks miss is caught; (3) the rules that infra/k8s/rbac.yaml,
// lambda-access.yaml and forwarder/rbac.yaml grant the ServiceAccounts and the Lambda group must equal those
// rows, neither more nor less.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { explainJob } from '../../../cli/explain.js';
import { readJobHistory } from '../../../cli/history.js';
import { managedJobStatuses } from '../../../cli/status.js';
import type { HandlerResult } from '../../../functions/handler-deps.js';
import { getArray, getString, isObject } from '../../../lib/adapters/unstructured.js';
import {
  type ApiAccess,
  CLUSTER_CLIENT_ACCESS,
  coversName,
  EXPLAIN_ACCESS,
  FORWARDER_ACCESS,
  FORWARDER_LEDGER_ACCESS,
  FUNCTIONS_ACCESS,
  HISTORY_ACCESS,
  INFORMER_ACCESS,
  LEADER_LABEL_ACCESS,
  LEASE_ACCESS,
  OUTCOME_STORE_ACCESS,
  POLICY_INFORMER_ACCESS,
  RUNNER_ACCESS,
  STATUS_ACCESS,
} from '../../../lib/cluster/api-access.js';
import { KubernetesClusterClient } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { OutcomeStore, readJobOutcomes } from '../../../lib/decisions/outcome-store.js';
import { ConfigMapLedgerStore } from '../../../lib/forwarder/ledger.js';
import { PrometheusMetricsSource } from '../../../lib/metrics/prometheus-metrics-source.js';
import { startInformers } from '../../../lib/runner/informers.js';
import { kubernetesLeaderLabelPatch } from '../../../lib/runner/leader-pod-label.js';
import { KubernetesLeaseLock } from '../../../lib/runner/lease-lock.js';
import { startRunner } from '../../../lib/runner/runner.js';
import type { JobKind } from '../../../lib/types.js';
import { listenAsApiServer } from '../../support/local-api-server.js';

const OWN = 'trainscaler-system';

/** One request as RBAC sees it: verb from the HTTP method (and ?watch), group/resource/namespace/name from the path. */
function accessOf(method: string, url: URL, body: unknown): ApiAccess {
  const parts = url.pathname.split('/').filter(Boolean);
  const group = parts[0] === 'api' ? '' : (parts[1] ?? '');
  let rest = parts.slice(parts[0] === 'api' ? 2 : 3);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces') {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource = '', nameInPath, subresource] = rest;
  const fullResource = subresource ? `${resource}/${subresource}` : resource;
  const verbs: Record<string, ApiAccess['verb']> = { POST: 'create', PUT: 'update', PATCH: 'patch' };
  let verb = verbs[method];
  if (method === 'GET')
    verb = url.searchParams.get('watch') === 'true' ? 'watch' : nameInPath ? 'get' : 'list';
  assert.ok(verb, `unexpected HTTP method ${method}`);
  const name = nameInPath ?? (isObject(body) ? getString(body, ['metadata', 'name']) : undefined);
  const scope: ApiAccess['scope'] =
    namespace === OWN ? { where: 'own-namespace', resourceName: name ?? '' } : { where: 'cluster' };
  return { group, resource: fullResource, verb, scope };
}

async function bodyOf(request: IncomingMessage): Promise<unknown> {
  let raw = '';
  for await (const chunk of request) raw += String(chunk);
  try {
    return raw ? JSON.parse(raw) : undefined;
  } catch {
    return raw;
  }
}

interface Recorder {
  kubeConfig: KubeConfig;
  recorded: ApiAccess[];
  /** Discovery reads (non-resource URLs such as /api/v1): granted to every user, not by trainscaler's RBAC. */
  discovery: string[];
  close(): Promise<void>;
}

/**
 * An HTTP server on 127.0.0.1 that answers like an API server would, recording each request. One per caller.
 * `missing` says which objects do not exist (404 on get and patch), so that a caller's create path runs.
 */
async function recorder(missing: (access: ApiAccess) => boolean = () => false): Promise<Recorder> {
  const recorded: ApiAccess[] = [];
  const discovery: string[] = [];
  const server: Server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    if (request.method === 'GET' && /^\/(api(\/v1)?|apis(\/[^/]+){0,2})\/?$/.test(url.pathname)) {
      discovery.push(url.pathname);
      response.setHeader('content-type', 'application/json');
      return response.end(
        JSON.stringify({
          kind: 'APIResourceList',
          groupVersion: 'v1',
          resources: [
            {
              name: 'pods/resize',
              namespaced: true,
              kind: 'Pod',
              verbs: ['get', 'patch', 'update'],
              singularName: '',
            },
          ],
        }),
      );
    }
    const access = accessOf(request.method ?? 'GET', url, await bodyOf(request));
    recorded.push(access);
    response.setHeader('content-type', 'application/json');
    if (access.verb === 'watch') return response.end();
    if (access.verb === 'list')
      return response.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
    if (
      (access.verb === 'get' && access.resource === 'leases') ||
      ((access.verb === 'get' || access.verb === 'patch') && missing(access))
    ) {
      response.statusCode = 404;
      return response.end(JSON.stringify({ kind: 'Status', code: 404, message: 'not found' }));
    }
    const now = new Date().toISOString();
    response.end(
      JSON.stringify({
        metadata: { name: 'x', namespace: 'team-a', resourceVersion: '2' },
        spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: now, renewTime: now },
      }),
    );
  });
  const { kubeConfig, close } = await listenAsApiServer(server);
  return {
    kubeConfig,
    recorded,
    discovery,
    close,
  };
}

const key = (a: ApiAccess) =>
  `${a.group}/${a.resource} ${a.verb} ${a.scope.where === 'cluster' ? '*' : `${OWN}/${a.scope.resourceName}`}`;
const keys = (list: readonly ApiAccess[]) => [...new Set(list.map(key))].sort();

/** The requests `run` makes, against a recorder of its own. */
async function requestsOf(
  run: (kubeConfig: KubeConfig) => Promise<unknown>,
  missing?: (access: ApiAccess) => boolean,
): Promise<ApiAccess[]> {
  const r = await recorder(missing);
  try {
    await run(r.kubeConfig);
    return r.recorded;
  } finally {
    await r.close();
  }
}

/** A request in trainscaler's namespace named as the row of `table` that covers it (a prefix row: `x-*`). */
function asListed(access: ApiAccess, table: readonly ApiAccess[]): ApiAccess {
  const { scope } = access;
  if (scope.where !== 'own-namespace') return access;
  const row = table.find(
    (a) =>
      a.group === access.group &&
      a.resource === access.resource &&
      a.verb === access.verb &&
      a.scope.where === 'own-namespace' &&
      coversName(a.scope.resourceName, scope.resourceName),
  );
  return row ?? access;
}

/** The keys of `requests` as `table` names them: equal to keys(table) when the table lists exactly them. */
const keysAsListed = (requests: readonly ApiAccess[], table: readonly ApiAccess[]) =>
  keys(requests.map((a) => asListed(a, table)));

const KINDS: JobKind[] = ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob'];
const refs = KINDS.map((kind) => ({ kind, namespace: 'team-a', name: 'train' }));
// TrainJobs are never written (lib/adapters/job-adapter.ts): the actuator refuses every change before a patch.
const patchedRefs = refs.filter((ref) => ref.kind !== 'TrainJob');

describe('the API requests the code makes are the ones lib/cluster/api-access.ts lists', () => {
  const calls: Record<keyof typeof CLUSTER_CLIENT_ACCESS, (c: KubernetesClusterClient) => Promise<unknown>> =
    {
      getJob: (c) => Promise.all(refs.map((ref) => c.getJob(ref))),
      listJobs: (c) => Promise.all(KINDS.flatMap((kind) => [c.listJobs(kind), c.listJobs(kind, 'team-a')])),
      patchJob: (c) =>
        Promise.all(
          patchedRefs.map((ref) =>
            c.patchJob(ref, [{ op: 'test', path: '/spec', value: {} }], { dryRun: false }),
          ),
        ),
      listPods: (c) => Promise.all([c.listPods(undefined), c.listPods('team-a', 'a=b')]),
      listNodes: (c) => c.listNodes(),
      evictPod: (c) => c.evictPod('team-a', 'train-worker-0', { dryRun: false }),
      resizePod: (c) =>
        c.resizePod('team-a', 'train-worker-0', [{ op: 'test', path: '/spec', value: {} }], {
          dryRun: false,
        }),
      servesPodResize: (c) => c.servesPodResize(),
      createEvent: (c) =>
        c.createEvent(
          {
            involved: {
              ref: refs[0] ?? { kind: 'PyTorchJob', namespace: 'team-a', name: 'x' },
              uid: 'u',
              apiVersion: 'kubeflow.org/v1',
            },
            type: 'Normal',
            reason: 'TrainscalerTuning',
            message: 'm',
            decisionId: 'abc',
          },
          { dryRun: false },
        ),
      listJobEvents: (c) => Promise.all(refs.map((ref) => c.listJobEvents(ref))),
      listWorkloads: (c) => c.listWorkloads('team-a', 'kueue.x-k8s.io/job-uid=u'),
      getLocalQueue: (c) => c.getLocalQueue('team-a', 'lq'),
      getClusterQueue: (c) => c.getClusterQueue('cq'),
      getConfigMap: (c) => c.getConfigMap(OWN, 'trainscaler-profiles'),
      getJobState: (c) => c.getJobState(refs[0] ?? { kind: 'PyTorchJob', namespace: 'team-a', name: 'x' }),
      listJobStates: (c) => c.listJobStates(),
      putJobState: async (c) => {
        const job = {
          ref: { kind: 'PyTorchJob' as const, namespace: 'team-a', name: 'train' },
          uid: 'u',
          apiVersion: 'kubeflow.org/v1',
        };
        const current = {
          namespace: 'team-a',
          name: 'pytorchjob-train',
          resourceVersion: '1',
          target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'train' },
          status: {},
        };
        await c.putJobState(job, {}, undefined, { dryRun: false });
        await c.putJobState(job, {}, { ...current, ownerUid: 'u' }, { dryRun: false });
        await c.putJobState(job, {}, { ...current, ownerUid: 'earlier-job' }, { dryRun: false });
      },
      listTrainingAutoscalers: (c) =>
        Promise.all([c.listTrainingAutoscalers(), c.listTrainingAutoscalers('team-a')]),
      putTrainingAutoscalerStatus: (c) =>
        c.putTrainingAutoscalerStatus(
          {
            apiVersion: 'trainscaler.io/v1alpha1',
            kind: 'TrainingAutoscaler',
            metadata: { name: 'bert', namespace: 'team-a', resourceVersion: '3' },
            spec: { selector: {} },
          },
          { matchedJobs: 1 },
          { dryRun: false },
        ),
      putConfigMap: (c) =>
        Promise.all([
          c.putConfigMap(OWN, 'trainscaler-profiles', {}, undefined, { dryRun: false }),
          c.putConfigMap(OWN, 'trainscaler-profiles', {}, '7', { dryRun: false }),
        ]),
    };
  for (const [method, call] of Object.entries(calls)) {
    it(`KubernetesClusterClient.${method}`, async () => {
      const expected = keys(CLUSTER_CLIENT_ACCESS[method as keyof typeof CLUSTER_CLIENT_ACCESS]);
      const requests = await requestsOf((kc) => call(new KubernetesClusterClient(kc)));
      assert.deepEqual(keys(requests), expected);
    });
  }

  it('servesPodResize reads only discovery (/api/v1), which RBAC does not need to grant', async () => {
    const r = await recorder();
    try {
      const client = new KubernetesClusterClient(r.kubeConfig);
      assert.equal(await client.servesPodResize(), true);
      assert.equal(await client.servesPodResize(), true, 'asked once per client');
      assert.deepEqual(r.discovery, ['/api/v1']);
      assert.deepEqual(r.recorded, []);
    } finally {
      await r.close();
    }
  });

  it('covers every method of KubernetesClusterClient', () => {
    const methods = Object.getOwnPropertyNames(KubernetesClusterClient.prototype).filter(
      (m) => m !== 'constructor',
    );
    assert.deepEqual(methods.sort(), Object.keys(CLUSTER_CLIENT_ACCESS).sort());
  });

  it("the runner's informers (with the TrainingAutoscalers; the forwarder's without)", async () => {
    assert.equal(await informerRequests(false), JSON.stringify(keys(INFORMER_ACCESS)));
    assert.equal(
      await informerRequests(true),
      JSON.stringify(keys([...INFORMER_ACCESS, ...POLICY_INFORMER_ACCESS])),
    );
  });

  async function informerRequests(policies: boolean): Promise<string> {
    const r = await recorder();
    const quiet = () => undefined;
    const informers = startInformers(r.kubeConfig, {
      onEvent: quiet,
      logger: { info: quiet, warn: quiet, error: quiet },
      minRestartDelayMs: 10,
      maxRestartDelayMs: 50,
      policies,
    });
    const expected = keys([...INFORMER_ACCESS, ...(policies ? POLICY_INFORMER_ACCESS : [])]);
    const deadline = Date.now() + 5000;
    while (keys(r.recorded).length < expected.length && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    await informers.stop();
    const requests = keys(r.recorded);
    await r.close();
    return JSON.stringify(requests);
  }

  it("the runner's leader Lease", async () => {
    const record = {
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: new Date(),
      renewTime: new Date(),
      leaseTransitions: 0,
    };
    const requests = await requestsOf(async (kc) => {
      const lock = new KubernetesLeaseLock(kc, OWN, 'trainscaler-leader');
      await lock.get();
      await lock.create(record);
      await lock.update({ ...record, resourceVersion: '2' });
    });
    assert.deepEqual(keys(requests), keys(LEASE_ACCESS));
  });

  it("the runner's leader label on its own pod (any pod name in its namespace: names are generated)", async () => {
    const requests = await requestsOf(async (kc) => {
      const patch = kubernetesLeaderLabelPatch(kc, OWN, 'trainscaler-7d9c-x2');
      await patch(true);
      await patch(false);
    });
    assert.deepEqual(
      [...new Set(keys(requests).map((r) => r.replace(`${OWN}/trainscaler-7d9c-x2`, `${OWN}/*`)))],
      keys(LEADER_LABEL_ACCESS),
    );
  });

  it("the runner's outcome store: a namespace's ConfigMap read, created when missing, else updated", async () => {
    const record = (kc: KubeConfig) => {
      const store = new OutcomeStore({
        cluster: new KubernetesClusterClient(kc),
        namespace: OWN,
        dryRun: false,
        clock: () => 1_800_000_000,
      });
      return store.record('schedule', keptResult('team-a'));
    };
    const configMaps = (a: ApiAccess) => a.resource === 'configmaps';
    const requests = [
      ...(await requestsOf(record, configMaps)),
      ...(await requestsOf(record)),
      ...(await requestsOf((kc) =>
        readJobOutcomes(new KubernetesClusterClient(kc), OWN, {
          kind: 'PyTorchJob',
          namespace: 'team-b',
          name: 'x',
        }),
      )),
    ];
    assert.deepEqual(keysAsListed(requests, OUTCOME_STORE_ACCESS), keys(OUTCOME_STORE_ACCESS));
  });

  it("the forwarder's ledger: read, then patched", async () => {
    const requests = await requestsOf(async (kc) => {
      const ledger = new ConfigMapLedgerStore(kc, OWN, 'trainscaler-forwarder-ledger');
      await ledger.load();
      await ledger.save({ uid: 'OOMKilled/pytorch/1' });
    });
    assert.deepEqual(keys(requests), keys(FORWARDER_LEDGER_ACCESS));
  });

  it("trainscaler explain and history (a user's own credentials): the job, its state, its Events, its outcome ConfigMap", async () => {
    const explained = await requestsOf((kc) =>
      Promise.all(refs.map((ref) => explainJob(new KubernetesClusterClient(kc), OWN, ref))),
    );
    assert.deepEqual(keysAsListed(explained, EXPLAIN_ACCESS), keys(EXPLAIN_ACCESS));
    const history = await requestsOf((kc) =>
      Promise.all(refs.map((ref) => readJobHistory(new KubernetesClusterClient(kc), ref))),
    );
    assert.deepEqual(keys(history), keys(HISTORY_ACCESS));
    // The recorder lists nothing: one managed job is added to the PyTorchJob list's answer, so that its
    // namespace's outcome store is read as well.
    const status = await requestsOf((kc) => {
      const client = new KubernetesClusterClient(kc);
      const listJobs = client.listJobs.bind(client);
      client.listJobs = async (kind, namespace, options) => {
        const listed = await listJobs(kind, namespace, options);
        if (kind !== 'PyTorchJob') return listed;
        const metadata = {
          name: 'bert',
          namespace: 'team-a',
          annotations: { 'trainscaler.io/managed': 'true' },
        };
        return [...listed, { apiVersion: 'kubeflow.org/v1', kind, metadata, spec: {} }];
      };
      return managedJobStatuses(client, OWN, { namespaceAllowlist: [], ownNamespaces: [OWN] });
    });
    assert.deepEqual(keysAsListed(status, STATUS_ACCESS), keys(STATUS_ACCESS));
  });

  it('trainscaler run as a whole (Lease, informers, leader label, outcome store) asks for nothing RUNNER_ACCESS does not list', async () => {
    const r = await recorder((a) => a.resource === 'configmaps');
    const clock = () => 1_800_000_000;
    const runner = await startRunner({
      kubeConfig: r.kubeConfig,
      deps: {
        cluster: new KubernetesClusterClient(r.kubeConfig),
        metrics: new PrometheusMetricsSource('http://127.0.0.1:9', clock),
        clock,
        config: DEFAULT_POLICY_CONFIG,
        dryRun: false,
        logger: { info() {}, warn() {}, error() {} },
        profiles: { namespace: OWN, configMapName: 'trainscaler-profiles' },
      },
      identity: 'trainscaler-7d9c-x2',
      namespace: OWN,
      podName: 'trainscaler-7d9c-x2',
      host: '127.0.0.1',
      port: 0,
      schedule: '* * * * * *',
      timing: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
      webhookToken: async () => 'token',
      outcomeStoreNamespace: OWN,
      handlers: { schedule: async () => keptResult('team-a') },
    });
    const stored = () => r.recorded.some((a) => a.resource === 'configmaps' && a.verb === 'create');
    const deadline = Date.now() + 10_000;
    while (!stored() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await runner.stop();
    await r.close();
    assert.ok(stored(), 'the outcome of a schedule tick was stored');
    const listed = new Set(keys(RUNNER_ACCESS));
    const unlisted = keysAsListed(
      r.recorded.map((a) =>
        a.scope.where === 'own-namespace' && a.resource === 'pods'
          ? { ...a, scope: { ...a.scope, resourceName: '*' } }
          : a,
      ),
      RUNNER_ACCESS,
    ).filter((k) => !listed.has(k));
    assert.deepEqual(unlisted, []);
  });
});

/** A schedule tick that kept one job of `namespace` as it is: the outcome store records it. */
function keptResult(namespace: string): HandlerResult {
  const ref = { kind: 'PyTorchJob' as const, namespace, name: 'bert' };
  return {
    trigger: 'schedule',
    outcomes: [
      {
        ref,
        plan: { ref, policy: 'rebalance', changes: [], reason: 'keep 4 workers' },
        applied: false,
        skipped: 'no-change',
      },
    ],
    errors: [],
  };
}

// ---- what the manifests grant ----

const docs = [
  'infra/k8s/rbac.yaml',
  'infra/k8s/lambda-access.yaml',
  'infra/k8s/forwarder/rbac.yaml',
  'infra/k8s/scaledtrainingjobs-rbac.yaml',
  'infra/k8s/lambda-access-scaledtrainingjobs.yaml',
  'infra/k8s/trainingautoscalers-rbac.yaml',
  'infra/k8s/lambda-access-trainingautoscalers.yaml',
].flatMap((file) => loadAll(readFileSync(file, 'utf8')).filter(isObject));

interface Subject {
  kind: 'ServiceAccount' | 'Group';
  name: string;
}

/** Every (group, resource, verb, where) a subject is granted; a rule without resourceNames in a Role grants '*'. */
function grantsOf(subject: Subject): string[] {
  const grants: string[] = [];
  for (const binding of docs.filter((d) => d.kind === 'ClusterRoleBinding' || d.kind === 'RoleBinding')) {
    const bound = (getArray(binding, ['subjects']) ?? []).some(
      (s) => getString(s, ['kind']) === subject.kind && getString(s, ['name']) === subject.name,
    );
    if (!bound) continue;
    const roleKind = getString(binding, ['roleRef', 'kind']);
    const roleName = getString(binding, ['roleRef', 'name']);
    const bindingNamespace = getString(binding, ['metadata', 'namespace']);
    const role = docs.find(
      (d) =>
        d.kind === roleKind &&
        getString(d, ['metadata', 'name']) === roleName &&
        (roleKind === 'ClusterRole' || getString(d, ['metadata', 'namespace']) === bindingNamespace),
    );
    assert.ok(role, `${roleKind} ${roleName} exists`);
    const namespaced = binding.kind === 'RoleBinding';
    if (namespaced) assert.equal(bindingNamespace, OWN, 'Roles are bound only in trainscaler-system');
    for (const rule of getArray(role, ['rules']) ?? []) {
      const names = (getArray(rule, ['resourceNames']) ?? []).map(String);
      assert.ok(
        !namespaced ||
          names.length > 0 ||
          (getArray(rule, ['verbs']) ?? []).every((v) => v === 'create') ||
          isLeaderLabelRule(rule) ||
          isOutcomeStoreRule(rule),
        'a Role rule without resourceNames grants only create (which Kubernetes cannot restrict by name), the leader label patch or the outcome store',
      );
      assert.ok(namespaced || names.length === 0, 'ClusterRole rules are not restricted by name');
      for (const group of (getArray(rule, ['apiGroups']) ?? []).map(String))
        for (const resource of (getArray(rule, ['resources']) ?? []).map(String))
          for (const verb of (getArray(rule, ['verbs']) ?? []).map(String)) {
            assert.ok(![group, resource, verb].includes('*'), 'no wildcards');
            const where = namespaced
              ? names.length
                ? names.map((n) => `${OWN}/${n}`)
                : [`${OWN}/*`]
              : ['*'];
            for (const w of where) grants.push(`${group}/${resource} ${verb} ${w}`);
          }
    }
  }
  return [...new Set(grants)].sort();
}

/** pods patch, for the leader label: pod names are generated, so it cannot be pinned (LEADER_LABEL_ACCESS). */
function isLeaderLabelRule(rule: unknown): boolean {
  const list = (path: string) => JSON.stringify(getArray(rule, [path]) ?? []);
  return list('apiGroups') === '[""]' && list('resources') === '["pods"]' && list('verbs') === '["patch"]';
}

/**
 * ConfigMaps get and update, for the outcome store (OUTCOME_STORE_ACCESS): its names (one per job namespace)
 * cannot be listed in advance; infra/k8s/configmap-names-policy.yaml holds the writes to them.
 */
function isOutcomeStoreRule(rule: unknown): boolean {
  const list = (path: string) => JSON.stringify(getArray(rule, [path]) ?? []);
  return (
    list('apiGroups') === '[""]' &&
    list('resources') === '["configmaps"]' &&
    list('verbs') === '["get","update"]'
  );
}

/**
 * A create in trainscaler's namespace cannot be pinned to a name, nor can a prefix (`trainscaler-outcomes-*`):
 * the manifests grant those for any name there.
 */
function needed(list: readonly ApiAccess[]): string[] {
  return keys(
    list.map((a) =>
      a.scope.where === 'own-namespace' && (a.verb === 'create' || a.scope.resourceName.endsWith('*'))
        ? { ...a, scope: { ...a.scope, resourceName: '*' } }
        : a,
    ),
  );
}

describe('the RBAC manifests grant exactly what the code requests', () => {
  it('the ServiceAccount (trainscaler run): the functions, the informers and the leader Lease', () => {
    assert.deepEqual(grantsOf({ kind: 'ServiceAccount', name: 'trainscaler' }), needed(RUNNER_ACCESS));
  });

  it('the forwarder (trainscaler forward): its informers and its ledger, nothing written anywhere else', () => {
    assert.deepEqual(
      grantsOf({ kind: 'ServiceAccount', name: 'trainscaler-forwarder' }),
      needed(FORWARDER_ACCESS),
    );
  });

  it('the Lambda group: the functions only (no watch, no Lease)', () => {
    const lambda = grantsOf({ kind: 'Group', name: 'trainscaler-lambda' });
    assert.deepEqual(lambda, needed(FUNCTIONS_ACCESS));
    assert.ok(!lambda.some((g) => g.includes('leases') || g.includes(' watch ')));
  });

  it('Leases and ConfigMaps only in trainscaler-system, pinned by name except create', () => {
    const sa = grantsOf({ kind: 'ServiceAccount', name: 'trainscaler' });
    const stateful = sa.filter(
      (g) => g.startsWith('coordination.k8s.io/leases') || g.startsWith('/configmaps'),
    );
    assert.deepEqual(stateful, [
      '/configmaps create trainscaler-system/*',
      // The outcome store's ConfigMaps, one per job namespace (configmap-names-policy.yaml holds the writes).
      '/configmaps get trainscaler-system/*',
      '/configmaps get trainscaler-system/trainscaler-profiles',
      '/configmaps update trainscaler-system/*',
      '/configmaps update trainscaler-system/trainscaler-profiles',
      'coordination.k8s.io/leases create trainscaler-system/*',
      'coordination.k8s.io/leases get trainscaler-system/trainscaler-leader',
      'coordination.k8s.io/leases update trainscaler-system/trainscaler-leader',
    ]);
  });
});
