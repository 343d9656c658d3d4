/**
 * Job leases as this runtime holds them: one runner at a time advances a job and runs its
 * activities. The heartbeat renews the leases of jobs whose activities run here and releases the
 * rest; expired leases (and those of runners known to be gone) are freed; a lease another runner
 * took stops everything this runtime does for that job.
 */
import type { Clock } from '../ports/clock.ts';
import { unref } from '../base/node.ts';
import type { JobStore, LeaseClaim } from '../ports/store.ts';
import { runnerIsGone, type AttemptAbort } from './activities.ts';
import type { Tell } from './events.ts';

/** What the lease keeper reads and updates of the runtime's state. */
export interface LeaseState {
  /** Leases this runtime holds, by job id: the fence it holds each with. */
  held: Map<string, number>;
  /** Attempts claimed here whose outcome is not recorded yet (effect id -> job id): their leases are kept. */
  attempting: ReadonlyMap<string, string>;
  /** Attempts running here, by effect id. */
  running: ReadonlyMap<string, { jobId: string; controller: Pick<AttemptAbort, 'abort'> }>;
  /** The snapshot cache, by job id: a lost job's entry is dropped. */
  cache: { delete(jobId: string): boolean };
  /** Whether the runtime has closed: the heartbeat stops. */
  closed: () => boolean;
  /** Let an idle job's lease go, under the job's lock and checked again there (a claim may have come since). */
  releaseIdle: (jobId: string) => Promise<void>;
  /** Run `work` under the job's lock, once the job's commit or claim in flight has settled and kept its fence in `held`. */
  withLock: <T>(jobId: string, work: () => Promise<T>) => Promise<T>;
}

/** Renews, releases, expires and gives up this runtime's job leases and activity claims. */
export class LeaseKeeper {
  readonly #store: JobStore;
  readonly #clock: Clock;
  readonly #runner: string;
  readonly #leaseMs: number;
  readonly #state: LeaseState;
  readonly #tell: Tell;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The clock time of the last heartbeat. */
  #lastBeatAt = -Infinity;

  constructor(store: JobStore, clock: Clock, runner: string, leaseMs: number, state: LeaseState, tell: Tell) {
    this.#store = store;
    this.#clock = clock;
    this.#runner = runner;
    this.#leaseMs = leaseMs;
    this.#state = state;
    this.#tell = tell;
  }

  /** Beat every third of the lease on an unref'd interval (never keeps the process alive); `run` tracks each beat. */
  startHeartbeat(run: (beat: Promise<void>) => void): void {
    this.#timer = setInterval(() => run(this.heartbeat()), Math.floor(this.#leaseMs / 3));
    unref(this.#timer);
  }

  /** Whether a third of the lease has passed on the clock since the last beat. */
  heartbeatDue(): boolean {
    return this.#clock.now() - this.#lastBeatAt >= this.#leaseMs / 3;
  }

  /**
   * The lease heartbeat: renew the leases of jobs whose activities run here, release the rest
   * (nothing here works on them), and stop touching any job whose lease another runner took.
   */
  async heartbeat(): Promise<void> {
    this.#lastBeatAt = this.#clock.now();
    const { held, attempting } = this.#state;
    if (this.#state.closed() || held.size === 0) return;
    const busy = new Set(attempting.values());
    const keep: [string, number][] = [];
    const idle: [string, number][] = [];
    for (const entry of held) (busy.has(entry[0]) ? keep : idle).push(entry);
    if (keep.length > 0) {
      const now = this.#clock.now();
      const renewed = await this.#store.renewLeases(this.#runner, keep.map(([id]) => id), this.until(now), now);
      // A lease not renewed at its fence is judged under its job's lock: the job's own commit in
      // flight may have let it go (executed, its result not yet kept in `held`, as when it records
      // the last outcome); once that commit has settled, `lost` sees the fence it left.
      const missed = keep.filter(([jobId, fence]) => renewed.get(jobId) !== fence);
      await Promise.all(missed.map(([jobId, fence]) => this.#state.withLock(jobId, async () => this.lost(jobId, fence))));
    }
    // Each under its job's lock, checked again there: an activity of the job claimed since `idle`
    // was taken keeps the lease (a release still in flight could otherwise run after its claim).
    await Promise.all(idle.map(([jobId]) => this.#state.releaseIdle(jobId)));
  }

  /**
   * Lease expiries, once per call: leases of runners known to be gone (a dead process on this
   * host) are freed now; leases past their expiry are freed (a held job of this runtime's that
   * expired is given up). Returns the freed jobs, whose pending events may be applied now.
   */
  async expire(): Promise<string[]> {
    const now = this.#clock.now();
    const freed: { jobId: string; owner: string; fence: number }[] = [];
    for (const owner of await this.#store.leaseHolders(now)) {
      if (owner !== this.#runner && runnerIsGone(owner)) freed.push(...(await this.#store.expireLeases({ owner })));
    }
    freed.push(...(await this.#store.expireLeases({ expiredBy: now })));
    for (const lease of freed) {
      if (lease.owner === this.#runner) this.lost(lease.jobId, lease.fence);
      this.#tell.log('info', 'lease freed', { jobId: lease.jobId, runner: lease.owner, fence: lease.fence });
      this.#tell.emit({ type: 'lease.freed', jobId: lease.jobId, runner: lease.owner, fence: lease.fence });
    }
    return [...new Set(freed.map((l) => l.jobId))];
  }

  /** This runtime no longer holds the job: forget the lease, drop the cached snapshot, abort its activities here. */
  lost(jobId: string, fence: number): void {
    if (this.#state.held.get(jobId) !== fence) return;
    this.#state.held.delete(jobId);
    this.#state.cache.delete(jobId);
    for (const running of this.#state.running.values()) {
      if (running.jobId === jobId) running.controller.abort(new Error(`lease lost: another runner holds job ${jobId}`));
    }
    this.#tell.log('warn', 'lease lost', { jobId, fence });
  }

  /** The lease a commit of this job is made under: kept while activities of the job run here (or are about to), released otherwise. */
  claimFor(jobId: string, hold: boolean, now: number): LeaseClaim {
    return { runner: this.#runner, fence: this.#state.held.get(jobId) ?? null, now, until: hold ? this.until(now) : null };
  }

  /**
   * When a lease or claim taken (or renewed) at `now` ends: `leaseMs` from now, rounded down to a
   * step of a tenth of the lease (at most a second). Commits of one job within a step write the
   * same expiry, so its row in the lease index stays put (one WAL page less per commit); the lease
   * still outlasts the next heartbeat (a third of it) many times over.
   */
  until(now: number): number {
    const step = Math.min(1000, Math.floor(this.#leaseMs / 10));
    return Math.floor((now + this.#leaseMs) / step) * step;
  }

  /** Renew the claims of this runtime's running activities (the heartbeat, done by `tick()` in host-driven mode). */
  async renewClaims(): Promise<void> {
    const now = this.#clock.now();
    const until = this.until(now);
    for (const effect of await this.#store.runningEffects(10_000)) {
      if (effect.claimedBy === this.#runner && this.#state.running.has(effect.id)) await this.#store.renewClaim(effect.id, effect.attempt, this.#runner, until, now);
    }
  }

  /** On close: stop the heartbeat and release every lease at once, so another process takes the jobs over now, not at expiry. */
  async releaseAll(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#store.releaseLeases(this.#runner, 'all').catch(() => 0);
    this.#state.held.clear();
  }
}
