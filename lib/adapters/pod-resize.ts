// In-place resize of a running pod's CPU and memory through the `pods/resize` subresource (Kubernetes 1.33+,
// InPlacePodVerticalScaling beta). Pure: decides, from the pod as read, whether the API server and the kubelet
// would take the resize, and builds the minimal JSON Patch. The rules are the API server's own
// (k8s.io/kubernetes v1.33 pkg/apis/core/validation ValidatePodResize and pkg/registry/core/pod ResizeStrategy):
// - only cpu and memory of existing containers change; requests and limits are never removed;
// - the pod's QoS class may not change (Guaranteed stays requests == limits for cpu and memory, ...);
// - a memory limit may be lowered (or added) only when the container's memory resizePolicy is RestartContainer;
// - no pod-level resources, no static pods, no Windows pods;
// - a running container must report status.containerStatuses[].resources, which kubelets that resize do:
//   otherwise the node cannot resize ("Pod running on node without support for resize").
// And the kubelet's answer, read from the pod's conditions: PodResizePending with reason Infeasible means the
// node can never hold the new size, so the pod has to be recreated elsewhere.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { JsonPatchOp } from '../cluster/cluster-client.js';
import { jsonPointer } from './annotations.js';
import { cpuToMillis, formatCpuMillis, formatMemoryBytes, parseQuantity } from './quantity.js';

export type SizedResource = 'cpu' | 'memory';
export type SizedField = 'requests' | 'limits';

/** The new values of the changed fields only (millicores, bytes); fields absent here are left as they are. */
export type ResizeTarget = Partial<Record<SizedField, Partial<Record<SizedResource, number>>>>;

export type PodResizePlan =
  /** Nothing to write: the pod already asks for the target (or is finished, or being deleted). */
  | { action: 'none'; pod: string; why: string }
  /** Resize in place: the patch for `pods/<pod>/resize`, pinned to the pod's resourceVersion. */
  | { action: 'in-place'; pod: string; uid: string; patch: JsonPatchOp[]; restartsContainer: boolean }
  /** In place is not possible (why): the caller keeps the eviction path, or only the template changes. */
  | { action: 'fallback'; pod: string; why: string };

type Amounts = Record<SizedField, Record<SizedResource, number | undefined>>;

const FIELDS: readonly SizedField[] = ['requests', 'limits'];
const RESOURCES: readonly SizedResource[] = ['cpu', 'memory'];
const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

function read(block: Record<string, string> | undefined, resource: SizedResource): number | undefined {
  const raw = block?.[resource];
  if (raw === undefined) return undefined;
  return resource === 'cpu' ? cpuToMillis(raw) : parseQuantity(raw);
}

function amountsOf(container: V1Container): Amounts {
  const amounts = {} as Amounts;
  for (const field of FIELDS) {
    const block = container.resources?.[field] as Record<string, string> | undefined;
    amounts[field] = { cpu: read(block, 'cpu'), memory: read(block, 'memory') };
  }
  return amounts;
}

function format(resource: SizedResource, value: number): string {
  return resource === 'cpu' ? formatCpuMillis(value) : formatMemoryBytes(value);
}

/**
 * The QoS class the API server computes (pkg/apis/core/helper/qos ComputePodQOS, container-level resources):
 * BestEffort without any cpu/memory amount; Guaranteed when every container has cpu and memory limits and the
 * summed requests equal the summed limits; Burstable otherwise.
 */
export function qosClassOf(containers: readonly Amounts[]): 'Guaranteed' | 'Burstable' | 'BestEffort' {
  const sum = (field: SizedField, resource: SizedResource) =>
    containers.reduce((total, c) => total + Math.max(0, c[field][resource] ?? 0), 0);
  const any = containers.some((c) => FIELDS.some((f) => RESOURCES.some((r) => (c[f][r] ?? 0) > 0)));
  if (!any) return 'BestEffort';
  const limited = containers.every((c) => (c.limits.cpu ?? 0) > 0 && (c.limits.memory ?? 0) > 0);
  // A request left unset defaults to its limit when the pod is created, so stored pods carry both.
  const equal = RESOURCES.every((r) => sum('requests', r) === sum('limits', r));
  return limited && equal ? 'Guaranteed' : 'Burstable';
}

function condition(pod: V1Pod, type: string) {
  return pod.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** Why the node cannot resize this pod in place, if it cannot. */
function nodeRefusal(pod: V1Pod): string | undefined {
  const running = (pod.status?.containerStatuses ?? []).find((s) => s.state?.running);
  if (running && running.resources === undefined)
    return `its node${pod.spec?.nodeName ? ` ${pod.spec.nodeName}` : ''} does not report container resources (no in-place resize)`;
  const pending = condition(pod, 'PodResizePending');
  if (pending?.reason === 'Infeasible')
    return `the kubelet answered an earlier resize Infeasible${pending.message ? ` (${pending.message})` : ''}`;
  return undefined;
}

/**
 * Whether `containerName` of `pod` can be brought to `target` in place, and the patch that does it.
 * `served`: the API server serves `pods/resize` (discovery), else every resize falls back.
 */
export function planPodResize(
  pod: V1Pod,
  containerName: string,
  target: ResizeTarget,
  served: boolean,
): PodResizePlan {
  const name = pod.metadata?.name ?? '';
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed' || pod.metadata?.deletionTimestamp)
    return { action: 'none', pod: name, why: 'finished or being deleted' };
  const containers = pod.spec?.containers ?? [];
  const index = containers.findIndex((c) => c.name === containerName);
  const container = containers[index];
  if (!container) return { action: 'fallback', pod: name, why: `it has no container ${containerName}` };

  const before = amountsOf(container);
  const after: Amounts = { requests: { ...before.requests }, limits: { ...before.limits } };
  const ops: JsonPatchOp[] = [];
  const path = ['spec', 'containers', index, 'resources'];
  let createdResources = false;
  for (const field of FIELDS) {
    const changed = RESOURCES.filter((r) => {
      const to = target[field]?.[r];
      return to !== undefined && to !== before[field][r];
    });
    if (changed.length === 0) continue;
    if (!container.resources && !createdResources) {
      ops.push({ op: 'add', path: jsonPointer(path), value: {} });
      createdResources = true;
    }
    if (!container.resources?.[field])
      ops.push({ op: 'add', path: jsonPointer([...path, field]), value: {} });
    for (const r of changed) {
      const to = target[field]?.[r] as number;
      after[field][r] = to;
      ops.push({ op: 'add', path: jsonPointer([...path, field, r]), value: format(r, to) });
    }
  }
  const refusal = nodeRefusal(pod);
  if (ops.length === 0) {
    // Asked for already; the kubelet may still refuse to actuate it.
    if (refusal && condition(pod, 'PodResizePending')) return { action: 'fallback', pod: name, why: refusal };
    return { action: 'none', pod: name, why: 'already at the new size' };
  }
  if (!served) return { action: 'fallback', pod: name, why: 'the API server does not serve pods/resize' };
  const podLevel = pod.spec?.resources;
  if (podLevel && Object.keys({ ...podLevel.requests, ...podLevel.limits }).length > 0)
    return { action: 'fallback', pod: name, why: 'pods with pod-level resources cannot be resized' };
  if (pod.metadata?.annotations?.[MIRROR_POD_ANNOTATION] !== undefined)
    return { action: 'fallback', pod: name, why: 'static pods cannot be resized' };
  if (pod.spec?.os?.name === 'windows')
    return { action: 'fallback', pod: name, why: 'Windows pods cannot be resized' };
  if (refusal) return { action: 'fallback', pod: name, why: refusal };

  const memoryPolicy = container.resizePolicy?.find((p) => p.resourceName === 'memory')?.restartPolicy;
  const restartsMemory = memoryPolicy === 'RestartContainer';
  const oldLimit = before.limits.memory;
  const newLimit = after.limits.memory;
  const lowersLimit = newLimit !== undefined && (oldLimit === undefined || newLimit < oldLimit);
  if (lowersLimit && !restartsMemory)
    return {
      action: 'fallback',
      pod: name,
      why: `its memory limit ${oldLimit === undefined ? 'would be added' : 'would go down'} and the container's memory resizePolicy is not RestartContainer`,
    };

  const others = containers.filter((_, i) => i !== index).map(amountsOf);
  const initContainers = (pod.spec?.initContainers ?? []).map(amountsOf);
  const qosBefore = pod.status?.qosClass ?? qosClassOf([before, ...others, ...initContainers]);
  const qosAfter = qosClassOf([after, ...others, ...initContainers]);
  if (qosBefore !== qosAfter)
    return {
      action: 'fallback',
      pod: name,
      why: `its QoS class would change from ${qosBefore} to ${qosAfter}`,
    };

  const memoryChanges = FIELDS.some((f) => after[f].memory !== before[f].memory);
  const cpuPolicy = container.resizePolicy?.find((p) => p.resourceName === 'cpu')?.restartPolicy;
  const cpuChanges = FIELDS.some((f) => after[f].cpu !== before[f].cpu);
  const patch: JsonPatchOp[] = [];
  if (pod.metadata?.resourceVersion)
    patch.push({ op: 'replace', path: '/metadata/resourceVersion', value: pod.metadata.resourceVersion });
  patch.push(...ops);
  return {
    action: 'in-place',
    pod: name,
    uid: pod.metadata?.uid ?? '',
    patch,
    restartsContainer: (memoryChanges && restartsMemory) || (cpuChanges && cpuPolicy === 'RestartContainer'),
  };
}
