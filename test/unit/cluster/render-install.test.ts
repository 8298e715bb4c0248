import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { renderInstall } from '../../../infra/cluster/render-install/render.js';

// The shape kubebuilder installs have after kustomize (kueue/jobset config/default).
const INSTALL = `
apiVersion: v1
kind: Namespace
metadata: {name: kueue-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kueue-controller-manager, namespace: kueue-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.kueue.x-k8s.io}
spec:
  group: kueue.x-k8s.io
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: kueue-webhook-service, namespace: kueue-system, path: /convert}
      conversionReviewVersions: [v1]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: resourceflavors.kueue.x-k8s.io}
spec: {group: kueue.x-k8s.io}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: kueue-mutating-webhook-configuration}
webhooks:
- name: mjob.kb.io
  failurePolicy: Fail
  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}
  clientConfig:
    service: {name: kueue-webhook-service, namespace: kueue-system, path: /mutate-batch-v1-job}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
`;

interface ClientConfig {
  url?: string;
  caBundle?: string;
  service?: unknown;
}
interface Webhook {
  clientConfig: ClientConfig;
  failurePolicy?: string;
  namespaceSelector: { matchExpressions: { values: string[] }[] };
}
interface Doc {
  kind: string;
  metadata: { name: string };
  spec?: { conversion?: { strategy: string; webhook: { clientConfig: ClientConfig } } };
  webhooks?: Webhook[];
}

test('keeps only CRDs and webhook configurations and points every webhook at 127.0.0.1:<port>', () => {
  const out = renderInstall(INSTALL, { port: 17848, caBundle: 'Q0E=' });
  const docs = loadAll(out.yaml) as Doc[];
  assert.deepEqual(
    docs.map((d) => d.kind),
    ['CustomResourceDefinition', 'CustomResourceDefinition', 'MutatingWebhookConfiguration'],
  );
  assert.equal(out.total, 5);
  assert.equal(out.rewritten, 2);
  const wh = docs[2]?.webhooks?.[0];
  assert.ok(wh);
  assert.deepEqual(wh.clientConfig, { url: 'https://127.0.0.1:17848/mutate-batch-v1-job', caBundle: 'Q0E=' });
  // Everything else of the real install is untouched.
  assert.equal(wh.failurePolicy, 'Fail');
  assert.deepEqual(wh.namespaceSelector.matchExpressions[0]?.values, ['kube-system']);
  assert.equal(docs[2]?.metadata.name, 'kueue-mutating-webhook-configuration');
  const conv = docs[0]?.spec?.conversion;
  assert.ok(conv);
  assert.equal(conv.strategy, 'Webhook');
  assert.deepEqual(conv.webhook.clientConfig, { url: 'https://127.0.0.1:17848/convert', caBundle: 'Q0E=' });
  assert.equal(docs[1]?.spec?.conversion, undefined);
});

test('keeps only the kinds asked for', () => {
  const out = renderInstall(INSTALL, { port: 1, caBundle: 'x', kinds: ['MutatingWebhookConfiguration'] });
  const docs = loadAll(out.yaml) as Doc[];
  assert.deepEqual(
    docs.map((d) => d.metadata.name),
    ['kueue-mutating-webhook-configuration'],
  );
});

test('a webhook already given by URL is left alone', () => {
  const input = `kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks: [{name: a, clientConfig: {url: "https://example.invalid/x"}}]`;
  const out = renderInstall(input, { port: 2, caBundle: 'x' });
  assert.equal(out.rewritten, 0);
  assert.deepEqual((load(out.yaml) as Doc).webhooks?.[0]?.clientConfig, { url: 'https://example.invalid/x' });
});

test('bad input gives a clear error', () => {
  assert.throws(() => renderInstall(INSTALL, { port: 0, caBundle: 'x' }), /port must be a TCP port/);
  assert.throws(() => renderInstall(INSTALL, { port: 70000, caBundle: 'x' }), /port must be a TCP port/);
  assert.throws(() => renderInstall(INSTALL, { port: 1, caBundle: '' }), /caBundle is empty/);
  assert.throws(
    () => renderInstall(INSTALL, { port: 1, caBundle: 'x', kinds: ['Pod'] }),
    /no Pod in the input/,
  );
});
