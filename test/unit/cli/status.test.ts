// `trainscaler status`: one line per managed job, from what trainscaler recorded where tenants cannot write
// (the ScaledTrainingJob status, the outcome store), with a constant number of reads whatever the job count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { managedJobStatuses, renderStatusTable } from '../../../cli/status.js';
import type { ClusterClient, KubeObject } from '../../../lib/cluster/cluster-client.js';
import { outcomesConfigMapName, outcomesKey } from '../../../lib/decisions/outcome-store.js';
import { NotFoundError } from '../../../lib/errors.js';
import type { JobKind, JobRef } from '../../../lib/types.js';
import { MemoryJobStates } from '../../support/job-states.js';

const STORE_NS = 'trainscaler-system';
const NOW = 1_800_000_000;

function pytorchJob(namespace: string, name: string, workers: number, managed = 'true'): KubeObject {
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: {
      name,
      namespace,
      uid: `uid-${namespace}-${name}`,
      resourceVersion: '1',
      annotations: { 'trainscaler.io/managed': managed },
    },
    spec: {
      pytorchReplicaSpecs: {
        Worker: { replicas: workers, template: { spec: { containers: [{ name: 'pytorch', image: 'x' }] } } },
      },
    },
  } as KubeObject;
}

const refOf = (obj: KubeObject): JobRef => ({
  kind: 'PyTorchJob',
  namespace: obj.metadata.namespace ?? '',
  name: obj.metadata.name ?? '',
});

interface World {
  cluster: ClusterClient;
  reads: string[];
  states: MemoryJobStates;
}

function world(jobs: KubeObject[], outcomes: Record<string, Record<string, unknown>> = {}): World {
  const reads: string[] = [];
  const states = new MemoryJobStates();
  const fake: Partial<ClusterClient> = {
    listJobs: async (kind: JobKind) => {
      reads.push(`list ${kind}`);
      if (kind === 'JobSet') throw new NotFoundError('jobsets (no CRD)');
      return kind === 'PyTorchJob' ? jobs : [];
    },
    listJobStates: async () => {
      reads.push('list scaledtrainingjobs');
      return states.listJobStates();
    },
    getConfigMap: async (namespace: string, name: string) => {
      reads.push(`get configmap ${name}`);
      if (namespace !== STORE_NS) return undefined;
      const ns = name.replace(outcomesConfigMapName(''), '');
      const data = Object.fromEntries(
        Object.entries(outcomes)
          .filter(([key]) => key.startsWith(`${ns}/`))
          .map(([key, value]) => [key.slice(ns.length + 1), JSON.stringify(value)]),
      );
      return { data };
    },
  };
  return { cluster: fake as ClusterClient, reads, states };
}

async function record(states: MemoryJobStates, job: KubeObject, status: Record<string, unknown>) {
  await states.putJobState(
    { ref: refOf(job), apiVersion: 'kubeflow.org/v1', uid: job.metadata.uid ?? '' },
    status,
    undefined,
    { dryRun: false },
  );
}

describe('trainscaler status', () => {
  it('lists managed jobs only, with current and desired workers, last action and why not acting', async () => {
    const grown = pytorchJob('team-a', 'bert', 4);
    const held = pytorchJob('team-a', 'gpt', 2);
    const unmanaged = pytorchJob('team-b', 'resnet', 3, 'false');
    const w = world([grown, held, unmanaged], {
      [`team-a/${outcomesKey(refOf(held))}`]: {
        tuning: {
          at: NOW - 30,
          trigger: 'schedule',
          outcome: 'cooldown',
          reason: 'grow 2 -> 3 workers: cool-down (last change 30 s ago)',
          changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 3 }],
          signature: 's',
        },
      },
    });
    await record(w.states, grown, {
      lastActionAt: NOW - 600,
      lastDecision: {
        id: 'd1',
        at: NOW - 600,
        policy: 'tuning',
        reason: 'grow',
        changes: [{ kind: 'replicas', role: 'Worker', from: 2, to: 4 }],
      },
    });
    const rows = await managedJobStatuses(w.cluster, STORE_NS);
    assert.deepEqual(
      rows.map((r) => [r.namespace, r.name, r.mode, r.workers, r.desiredWorkers]),
      [
        ['team-a', 'bert', 'Auto', 4, 4],
        ['team-a', 'gpt', 'Auto', 2, 3],
      ],
    );
    assert.deepEqual(rows[0]?.lastAction, { at: NOW - 600, summary: 'Worker 2 -> 4' });
    assert.equal(rows[0]?.notActing, undefined);
    assert.equal(rows[1]?.lastAction, undefined);
    assert.match(rows[1]?.notActing ?? '', /cool-down/);
    const table = renderStatusTable(rows, NOW);
    assert.match(table, /^NAMESPACE +NAME +KIND +MODE +WORKERS +DESIRED +LAST ACTION +WHY NOT ACTING$/m);
    assert.match(table, /^team-a +bert +PyTorchJob +Auto +4 +4 +Worker 2 -> 4 \(10m ago\) +-$/m);
  });

  it('reads a constant number of objects: one list per kind and of states, one outcome store per namespace', async () => {
    const jobs = Array.from({ length: 50 }, (_, i) => pytorchJob(`team-${i % 2}`, `job-${i}`, 2));
    const w = world(jobs);
    await managedJobStatuses(w.cluster, STORE_NS);
    const lists = w.reads.filter((r) => r.startsWith('list '));
    const gets = w.reads.filter((r) => r.startsWith('get '));
    assert.equal(lists.length, 7, w.reads.join(', '));
    assert.deepEqual(gets.sort(), [
      `get configmap ${outcomesConfigMapName('team-0')}`,
      `get configmap ${outcomesConfigMapName('team-1')}`,
    ]);
  });

  it('trusts no state recorded for another job of the same name (deleted and created again)', async () => {
    const job = pytorchJob('team-a', 'bert', 2);
    const w = world([job]);
    await record(
      w.states,
      { ...job, metadata: { ...job.metadata, uid: 'an-older-bert' } },
      {
        lastActionAt: NOW - 60,
        paused: true,
        pauseReason: 'crash loop',
      },
    );
    const [row] = await managedJobStatuses(w.cluster, STORE_NS);
    assert.equal(row?.mode, 'Auto');
    assert.equal(row?.lastAction, undefined);
  });

  it('a paused job says so, and what a tenant could have put in a reason reaches the terminal escaped', async () => {
    const job = pytorchJob('team-a', 'bert', 2);
    const w = world([job]);
    await record(w.states, job, { paused: true, pauseReason: 'crash loop\u001b[2J' });
    const rows = await managedJobStatuses(w.cluster, STORE_NS);
    assert.equal(rows[0]?.mode, 'Paused');
    const table = renderStatusTable(rows, NOW);
    assert.ok(table.includes('paused: crash loop\\x1b[2J'), table);
    assert.ok(!table.includes('\u001b'));
  });

  it('a job whose spec cannot be read is a row saying so, and the other jobs are still listed', async () => {
    const broken = { ...pytorchJob('team-a', 'broken', 2), spec: {} } as KubeObject;
    const w = world([broken, pytorchJob('team-a', 'bert', 2)]);
    const rows = await managedJobStatuses(w.cluster, STORE_NS);
    assert.deepEqual(
      rows.map((r) => [r.name, r.workers]),
      [
        ['bert', 2],
        ['broken', undefined],
      ],
    );
    assert.match(rows[1]?.notActing ?? '', /^spec unreadable: .*replica specs/);
  });

  it('a job governed by a TrainingAutoscaler (no annotation) is listed with its mode and recommendation', async () => {
    const job = pytorchJob('team-a', 'bert', 2, 'unset');
    delete job.metadata.annotations;
    const other = pytorchJob('team-a', 'gpt', 2, 'unset');
    delete other.metadata.annotations;
    const w = world([job, other]);
    await record(w.states, job, {
      policy: { name: 'bert-policy', mode: 'Recommend', minWorkers: 1, maxWorkers: 8 },
      recommendation: { workers: 5, reason: '2 -> 5 workers: +58% predicted', at: NOW - 10 },
    });
    const rows = await managedJobStatuses(w.cluster, STORE_NS);
    assert.deepEqual(
      rows.map((r) => [r.name, r.mode, r.policy, r.workers, r.desiredWorkers]),
      [['bert', 'Recommend', 'bert-policy', 2, 5]],
    );
    assert.equal(rows[0]?.notActing, 'Recommend: 2 -> 5 workers: +58% predicted');
  });
});
