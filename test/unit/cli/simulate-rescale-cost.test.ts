import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Command } from 'commander';
import {
  type JobOutcome,
  registerSimulateCommand,
  rescalesPerJobOf,
  runSimulation,
  type SimulationResult,
} from '../../../cli/simulate.js';
import { renderSimulationTables } from '../../../cli/simulate-report.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import type { Workload } from '../../../lib/sim/workload.js';
import { parseRescaleCost } from '../../../lib/sim/world-rescale-cost.js';

// 2 nodes x 4 GPUs: an 8-GPU job that tiresias demotes (2 GPU-hours) and preempts for a 4-GPU arrival, then
// resumes at the same instants whatever a resume costs.
const SMALL = { nodes: 2, gpusPerNode: 4 } as const;
const las: Workload = {
  name: 'las',
  path: 'las.csv',
  jobs: [
    { name: 'imagenet-long', time: 0, application: 'imagenet', replicas: 8, batchSize: 1024 },
    { name: 'cifar10-short', time: 1200, application: 'cifar10', replicas: 4, batchSize: 512 },
  ],
};
// One 1-worker cifar10 job beside a 2-worker one on 16 GPUs: trainscaler and the threshold baseline resize them.
const elastic: Workload = {
  name: 'elastic',
  path: 'elastic.csv',
  jobs: [
    { name: 'cifar10-a', time: 0, application: 'cifar10', replicas: 1, batchSize: 2048 },
    { name: 'cifar10-b', time: 300, application: 'cifar10', replicas: 2, batchSize: 1024 },
  ],
};

const jobOf = (result: SimulationResult, policy: string, name: string) =>
  result.runs.find((r) => r.policy === policy)?.jobs.find((j) => j.name === name);
const pausesOf = (result: SimulationResult, policy: string) =>
  result.runs.find((r) => r.policy === policy)?.jobs.flatMap((j) => j.pausesSeconds) ?? [];

describe('simulate --rescale-cost', () => {
  it("charges a 30 s world's pause to every re-formed world of every policy, a tiresias resume included", async () => {
    const lasRun = (seconds: string) =>
      runSimulation({
        workloads: [las],
        policies: ['manual', 'backfill', 'tiresias'],
        ...SMALL,
        tiresias: { queueThresholdsGpuSeconds: [7200], promoteKnob: 0 },
        timeCapSeconds: 3 * 86_400,
        rescaleCost: parseRescaleCost(seconds),
      });
    const free = await lasRun('0');
    const costly = await lasRun('30');
    const resized = await runSimulation({
      workloads: [elastic],
      policies: ['trainscaler', 'threshold'],
      nodes: 4,
      gpusPerNode: 4,
      timeCapSeconds: 2 * 3600,
      rescaleCost: parseRescaleCost('30'),
    });
    // Every re-formed world of every policy is charged the 30 s (none of the 0 s world's is charged anything).
    for (const policy of ['tiresias', 'trainscaler', 'threshold']) {
      const pauses = policy === 'tiresias' ? pausesOf(costly, policy) : pausesOf(resized, policy);
      assert.ok(pauses.length > 0, `${policy}: no re-formed world to charge`);
      assert.ok(
        pauses.every((p) => p === 30),
        `${policy}: ${pauses}`,
      );
    }
    assert.deepEqual(pausesOf(costly, 'manual'), []);
    assert.deepEqual(pausesOf(costly, 'backfill'), []);
    assert.ok(pausesOf(free, 'tiresias').every((p) => p === 0));
    // The progress lost: tiresias preempts and resumes at the same instants in both worlds, so its preempted job
    // ends exactly 30 s later for its one resume; manual re-forms no world and ends at the same second.
    const resumed = jobOf(costly, 'tiresias', 'imagenet-long');
    assert.equal(resumed?.preemptions, 1);
    assert.equal(resumed?.pausesSeconds.length, 1);
    assert.equal(
      (resumed?.jctSeconds ?? 0) - (jobOf(free, 'tiresias', 'imagenet-long')?.jctSeconds ?? 0),
      30,
    );
    assert.equal(
      jobOf(costly, 'manual', 'imagenet-long')?.jctSeconds,
      jobOf(free, 'manual', 'imagenet-long')?.jctSeconds,
    );
    // The result and the printed assumptions say the cost charged, and nothing names the launcher's figures.
    const { name, up, down } = costly.rescaleCostSeconds;
    assert.deepEqual({ name, up, down }, { name: '30', up: 30, down: 30 });
    assert.match(
      renderSimulationTables(costly),
      /rescale cost 30 s up \/ 30 s down for every policy \(--rescale-cost 30/,
    );
    const world = costly.assumptions.find((a) => a.startsWith('every re-formed world'));
    assert.match(world ?? '', /30 s when it only gained workers, 30 s when it lost or restarted one/);
    assert.match(costly.assumptions.find((a) => a.startsWith('tiresias')) ?? '', /plus the 30 s pause/);
    const belief = costly.assumptions.find((a) => a.startsWith('what trainscaler believes')) ?? '';
    assert.match(belief, new RegExp(`scaleUpCostSeconds ${DEFAULT_POLICY_CONFIG.scaleUpCostSeconds} s`));
    assert.match(belief, /learns the world's 30 s \/ 30 s/);
    for (const line of costly.assumptions.filter((a) => a !== belief))
      assert.doesNotMatch(line, /\b3\.[36] s\b/, line);
  });

  it('refuses a bad value naming the flag and the accepted forms, and runs nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'simulate-cost-'));
    const csv = join(dir, 'w.csv');
    writeFileSync(csv, 'name,time,application,num_replicas,batch_size\njob-1,0,cifar10,1,128\n');
    const trace = join(dir, 'trace.jsonl');
    for (const bad of ['fast', '-5', '30s', '']) {
      const program = new Command()
        .exitOverride()
        .configureOutput({ writeErr: () => {}, writeOut: () => {} });
      registerSimulateCommand(program);
      await assert.rejects(
        program.parseAsync([
          'node',
          'trainscaler',
          'simulate',
          '--workload',
          csv,
          '--trace',
          trace,
          '--rescale-cost',
          bad,
        ]),
        (error: Error) =>
          error.message.includes(`--rescale-cost '${bad}'`) &&
          error.message.includes('expected launcher, torchrun or a number of seconds'),
      );
      // The trace is opened first thing in the action: absent, the command stopped before it.
      assert.equal(existsSync(trace), false, bad);
    }
  });
});

describe('rescalesPerJobOf (rescales per job per policy)', () => {
  const job = (name: string, rescales: number, pauses: number): JobOutcome => ({
    name,
    application: 'cifar10',
    arrivalSeconds: 0,
    jctSeconds: 1,
    queuedSeconds: 0,
    state: 'completed',
    rescales,
    workersAsked: 1,
    workersFinal: 1,
    pausesSeconds: Array.from({ length: pauses }, () => 30),
  });

  it('means over every job of every run, and names the job with the most', () => {
    const spread = rescalesPerJobOf([
      { workload: 'w1', jobs: [job('a', 2, 2), job('b', 0, 1)] },
      { workload: 'w2', jobs: [job('c', 7, 7), job('d', 3, 4)] },
    ]);
    assert.deepEqual(spread, {
      mean: 3,
      max: 7,
      maxJob: 'w2/c',
      reformedWorlds: { mean: 3.5, max: 7, maxJob: 'w2/c' },
    });
  });

  it('names no job when none was rescaled (a tiresias resume re-forms a world but is no rescale)', () => {
    assert.deepEqual(rescalesPerJobOf([{ workload: 'w', jobs: [job('a', 0, 1), job('b', 0, 0)] }]), {
      mean: 0,
      max: 0,
      maxJob: null,
      reformedWorlds: { mean: 0.5, max: 1, maxJob: 'w/a' },
    });
    assert.deepEqual(rescalesPerJobOf([]), {
      mean: 0,
      max: 0,
      maxJob: null,
      reformedWorlds: { mean: 0, max: 0, maxJob: null },
    });
  });
});
