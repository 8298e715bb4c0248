// KubernetesClusterClient's ScaledTrainingJob calls against a scripted HTTP API server on 127.0.0.1: what each
// request carries (the owner reference, the resourceVersion guard, the status) and how answers are read.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { JobStateObject } from '../../../lib/cluster/cluster-client.js';
import { KubernetesClusterClient, toJobStateObject } from '../../../lib/cluster/kubernetes-cluster-client.js';
import { ConflictError, ForbiddenError } from '../../../lib/errors.js';

interface Seen {
  method: string;
  path: string;
  body: unknown;
}

async function bodyOf(request: IncomingMessage): Promise<unknown> {
  let raw = '';
  for await (const chunk of request) raw += String(chunk);
  return raw ? JSON.parse(raw) : undefined;
}

/** Answers each request with the next scripted [status, body]; records what it was sent. */
async function apiServer(answers: [number, unknown][]) {
  const seen: Seen[] = [];
  const server = createServer(async (request, response) => {
    seen.push({ method: request.method ?? '', path: request.url ?? '', body: await bodyOf(request) });
    const [code, body] = answers.shift() ?? [500, { message: 'unscripted' }];
    response.statusCode = code;
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return {
    client: new KubernetesClusterClient(kc),
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const rvOf = (body: unknown) =>
  (body as { metadata?: { resourceVersion?: string } } | undefined)?.metadata?.resourceVersion;

const JOB = {
  ref: { kind: 'PyTorchJob' as const, namespace: 'team-a', name: 'bert' },
  uid: 'uid-1',
  apiVersion: 'kubeflow.org/v1',
};
const BASE = '/apis/trainscaler.io/v1alpha1/namespaces/team-a/scaledtrainingjobs';
const OBJECT = {
  metadata: {
    name: 'pytorchjob-bert',
    namespace: 'team-a',
    resourceVersion: '9',
    ownerReferences: [
      { apiVersion: 'v1', kind: 'X', name: 'other', uid: 'not-controller' },
      { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert', uid: 'uid-1', controller: true },
    ],
  },
  spec: { targetRef: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert' } },
  status: { oomCount: 1 },
};
const READ: JobStateObject = {
  namespace: 'team-a',
  name: 'pytorchjob-bert',
  resourceVersion: '9',
  target: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert' },
  ownerUid: 'uid-1',
  status: { oomCount: 1 },
};

describe('KubernetesClusterClient: ScaledTrainingJobs', () => {
  it('reads one by the job’s name (absent: undefined; forbidden: an error), and lists them all', async () => {
    const api = await apiServer([
      [200, OBJECT],
      [404, { message: 'not found' }],
      [403, { message: 'no' }],
      [200, { items: [OBJECT, { metadata: {} }] }],
    ]);
    try {
      assert.deepEqual(await api.client.getJobState(JOB.ref), READ);
      assert.equal(await api.client.getJobState(JOB.ref), undefined);
      await assert.rejects(api.client.getJobState(JOB.ref), ForbiddenError);
      const listed = await api.client.listJobStates();
      assert.deepEqual(listed[0], READ);
      assert.deepEqual(listed[1], {
        namespace: '',
        name: '',
        resourceVersion: '',
        target: { apiVersion: '', kind: '', name: '' },
        status: undefined,
      });
      assert.deepEqual(
        api.seen.map((s) => `${s.method} ${s.path}`),
        [
          `GET ${BASE}/pytorchjob-bert`,
          `GET ${BASE}/pytorchjob-bert`,
          `GET ${BASE}/pytorchjob-bert`,
          // Paged: 500 a response (DEFAULT_LIST_PAGE_SIZE).
          'GET /apis/trainscaler.io/v1alpha1/scaledtrainingjobs?limit=500',
        ],
      );
    } finally {
      await api.close();
    }
  });

  it('creates it owned by the job, then writes its status guarded by the version just created', async () => {
    const api = await apiServer([
      [201, { ...OBJECT, metadata: { ...OBJECT.metadata, resourceVersion: '3' }, status: undefined }],
      [200, { ...OBJECT, metadata: { ...OBJECT.metadata, resourceVersion: '4' }, status: { oomCount: 2 } }],
    ]);
    try {
      const written = await api.client.putJobState(JOB, { oomCount: 2 }, undefined, { dryRun: false });
      assert.equal(written.resourceVersion, '4');
      const [create, status] = api.seen;
      assert.equal(`${create?.method} ${create?.path}`, `POST ${BASE}?fieldManager=trainscaler`);
      assert.deepEqual(create?.body, {
        apiVersion: 'trainscaler.io/v1alpha1',
        kind: 'ScaledTrainingJob',
        metadata: {
          name: 'pytorchjob-bert',
          namespace: 'team-a',
          ownerReferences: [
            {
              apiVersion: 'kubeflow.org/v1',
              kind: 'PyTorchJob',
              name: 'bert',
              uid: 'uid-1',
              controller: true,
              blockOwnerDeletion: false,
            },
          ],
        },
        spec: { targetRef: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert' } },
      });
      assert.equal(
        `${status?.method} ${status?.path}`,
        `PUT ${BASE}/pytorchjob-bert/status?fieldManager=trainscaler`,
      );
      assert.deepEqual(status?.body, {
        apiVersion: 'trainscaler.io/v1alpha1',
        kind: 'ScaledTrainingJob',
        metadata: { name: 'pytorchjob-bert', namespace: 'team-a', resourceVersion: '3' },
        spec: { targetRef: { apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', name: 'bert' } },
        status: { oomCount: 2 },
      });
    } finally {
      await api.close();
    }
  });

  it('replaces the status of its own object guarded by the version read; a 409 is a ConflictError', async () => {
    const api = await apiServer([[409, { message: 'the object has been modified' }]]);
    try {
      await assert.rejects(
        api.client.putJobState(JOB, { oomCount: 2 }, READ, { dryRun: true }),
        ConflictError,
      );
      assert.deepEqual(
        api.seen.map((s) => `${s.method} ${s.path}`),
        [`PUT ${BASE}/pytorchjob-bert/status?dryRun=All&fieldManager=trainscaler`],
      );
      assert.equal(rvOf(api.seen[0]?.body), '9');
    } finally {
      await api.close();
    }
  });

  it('re-owns an object an earlier job of the same name left (pinned on its version), then writes the status', async () => {
    const api = await apiServer([
      [200, { ...OBJECT, metadata: { ...OBJECT.metadata, resourceVersion: '10' } }],
      [200, { ...OBJECT, metadata: { ...OBJECT.metadata, resourceVersion: '11' } }],
    ]);
    try {
      await api.client.putJobState(JOB, {}, { ...READ, ownerUid: 'uid-0' }, { dryRun: false });
      const [adopt, status] = api.seen;
      assert.equal(
        `${adopt?.method} ${adopt?.path}`,
        `PATCH ${BASE}/pytorchjob-bert?fieldManager=trainscaler`,
      );
      assert.deepEqual(adopt?.body, [
        { op: 'replace', path: '/metadata/resourceVersion', value: '9' },
        {
          op: 'replace',
          path: '/metadata/ownerReferences',
          value: [
            {
              apiVersion: 'kubeflow.org/v1',
              kind: 'PyTorchJob',
              name: 'bert',
              uid: 'uid-1',
              controller: true,
              blockOwnerDeletion: false,
            },
          ],
        },
      ]);
      assert.equal(rvOf(status?.body), '10');
    } finally {
      await api.close();
    }
  });

  it('toJobStateObject: no controller owner, no ownerUid', () => {
    const read = toJobStateObject({ metadata: { ownerReferences: [{ uid: 'x' }] } });
    assert.equal('ownerUid' in read, false);
    assert.equal(toJobStateObject(undefined).name, '');
  });
});
