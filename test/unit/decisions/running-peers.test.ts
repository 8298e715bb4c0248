import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { MAX_RUNNING_PEERS, runningPeersOf } from '../../../lib/decisions/running-peers.js';
import { MissingMetricsError } from '../../../lib/errors.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import type { ContainerUsage, JobRef } from '../../../lib/types.js';

const GiB = 1024 ** 3;

function manifest(
  name: string,
  signature: string,
  createdAt: number,
  extra: Partial<KubeObject> = {},
): KubeObject {
  const obj = pytorchJobManifest({
    name,
    namespace: 'team-a',
    app: signature,
    workers: 2,
    minReplicas: 1,
    maxReplicas: 4,
    sizing: { gpus: 1, cpuMillis: 1000, memoryBytes: 4 * GiB },
  });
  obj.metadata.creationTimestamp = new Date(createdAt * 1000).toISOString();
  return { ...obj, ...extra };
}

/** The listing the API server would return, and usage by job name (an Error: the metrics query fails so). */
function sources(jobs: KubeObject[], usage: Record<string, ContainerUsage[] | Error>) {
  const asked: string[] = [];
  return {
    asked,
    cluster: { listJobs: async () => jobs },
    metrics: {
      containerUsage: async (ref: JobRef) => {
        asked.push(ref.name);
        const u = usage[ref.name];
        if (u instanceof Error) throw u;
        if (!u) throw new MissingMetricsError(`no usage for ${ref.name}`);
        return u;
      },
    },
  };
}

const worker = (pod: string, memoryGiB: number): ContainerUsage => ({
  pod,
  role: 'Worker',
  cpuMillis: 900,
  memoryBytes: memoryGiB * GiB,
});

describe('runningPeersOf', () => {
  const self = readJob(manifest('new', 'bert', 1_000));

  it('takes the peaks of other jobs of the signature, the longest running first, and leaves out the rest', async () => {
    const succeeded = manifest('done', 'bert', 10, {
      status: { conditions: [{ type: 'Succeeded', status: 'True' }] },
    } as Partial<KubeObject>);
    const { cluster, metrics, asked } = sources(
      [
        manifest('new', 'bert', 1_000),
        manifest('other-signature', 'resnet', 20),
        succeeded,
        manifest('late', 'bert', 900),
        manifest('early', 'bert', 100),
        manifest('no-metrics', 'bert', 50),
      ],
      {
        new: [worker('new-0', 99)],
        'other-signature': [worker('o-0', 99)],
        done: [worker('d-0', 99)],
        early: [worker('e-0', 7), worker('e-1', 9)],
        late: [worker('l-0', 8)],
      },
    );
    const peers = await runningPeersOf(self, cluster, metrics, DEFAULT_POLICY_CONFIG);
    assert.deepEqual(peers, { jobs: 2, peaks: { Worker: { cpuMillis: 900, memoryBytes: 9 * GiB } } });
    assert.deepEqual(asked, ['no-metrics', 'early', 'late']);
  });

  it(`asks at most ${MAX_RUNNING_PEERS} peers, is undefined without usage, and passes on a metrics error`, async () => {
    const many = Array.from({ length: 6 }, (_, i) => manifest(`p${i}`, 'bert', i));
    const usage = Object.fromEntries(many.map((m, i) => [m.metadata.name, [worker(`p${i}-0`, i + 1)]]));
    const capped = sources(many, usage);
    const peers = await runningPeersOf(self, capped.cluster, capped.metrics, DEFAULT_POLICY_CONFIG);
    assert.deepEqual(capped.asked, ['p0', 'p1', 'p2']);
    assert.equal(peers?.peaks.Worker?.memoryBytes, 3 * GiB);
    const none = sources([manifest('quiet', 'bert', 1)], {});
    assert.equal(await runningPeersOf(self, none.cluster, none.metrics, DEFAULT_POLICY_CONFIG), undefined);
    const broken = sources([manifest('p', 'bert', 1)], { p: new Error('prometheus: 503') });
    await assert.rejects(runningPeersOf(self, broken.cluster, broken.metrics, DEFAULT_POLICY_CONFIG), /503/);
  });

  it('leaves out the job itself and jobs that are not managed', async () => {
    const itself = sources([manifest('new', 'bert', 1)], { new: [worker('new-0', 20)] });
    assert.equal(
      await runningPeersOf(self, itself.cluster, itself.metrics, DEFAULT_POLICY_CONFIG),
      undefined,
    );
    const unmanaged = manifest('opted-out', 'bert', 1);
    unmanaged.metadata.annotations = { ...unmanaged.metadata.annotations, [ANNOTATION.managed]: 'false' };
    const { cluster, metrics } = sources([unmanaged], { 'opted-out': [worker('x-0', 20)] });
    assert.equal(await runningPeersOf(self, cluster, metrics, DEFAULT_POLICY_CONFIG), undefined);
  });
});
