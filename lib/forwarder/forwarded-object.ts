// What of a pod or job the forwarder puts on the bus: the fields the handlers read and nothing else. The bus,
// its archive and its dead-letter queue are outside the cluster and readable by whoever reads AWS; a whole
// pod carries its containers' env values (API keys, tokens), its command line, volumes and annotations, and a
// job carries its pod templates. So the object is rebuilt from an allow-list rather than stripped of a
// deny-list: a field Kubernetes adds tomorrow is not forwarded until it is added here.
//
// Read by functions/cluster-event.ts (through lib/triggers/cluster-event-payload.ts: the pod's owner from its
// owner references and job labels, lib/adapters/pod-view.ts jobOfPod; a job's success condition) and
// functions/submit.ts (kind, namespace, name). Both read everything else from the API server.

import { getArray, getPath, getString, isObject } from '../adapters/unstructured.js';
import type { WatchedObject } from '../runner/event-router.js';

/**
 * The labels that say which job and role a pod belongs to (lib/adapters/pod-view.ts); any other label is
 * the tenant's and stays in the cluster.
 */
export const FORWARDED_LABELS: readonly string[] = [
  'training.kubeflow.org/job-name',
  'training.kubeflow.org/operator-name',
  'training.kubeflow.org/replica-type',
  'training.kubeflow.org/replica-index',
  'jobset.sigs.k8s.io/jobset-name',
  'apps.kubernetes.io/pod-index',
  'batch.kubernetes.io/job-completion-index',
];

type Json = Record<string, unknown>;

/** `from`'s keys among `keys` that are set, as they are (dates stay dates: JSON.stringify writes them). */
function pick(from: unknown, keys: readonly string[]): Json {
  const out: Json = {};
  if (!isObject(from)) return out;
  for (const key of keys) if (from[key] !== undefined && from[key] !== null) out[key] = from[key];
  return out;
}

function pickEach(list: unknown[] | undefined, project: (item: Json) => Json): Json[] | undefined {
  return list?.filter(isObject).map(project);
}

function metadataOf(object: WatchedObject): WatchedObject['metadata'] {
  const labels = pick(object.metadata.labels, FORWARDED_LABELS) as Record<string, string>;
  const owners = pickEach(getArray(object, ['metadata', 'ownerReferences']), (o) =>
    pick(o, ['apiVersion', 'kind', 'name', 'uid', 'controller']),
  );
  return {
    ...(pick(object.metadata, [
      'name',
      'namespace',
      'uid',
      'creationTimestamp',
      'deletionTimestamp',
    ]) as WatchedObject['metadata']),
    ...(Object.keys(labels).length > 0 ? { labels } : {}),
    ...(owners ? { ownerReferences: owners } : {}),
  };
}

/** A condition's verdict and when, not its message (which may quote the workload). */
const conditionOf = (c: Json) => pick(c, ['type', 'status', 'reason', 'lastTransitionTime']);

/** running / waiting / terminated: reason, exit code and times; a terminated container's message is the workload's. */
function containerStateOf(state: Json): Json {
  const out: Json = {};
  if (isObject(state.running)) out.running = pick(state.running, ['startedAt']);
  if (isObject(state.waiting)) out.waiting = pick(state.waiting, ['reason']);
  if (isObject(state.terminated))
    out.terminated = pick(state.terminated, ['reason', 'exitCode', 'signal', 'startedAt', 'finishedAt']);
  return out;
}

function containerStatusOf(s: Json): Json {
  return {
    ...pick(s, ['name', 'restartCount', 'ready']),
    ...(isObject(s.state) ? { state: containerStateOf(s.state) } : {}),
    ...(isObject(s.lastState) ? { lastState: containerStateOf(s.lastState) } : {}),
  };
}

/** Requests and limits by container: what a fault (an OOM kill) is judged against. No image, command or env. */
const containerOf = (c: Json) => pick(c, ['name', 'resources']);

function podStatusOf(pod: WatchedObject): Json {
  const status = getPath(pod, ['status']);
  const conditions = pickEach(getArray(status, ['conditions']), conditionOf);
  const containers = pickEach(getArray(status, ['containerStatuses']), containerStatusOf);
  const inits = pickEach(getArray(status, ['initContainerStatuses']), containerStatusOf);
  return {
    ...pick(status, ['phase', 'reason', 'startTime']),
    ...(conditions ? { conditions } : {}),
    ...(containers ? { containerStatuses: containers } : {}),
    ...(inits ? { initContainerStatuses: inits } : {}),
  };
}

function podSpecOf(pod: WatchedObject): Json {
  const spec = getPath(pod, ['spec']);
  const containers = pickEach(getArray(spec, ['containers']), containerOf);
  const inits = pickEach(getArray(spec, ['initContainers']), containerOf);
  const nodeName = getString(spec, ['nodeName']);
  return {
    ...(nodeName ? { nodeName } : {}),
    ...(containers ? { containers } : {}),
    ...(inits ? { initContainers: inits } : {}),
  };
}

/**
 * The object as forwarded: identity, owner, the job labels, and for a pod its status (phase, reason,
 * conditions, container states) and containers' resources; for a job its conditions. Never env, envFrom,
 * commands, volumes, annotations or managedFields, and no spec of a job (its pod templates hold the env).
 */
export function forwardedObject(object: WatchedObject): WatchedObject {
  const base = { apiVersion: object.apiVersion, kind: object.kind, metadata: metadataOf(object) };
  if (object.kind === 'Pod')
    return { ...base, spec: podSpecOf(object), status: podStatusOf(object) } as WatchedObject;
  const conditions = pickEach(getArray(object, ['status', 'conditions']), conditionOf);
  return (conditions ? { ...base, status: { conditions } } : base) as WatchedObject;
}
