import { ConflictError } from '../../../lib/errors.js';
import type { LeaseLock, LeaseRecord } from '../../../lib/runner/leader-election.js';

/** A Lease with the API server's optimistic concurrency: writes must carry the current resourceVersion. */
export class MemoryLease implements LeaseLock {
  readonly description = 'lease test/trainscaler-leader';
  record: LeaseRecord | undefined;
  private version = 0;
  failReads = false;

  async get() {
    await Promise.resolve();
    if (this.failReads) throw new Error('connection refused');
    return this.record ? { ...this.record } : undefined;
  }
  async create(record: LeaseRecord) {
    await Promise.resolve();
    if (this.record) throw new ConflictError('create lease');
    return this.store(record);
  }
  async update(record: LeaseRecord) {
    await Promise.resolve();
    if (!this.record || record.resourceVersion !== this.record.resourceVersion)
      throw new ConflictError('update');
    return this.store(record);
  }
  private store(record: LeaseRecord) {
    this.version += 1;
    this.record = { ...record, resourceVersion: String(this.version) };
    return { ...this.record };
  }
}
