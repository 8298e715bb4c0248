// The serverless path end to end, against emulated AWS (moto) and the real test API server: `trainscaler
// forward` (the CLI, as the forwarder's ServiceAccount with the RBAC of infra/k8s/forwarder) watches the
// cluster and puts events on an EventBridge bus in moto; rules with serverless.yml's own patterns route them to
// SQS queues; the test delivers each message, as Lambda would (the EventBridge event as the handler's event),
// to the bundled dist/lambda/*.mjs handler, which acts on the real API server as the trainscaler ServiceAccount.
// AWS itself cannot be reached from here: moto's server mode (PyPI moto[server]) is the emulator.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  CreateEventBusCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
} from '@aws-sdk/client-eventbridge';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { CORE_SCHEMA, defineScalarTag, load as loadYaml } from 'js-yaml';
import type { HandlerResult } from '../../functions/handler-deps.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
  waitFor,
  workerPods,
} from '../integration/support/test-cluster.js';
import { type ForwarderProcess, startForwarderProcess } from './support/forwarder-process.js';
import { type Moto, startMoto } from './support/moto.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUS = 'trainscaler-test';
const MANAGED = { [ANNOTATION.managed]: 'true' };

interface BusEvent {
  'detail-type': string;
  source: string;
  detail: {
    type: string;
    object: { kind: string; metadata: { name: string; namespace?: string; uid?: string } };
  };
}
type LambdaHandler = (event: unknown) => Promise<HandlerResult>;

// serverless.yml's CloudFormation tags, read as plain values: only the rules' patterns are used here.
const CFN_SCHEMA = CORE_SCHEMA.withTags(
  ...['!Ref', '!GetAtt', '!Sub'].map((tag) =>
    defineScalarTag(tag, { resolve: (source) => ({ [tag]: source }), identify: () => false }),
  ),
);

/** The EventBridge pattern serverless.yml gives a function's rule. */
function patternOf(fn: 'clusterEvent' | 'submit'): unknown {
  const doc = loadYaml(readFileSync(join(REPO_ROOT, 'serverless.yml'), 'utf8'), { schema: CFN_SCHEMA }) as {
    functions: Record<string, { events: Array<{ eventBridge?: { pattern: unknown } }> }>;
  };
  const pattern = doc.functions[fn]?.events.find((e) => e.eventBridge)?.eventBridge?.pattern;
  assert.ok(pattern, `serverless.yml: ${fn} has an eventBridge pattern`);
  return pattern;
}

let cluster: TestCluster;
let moto: Moto;
let sqs: SQSClient;
let forwarder: ForwarderProcess;
let forwarderArgs: { args: string[]; env: Record<string, string> };
let tmp: string;
const queues: Record<'clusterEvent' | 'submit' | 'everything', string> = {
  clusterEvent: '',
  submit: '',
  everything: '',
};
const handlers: Record<'clusterEvent' | 'submit', LambdaHandler | undefined> = {
  clusterEvent: undefined,
  submit: undefined,
};
const namespaces: string[] = [];

function kubectl(...args: string[]): string {
  return execFileSync('kubectl', ['--kubeconfig', cluster.adminKubeconfig, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
}

/** A kubeconfig for ServiceAccount trainscaler-system/trainscaler-forwarder (RBAC of infra/k8s/forwarder). */
function forwarderKubeconfig(): string {
  kubectl(
    'apply',
    '-f',
    join(REPO_ROOT, 'infra/k8s/forwarder/rbac.yaml'),
    '-f',
    join(REPO_ROOT, 'infra/k8s/forwarder/ledger.yaml'),
  );
  // A ledger left by an earlier run on the same cluster names uids that no longer exist; start clean anyway.
  kubectl(
    '-n',
    'trainscaler-system',
    'patch',
    'configmap',
    'trainscaler-forwarder-ledger',
    '--type=json',
    '-p',
    '[{"op":"add","path":"/data","value":{}}]',
  );
  const token = kubectl(
    '-n',
    'trainscaler-system',
    'create',
    'token',
    'trainscaler-forwarder',
    '--duration=2h',
  ).trim();
  const admin = new KubeConfig();
  admin.loadFromFile(cluster.adminKubeconfig);
  const server = admin.getCurrentCluster();
  assert.ok(server);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [server],
    users: [{ name: 'trainscaler-forwarder', token }],
    contexts: [{ name: 'forwarder', cluster: server.name, user: 'trainscaler-forwarder' }],
    currentContext: 'forwarder',
  });
  const file = join(tmp, 'kubeconfig-forwarder');
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

async function createQueue(name: string): Promise<{ url: string; arn: string }> {
  const url = (await sqs.send(new CreateQueueCommand({ QueueName: name }))).QueueUrl ?? '';
  const attrs = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  return { url, arn: attrs.Attributes?.QueueArn ?? '' };
}

/** Receives (and deletes) what the queue holds, polling until `done` says so or the time is up. */
async function receive(
  queue: keyof typeof queues,
  done: (events: BusEvent[]) => boolean,
  timeoutMs: number,
): Promise<BusEvent[]> {
  const events: BusEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!done(events) && Date.now() < deadline) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queues[queue], MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    for (const m of Messages) {
      events.push(JSON.parse(m.Body ?? '{}'));
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queues[queue], ReceiptHandle: m.ReceiptHandle }));
    }
  }
  return events;
}

/** Everything the queue receives within `ms` (for "nothing arrives" checks). */
const receiveFor = (queue: keyof typeof queues, ms: number) => receive(queue, () => false, ms);

const about = (name: string, ns: string) => (e: BusEvent) =>
  e.detail.object.metadata.name === name && e.detail.object.metadata.namespace === ns;

/** As Lambda would: the EventBridge event, unchanged, is the bundled handler's event. */
async function invoke(fn: 'clusterEvent' | 'submit', event: BusEvent): Promise<HandlerResult> {
  const handler = handlers[fn];
  assert.ok(handler);
  return handler(event);
}

async function createJob(body: Record<string, unknown>): Promise<void> {
  const ns = (body as { metadata: { namespace: string } }).metadata.namespace;
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    body,
  });
}

async function readJob(ns: string, name: string) {
  return (await cluster.admin.custom.getNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    namespace: ns,
    plural: 'pytorchjobs',
    name,
  })) as {
    metadata: { annotations?: Record<string, string> };
    spec: {
      pytorchReplicaSpecs: {
        Worker: {
          replicas: number;
          template: { spec: { containers: Array<{ resources: { limits: Record<string, string> } }> } };
        };
      };
    };
  };
}

async function runningWorkers(ns: string, job: string, count: number): Promise<V1Pod[] | undefined> {
  const pods = (await workerPods(cluster, ns, job)).filter(
    (p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp,
  );
  return pods.length === count ? pods : undefined;
}

async function namespace(prefix: string): Promise<string> {
  const ns = await createNamespace(cluster, prefix);
  namespaces.push(ns);
  return ns;
}

before(async () => {
  cluster = testCluster();
  tmp = mkdtempSync(join(tmpdir(), 'trainscaler-aws-'));
  moto = await startMoto();
  const aws = { endpoint: moto.endpoint, region: moto.region, credentials: moto.credentials };
  sqs = new SQSClient(aws);
  const eventBridge = new EventBridgeClient(aws);
  await eventBridge.send(new CreateEventBusCommand({ Name: BUS }));
  const rules: Array<[keyof typeof queues, unknown]> = [
    ['clusterEvent', patternOf('clusterEvent')],
    ['submit', patternOf('submit')],
    // Every entry the forwarder puts: what the "nothing forwarded" checks count.
    ['everything', { source: ['trainscaler.kubernetes'] }],
  ];
  for (const [name, pattern] of rules) {
    const queue = await createQueue(`trainscaler-${name}`);
    queues[name] = queue.url;
    await eventBridge.send(
      new PutRuleCommand({ Name: name, EventBusName: BUS, EventPattern: JSON.stringify(pattern) }),
    );
    await eventBridge.send(
      new PutTargetsCommand({ Rule: name, EventBusName: BUS, Targets: [{ Id: name, Arn: queue.arn }] }),
    );
  }
  eventBridge.destroy();

  // The bundled handlers read their configuration from the environment at their first call, as on Lambda;
  // here KUBECONFIG (the trainscaler ServiceAccount) instead of EKS_CLUSTER_NAME. The OOM and submit paths
  // read no metrics, so PROMETHEUS_URL only has to be valid: nothing listens there and nothing calls it.
  delete process.env.EKS_CLUSTER_NAME;
  delete process.env.AWS_LAMBDA_FUNCTION_NAME;
  process.env.KUBECONFIG = cluster.saKubeconfig;
  process.env.PROMETHEUS_URL = 'http://127.0.0.1:9';
  process.env.LOG_LEVEL = 'warn';
  for (const fn of ['clusterEvent', 'submit'] as const) {
    const module = (await import(pathToFileURL(join(REPO_ROOT, `dist/lambda/${fn}.mjs`)).href)) as {
      handler: LambdaHandler;
    };
    handlers[fn] = module.handler;
  }

  forwarderArgs = {
    args: [
      '--bus',
      BUS,
      '--region',
      moto.region,
      '--kubeconfig',
      forwarderKubeconfig(),
      '--summary-seconds',
      '2',
    ],
    env: {
      AWS_ENDPOINT_URL_EVENTBRIDGE: moto.endpoint,
      AWS_ACCESS_KEY_ID: moto.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: moto.credentials.secretAccessKey,
      POD_NAMESPACE: 'trainscaler-system',
      LOG_LEVEL: 'info',
    },
  };
  forwarder = await startForwarderProcess(forwarderArgs);
  await forwarder.synced();
});

after(async () => {
  await forwarder?.stop();
  await moto?.stop();
  sqs?.destroy();
  for (const ns of namespaces) await deleteNamespace(cluster, ns);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('event forwarder -> EventBridge -> SQS -> bundled Lambda handlers, on emulated AWS (moto)', () => {
  it('emulated AWS (moto): a new PyTorchJob is put on the bus, routed to submit, and its initial configuration written', async () => {
    const ns = await namespace('aws-submit');
    await createJob(
      elasticPyTorchJob({
        name: 'too-wide',
        namespace: ns,
        workers: 6,
        min: 1,
        max: 4,
        annotations: MANAGED,
      }),
    );
    const [event] = (await receive('submit', (e) => e.some(about('too-wide', ns)), 30_000)).filter(
      about('too-wide', ns),
    );
    assert.ok(event, 'the submission reached the submit queue');
    assert.equal(event['detail-type'], 'Kubernetes Job Submitted');
    assert.equal(event.source, 'trainscaler.kubernetes');
    const result = await invoke('submit', event);
    assert.equal(result.outcomes[0]?.applied, true, result.outcomes[0]?.plan.reason);
    const job = await readJob(ns, 'too-wide');
    assert.equal(job.spec.pytorchReplicaSpecs.Worker.replicas, 4);
    assert.equal(JSON.parse(job.metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}').policy, 'initial');
    // Not a watch event for clusterEvent: the job's later updates (scaled, running) are not forwarded.
    const routedToClusterEvent = (await receiveFor('clusterEvent', 2_000)).filter(about('too-wide', ns));
    assert.deepEqual(routedToClusterEvent, []);
  });

  it('emulated AWS (moto): an OOM kill on a kwok pod is put on the bus, routed to clusterEvent, and the memory raised once', async () => {
    const ns = await namespace('aws-oom');
    await createJob(
      elasticPyTorchJob({
        name: 'oom',
        namespace: ns,
        workers: 2,
        min: 1,
        max: 2,
        memory: '2Gi',
        annotations: MANAGED,
      }),
    );
    await waitFor('2 workers running', () => runningWorkers(ns, 'oom', 2));
    kubectl('-n', ns, 'label', 'pod', 'oom-worker-1', 'kwok.trainscaler.io/oomkill=true');
    const isOom = (e: BusEvent) =>
      about('oom-worker-1', ns)(e) && JSON.stringify(e.detail.object).includes('OOMKilled');
    const events = await receive('clusterEvent', (e) => e.some(isOom), 30_000);
    const oom = events.find(isOom);
    assert.ok(oom, 'the OOM kill reached the clusterEvent queue');
    assert.equal(oom['detail-type'], 'Kubernetes Watch Event');
    const result = await invoke('clusterEvent', oom);
    assert.equal(
      result.outcomes[0]?.applied,
      true,
      result.outcomes[0]?.plan.reason ?? JSON.stringify(result.errors),
    );
    // The handler evicted the pod to recreate it at the new size: deliver what that puts on the bus too.
    const later: BusEvent[] = [];
    await waitFor('worker-1 recreated at 3Gi', async () => {
      for (const event of await receiveFor('clusterEvent', 1_000)) {
        later.push(event);
        await invoke('clusterEvent', event);
      }
      const pod = await cluster.admin.core.readNamespacedPod({ namespace: ns, name: 'oom-worker-1' });
      return pod.metadata?.uid !== oom.detail.object.metadata.uid &&
        pod.spec?.containers[0]?.resources?.limits?.memory === '3Gi'
        ? pod
        : undefined;
    });
    for (const event of await receiveFor('clusterEvent', 3_000)) {
      later.push(event);
      await invoke('clusterEvent', event);
    }
    // The Eviction API marks the pod (condition DisruptionTarget) before deleting it: forwarded as an eviction.
    const evicted = later.filter(
      (e) =>
        e.detail.object.metadata.uid === oom.detail.object.metadata.uid &&
        JSON.stringify(e.detail.object).includes('"DisruptionTarget"'),
    );
    assert.equal(evicted.length, 1, 'the eviction of the OOM-killed pod was put once');
    const job = await readJob(ns, 'oom');
    assert.equal(
      job.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]?.resources.limits.memory,
      '3Gi',
      '2Gi x1.5, once',
    );
  });

  it('emulated AWS (moto): a burst of 1,000 pod updates of no interest puts zero events', async () => {
    const ns = await namespace('aws-quiet');
    await createJob(
      elasticPyTorchJob({ name: 'quiet', namespace: ns, workers: 2, min: 1, max: 2, annotations: MANAGED }),
    );
    const pods = await waitFor('2 workers running', () => runningWorkers(ns, 'quiet', 2));
    await receive('everything', (e) => e.some(about('quiet', ns)), 30_000); // its submission, then quiet
    await receiveFor('everything', 2_000);
    const putBefore = await forwarder.counter('trainscaler_forwarder_events_forwarded_total');
    const droppedBefore = await forwarder.counter('trainscaler_forwarder_events_dropped_total');

    const UPDATES = 1_000;
    const CONCURRENCY = 10;
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < UPDATES) {
          const i = next++;
          const pod = pods[i % pods.length];
          await cluster.admin.core.patchNamespacedPod({
            namespace: ns,
            name: pod?.metadata?.name ?? '',
            body: [
              { op: 'add', path: '/metadata/annotations', value: { 'example.com/heartbeat': String(i) } },
            ],
          });
        }
      }),
    );
    const burstMs = Date.now() - started;
    // One pod watch stream, in order: once an event after the burst has been put, the burst has been classified.
    await cluster.admin.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {
          name: 'sentinel',
          labels: { 'training.kubeflow.org/job-name': 'sentinel' },
          annotations: MANAGED,
        },
        spec: {
          nodeSelector: { 'trainscaler.io/no-such-node': 'true' },
          containers: [{ name: 'pytorch', image: 'registry.example.com/train:1' }],
        },
      },
    });
    const put = await receive('everything', (e) => e.some(about('sentinel', ns)), 30_000);
    put.push(...(await receiveFor('everything', 2_000)));
    const putDuringBurst = put.filter((e) => !about('sentinel', ns)(e));
    const forwarded = (await forwarder.counter('trainscaler_forwarder_events_forwarded_total')) - putBefore;
    const dropped = (await forwarder.counter('trainscaler_forwarder_events_dropped_total')) - droppedBefore;
    process.stdout.write(
      `# ${UPDATES} pod updates in ${burstMs} ms: ${putDuringBurst.length} events put for them (PutEvents entries after the burst: ${forwarded}, the sentinel's; dropped ${dropped})\n`,
    );
    assert.deepEqual(
      putDuringBurst.map((e) => e.detail.object.metadata.name),
      [],
    );
    assert.equal(put.filter(about('sentinel', ns)).length, 1, 'the sentinel (unschedulable pod) is put once');
    assert.equal(forwarded, 1, 'PutEvents entries accepted since the burst began: the sentinel only');
    assert.equal(dropped, 0);
    const summaries = forwarder.logs.filter((l) => typeof l.msg === 'string' && /^forwarded \d+/.test(l.msg));
    assert.ok(summaries.length > 0, 'the forwarder logs its summary line');
  });

  it('emulated AWS (moto): a restarted forwarder lists everything again and puts nothing already put (ledger ConfigMap)', async () => {
    const sentinel = (
      await cluster.admin.core.listPodForAllNamespaces({
        labelSelector: 'training.kubeflow.org/job-name=sentinel',
      })
    ).items[0];
    assert.equal(
      sentinel?.status?.conditions?.find((c) => c.type === 'PodScheduled')?.reason,
      'Unschedulable',
      'a recent fact, still visible',
    );
    assert.equal(await forwarder.stop(), 0, 'SIGTERM: clean exit');
    const ledger = JSON.parse(
      kubectl(
        '-n',
        'trainscaler-system',
        'get',
        'configmap',
        'trainscaler-forwarder-ledger',
        '-o',
        'jsonpath={.data.ledger\\.json}',
      ) || '{}',
    ) as Record<string, string>;
    assert.equal(ledger[sentinel.metadata?.uid ?? ''], 'Unschedulable', 'the ledger names what was put');
    await receiveFor('everything', 1_000);
    forwarder = await startForwarderProcess(forwarderArgs);
    await forwarder.synced();
    const resent = await receiveFor('everything', 5_000);
    assert.deepEqual(
      resent.map((e) => `${e['detail-type']} ${e.detail.object.metadata.name}`),
      [],
    );
    assert.equal(await forwarder.counter('trainscaler_forwarder_events_forwarded_total'), 0);
  });
});
