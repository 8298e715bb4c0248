import type { V1Pod } from '@kubernetes/client-node';
import { isSupportedKind } from '../adapters/job-adapter.js';
import { jobOfPod } from '../adapters/pod-view.js';
import type { KubeObject } from '../cluster/cluster-client.js';
import { ValidationError } from '../errors.js';
import { matches, validate } from '../schemas/validate.js';
import type { JobRef } from '../types.js';

export type ClusterEventTrigger =
  | { subject: 'pod'; type: 'ADDED' | 'MODIFIED' | 'DELETED'; ref: JobRef; pod: V1Pod }
  | { subject: 'job'; type: 'ADDED' | 'MODIFIED' | 'DELETED'; ref: JobRef; job: KubeObject }
  | { subject: 'ignored'; why: string };

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: { kind: string; metadata: { name: string; namespace?: string } };
}

/** A Kubernetes watch event, bare or inside an EventBridge envelope, resolved to the job it concerns. */
export function parseClusterEvent(payload: unknown): ClusterEventTrigger {
  let prefix = '';
  let body = payload;
  if (matches('EventBridgeEnvelope', payload)) {
    body = (payload as { detail: unknown }).detail;
    prefix = '/detail';
  }
  const event = validate<WatchEvent>('WatchEvent', body, prefix);
  const namespace = event.object.metadata.namespace ?? 'default';
  if (event.object.kind === 'Pod') {
    const pod = event.object as V1Pod;
    const owner = jobOfPod(pod);
    if (!owner)
      return { subject: 'ignored', why: `pod ${namespace}/${event.object.metadata.name} belongs to no job` };
    if (!isSupportedKind(owner.kind))
      return { subject: 'ignored', why: `pod owner kind ${owner.kind} is not managed` };
    return { subject: 'pod', type: event.type, ref: { kind: owner.kind, namespace, name: owner.name }, pod };
  }
  if (isSupportedKind(event.object.kind)) {
    const job = event.object as KubeObject;
    return {
      subject: 'job',
      type: event.type,
      ref: { kind: event.object.kind, namespace, name: event.object.metadata.name },
      job,
    };
  }
  throw new ValidationError(`${prefix}/object/kind`, `unsupported object kind '${event.object.kind}'`);
}
