// The demo's workload: a handful of training jobs whose users chose their configuration badly, the way
// people do without measurements. The same jobs are run on the simulated cluster with and without
// trainscaler (cli/demo.ts). Targets are chosen so that each job takes about an hour as submitted.
import type { KubeObject } from '../lib/cluster/cluster-client.js';
import {
  type ContainerSizing,
  pytorchJobManifest,
  statefulSetManifest,
  tfJobManifest,
} from '../lib/sim/training-job-manifests.js';

const GiB = 1024 ** 3;

export const DEMO_NAMESPACE = 'research';

/** PriorityClasses of the demo cluster; pods get these values through their priorityClassName. */
export const DEMO_PRIORITY_CLASSES: Record<string, number> = {
  'best-effort': 10,
  'team-default': 100,
  'production-high': 1000,
};

export interface DemoJobSpec {
  /** Seconds after the start of the run when the job is submitted. */
  submitAtSeconds: number;
  /** What is wrong with the user's configuration, in one line for the report. */
  story: string;
  manifest: KubeObject;
}

export interface DemoScenario {
  name: string;
  priorityClasses: Record<string, number>;
  jobs: DemoJobSpec[];
}

const GPU_WORKER: ContainerSizing = { gpus: 1, cpuMillis: 4000, memoryBytes: 8 * GiB };

/** 4 nodes x 4 GPUs; at t=0 the first five jobs take all 16 GPUs. */
export function demoScenario(): DemoScenario {
  const common = { namespace: DEMO_NAMESPACE, priorityClassName: 'team-default' };
  return {
    name: 'badly configured jobs on 4 nodes x 4 GPUs',
    priorityClasses: DEMO_PRIORITY_CLASSES,
    jobs: [
      {
        submitAtSeconds: 0,
        story: 'too small: 1 worker for an application that scales well on one node',
        manifest: pytorchJobManifest({
          ...common,
          name: 'imagenet-small',
          app: 'imagenet',
          workers: 1,
          minReplicas: 1,
          maxReplicas: 8,
          sizing: { ...GPU_WORKER, memoryBytes: 10 * GiB },
          localBatchSize: 81,
          targetSamples: 1_000_000,
        }),
      },
      {
        submitAtSeconds: 0,
        story:
          'too large: 8 workers across 3 nodes for an application that scales badly, holding half the GPUs',
        manifest: pytorchJobManifest({
          ...common,
          name: 'ncf-oversized',
          app: 'ncf',
          workers: 8,
          minReplicas: 1,
          maxReplicas: 8,
          sizing: { ...GPU_WORKER, memoryBytes: 4 * GiB },
          globalBatchSize: 1452,
          targetSamples: 200_000_000,
        }),
      },
      {
        submitAtSeconds: 0,
        story: 'memory limit 5 GiB below the 6 GiB the application needs: OOMKilled',
        manifest: pytorchJobManifest({
          ...common,
          name: 'deepspeech2-lowmem',
          app: 'deepspeech2',
          workers: 2,
          minReplicas: 1,
          maxReplicas: 4,
          sizing: { ...GPU_WORKER, memoryBytes: 5 * GiB },
          localBatchSize: 28,
          targetSamples: 200_000,
          backoffLimit: 3,
        }),
      },
      {
        submitAtSeconds: 0,
        story: 'best-effort priority: a production job arriving later preempts some of its workers',
        manifest: pytorchJobManifest({
          ...common,
          priorityClassName: 'best-effort',
          name: 'yolov3-preemptible',
          app: 'yolov3',
          workers: 3,
          minReplicas: 1,
          maxReplicas: 4,
          sizing: GPU_WORKER,
          localBatchSize: 8,
          targetSamples: 150_000,
        }),
      },
      {
        submitAtSeconds: 0,
        story: 'ordinary TFJob, but its workers ask for 10 cores and 16 GiB where they use 4 cores and 3 GiB',
        manifest: tfJobManifest({
          ...common,
          name: 'cifar10-tf',
          app: 'cifar10',
          workers: 2,
          minReplicas: 1,
          maxReplicas: 4,
          sizing: { gpus: 1, cpuMillis: 10_000, memoryBytes: 16 * GiB },
          ps: 1,
          psSizing: { gpus: 0, cpuMillis: 2000, memoryBytes: 8 * GiB },
          localBatchSize: 182,
          targetSamples: 9_000_000,
        }),
      },
      {
        submitAtSeconds: 20 * 60,
        story: 'ordinary StatefulSet job submitted later, when the cluster is full',
        manifest: statefulSetManifest({
          ...common,
          name: 'deepspeech2-sts',
          app: 'deepspeech2',
          workers: 2,
          minReplicas: 1,
          maxReplicas: 4,
          sizing: GPU_WORKER,
          localBatchSize: 28,
          targetSamples: 150_000,
        }),
      },
      {
        submitAtSeconds: 30 * 60,
        story: 'high-priority production job arriving on a full cluster',
        manifest: pytorchJobManifest({
          ...common,
          priorityClassName: 'production-high',
          name: 'bert-urgent',
          app: 'bert',
          workers: 2,
          minReplicas: 1,
          maxReplicas: 4,
          sizing: { ...GPU_WORKER, memoryBytes: 12 * GiB },
          localBatchSize: 8,
          targetSamples: 60_000,
        }),
      },
    ],
  };
}
