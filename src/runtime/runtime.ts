import { randomUUID } from 'node:crypto';
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { systemClock, type Clock } from '../ports/clock.ts';
import type {
  ErrorInfo,
  EventStatus,
  InboxRecord,
  JobFilter,
  JobRecord,
  JobStatus,
  JobStore,
  JsonValue,
  NewInboxEvent,
  TransitionCommit,
  TransitionRecord,
} from '../ports/store.ts';
import {
  ClosedError,
  IdempotencyConflictError,
  JobNotFoundError,
  JobTerminalError,
  PayloadTooLargeError,
  RevisionConflictError,
  SpoolError,
  UnknownEventError,
  ValidationError,
  WaitTimeoutError,
  toErrorInfo,
} from './errors.ts';
import { hydrate, parseSnapshot } from './hydrate.ts';
import { hashJson, redact, statePaths, toJson } from './json.ts';
import { MachineRegistry, type JobDefinition, type RegisteredMachine } from './registry.ts';
import { crashPoint } from './crashPoints.ts';

/** Options of {@link createRuntime}. */
export interface RuntimeOptions {
  /** Where jobs live: `SqliteStore` (persistence/sqlite) or `MemoryStore` (persistence/memory). */
  store: JobStore;
  /** Job definitions or bare XState machines. */
  machines: Iterable<JobDefinition | AnyStateMachine>;
  /** Time source for every timestamp. Default: real time. */
  clock?: Clock;
  /** Tenant scope of this runtime: it sees only jobs with this owner. Default: unscoped (`null`). */
  owner?: string | null;
  /** Id generator for jobs and events. Default: `crypto.randomUUID`. */
  newId?: () => string;
  /** Largest accepted input or event, in bytes of JSON. Default: 262144 (256 KiB). */
  maxPayloadBytes?: number;
  /**
   * Whether this runtime applies events. Default `true`. A client-only runtime (`false`)
   * accepts events durably and leaves them for a processing runtime.
   */
  processEvents?: boolean;
  /** On open: quarantine or migrate jobs that need it and process accepted events. Default `true`. */
  recover?: boolean;
  /** Structured log sink, one object per lifecycle event, sensitive fields already redacted. */
  log?: (entry: LogEntry) => void;
}

/** One structured log line. */
export interface LogEntry {
  at: number;
  level: 'info' | 'warn' | 'error';
  msg: string;
  jobId?: string;
  [key: string]: unknown;
}

/** A job as the API returns it. */
export interface Job {
  id: string;
  machineId: string;
  machineVersion: string;
  revision: number;
  status: JobStatus;
  /** True once the job is in a final state (or errored): it accepts no more events. */
  final: boolean;
  value: JsonValue;
  context: JsonValue;
  input: JsonValue;
  output: JsonValue | undefined;
  quarantine: string | null;
  idempotencyKey: string | null;
  owner: string | null;
  createdAt: number;
  updatedAt: number;
}

/** What `send` resolves with: the event's outcome and the job after it. */
export interface SendResult {
  jobId: string;
  eventId: string;
  /** `applied`, `ignored` (no transition in the current state), `failed` (a guard or action threw), `pending` or `rejected`. */
  status: EventStatus;
  revision: number | null;
  error: ErrorInfo | null;
  /** True when this event id had been sent before: this is the first outcome. */
  duplicate: boolean;
  job: Job;
}

export interface StartOptions {
  /** Your own job id. Starting twice with the same id and input returns the same job. */
  jobId?: string;
  /** Starting twice with the same key and input returns the same job; other input is a conflict. */
  idempotencyKey?: string;
}

export interface SendOptions {
  /** Deduplication id. A second send with the same id returns the first outcome. Default: random. */
  eventId?: string;
  /** Wait for the event to be applied (default) or resolve once it is durably accepted. */
  wait?: boolean;
}

export interface ListFilter {
  machineId?: string;
  state?: string;
  status?: JobStatus;
  quarantined?: boolean;
  afterId?: string;
  limit?: number;
}

/** What the runtime tells its observers. The CLI, the demo and tests listen to these. */
export type RuntimeEvent =
  | { type: 'job.started'; job: Job }
  | { type: 'job.committed'; job: Job; transition: TransitionRecord }
  | { type: 'event.accepted'; jobId: string; eventId: string; eventType: string }
  | { type: 'event.rejected'; jobId: string; eventId: string; error: ErrorInfo }
  | { type: 'job.quarantined'; jobId: string; reason: string }
  | { type: 'job.released'; jobId: string }
  | { type: 'action.failed'; jobId: string; action: string; error: ErrorInfo }
  | { type: 'emitted'; jobId: string; event: JsonValue };

const MAX_CONFLICT_RETRIES = 100;
const DEFAULT_MAX_PAYLOAD = 256 * 1024;
const EVENT_ID_PATTERN = /^[\x21-\x7e]{1,200}$/;
const TERMINAL: ReadonlySet<JobStatus> = new Set(['done', 'error', 'stopped']);

type Loaded =
  | { kind: 'ready'; record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot }
  | { kind: 'held'; record: JobRecord }
  | { kind: 'terminal'; record: JobRecord };

/**
 * Open a runtime: register the machines, recover the store's jobs, and return the API.
 *
 * @example
 * const store = await SqliteStore.open('./spool.db');
 * const runtime = await createRuntime({ store, machines: [jobLifecycle] });
 * const job = await runtime.start('job-lifecycle', { name: 'resize', steps: 3 });
 * await runtime.send(job.id, { type: 'START' });
 * await runtime.close();
 */
export async function createRuntime(options: RuntimeOptions): Promise<Runtime> {
  const runtime = new Runtime(options);
  if (options.recover ?? true) await runtime.recover();
  return runtime;
}

/** The public API of a running Spool. Create it with {@link createRuntime}. */
export class Runtime {
  readonly registry: MachineRegistry;
  readonly store: JobStore;
  readonly clock: Clock;
  readonly #owner: string | null;
  readonly #newId: () => string;
  readonly #maxPayload: number;
  readonly #process: boolean;
  readonly #log: ((entry: LogEntry) => void) | undefined;
  readonly #listeners = new Set<(event: RuntimeEvent) => void>();
  readonly #locks = new Map<string, Promise<void>>();
  readonly #background = new Set<Promise<unknown>>();
  #closed = false;

  constructor(options: RuntimeOptions) {
    this.store = options.store;
    this.registry = new MachineRegistry(options.machines);
    this.clock = options.clock ?? systemClock;
    this.#owner = options.owner ?? null;
    this.#newId = options.newId ?? randomUUID;
    this.#maxPayload = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
    this.#process = options.processEvents ?? true;
    this.#log = options.log;
  }

  /** Listen to runtime events; returns the unsubscribe function. */
  subscribe(listener: (event: RuntimeEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Start a job of the newest registered version of `machineId`.
   *
   * @example
   * const job = await runtime.start('job-lifecycle', { name: 'thumbnails' }, { idempotencyKey: 'upload-42' });
   */
  async start(machineId: string, input: unknown = {}, options: StartOptions = {}): Promise<Job> {
    this.#assertOpen();
    const def = this.registry.latest(machineId);
    const parsed = this.#validateInput(def, input);
    const jobId = options.jobId ?? this.#newId();
    checkId('job id', jobId);
    if (options.idempotencyKey !== undefined) checkId('idempotency key', options.idempotencyKey);
    const inputHash = hashJson({ machine: def.id, input: parsed });
    const key = options.idempotencyKey ?? null;

    const existing = await this.#findExisting(jobId, key);
    if (existing) return this.#sameStart(existing, inputHash, jobId, key);

    const [snapshot, actions] = safeInitial(def, parsed);
    const persisted = toJson(def.machine.getPersistedSnapshot(snapshot));
    const now = this.clock.now();
    const { job: record, created } = await this.store.createJob({
      id: jobId,
      machineId: def.id,
      machineVersion: def.version,
      status: snapshot.status as JobStatus,
      value: toJson(snapshot.value),
      statePaths: statePaths(snapshot.value),
      context: toJson(snapshot.context),
      snapshot: JSON.stringify(persisted),
      input: parsed,
      inputHash,
      idempotencyKey: key,
      owner: this.#owner,
      at: now,
      transition: {
        eventId: null,
        eventType: 'xstate.init',
        payload: redact(parsed, def.sensitive),
        from: null,
        to: toJson(snapshot.value),
        outcome: 'started',
        error: null,
        at: now,
      },
    });
    if (!created) return this.#sameStart(record, inputHash, jobId, key);
    const job = toJob(record);
    this.#emit({ type: 'job.started', job });
    this.#logEntry('info', 'job started', { jobId, machine: def.id, version: def.version, state: job.value });
    this.#runActions(record.id, actions);
    return job;
  }

  /**
   * Send an event to a job. It is validated, recorded durably under its event id, applied once,
   * and the promise resolves with its outcome.
   *
   * @example
   * const r = await runtime.send(jobId, { type: 'PROGRESS', percent: 40 }, { eventId: 'webhook-7' });
   * r.status; // 'applied' | 'ignored' | 'failed' | ...
   */
  async send(jobId: string, event: unknown, options: SendOptions = {}): Promise<SendResult> {
    this.#assertOpen();
    const eventId = options.eventId ?? this.#newId();
    checkId('event id', eventId);
    const record = await this.#visible(jobId);

    const prior = options.eventId === undefined ? undefined : await this.store.getEvent(jobId, eventId);
    if (prior) {
      const def = this.registry.get(record.machineId, record.machineVersion);
      const payload = this.#validateEvent(def, event);
      if (prior.payloadHash !== hashJson(payload)) {
        throw new IdempotencyConflictError(
          `Event id "${eventId}" was already used for job ${jobId} with a different event; use a new event id for a new event.`,
          { jobId, eventId },
        );
      }
      return this.#outcome(jobId, eventId, true, options.wait ?? true);
    }

    if (TERMINAL.has(record.status)) {
      throw new JobTerminalError(`Job ${jobId} is ${describeEnd(record)}: it accepts no more events.`, {
        jobId,
        status: record.status,
        state: record.value,
      });
    }
    const route = this.registry.route(record.machineId, record.machineVersion);
    if (record.quarantine !== null || !route) {
      throw new JobQuarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
    }
    const payload = this.#validateEvent(route.target, event);
    const type = (payload as { type: string }).type;
    const accept: NewInboxEvent = {
      jobId,
      eventId,
      type,
      payload,
      payloadHash: hashJson(payload),
      at: this.clock.now(),
    };

    if (this.#process && (options.wait ?? true)) {
      const inline = await this.#withLock(jobId, () => this.#applyInline(accept));
      if (inline) return this.#outcome(jobId, eventId, false, true);
    }
    const { event: stored, duplicate } = await this.store.acceptEvent(accept);
    if (duplicate && stored.payloadHash !== accept.payloadHash) {
      throw new IdempotencyConflictError(`Event id "${eventId}" was already used for job ${jobId} with a different event.`, { jobId, eventId });
    }
    crashPoint('after-accept');
    this.#emit({ type: 'event.accepted', jobId, eventId, eventType: type });
    return this.#outcome(jobId, eventId, duplicate, options.wait ?? true);
  }

  /** A job by id. Throws {@link JobNotFoundError} for unknown ids and other owners' jobs. */
  async get(jobId: string): Promise<Job> {
    this.#assertOpen();
    return toJob(await this.#visible(jobId));
  }

  /** Jobs by machine, state path, status or quarantine, ordered by id. */
  async list(filter: ListFilter = {}): Promise<Job[]> {
    this.#assertOpen();
    const f: JobFilter = { ...filter, owner: this.#owner };
    return (await this.store.listJobs(f)).map(toJob);
  }

  /** Every commit of a job, in revision order: start, transitions, ignored and failed events, migrations. */
  async history(jobId: string): Promise<TransitionRecord[]> {
    this.#assertOpen();
    await this.#visible(jobId);
    return this.store.history(jobId);
  }

  /** A job's durable inbox: every accepted event and its outcome. */
  async events(jobId: string): Promise<InboxRecord[]> {
    this.#assertOpen();
    await this.#visible(jobId);
    return this.store.listEvents(jobId);
  }

  /**
   * Resolve when the job satisfies `predicate`; checked now and after each commit this runtime
   * makes to it (no polling). Rejects with {@link WaitTimeoutError} after `timeoutMs` real milliseconds.
   *
   * @example
   * await runtime.waitFor(id, (job) => job.final);
   */
  async waitFor(jobId: string, predicate: (job: Job) => boolean, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Job> {
    this.#assertOpen();
    return new Promise<Job>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = (error: unknown, job?: Job) => {
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
      const unsubscribe = this.subscribe((event) => {
        if ((event.type === 'job.committed' || event.type === 'job.started') && event.job.id === jobId) test(event.job);
      });
      const onAbort = () => finish(options.signal?.reason ?? new WaitTimeoutError(`Wait for job ${jobId} aborted.`));
      options.signal?.addEventListener('abort', onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => finish(new WaitTimeoutError(`Job ${jobId} did not reach the awaited condition within ${options.timeoutMs} ms.`, { jobId })), options.timeoutMs);
      }
      this.get(jobId).then(test, (error) => finish(error));
    });
  }

  /**
   * Bring the store up to date: quarantine jobs whose machine version is not registered or whose
   * snapshot no longer fits, release jobs that fit again, migrate jobs that have a registered
   * migration, and apply every accepted but unprocessed event. Runs on open.
   */
  async recover(): Promise<{ checked: number; quarantined: number; migrated: number; processed: number }> {
    this.#assertOpen();
    let checked = 0;
    let quarantined = 0;
    let migrated = 0;
    for (let afterId: string | undefined; ; ) {
      const page = await this.store.listJobs({ status: 'active', owner: this.#owner, limit: 500, ...(afterId ? { afterId } : {}) });
      if (page.length === 0) break;
      for (const record of page) {
        checked += 1;
        const outcome = await this.#withLock(record.id, () => this.#check(record.id));
        if (outcome === 'quarantined') quarantined += 1;
        if (outcome === 'migrated') migrated += 1;
      }
      afterId = page.at(-1)!.id;
    }
    let processed = 0;
    if (this.#process) {
      const tried = new Set<string>();
      for (;;) {
        const ids = (await this.store.jobsWithPendingEvents(200)).filter((id) => !tried.has(id));
        if (ids.length === 0) break;
        for (const id of ids) {
          tried.add(id);
          processed += await this.#drain(id);
        }
      }
    }
    return { checked, quarantined, migrated, processed };
  }

  /** Wait for in-flight work, then close the store. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#background.size > 0 || this.#locks.size > 0) {
      await Promise.allSettled([...this.#background, ...this.#locks.values()]);
    }
    this.#closed = true;
    this.#listeners.clear();
    await this.store.close();
  }

  // ---------------------------------------------------------------- internals

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('This Spool runtime is closed; create a new one with createRuntime().');
  }

  async #visible(jobId: string): Promise<JobRecord> {
    if (typeof jobId !== 'string' || jobId.length === 0) throw new ValidationError('A job id must be a non-empty string.');
    const record = await this.store.getJob(jobId);
    if (!record || record.owner !== this.#owner) throw new JobNotFoundError(jobId);
    return record;
  }

  async #findExisting(jobId: string, key: string | null): Promise<JobRecord | undefined> {
    const byId = await this.store.getJob(jobId);
    if (byId) return byId;
    return key === null ? undefined : this.store.findByIdempotencyKey(this.#owner, key);
  }

  #sameStart(record: JobRecord, inputHash: string, jobId: string, key: string | null): Job {
    if (record.owner !== this.#owner) {
      throw new IdempotencyConflictError(`Job id "${jobId}" is taken; choose another id.`, { jobId });
    }
    if (record.inputHash !== inputHash) {
      const what = key !== null && record.idempotencyKey === key ? `idempotency key "${key}"` : `job id "${jobId}"`;
      throw new IdempotencyConflictError(
        `A job with ${what} already exists (${record.id}) with different input; reuse the key only for the same request.`,
        { jobId: record.id },
      );
    }
    return toJob(record);
  }

  #validateInput(def: RegisteredMachine, input: unknown): JsonValue {
    const json = this.#jsonPayload('input', input);
    if (!def.input) {
      if (json === null || typeof json !== 'object' || Array.isArray(json)) {
        throw new ValidationError(`Input for ${def.id} must be a JSON object.`, { machineId: def.id });
      }
      return json;
    }
    const result = def.input.safeParse(json);
    if (!result.success) {
      throw new ValidationError(`Invalid input for ${def.id}: ${formatIssues(result.error)}`, { machineId: def.id });
    }
    return toJson(result.data);
  }

  #validateEvent(def: RegisteredMachine | undefined, event: unknown): JsonValue {
    const json = this.#jsonPayload('event', event);
    if (json === null || typeof json !== 'object' || Array.isArray(json) || typeof json['type'] !== 'string' || json['type'] === '') {
      throw new ValidationError('An event must be a JSON object with a non-empty string "type", e.g. {"type":"START"}.');
    }
    const type = json['type'];
    if (type.startsWith('xstate.') || type.startsWith('spool.')) {
      throw new UnknownEventError(`Event type "${type}" is reserved for the runtime; send your machine's own events.`, { eventType: type });
    }
    if (!def) return json;
    if (!def.eventTypes.has(type)) {
      const known = [...def.eventTypes].filter((t) => !t.startsWith('xstate.')).sort().join(', ');
      throw new UnknownEventError(`Machine ${def.id}@${def.version} has no event "${type}" (known: ${known}).`, { eventType: type, machineId: def.id });
    }
    const schema = def.events[type];
    if (!schema) return json;
    const result = schema.safeParse(json);
    if (!result.success) {
      throw new ValidationError(`Invalid ${type} event for ${def.id}: ${formatIssues(result.error)}`, { eventType: type, machineId: def.id });
    }
    return toJson(result.data);
  }

  #jsonPayload(what: string, value: unknown): JsonValue {
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      throw new ValidationError(`The ${what} is not JSON-serialisable: ${(error as Error).message}`);
    }
    if (text === undefined) throw new ValidationError(`The ${what} is not JSON-serialisable.`);
    const bytes = Buffer.byteLength(text);
    if (bytes > this.#maxPayload) {
      throw new PayloadTooLargeError(`The ${what} is ${bytes} bytes; the limit is ${this.#maxPayload} (maxPayloadBytes).`, { bytes, limit: this.#maxPayload });
    }
    return JSON.parse(text) as JsonValue;
  }

  async #outcome(jobId: string, eventId: string, duplicate: boolean, wait: boolean): Promise<SendResult> {
    let event = await this.store.getEvent(jobId, eventId);
    if (event && event.status === 'pending' && this.#process) {
      if (wait) await this.#drain(jobId);
      else this.#track(this.#drain(jobId));
      if (wait) event = await this.store.getEvent(jobId, eventId);
    }
    if (!event) throw new JobNotFoundError(jobId);
    const record = await this.#visible(jobId);
    return {
      jobId,
      eventId,
      status: event.status,
      revision: event.revision,
      error: event.error,
      duplicate,
      job: toJob(record),
    };
  }

  #track(work: Promise<unknown>): void {
    const p = work.catch((error) => this.#logEntry('error', 'background processing failed', { error: toErrorInfo(error) }));
    this.#background.add(p);
    void p.finally(() => this.#background.delete(p));
  }

  /** Serialise work on one job inside this process (other processes are fenced by revision). */
  #withLock<T>(jobId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(jobId) ?? Promise.resolve();
    const run = previous.then(work);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#locks.set(jobId, tail);
    void tail.then(() => {
      if (this.#locks.get(jobId) === tail) this.#locks.delete(jobId);
    });
    return run;
  }

  /** Apply every pending event of a job, oldest first. Returns how many were settled. */
  #drain(jobId: string): Promise<number> {
    return this.#withLock(jobId, async () => {
      let settled = 0;
      let conflicts = 0;
      for (;;) {
        const loaded = await this.#load(jobId);
        if (!loaded || loaded.kind === 'held') return settled;
        const [event] = await this.store.pendingEvents(jobId, 1);
        if (!event) return settled;
        const result = await this.#applyPending(loaded, event);
        if (result === 'conflict') {
          conflicts += 1;
          if (conflicts > MAX_CONFLICT_RETRIES) {
            throw new RevisionConflictError(`Job ${jobId} kept changing under this process (${conflicts} conflicts); giving up this round.`, { jobId });
          }
          continue;
        }
        settled += 1;
      }
    });
  }

  /** Load a job ready to transition: migrated, hydrated, or held back with a visible reason. */
  async #load(jobId: string): Promise<Loaded | undefined> {
    for (let round = 0; round < 3; round += 1) {
      const record = await this.store.getJob(jobId);
      if (!record) return undefined;
      if (TERMINAL.has(record.status)) return { kind: 'terminal', record };
      const route = this.registry.route(record.machineId, record.machineVersion);
      if (record.quarantine === null && route && route.chain.length === 0) {
        const json = parseSnapshot(record.snapshot);
        const hydrated = typeof json === 'string' ? undefined : hydrate(route.target, json, record.status);
        if (hydrated?.ok) return { kind: 'ready', record, def: route.target, snapshot: hydrated.snapshot };
      }
      const outcome = await this.#check(jobId);
      if (outcome === 'missing') return undefined;
      if (outcome === 'quarantined') return { kind: 'held', record: (await this.store.getJob(jobId)) ?? record };
    }
    const record = await this.store.getJob(jobId);
    return record ? { kind: 'held', record } : undefined;
  }

  /**
   * Check one job against the registry: quarantine it if it cannot run, release it if it can
   * again, migrate it when a migration chain is registered.
   */
  async #check(jobId: string): Promise<'missing' | 'ok' | 'quarantined' | 'migrated' | 'terminal'> {
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
      const record = await this.store.getJob(jobId);
      if (!record) return 'missing';
      if (TERMINAL.has(record.status)) return 'terminal';
      const route = this.registry.route(record.machineId, record.machineVersion);
      let reason: string | null = null;
      let migratedTo: RegisteredMachine | undefined;
      let snapshotJson: ReturnType<typeof parseSnapshot> = parseSnapshot(record.snapshot);
      if (!route) {
        const known = this.registry.all().filter((m) => m.id === record.machineId).map((m) => m.version);
        reason = known.length
          ? `machine ${record.machineId} version ${record.machineVersion} is not registered (registered: ${known.join(', ')}); register it again or add a migration from ${record.machineVersion}`
          : `machine ${record.machineId} is not registered`;
      } else if (record.corruption !== undefined) {
        reason = record.corruption;
      } else if (typeof snapshotJson === 'string') {
        reason = snapshotJson;
      } else {
        if (route.chain.length > 0) {
          try {
            let from = record.machineVersion;
            for (const step of route.chain) {
              snapshotJson = step.migrations[from]!(structuredClone(snapshotJson));
              from = step.version;
            }
            migratedTo = route.target;
          } catch (error) {
            reason = `migration from ${record.machineVersion} to ${route.target.version} failed: ${(error as Error).message}`;
          }
        }
        if (reason === null) {
          const h = hydrate(route.target, snapshotJson as Exclude<typeof snapshotJson, string>, record.status);
          if (!h.ok) reason = h.reason;
          else if (migratedTo) {
            const result = await this.#commitOne(record, route.target, h.snapshot, {
              eventId: null,
              eventType: 'spool.migrate',
              payload: { from: record.machineVersion, to: route.target.version },
              from: record.value,
              to: toJson(h.snapshot.value),
              outcome: 'migrated',
              error: null,
              at: this.clock.now(),
            });
            if (result === 'conflict') continue;
            this.#logEntry('info', 'job migrated', { jobId, from: record.machineVersion, to: route.target.version });
            return 'migrated';
          }
        }
      }
      if (reason !== null) {
        if (record.quarantine !== reason) {
          await this.store.setQuarantine(jobId, reason, this.clock.now());
          this.#emit({ type: 'job.quarantined', jobId, reason });
          this.#logEntry('warn', 'job quarantined', { jobId, reason });
        }
        return 'quarantined';
      }
      if (record.quarantine !== null) {
        await this.store.setQuarantine(jobId, null, this.clock.now());
        this.#emit({ type: 'job.released', jobId });
        this.#logEntry('info', 'job released from quarantine', { jobId });
      }
      return 'ok';
    }
    throw new RevisionConflictError(`Job ${jobId} kept changing while being checked.`, { jobId });
  }

  /** The fast path: accept and apply a new event in one commit when nothing is queued before it. */
  async #applyInline(accept: NewInboxEvent): Promise<boolean> {
    const loaded = await this.#load(accept.jobId);
    if (!loaded || loaded.kind !== 'ready') return false;
    const queued = await this.store.pendingEvents(accept.jobId, 1);
    if (queued.length > 0) return false;
    const result = await this.#applyEvent(loaded, accept.payload, { accept });
    return result === 'ok';
  }

  async #applyPending(loaded: Loaded, event: InboxRecord): Promise<'ok' | 'conflict' | 'duplicate'> {
    if (loaded.kind === 'held') return 'ok';
    if (loaded.kind === 'terminal') {
      const error = toErrorInfo(new JobTerminalError(`Job ${event.jobId} is ${describeEnd(loaded.record)}: the event arrived after its end.`));
      await this.store.rejectEvent(event.seq, error, this.clock.now());
      this.#emit({ type: 'event.rejected', jobId: event.jobId, eventId: event.eventId, error });
      return 'ok';
    }
    return this.#applyEvent(loaded, event.payload, { seq: event.seq, eventId: event.eventId });
  }

  /** Compute the transition for one event and commit it with the event's settlement. */
  async #applyEvent(
    loaded: Extract<Loaded, { kind: 'ready' }>,
    payload: JsonValue,
    source: { accept: NewInboxEvent } | { seq: number; eventId: string },
  ): Promise<'ok' | 'conflict' | 'duplicate'> {
    const { record, def, snapshot } = loaded;
    const event = payload as { type: string };
    const eventId = 'accept' in source ? source.accept.eventId : source.eventId;
    let next: AnyMachineSnapshot = snapshot;
    let actions: unknown[] = [];
    let status: 'applied' | 'ignored' | 'failed' = 'applied';
    let error: ErrorInfo | null = null;
    try {
      [next, actions] = transition(def.machine, snapshot, structuredClone(event));
      if (next === snapshot) status = 'ignored';
      else if (next.status === 'error') {
        status = 'failed';
        error = toErrorInfo(next.error);
      }
    } catch (thrown) {
      status = 'failed';
      error = toErrorInfo(thrown);
    }
    if (status !== 'applied') {
      next = snapshot;
      actions = [];
    }
    if (error) error = { ...error, message: redactText(error.message, payload, def.sensitive) };
    const redacted = redact(payload, def.sensitive);
    crashPoint('before-commit');
    const result = await this.#commitOne(
      record,
      def,
      next,
      {
        eventId,
        eventType: event.type,
        payload: redacted,
        from: record.value,
        to: toJson(next.value),
        outcome: status,
        error,
        at: this.clock.now(),
      },
      {
        ...('accept' in source ? { accept: source.accept } : { seq: source.seq }),
        status,
        error,
        payload: redacted,
      },
    );
    if (result !== 'ok') return result;
    crashPoint('after-commit');
    if (status === 'failed') this.#logEntry('warn', 'event failed', { jobId: record.id, eventId, eventType: event.type, error });
    this.#runActions(record.id, actions);
    return 'ok';
  }

  async #commitOne(
    record: JobRecord,
    def: RegisteredMachine,
    next: AnyMachineSnapshot,
    transitionDraft: TransitionCommit['transition'],
    event?: TransitionCommit['event'],
  ): Promise<'ok' | 'conflict' | 'duplicate'> {
    const now = transitionDraft.at;
    const commit: TransitionCommit = {
      jobId: record.id,
      expectedRevision: record.revision,
      job: {
        status: next.status as JobStatus,
        value: toJson(next.value),
        statePaths: statePaths(next.value),
        context: toJson(next.context),
        snapshot: JSON.stringify(def.machine.getPersistedSnapshot(next)),
        machineVersion: def.version,
        at: now,
      },
      transition: transitionDraft,
      ...(event ? { event } : {}),
    };
    const [result] = await this.store.commit([commit]);
    if (!result) throw new RevisionConflictError(`The store returned no result for job ${record.id}.`);
    if (!result.ok) {
      if (result.reason === 'conflict' || result.reason === 'event-settled') return 'conflict';
      if (result.reason === 'duplicate-event') return 'duplicate';
      throw new RevisionConflictError(`Commit of job ${record.id} failed: ${result.error.message}`, { jobId: record.id });
    }
    const updated: JobRecord = {
      ...record,
      revision: result.revision,
      status: commit.job.status,
      value: commit.job.value,
      context: commit.job.context,
      snapshot: commit.job.snapshot,
      machineVersion: def.version,
      updatedAt: now,
    };
    const job = toJob(updated);
    this.#emit({ type: 'job.committed', job, transition: { ...transitionDraft, jobId: record.id, revision: result.revision } });
    if (job.final && !TERMINAL.has(record.status)) {
      this.#logEntry('info', 'job finished', { jobId: record.id, status: job.status, state: job.value });
    }
    return 'ok';
  }

  /** Carry out the actions a committed transition asked for. Runs only after the commit. */
  #runActions(jobId: string, actions: readonly unknown[]): void {
    for (const raw of actions) {
      const action = raw as { type: string; params?: Record<string, unknown>; info?: unknown; exec?: (info: unknown, params: unknown) => void };
      if (action.type === 'xstate.emit') {
        this.#emit({ type: 'emitted', jobId, event: toJson(action.params?.['event']) });
        continue;
      }
      if (action.type.startsWith('xstate.')) continue;
      if (typeof action.exec !== 'function') continue;
      try {
        action.exec(action.info, action.params);
      } catch (error) {
        const info = toErrorInfo(error);
        this.#emit({ type: 'action.failed', jobId, action: action.type, error: info });
        this.#logEntry('error', 'action failed after commit', { jobId, action: action.type, error: info });
      }
    }
  }

  #emit(event: RuntimeEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (error) {
        this.#logEntry('error', 'listener threw', { error: toErrorInfo(error) });
      }
    }
  }

  #logEntry(level: LogEntry['level'], msg: string, fields: Record<string, unknown>): void {
    this.#log?.({ at: this.clock.now(), level, msg, ...fields });
  }
}

/** Events can no longer be sent to a quarantined job until it is released. */
export class JobQuarantined extends SpoolError {
  readonly code = 'SPOOL_QUARANTINED';
  readonly category = 'conflict';
  constructor(jobId: string, reason: string) {
    super(`Job ${jobId} is quarantined: ${reason}. Register the machine version it runs on (or a migration), then restart.`, { jobId, reason });
  }
}

function safeInitial(def: RegisteredMachine, input: JsonValue): [AnyMachineSnapshot, unknown[]] {
  let result: [AnyMachineSnapshot, unknown[]];
  try {
    result = initialTransition(def.machine, input) as [AnyMachineSnapshot, unknown[]];
  } catch (error) {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${(error as Error).message}`, { machineId: def.id });
  }
  if (result[0].status === 'error') {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${toErrorInfo(result[0].error).message}`, { machineId: def.id });
  }
  return result;
}

function toJob(record: JobRecord): Job {
  const parsed = parseSnapshot(record.snapshot);
  const output = typeof parsed === 'string' ? undefined : (parsed['output'] as JsonValue | undefined);
  return {
    id: record.id,
    machineId: record.machineId,
    machineVersion: record.machineVersion,
    revision: record.revision,
    status: record.status,
    final: TERMINAL.has(record.status),
    value: record.value,
    context: record.context,
    input: record.input,
    output,
    quarantine: record.quarantine,
    idempotencyKey: record.idempotencyKey,
    owner: record.owner,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

function describeEnd(record: JobRecord): string {
  return record.status === 'done' ? `finished (final state ${JSON.stringify(record.value)})` : `ended with status "${record.status}"`;
}

function checkId(what: string, id: unknown): void {
  if (typeof id !== 'string' || !EVENT_ID_PATTERN.test(id)) {
    throw new ValidationError(`A ${what} must be 1-200 printable ASCII characters without spaces.`);
  }
}

function formatIssues(error: unknown): string {
  const issues = (error as { issues?: { path: PropertyKey[]; message: string }[] }).issues ?? [];
  if (issues.length === 0) return String(error);
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/** Remove sensitive values that an error message may quote. */
function redactText(message: string, payload: JsonValue, sensitive: ReadonlySet<string>): string {
  if (sensitive.size === 0) return message;
  let out = message;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (sensitive.has(k) && (typeof child === 'string' || typeof child === 'number') && String(child).length > 0) {
          out = out.split(String(child)).join('[redacted]');
        } else walk(child);
      }
    }
  };
  walk(payload);
  return out;
}
