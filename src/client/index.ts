/**
 * `spool/client`: a typed client of `spool serve`'s HTTP API, for Node and browsers (fetch,
 * streams, AbortController and TextDecoder only). It is typed by the same machines as the runtime
 * (`createClient<typeof machines>`), so a wrong machine id, input or event does not compile; a
 * refusal is thrown as the same error class, with the same code, as the runtime throws in process.
 *
 * @example
 * import { createClient } from 'spool/client';
 * const spool = createClient<typeof machines>({ url: 'http://127.0.0.1:7420', token });
 * const job = await spool.start('job-lifecycle', { name: 'resize' });
 * const jobs = await spool.startMany('job-lifecycle', [{ input: { name: 'a' } }, { input: { name: 'b' }, jobId: 'b-1' }]);
 * await spool.send(job.id, { type: 'START' });
 * const done = await spool.waitFor(job.id, (j) => j.final);
 * for await (const row of spool.tail(job.id)) console.log(row.revision, row.outcome);
 */
import { EventFailedError, JobTerminalError, WaitTimeoutError } from '../base/errors.ts';
import type { FeedRecord, JobStatus, TransitionOutcome, TransitionRecord } from '../ports/store.ts';
import type { Job, JobOf, ListFilter, SendOptions, SendResultOf, StartManyItem, StartOptions, StartOrSendOptions, StartOrSendResult } from '../runtime/api.ts';
import type { WaitOptions } from '../runtime/intake.ts';
import type { CatalogOf, JobId, MachineCatalog, MachineIds, StartArgs } from '../runtime/machineTypes.ts';
import { authHeaders, request, type Transport } from './transport.ts';
import { EventStream, type ReconnectOptions } from './sse.ts';

export { RemoteError } from './errors.ts';
// The error classes, so a browser app catches them without importing the runtime (`spool`): the same classes.
export * from '../base/errors.ts';
export * from '../base/httpErrors.ts';
export { EventStream, SseParser, type ReconnectOptions, type SseMessage } from './sse.ts';
export { runRemoteWorker, type RemoteWorkerOptions, type RemoteActivity, type RemoteActivityArgs, type RemoteWorkerEvent } from './worker.ts';

/** Options of {@link createClient}. */
export interface ClientOptions {
  /** The server's address, as `spool serve` prints it (`http://127.0.0.1:7420`). */
  url: string;
  /** The server's bearer token (writes need it; reads too on a server beyond loopback). */
  token?: string;
  /** The fetch to use. Default: the global one. */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** How event streams reconnect. */
  reconnect?: ReconnectOptions;
}

/** A row of a job's stream: a history row, `final` on the job's last one (with the job's `status`). */
export type JobStreamEvent = TransitionRecord & { final: boolean; status?: JobStatus };

/** What {@link SpoolClient.tail} takes. */
export interface TailOptions {
  /** Resume after this revision (0, the default: the whole history). */
  after?: number;
}

/** What {@link SpoolClient.tailAll} takes: the all-jobs stream's filters and where to start. */
export interface TailAllOptions {
  machine?: string;
  job?: string;
  kind?: readonly TransitionOutcome[];
  /** Resume after this global sequence number (0, the default: every job's whole history). */
  after?: number;
}

/**
 * The client: the runtime's calls over HTTP, typed by the catalog `C` of the machines (see
 * `createClient`). Jobs come back as the server shows them (sensitive fields redacted).
 */
export interface SpoolClient<C extends MachineCatalog> {
  /** Start a job (`POST /api/machines/:machine/jobs`). A repeat with the same `jobId` or `idempotencyKey` and input returns the same job. */
  start<K extends MachineIds<C>>(machineId: K, ...args: StartArgs<C[K]['input'], StartOptions>): Promise<JobOf<C, K>>;
  /**
   * Start many jobs of `machineId` in one commit (`POST /api/machines/:machine/jobs/batch`), as
   * the runtime's `startMany`: each item is a job's `input` and `start`'s options, each job comes
   * back in order. Every item is checked before anything is written: a refusal names the item
   * (`details.item`) and starts none. At most 1000 items, and within the server's body limit.
   */
  startMany<K extends MachineIds<C>>(machineId: K, items: readonly StartManyItem<C[K]['input']>[]): Promise<JobOf<C, K>[]>;
  /** Send an event (`POST /api/jobs/:id/events`); `eventId` makes a repeat return the first outcome. */
  send<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>, event: C[K]['event'], options?: SendOptions): Promise<SendResultOf<C, K>>;
  /** Create job `jobId` with `event` in its inbox, or send `event` to it if it exists. */
  startOrSend<K extends MachineIds<C>>(machineId: K, jobId: string, input: C[K]['input'], event: C[K]['event'], options?: StartOrSendOptions): Promise<StartOrSendResult>;
  get<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>): Promise<JobOf<C, K>>;
  /** A page of jobs (`limit`, default 100; pass the last id as `afterId` for the next). */
  list<K extends MachineIds<C> = MachineIds<C>>(filter?: ListFilter<K>): Promise<JobOf<C, K>[]>;
  /** Request cancellation; the job is cancelled once its machine reaches its cancelled state. */
  cancel(jobId: string, reason?: string): Promise<Job>;
  /**
   * Resolve with the job once `predicate` holds: checked now and after each commit the job's
   * stream brings (no polling). Rejects with `JobTerminalError` if the job finishes without it,
   * `WaitTimeoutError` after `timeoutMs`, or the signal's reason when aborted.
   */
  waitFor<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>, predicate: (job: JobOf<C, K>) => boolean, options?: WaitOptions): Promise<JobOf<C, K>>;
  /** A job's history, then each new commit, ending after its final one; resumed across reconnects. */
  tail(jobId: string, options?: TailOptions): EventStream<JobStreamEvent>;
  /** Every job's commits in commit order (filtered), without end; resumed across reconnects. */
  tailAll(options?: TailAllOptions): EventStream<FeedRecord>;
}

/**
 * A client of the server at `url`. `TMachines` is the type of the machines the server runs (as
 * given to `createRuntime`): `createClient<typeof machines>(...)`; without it, the untyped API.
 */
export function createClient<TMachines = never>(options: ClientOptions): SpoolClient<CatalogOf<TMachines>> {
  return new HttpClient(options) as unknown as SpoolClient<CatalogOf<TMachines>>;
}

/** The untyped implementation; {@link SpoolClient} is its typed face. */
class HttpClient {
  readonly #base: string;
  readonly #options: ClientOptions;
  readonly #fetch: (url: string, init: RequestInit) => Promise<Response>;
  readonly #transport: Transport;

  constructor(options: ClientOptions) {
    this.#options = options;
    this.#base = options.url.replace(/\/+$/, '');
    this.#fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
    this.#transport = { base: this.#base, token: options.token, fetch: this.#fetch };
  }

  async start(machineId: string, input: unknown = {}, options: StartOptions = {}): Promise<Job> {
    const body = await this.#call('POST', `/api/machines/${encodeURIComponent(machineId)}/jobs`, { input, ...options });
    return body.job as Job;
  }

  async startMany(machineId: string, items: readonly StartManyItem[]): Promise<Job[]> {
    const body = await this.#call('POST', `/api/machines/${encodeURIComponent(machineId)}/jobs/batch`, { items });
    return (body.items as { job: Job }[]).map((item) => item.job);
  }

  async send(jobId: string, event: unknown, options: SendOptions = {}): Promise<unknown> {
    const query = options.wait === false ? '?wait=false' : '';
    const headers = options.eventId !== undefined ? { 'idempotency-key': options.eventId } : {};
    return outcomeOf(this.#call('POST', `/api/jobs/${encodeURIComponent(jobId)}/events${query}`, event, headers));
  }

  async startOrSend(machineId: string, jobId: string, input: unknown, event: unknown, options: StartOrSendOptions = {}): Promise<unknown> {
    const route = `/api/machines/${encodeURIComponent(machineId)}/jobs/${encodeURIComponent(jobId)}/events`;
    return outcomeOf(this.#call('POST', route, { input, event, ...(options.eventId !== undefined ? { eventId: options.eventId } : {}) }));
  }

  async get(jobId: string): Promise<Job> {
    return (await this.#call('GET', `/api/jobs/${encodeURIComponent(jobId)}`)).job as Job;
  }

  async list(filter: ListFilter = {}): Promise<Job[]> {
    const { machineId, afterId, ...rest } = filter;
    const params = { ...rest, ...(machineId !== undefined ? { machine: machineId } : {}), ...(afterId !== undefined ? { after: afterId } : {}) };
    return (await this.#call('GET', `/api/jobs${query(params)}`)).jobs as Job[];
  }

  async cancel(jobId: string, reason?: string): Promise<Job> {
    return (await this.#call('POST', `/api/jobs/${encodeURIComponent(jobId)}/cancel`, reason !== undefined ? { reason } : {})).job as Job;
  }

  async waitFor(jobId: string, predicate: (job: Job) => boolean, options: WaitOptions = {}): Promise<Job> {
    options.signal?.throwIfAborted();
    let job = await this.get(jobId);
    if (predicate(job)) return job;
    options.signal?.throwIfAborted();
    const stream = this.tail(jobId, { after: job.revision });
    let timedOut = false;
    const stop = () => stream.close();
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), stop()), options.timeoutMs);
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const row of stream) {
        if (row.revision <= job.revision) continue; // the job read already includes it
        job = await this.get(jobId);
        if (predicate(job)) return job;
      }
      options.signal?.throwIfAborted();
      if (timedOut) throw new WaitTimeoutError(`Job ${jobId} did not satisfy the predicate within ${options.timeoutMs} ms (it is at revision ${job.revision}, ${job.status}).`, { jobId });
      job = await this.get(jobId);
      if (predicate(job)) return job;
      throw new JobTerminalError(`Job ${jobId} finished (${job.status}) without satisfying the predicate; nothing more will happen to it.`, { jobId });
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', stop);
      stream.close();
    }
  }

  tail(jobId: string, options: TailOptions = {}): EventStream<JobStreamEvent> {
    return this.#stream(`/api/jobs/${encodeURIComponent(jobId)}/stream`, options.after ?? 0);
  }

  tailAll(options: TailAllOptions = {}): EventStream<FeedRecord> {
    const { after, kind, ...rest } = options;
    return this.#stream(`/api/stream${query({ ...rest, ...(kind !== undefined ? { kind: kind.join(',') } : {}) })}`, after ?? 0);
  }

  #stream<T>(route: string, after: number): EventStream<T> {
    return new EventStream<T>({ url: this.#base + route, fetch: this.#fetch, headers: this.#auth(), after }, this.#options.reconnect);
  }

  #auth(): Record<string, string> {
    return authHeaders(this.#transport);
  }

  /** One request; a refusal thrown as its error class (errors.ts). */
  #call(method: 'GET' | 'POST', route: string, body?: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
    return request(this.#transport, method, route, body, headers);
  }
}

/**
 * A send's outcome, as the runtime's `send` resolves with it: the server refuses a `failed` one as
 * SPOOL_EVENT_FAILED (422) carrying it, which the runtime does not throw, so neither does this.
 */
async function outcomeOf(call: Promise<Record<string, unknown>>): Promise<unknown> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof EventFailedError && error.details['outcome'] !== undefined) return error.details['outcome'];
    throw error;
  }
}

/** `?a=1&b=x` of the defined values (empty without any). */
function query(params: Record<string, string | number | boolean | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
