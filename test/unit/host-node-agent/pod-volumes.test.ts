// The host node agent's volumes: what each volumeMount binds and from where, what it makes on the machine
// before the container starts, and the kinds it refuses by name. The binds themselves (mounts in the
// container's namespace, needing root) run in test/training/host-node.test.ts.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import {
  bindScript,
  containerBinds,
  prepareBinds,
  UnsupportedVolumeError,
} from '../../../infra/cluster/host-node-agent/pod-volumes.js';

const PODS = '/state/pods';

function podWith(volumes: NonNullable<V1Pod['spec']>['volumes'], uid = 'u-1'): V1Pod {
  return { metadata: { name: 'job-worker-1', namespace: 'team-a', uid }, spec: { containers: [], volumes } };
}

const container = (volumeMounts: V1Container['volumeMounts']): V1Container => ({
  name: 'main',
  volumeMounts,
});

describe('the binds of a container', () => {
  const pod = podWith([
    { name: 'shared', hostPath: { path: '/var/lib/checkpoints/', type: 'DirectoryOrCreate' } },
    { name: 'data', hostPath: { path: '/data' } },
    { name: 'scratch', emptyDir: {} },
  ]);

  it('binds a hostPath from this machine and an emptyDir from the pod directory, in the order mounted', () => {
    const binds = containerBinds(
      pod,
      container([
        { name: 'scratch', mountPath: '/scratch' },
        { name: 'shared', mountPath: '/ckpt/' },
        { name: 'data', mountPath: '/data', readOnly: true },
      ]),
      PODS,
    );
    assert.deepEqual(binds, [
      { source: '/state/pods/u-1/volumes/scratch', target: '/scratch', readOnly: false, create: true },
      { source: '/var/lib/checkpoints/', target: '/ckpt/', readOnly: false, create: true },
      { source: '/data', target: '/data', readOnly: true, create: false },
    ]);
    assert.deepEqual(containerBinds(pod, container(undefined), PODS), []);
  });

  it('leaves the service account token volume the API server adds unmounted (the agent issues no token)', () => {
    const withToken = podWith([
      { name: 'data', hostPath: { path: '/data' } },
      {
        name: 'kube-api-access-x7k2p',
        projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }] },
      },
    ]);
    const binds = containerBinds(
      withToken,
      container([
        { name: 'data', mountPath: '/data' },
        {
          name: 'kube-api-access-x7k2p',
          mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
          readOnly: true,
        },
      ]),
      PODS,
    );
    assert.deepEqual(
      binds.map((b) => b.target),
      ['/data'],
    );
    // Another projected volume is refused by name.
    const other = podWith([{ name: 'proj', projected: { sources: [{ configMap: { name: 'c' } }] } }]);
    assert.throws(
      () => containerBinds(other, container([{ name: 'proj', mountPath: '/p' }]), PODS),
      /volume proj: projected is not supported/,
    );
  });

  it('a subPath is a directory below the volume, made when missing; never outside it', () => {
    const [bind] = containerBinds(
      pod,
      container([{ name: 'data', mountPath: '/in', subPath: 'run-1/x' }]),
      PODS,
    );
    assert.deepEqual(bind, { source: '/data/run-1/x', target: '/in', readOnly: false, create: true });
    for (const subPath of ['../etc', '/etc', 'a/../../etc'])
      assert.throws(
        () => containerBinds(pod, container([{ name: 'data', mountPath: '/in', subPath }]), PODS),
        new RegExp(`subPath ${subPath.replaceAll('.', '\\.')} leaves the volume`),
      );
  });

  it('refuses, by name, what it cannot serve: other kinds, other hostPath types, relative paths, subPathExpr', () => {
    const refused: Array<[V1Pod, V1Container, RegExp]> = [
      [
        podWith([{ name: 'cfg', configMap: { name: 'settings' } }]),
        container([{ name: 'cfg', mountPath: '/etc/app' }]),
        /volume cfg: configMap is not supported by the host node agent \(hostPath and emptyDir are\)/,
      ],
      [
        podWith([{ name: 'sock', hostPath: { path: '/run/x.sock', type: 'Socket' } }]),
        container([{ name: 'sock', mountPath: '/run/x.sock' }]),
        /volume sock: hostPath type Socket is not supported/,
      ],
      [
        podWith([{ name: 'rel', hostPath: { path: 'data' } }]),
        container([{ name: 'rel', mountPath: '/data' }]),
        /volume rel: hostPath data is not absolute/,
      ],
      [
        pod,
        container([{ name: 'data', mountPath: 'data' }]),
        /volumeMount data: mountPath data is not absolute/,
      ],
      [
        pod,
        container([{ name: 'data', mountPath: '/d', subPathExpr: '$(POD_NAME)' }]),
        /volumeMount data: subPathExpr is not supported/,
      ],
      [pod, container([{ name: 'nope', mountPath: '/d' }]), /volumeMount nope: the pod declares no volume/],
      [
        podWith([{ name: 'scratch', emptyDir: {} }], ''),
        container([{ name: 'scratch', mountPath: '/s' }]),
        /volume scratch: the pod has no uid/,
      ],
    ];
    for (const [p, c, message] of refused)
      assert.throws(
        () => containerBinds(p, c, PODS),
        (e: unknown) => e instanceof UnsupportedVolumeError && message.test(e.message),
      );
  });
});

describe('on the machine, before the container starts', () => {
  it('makes what the volume creates and every mount point; refuses a hostPath that is not there', () => {
    const root = mkdtempSync(join(tmpdir(), 'pod-volumes-'));
    const made = { source: join(root, 'made'), target: join(root, 'mnt/a'), readOnly: false, create: true };
    prepareBinds([made]);
    assert.ok(existsSync(made.source) && existsSync(made.target));
    const there = join(root, 'there');
    mkdirSync(there);
    prepareBinds([{ source: there, target: join(root, 'mnt/b'), readOnly: true, create: false }]);
    assert.ok(existsSync(join(root, 'mnt/b')));
    const file = join(root, 'file');
    writeFileSync(file, '');
    for (const source of [join(root, 'missing'), file])
      assert.throws(
        () => prepareBinds([{ source, target: join(root, 'mnt/c'), readOnly: false, create: false }]),
        new RegExp(`hostPath ${source} is not a directory on the host node`),
      );
    assert.ok(!existsSync(join(root, 'missing')), 'a missing hostPath is not created');
  });

  it('binds each in the setup line, quoted, read-only by a remount; nothing to bind is a no-op', () => {
    assert.equal(bindScript([]), 'true');
    assert.equal(
      bindScript([
        { source: "/a b/it's", target: '/x', readOnly: false, create: true },
        { source: '/d', target: '/y', readOnly: true, create: false },
      ]),
      "mount --bind '/a b/it'\\''s' '/x' && mount --bind '/d' '/y' && mount -o remount,bind,ro '/y'",
    );
  });
});
