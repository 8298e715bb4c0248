// How the emulated controllers read a stored job: which replica roles it has, how many of each, and
// the pod template each role's pods are created from. Invalid specs raise ValidationError naming the
// JSON pointer, which the simulated API server turns into HTTP 422 like a CRD schema check would.
import type { V1Container, V1PodTemplateSpec } from '@kubernetes/client-node';
import { ANNOTATION } from '../adapters/annotations.js';
import type { KubeObject } from '../cluster/cluster-client.js';
import { ValidationError } from '../errors.js';
import type { JobKind, Resources, RoleName } from '../types.js';
import { cpuQuantityToMillis, isValidQuantity, memoryQuantityToBytes, parseQuantity } from './quantity.js';
import { GPU_RESOURCE } from './training-job-manifests.js';

export interface SimulatedRole {
  role: RoleName;
  replicas: number;
  /** Replicas that run the training loop form the data-parallel world (K); parameter servers do not. */
  trains: boolean;
  /** Progress needs these replicas up (an evaluator is a side job and does not gate training). */
  gatesProgress: boolean;
  template: V1PodTemplateSpec;
  /** Changes whenever the role's pod template changes, like a ControllerRevision hash. */
  revision: string;
  /** JSON pointer of the role's template, for error messages. */
  templatePath: string;
}

export interface SimulatedJobSpec {
  kind: JobKind;
  app: string;
  roles: SimulatedRole[];
  localBatchSize?: number;
  globalBatchSize?: number;
  targetSamples?: number;
  backoffLimit: number;
  /**
   * elasticPolicy.maxRestarts of a PyTorchJob run by torchrun (undefined: no torchelastic agent, no restart
   * budget): restarts each agent may take before it gives up and the job fails.
   */
  maxRestarts?: number;
  /** StatefulSets start pods one by one unless podManagementPolicy is Parallel. */
  orderedStart: boolean;
  /** The container that trains: trainscaler.io/container, else the framework's name, else the first. */
  trainingContainer: string | undefined;
}

/** Requests of a pod (sum over containers) and the training container's limits. */
export interface PodSizing {
  requests: Resources;
  limits: Partial<Resources>;
}

export const DEFAULT_BACKOFF_LIMIT = 3;

// The simulator runs the first three kinds only (readSimulatedJobSpec refuses the others).
const FRAMEWORK_CONTAINER: Record<JobKind, string | undefined> = {
  PyTorchJob: 'pytorch',
  TFJob: 'tensorflow',
  StatefulSet: undefined,
  Job: undefined,
  JobSet: undefined,
  TrainJob: undefined,
};

const ROLE_SPECS: Record<'PyTorchJob' | 'TFJob', { field: string; roles: RoleName[] }> = {
  PyTorchJob: { field: 'pytorchReplicaSpecs', roles: ['Master', 'Worker'] },
  TFJob: { field: 'tfReplicaSpecs', roles: ['Chief', 'PS', 'Worker', 'Evaluator'] },
};

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function positiveIntegerAnnotation(job: KubeObject, key: string): number | undefined {
  const raw = job.metadata.annotations?.[key];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) {
    throw new ValidationError(
      `/metadata/annotations/${key.replace('/', '~1')}`,
      `'${raw}' is not a positive integer`,
    );
  }
  return value;
}

export function readSimulatedJobSpec(job: KubeObject): SimulatedJobSpec {
  const kind = job.kind;
  if (kind !== 'PyTorchJob' && kind !== 'TFJob' && kind !== 'StatefulSet') {
    throw new ValidationError('/kind', `the simulator runs PyTorchJob, TFJob and StatefulSet, not '${kind}'`);
  }
  const app = job.metadata.annotations?.[ANNOTATION.signature];
  if (!app)
    throw new ValidationError('/metadata/annotations', `missing ${ANNOTATION.signature} (the application)`);
  const spec = isRecord(job.spec) ? job.spec : undefined;
  if (!spec) throw new ValidationError('/spec', 'missing spec');

  const roles = kind === 'StatefulSet' ? [statefulSetRole(spec)] : replicaRoles(kind, spec);
  if (!roles.some((r) => r.trains)) throw new ValidationError('/spec', 'no training replicas (Worker)');
  const runPolicy = isRecord(spec.runPolicy) ? spec.runPolicy : {};
  const backoffLimit = runPolicy.backoffLimit ?? DEFAULT_BACKOFF_LIMIT;
  if (!Number.isInteger(backoffLimit) || (backoffLimit as number) < 0) {
    throw new ValidationError('/spec/runPolicy/backoffLimit', 'must be a non-negative integer');
  }
  const elastic = kind === 'PyTorchJob' && isRecord(spec.elasticPolicy) ? spec.elasticPolicy : undefined;
  const maxRestarts = elastic?.maxRestarts;
  if (maxRestarts !== undefined && (!Number.isInteger(maxRestarts) || (maxRestarts as number) < 0)) {
    throw new ValidationError('/spec/elasticPolicy/maxRestarts', 'must be a non-negative integer');
  }
  return {
    ...(maxRestarts !== undefined ? { maxRestarts: maxRestarts as number } : {}),
    kind,
    app,
    roles,
    localBatchSize: positiveIntegerAnnotation(job, ANNOTATION.localBatchSize),
    globalBatchSize: positiveIntegerAnnotation(job, ANNOTATION.globalBatchSize),
    targetSamples: positiveIntegerAnnotation(job, ANNOTATION.targetSamples),
    backoffLimit: backoffLimit as number,
    orderedStart: kind === 'StatefulSet' && spec.podManagementPolicy !== 'Parallel',
    trainingContainer: job.metadata.annotations?.[ANNOTATION.container] ?? FRAMEWORK_CONTAINER[kind],
  };
}

function replicaRoles(kind: 'PyTorchJob' | 'TFJob', spec: Record<string, unknown>): SimulatedRole[] {
  const { field, roles } = ROLE_SPECS[kind];
  const replicaSpecs = spec[field];
  if (!isRecord(replicaSpecs)) throw new ValidationError(`/spec/${field}`, 'missing replica specs');
  for (const key of Object.keys(replicaSpecs)) {
    if (!(roles as string[]).includes(key)) {
      throw new ValidationError(
        `/spec/${field}/${key}`,
        `unknown replica type (expected ${roles.join(', ')})`,
      );
    }
  }
  const result: SimulatedRole[] = [];
  for (const role of roles) {
    const replicaSpec = replicaSpecs[role];
    if (replicaSpec === undefined) continue;
    const path = `/spec/${field}/${role}`;
    if (!isRecord(replicaSpec)) throw new ValidationError(path, 'must be an object');
    const replicas = replicaSpec.replicas ?? 1;
    result.push({
      role,
      replicas: checkReplicas(replicas, `${path}/replicas`),
      trains: role === 'Worker' || role === 'Master' || role === 'Chief',
      gatesProgress: role !== 'Evaluator',
      ...checkedTemplate(replicaSpec.template, `${path}/template`),
    });
  }
  return result;
}

function statefulSetRole(spec: Record<string, unknown>): SimulatedRole {
  return {
    role: 'Worker',
    replicas: checkReplicas(spec.replicas ?? 1, '/spec/replicas'),
    trains: true,
    gatesProgress: true,
    ...checkedTemplate(spec.template, '/spec/template'),
  };
}

function checkReplicas(value: unknown, path: string): number {
  if (!Number.isInteger(value) || (value as number) < 0) {
    throw new ValidationError(path, `replicas must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
  return value as number;
}

function checkedTemplate(
  value: unknown,
  path: string,
): { template: V1PodTemplateSpec; revision: string; templatePath: string } {
  if (!isRecord(value) || !isRecord(value.spec))
    throw new ValidationError(`${path}/spec`, 'missing pod template');
  const containers = value.spec.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    throw new ValidationError(`${path}/spec/containers`, 'at least one container is required');
  }
  containers.forEach((container: unknown, i) => {
    const containerPath = `${path}/spec/containers/${i}`;
    if (!isRecord(container) || typeof container.name !== 'string') {
      throw new ValidationError(`${containerPath}/name`, 'container needs a name');
    }
    checkContainerResources(container, containerPath);
  });
  return { template: value as V1PodTemplateSpec, revision: stableStringify(value), templatePath: path };
}

function checkContainerResources(container: Record<string, unknown>, path: string): void {
  const resources = container.resources;
  if (resources === undefined) return;
  if (!isRecord(resources)) throw new ValidationError(`${path}/resources`, 'must be an object');
  for (const field of ['requests', 'limits'] as const) {
    const values = resources[field];
    if (values === undefined) continue;
    if (!isRecord(values)) throw new ValidationError(`${path}/resources/${field}`, 'must be an object');
    for (const [name, quantity] of Object.entries(values)) {
      if (!isValidQuantity(quantity)) {
        throw new ValidationError(
          `${path}/resources/${field}/${name.replace('/', '~1')}`,
          `invalid quantity ${JSON.stringify(quantity)}`,
        );
      }
    }
  }
  // The API server rejects pods whose request exceeds their limit; the operator could not create them.
  const requests = isRecord(resources.requests) ? resources.requests : {};
  const limits = isRecord(resources.limits) ? resources.limits : {};
  for (const [name, limit] of Object.entries(limits)) {
    const request = requests[name];
    if (request === undefined) continue;
    if ((parseQuantity(request) ?? 0) > (parseQuantity(limit) ?? Number.POSITIVE_INFINITY)) {
      throw new ValidationError(
        `${path}/resources/requests/${name.replace('/', '~1')}`,
        `request ${String(request)} exceeds limit ${String(limit)} (pods could not be created)`,
      );
    }
  }
}

/** Pod sizing from its containers; requests default to limits as the API server defaults them. */
export function podSizing(containers: V1Container[], trainingContainer: string | undefined): PodSizing {
  const requests: Resources = { cpuMillis: 0, memoryBytes: 0, gpus: 0 };
  for (const container of containers) {
    const r = containerSizing(container);
    requests.cpuMillis += r.requests.cpuMillis;
    requests.memoryBytes += r.requests.memoryBytes;
    requests.gpus += r.requests.gpus;
  }
  const training = containers.find((c) => c.name === trainingContainer) ?? containers[0];
  return { requests, limits: training ? containerSizing(training).limits : {} };
}

function containerSizing(container: V1Container): PodSizing {
  const requests = container.resources?.requests ?? {};
  const limits = container.resources?.limits ?? {};
  const pick = (name: string) => requests[name] ?? limits[name];
  const limitCpu = cpuQuantityToMillis(limits.cpu);
  const limitMemory = memoryQuantityToBytes(limits.memory);
  const limitGpus = parseQuantity(limits[GPU_RESOURCE]);
  return {
    requests: {
      cpuMillis: cpuQuantityToMillis(pick('cpu')) ?? 0,
      memoryBytes: memoryQuantityToBytes(pick('memory')) ?? 0,
      gpus: parseQuantity(pick(GPU_RESOURCE)) ?? 0,
    },
    limits: {
      ...(limitCpu !== undefined ? { cpuMillis: limitCpu } : {}),
      ...(limitMemory !== undefined ? { memoryBytes: limitMemory } : {}),
      ...(limitGpus !== undefined ? { gpus: limitGpus } : {}),
    },
  };
}

/** JSON with sorted keys, so that equal templates compare equal whatever order patches left keys in. */
export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableStringify(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
