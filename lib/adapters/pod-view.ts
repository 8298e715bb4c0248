import type { V1Container, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { JobRef, PodPhase, PodTermination, PodView, Resources, RoleName } from '../types.js';
import { cpuToMillis, parseQuantity } from './quantity.js';

const REPLICA_TYPE_LABEL = 'training.kubeflow.org/replica-type';
const REPLICA_INDEX_LABEL = 'training.kubeflow.org/replica-index';
const JOB_NAME_LABEL = 'training.kubeflow.org/job-name';
const OPERATOR_LABEL = 'training.kubeflow.org/operator-name';
const POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index';
const COMPLETION_INDEX_LABEL = 'batch.kubernetes.io/job-completion-index';
const JOBSET_NAME_LABEL = 'jobset.sigs.k8s.io/jobset-name';

const ROLE_BY_LABEL: Record<string, RoleName> = {
  worker: 'Worker',
  master: 'Master',
  ps: 'PS',
  chief: 'Chief',
  evaluator: 'Evaluator',
};

function resourcesOf(block: Record<string, string> | undefined): Resources {
  return {
    cpuMillis: block?.cpu ? cpuToMillis(block.cpu) : 0,
    memoryBytes: block?.memory ? parseQuantity(block.memory) : 0,
    gpus: block?.['nvidia.com/gpu'] ? parseQuantity(block['nvidia.com/gpu']) : 0,
  };
}

function terminationOf(status: V1ContainerStatus | undefined): PodTermination | undefined {
  const terminated = status?.state?.terminated ?? status?.lastState?.terminated;
  if (!terminated) return undefined;
  const termination: PodTermination = { reason: terminated.reason ?? 'Error', exitCode: terminated.exitCode };
  const finished = terminated.finishedAt;
  if (finished) termination.at = Math.floor(new Date(finished).getTime() / 1000);
  return termination;
}

function indexOf(pod: V1Pod): number {
  const labels = pod.metadata?.labels ?? {};
  const raw =
    labels[REPLICA_INDEX_LABEL] ??
    labels[POD_INDEX_LABEL] ??
    labels[COMPLETION_INDEX_LABEL] ??
    /-(\d+)$/.exec(pod.metadata?.name ?? '')?.[1];
  const index = Number(raw);
  return Number.isInteger(index) ? index : 0;
}

/** The pod as policies see it, reading the training container (by name, else the first one). */
export function readPod(pod: V1Pod, containerName?: string): PodView {
  const containers: V1Container[] = pod.spec?.containers ?? [];
  const container = containers.find((c) => c.name === containerName) ?? containers[0];
  const statuses = pod.status?.containerStatuses ?? [];
  const status = statuses.find((s) => s.name === container?.name) ?? statuses[0];
  const roleLabel = pod.metadata?.labels?.[REPLICA_TYPE_LABEL]?.toLowerCase();
  const view: PodView = {
    name: pod.metadata?.name ?? '',
    namespace: pod.metadata?.namespace ?? 'default',
    role: (roleLabel && ROLE_BY_LABEL[roleLabel]) || 'Worker',
    index: indexOf(pod),
    phase: (pod.status?.phase as PodPhase | undefined) ?? 'Pending',
    restartCount: status?.restartCount ?? 0,
    requests: resourcesOf(container?.resources?.requests as Record<string, string> | undefined),
    limits: resourcesOf(container?.resources?.limits as Record<string, string> | undefined),
  };
  const reported = status?.resources;
  if (reported)
    view.actual = {
      requests: resourcesOf(reported.requests as Record<string, string> | undefined),
      limits: resourcesOf(reported.limits as Record<string, string> | undefined),
    };
  if (pod.spec?.nodeName) view.nodeName = pod.spec.nodeName;
  if ((pod.spec?.schedulingGates?.length ?? 0) > 0) view.schedulingGated = true;
  const termination = terminationOf(status);
  if (termination) view.lastTermination = termination;
  if (pod.status?.reason) view.reason = pod.status.reason;
  return view;
}

/**
 * Whether the live pod really belongs to the job: same namespace, and its controller owner reference is the
 * job itself (kind, name and, when known, uid), or one of `childJobs`: the batch/v1 Jobs (by uid) through
 * which a JobSet or TrainJob runs its pods, each already verified to be controlled by the job (owner-chain.ts).
 * Labels and names are not enough: any pod in the namespace can carry `training.kubeflow.org/job-name=<job>`
 * or `jobset.sigs.k8s.io/jobset-name=<job>`, or a name starting with the job's, and a metric series can name
 * any pod at all. The training-operator, the StatefulSet and Job controllers set this owner reference.
 */
export function ownedByJob(
  pod: V1Pod,
  job: { ref: JobRef; uid: string },
  childJobs: ReadonlySet<string> = new Set(),
): boolean {
  if (pod.metadata?.namespace !== job.ref.namespace) return false;
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  if (!owner) return false;
  if (owner.kind === 'Job' && owner.apiVersion === 'batch/v1' && childJobs.has(owner.uid)) return true;
  if (owner.kind !== job.ref.kind || owner.name !== job.ref.name) return false;
  return job.uid === '' || owner.uid === job.uid;
}

/** Which job a pod belongs to, from the labels the training-operator sets or its owner reference. */
export function jobOfPod(pod: V1Pod): { kind: string; namespace: string; name: string } | undefined {
  const labels = pod.metadata?.labels ?? {};
  const namespace = pod.metadata?.namespace ?? 'default';
  const owner =
    pod.metadata?.ownerReferences?.find((o) => o.controller) ?? pod.metadata?.ownerReferences?.[0];
  // A JobSet's pods belong to its child Jobs; the JobSet's label says which (a hint: ownership is verified).
  const jobSet = labels[JOBSET_NAME_LABEL];
  if (owner?.kind === 'Job' && jobSet) return { kind: 'JobSet', namespace, name: jobSet };
  if (owner && ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job'].includes(owner.kind)) {
    return { kind: owner.kind, namespace, name: owner.name };
  }
  const jobName = labels[JOB_NAME_LABEL];
  if (jobName) {
    const operator = labels[OPERATOR_LABEL] ?? '';
    const kind = operator.startsWith('tfjob') ? 'TFJob' : 'PyTorchJob';
    return { kind, namespace, name: jobName };
  }
  if (owner) return { kind: owner.kind, namespace, name: owner.name };
  return undefined;
}
