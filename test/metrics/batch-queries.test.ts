// The schedule tick's batch reads on the real Prometheus (Debian's package), with the production scrape job's
// identity labels (support/monitoring.ts): for three jobs, each job's entry in a batch answer equals what its own
// per-job reads answer at the same instant, and a Prometheus started with a small --query.max-samples refuses
// the batch query, which every asked job then gets as an IncompleteMetricsError (no partial answer used).
// Each pod is its own exporter (one HTTP server a pod), exporting what the trainscaler sidecar exports; cAdvisor
// is a scrape job of its own, as the kubelet's is in a cluster.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { dump, load } from 'js-yaml';
import {
  discoveredTargets,
  startReadyPrometheus,
  testPrometheusConfig,
} from '../../infra/local-stack/monitoring.js';
import { monitoringBinaries, type Started, stop, waitUntil } from '../../infra/local-stack/processes.js';
import { IncompleteMetricsError } from '../../lib/errors.js';
import { type JobReading, jobKey, type SinceAsk } from '../../lib/metrics/job-readings.js';
import { PrometheusMetricsSource } from '../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../lib/types.js';

/** When the exporters started (epoch seconds); the resume and pause instants are relative to it. */
const T0 = Math.floor(Date.now() / 1000);
/** When beta's worker 0 resumes from a pause (its exported resume instant changes then). */
const BETA_RESUMES = T0 + 3;

interface PodSpec {
  job: JobRef;
  worker: number;
  node: string;
  /** The sidecar's series of this pod, at `now` (epoch seconds). */
  series(now: number): string[];
}

const ALPHA: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'alpha' };
const BETA: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'beta' };
const GAMMA: JobRef = { kind: 'PyTorchJob', namespace: 'team-b', name: 'gamma' };
const JOBS = [ALPHA, BETA, GAMMA];

const step = (labels: string, seconds: number) => `trainscaler_step_time_seconds{${labels}} ${seconds}`;

function pods(): PodSpec[] {
  const out: PodSpec[] = [];
  // alpha: 2 workers told their scale, the trainer's own counts, cgroup usage, one resume long ago.
  for (const w of [0, 1])
    out.push({
      job: ALPHA,
      worker: w,
      node: `node-${w}`,
      series: (now) => [
        step('replicas="2",nodes="2",local_batch_size="32"', 0.2 + 0.1 * w),
        `trainscaler_trainer_samples ${1000 + w}`,
        `trainscaler_samples_total ${7 + w}`,
        `trainscaler_cgroup_cpu_usage_seconds_total ${(0.5 + w) * (now - T0 + 100)}`,
        `trainscaler_cgroup_memory_working_set_bytes ${(w + 1) * 2 ** 30}`,
        `trainscaler_resumed_timestamp_seconds ${T0 - 50 + w}`,
        `trainscaler_paused_timestamp_seconds ${T0 - 80}`,
      ],
    });
  // beta: 3 workers on 2 nodes, not told the node count (counted from the node labels), the sidecars' counts;
  // worker 0 resumes during the test.
  for (const w of [0, 1, 2])
    out.push({
      job: BETA,
      worker: w,
      node: `node-${w % 2}`,
      series: (now) => [
        step('replicas="3",nodes="",local_batch_size="16"', 0.4 + 0.05 * w),
        `trainscaler_samples_total ${300 * (w + 1)}`,
        `trainscaler_cgroup_cpu_usage_seconds_total ${0.25 * (now - T0 + 100)}`,
        `trainscaler_cgroup_memory_working_set_bytes ${2 ** 29}`,
        `trainscaler_resumed_timestamp_seconds ${w === 0 ? (now >= BETA_RESUMES ? BETA_RESUMES : T0 - 200) : T0 - 150 + 60 * (w - 1)}`,
        `trainscaler_paused_timestamp_seconds ${w === 0 ? T0 - 10 : T0 - 160}`,
      ],
    });
  // gamma: no cgroup series (usage from cAdvisor), no scale label of the batch size (no model samples).
  for (const w of [0, 1])
    out.push({
      job: GAMMA,
      worker: w,
      node: `node-${w}`,
      series: () => [step('replicas="2",nodes="1",local_batch_size=""', 0.3)],
    });
  return out;
}

const podName = (p: PodSpec) => `${p.job.name}-worker-${p.worker}`;

/** cAdvisor's series: gamma's pods, a pod of the same name in another namespace, and a pod of another job. */
function cadvisorSeries(now: number): string[] {
  const lines: string[] = [];
  const container = (namespace: string, pod: string, cores: number, bytes: number) => {
    const labels = `namespace="${namespace}",pod="${pod}",container="trainer"`;
    lines.push(`container_cpu_usage_seconds_total{${labels}} ${cores * (now - T0 + 100)}`);
    lines.push(`container_memory_working_set_bytes{${labels}} ${bytes}`);
  };
  container('team-b', 'gamma-worker-0', 1, 3 * 2 ** 30);
  container('team-b', 'gamma-worker-1', 2, 4 * 2 ** 30);
  container('team-c', 'gamma-worker-0', 8, 9 * 2 ** 30);
  container('team-b', 'gamma-2-worker-0', 8, 9 * 2 ** 30);
  return lines;
}

function podObject(p: PodSpec): V1Pod {
  return {
    metadata: {
      name: podName(p),
      namespace: p.job.namespace,
      ownerReferences: [
        {
          apiVersion: 'kubeflow.org/v1',
          kind: p.job.kind,
          name: p.job.name,
          uid: `uid-${p.job.name}`,
          controller: true,
        },
      ],
      labels: {
        'training.kubeflow.org/replica-type': 'Worker',
        'training.kubeflow.org/replica-index': String(p.worker),
      },
    },
    spec: { nodeName: p.node, containers: [] },
    status: { phase: 'Running' },
  };
}

async function exporter(lines: (now: number) => string[]): Promise<{ server: Server; target: string }> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    res.end(`${lines(Date.now() / 1000).join('\n')}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, target: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A reading as compared: the value, or the error's class and message. */
function shown<T>(reading: JobReading<T> | undefined): unknown {
  if (!reading) return 'absent';
  if (reading.ok) return { value: reading.value };
  const error = reading.error;
  return { error: error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error) };
}

async function perJob<T>(read: () => Promise<T>): Promise<unknown> {
  try {
    return { value: await read() };
  } catch (error) {
    return { error: error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error) };
  }
}

describe('batch metrics reads on the real Prometheus (production identity labels)', () => {
  let dir: string;
  const processes: Started[] = [];
  const servers: Server[] = [];
  let prometheusUrl = '';
  let limitedUrl = '';

  async function startPrometheus(name: string, flags: string[]): Promise<string> {
    const { started, url } = await startReadyPrometheus(monitoringBinaries(), dir, { name, flags });
    processes.push(started);
    return url;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-batch-'));
    await mkdir(join(dir, 'targets'), { recursive: true });
    const groups = [];
    for (const p of pods()) {
      const { server, target } = await exporter(p.series);
      servers.push(server);
      groups.push(discoveredTargets(target, podObject(p)));
    }
    const cadvisor = await exporter(cadvisorSeries);
    servers.push(cadvisor.server);
    await writeFile(join(dir, 'targets/sidecars.json'), JSON.stringify(groups));
    await writeFile(join(dir, 'targets/alertmanagers.json'), '[]');
    // The production scrape job, and the kubelet's cAdvisor (whose own namespace and pod labels are kept).
    const config = load(await testPrometheusConfig()) as { scrape_configs: Record<string, unknown>[] };
    config.scrape_configs.push({
      job_name: 'cadvisor',
      honor_labels: true,
      static_configs: [{ targets: [cadvisor.target] }],
    });
    await writeFile(join(dir, 'prometheus.yml'), dump(config));
    [prometheusUrl, limitedUrl] = await Promise.all([
      startPrometheus('prometheus', []),
      // Too few for any step time query of these jobs, even of one job: the batch and each of its parts refused.
      startPrometheus('prometheus-limited', ['--query.max-samples=10']),
    ]);
    // Until, at the instant the test reads (a second back), every pod and cAdvisor is scraped and both resumes
    // are seen at a 15 s subquery step: on a loaded machine the scrapes start late, and each target at its own
    // offset within the scrape interval.
    await waitUntil(
      async () => {
        const source = new PrometheusMetricsSource(prometheusUrl, () => Math.floor(Date.now() / 1000) - 1, {
          stepSeconds: 2,
          rateWindowSeconds: 5,
        });
        const seen = await Promise.all([
          source.firstStepAfterPause(ALPHA, T0 - 60),
          source.firstStepAfterPause(BETA, T0 - 80),
          source.containerUsage(GAMMA, 20).then((u) => (u.length === 2 ? true : undefined)),
          source.stepSamples(BETA, 20).then((x) => (x.at(-1)?.nodes === 2 ? true : undefined)),
          source.samplesProcessed(BETA).then((n) => (n === 1800 ? true : undefined)),
        ]).catch(() => [undefined]);
        return seen.every((x) => x !== undefined) ? true : undefined;
      },
      90_000,
      "every pod's series in Prometheus",
      () => processes.map((p) => p.output().slice(-2000)).join('\n'),
    );
    // The limited Prometheus scrapes on its own schedule. Until it holds more than 10 samples at the instants
    // the refused query reads (a 20 s window ending a second back), the batch loads too few to be refused and
    // its answer is partial, not an error: wait until an instant query 8 s back is refused itself.
    await waitUntil(
      async () => {
        const at = Math.floor(Date.now() / 1000) - 8;
        const url = `${limitedUrl}/api/v1/query?query=count(trainscaler_step_time_seconds)&time=${at}`;
        const answer = (await (await fetch(url)).json()) as { status: string; error?: string };
        return answer.status === 'error' && /too many samples/.test(answer.error ?? '') ? true : undefined;
      },
      90_000,
      'the limited Prometheus holding more than 10 step-time samples 8 s back',
      () => processes.map((p) => p.output().slice(-2000)).join('\n'),
    );
  });

  after(async () => {
    await Promise.all(processes.map((p) => stop(p)));
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('gives each of 3 jobs in a batch answer what its own per-job reads give it, at the same instant', async () => {
    const now = Math.floor(Date.now() / 1000) - 1;
    const source = new PrometheusMetricsSource(prometheusUrl, () => now, {
      stepSeconds: 2,
      rateWindowSeconds: 5,
    });
    const window = 20;
    const since = new Map<JobRef, number>([
      [ALPHA, T0 - 60],
      [BETA, T0 - 80],
      [GAMMA, T0 - 60],
    ]);
    const asks: SinceAsk[] = JOBS.map((ref) => ({ ref, since: since.get(ref) ?? 0 }));
    const batch = {
      stepSamples: await source.stepSamplesOfJobs(JOBS, window),
      containerUsage: await source.containerUsageOfJobs(JOBS, window),
      workerStepTimes: await source.workerStepTimesOfJobs(JOBS, window),
      samplesProcessed: await source.samplesProcessedOfJobs(JOBS),
      firstStepAfterPause: await source.firstStepAfterPauseOfJobs(asks),
      pauseEndedAfter: await source.pauseEndedAfterOfJobs(asks),
    };
    for (const ref of JOBS) {
      const key = jobKey(ref);
      const s = since.get(ref) ?? 0;
      const own = {
        stepSamples: await perJob(() => source.stepSamples(ref, window)),
        containerUsage: await perJob(() => source.containerUsage(ref, window)),
        workerStepTimes: await perJob(() => source.workerStepTimes(ref, window)),
        samplesProcessed: await perJob(() => source.samplesProcessed(ref)),
        firstStepAfterPause: await perJob(() => source.firstStepAfterPause(ref, s)),
        pauseEndedAfter: await perJob(() => source.pauseEndedAfter(ref, s)),
      };
      const batched = {
        stepSamples: shown(batch.stepSamples.get(key)),
        containerUsage: shown(batch.containerUsage.get(key)),
        workerStepTimes: shown(batch.workerStepTimes.get(key)),
        samplesProcessed: shown(batch.samplesProcessed.get(key)),
        firstStepAfterPause: shown(batch.firstStepAfterPause.get(key)),
        pauseEndedAfter: shown(batch.pauseEndedAfter.get(key)),
      };
      assert.deepEqual(batched, own, `${key}: the batch answer is the per-job one`);
    }
    // The readings are the data's, not two equal emptinesses.
    const value = <T>(r: JobReading<T> | undefined) => (r?.ok ? r.value : undefined);
    assert.equal(value(batch.samplesProcessed.get(jobKey(ALPHA))), 2001, "the trainers' counts");
    assert.equal(value(batch.samplesProcessed.get(jobKey(BETA))), 1800, "the sidecars' counts");
    assert.equal(value(batch.firstStepAfterPause.get(jobKey(ALPHA))), T0 - 50);
    assert.equal(
      value(batch.firstStepAfterPause.get(jobKey(BETA))),
      BETA_RESUMES,
      'the resume after its since',
    );
    assert.equal(value(batch.pauseEndedAfter.get(jobKey(BETA))), BETA_RESUMES - (T0 - 10));
    const betaSamples = value(batch.stepSamples.get(jobKey(BETA))) ?? [];
    // The newest: every worker scraped by then (the first scrapes may have seen some only).
    assert.deepEqual(
      betaSamples.slice(-1).map((x) => [x.replicas, x.nodes, x.localBatchSize]),
      [[3, 2, 16]],
      "beta's node count from its workers' node labels",
    );
    const gammaUsage = value(batch.containerUsage.get(jobKey(GAMMA))) ?? [];
    assert.deepEqual(
      gammaUsage.map((u) => [u.pod, u.memoryBytes]),
      [
        ['gamma-worker-0', 3 * 2 ** 30],
        ['gamma-worker-1', 4 * 2 ** 30],
      ],
      "cAdvisor's readings of gamma's own pods only",
    );
    const gammaSamples = batch.stepSamples.get(jobKey(GAMMA));
    assert.match(
      String(gammaSamples?.ok === false && gammaSamples.error),
      /MissingMetricsError|missing metrics/,
    );
  });

  it('gives every asked job a clear error when Prometheus refuses the batch for too many samples', async () => {
    const now = Math.floor(Date.now() / 1000) - 1;
    const source = new PrometheusMetricsSource(limitedUrl, () => now, { stepSeconds: 2 });
    const readings = await source.stepSamplesOfJobs(JOBS, 20);
    assert.equal(readings.size, JOBS.length);
    for (const ref of JOBS) {
      const r = readings.get(jobKey(ref));
      assert.ok(r && !r.ok, `${jobKey(ref)}: no samples from a refused query`);
      assert.ok(r.error instanceof IncompleteMetricsError, String(r.error));
      assert.equal(r.error.reason, 'too-many-samples');
      assert.match(
        r.error.message,
        /batch (step time|node count|worker count) query of 3 jobs failed with HTTP 422: .*too many samples/,
      );
    }
  });
});
