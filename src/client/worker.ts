/**
 * A remote activity worker (`spool worker --server`; the protocol is docs/remote-workers.md):
 * claims due attempts of its activities from a `spool serve` by long-poll, up to its concurrency,
 * runs them, heartbeats while they run, and sends each one's end with its attempt token. It has
 * no database: while the server cannot be reached it tries again with backoff, and an end it
 * could not send yet is sent once the server is back (the server applies it once). On `signal` it
 * claims no more, lets running attempts finish for `graceMs`, then gives the rest back. Fetch,
 * AbortController and timers only: it runs wherever the client does.
 *
 * @example
 * await runRemoteWorker({ url, token, activities: { charge: async ({ input }) => provider.charge(input) }, signal });
 */
import { SpoolError } from '../base/errors.ts';
import type { JsonValue } from '../ports/store.ts';
import { request, type Transport } from './transport.ts';

/** What a remote activity receives (as a local one does, without `defer`). */
export interface RemoteActivityArgs {
  input: any;
  /** Stable across retries and workers: pass it to the provider. */
  idempotencyKey: string;
  attempt: number;
  jobId: string;
  /** Aborts when the attempt is no longer this worker's (its claim was taken over, its state left) or the worker stops. */
  signal: AbortSignal;
  progress: (percent: number) => Promise<void>;
  attachAsset: (asset: { type: string; uri: string; size?: number; key?: string; meta?: JsonValue }) => Promise<void>;
}

export type RemoteActivity = (args: RemoteActivityArgs) => unknown;

/** What a worker tells as it goes (for its log). */
export type RemoteWorkerEvent =
  | { type: 'activity.started'; jobId: string; activity: string; attempt: number; token: string }
  | { type: 'activity.finished'; jobId: string; activity: string; attempt: number; outcome: string; duplicate: boolean }
  | { type: 'activity.refused'; jobId: string; activity: string; attempt: number; code: string; message: string }
  | { type: 'activity.released'; jobId: string; activity: string; attempt: number; released: boolean }
  | { type: 'server.unreachable'; message: string; retryInMs: number }
  | { type: 'server.reachable' };

/** Options of {@link runRemoteWorker}. */
export interface RemoteWorkerOptions {
  /** The server's address (`http://127.0.0.1:7420`). */
  url: string;
  /** A worker token (`spool serve --worker-token`) or the server's token. */
  token: string;
  /** The activities this worker runs, by name (an invoke's `src`). */
  activities: Readonly<Record<string, RemoteActivity>>;
  /** Attempts at once. Default 8. */
  concurrency?: number;
  /** Stop: claim no more, let running attempts finish for `graceMs`, give back the rest. */
  signal?: AbortSignal;
  /** Default 10000. */
  graceMs?: number;
  /** How long one claim waits on the server for work. Default 30000. */
  waitMs?: number;
  /** Backoff while the server cannot be reached. Default 200 ms doubling to 5000 ms. */
  backoff?: { initialMs?: number; maxMs?: number };
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  onEvent?: (event: RemoteWorkerEvent) => void;
}

/** A dispatch as the server sends it. */
interface Dispatch {
  token: string;
  jobId: string;
  machineId: string;
  activity: string;
  idempotencyKey: string;
  attempt: number;
  input: JsonValue;
  claimMs: number;
}

/** Whether an error means "try again": the server unreachable, or an answer that says so (5xx, 503 backpressure). */
function retryable(error: unknown): boolean {
  return error instanceof SpoolError && error.category === 'retryable';
}

/** A thrown value as the server's `fail` takes it (what `classify` reads of a local throw). */
function failureOf(error: unknown): Record<string, unknown> {
  const e = (error ?? {}) as { name?: unknown; message?: unknown; code?: unknown; terminal?: unknown; retryable?: unknown; retryAfterMs?: unknown };
  const name = typeof e.name === 'string' ? e.name : 'Error';
  const failure: Record<string, unknown> = { name, message: typeof e.message === 'string' ? e.message : String(error) };
  if (typeof e.code === 'string') failure['code'] = e.code;
  if (e.terminal === true || e.retryable === false || name === 'TerminalError') failure['terminal'] = true;
  if (typeof e.retryAfterMs === 'number' && Number.isInteger(e.retryAfterMs) && e.retryAfterMs >= 0) failure['retryAfterMs'] = e.retryAfterMs;
  return failure;
}

/** Run until `signal` aborts and the running attempts have ended or been given back (see the file's comment). */
export async function runRemoteWorker(options: RemoteWorkerOptions): Promise<void> {
  await new RemoteWorker(options).run();
}

class RemoteWorker {
  readonly #o: RemoteWorkerOptions;
  readonly #transport: Transport;
  readonly #running = new Map<string, { settled: Promise<void>; abort: AbortController; dispatch: Dispatch }>();
  readonly #stop = new AbortController();
  /** Aborted once the grace period ends: sends in flight give up. */
  readonly #giveUp = new AbortController();
  #delay = 0;
  #unreachable = false;

  constructor(options: RemoteWorkerOptions) {
    this.#o = options;
    this.#transport = { base: options.url.replace(/\/+$/, ''), token: options.token, fetch: options.fetch ?? ((url, init) => globalThis.fetch(url, init)) };
    if (options.signal?.aborted) this.#stop.abort();
    else options.signal?.addEventListener('abort', () => this.#stop.abort(), { once: true });
  }

  async run(): Promise<void> {
    const concurrency = this.#o.concurrency ?? 8;
    const names = Object.keys(this.#o.activities);
    while (!this.#stop.signal.aborted) {
      const free = concurrency - this.#running.size;
      if (free <= 0) {
        await Promise.race([...[...this.#running.values()].map((r) => r.settled), aborted(this.#stop.signal)]);
        continue;
      }
      let dispatches: Dispatch[];
      try {
        const body = await request(this.#transport, 'POST', '/api/workers/claim', { slots: free, activities: names, waitMs: this.#o.waitMs ?? 30_000 }, {}, this.#stop.signal);
        this.#reachable();
        dispatches = body['dispatches'] as Dispatch[];
      } catch (error) {
        if (this.#stop.signal.aborted) break;
        if (!retryable(error)) throw error;
        await this.#backoff(error, this.#stop.signal);
        continue;
      }
      for (const d of dispatches) this.#start(d);
    }
    await this.#shutdown();
  }

  /** Stopping: wait for the running attempts up to the grace period, then give back the rest. */
  async #shutdown(): Promise<void> {
    const graceMs = this.#o.graceMs ?? 10_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.all([...this.#running.values()].map((r) => r.settled)), grace]);
    clearTimeout(timer);
    const left = [...this.#running.values()];
    for (const r of left) r.abort.abort(new Error('the worker is stopping'));
    this.#giveUp.abort();
    await Promise.all(left.map((r) => r.settled));
  }

  #start(d: Dispatch): void {
    const abort = new AbortController();
    this.#tell({ type: 'activity.started', jobId: d.jobId, activity: d.activity, attempt: d.attempt, token: d.token });
    const settled = this.#attempt(d, abort).finally(() => this.#running.delete(d.token));
    this.#running.set(d.token, { settled, abort, dispatch: d });
  }

  /** Run one attempt with heartbeats, then send its end (or give it back if the worker stopped first). */
  async #attempt(d: Dispatch, abort: AbortController): Promise<void> {
    let lost: SpoolError | undefined;
    const beat = setInterval(() => {
      void request(this.#transport, 'POST', '/api/workers/heartbeat', { token: d.token }).then((answer) => {
        // The job's cancel is applied once this attempt ends: end it as a local one is aborted.
        if (answer['cancelRequested'] === true) abort.abort(new Error('job cancelled'));
      }, (error: unknown) => {
        if (retryable(error) || lost) return; // the server is away: the next beat tries again
        lost = error as SpoolError;
        abort.abort(error);
      });
    }, Math.max(200, Math.floor(d.claimMs / 3)));
    try {
      const end = await this.#run(d, abort.signal);
      if (lost) return this.#refused(d, lost);
      if (abort.signal.aborted && this.#giveUp.signal.aborted) {
        const body = await this.#send('/api/workers/release', { token: d.token }, true);
        if (body) this.#tell({ type: 'activity.released', jobId: d.jobId, activity: d.activity, attempt: d.attempt, released: body['released'] === true });
        return;
      }
      const body = end.ok ? await this.#send('/api/workers/complete', { token: d.token, output: end.value ?? null }) : await this.#send('/api/workers/fail', { token: d.token, error: failureOf(end.error) });
      if (body) this.#tell({ type: 'activity.finished', jobId: d.jobId, activity: d.activity, attempt: d.attempt, outcome: String(body['outcome']), duplicate: body['duplicate'] === true });
    } catch (error) {
      if (error instanceof SpoolError) this.#refused(d, error);
      else throw error;
    } finally {
      clearInterval(beat);
    }
  }

  async #run(d: Dispatch, signal: AbortSignal): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
    const activity = this.#o.activities[d.activity];
    // Reports wait out an outage as ends do (both are applied once: a progress never lowers, an asset's key is attached once).
    const post = async (route: string, body: Record<string, unknown>) => {
      await this.#send(route, { token: d.token, ...body });
    };
    try {
      if (activity === undefined) throw Object.assign(new Error(`This worker has no activity "${d.activity}".`), { terminal: true });
      const running = activity({
        input: structuredClone(d.input),
        idempotencyKey: d.idempotencyKey,
        attempt: d.attempt,
        jobId: d.jobId,
        signal,
        progress: (percent) => post('/api/workers/progress', { percent }),
        attachAsset: (asset) => post('/api/workers/assets', { asset }),
      });
      // Given back at the grace period's end whether or not the activity heeds its signal.
      return { ok: true, value: await Promise.race([running, aborted(signal).then(() => Promise.reject(signal.reason))]) };
    } catch (error) {
      return { ok: false, error };
    }
  }

  /**
   * Send an attempt's end until the server answers: while it cannot be reached, with backoff (the
   * server applies a resent end once). Undefined when the grace period ended first. A refusal is thrown.
   */
  async #send(route: string, body: Record<string, unknown>, duringGiveUp = false): Promise<Record<string, unknown> | undefined> {
    for (;;) {
      try {
        const answer = await request(this.#transport, 'POST', route, body, {}, duringGiveUp ? undefined : this.#giveUp.signal);
        this.#reachable();
        return answer;
      } catch (error) {
        if (this.#giveUp.signal.aborted && !duringGiveUp) return undefined;
        if (!retryable(error) || (duringGiveUp && this.#unreachable)) {
          if (retryable(error)) return undefined; // giving back to a server that is away: its claim expires instead
          throw error;
        }
        await this.#backoff(error, this.#giveUp.signal);
      }
    }
  }

  #refused(d: Dispatch, error: SpoolError): void {
    this.#tell({ type: 'activity.refused', jobId: d.jobId, activity: d.activity, attempt: d.attempt, code: error.code, message: error.message });
  }

  async #backoff(error: unknown, signal: AbortSignal): Promise<void> {
    const initial = this.#o.backoff?.initialMs ?? 200;
    this.#delay = Math.min(this.#o.backoff?.maxMs ?? 5_000, this.#delay === 0 ? initial : this.#delay * 2);
    if (!this.#unreachable) this.#tell({ type: 'server.unreachable', message: (error as Error).message, retryInMs: this.#delay });
    this.#unreachable = true;
    await sleep(this.#delay, signal);
  }

  #reachable(): void {
    this.#delay = 0;
    if (!this.#unreachable) return;
    this.#unreachable = false;
    this.#tell({ type: 'server.reachable' });
  }

  #tell(event: RemoteWorkerEvent): void {
    this.#o.onEvent?.(event);
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
