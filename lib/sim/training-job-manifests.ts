// Builders for the job manifests a user would `kubectl apply`: Kubeflow PyTorchJob and TFJob
// (kubeflow.org/v1) and apps/v1 StatefulSets, with the trainscaler.io annotations that carry the job
// facts trainscaler cannot infer (which application, batch sizes, how many samples to train).

import { ANNOTATION } from '../adapters/annotations.js';
import type { KubeObject } from '../cluster/cluster-client.js';
import { bytesToMemoryQuantity, millisToCpuQuantity } from './quantity.js';
import { LAUNCHER_WORKERS, type SimulatedLaunch } from './world-rescale-cost.js';

export const GPU_RESOURCE = 'nvidia.com/gpu';

export interface ContainerSizing {
  gpus: number;
  cpuMillis: number;
  memoryBytes: number;
  /** Limits default to the requests; set them to model users who limit below what the app needs. */
  cpuLimitMillis?: number;
  memoryLimitBytes?: number;
}

export interface TrainingJobFacts {
  name: string;
  namespace: string;
  /** The application (trainscaler.io/signature), e.g. 'cifar10'. */
  app: string;
  localBatchSize?: number;
  globalBatchSize?: number;
  targetSamples?: number;
  priorityClassName?: string;
  labels?: Record<string, string>;
}

export interface ElasticWorkers {
  workers: number;
  minReplicas: number;
  maxReplicas: number;
  sizing: ContainerSizing;
}

export function containerResources(sizing: ContainerSizing): {
  requests: Record<string, string>;
  limits: Record<string, string>;
} {
  const requests: Record<string, string> = {
    cpu: millisToCpuQuantity(sizing.cpuMillis),
    memory: bytesToMemoryQuantity(sizing.memoryBytes),
  };
  const limits: Record<string, string> = {
    cpu: millisToCpuQuantity(sizing.cpuLimitMillis ?? sizing.cpuMillis),
    memory: bytesToMemoryQuantity(sizing.memoryLimitBytes ?? sizing.memoryBytes),
  };
  // Extended resources must appear in limits (requests default to them); both are set for clarity.
  if (sizing.gpus > 0) {
    requests[GPU_RESOURCE] = String(sizing.gpus);
    limits[GPU_RESOURCE] = String(sizing.gpus);
  }
  return { requests, limits };
}

function podTemplate(
  facts: TrainingJobFacts,
  containerName: string,
  sizing: ContainerSizing,
  command: readonly string[],
  env: Readonly<Record<string, string>> = {},
) {
  return {
    metadata: { labels: { app: facts.app, ...facts.labels } },
    spec: {
      ...(facts.priorityClassName ? { priorityClassName: facts.priorityClassName } : {}),
      containers: [
        {
          name: containerName,
          image: `registry.example.com/trainscaler-demo/${facts.app}:1.0`,
          command: [...command],
          ...(Object.keys(env).length > 0
            ? { env: Object.entries(env).map(([name, value]) => ({ name, value })) }
            : {}),
          resources: containerResources(sizing),
        },
      ],
    },
  };
}

function factAnnotations(facts: TrainingJobFacts): Record<string, string> {
  // Every simulated job opts in to trainscaler (management is opt-in, lib/management.ts).
  const annotations: Record<string, string> = {
    [ANNOTATION.managed]: 'true',
    [ANNOTATION.signature]: facts.app,
  };
  if (facts.localBatchSize !== undefined)
    annotations[ANNOTATION.localBatchSize] = String(facts.localBatchSize);
  if (facts.globalBatchSize !== undefined)
    annotations[ANNOTATION.globalBatchSize] = String(facts.globalBatchSize);
  if (facts.targetSamples !== undefined) annotations[ANNOTATION.targetSamples] = String(facts.targetSamples);
  return annotations;
}

/**
 * elasticPolicy.maxRestarts of every simulated elastic PyTorchJob: 100, as the training-operator's own elastic
 * examples (examples/pytorch/elastic: echo, imagenet) that users of elastic PyTorchJobs start from; torchrun's
 * default is 0 and its documentation's examples use 3, which no autoscaled job survives. Each scale-down spends
 * one (measured with torch 1.13). 10 (the project's small test job) binds in the replayed workloads: the
 * rebalance shares the cluster by taking a worker from long jobs at each arrival, up to 56 times for one
 * imagenet job of 1.0x workload-1, and a job that can give no more holds its GPUs while others queue
 * (README "Cluster benchmark": workload-2 at 1.0x, 11,592 s mean JCT with 10).
 */
export const SIMULATED_MAX_RESTARTS = 100;

/** An elastic PyTorchJob of workers only (torchrun with a c10d rendezvous needs no Master replica). */
export function pytorchJobManifest(
  facts: TrainingJobFacts &
    ElasticWorkers & {
      backoffLimit?: number;
      master?: ContainerSizing;
      maxRestarts?: number;
      /** The workers' command and env; default trainscaler's launcher with the recommended settings. */
      launch?: SimulatedLaunch;
    },
): KubeObject {
  const launch = facts.launch ?? LAUNCHER_WORKERS;
  const replicaSpecs: Record<string, unknown> = {};
  if (facts.master) {
    replicaSpecs.Master = {
      replicas: 1,
      restartPolicy: 'OnFailure',
      template: podTemplate(facts, 'pytorch', facts.master, launch.command, launch.env),
    };
  }
  replicaSpecs.Worker = {
    replicas: facts.workers,
    restartPolicy: 'OnFailure',
    template: podTemplate(facts, 'pytorch', facts.sizing, launch.command, launch.env),
  };
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: {
      name: facts.name,
      namespace: facts.namespace,
      labels: { app: facts.app, ...facts.labels },
      annotations: factAnnotations(facts),
    },
    spec: {
      elasticPolicy: {
        rdzvBackend: 'c10d',
        minReplicas: facts.minReplicas,
        maxReplicas: facts.maxReplicas,
        maxRestarts: facts.maxRestarts ?? SIMULATED_MAX_RESTARTS,
      },
      runPolicy: { backoffLimit: facts.backoffLimit ?? 3, cleanPodPolicy: 'Running' },
      pytorchReplicaSpecs: replicaSpecs,
    },
  };
}

/** A parameter-server TFJob: `ps` parameter servers (CPU only) and elastic bounds on the workers. */
export function tfJobManifest(
  facts: TrainingJobFacts & ElasticWorkers & { ps: number; psSizing: ContainerSizing; backoffLimit?: number },
): KubeObject {
  const command = ['python', 'train.py', '--strategy=parameter_server'];
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'TFJob',
    metadata: {
      name: facts.name,
      namespace: facts.namespace,
      labels: { app: facts.app, ...facts.labels },
      annotations: {
        ...factAnnotations(facts),
        [ANNOTATION.minReplicas]: String(facts.minReplicas),
        [ANNOTATION.maxReplicas]: String(facts.maxReplicas),
      },
    },
    spec: {
      // Lets the operator add and remove workers of a running job (TFJob's elastic mode).
      enableDynamicWorker: true,
      runPolicy: { backoffLimit: facts.backoffLimit ?? 3, cleanPodPolicy: 'Running' },
      tfReplicaSpecs: {
        PS: {
          replicas: facts.ps,
          restartPolicy: 'OnFailure',
          template: podTemplate(facts, 'tensorflow', facts.psSizing, command),
        },
        Worker: {
          replicas: facts.workers,
          restartPolicy: 'OnFailure',
          template: podTemplate(facts, 'tensorflow', facts.sizing, command),
        },
      },
    },
  };
}

/** A StatefulSet of training workers (Parallel pod management: all ranks start together). */
export function statefulSetManifest(facts: TrainingJobFacts & ElasticWorkers): KubeObject {
  const selector = { 'training.example.com/job': facts.name };
  const template = podTemplate(facts, 'trainer', facts.sizing, ['torchrun', 'train.py']);
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name: facts.name,
      namespace: facts.namespace,
      labels: { app: facts.app, ...facts.labels },
      annotations: {
        ...factAnnotations(facts),
        [ANNOTATION.minReplicas]: String(facts.minReplicas),
        [ANNOTATION.maxReplicas]: String(facts.maxReplicas),
        // The training inside survives a replica change (it checkpoints and re-rendezvouses).
        [ANNOTATION.elastic]: 'true',
      },
    },
    spec: {
      replicas: facts.workers,
      serviceName: facts.name,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: selector },
      template: { ...template, metadata: { labels: { ...template.metadata.labels, ...selector } } },
    },
  };
}
