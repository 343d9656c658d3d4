/**
 * Bounded work: what keeps a runtime's intake and its activity runs within limits.
 *
 * - {@link BacklogGauge}: backpressure on `start` and `send` (`maxBacklog`). It counts events
 *   accepted but not yet applied in the store, re-read at most every {@link BACKLOG_REFRESH_MS} of
 *   the runtime's clock, plus what this runtime queued since.
 * - {@link ActivitySlots}: per-activity concurrency (`activityConcurrency`), keyed by the activity's
 *   `src` (its name in `setup({ actors })`, as stored on the effect row).
 * - The bounds on one round of work (`processPending`, `tick`, the activity scan): what a round does
 *   not take stays in the store and the next round reads it.
 *
 * Bookkeeping only, over an injected clock and an injected counter; the runtime decides when to ask.
 */
import type { Clock } from '../ports/clock.ts';
import { BackpressureError, ValidationError } from '../base/errors.ts';

/** Default `maxBacklog`: events accepted but not yet applied, store-wide, before `start`/`send` refuse. */
export const DEFAULT_MAX_BACKLOG = 100_000;
/** The backlog count is re-read from the store at most this often (runtime clock, ms). */
export const BACKLOG_REFRESH_MS = 100;
/** `retryAfterMs` when the backlog was not seen draining (nothing to estimate from). */
const DEFAULT_RETRY_AFTER_MS = 1000;
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * Bounds on one round of work: what a round does not take stays in the store for the next one.
 * Constants in use; a test may lower one to reach it cheaply, and restores it after (like an armed
 * crash point).
 */
export const ROUND_BOUNDS = {
  /** Jobs with pending events one `processPending` call drains at most; the rest waits for the next call. */
  jobsPerRound: 10_000,
  /** Due timers one `tick` fires at most; the rest stay scheduled (and due) for the next tick. */
  timersPerTick: 10_000,
  /** Rows of due activities one scan reads at most, looking past ones held by `activityConcurrency`. */
  activityScan: 1024,
};

/**
 * The store's backlog, counted cheaply: one `count` query per refresh interval (runtime clock),
 * shared by every concurrent caller, plus the events this runtime queued since. A soft limit
 * across processes: other processes' events are seen at the next refresh.
 *
 * @example
 * const gauge = new BacklogGauge(() => store.pendingBacklog(), clock, 1000);
 * await gauge.admit(true); // throws BackpressureError at 1000 pending events, else counts one more
 */
export class BacklogGauge {
  readonly limit: number;
  readonly #read: () => Promise<number>;
  readonly #clock: Clock;
  readonly #refreshMs: number;
  /** The last count read, when (clock time), and what this runtime queued since. */
  #count = 0;
  #readAt: number | null = null;
  #queued = 0;
  /** Net events applied per ms between the last two reads, when the backlog was seen shrinking. */
  #drainPerMs: number | null = null;
  #reading: Promise<void> | undefined;

  constructor(read: () => Promise<number>, clock: Clock, limit: number = DEFAULT_MAX_BACKLOG, refreshMs = BACKLOG_REFRESH_MS) {
    if (!(limit === Infinity || (Number.isSafeInteger(limit) && limit >= 1))) {
      throw new ValidationError(`maxBacklog must be a positive integer (or Infinity to turn backpressure off); got ${String(limit)}.`, { option: 'maxBacklog' });
    }
    this.limit = limit;
    this.#read = read;
    this.#clock = clock;
    this.#refreshMs = refreshMs;
  }

  /**
   * Refuse with {@link BackpressureError} when the backlog is at or over the limit (nothing is
   * written by the caller then). Otherwise, with `queue`, count one more pending event at once, so
   * that concurrent callers of this runtime cannot pass the limit together.
   */
  async admit(queue: boolean): Promise<void> {
    if (this.limit === Infinity) return;
    await this.#refresh();
    const backlog = this.#count + this.#queued;
    if (backlog >= this.limit) throw new BackpressureError(backlog, this.limit, this.#retryAfter(backlog));
    if (queue) this.#queued += 1;
  }

  /** An event this runtime queued without {@link admit} counting it (it was expected to be applied at once). */
  queued(): void {
    this.#queued += 1;
  }

  /** The backlog as last counted (read plus queued since). */
  get estimate(): number {
    return this.#count + this.#queued;
  }

  #refresh(): Promise<void> {
    const now = this.#clock.now();
    // A clock that went back (a system clock adjusted) re-reads rather than trusting an old count.
    if (this.#readAt !== null && now >= this.#readAt && now - this.#readAt < this.#refreshMs) return Promise.resolve();
    this.#reading ??= (async () => {
      try {
        const count = await this.#read();
        const at = this.#clock.now();
        if (this.#readAt !== null && at > this.#readAt) {
          const drained = this.#count + this.#queued - count;
          this.#drainPerMs = drained > 0 ? drained / (at - this.#readAt) : null;
        }
        this.#count = count;
        this.#queued = 0;
        this.#readAt = at;
      } finally {
        this.#reading = undefined;
      }
    })();
    return this.#reading;
  }

  /** How long until the backlog is under the limit at the drain rate last seen; at least one refresh interval. */
  #retryAfter(backlog: number): number {
    const estimate = this.#drainPerMs === null ? DEFAULT_RETRY_AFTER_MS : Math.ceil((backlog - this.limit + 1) / this.#drainPerMs);
    return Math.min(MAX_RETRY_AFTER_MS, Math.max(this.#refreshMs, estimate));
  }
}

/**
 * How many attempts of each limited activity this runtime runs at once (`activityConcurrency`).
 * An activity without a limit is bounded only by `maxConcurrentActivities`. A limit of 0 means this
 * runtime never runs that activity (another process does).
 *
 * @example
 * const slots = new ActivitySlots({ charge: 2 }, ['charge', 'ship']);
 * if (slots.has('charge')) { slots.take('charge'); ...; slots.release('charge'); }
 */
export class ActivitySlots {
  readonly #limits = new Map<string, number>();
  readonly #running = new Map<string, number>();
  #known: ReadonlySet<string> = new Set();

  /** `known`: every activity name the registered machines invoke; a limit for another name is a typo. */
  constructor(limits: Record<string, number> | undefined, known: Iterable<string>) {
    if (limits === undefined) return;
    if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
      throw new ValidationError('activityConcurrency must be an object: { <activity name>: <how many at once> }.', { option: 'activityConcurrency' });
    }
    const names = new Set(known);
    this.#known = names;
    for (const [src, limit] of Object.entries(limits)) {
      if (!Number.isSafeInteger(limit) || limit < 0) {
        throw new ValidationError(`activityConcurrency.${src} must be a whole number of attempts at once (0 or more); got ${String(limit)}.`, { option: 'activityConcurrency', src });
      }
      if (!names.has(src)) {
        throw new ValidationError(
          `activityConcurrency names "${src}", which no registered machine has in setup({ actors }); known: ${[...names].sort().join(', ') || '(none)'}.`,
          { option: 'activityConcurrency', src },
        );
      }
      this.#limits.set(src, limit);
    }
  }

  /** True when every activity is limited to 0 here (`spool serve --run-timers`: remote workers run them): nothing to claim. */
  closed(): boolean {
    if (this.#known.size === 0) return false;
    for (const src of this.#known) if (this.#limits.get(src) !== 0) return false;
    return true;
  }

  /** False when `src` is limited to 0 here: another process (a remote worker) runs it, never this runtime. */
  runsHere(src: string): boolean {
    return this.#limits.get(src) !== 0;
  }

  /** True when one more attempt of `src` may start now. */
  has(src: string): boolean {
    const limit = this.#limits.get(src);
    return limit === undefined || (this.#running.get(src) ?? 0) < limit;
  }

  /** How many more attempts of each limited src may start now (`DueClaim.budgets`). */
  remaining(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [src, limit] of this.#limits) out[src] = Math.max(0, limit - (this.#running.get(src) ?? 0));
    return out;
  }

  take(src: string): void {
    if (this.#limits.has(src)) this.#running.set(src, (this.#running.get(src) ?? 0) + 1);
  }

  release(src: string): void {
    const n = this.#running.get(src);
    if (n === undefined) return;
    if (n <= 1) this.#running.delete(src);
    else this.#running.set(src, n - 1);
  }
}

/** The next, wider window of an activity scan whose rows were held by their limits, or undefined at the bound. */
export function widerScan(window: number): number | undefined {
  return window >= ROUND_BOUNDS.activityScan ? undefined : Math.min(ROUND_BOUNDS.activityScan, window * 4);
}
