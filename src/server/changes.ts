/**
 * When to read the store again: a counter that moves when a job may have a new history row. This
 * runtime's own commits move it through its events; other processes' commits through the store's
 * `externalChanges()` (SQLite's `data_version`), polled while anyone waits. It carries no data:
 * streams read what changed from the durable records, so nothing is buffered here.
 */
import type { Runtime } from '../index.ts';

/** A wait on {@link ChangeSignal}: resolves when the counter moves past `seen`, or at `timeoutMs`. */
interface Waiter {
  seen: number;
  /** The one job it waits for (a job's stream); undefined: any job. */
  jobId: string | undefined;
  resolve: () => void;
}

/** Counts commits that may concern a stream; streams wait on it instead of polling the store each. */
export class ChangeSignal {
  #version = 0;
  #external: number | undefined;
  #polling = false;
  #waking = false;
  /** The jobs committed since the last wake-up; 'all' after another process's commit (which job is unknown). */
  #touched: Set<string> | 'all' = new Set();
  #timer: ReturnType<typeof setInterval> | undefined;
  readonly #waiters = new Set<Waiter>();
  readonly #unsubscribe: () => void;
  readonly #runtime: Runtime;
  readonly #pollMs: number;

  /** `pollMs`: how often to look for other processes' commits while a stream waits. */
  constructor(runtime: Runtime, pollMs: number) {
    this.#runtime = runtime;
    this.#pollMs = pollMs;
    this.#unsubscribe = runtime.subscribe((event) => {
      if (event.type === 'job.committed' || event.type === 'job.started') this.#bump(event.job.id);
    });
    // The baseline, before any stream reads: a commit after it is seen by the first poll.
    void runtime.store.externalChanges?.().then((v) => (this.#external ??= v), () => undefined);
  }

  /** The counter now: read it before reading the store, then wait with it. */
  get version(): number {
    return this.#version;
  }

  /**
   * Resolve once the counter has moved past `seen` (at once if it already has), after `timeoutMs`,
   * or when `signal` aborts. Resolves with true when it moved. With `jobId`, a commit of another
   * job of this process does not wake it (a thousand job streams cost a commit one wake-up).
   */
  wait(seen: number, timeoutMs: number, signal: AbortSignal, jobId?: string): Promise<boolean> {
    if (this.#version !== seen || signal.aborted) return Promise.resolve(this.#version !== seen);
    return new Promise((resolve) => {
      const done = (moved: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#waiters.delete(waiter);
        if (this.#waiters.size === 0) this.#stopPolling();
        resolve(moved);
      };
      const onAbort = () => done(false);
      const waiter: Waiter = { seen, jobId, resolve: () => done(true) };
      const timer = setTimeout(() => done(false), timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
      this.#startPolling();
    });
  }

  /** Count a change this process made without a commit (a remote attempt given back or ended): wake every wait. */
  notify(): void {
    this.#bump();
  }

  /** Stop listening and release every wait. */
  close(): void {
    this.#unsubscribe();
    this.#stopPolling();
    for (const w of [...this.#waiters]) w.resolve();
  }

  /**
   * Count a commit; wake the waiting streams later, once for any number of commits: this runs
   * inside the writer's commit, which must not pay for the streams open.
   */
  #bump(jobId?: string): void {
    this.#version += 1;
    if (jobId === undefined) this.#touched = 'all';
    else if (this.#touched !== 'all') this.#touched.add(jobId);
    if (this.#waking) return;
    this.#waking = true;
    setImmediate(() => {
      this.#waking = false;
      const touched = this.#touched;
      this.#touched = new Set();
      for (const w of [...this.#waiters]) {
        if (w.seen !== this.#version && (touched === 'all' || w.jobId === undefined || touched.has(w.jobId))) w.resolve();
      }
    });
  }

  #startPolling(): void {
    const store = this.#runtime.store;
    if (this.#timer || !store.externalChanges) return;
    this.#timer = setInterval(() => void this.#poll(), this.#pollMs);
  }

  #stopPolling(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      const now = await this.#runtime.store.externalChanges!();
      if (this.#external !== undefined && now !== this.#external) this.#bump();
      this.#external = now;
    } catch {
      // A closed store: the server is shutting down, and its streams with it.
    } finally {
      this.#polling = false;
    }
  }
}
