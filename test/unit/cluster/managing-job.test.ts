// A TrainJob's series carry its JobSet's identity (Prometheus sees only the pod): the alarm function reviews
// the TrainJob when the API server shows the JobSet is controlled by one, and never on a label's word.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { managingJobOf } from '../../../lib/cluster/owner-chain.js';
import { NotFoundError } from '../../../lib/errors.js';
import type { JobRef } from '../../../lib/types.js';
import { jobSet, trainJob, trainJobSet } from '../../fixtures/batch-jobs.js';

function store(...objects: KubeObject[]) {
  const reads: string[] = [];
  const getJob = async (ref: JobRef) => {
    reads.push(`${ref.kind}/${ref.name}`);
    const found = objects.find((o) => o.kind === ref.kind && o.metadata.name === ref.name);
    if (!found) throw new NotFoundError(`${ref.kind} ${ref.name}`);
    return found;
  };
  return { getJob, reads };
}

describe('managingJobOf', () => {
  it("a TrainJob's JobSet stands for the TrainJob", async () => {
    const tj = trainJob();
    const js = trainJobSet(tj);
    const { getJob } = store(tj, js);
    const ref = { kind: 'JobSet' as const, namespace: 'team-a', name: js.metadata.name };
    assert.deepEqual(await managingJobOf(getJob, ref), {
      kind: 'TrainJob',
      namespace: 'team-a',
      name: tj.metadata.name,
    });
  });

  it('a JobSet of its own, a missing one, and one controlled by another kind are themselves', async () => {
    const own = jobSet();
    const foreign: KubeObject = {
      ...jobSet(),
      metadata: {
        ...jobSet().metadata,
        name: 'other',
        ownerReferences: [
          { apiVersion: 'example.com/v1', kind: 'TrainJob', name: 'x', uid: 'u', controller: true },
        ],
      },
    };
    const { getJob } = store(own, foreign);
    for (const name of [own.metadata.name, 'gone', 'other']) {
      const ref = { kind: 'JobSet' as const, namespace: 'team-a', name };
      assert.deepEqual(await managingJobOf(getJob, ref), ref);
    }
  });

  it('other kinds are not read at all', async () => {
    const { getJob, reads } = store();
    const ref = { kind: 'Job' as const, namespace: 'team-a', name: 'ddp' };
    assert.deepEqual(await managingJobOf(getJob, ref), ref);
    assert.deepEqual(reads, []);
  });
});
