// What Prometheus scrapes from the trainscaler sidecar of each simulated training pod (the metric names and
// labels of infra/sidecar/src/metrics.ts after the relabelling of infra/prometheus/prometheus.yml), derived
// from what the simulated cluster shows any client: pods with a running container are scrape targets;
// steps and samples counters start at 0 with the pod and grow by the job's progress (each worker processes
// its local batch per step); the step-time gauge is the worker's latest step time within the sidecar's
// 60 s window, labelled with the scale it was measured at; GPU utilisation is 1 - sync/step while the job
// trains and 0 while the container waits (rendezvous, restart); memory working set and limit are the
// container's real use and its limit.
import type { V1Pod } from '@kubernetes/client-node';
import type { JobRef } from '../../types.js';
import type { SimulatedCluster } from '../simulated-cluster.js';
import type { Labels } from './promql.js';
import type { WrittenSample } from './series-store.js';

// The simulator records one step sample per job a minute; the sidecar's gauge (a 60 s mean anchored before its
// window) has a value all along while the job trains, so a sample up to two minutes old stands for it.
const STEP_WINDOW_SECONDS = 120;
const LABEL = {
  job: 'training.kubeflow.org/job-name',
  type: 'training.kubeflow.org/replica-type',
  index: 'training.kubeflow.org/replica-index',
};

export interface Scrape {
  target: string;
  samples: WrittenSample[];
}

const MEMORY_UNITS: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  K: 1e3,
  M: 1e6,
  G: 1e9,
};

function memoryBytes(quantity: string | undefined): number | undefined {
  const m = quantity ? /^(\d+(?:\.\d+)?)([KMGT]i?)?$/.exec(quantity) : null;
  return m ? Number(m[1]) * (MEMORY_UNITS[m[2] ?? ''] ?? 1) : undefined;
}

export class SidecarSeries {
  readonly #sim: SimulatedCluster;
  readonly #namespace: string;
  readonly #counters = new Map<string, { steps: number; samples: number }>();
  readonly #processed = new Map<string, number>();

  constructor(sim: SimulatedCluster, namespace: string) {
    this.#sim = sim;
    this.#namespace = namespace;
  }

  async scrape(): Promise<Scrape[]> {
    const pods = await this.#sim.listPods(this.#namespace);
    const byJob = new Map<string, V1Pod[]>();
    for (const pod of pods) {
      const running = pod.status?.containerStatuses?.some((c) => c.state?.running !== undefined);
      const phase = pod.status?.phase;
      const job = pod.metadata?.labels?.[LABEL.job];
      if (!running || !job || phase === 'Succeeded' || phase === 'Failed') continue;
      byJob.set(job, [...(byJob.get(job) ?? []), pod]);
    }
    const out: Scrape[] = [];
    const live = new Set<string>();
    for (const [name, jobPods] of byJob) {
      const ref: JobRef = { kind: 'PyTorchJob', namespace: this.#namespace, name };
      const key = `${ref.namespace}/${name}`;
      live.add(key);
      const processed = (await this.#sim.samplesProcessed(ref)) ?? 0;
      const delta = Math.max(0, processed - (this.#processed.get(key) ?? processed));
      this.#processed.set(key, processed);
      const latest = (await this.#sim.stepSamples(ref, STEP_WINDOW_SECONDS).catch(() => [])).at(-1);
      const perWorker = new Map(
        (await this.#sim.workerStepTimes(ref, STEP_WINDOW_SECONDS).catch(() => [])).map((w) => [
          w.pod,
          w.samples.at(-1)?.stepTime,
        ]),
      );
      const usage = new Map(
        (await this.#sim.containerUsage(ref, STEP_WINDOW_SECONDS).catch(() => [])).map((u) => [
          u.pod,
          u.memoryBytes,
        ]),
      );
      const workers = jobPods.filter((p) => p.metadata?.labels?.[LABEL.type] === 'worker').length || 1;
      for (const pod of jobPods) {
        const podName = pod.metadata?.name ?? '';
        const identity: Record<string, string> = {
          job: 'trainscaler-sidecars',
          instance: `${podName}:9470`,
          namespace: this.#namespace,
          pod: podName,
          job_kind: 'PyTorchJob',
          job_name: name,
          node: pod.spec?.nodeName ?? '',
          role: pod.metadata?.labels?.[LABEL.type] ?? '',
          worker: pod.metadata?.labels?.[LABEL.index] ?? '',
        };
        const series = (metric: string, value: number, extra: Labels = {}): WrittenSample => ({
          labels: { ...identity, ...extra, __name__: metric },
          value,
        });
        const counter = this.#counters.get(podName) ?? { steps: 0, samples: 0 };
        this.#counters.set(podName, counter);
        if (latest && delta > 0) {
          counter.samples += delta / workers;
          counter.steps += delta / (latest.replicas * latest.localBatchSize);
        }
        const samples: WrittenSample[] = [
          series('trainscaler_steps_total', counter.steps),
          series('trainscaler_samples_total', counter.samples),
        ];
        const stepTime = perWorker.get(podName);
        if (stepTime !== undefined && latest)
          samples.push(
            series('trainscaler_step_time_seconds', stepTime, {
              replicas: String(latest.replicas),
              nodes: String(latest.nodes),
              local_batch_size: String(latest.localBatchSize),
            }),
          );
        const utilisation = latest ? 1 - (latest.syncTime ?? 0) / latest.stepTime : 0;
        samples.push(series('trainscaler_gpu_utilization_ratio', Math.max(0, utilisation), { gpu: '0' }));
        const used = usage.get(podName);
        const limit = memoryBytes(pod.spec?.containers?.[0]?.resources?.limits?.memory);
        if (used !== undefined) samples.push(series('trainscaler_cgroup_memory_working_set_bytes', used));
        if (limit !== undefined) samples.push(series('trainscaler_cgroup_memory_limit_bytes', limit));
        out.push({ target: `scrape:${key}/${podName}`, samples });
      }
    }
    for (const key of [...this.#processed.keys()]) if (!live.has(key)) this.#processed.delete(key);
    const livePods = new Set(out.map((s) => s.target.slice(s.target.lastIndexOf('/') + 1)));
    for (const pod of [...this.#counters.keys()]) if (!livePods.has(pod)) this.#counters.delete(pod);
    return out;
  }
}
