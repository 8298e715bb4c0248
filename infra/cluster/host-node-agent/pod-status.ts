// What the host node agent reports for a pod, computed from its containers' process states: the parts of a
// kubelet's status manager the training tests rely on (phase, conditions, podIP, restarts, exit codes).
import type { V1Pod } from '@kubernetes/client-node';

export interface Terminated {
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
}

/** One container's state as the agent tracks it; exactly one of running / waiting / terminated is set. */
export interface ContainerState {
  name: string;
  running?: { startedAt: string };
  waiting?: { reason: string; message?: string };
  /** Final: the container will not be started again. */
  terminated?: Terminated;
  lastTerminated?: Terminated;
  restartCount: number;
}

export type RestartPolicy = 'Always' | 'OnFailure' | 'Never';

export function restartPolicyOf(pod: V1Pod): RestartPolicy {
  const policy = pod.spec?.restartPolicy;
  return policy === 'OnFailure' || policy === 'Never' ? policy : 'Always';
}

/** Whether a container that exited with `exitCode` is started again in place (the pod's restartPolicy). */
export function restarts(policy: RestartPolicy, exitCode: number): boolean {
  return policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
}

export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_MAX_MS = 20_000;

/**
 * Delay before the n-th restart (restartCount n, from 0): doubling from 1 s up to 20 s, the kubelet's
 * CrashLoopBackOff shape (10 s .. 5 min there) shortened for a test cluster.
 */
export function restartBackoffMs(restartCount: number): number {
  return Math.min(BACKOFF_BASE_MS * 2 ** Math.max(0, restartCount), BACKOFF_MAX_MS);
}

/** Exit code and reason of a process that exited with `code` or was killed by `signal` (128 + signal). */
export function terminationOf(
  code: number | null,
  signal: number | undefined,
  startedAt: string,
  finishedAt: string,
): Terminated {
  if (signal !== undefined) return { exitCode: 128 + signal, signal, reason: 'Error', startedAt, finishedAt };
  const exitCode = code ?? 0;
  return { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt, finishedAt };
}

export type Phase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/**
 * The phase follows the regular containers; sidecars (initContainers with restartPolicy Always) only keep the
 * pod Running until they have stopped, and their exit codes do not count, as on a kubelet.
 */
export function podPhase(
  containers: readonly ContainerState[],
  sidecars: readonly ContainerState[] = [],
): Phase {
  if (containers.length === 0) return 'Pending';
  if (containers.every((c) => c.terminated)) {
    if (sidecars.some((s) => !s.terminated)) return 'Running';
    return containers.every((c) => c.terminated?.exitCode === 0) ? 'Succeeded' : 'Failed';
  }
  // A container waiting out its restart back-off has run before: the pod is still Running, as on a kubelet.
  if (containers.some((c) => c.running || c.terminated || c.restartCount > 0)) return 'Running';
  return 'Pending';
}

function condition(type: string, ok: boolean, since: string, reason?: string) {
  return { type, status: ok ? 'True' : 'False', lastTransitionTime: since, ...(reason ? { reason } : {}) };
}

function containerStatus(c: ContainerState, image: string, podUid: string) {
  const terminated = (t: Terminated) => ({
    exitCode: t.exitCode,
    ...(t.signal !== undefined ? { signal: t.signal } : {}),
    reason: t.reason,
    ...(t.message ? { message: t.message } : {}),
    startedAt: t.startedAt,
    finishedAt: t.finishedAt,
  });
  const state = c.running
    ? { running: { startedAt: c.running.startedAt } }
    : c.terminated
      ? { terminated: terminated(c.terminated) }
      : { waiting: c.waiting ?? { reason: 'ContainerCreating' } };
  return {
    name: c.name,
    image,
    imageID: '',
    containerID: `host-node-agent://${podUid}/${c.name}`,
    ready: Boolean(c.running),
    started: Boolean(c.running),
    restartCount: c.restartCount,
    state,
    lastState: c.lastTerminated ? { terminated: terminated(c.lastTerminated) } : {},
  };
}

export interface PodNetworkStatus {
  podIP?: string;
  hostIP: string;
}

/** The pod's status subresource, whole (it is written with a merge patch that replaces the lists). */
export function podStatus(
  pod: V1Pod,
  containers: readonly ContainerState[],
  network: PodNetworkStatus,
  startTime: string,
  sidecars: readonly ContainerState[] = [],
) {
  const phase = podPhase(containers, sidecars);
  const ready = phase === 'Running' && [...containers, ...sidecars].every((c) => c.running);
  const images = new Map(
    [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c) => [
      c.name,
      c.image ?? '',
    ]),
  );
  const uid = pod.metadata?.uid ?? '';
  const previous = new Map((pod.status?.conditions ?? []).map((c) => [c.type, c]));
  // A condition keeps its transition time while its status does not change.
  const since = (type: string, ok: boolean) => {
    const before = previous.get(type);
    const at = before?.lastTransitionTime;
    return before && before.status === (ok ? 'True' : 'False') && at
      ? new Date(at).toISOString()
      : new Date().toISOString();
  };
  const notReady = ready
    ? undefined
    : phase === 'Succeeded' || phase === 'Failed'
      ? 'PodCompleted'
      : 'ContainersNotReady';
  return {
    phase,
    hostIP: network.hostIP,
    hostIPs: [{ ip: network.hostIP }],
    ...(network.podIP ? { podIP: network.podIP, podIPs: [{ ip: network.podIP }] } : {}),
    startTime,
    conditions: [
      condition('PodScheduled', true, since('PodScheduled', true)),
      condition('Initialized', true, since('Initialized', true)),
      condition('ContainersReady', ready, since('ContainersReady', ready), notReady),
      condition('Ready', ready, since('Ready', ready), notReady),
    ],
    containerStatuses: containers.map((c) => containerStatus(c, images.get(c.name) ?? '', uid)),
    ...(sidecars.length > 0
      ? { initContainerStatuses: sidecars.map((c) => containerStatus(c, images.get(c.name) ?? '', uid)) }
      : {}),
  };
}

export type PodStatusBody = ReturnType<typeof podStatus>;
