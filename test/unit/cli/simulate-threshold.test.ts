import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runSimulation, simulationJson } from '../../../cli/simulate.js';
import { renderSimulationHtml, renderSimulationTables } from '../../../cli/simulate-report.js';
import type { Workload } from '../../../lib/sim/workload.js';

// 2 nodes x 4 GPUs; a time cap keeps the long imagenet jobs to a couple of simulated hours.
const SMALL = { nodes: 2, gpusPerNode: 4, timeCapSeconds: 2 * 3600 } as const;

function job(name: string, application: 'imagenet' | 'ncf' | 'cifar10', replicas: number, batchSize: number) {
  return { name, time: 0, application, replicas, batchSize };
}

describe('runSimulation --policy threshold (HPA-style baseline)', () => {
  it('grows a job that computes most of its step and does not grow one that mostly synchronises', async () => {
    const workload: Workload = {
      name: 'threshold-mixed',
      path: 'threshold-mixed.csv',
      jobs: [
        // imagenet at global batch 3200 computes >= 94 % of its step at 2..8 workers: above the 0.8 target.
        job('busy', 'imagenet', 2, 3200),
        // ncf at global batch 256 computes at most 72 % of its step at 2 or more workers: never above target.
        job('sync-bound', 'ncf', 4, 256),
      ],
    };
    const options = { workloads: [workload], policies: ['threshold' as const], ...SMALL };
    const result = await runSimulation(options);
    const run = result.runs[0];
    assert.ok(run);
    const busy = run.jobs.find((j) => j.name === 'busy');
    const syncBound = run.jobs.find((j) => j.name === 'sync-bound');
    assert.ok(busy && syncBound);
    assert.ok(busy.workersFinal > busy.workersAsked, JSON.stringify(busy));
    assert.ok(busy.rescales >= 1);
    assert.match(busy.lastReason ?? '', /^threshold: utilisation/);
    assert.ok(syncBound.workersFinal <= syncBound.workersAsked, JSON.stringify(syncBound));
    // Never beyond the cluster: the grown job and the other job fit in the 8 GPUs, and nothing waited
    // for a GPU that was not there (that would fail the job with PendingTimeout).
    assert.ok(busy.workersFinal + (syncBound.state === 'completed' ? 0 : syncBound.workersFinal) <= 8);
    assert.equal(run.jobs.filter((j) => j.state === 'failed').length, 0);
    assert.ok(run.gpusBusy.every(([, gpus]) => gpus <= 8));
    // The report has a row and a colour for the baseline.
    assert.match(renderSimulationTables(result), /mean of 1\s+threshold\s+/);
    assert.match(renderSimulationHtml(result), /stroke="#2f9e44"/);
    // Same seed, same run.
    const again = await runSimulation(options);
    const strip = (r: typeof result) => simulationJson(r).runs.map(({ wallSeconds: _w, ...rest }) => rest);
    assert.deepEqual(strip(again), strip(result));
  });

  it('never grows a job beyond the GPUs free in the cluster', async () => {
    // Both jobs want more workers (imagenet/3200 at 4 workers on one node computes 99.9 % of its step), but
    // together they hold all 8 GPUs for the whole hour. An extra pod could not be placed: it would stay
    // Pending and its job would fail its rendezvous (PendingTimeout) after 600 s.
    const workload: Workload = {
      name: 'threshold-full',
      path: 'threshold-full.csv',
      jobs: [job('left', 'imagenet', 4, 3200), job('right', 'imagenet', 4, 3200)],
    };
    const result = await runSimulation({
      workloads: [workload],
      policies: ['threshold'],
      ...SMALL,
      timeCapSeconds: 3600,
    });
    const run = result.runs[0];
    assert.ok(run);
    assert.equal(run.jobs.length, 2);
    for (const j of run.jobs) {
      assert.equal(j.state, 'unfinished', `${j.name}: ${j.failureReason}`);
      assert.equal(j.workersFinal, 4, JSON.stringify(j));
      assert.equal(j.rescales, 0);
      assert.match(j.lastReason ?? '', /metric asks 5.*only 0 GPU\(s\) free/);
    }
  });
});
