// `simulate --world`: which step times a run plays, and that it says so with the results.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Command } from 'commander';
import { registerSimulateCommand, runSimulation } from '../../../cli/simulate.js';
import { renderSimulationTables } from '../../../cli/simulate-report.js';
import {
  defaultTracesDir,
  loadGradientNoiseTables,
  loadSimulationWorld,
} from '../../../cli/simulation-world.js';
import { FITTED_WORLD } from '../../../lib/sim/simulation-world.js';
import { samplesToTarget } from '../../../lib/sim/statistical-efficiency.js';
import { targetSamples, type Workload } from '../../../lib/sim/workload.js';
import { loadPlacements, polluxAvailable, TRACES_DIR } from '../../support/pollux-data.js';

const SMALL = { nodes: 2, gpusPerNode: 4 } as const;
const workload: Workload = {
  name: 'one',
  path: 'one.csv',
  jobs: [{ name: 'cifar10-44', time: 0, application: 'cifar10', replicas: 8, batchSize: 1024 }],
};

describe('simulate --world', () => {
  it('defaults to the fitted world in runSimulation and prints it with the results', async () => {
    const result = await runSimulation({ workloads: [workload], policies: ['manual'], ...SMALL });
    assert.equal(result.world, 'fitted');
    assert.match(result.assumptions[0] ?? '', /^world FITTED/);
    assert.match(renderSimulationTables(result), /world FITTED \(step times: the fitted profiles\)/);
  });

  it('plays the measured placement the scheduler chose: 8 workers on 2 nodes run at placement 44', {
    skip: !polluxAvailable() && 'no ../shared/data/pollux',
  }, async () => {
    const world = loadSimulationWorld('measured', TRACES_DIR, { statisticalEfficiency: true });
    const result = await runSimulation({ workloads: [workload], policies: ['manual'], world, ...SMALL });
    assert.equal(result.world, 'measured');
    assert.match(result.assumptions[0] ?? '', /^world MEASURED/);
    // The step time at local batch 1024 / 8 = 128, linear between the '44' rows at 91 and 129.
    const rows = loadPlacements('cifar10').filter((r) => r.placement === '44');
    const lo = rows.find((r) => r.localBatchSize === 91);
    const hi = rows.find((r) => r.localBatchSize === 129);
    assert.ok(lo && hi);
    const step = lo.stepTime + ((128 - 91) / (129 - 91)) * (hi.stepTime - lo.stepTime);
    // Steps to the target progress at batch 1024, each epoch at its measured statistical efficiency.
    const samples = samplesToTarget(loadGradientNoiseTables(TRACES_DIR).cifar10, 1024);
    assert.equal(
      world.targetSamples('cifar10', 1024),
      Math.round(samples),
      'the job declares what it will take',
    );
    assert.ok(samples > targetSamples('cifar10', 128) * 1.05, 'more samples than at B0 = 128');
    const training = (samples * step) / 1024;
    const jct = result.runs[0]?.jobs[0]?.jctSeconds ?? Number.NaN;
    // Plus the 20 s pod start, within one 10 s sub-step.
    assert.ok(Math.abs(jct - (training + 20)) <= 10, `JCT ${jct} vs ${training} + 20`);
    // Without statistical efficiency (the default), the job completes at the measured run's samples at 1024.
    const bySamples = loadSimulationWorld('measured', TRACES_DIR);
    assert.equal(bySamples.targetSamples('cifar10', 1024), targetSamples('cifar10', 1024));
    assert.match(bySamples.assumptions.join('\n'), /a job completes when it has processed them/);
    assert.doesNotMatch(bySamples.assumptions.join('\n'), /statistical efficiency/);
    const fitted = await runSimulation({ workloads: [workload], policies: ['manual'], ...SMALL });
    assert.ok(Math.abs((fitted.runs[0]?.jobs[0]?.jctSeconds ?? 0) - jct) > 30, 'the worlds differ here');
  });

  it('finds the traces beside the workload folder, and says what to pass when they are missing', async () => {
    assert.equal(defaultTracesDir('/d/pollux/workloads-1.0'), '/d/pollux/traces');
    assert.equal(defaultTracesDir('/d/pollux/workloads-1.0/workload-1.csv'), '/d/pollux/traces');
    assert.equal(loadSimulationWorld('fitted', '/nowhere'), FITTED_WORLD);
    const dir = mkdtempSync(join(tmpdir(), 'simulate-world-'));
    writeFileSync(join(dir, 'w.csv'), 'name,time,application,num_replicas,batch_size\n');
    const program = () => {
      const p = new Command().exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
      registerSimulateCommand(p);
      return p;
    };
    const args = ['node', 'trainscaler', 'simulate', '--workload', join(dir, 'w.csv')];
    await assert.rejects(program().parseAsync(args), /measured world needs .*--traces.*or --world fitted/);
    await assert.rejects(program().parseAsync([...args, '--world', 'flat']), /unknown world 'flat'/);
  });
});
