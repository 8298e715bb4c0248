import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Command } from 'commander';
import {
  parsePolicies,
  registerSimulateCommand,
  runSimulation,
  simulationJson,
} from '../../../cli/simulate.js';
import { renderSimulationHtml, renderSimulationTables } from '../../../cli/simulate-report.js';
import type { Workload } from '../../../lib/sim/workload.js';

// A cluster of 2 nodes x 4 GPUs keeps these runs to about a second each.
const SMALL = { nodes: 2, gpusPerNode: 4 } as const;

const workload: Workload = {
  name: 'tiny',
  path: 'tiny.csv',
  jobs: [
    { name: 'cifar10-big', time: 0, application: 'cifar10', replicas: 8, batchSize: 1024 },
    { name: 'cifar10-late', time: 10, application: 'cifar10', replicas: 1, batchSize: 128 },
  ],
};

describe('runSimulation', () => {
  it('manual admits first come first served: a later 1-GPU job waits for the 8-GPU job to finish', async () => {
    const result = await runSimulation({ workloads: [workload], policies: ['manual'], ...SMALL });
    const run = result.runs[0];
    assert.ok(run);
    const big = run.jobs.find((j) => j.name === 'cifar10-big');
    const late = run.jobs.find((j) => j.name === 'cifar10-late');
    assert.equal(big?.state, 'completed');
    assert.equal(late?.state, 'completed');
    // JCT counts the queueing: the late job cannot finish before the big one has.
    assert.ok((late?.jctSeconds ?? 0) + 10 > (big?.jctSeconds ?? Number.POSITIVE_INFINITY));
    assert.equal(run.summary.rescalesPerJob, 0);
    assert.equal(result.policies.manual?.meanAvgJctSeconds, run.summary.avgJctSeconds);
    assert.ok(run.summary.gpuUtilisation > 0 && run.summary.gpuUtilisation <= 1);
  });

  it('trainscaler drives the real handlers, is deterministic and beats waiting in the queue', async () => {
    const options = { workloads: [workload], policies: ['manual', 'trainscaler'] as const, ...SMALL };
    const first = await runSimulation({ ...options, policies: [...options.policies] });
    const again = await runSimulation({ ...options, policies: [...options.policies] });
    // Wall-clock time is the only thing allowed to differ between two runs with the same seed.
    const strip = (r: typeof first) => simulationJson(r).runs.map(({ wallSeconds: _w, ...run }) => run);
    assert.deepEqual(strip(first), strip(again));
    const ts = first.runs.find((r) => r.policy === 'trainscaler');
    const manual = first.runs.find((r) => r.policy === 'manual');
    assert.equal(ts?.summary.completed, 2);
    assert.equal(ts?.handlerErrors, 0);
    const late = (run: typeof ts | undefined) =>
      run?.jobs.find((j) => j.name === 'cifar10-late')?.jctSeconds ?? 0;
    // Submitted on arrival and sized to what is free (or made room for by the rebalance), not queued.
    assert.ok(late(ts) < late(manual), `${late(ts)} vs ${late(manual)}`);
    const json = simulationJson(first) as { policies: Record<string, { meanAvgJctSeconds: number | null }> };
    assert.equal(typeof json.policies.trainscaler?.meanAvgJctSeconds, 'number');
    const text = renderSimulationTables(first);
    assert.match(text, /Pollux \(published\)\s+2751/);
    assert.match(renderSimulationHtml(first), /^<!doctype html>[\s\S]*<svg[\s\S]*<\/html>\n$/);
  });

  it('multi-tenant runs report requested above used CPU and memory', async () => {
    const result = await runSimulation({
      workloads: [workload],
      policies: ['manual'],
      ...SMALL,
      multiTenant: {
        highPriorityShare: 0,
        memoryTooSmallShare: 0,
        memoryTooSmallFactor: 0.75,
        memoryOverRequestShare: 1,
        memoryOverRequestRange: [2, 2],
        cpuOverRequestShare: 1,
        cpuOverRequestRange: [1.5, 1.5],
        nodeFailureMeanHours: 0,
      },
    });
    const s = result.runs[0]?.summary;
    assert.ok(
      s && s.cpuRequested > s.cpuUsed * 1.4 && s.memoryRequested > s.memoryUsed * 1.8,
      JSON.stringify(s),
    );
    assert.ok(result.multiTenant?.some((line) => /PAI 2020/.test(line)));
  });
});

describe('trainscaler simulate command', () => {
  const program = () => {
    const p = new Command().exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
    registerSimulateCommand(p);
    return p;
  };

  it('fails with a clear message when the workload path is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'simulate-'));
    await assert.rejects(
      program().parseAsync(['node', 'trainscaler', 'simulate', '--workload', join(dir, 'missing')]),
      /does not exist: pass --workload a CSV file/,
    );
    writeFileSync(join(dir, 'w.csv'), 'name,time,application,num_replicas,batch_size\n');
    await assert.rejects(
      program().parseAsync([
        'node',
        'trainscaler',
        'simulate',
        '--workload',
        join(dir, 'w.csv'),
        '--policy',
        'manual,fifo',
      ]),
      /unknown policy 'fifo'/,
    );
  });

  it('parses policy lists', () => {
    assert.deepEqual(parsePolicies('trainscaler, manual,manual'), ['trainscaler', 'manual']);
  });
});
