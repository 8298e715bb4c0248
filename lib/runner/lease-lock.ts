// The Lease behind leader election, read and written through the API server. Updates are full replaces
// carrying the resourceVersion that was read, so the server refuses (409) a write based on a stale read.
// Every request is bounded (client abort and the API server's `timeout`): a renewal that hangs must not
// stall the election loop past the renew deadline, after which the replica steps down anyway.

import { CoordinationV1Api, type KubeConfig, type V1Lease, V1MicroTime } from '@kubernetes/client-node';
import { translateError, writeRequestOptions } from '../cluster/kubernetes-cluster-client.js';
import { NotFoundError } from '../errors.js';
import type { LeaseLock, LeaseRecord } from './leader-election.js';

const LABELS = { 'app.kubernetes.io/name': 'trainscaler', 'app.kubernetes.io/component': 'leader-election' };

function toDate(value: unknown, fallback: Date): Date {
  if (value instanceof Date) return value;
  if (typeof value === 'string') {
    const parsed = new Date(value);
    if (!Number.isNaN(parsed.getTime())) return parsed;
  }
  return fallback;
}

export function recordOf(lease: V1Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  const epoch = new Date(0);
  const record: LeaseRecord = {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: toDate(spec.acquireTime, epoch),
    renewTime: toDate(spec.renewTime, epoch),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
  if (lease.metadata?.resourceVersion) record.resourceVersion = lease.metadata.resourceVersion;
  return record;
}

export class KubernetesLeaseLock implements LeaseLock {
  readonly description: string;
  private readonly api: CoordinationV1Api;

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly name: string,
    /** Longest a Lease request may take; well under the renew deadline (10 s by default). */
    private readonly requestTimeoutMs = 4_000,
  ) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
    this.description = `lease ${namespace}/${name}`;
  }

  async get(): Promise<LeaseRecord | undefined> {
    try {
      return recordOf(
        await this.api.readNamespacedLease({ name: this.name, namespace: this.namespace }, this.bounded()),
      );
    } catch (error) {
      const translated = translateError(`get ${this.description}`, error);
      if (translated instanceof NotFoundError) return undefined;
      throw translated;
    }
  }

  async create(record: LeaseRecord): Promise<LeaseRecord> {
    try {
      return recordOf(
        await this.api.createNamespacedLease(
          { namespace: this.namespace, body: this.body(record) },
          this.bounded(),
        ),
      );
    } catch (error) {
      throw translateError(`create ${this.description}`, error);
    }
  }

  async update(record: LeaseRecord): Promise<LeaseRecord> {
    try {
      return recordOf(
        await this.api.replaceNamespacedLease(
          { name: this.name, namespace: this.namespace, body: this.body(record) },
          this.bounded(),
        ),
      );
    } catch (error) {
      throw translateError(`update ${this.description}`, error);
    }
  }

  private bounded() {
    const ms = this.requestTimeoutMs;
    return writeRequestOptions({ dryRun: false, signal: AbortSignal.timeout(ms), timeoutMs: ms });
  }

  private body(record: LeaseRecord): V1Lease {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        namespace: this.namespace,
        labels: LABELS,
        ...(record.resourceVersion !== undefined ? { resourceVersion: record.resourceVersion } : {}),
      },
      spec: {
        holderIdentity: record.holderIdentity,
        leaseDurationSeconds: record.leaseDurationSeconds,
        // MicroTime: the API server wants six fractional digits, which V1MicroTime writes.
        acquireTime: new V1MicroTime(record.acquireTime.getTime()),
        renewTime: new V1MicroTime(record.renewTime.getTime()),
        leaseTransitions: record.leaseTransitions,
      },
    };
  }
}
