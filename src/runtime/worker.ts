import type { StorageFaultEvent } from './api.ts';
import { backoffMs, isRetryableFault } from './backoff.ts';
import type { Runtime } from './runtime.ts';

/** The worker's pause after a retryable storage fault: 100 ms, doubling, at most 5 s, for as long as the fault lasts. */
export const FAULT_BACKOFF = { firstMs: 100, maxMs: 5000 } as const;

export interface WorkerOptions {
  /** How often to look for work other processes left (events, timers, activities), in ms. Default 250. */
  pollMs?: number;
  /** Stop the loop. */
  signal?: AbortSignal;
  /** Called after each round that did something. */
  onRound?: (round: { processed: number; timersFired: number; activitiesStarted: number }) => void;
  /** Called for each retryable storage fault the loop rides out (also told as a `storage.fault` runtime event). */
  onFault?: (fault: StorageFaultEvent) => void;
}

/**
 * The worker loop: apply pending events, fire due timers, run due activities, then sleep until
 * the next deadline or the poll interval, until `signal` aborts. The runtime's clock decides
 * what is due; the sleep itself is real time (this is the process that waits so tests don't).
 *
 * Work this runtime's own commits create never waits for a poll: a new activity is claimed by
 * the commit that asks for it and runs at once, a self-sent event is applied after its commit,
 * and a timer or retry scheduled here wakes the loop when it is due (`timers.scheduled`). The
 * poll is the fallback for work other processes leave; a store that tells of other processes'
 * commits (`watchChanges`: Postgres's LISTEN/NOTIFY) wakes the loop at once for those.
 *
 * Storage faults: a retryable one (the disk is full, an I/O error, a busy database, a commit whose
 * outcome could not be read back) is ridden out: one `storage.fault` runtime event (and a log
 * warning) per fault, a pause of {@link FAULT_BACKOFF} (doubling while it lasts), then the next
 * round; the loop never exits and no job is quarantined for it. Anything else (a damaged file,
 * `DatabaseDamagedError`; a read-only one, `StorageAccessError`) stops the loop with that error.
 *
 * @example
 * const controller = new AbortController();
 * process.on('SIGTERM', () => controller.abort());
 * await runWorker(runtime, { signal: controller.signal });
 * await runtime.close();
 */
export async function runWorker(runtime: Runtime, options: WorkerOptions = {}): Promise<void> {
  const pollMs = Math.max(10, options.pollMs ?? 250);
  const signal = options.signal;
  const alarm = new WakeAlarm(() => runtime.clock.now(), signal);
  const unsubscribe = runtime.subscribe((event) => {
    if (event.type === 'timers.scheduled') for (const at of event.dueAt) alarm.wakeAt(at);
  });
  // Another process committed (an event, a job, a freed lease): look now, not at the next poll.
  const unwatch = runtime.store.watchChanges?.(() => alarm.wakeAt(runtime.clock.now()), 'work');
  let faults = 0;
  try {
    while (!signal?.aborted) {
      let wait: number;
      try {
        wait = await round(runtime, pollMs, options);
        faults = 0;
      } catch (error) {
        if (!isRetryableFault(error) || signal?.aborted) throw error;
        faults += 1;
        wait = backoffMs(faults, FAULT_BACKOFF.firstMs, FAULT_BACKOFF.maxMs);
        const fault = { code: error.code, message: error.message, attempt: faults, retryInMs: wait };
        runtime.reportFault(fault);
        options.onFault?.({ type: 'storage.fault', jobId: null, ...fault });
      }
      await alarm.sleep(wait);
    }
  } finally {
    unsubscribe();
    unwatch?.();
  }
}

/** One round of the loop; returns how long to sleep after it. */
async function round(runtime: Runtime, pollMs: number, options: WorkerOptions): Promise<number> {
  const processed = await runtime.processPending();
  const { timersFired, activitiesStarted } = await runtime.tick();
  if (processed + timersFired + activitiesStarted > 0) options.onRound?.({ processed, timersFired, activitiesStarted });
  const next = await runtime.nextWakeAt();
  // A round that applied events goes again at once: one round is bounded (limits.ts), so more may wait.
  return processed > 0 ? 0 : next === null ? pollMs : Math.max(0, Math.min(pollMs, next - runtime.clock.now()));
}

/** What {@link rideOutFaults} is told. */
export interface RideOutOptions {
  /** Stop trying: the last fault is thrown. */
  signal?: AbortSignal;
  /** Called for each retryable fault ridden out, before its pause. */
  onFault?: (fault: StorageFaultEvent) => void;
}

/**
 * Open what the worker needs (a store, a runtime) through a storage fault, as the loop itself
 * rides one out: a retryable fault (the disk is full, the database is busy, the server is
 * restarting: connection refused or reset) is told to `onFault` and tried again after a pause
 * of {@link FAULT_BACKOFF}, doubling, for as long as it lasts; anything else is thrown at once.
 * `open` must be safe to call again (a failed one leaves nothing open). When `signal` aborts,
 * the last fault is thrown.
 *
 * @example
 * const store = await rideOutFaults(() => openStore(url), { signal, onFault: (f) => console.warn(f.message) });
 */
export async function rideOutFaults<T>(open: () => Promise<T>, options: RideOutOptions = {}): Promise<T> {
  const alarm = new WakeAlarm(Date.now, options.signal);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await open();
    } catch (error) {
      if (!isRetryableFault(error) || options.signal?.aborted) throw error;
      const retryInMs = backoffMs(attempt, FAULT_BACKOFF.firstMs, FAULT_BACKOFF.maxMs);
      options.onFault?.({ type: 'storage.fault', jobId: null, code: error.code, message: error.message, attempt, retryInMs });
      await alarm.sleep(retryInMs);
      if (options.signal?.aborted) throw error;
    }
  }
}

const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * The worker's sleep (real time), brought forward by {@link wakeAt}: a deadline in the runtime's
 * clock, from a timer or retry this runtime just committed. One told while the loop is awake
 * (after its round read the store's next wake-up) is kept for the next sleep. Ends on abort.
 */
class WakeAlarm {
  readonly #now: () => number;
  readonly #signal: AbortSignal | undefined;
  /** The earliest deadline told (clock time) and not yet slept towards. */
  #earliest = Infinity;
  /** While asleep: when it ends (clock time), the timer, and how to end it. */
  #until = Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #wake: (() => void) | undefined;

  constructor(now: () => number, signal?: AbortSignal) {
    this.#now = now;
    this.#signal = signal;
  }

  /** Be awake by `at` (clock time). */
  wakeAt(at: number): void {
    if (at >= this.#earliest) return;
    this.#earliest = at;
    if (this.#wake && at < this.#until) this.#arm(at);
  }

  /** Sleep `ms`, or less when something is due sooner. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.#signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(this.#timer);
        this.#signal?.removeEventListener('abort', done);
        this.#wake = undefined;
        this.#until = Infinity;
        this.#earliest = Infinity; // the round that follows reads every deadline again
        resolve();
      };
      this.#wake = done;
      this.#signal?.addEventListener('abort', done, { once: true });
      this.#arm(Math.min(this.#now() + ms, this.#earliest));
    });
  }

  #arm(at: number): void {
    clearTimeout(this.#timer);
    this.#until = at;
    // setTimeout takes at most 2^31 - 1 ms (a longer delay would fire at once).
    this.#timer = setTimeout(this.#wake!, Math.min(MAX_TIMEOUT_MS, Math.max(0, at - this.#now())));
  }
}
