// Which watch events the event forwarder puts on the EventBridge bus. The Lambda functions act on few facts
// (a pod OOM-killed, evicted, preempted, failed or unschedulable; a job submitted or succeeded), while a
// cluster's pods change all the time (status, labels, heartbeats): everything else stays in the cluster.
// Each fact has a fingerprint, remembered per object uid (lib/forwarder/ledger.ts), so that the many updates
// of one pod after its OOM kill, or the forwarder's own re-list after a restart, put nothing a second time.

import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION } from '../adapters/annotations.js';
import { controlledByItsOwner, isSupportedKind, successCondition } from '../adapters/job-adapter.js';
import { jobOfPod } from '../adapters/pod-view.js';
import { getArray, getString, isObject } from '../adapters/unstructured.js';
import type { InformerEvent, WatchedObject } from '../runner/event-router.js';
import { forwardedObject } from './forwarded-object.js';

/** serverless.yml routes these detail-types: the first to clusterEvent, the second to submit. */
export const EVENT_SOURCE = 'trainscaler.kubernetes';
export const DETAIL_TYPE = {
  watchEvent: 'Kubernetes Watch Event',
  jobSubmitted: 'Kubernetes Job Submitted',
} as const;
export type DetailType = (typeof DETAIL_TYPE)[keyof typeof DETAIL_TYPE];

export type ForwardReason =
  | 'OOMKilled'
  | 'Evicted'
  | 'Preempted'
  | 'Failed'
  | 'Unschedulable'
  | 'JobSubmitted'
  | 'JobSucceeded';

export interface Forward {
  detailType: DetailType;
  reason: ForwardReason;
  uid: string;
  /** Every fact the object shows, joined: a fact already in the last forwarded fingerprint is not news. */
  fingerprint: string;
  /** `Kind/namespace/name`, for logs. */
  subject: string;
  /**
   * The watch event as the handlers parse it (functions/cluster-event.ts, functions/submit.ts), its object
   * cut down to what they read (lib/forwarder/forwarded-object.ts).
   */
  detail: { type: 'ADDED' | 'MODIFIED'; object: WatchedObject };
}

export interface ClassifyContext {
  /** The fingerprint last forwarded for this object's uid, if any. */
  lastForwarded: string | undefined;
  /** Epoch milliseconds. */
  now: number;
  /**
   * A fact about an object never forwarded (and any submission) is forwarded only when it happened less than
   * this long ago: a fresh install or a lost ledger re-sends no history.
   */
  graceMs: number;
  /** Whether pods of this job concern trainscaler (e.g. only StatefulSets the informer selects); all when unset. */
  ownerWatched?: (kind: string, namespace: string, name: string) => boolean;
}

export const DEFAULT_GRACE_MS = 5 * 60_000;

/** Joins the fingerprints of the facts an object shows at once (`OOMKilled/pytorch/1+Evicted`). */
const FACT_SEPARATOR = '+';

/** Reasons the API server and kubelet give a pod disruption (condition DisruptionTarget). */
const DISRUPTION_REASONS: Record<string, ForwardReason> = {
  EvictionByEvictionAPI: 'Evicted',
  TerminationByKubelet: 'Evicted',
  DeletionByTaintManager: 'Evicted',
  PreemptionByScheduler: 'Preempted',
  PreemptionByKubeScheduler: 'Preempted',
};

interface Fact {
  reason: ForwardReason;
  fingerprint: string;
  /** When it happened (epoch ms), NaN when the object does not say. */
  at: number;
}

function timeOf(raw: unknown): number {
  if (raw instanceof Date) return raw.getTime();
  return typeof raw === 'string' ? Date.parse(raw) : Number.NaN;
}

function conditionOf(obj: unknown, type: string): Record<string, unknown> | undefined {
  const conditions = getArray(obj, ['status', 'conditions']) ?? [];
  return conditions.filter(isObject).find((c) => c.type === type);
}

/** The first container terminated by the OOM killer, now or at its last restart. */
function oomKill(pod: unknown): Fact | undefined {
  const statuses = [
    ...(getArray(pod, ['status', 'initContainerStatuses']) ?? []),
    ...(getArray(pod, ['status', 'containerStatuses']) ?? []),
  ].filter(isObject);
  for (const status of statuses) {
    for (const state of ['state', 'lastState'] as const) {
      const terminated = isObject(status[state]) ? status[state].terminated : undefined;
      if (!isObject(terminated) || terminated.reason !== 'OOMKilled') continue;
      // restartCount tells one kill from the next in a container restarted in place.
      const restarts = typeof status.restartCount === 'number' ? status.restartCount : 0;
      return {
        reason: 'OOMKilled',
        fingerprint: `OOMKilled/${String(status.name)}/${restarts}`,
        at: timeOf(terminated.finishedAt),
      };
    }
  }
  return undefined;
}

/**
 * Every fault a pod shows, most specific first (an OOM-killed pod with restartPolicy Never is also Failed; one
 * OOM-killed earlier may be evicted later): each is a fact of its own, so a new one is never hidden by an old.
 */
export function podFaults(pod: unknown): Fact[] {
  const facts: Fact[] = [];
  const oom = oomKill(pod);
  if (oom) facts.push(oom);
  const statusReason = getString(pod, ['status', 'reason']);
  const disruption = conditionOf(pod, 'DisruptionTarget');
  if (statusReason === 'Evicted' || statusReason === 'Preempted') {
    const at = timeOf(getString(pod, ['metadata', 'deletionTimestamp']));
    facts.push({ reason: statusReason, fingerprint: statusReason, at });
  } else if (disruption?.status === 'True') {
    const reason = DISRUPTION_REASONS[String(disruption.reason)] ?? 'Evicted';
    facts.push({ reason, fingerprint: reason, at: timeOf(disruption.lastTransitionTime) });
  }
  if (getString(pod, ['status', 'phase']) === 'Failed') {
    const finished = (getArray(pod, ['status', 'containerStatuses']) ?? [])
      .filter(isObject)
      .map((s) =>
        isObject(s.state) && isObject(s.state.terminated) ? timeOf(s.state.terminated.finishedAt) : NaN,
      )
      .filter(Number.isFinite);
    facts.push({
      reason: 'Failed',
      fingerprint: 'Failed',
      at: finished.length > 0 ? Math.max(...finished) : NaN,
    });
  }
  const scheduled = conditionOf(pod, 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    facts.push({
      reason: 'Unschedulable',
      fingerprint: 'Unschedulable',
      at: timeOf(scheduled.lastTransitionTime),
    });
  }
  return facts;
}

function jobFact(job: WatchedObject, type: InformerEvent['type']): Fact | undefined {
  // The kind's own success condition: Succeeded, Complete (batch/v1 Job, TrainJob) or Completed (JobSet).
  const succeeded = successCondition(job);
  if (succeeded) {
    return { reason: 'JobSucceeded', fingerprint: 'Succeeded', at: timeOf(succeeded.lastTransitionTime) };
  }
  if (type !== 'ADDED') return undefined;
  // A job trainscaler already decided on is running, not new (a re-list after a restart lists it as ADDED).
  if (getString(job, ['metadata', 'annotations', ANNOTATION.lastDecision]) !== undefined) return undefined;
  return { reason: 'JobSubmitted', fingerprint: 'Submitted', at: timeOf(job.metadata.creationTimestamp) };
}

/** An undated fact is taken as recent when seen live (it just appeared), not in the first list. */
function recent(at: number, context: ClassifyContext, live: boolean): boolean {
  if (!Number.isFinite(at)) return live;
  const age = context.now - at;
  // A clock a little ahead of ours (negative age) is still recent.
  return age < context.graceMs && age > -context.graceMs;
}

/**
 * The event to forward for a watch event, or undefined. Pure: the caller supplies what was last forwarded
 * for the object and the time.
 */
export function classify(event: InformerEvent, context: ClassifyContext): Forward | undefined {
  // A deleted object needs nothing: the handlers ignore deletions (an evicted pod shows its disruption first).
  if (event.type === 'DELETED') return undefined;
  const { object } = event;
  const namespace = object.metadata.namespace ?? 'default';
  const uid = object.metadata.uid;
  if (!uid) return undefined;
  let facts: Fact[] = [];
  if (object.kind === 'Pod') {
    const owner = jobOfPod(object as V1Pod);
    if (!owner || !isSupportedKind(owner.kind)) return undefined;
    if (context.ownerWatched && !context.ownerWatched(owner.kind, namespace, owner.name)) return undefined;
    facts = podFaults(object);
  } else if (isSupportedKind(object.kind)) {
    // A JobSet's child Jobs and a TrainJob's JobSet are their owner's parts: the owner is the job.
    if (controlledByItsOwner(object)) return undefined;
    const fact = jobFact(object, event.type);
    if (fact) facts = [fact];
  }
  // Only a fact not in what was last forwarded for this object is news (one that went away is not).
  const before = new Set(context.lastForwarded?.split(FACT_SEPARATOR) ?? []);
  const fresh = facts.filter((f) => !before.has(f.fingerprint));
  const [fact] = fresh;
  if (!fact) return undefined;
  // About an object never forwarded, only recent facts are news: after a fresh install (or a lost ledger)
  // neither the first list nor the next update of a pod with an old fault replays history. An object the
  // ledger knows has a new fact whatever its age. Submissions are only ever new.
  const needsRecency = fact.reason === 'JobSubmitted' || context.lastForwarded === undefined;
  if (needsRecency && !fresh.some((f) => recent(f.at, context, !event.initial))) return undefined;
  return {
    detailType: fact.reason === 'JobSubmitted' ? DETAIL_TYPE.jobSubmitted : DETAIL_TYPE.watchEvent,
    reason: fact.reason,
    uid,
    fingerprint: facts.map((f) => f.fingerprint).join(FACT_SEPARATOR),
    subject: `${object.kind}/${namespace}/${object.metadata.name}`,
    // What the handlers read and nothing else: never env values, annotations or managedFields.
    detail: { type: event.type, object: forwardedObject(object) },
  };
}
