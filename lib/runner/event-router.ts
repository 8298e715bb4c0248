// Which informer events become handler calls. The Lambda deployment gets exactly the events an operator
// routes to it; the runner sees everything its informers list and watch, including, on becoming leader, every
// object that already exists. These rules keep that from re-deciding history:
// - a pod event reviews its job for faults (coalesced per job: the handler re-reads all the job's pods);
//   pods listed at start are reviewed too, so faults that happened during a leader change are handled;
// - a job seen ADDED by the watch was submitted: initial configuration; one listed at start counts as
//   submitted only if it is recent and trainscaler never decided on it (a running job keeps its size);
// - a Job or JobSet that another object controls (a JobSet's child Jobs, a TrainJob's JobSet) is its owner's
//   part, not a job of its own: its events are the owner's business and route nowhere;
// - a job that turns Succeeded (Complete, Completed: each kind's own condition) updates its signature's profile, once: jobs already Succeeded when listed
//   at start were recorded by an earlier leader;
// - a TrainingAutoscaler created, deleted or whose spec changed (a new metadata.generation) asks for the
//   schedule tick now, which reviews every job under its new bounds, mode and actions (and writes the policy's
//   status); it coalesces with the tick. Status writes (trainscaler's own, every tick) keep the generation and
//   ask for nothing, so the tick cannot feed itself. Those listed at start are the state, not a change.

import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION } from '../adapters/annotations.js';
import { controlledByItsOwner, hasSucceeded, isSupportedKind } from '../adapters/job-adapter.js';
import { jobOfPod } from '../adapters/pod-view.js';
import { getString } from '../adapters/unstructured.js';

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchedObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    creationTimestamp?: string | Date;
    /** Bumped by the API server on a spec change (not on a status write). */
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    ownerReferences?: ReadonlyArray<{
      apiVersion?: string;
      kind?: string;
      name?: string;
      uid?: string;
      controller?: boolean;
    }>;
  };
}

export interface InformerEvent {
  type: WatchType;
  object: WatchedObject;
  /** Part of the informer's first list (the state when this replica started watching), not a change. */
  initial: boolean;
}

export interface RoutedTask {
  /** Queue key: tasks with the same key coalesce. */
  key: string;
  /** `schedule`: the schedule tick, now (key POLICY_REVIEW_KEY, the tick's own). */
  trigger: 'cluster-event' | 'submit' | 'schedule';
  payload: { type: WatchType; object: WatchedObject };
}

/** A policy change's review is the schedule tick: the runner's key for it, so that the two coalesce. */
export const POLICY_REVIEW_KEY = 'schedule';
const POLICY_KIND = 'TrainingAutoscaler';

export interface EventRouterOptions {
  /** Epoch milliseconds. */
  now?: () => number;
  /** A job listed at start is still "just submitted" when created less than this long ago. */
  submitGraceMs?: number;
  /** Whether pods of this job concern trainscaler (e.g. only StatefulSets the informer selects); all by default. */
  ownerWatched?: (kind: string, namespace: string, name: string) => boolean;
}

function createdAt(obj: WatchedObject): number {
  const raw = obj.metadata.creationTimestamp;
  if (raw === undefined) return Number.NaN;
  return raw instanceof Date ? raw.getTime() : Date.parse(raw);
}

export class EventRouter {
  private readonly now: () => number;
  private readonly submitGraceMs: number;
  private readonly ownerWatched: (kind: string, namespace: string, name: string) => boolean;
  /** Jobs whose success was already seen (or recorded): key -> uid. */
  private readonly finished = new Map<string, string>();
  /** TrainingAutoscalers seen: `namespace/name` -> uid and generation. */
  private readonly policies = new Map<string, { uid: string; generation: number }>();

  constructor(options: EventRouterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.submitGraceMs = options.submitGraceMs ?? 5 * 60_000;
    this.ownerWatched = options.ownerWatched ?? (() => true);
  }

  route(event: InformerEvent): RoutedTask[] {
    const { object } = event;
    const payload = { type: event.type, object };
    const namespace = object.metadata.namespace ?? 'default';
    if (object.kind === 'Pod') {
      // Watch objects are the API server's JSON; jobOfPod reads only metadata, which has the same shape.
      const owner = jobOfPod(object as V1Pod);
      if (!owner || !isSupportedKind(owner.kind)) return [];
      if (!this.ownerWatched(owner.kind, namespace, owner.name)) return [];
      return [{ key: `pods:${owner.kind}/${namespace}/${owner.name}`, trigger: 'cluster-event', payload }];
    }
    if (object.kind === POLICY_KIND)
      return this.policyChanged(event) ? [{ key: POLICY_REVIEW_KEY, trigger: 'schedule', payload }] : [];
    if (!isSupportedKind(object.kind)) return [];
    // A JobSet's child Jobs and a TrainJob's JobSet are their owner's (submitted, succeeded): not separate jobs.
    if (controlledByItsOwner(object)) return [];
    const key = `${object.kind}/${namespace}/${object.metadata.name}`;
    const uid = object.metadata.uid ?? '';
    if (event.type === 'DELETED') {
      this.finished.delete(key);
      return [];
    }
    if (hasSucceeded(object)) {
      // A job recreated under the same name is a new run: compare uids, not names.
      if (this.finished.get(key) === uid) return [];
      this.finished.set(key, uid);
      return event.initial ? [] : [{ key: `job:${key}`, trigger: 'cluster-event', payload }];
    }
    if (event.type !== 'ADDED') return [];
    if (event.initial && !this.recentlySubmitted(object)) return [];
    return [{ key: `submit:${key}`, trigger: 'submit', payload }];
  }

  /** Whether the event is a change of what the policy asks (not of its status, not the start's list). */
  private policyChanged(event: InformerEvent): boolean {
    const { metadata } = event.object;
    const key = `${metadata.namespace ?? 'default'}/${metadata.name}`;
    const seen = { uid: metadata.uid ?? '', generation: metadata.generation ?? 0 };
    const before = this.policies.get(key);
    if (event.type === 'DELETED') {
      this.policies.delete(key);
      return !event.initial;
    }
    this.policies.set(key, seen);
    if (event.initial) return false;
    return before === undefined || before.uid !== seen.uid || seen.generation > before.generation;
  }

  private recentlySubmitted(object: WatchedObject): boolean {
    if (getString(object, ['metadata', 'annotations', ANNOTATION.lastDecision]) !== undefined) return false;
    const age = this.now() - createdAt(object);
    return age >= 0 && age < this.submitGraceMs;
  }
}
