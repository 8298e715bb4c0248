// The host node of the test cluster (infra/cluster/host-node-agent) behaves as a kubelet where the training
// tests rely on it: pods really run, each in its own network namespace (two pods bind the same port, each
// reachable from the machine at podIP:port), restartPolicy restarts in place with the exit code reported,
// deletion is SIGTERM then SIGKILL after the grace period, an environment it cannot build is reported, and
// hostPath and emptyDir volumes are bound as a kubelet binds them.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import {
  createNamespace,
  deleteNamespace,
  type TestCluster,
  testCluster,
  waitFor,
} from '../integration/support/test-cluster.js';

const HOST_NODE = 'host-node-0';
let cluster: TestCluster;
let namespace: string;

function hostPod(
  name: string,
  container: Omit<V1Container, 'name' | 'image'>,
  extra: Partial<V1Pod['spec']> = {},
): V1Pod {
  return {
    metadata: { name, namespace },
    spec: {
      nodeSelector: { 'trainscaler.io/host-node': 'true' },
      tolerations: [{ key: 'trainscaler.io/host-node', operator: 'Exists', effect: 'NoSchedule' }],
      containers: [{ name: 'main', image: 'host', ...container }],
      ...extra,
    },
  };
}

const readPod = (name: string) => cluster.admin.core.readNamespacedPod({ name, namespace });

before(async () => {
  cluster = testCluster();
  await cluster.admin.core.readNode({ name: HOST_NODE });
  namespace = await createNamespace(cluster, 'host-node');
});

after(async () => {
  if (namespace) await deleteNamespace(cluster, namespace);
});

test('two pods bind the same port in their own network namespaces, each reachable at podIP:port', async () => {
  const server = { command: ['python3', '-m', 'http.server', '--bind', '0.0.0.0', '9470'] };
  // python as PID 1 ignores SIGTERM (no handler, as in a container): a short grace keeps cleanup quick.
  for (const name of ['web-a', 'web-b'])
    await cluster.admin.core.createNamespacedPod({
      namespace,
      body: hostPod(name, server, { terminationGracePeriodSeconds: 1 }),
    });
  const ips: string[] = [];
  for (const name of ['web-a', 'web-b']) {
    const pod = await waitFor(`${name} Ready`, async () => {
      const p = await readPod(name);
      return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : undefined;
    });
    assert.equal(pod.spec?.nodeName, HOST_NODE);
    ips.push(pod.status?.podIP ?? '');
  }
  assert.notEqual(ips[0], ips[1]);
  for (const ip of ips) {
    const status = await waitFor(`http://${ip}:9470/`, async () => {
      const res = await fetch(`http://${ip}:9470/`, { signal: AbortSignal.timeout(2000) });
      return res.status;
    });
    assert.equal(status, 200);
  }
});

test('restartPolicy OnFailure restarts in place and reports the exit code; Never ends Failed', async () => {
  const failing = { command: ['sh', '-c', 'exit 3'] };
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod('crash', failing, { restartPolicy: 'OnFailure' }),
  });
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod('once', failing, { restartPolicy: 'Never' }),
  });
  const crash = await waitFor('a restart of crash', async () => {
    const p = await readPod('crash');
    return (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? p : undefined;
  });
  assert.equal(crash.status?.phase, 'Running');
  assert.equal(crash.status?.containerStatuses?.[0]?.lastState?.terminated?.exitCode, 3);
  const once = await waitFor('once Failed', async () => {
    const p = await readPod('once');
    return p.status?.phase === 'Failed' ? p : undefined;
  });
  assert.equal(once.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 3);
  assert.equal(once.status?.containerStatuses?.[0]?.restartCount, 0);
});

test('deletion: SIGTERM to the container, SIGKILL after the grace period, then the pod is removed', async () => {
  // `sleep` as PID 1 of its PID namespace ignores SIGTERM: only the SIGKILL after 2 s ends it.
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod('stubborn', { command: ['sleep', '600'] }, { terminationGracePeriodSeconds: 2 }),
  });
  // A trap exits at once on SIGTERM.
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod(
      'polite',
      { command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.1; done'] },
      { terminationGracePeriodSeconds: 30 },
    ),
  });
  for (const name of ['stubborn', 'polite'])
    await waitFor(`${name} Running`, async () =>
      (await readPod(name)).status?.phase === 'Running' ? true : undefined,
    );
  const gone = async (name: string) => {
    const t0 = Date.now();
    await cluster.admin.core.deleteNamespacedPod({ name, namespace });
    await waitFor(
      `${name} removed`,
      async () =>
        await readPod(name).then(
          () => undefined,
          () => true,
        ),
      40_000,
    );
    return (Date.now() - t0) / 1000;
  };
  const stubborn = await gone('stubborn');
  const polite = await gone('polite');
  assert.ok(stubborn >= 1.8 && stubborn < 15, `stubborn removed after ${stubborn} s (grace 2 s)`);
  assert.ok(polite < 10, `polite removed after ${polite} s, well inside its 30 s grace`);
});

test('an environment the agent cannot build leaves the container waiting with CreateContainerConfigError', async () => {
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod('secretive', {
      command: ['true'],
      env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'absent', key: 'token' } } }],
    }),
  });
  const waiting = await waitFor('secretive waiting', async () => {
    const p = await readPod('secretive');
    return p.status?.containerStatuses?.[0]?.state?.waiting;
  });
  assert.equal(waiting.reason, 'CreateContainerConfigError');
  assert.match(waiting.message ?? '', /secretKeyRef is not supported/);
});

test('a name outside the hosts file fails to resolve at once in a pod, as with a cluster DNS (no time-out)', async () => {
  // torch >= 2 looks up the name of its own address at each process-group start; a pod that asked the host's
  // nameserver, unreachable from its network namespace, waited out two 5 s time-outs each time.
  const lookup = [
    'import socket, sys, time',
    'start = time.monotonic()',
    'for ask in (lambda: socket.getaddrinfo("no-such-pod.invalid", 80), lambda: socket.getnameinfo(("::ffff:10.247.0.9", 0), 0)):',
    '    try: ask()',
    '    except OSError: pass',
    'took = time.monotonic() - start',
    'print(f"lookups took {took:.2f} s")',
    'sys.exit(0 if took < 2 else 3)',
  ].join('\n');
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod('resolver', { command: ['python3', '-c', lookup] }, { restartPolicy: 'Never' }),
  });
  const done = await waitFor('resolver finished', async () => {
    const p = await readPod('resolver');
    return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
  });
  assert.equal(
    done.status?.containerStatuses?.[0]?.state?.terminated?.exitCode,
    0,
    'the lookups took 2 s or more',
  );
  assert.equal(done.status?.phase, 'Succeeded');
});

test("volumes: a hostPath shared by two pods, read-only where asked; an emptyDir shared by one pod's containers", async () => {
  const root = mkdtempSync(join(tmpdir(), 'host-node-volumes-'));
  const shared = join(root, 'shared');
  const ckpt = join(root, 'mnt', 'ckpt');
  const ro = join(root, 'mnt', 'ro');
  const scratch = join(root, 'mnt', 'scratch');
  const volumes = [
    { name: 'ckpt', hostPath: { path: shared, type: 'DirectoryOrCreate' } },
    { name: 'scratch', emptyDir: {} },
  ];
  const writer = hostPod(
    'writer',
    {
      command: [
        'sh',
        '-c',
        `echo a > ${scratch}/a && echo hello > ${ckpt}/from-writer && ! touch ${ro}/x 2>/dev/null`,
      ],
      volumeMounts: [
        { name: 'ckpt', mountPath: ckpt },
        { name: 'ckpt', mountPath: ro, readOnly: true },
        { name: 'scratch', mountPath: scratch },
      ],
    },
    { restartPolicy: 'Never', volumes },
  );
  // The second container sees what the first wrote in the pod's emptyDir.
  writer.spec?.containers.push({
    name: 'peer',
    image: 'host',
    command: ['sh', '-c', `for i in $(seq 50); do test -f ${scratch}/a && exit 0; sleep 0.2; done; exit 1`],
    volumeMounts: [{ name: 'scratch', mountPath: scratch }],
  });
  await cluster.admin.core.createNamespacedPod({ namespace, body: writer });
  const finished = async (name: string) =>
    waitFor(`${name} finished`, async () => {
      const p = await readPod(name);
      return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
    });
  const wrote = await finished('writer');
  assert.deepEqual(
    wrote.status?.containerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode]),
    [
      ['main', 0],
      ['peer', 0],
    ],
    'written through the bind, the read-only bind refused a write, the peer saw the emptyDir file',
  );
  assert.equal(readFileSync(join(shared, 'from-writer'), 'utf8'), 'hello\n', 'on the host, in the hostPath');
  // Another pod naming the same hostPath reads it, as pods read a shared volume on a cluster.
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod(
      'reader',
      {
        // The writer's emptyDir was its own: its mount point on this machine stays empty.
        command: ['sh', '-c', `grep -q hello ${ckpt}/from-writer && test ! -e ${scratch}/a`],
        volumeMounts: [{ name: 'ckpt', mountPath: ckpt }],
      },
      { restartPolicy: 'Never', volumes: [volumes[0] as (typeof volumes)[0]] },
    ),
  });
  assert.equal((await finished('reader')).status?.phase, 'Succeeded');
});

test('a volume kind the agent cannot serve leaves the container waiting with CreateContainerConfigError', async () => {
  await cluster.admin.core.createNamespacedPod({
    namespace,
    body: hostPod(
      'configured',
      { command: ['true'], volumeMounts: [{ name: 'cfg', mountPath: '/etc/app' }] },
      { volumes: [{ name: 'cfg', configMap: { name: 'settings' } }] },
    ),
  });
  const waiting = await waitFor('configured waiting', async () => {
    const p = await readPod('configured');
    return p.status?.containerStatuses?.[0]?.state?.waiting;
  });
  assert.equal(waiting.reason, 'CreateContainerConfigError');
  assert.match(waiting.message ?? '', /volume cfg: configMap is not supported by the host node agent/);
});
