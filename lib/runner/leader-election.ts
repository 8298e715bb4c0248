// Leader election on a coordination.k8s.io Lease, the protocol client-go's leaderelection package uses, so
// that of the runner's replicas exactly one acts:
// - every write to the Lease is guarded by its resourceVersion, so of two replicas racing for it one gets a
//   409 and stays a follower;
// - a follower judges expiry by its own clock from the moment it last saw the Lease change (not from the
//   renewTime written by another machine's clock), and takes over only leaseDuration after that; it dates
//   what it saw by when the answer ARRIVED, never by when its GET was sent;
// - the leader counts itself leader only for renewDeadline (< leaseDuration) after its last successful
//   renewal, so it has stopped acting before anyone else can have taken over (isLeader() is the fence).
//
// Why no write of a deposed leader can land after another replica acquired (admit() hands writes their lease):
//   Let L be the moment (leader's monotonic clock) the last successful renewal (its update request) was SENT.
//   A follower dates its observation of that renewal by the arrival of the answer that showed it: the server
//   read the Lease after the renewal was written, which was after L, so the arrival is no earlier than L,
//   however long the GET was held on the way (dated by the GET's sending, a GET held 10 s would make the
//   renewal look 10 s older than it is). The follower takes over no earlier than L + leaseDuration (its own
//   clock, same rate).
//   A write is admitted only while now < L + renewDeadline, and carries an AbortSignal and a time limit that
//   end at L + renewDeadline: the HTTP request is aborted then, and the API server is given the same limit
//   (its `timeout` parameter), so the longest possible request ends by L + renewDeadline. With the defaults:
//     last write ends <= L + renewDeadline (10 s) < L + leaseDuration (15 s) <= earliest takeover,
//   and the 5 s between them absorb a late abort timer, the server finishing a request it already took, and
//   clock-rate drift. A request may therefore take at most renewDeadline - (now - L) <= renewDeadline; retries
//   are new requests, each admitted (or refused) afresh.

import type { ActuatorLogger as Logger } from '../actuator.js';
import { ConflictError } from '../errors.js';
import type { WriteFence, WriteLease } from './fenced-cluster-client.js';

export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: Date;
  renewTime: Date;
  leaseTransitions: number;
  /** Set on what the server returned; an update must carry the one it read. */
  resourceVersion?: string;
}

/** Storage of one Lease. create/update throw ConflictError when someone else wrote first. */
export interface LeaseLock {
  readonly description: string;
  get(): Promise<LeaseRecord | undefined>;
  create(record: LeaseRecord): Promise<LeaseRecord>;
  update(record: LeaseRecord): Promise<LeaseRecord>;
}

export interface LeaderElectionTiming {
  /** How long a follower waits, after last seeing the Lease change, before taking it over. */
  leaseDurationMs: number;
  /** The leader steps down (and stops acting) when it could not renew for this long. */
  renewDeadlineMs: number;
  /** Renewal period of the leader and polling period of followers. */
  retryPeriodMs: number;
}

export const DEFAULT_TIMING: LeaderElectionTiming = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 5_000,
};

export interface LeaderElectorOptions {
  lock: LeaseLock;
  identity: string;
  timing?: Partial<LeaderElectionTiming>;
  /** Monotonic milliseconds (performance.now by default): immune to wall-clock steps. */
  clock?: () => number;
  /** Wall clock, only for the timestamps written into the Lease. */
  wallClock?: () => Date;
  logger?: Logger;
  onStartedLeading?: () => void | Promise<void>;
  onStoppedLeading?: () => void | Promise<void>;
  random?: () => number;
}

const SILENT: Logger = { info() {}, warn() {}, error() {} };
/** After a failed renewal the leader retries this soon, so one lost request does not cost it the lease. */
const RENEW_RETRY_MS = 1_000;

export class LeaderElector implements WriteFence {
  readonly identity: string;
  readonly description: string;
  private readonly lock: LeaseLock;
  private readonly timing: LeaderElectionTiming;
  private readonly clock: () => number;
  private readonly wallClock: () => Date;
  private readonly logger: Logger;
  private readonly random: () => number;
  private leading = false;
  /** onStartedLeading ran and onStoppedLeading has not yet: the callbacks always come in pairs. */
  private acting = false;
  private lastRenewAt = Number.NEGATIVE_INFINITY;
  private observedVersion: string | undefined;
  private observedAt = 0;
  private observedHolder = '';
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** Aborted when this leadership term ends: cancels every write admitted during it. */
  private term = new AbortController();

  constructor(private readonly options: LeaderElectorOptions) {
    this.identity = options.identity;
    this.lock = options.lock;
    this.description = options.lock.description;
    this.timing = { ...DEFAULT_TIMING, ...options.timing };
    if (this.timing.renewDeadlineMs >= this.timing.leaseDurationMs)
      throw new Error('renewDeadline must be shorter than leaseDuration, or two leaders could overlap');
    this.clock = options.clock ?? (() => performance.now());
    this.wallClock = options.wallClock ?? (() => new Date());
    this.logger = options.logger ?? SILENT;
    this.random = options.random ?? Math.random;
  }

  /** True only while the last renewal is younger than renewDeadline: checked before every write. */
  isLeader(): boolean {
    return this.leading && this.clock() - this.lastRenewAt < this.timing.renewDeadlineMs;
  }

  /**
   * The right to write now: only while leader, and only until L + renewDeadline (see the arithmetic above),
   * when the returned signal aborts. Losing or giving up the lease earlier aborts it at once.
   */
  admit(): WriteLease | undefined {
    if (!this.isLeader()) return undefined;
    // Whole milliseconds (AbortSignal.timeout wants an integer), rounded down: never past the deadline.
    const remainingMs = Math.floor(this.lastRenewAt + this.timing.renewDeadlineMs - this.clock());
    return { signal: AbortSignal.any([this.term.signal, AbortSignal.timeout(remainingMs)]), remainingMs };
  }

  private endTerm(): void {
    this.term.abort(new Error(`${this.description} lost`));
  }

  /** The holder last seen on the Lease ('' when none). */
  currentHolder(): string {
    return this.observedHolder;
  }

  start(): void {
    if (this.loop) return;
    this.stopped = false;
    this.loop = this.run();
  }

  /**
   * Stops campaigning. A leader first runs onStoppedLeading (the runner stops its informers and waits for
   * the handler in flight), then, with `release`, clears the Lease so a follower takes over at its next
   * poll instead of after leaseDuration.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    await this.loop;
    this.loop = undefined;
    if (this.leading) {
      this.leading = false;
      // The work stopping may still write (bounded by its leases' deadlines); nothing after it may.
      await this.stopActing();
      this.endTerm();
      if (options.release ?? true) await this.release();
    }
  }

  /** One campaign step; returns the delay before the next. Public so tests can step without timers. */
  async tick(): Promise<number> {
    const renewedAt = await this.tryAcquireOrRenew();
    if (renewedAt !== undefined) {
      // The renewal counts from when it was sent, never from when the answer arrived.
      this.lastRenewAt = renewedAt;
      if (!this.leading) {
        this.leading = true;
        this.term = new AbortController();
        // Acquired while stopping: stop() releases it without ever acting.
        if (this.stopped) return 0;
        this.logger.info({ lease: this.lock.description, identity: this.identity }, 'became leader');
        this.acting = true;
        await this.notify('onStartedLeading');
      }
      return this.timing.retryPeriodMs;
    }
    if (this.stopped) return 0;
    if (this.leading) {
      const lostToOther = this.observedHolder !== '' && this.observedHolder !== this.identity;
      if (lostToOther || this.clock() - this.lastRenewAt >= this.timing.renewDeadlineMs) {
        this.leading = false;
        this.endTerm();
        this.logger.warn(
          { lease: this.lock.description, identity: this.identity, holder: this.observedHolder },
          'lost leadership',
        );
        await this.stopActing();
        return this.followerDelay();
      }
      return Math.min(RENEW_RETRY_MS, this.timing.retryPeriodMs);
    }
    return this.followerDelay();
  }

  private followerDelay(): number {
    // Jitter keeps followers of a released lease from hitting the API server in lockstep.
    return this.timing.retryPeriodMs * (1 + 0.2 * this.random());
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let delay: number;
      try {
        delay = await this.tick();
      } catch (error) {
        this.logger.error({ error: String(error) }, 'leader election step failed');
        delay = this.timing.retryPeriodMs;
      }
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, delay);
      });
      this.wake = undefined;
    }
  }

  private observe(record: LeaseRecord, at: number): void {
    if (record.resourceVersion !== this.observedVersion) {
      this.observedVersion = record.resourceVersion;
      this.observedAt = at;
    }
    this.observedHolder = record.holderIdentity;
  }

  /** When the write that acquired or renewed the Lease was sent; undefined when none succeeded. */
  private async tryAcquireOrRenew(): Promise<number | undefined> {
    const durationSeconds = Math.ceil(this.timing.leaseDurationMs / 1000);
    let current: LeaseRecord | undefined;
    try {
      current = await this.lock.get();
    } catch (error) {
      this.logger.warn({ lease: this.lock.description, error: String(error) }, 'cannot read lease');
      return undefined;
    }
    // The answer's arrival: the conservative end of when the Lease was as read (see the arithmetic above).
    const now = this.clock();
    const wallNow = this.wallClock();
    if (!current) {
      return this.write('create', {
        holderIdentity: this.identity,
        leaseDurationSeconds: durationSeconds,
        acquireTime: wallNow,
        renewTime: wallNow,
        leaseTransitions: 0,
      });
    }
    this.observe(current, now);
    const mine = current.holderIdentity === this.identity;
    if (!mine && current.holderIdentity !== '') {
      // The holder's own duration decides, not ours: a replica with another setting must not steal early.
      const expiresAt = this.observedAt + current.leaseDurationSeconds * 1000;
      if (now < expiresAt) return undefined;
    }
    return this.write('update', {
      holderIdentity: this.identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: mine ? current.acquireTime : wallNow,
      renewTime: wallNow,
      leaseTransitions: mine ? current.leaseTransitions : current.leaseTransitions + 1,
      ...(current.resourceVersion !== undefined ? { resourceVersion: current.resourceVersion } : {}),
    });
  }

  /** Returns when the successful write was sent (the leader's deadline counts from it), else undefined. */
  private async write(verb: 'create' | 'update', record: LeaseRecord): Promise<number | undefined> {
    const sentAt = this.clock();
    try {
      const written = await this.lock[verb](record);
      this.observe(written, this.clock());
      return sentAt;
    } catch (error) {
      if (!(error instanceof ConflictError))
        this.logger.warn({ lease: this.lock.description, error: String(error) }, `cannot ${verb} lease`);
      return undefined;
    }
  }

  private async release(): Promise<void> {
    try {
      const current = await this.lock.get();
      if (!current || current.holderIdentity !== this.identity) return;
      const now = this.wallClock();
      // client-go's release: no holder and a 1 s duration, so any follower may take it at once.
      await this.lock.update({ ...current, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now });
      this.logger.info({ lease: this.lock.description, identity: this.identity }, 'released leadership');
    } catch (error) {
      this.logger.warn({ lease: this.lock.description, error: String(error) }, 'cannot release lease');
    }
  }

  private async stopActing(): Promise<void> {
    if (!this.acting) return;
    this.acting = false;
    await this.notify('onStoppedLeading');
  }

  private async notify(which: 'onStartedLeading' | 'onStoppedLeading'): Promise<void> {
    try {
      await this.options[which]?.();
    } catch (error) {
      this.logger.error({ error: String(error) }, `${which} failed`);
    }
  }
}
