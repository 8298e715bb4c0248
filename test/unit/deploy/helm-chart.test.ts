// charts/trainscaler against infra/k8s: both are rendered (helm template, kubectl kustomize) with their
// defaults and must give the same objects, and the same content where it matters: RBAC rules and bindings
// exactly, the CRDs exactly, the admission policies, Service, PDB and NetworkPolicy specs exactly, the
// Deployment's pod (containers' image, args, env, ports, probes, resources, security contexts; volumes), the
// settings. A change to one without the other fails here. Also: `helm lint`, the values schema, and the
// prometheus-operator objects (PrometheusRule = infra/prometheus/rules, PodMonitor = prometheus.yml's job).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { getPath, getString, isObject } from '../../../lib/adapters/unstructured.js';
import { helm, renderChart, skipWithoutHelm } from '../../support/helm.js';
import { renderKustomization, skipWithoutKubectl } from '../../support/kustomize.js';

const CHART = 'charts/trainscaler';
const NAMESPACE = 'trainscaler-system';
const skip = skipWithoutHelm || skipWithoutKubectl;

const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'CustomResourceDefinition',
]);

type Doc = Record<string, unknown>;

/** kind/namespace/name; kustomize's content-hash suffix of a generated ConfigMap is dropped. */
function keyOf(doc: Doc): string {
  const kind = String(doc.kind);
  let name = getString(doc, ['metadata', 'name']) ?? '';
  if (kind === 'ConfigMap') name = name.replace(/^(trainscaler(-forwarder)?-config)-[a-z0-9]{10}$/, '$1');
  const namespace = CLUSTER_SCOPED.has(kind) ? '' : (getString(doc, ['metadata', 'namespace']) ?? '');
  return `${kind}/${namespace}/${name}`;
}

function byKey(docs: unknown[]): Map<string, Doc> {
  const map = new Map<string, Doc>();
  for (const doc of docs) if (isObject(doc)) map.set(keyOf(doc), doc);
  return map;
}

/** The labels that carry meaning (aggregation into view/edit/admin), not the bookkeeping ones. */
function meaningfulLabels(doc: Doc): Record<string, unknown> {
  const labels = getPath(doc, ['metadata', 'labels']);
  if (!isObject(labels)) return {};
  return Object.fromEntries(
    Object.entries(labels).filter(([k]) => k.startsWith('rbac.authorization.k8s.io/')),
  );
}

/** A container as it matters; envFrom names normalised like keyOf (the kustomization hashes them). */
function container(c: unknown) {
  const envFrom = (getPath(c, ['envFrom']) as unknown[] | undefined)?.map((e) =>
    JSON.parse(JSON.stringify(e).replace(/(trainscaler(-forwarder)?-config)-[a-z0-9]{10}/, '$1')),
  );
  const pick = (...path: string[]) => getPath(c, path);
  return {
    name: pick('name'),
    image: pick('image'),
    args: pick('args'),
    env: pick('env'),
    envFrom,
    ports: pick('ports'),
    readinessProbe: pick('readinessProbe'),
    livenessProbe: pick('livenessProbe'),
    resources: pick('resources'),
    securityContext: pick('securityContext'),
    volumeMounts: pick('volumeMounts'),
  };
}

/** What must be equal between the two renderings, per kind. */
function significant(doc: Doc): unknown {
  const spec = (...path: string[]) => getPath(doc, ['spec', ...path]);
  switch (doc.kind) {
    case 'ClusterRole':
    case 'Role':
      return { rules: doc.rules, labels: meaningfulLabels(doc) };
    case 'ClusterRoleBinding':
    case 'RoleBinding':
      return { roleRef: doc.roleRef, subjects: doc.subjects };
    case 'CustomResourceDefinition':
      return { metadata: doc.metadata, spec: doc.spec };
    case 'ConfigMap':
      return doc.data ?? {};
    case 'ServiceAccount':
      return getPath(doc, ['metadata', 'annotations']) ?? {};
    case 'Deployment': {
      const pod = (...path: string[]) => spec('template', 'spec', ...path);
      return {
        replicas: spec('replicas'),
        selector: spec('selector'),
        strategy: spec('strategy'),
        podLabels: spec('template', 'metadata', 'labels'),
        serviceAccountName: pod('serviceAccountName'),
        terminationGracePeriodSeconds: pod('terminationGracePeriodSeconds'),
        securityContext: pod('securityContext'),
        affinity: pod('affinity'),
        volumes: pod('volumes'),
        containers: (pod('containers') as unknown[]).map(container),
      };
    }
    default:
      // Service, PodDisruptionBudget, NetworkPolicy, the admission policies and their bindings.
      return doc.spec;
  }
}

/** The objects only one side has, by design; everything else must be on both sides and equal. */
function compare(kustomized: unknown[], charted: unknown[], onlyKustomize: string[], onlyChart: string[]) {
  const k = byKey(kustomized);
  const h = byKey(charted);
  assert.deepEqual(
    [...k.keys()].filter((key) => !h.has(key)).sort(),
    [...onlyKustomize].sort(),
    'objects the kustomization renders and the chart does not',
  );
  assert.deepEqual(
    [...h.keys()].filter((key) => !k.has(key)).sort(),
    [...onlyChart].sort(),
    'objects the chart renders and the kustomization does not',
  );
  for (const [key, doc] of k) {
    const other = h.get(key);
    if (other) assert.deepEqual(significant(other), significant(doc), `${key}: chart differs from infra/k8s`);
  }
}

describe('charts/trainscaler', { skip }, () => {
  it('passes helm lint (strict), values schema included', () => {
    const out = helm(['lint', '--strict', CHART]);
    assert.match(out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('renders with default values the same objects as infra/k8s', () => {
    compare(
      renderKustomization('infra/k8s'),
      renderChart(CHART, NAMESPACE),
      // Helm installs into a namespace (`--create-namespace`) rather than owning it: uninstalling the release
      // must not delete the namespace with the profile and outcome stores in it.
      [`Namespace//${NAMESPACE}`],
      // The rules as a plain rules file (infra/prometheus/rules is not part of the kustomization).
      [`ConfigMap/${NAMESPACE}/trainscaler-prometheus-rules`],
    );
  });

  it('packages into an archive that renders the same, the linked CRDs and rules files included', () => {
    const dir = mkdtempSync(join(tmpdir(), 'trainscaler-chart-'));
    try {
      helm(['package', CHART, '--destination', dir]);
      const archive = join(dir, 'trainscaler-0.1.0.tgz');
      assert.deepEqual(renderChart(archive, NAMESPACE), renderChart(CHART, NAMESPACE));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('renders with forwarder.enabled the same forwarder as infra/k8s/forwarder', () => {
    const runnerKeys = new Set(byKey(renderChart(CHART, NAMESPACE)).keys());
    const forwarder = renderChart(CHART, NAMESPACE, ['--set', 'forwarder.enabled=true']).filter(
      (d) => isObject(d) && !runnerKeys.has(keyOf(d)),
    );
    assert.ok(forwarder.length > 0, 'forwarder.enabled renders the forwarder');
    compare(renderKustomization('infra/k8s/forwarder'), forwarder, [`Namespace//${NAMESPACE}`], []);
  });

  it('keeps the leader-label and ConfigMap policies on its own ServiceAccount in another namespace', () => {
    const docs = byKey(renderChart(CHART, 'ml-platform'));
    for (const name of ['trainscaler-leader-label', 'trainscaler-configmap-names'])
      assert.equal(
        getString(docs.get(`ValidatingAdmissionPolicy//${name}`), [
          'spec',
          'matchConditions',
          0,
          'expression',
        ]),
        "request.userInfo.username == 'system:serviceaccount:ml-platform:trainscaler'",
      );
    assert.equal(
      getString(docs.get('ConfigMap/ml-platform/trainscaler-config'), [
        'data',
        'TRAINSCALER_PROFILES_NAMESPACE',
      ]),
      'ml-platform',
    );
  });

  it('refuses values the schema does not allow, saying which', () => {
    for (const [set, pattern] of [
      ['runner.replicas=0', /replicas/],
      ['runner.config.dryRun=maybe', /dryRun/],
      ['runner.config.prometheusUrl=prometheus:9090', /prometheusUrl/],
      ['runnr.replicas=2', /runnr/],
    ] as const)
      assert.throws(
        () => renderChart(CHART, NAMESPACE, ['--set', set]),
        (e: { stderr?: string }) => pattern.test(e.stderr ?? '') && /schema/i.test(e.stderr ?? ''),
        set,
      );
  });

  it('renders prometheus-operator objects only where the API exists, and says so otherwise', () => {
    assert.throws(
      () => renderChart(CHART, NAMESPACE, ['--set', 'prometheusOperator.enabled=true']),
      (e: { stderr?: string }) => /needs the monitoring\.coreos\.com\/v1 API/.test(e.stderr ?? ''),
    );
    const docs = byKey(
      renderChart(CHART, NAMESPACE, [
        '--set',
        'prometheusOperator.enabled=true',
        '--set',
        'prometheusOperator.labels.release=kube-prometheus-stack',
        '--api-versions',
        'monitoring.coreos.com/v1',
      ]),
    );
    const rule = docs.get(`PrometheusRule/${NAMESPACE}/trainscaler`);
    const rulesFile = readFileSync('infra/prometheus/rules/trainscaler.rules.yml', 'utf8');
    assert.deepEqual(rule?.spec, load(rulesFile));
    assert.equal(getString(rule, ['metadata', 'labels', 'release']), 'kube-prometheus-stack');
    const plain = docs.get(`ConfigMap/${NAMESPACE}/trainscaler-prometheus-rules`);
    assert.deepEqual(load(getString(plain, ['data', 'trainscaler.rules.yml']) ?? ''), load(rulesFile));

    // The sidecars' PodMonitor relabels as prometheus.yml's scrape job does, key for key.
    const camel = (rule: Record<string, unknown>) =>
      Object.fromEntries(
        Object.entries(rule).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]),
      );
    const scrape = (
      load(readFileSync('infra/prometheus/prometheus.yml', 'utf8')) as {
        scrape_configs: { job_name: string; relabel_configs: Doc[]; metric_relabel_configs: Doc[] }[];
      }
    ).scrape_configs.find((j) => j.job_name === 'trainscaler-sidecars');
    const endpoint = getPath(docs.get(`PodMonitor/${NAMESPACE}/trainscaler-sidecars`), [
      'spec',
      'podMetricsEndpoints',
      0,
    ]);
    assert.deepEqual(getPath(endpoint, ['relabelings']), scrape?.relabel_configs.map(camel));
    assert.deepEqual(getPath(endpoint, ['metricRelabelings']), scrape?.metric_relabel_configs.map(camel));
    assert.equal(getPath(endpoint, ['honorLabels']), false);
    // The runner's own series keep their namespace and job labels (the training job's).
    const runner = docs.get(`PodMonitor/${NAMESPACE}/trainscaler`);
    assert.equal(getPath(runner, ['spec', 'podMetricsEndpoints', 0, 'honorLabels']), true);
  });
});
