// The production scrape job's identity labels for pods of batch/v1 Jobs, JobSets and TrainJobs, on the real
// Prometheus: targets carry the discovery metadata Kubernetes gives each pod (support/monitoring.ts), every
// target's /metrics exports series that claim to be another job, and the series Prometheus stores must carry
// the job trainscaler manages: the JobSet when the pod is part of one (also for a TrainJob, whose pods carry
// only its JobSet's label; the metrics source reads a TrainJob's series under that JobSet), else the Job. The
// labels the pods export are overwritten, never trusted.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import {
  discoveredTargets,
  type MonitoringStack,
  startMonitoring,
} from '../../infra/local-stack/monitoring.js';
import { monitoringBinaries, type Started, stop, waitUntil } from '../../infra/local-stack/processes.js';
import { seriesSelector } from '../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../lib/types.js';

/** A pod as the Job controller makes it: controlled by its Job, labelled with its completion index. */
function podOf(name: string, job: string, index: number, labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'team-a',
      ownerReferences: [
        { apiVersion: 'batch/v1', kind: 'Job', name: job, uid: `uid-${job}`, controller: true },
      ],
      labels: {
        'batch.kubernetes.io/job-name': job,
        'batch.kubernetes.io/job-completion-index': String(index),
        ...labels,
      },
    },
    spec: { nodeName: `kwok-node-${index}`, containers: [] },
    status: { phase: 'Running' },
  };
}

const jobSetLabels = (jobSet: string, replicatedJob: string) => ({
  'jobset.sigs.k8s.io/jobset-name': jobSet,
  'jobset.sigs.k8s.io/replicatedjob-name': replicatedJob,
});

const PODS: V1Pod[] = [
  // An indexed Job of its own.
  podOf('ddp-0-abcde', 'ddp', 0),
  podOf('ddp-1-fghij', 'ddp', 1),
  // A JobSet of 2 child Jobs (replicated job `workers`), 2 pods each.
  podOf('llm-workers-0-0-aaaaa', 'llm-workers-0', 0, jobSetLabels('llm', 'workers')),
  podOf('llm-workers-1-1-bbbbb', 'llm-workers-1', 1, jobSetLabels('llm', 'workers')),
  // A TrainJob's pods: its JobSet is named after it, replicated job `node`; nothing names the TrainJob.
  podOf('mnist-node-0-0-ccccc', 'mnist-node-0', 0, {
    ...jobSetLabels('mnist', 'node'),
    'jobset.sigs.k8s.io/jobset-uid': 'u',
  }),
];

/** What every target exports: series claiming to be another job, role and worker (a pod can say anything). */
const EXPORTED = [
  '# TYPE trainscaler_step_time_seconds gauge',
  'trainscaler_step_time_seconds{namespace="other",job_kind="PyTorchJob",job_name="bert",role="master",worker="7",pod="bert-worker-0"} 0.5',
  '',
].join('\n');

describe('metrics identity of batch/v1 Job, JobSet and TrainJob pods (production relabelling, real Prometheus)', () => {
  let dir: string;
  let monitoring: MonitoringStack | undefined;
  let exporter: Server | undefined;
  const processes: Started[] = [];

  before(async () => {
    const binaries = monitoringBinaries();
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-relabel-'));
    exporter = createServer((_req, res) => {
      res.setHeader('content-type', 'text/plain; version=0.0.4');
      res.end(EXPORTED);
    });
    await new Promise<void>((resolve) => exporter?.listen(0, '127.0.0.1', resolve));
    const target = `127.0.0.1:${(exporter.address() as AddressInfo).port}`;
    monitoring = await startMonitoring({
      binaries,
      dir,
      webhookUrl: 'http://127.0.0.1:9/unused',
      webhookToken: 'unused-token-1234567890',
      timeFactor: 30,
    });
    processes.push(...monitoring.processes);
    await monitoring.setTargets(PODS.map((pod) => discoveredTargets(target, pod)));
  });

  after(async () => {
    await Promise.all(processes.map((p) => stop(p)));
    exporter?.closeAllConnections();
    exporter?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function query(expr: string): Promise<Record<string, string>[]> {
    const url = `${monitoring?.prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`;
    const body = (await (await fetch(url)).json()) as {
      data: { result: { metric: Record<string, string> }[] };
    };
    return body.data.result.map((r) => r.metric);
  }

  it('labels each series with the job trainscaler manages, from discovery only', async () => {
    const series = await waitUntil(
      async () => {
        const found = await query('trainscaler_step_time_seconds');
        return found.length === PODS.length ? found : undefined;
      },
      30_000,
      `a series from each of the ${PODS.length} pods`,
      () => processes.map((p) => p.output().slice(-2000)).join('\n'),
    );
    const identity = Object.fromEntries(
      series.map((m) => [m.pod, [m.namespace, m.job_kind, m.job_name, m.role, m.worker, m.node].join(' ')]),
    );
    assert.deepEqual(identity, {
      'ddp-0-abcde': 'team-a Job ddp worker 0 kwok-node-0',
      'ddp-1-fghij': 'team-a Job ddp worker 1 kwok-node-1',
      'llm-workers-0-0-aaaaa': 'team-a JobSet llm worker 0 kwok-node-0',
      'llm-workers-1-1-bbbbb': 'team-a JobSet llm worker 1 kwok-node-1',
      'mnist-node-0-0-ccccc': 'team-a JobSet mnist worker 0 kwok-node-0',
    });
    // What the pods exported under the identity labels is gone, not kept as exported_*.
    for (const m of series)
      assert.deepEqual(
        Object.keys(m).filter((k) => k.startsWith('exported_')),
        [],
      );
  });

  it("the metrics source's selector finds each job's series, a TrainJob's under its JobSet", async () => {
    const podsOf = async (ref: JobRef) =>
      (await query(`trainscaler_step_time_seconds{${seriesSelector(ref)},role="worker"}`))
        .map((m) => m.pod)
        .sort();
    assert.deepEqual(await podsOf({ kind: 'Job', namespace: 'team-a', name: 'ddp' }), [
      'ddp-0-abcde',
      'ddp-1-fghij',
    ]);
    assert.deepEqual(await podsOf({ kind: 'JobSet', namespace: 'team-a', name: 'llm' }), [
      'llm-workers-0-0-aaaaa',
      'llm-workers-1-1-bbbbb',
    ]);
    assert.deepEqual(await podsOf({ kind: 'TrainJob', namespace: 'team-a', name: 'mnist' }), [
      'mnist-node-0-0-ccccc',
    ]);
    // A child Job is not a job of its own: its pods' series are the JobSet's.
    assert.deepEqual(await podsOf({ kind: 'Job', namespace: 'team-a', name: 'llm-workers-0' }), []);
  });
});
