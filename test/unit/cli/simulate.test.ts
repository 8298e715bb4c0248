import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Command } from 'commander';
import {
  parsePolicies,
  registerSimulateCommand,
  runSimulation,
  SIMULATION_POLICIES,
  simulationJson,
  traceWriter,
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
    assert.match(
      text,
      /Peer figures from the Pollux artifact's own simulator \(another simulator\)[^\n]*Pollux 2,751 s/,
    );
    assert.match(renderSimulationHtml(first), /^<!doctype html>[\s\S]*<svg[\s\S]*<\/html>\n$/);
  });

  it("trainscaler-oracle runs trainscaler's handlers with the world's truth as their model", async () => {
    const reasons: Array<{ policy: string; reason: string }> = [];
    const result = await runSimulation({
      workloads: [workload],
      policies: ['trainscaler', 'trainscaler-oracle'],
      ...SMALL,
      onDecision: (d) => reasons.push({ policy: d.policy, reason: `${d.job}: ${d.reason}` }),
    });
    const oracle = result.runs.find((r) => r.policy === 'trainscaler-oracle');
    assert.equal(oracle?.summary.completed, 2);
    assert.equal(oracle?.handlerErrors, 0);
    assert.equal(typeof result.policies['trainscaler-oracle']?.meanAvgJctSeconds, 'number');
    // Same arrivals, same triggers, other predictions: the decisions' predicted rates are the world's.
    const predicted = (policy: string) =>
      reasons
        .filter((r) => r.policy === policy)
        .map((r) => /predicted [^;]*/.exec(r.reason)?.[0])
        .filter((p) => p !== undefined);
    assert.ok(predicted('trainscaler').length > 0);
    assert.notDeepEqual(predicted('trainscaler-oracle'), predicted('trainscaler'));
  });

  it('backfill starts a later job that fits while the head waits; manual makes it wait', async () => {
    const queue: Workload = {
      name: 'queue',
      path: 'queue.csv',
      jobs: [
        { name: 'cifar10-first', time: 0, application: 'cifar10', replicas: 6, batchSize: 1024 },
        { name: 'cifar10-head', time: 10, application: 'cifar10', replicas: 4, batchSize: 512 },
        { name: 'cifar10-small', time: 20, application: 'cifar10', replicas: 1, batchSize: 128 },
      ],
    };
    const result = await runSimulation({ workloads: [queue], policies: ['manual', 'backfill'], ...SMALL });
    const wait = (policy: string, name: string) =>
      result.runs.find((r) => r.policy === policy)?.jobs.find((j) => j.name === name)?.queuedSeconds;
    // 6 of 8 GPUs busy: the 4-GPU head waits; the 1-GPU job fits in the 2 free GPUs and only pays the pod start.
    assert.ok((wait('backfill', 'cifar10-small') ?? Infinity) < 60, `${wait('backfill', 'cifar10-small')}`);
    assert.ok((wait('manual', 'cifar10-small') ?? 0) > 300, `${wait('manual', 'cifar10-small')}`);
    assert.equal(result.runs.find((r) => r.policy === 'backfill')?.summary.completed, 3);
    assert.equal(typeof result.policies.backfill?.meanAvgJctSeconds, 'number');
  });

  it('tiresias preempts a demoted job for a new arrival, resumes it from its checkpoint, and both finish', async () => {
    const lasWorkload: Workload = {
      name: 'las',
      path: 'las.csv',
      jobs: [
        { name: 'imagenet-long', time: 0, application: 'imagenet', replicas: 8, batchSize: 1024 },
        { name: 'cifar10-short', time: 1200, application: 'cifar10', replicas: 4, batchSize: 512 },
      ],
    };
    // A low threshold (2 GPU-hours) demotes the 8-GPU job after 15 minutes; the 4-GPU job ends below it.
    const tiresias = { queueThresholdsGpuSeconds: [7200], promoteKnob: 0 };
    const result = await runSimulation({
      workloads: [lasWorkload],
      policies: ['tiresias', 'manual'],
      ...SMALL,
      tiresias,
      timeCapSeconds: 3 * 86_400,
    });
    const run = (policy: string) => result.runs.find((r) => r.policy === policy);
    const long = run('tiresias')?.jobs.find((j) => j.name === 'imagenet-long');
    const short = run('tiresias')?.jobs.find((j) => j.name === 'cifar10-short');
    assert.equal(long?.state, 'completed');
    assert.equal(short?.state, 'completed');
    assert.equal(long?.preemptions, 1);
    assert.equal(short?.preemptions, 0);
    // The short job does not wait for the long one, as it does under manual.
    const manualShort = run('manual')?.jobs.find((j) => j.name === 'cifar10-short');
    assert.ok((short?.queuedSeconds ?? Infinity) < 60, `${short?.queuedSeconds}`);
    assert.ok((manualShort?.queuedSeconds ?? 0) > 600, `${manualShort?.queuedSeconds}`);
    // The preemption and resume cost the long job time: it ends later than alone under manual.
    const manualLong = run('manual')?.jobs.find((j) => j.name === 'imagenet-long');
    assert.ok((long?.jctSeconds ?? 0) > (manualLong?.jctSeconds ?? Infinity));
  });

  it('files GPUs idle beyond two ticks under what the jobs beside them did: grown, or left alone', async () => {
    // One 1-worker cifar10 job alone on 16 GPUs: backfill keeps it at 1; trainscaler grows it, a step a decision.
    const alone: Workload = {
      name: 'alone',
      path: 'alone.csv',
      jobs: [{ name: 'cifar10-alone', time: 0, application: 'cifar10', replicas: 1, batchSize: 2048 }],
    };
    const result = await runSimulation({
      workloads: [alone],
      policies: ['backfill', 'trainscaler'],
      nodes: 4,
      gpusPerNode: 4,
    });
    const split = (policy: string) => {
      const s = result.runs.find((r) => r.policy === policy)?.summary;
      assert.ok(s && s.idleGpuHoursBeyondTwoTicks > 0, policy);
      const { growing, shrunk, leftAlone } = s.idleGpuHoursBeyondTwoTicksBeside;
      assert.ok(Math.abs(growing + shrunk + leftAlone - s.idleGpuHoursBeyondTwoTicks) < 1e-9, policy);
      return s.idleGpuHoursBeyondTwoTicksBeside;
    };
    assert.deepEqual(split('backfill'), { growing: 0, shrunk: 0, leftAlone: split('backfill').leftAlone });
    assert.ok(split('trainscaler').growing > 0, JSON.stringify(split('trainscaler')));
    assert.equal(split('trainscaler').shrunk, 0);
    assert.deepEqual(result.policies.trainscaler?.meanIdleGpuHoursBeyondTwoTicksBeside, split('trainscaler'));
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
        nodeMeanHoursBetweenFailures: 0,
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

describe('simulate --trace', () => {
  it('writes every decision interval as the idle-GPU meter saw it, and every applied decision', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'simulate-trace-')), 'trace.jsonl');
    const trace = traceWriter(path);
    const result = await runSimulation({
      workloads: [workload],
      policies: ['trainscaler'],
      ...SMALL,
      onInterval: trace.onInterval,
      onDecision: trace.onDecision,
    });
    trace.close();
    const run = result.runs[0];
    assert.ok(run);
    const lines = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const intervals = lines.filter((l) => l.type === 'interval');
    const decisions = lines.filter((l) => l.type === 'decision');
    assert.equal(intervals.length + decisions.length, lines.length);
    // One sample a decision interval, from the first to the end of the run.
    assert.deepEqual(
      intervals.map((l) => l.at),
      intervals.map((_, i) => (i + 1) * result.decisionIntervalSeconds),
    );
    assert.ok(intervals.length * result.decisionIntervalSeconds >= run.summary.makespanSeconds);
    // The run's idle-GPU figure is summed from exactly these samples.
    const idleGpuSeconds = intervals.reduce(
      (sum, l) => sum + Math.max(0, Math.min(l.idleGpus, l.wantedGpus)) * result.decisionIntervalSeconds,
      0,
    );
    assert.ok(Math.abs(idleGpuSeconds / 3600 - run.summary.idleGpuHoursWhileJobsCouldGrow) < 1e-9);
    assert.ok(intervals.every((l) => l.workload === 'tiny' && l.policy === 'trainscaler'));
    // wantedGpus is split among the running jobs that would take them.
    for (const l of intervals) {
      const jobs: Array<{ wanted: number; phase: string }> = l.jobs;
      assert.equal(
        jobs.reduce((sum, j) => sum + j.wanted, 0),
        l.wantedGpus,
      );
      assert.ok(jobs.every((j) => j.phase === 'Running' || j.wanted === 0));
    }
    assert.ok(intervals.some((l) => l.wantedGpus > 0));
    // Each job is sampled until it ends, and its share done only grows.
    for (const name of ['cifar10-big', 'cifar10-late']) {
      const seen = intervals.flatMap((l) => l.jobs.filter((j: { name: string }) => j.name === name));
      assert.ok(seen.length > 0, name);
      const done = seen.map((j) => j.done);
      assert.deepEqual(
        done,
        [...done].sort((a, b) => a - b),
      );
      assert.ok(seen.every((j) => j.workers >= 1));
    }
    // The meter looks before each instant's decisions: a GPU a decision hands out is held when it looks next
    // (a real scheduler binds the pods within a second), never idle beside the workers it was given to.
    const gpus = SMALL.nodes * SMALL.gpusPerNode;
    for (const l of intervals) {
      const running: Array<{ workers: number; phase: string }> = l.jobs.filter(
        (j: { phase: string }) => j.phase === 'Running',
      );
      assert.ok(l.idleGpus + running.reduce((sum, j) => sum + j.workers, 0) <= gpus, JSON.stringify(l));
    }
    // Decisions fall on sampled seconds, so the bound above is checked where the old order broke it.
    assert.ok(decisions.some((d) => intervals.some((l) => l.at === d.at)));
    // Decisions carry their run, the policy that made them and their reason; their jobs are the sampled ones.
    assert.ok(decisions.length > 0);
    for (const d of decisions) {
      assert.equal(d.workload, 'tiny');
      assert.equal(d.policy, 'trainscaler');
      assert.ok(['cifar10-big', 'cifar10-late'].includes(d.job), d.job);
      assert.ok(typeof d.decidedBy === 'string' && d.reason.length > 0);
    }
  });

  it('fails before simulating when the trace file cannot be written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'simulate-trace-'));
    assert.throws(
      () => traceWriter(join(dir, 'missing', 'trace.jsonl')),
      /cannot write the trace to .*missing/,
    );
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
    assert.deepEqual(parsePolicies('backfill,tiresias,threshold'), ['backfill', 'tiresias', 'threshold']);
    assert.deepEqual(parsePolicies('trainscaler,trainscaler-oracle'), ['trainscaler', 'trainscaler-oracle']);
    // The diagnostic runs only when named: the default list is the five policies a cluster can run.
    assert.ok(!(SIMULATION_POLICIES as readonly string[]).includes('trainscaler-oracle'));
  });
});
