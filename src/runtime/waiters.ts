/**
 * Waiters: `waitFor` calls and what wakes them. A wait is tested now, after each commit this
 * runtime makes to its job, and when another process commits to the store (a store that counts
 * those, as SQLite does with `data_version`, is polled while someone waits).
 */
import type { JobStore } from '../ports/store.ts';
import type { Job, RuntimeEvent } from './api.ts';
import { toErrorInfo, WaitTimeoutError } from '../base/errors.ts';
import type { Tell } from './events.ts';
import type { WaitOptions } from './intake.ts';

/** While `waitFor` waits: how often to look for commits of other processes. */
const WATCH_MS = 50;

/** What the waiters need of the runtime. */
export interface WaitersHost {
  store: JobStore;
  /** Host-driven mode: no interval of Spool's own; the host's `tick()` polls instead. */
  hostDriven: boolean;
  tell: Tell;
  subscribe: (listener: (event: RuntimeEvent) => void) => () => void;
  /** The job as `get` returns it. */
  get: (jobId: string) => Promise<Job>;
  closed: () => boolean;
}

/** The runtime's pending waits. */
export class Waiters {
  readonly #host: WaitersHost;
  /** Every pending wait's finish: `close` ends them. */
  readonly #waiting = new Set<(error: unknown) => void>();
  /** `waitFor` tests by job, run again when another process commits (see {@link #watchOthers}). */
  readonly #watched = new Map<string, Set<(job: Job) => void>>();
  #watchTimer: ReturnType<typeof setInterval> | undefined;
  #externalSeen: number | undefined;
  #polling = false;

  constructor(host: WaitersHost) {
    this.#host = host;
  }

  /** Resolve when the job satisfies `predicate`; arguments already checked (intake.ts). See `Runtime.waitFor`. */
  waitFor(jobId: string, predicate: (job: Job) => boolean, options: WaitOptions): Promise<Job> {
    return new Promise<Job>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = (error: unknown, job?: Job) => {
        this.#waiting.delete(finish);
        unwatch();
        unsubscribe();
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (job) resolve(job);
        else reject(error);
      };
      const test = (job: Job) => {
        try {
          if (predicate(job)) finish(undefined, job);
        } catch (error) {
          finish(error);
        }
      };
      const unsubscribe = this.#host.subscribe((event) => {
        if ((event.type === 'job.committed' || event.type === 'job.started') && event.job.id === jobId) test(event.job);
      });
      this.#waiting.add(finish);
      const onAbort = () => finish(options.signal?.reason ?? new WaitTimeoutError(`Wait for job ${jobId} aborted.`));
      options.signal?.addEventListener('abort', onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => finish(new WaitTimeoutError(`Job ${jobId} did not reach the awaited condition within ${options.timeoutMs} ms.`, { jobId })), options.timeoutMs);
      }
      // The store's change counter is read before the job: a commit of another process in
      // between is seen by the read or by the next poll.
      const unwatch = this.#watchOthers(jobId, test);
      void this.#externalVersion().then(() => this.#host.get(jobId)).then(test, (error: unknown) => finish(error));
    });
  }

  /** Whether any wait watches for other processes' commits (host-driven: `tick()` polls then). */
  get watching(): boolean {
    return this.#watched.size > 0;
  }

  /** End every pending wait with `error` (the runtime closed). */
  endAll(error: unknown): void {
    for (const finish of [...this.#waiting]) finish(error);
  }

  async #externalVersion(): Promise<void> {
    const { store } = this.#host;
    if (store.externalChanges && this.#externalSeen === undefined) this.#externalSeen = await store.externalChanges();
  }

  /**
   * Commits of other processes raise no event here: while a `waitFor` waits on a store that
   * counts them (`externalChanges`), poll that counter every {@link WATCH_MS} (host-driven: at
   * each `tick()`) and test the waited jobs again when it moves. The timer keeps the process
   * alive while someone waits, as any pending wait on a socket would. Returns the function that
   * stops watching for this test.
   */
  #watchOthers(jobId: string, test: (job: Job) => void): () => void {
    if (!this.#host.store.externalChanges) return () => undefined;
    const tests = this.#watched.get(jobId) ?? new Set();
    tests.add(test);
    this.#watched.set(jobId, tests);
    if (!this.#host.hostDriven) this.#watchTimer ??= setInterval(() => void this.poll(), WATCH_MS);
    return () => {
      tests.delete(test);
      if (tests.size === 0) this.#watched.delete(jobId);
      if (this.#watched.size === 0) {
        if (this.#watchTimer) clearInterval(this.#watchTimer);
        this.#watchTimer = undefined;
        this.#externalSeen = undefined;
      }
    };
  }

  /**
   * Test the waited jobs again if another process committed since the last look; `always`: even
   * if the counter has not moved (a host's `tick()`: a store may count a commit only some time
   * after it, as Postgres does when its NOTIFY arrives, and the host's next tick must see it).
   */
  async poll(always = false): Promise<void> {
    if (this.#polling || this.#host.closed()) return;
    this.#polling = true;
    try {
      const version = await this.#host.store.externalChanges!();
      if (version === this.#externalSeen && !always) return;
      this.#externalSeen = version;
      for (const [jobId, tests] of [...this.#watched]) {
        const job = await this.#host.get(jobId).catch(() => undefined);
        if (job) for (const test of [...tests]) test(job);
      }
    } catch (error) {
      this.#host.tell.log('warn', 'watching for other processes\' commits failed', { error: toErrorInfo(error) });
    } finally {
      this.#polling = false;
    }
  }
}
