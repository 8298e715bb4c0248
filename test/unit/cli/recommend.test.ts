// `trainscaler recommend NAMESPACE/JOB`: the review an alert would make, printed, with nothing written even when
// the deployment is not a dry run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { recommendFor, renderRecommendation } from '../../../cli/recommend.js';
import { readJob } from '../../../lib/adapters/job-adapter.js';
import { harness, TOY, toyJob, writesSince } from '../functions/handler-harness.js';

describe('trainscaler recommend', () => {
  it('says what it would change and why, and writes nothing', async () => {
    const { sim, deps } = harness({ dryRun: false });
    sim.submitJob(toyJob({ workers: 1, maxReplicas: 8 }));
    sim.step(900);
    const mark = sim.writeLog().length;
    const result = await recommendFor(TOY, deps);
    assert.deepEqual(result.errors, []);
    assert.deepEqual(writesSince(sim, mark), [], 'nothing written');
    assert.equal(readJob(await sim.getJob(TOY)).roles.find((r) => r.role === 'Worker')?.replicas, 1);
    const text = renderRecommendation(TOY, result);
    assert.match(text, /^PyTorchJob team-a\/toy: what trainscaler would do now \(nothing written\)$/m);
    assert.match(text, /^tuning: would change: 1 -> \d+ workers/m);
    assert.match(text, /^ {2}- Worker replicas 1 -> \d+$/m);
  });

  it('a job that does not exist is a recommendation refused with its error code', async () => {
    const { deps } = harness();
    const result = await recommendFor({ ...TOY, name: 'gone' }, deps);
    assert.equal(result.errors[0]?.code, 'NOT_FOUND');
    assert.match(renderRecommendation(TOY, result), /^no recommendation \(NOT_FOUND\): /m);
  });
});
