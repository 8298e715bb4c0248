// Pod objects shaped like the API server returns them, and the status transitions the kubelet and the
// scheduler make. Only the training container is OOM-killed and restarted; the others follow the pod.
import type {
  V1ContainerStatus,
  V1ObjectMeta,
  V1Pod,
  V1PodCondition,
  V1PodSpec,
  V1PodStatus,
  V1PodTemplateSpec,
} from '@kubernetes/client-node';
import type { JobKind, RoleName } from '../types.js';

export const KUBEFLOW_LABEL = {
  jobName: 'training.kubeflow.org/job-name',
  replicaType: 'training.kubeflow.org/replica-type',
  replicaIndex: 'training.kubeflow.org/replica-index',
  operatorName: 'training.kubeflow.org/operator-name',
  jobRole: 'training.kubeflow.org/job-role',
} as const;

export const STATEFULSET_LABEL = {
  podIndex: 'apps.kubernetes.io/pod-index',
  podName: 'statefulset.kubernetes.io/pod-name',
  revision: 'controller-revision-hash',
} as const;

export const OOM_EXIT_CODE = 137;
const SIGTERM_EXIT_CODE = 143;

export interface NewPodInput {
  job: { kind: JobKind; apiVersion: string; name: string; namespace: string; uid: string };
  role: RoleName;
  index: number;
  template: V1PodTemplateSpec;
  revisionHash: string;
  priority: number;
  uid: string;
  at: number;
}

/** `<job>-<role>-<i>` for Kubeflow jobs (role lowercase), `<name>-<i>` for StatefulSets. */
export function podName(kind: JobKind, job: string, role: RoleName, index: number): string {
  return kind === 'StatefulSet' ? `${job}-${index}` : `${job}-${role.toLowerCase()}-${index}`;
}

export function newPod(input: NewPodInput): V1Pod {
  const { job, role, index, template } = input;
  const name = podName(job.kind, job.name, role, index);
  const controllerLabels: Record<string, string> =
    job.kind === 'StatefulSet'
      ? {
          [STATEFULSET_LABEL.podIndex]: String(index),
          [STATEFULSET_LABEL.podName]: name,
          [STATEFULSET_LABEL.revision]: `${job.name}-${input.revisionHash}`,
        }
      : {
          [KUBEFLOW_LABEL.jobName]: job.name,
          [KUBEFLOW_LABEL.replicaType]: role.toLowerCase(),
          [KUBEFLOW_LABEL.replicaIndex]: String(index),
          [KUBEFLOW_LABEL.operatorName]:
            job.kind === 'PyTorchJob' ? 'pytorchjob-controller' : 'tfjob-controller',
          ...(role === 'Master' || role === 'Chief' ? { [KUBEFLOW_LABEL.jobRole]: 'master' } : {}),
        };
  const spec = structuredClone(template.spec ?? { containers: [] });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: job.namespace,
      uid: input.uid,
      creationTimestamp: new Date(input.at * 1000),
      labels: { ...template.metadata?.labels, ...controllerLabels },
      annotations: { ...template.metadata?.annotations },
      ownerReferences: [
        {
          apiVersion: job.apiVersion,
          kind: job.kind,
          name: job.name,
          uid: job.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      ...spec,
      restartPolicy: job.kind === 'StatefulSet' ? 'Always' : 'OnFailure',
      priority: input.priority,
      schedulerName: 'default-scheduler',
    },
    status: { phase: 'Pending', qosClass: qosClass(template) },
  };
}

function qosClass(template: V1PodTemplateSpec): string {
  const containers = template.spec?.containers ?? [];
  const guaranteed = containers.every((c) => {
    const requests = c.resources?.requests ?? {};
    const limits = c.resources?.limits ?? {};
    return ['cpu', 'memory'].every(
      (r) => limits[r] !== undefined && (requests[r] ?? limits[r]) === limits[r],
    );
  });
  if (guaranteed) return 'Guaranteed';
  return containers.some((c) => c.resources?.requests || c.resources?.limits) ? 'Burstable' : 'BestEffort';
}

/** The pod's status, created empty when absent (V1Pod makes every part optional). */
export function podStatus(pod: V1Pod): V1PodStatus {
  if (!pod.status) pod.status = {};
  return pod.status;
}

export function podSpec(pod: V1Pod): V1PodSpec {
  if (!pod.spec) pod.spec = { containers: [] };
  return pod.spec;
}

export function podMetadata(pod: V1Pod): V1ObjectMeta {
  if (!pod.metadata) pod.metadata = {};
  return pod.metadata;
}

function setCondition(pod: V1Pod, condition: V1PodCondition): void {
  const status = podStatus(pod);
  const others = (status.conditions ?? []).filter((c) => c.type !== condition.type);
  status.conditions = [...others, condition];
}

function date(at: number): Date {
  return new Date(at * 1000);
}

function containerStatuses(pod: V1Pod): V1ContainerStatus[] {
  const status = podStatus(pod);
  if (!status.containerStatuses) {
    status.containerStatuses = (pod.spec?.containers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? '',
      imageID: '',
      ready: false,
      started: false,
      restartCount: 0,
      state: { waiting: { reason: 'ContainerCreating' } },
    }));
  }
  return status.containerStatuses;
}

/** Whether a condition change is news (the scheduler writes an Unschedulable condition once, not every pass). */
export function markUnschedulable(pod: V1Pod, message: string, at: number): boolean {
  const current = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (current?.status === 'False' && current.message === message) return false;
  setCondition(pod, {
    type: 'PodScheduled',
    status: 'False',
    reason: 'Unschedulable',
    message,
    lastTransitionTime: date(at),
  });
  return true;
}

export function markBound(pod: V1Pod, nodeName: string, at: number): void {
  podSpec(pod).nodeName = nodeName;
  setCondition(pod, { type: 'PodScheduled', status: 'True', lastTransitionTime: date(at) });
  const status = podStatus(pod);
  status.hostIP = nodeName;
  containerStatuses(pod);
}

/** Back to an unbound Pending pod, as when a restarted pod no longer fits its node and is rescheduled. */
export function markUnbound(pod: V1Pod, trainingContainer: number): void {
  if (pod.spec) delete pod.spec.nodeName;
  const status = podStatus(pod);
  status.phase = 'Pending';
  delete status.hostIP;
  const restarts = status.containerStatuses?.[trainingContainer]?.restartCount ?? 0;
  const lastState = status.containerStatuses?.[trainingContainer]?.lastState;
  delete status.containerStatuses;
  status.conditions = (status.conditions ?? []).filter(
    (c) => c.type !== 'PodScheduled' && c.type !== 'Ready',
  );
  // Restarts belong to the pod, not the binding: keep them so backoffLimit still counts them.
  const training = containerStatuses(pod)[trainingContainer];
  if (training) {
    training.restartCount = restarts;
    if (lastState) training.lastState = lastState;
  }
}

export function markRunning(pod: V1Pod, at: number): void {
  const status = podStatus(pod);
  status.phase = 'Running';
  status.startTime ??= date(at);
  for (const c of containerStatuses(pod)) {
    c.state = { running: { startedAt: date(at) } };
    c.ready = true;
    c.started = true;
  }
  setCondition(pod, { type: 'Ready', status: 'True', lastTransitionTime: date(at) });
}

/** Returns the training container's restart count after the kill. */
export function markOomKilled(pod: V1Pod, trainingContainer: number, startedAt: number, at: number): number {
  const c = containerStatuses(pod)[trainingContainer];
  if (!c) return 0;
  c.restartCount += 1;
  c.lastState = {
    terminated: {
      reason: 'OOMKilled',
      exitCode: OOM_EXIT_CODE,
      startedAt: date(startedAt),
      finishedAt: date(at),
    },
  };
  c.state = { waiting: { reason: 'CrashLoopBackOff', message: 'back-off restarting failed container' } };
  c.ready = false;
  c.started = false;
  setCondition(pod, {
    type: 'Ready',
    status: 'False',
    reason: 'ContainersNotReady',
    lastTransitionTime: date(at),
  });
  return c.restartCount;
}

export function markRestarted(pod: V1Pod, trainingContainer: number, at: number): void {
  const c = containerStatuses(pod)[trainingContainer];
  if (!c) return;
  c.state = { running: { startedAt: date(at) } };
  c.ready = true;
  c.started = true;
  setCondition(pod, { type: 'Ready', status: 'True', lastTransitionTime: date(at) });
}

/** Preempted by the scheduler or evicted: the pod is Failed with the reason at pod level. */
export function markDisrupted(
  pod: V1Pod,
  reason: 'Preempted' | 'Evicted',
  message: string,
  at: number,
): void {
  const status = podStatus(pod);
  status.phase = 'Failed';
  status.reason = reason;
  status.message = message;
  for (const c of status.containerStatuses ?? []) {
    const startedAt = c.state?.running?.startedAt;
    c.state = {
      terminated: {
        reason: 'Error',
        exitCode: SIGTERM_EXIT_CODE,
        finishedAt: date(at),
        ...(startedAt ? { startedAt } : {}),
      },
    };
    c.ready = false;
    c.started = false;
  }
  setCondition(pod, {
    type: 'DisruptionTarget',
    status: 'True',
    reason: reason === 'Preempted' ? 'PreemptionByScheduler' : 'EvictionByEvictionAPI',
    message,
    lastTransitionTime: date(at),
  });
  setCondition(pod, { type: 'Ready', status: 'False', lastTransitionTime: date(at) });
}

export function markSucceeded(pod: V1Pod, at: number): void {
  const status = podStatus(pod);
  status.phase = 'Succeeded';
  for (const c of containerStatuses(pod)) {
    const startedAt = c.state?.running?.startedAt;
    c.state = {
      terminated: {
        reason: 'Completed',
        exitCode: 0,
        finishedAt: date(at),
        ...(startedAt ? { startedAt } : {}),
      },
    };
    c.ready = false;
    c.started = false;
  }
  setCondition(pod, { type: 'Ready', status: 'False', reason: 'PodCompleted', lastTransitionTime: date(at) });
}
