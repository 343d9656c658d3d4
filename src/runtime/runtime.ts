import { randomUUID } from 'node:crypto';
import { uuidv7 } from './ids.ts';
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { systemClock, type Clock } from '../ports/clock.ts';
import type {
  NewEffect,
  NewJob,
  CommitResult,
  AssetRecord,
  AttemptRecord,
  EffectRecord,
  ErrorInfo,
  NoteRecord,
  TimerRecord,
  EventStatus,
  InboxRecord,
  QueuedEvent,
  CreateJobResult,
  AttemptFinish,
  ClaimedEffect,
  EffectClaim,
  FinishStatus,
  Outcome,
  JobFilter,
  JobRecord,
  JobStatus,
  JobStore,
  JobLease,
  LeaseClaim,
  JsonValue,
  NewInboxEvent,
  TransitionCommit,
  TransitionRecord,
} from '../ports/store.ts';
import { JOB_STATUSES } from '../ports/store.ts';
import {
  ClosedError,
  CorruptRecordError,
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
import { redactText, sensitivePaths } from './redaction.ts';
import { eventSchemaFor, MachineRegistry, namesEventType, type JobDefinition, type RegisteredMachine } from './registry.ts';
import { crashPoint } from './crashPoints.ts';
import { planActions, type ActionPlan } from './actions.ts';
import { initialAsChild, initialInScope, PARENT_REF, transitionAsChild, transitionInScope } from './childScope.ts';
import { deferred, isDeferred, newRunnerId, retireRunner, runnerIsGone, type ActivityArgs, type AssetInput } from './activities.ts';
import { backoffDelay, classify, IndeterminateOutcomeError } from './retry.ts';
import * as ops from './operations.ts';
import type { RuntimeStats } from './operations.ts';
import * as sched from './schedules.ts';
import { ActivitySlots, BacklogGauge, DEFAULT_MAX_BACKLOG, ROUND_BOUNDS, widerScan } from './limits.ts';
import { checkRuntimeOptions, unknownNames } from './options.ts';

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
  /** Id generator for jobs and events. Default: a UUID v7 (time-ordered; see ids.ts). */
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
  /**
   * Whether recovery hydrates every active job's snapshot to find ones that no longer fit their
   * machine (O(active jobs) at open). With `false`, open checks machine versions by SQL aggregate
   * only and a misfit snapshot is quarantined when its job is next touched: restart time then does
   * not grow with the number of waiting jobs. Default `'auto'`: verify every snapshot when at most
   * 10,000 jobs are active, else versions only (and a log entry says so).
   */
  verifySnapshots?: boolean | 'auto';
  /**
   * Whether this runtime runs activities (after their commit) and fires due timers in `tick()`.
   * Default: same as `processEvents`. A CLI command sets it to false and leaves that to a worker.
   */
  runEffects?: boolean;
  /** Activities running at once in this runtime. Default 8. */
  maxConcurrentActivities?: number;
  /**
   * Attempts of one activity running at once in this runtime, by the activity's name in
   * `setup({ actors })` (the effect's `src`), within `maxConcurrentActivities`. Activities over their
   * limit stay pending in the store (not claimed) and start when a slot frees. 0: this runtime
   * never runs that activity. Default: no per-activity limit.
   *
   * @example
   * createRuntime({ store, machines, activityConcurrency: { charge: 2, sendEmail: 10 } })
   */
  activityConcurrency?: Record<string, number>;
  /**
   * Backpressure: `start` and `send` refuse with a `BackpressureError` (nothing written, with
   * `retryAfterMs`) while this many events or more are accepted but not yet applied in the store
   * (held ones included). Counted at most every 100 ms of the clock, plus this runtime's own
   * sends since. Repeats of accepted event ids and internal events (timers, activity outcomes,
   * cancel) are never refused. `Infinity` turns it off. Default 100000.
   */
  maxBacklog?: number;
  /**
   * Job leases: how long this runtime's lease on a job (and its claim on a running activity) lasts
   * without renewal, in ms. A crashed process's jobs are taken over once its leases expire (at
   * once when its process is known to be gone on this host). Renewed by a heartbeat every third
   * of it (`tick()` in host-driven mode). Default 30000.
   */
  leaseMs?: number;
  /**
   * Host-driven mode (desktop and edge embedding): Spool starts no intervals of its own. The host
   * calls `tick()` (every few seconds, and when it wants due work done); each call fires due
   * timers and retries once and renews the claims of running activities. Default false.
   */
  hostDriven?: boolean;
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
  /** 0-100, or null when the job does not report progress. */
  progress: number | null;
  /** A cancel request and whether the machine has reached its cancelled state. */
  cancel: { requestedAt: number; reason: string | null; completed: boolean } | null;
  quarantine: string | null;
  /** Set while the job is suspended (see {@link Runtime.suspend}): since when and why. */
  suspended: { at: number; reason: string | null } | null;
  /** The runner (a runtime in some process) that holds the job while it works on it, its fence and the lease's expiry; null when free. */
  lease: JobLease | null;
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
  /** Jobs whose activity used up its attempts (or could not safely be re-run). */
  exhausted?: boolean;
  cancelRequested?: boolean;
  /** Suspended jobs (true) or the others (false). */
  suspended?: boolean;
  /**
   * Jobs nothing will ever move: active, not suspended or quarantined, no pending event, no
   * scheduled timer, no activity pending, running, waiting or in backoff, and a current state
   * that accepts no external event but the cancel event.
   */
  stuck?: true;
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
  /** A custom action of the commit at `revision` threw after it: the transition stands. */
  | { type: 'action.failed'; jobId: string; revision: number; action: string; error: ErrorInfo }
  | { type: 'emitted'; jobId: string; event: JsonValue }
  | { type: 'timers.scheduled'; jobId: string; dueAt: number[] }
  | { type: 'timer.fired'; jobId: string; timerId: string; eventType: string; dueAt: number; firedAt: number }
  | { type: 'activity.started'; jobId: string; effectId: string; src: string; attempt: number }
  | { type: 'activity.finished'; jobId: string; effectId: string; attempt: number; outcome: 'succeeded' | 'failed' | 'retrying' | 'waiting' | 'stale'; error?: ErrorInfo }
  | { type: 'cancel.requested'; jobId: string; reason: string }
  /** A job's lease was freed: its holder is gone or let it expire; any runner may take the job now. */
  | { type: 'lease.freed'; jobId: string; runner: string; fence: number }
  | sched.ScheduleEvent;

/** Everything `show` needs about one job. */
export interface JobDetails {
  job: Job;
  history: TransitionRecord[];
  events: InboxRecord[];
  effects: EffectRecord[];
  attempts: AttemptRecord[];
  timers: TimerRecord[];
  notes: NoteRecord[];
  assets: AssetRecord[];
  /** The external event types the job's current state accepts (empty once it has ended). */
  waitingFor: string[];
  /** True when nothing will ever move the job (see `list({ stuck: true })`). */
  stuck: boolean;
}

interface RunningActivity {
  jobId: string;
  actorId: string;
  controller: AbortController;
}

const MAX_CONFLICT_RETRIES = 100;
/** While `waitFor` waits: how often to look for commits of other processes. */
const WATCH_MS = 50;
/** With `verifySnapshots: 'auto'`, recovery hydrates every active job only up to this many. */
const AUTO_VERIFY_LIMIT = 10_000;
/** Deepest JSON nesting accepted in inputs, events and outputs. */
const MAX_DEPTH = 64;
/** Event ids the runtime gives its own events: a caller cannot take them. */
const RESERVED_EVENT_ID = /^(spool\.|timer~|effect~|self~|parent~|child~|retry-of:)/;
/** Jobs drained at once by recovery, the worker and tick(): their commits share transactions. */
const DRAIN_CONCURRENCY = 64;
/** Commits per group-commit transaction at most. */
const MAX_BATCH = 256;
/** Hydrated snapshots kept in memory (most recently committed jobs). */
const SNAPSHOT_CACHE = 1000;
const DEFAULT_MAX_PAYLOAD = 256 * 1024;
const EVENT_ID_PATTERN = /^[\x21-\x7e]{1,200}$/;
const TERMINAL: ReadonlySet<JobStatus> = new Set(['done', 'error', 'stopped']);

/** What a transition does to other jobs (children, parent). */
interface Relations {
  children: NewJob[];
  effects: NewEffect[];
  deliveries: NewInboxEvent[];
  settleParent?: { effectId: string; output: JsonValue; event: NewInboxEvent };
  stopChildren: string[];
  touched: Set<string>;
}

function relatedEvent(jobId: string, eventId: string, event: JsonValue, at: number, source: 'parent' | 'child'): NewInboxEvent {
  return { jobId, eventId, type: (event as { type: string }).type, payload: event, payloadHash: hashJson(event), at, source };
}

/** What one applied (or ignored, failed, stale) event produced. */
interface Applied {
  status: 'applied' | 'ignored' | 'failed' | 'stale';
  error: ErrorInfo | null;
  record: JobRecord;
}

type Loaded =
  | { kind: 'ready'; record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor?: unknown }
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
  checkRuntimeOptions(options);
  const runtime = new Runtime(options);
  if (options.recover ?? true) await runtime.recover();
  return runtime;
}

/** The quarantine reason of a job whose commit the store refused (its rows are damaged). */
const STORE_REFUSED = 'commit refused by the store: ';

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
  readonly #running = new Map<string, RunningActivity>();
  readonly #pendingDrains = new Set<string>();
  readonly #waiters = new Set<(error: unknown) => void>();
  /** `waitFor` tests by job, run again when another process commits (see {@link #watchOthers}). */
  readonly #watched = new Map<string, Set<(job: Job) => void>>();
  #watchTimer: ReturnType<typeof setInterval> | undefined;
  /** By job: the record this runtime last committed or read, and its hydrated snapshot (valid while the revision holds). */
  readonly #snapshots = new Map<string, { record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor: unknown }>();
  /** Group commit: the writes waiting for the next batch (new jobs, transitions, attempt outcomes, activity claims). */
  readonly #commitQueue: QueuedWrite[] = [];
  #flushTimer: ReturnType<typeof setImmediate> | undefined;
  /** Operations under way that may commit (sends, drains): a commit waits for them to join its batch. */
  #units = 0;
  readonly #runEffects: boolean;
  readonly #maxActivities: number;
  /** Bounded work (limits.ts): per-activity slots and the backlog behind backpressure. */
  readonly #slots: ActivitySlots;
  readonly #backlog: BacklogGauge;
  readonly #leaseMs: number;
  /** Leases this runtime holds, by job id: the fence it holds each with (see `#heartbeat`). */
  readonly #leases = new Map<string, number>();
  /** Attempts claimed here whose outcome is not recorded yet, by effect id (their job ids): their leases are kept. */
  readonly #attempting = new Map<string, string>();
  /** Attempts whose outcome is being committed with the transition it causes: that commit does not keep the lease for them. */
  readonly #finishing = new Set<string>();
  #heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** The clock time of the last heartbeat. */
  #lastHeartbeatAt = -Infinity;
  readonly #hostDriven: boolean;
  readonly #verifySnapshots: boolean | 'auto';
  /** Identifies this runtime's claims on running activities. */
  readonly runnerId: string;
  #pumping = false;
  #pumpAgain = false;
  #closing = false;
  #closed = false;

  constructor(options: RuntimeOptions) {
    this.store = options.store;
    this.registry = new MachineRegistry(options.machines);
    this.clock = options.clock ?? systemClock;
    this.#owner = options.owner === undefined || options.owner === null || options.owner === '' ? null : options.owner;
    this.#newId = options.newId ?? (() => uuidv7());
    this.#maxPayload = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
    this.#process = options.processEvents ?? true;
    this.#log = options.log;
    this.#runEffects = options.runEffects ?? this.#process;
    this.#maxActivities = Math.max(1, options.maxConcurrentActivities ?? 8);
    this.#slots = new ActivitySlots(options.activityConcurrency, this.registry.all().flatMap((m) => Object.keys(m.machine.implementations.actors ?? {})));
    this.#backlog = new BacklogGauge(() => this.store.pendingBacklog(), this.clock, options.maxBacklog ?? DEFAULT_MAX_BACKLOG);
    this.#leaseMs = Math.max(1000, options.leaseMs ?? 30_000);
    this.#hostDriven = options.hostDriven ?? false;
    this.#verifySnapshots = options.verifySnapshots ?? 'auto';
    this.runnerId = newRunnerId();
    if (!this.#hostDriven) {
      // The lease heartbeat (host-driven mode: `tick()` instead). Unref'd: it never keeps the process alive.
      this.#heartbeatTimer = setInterval(() => this.#track(this.#heartbeat()), Math.floor(this.#leaseMs / 3));
      this.#heartbeatTimer.unref();
    }
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
    return this.#unit(() => this.#start(machineId, input, options));
  }

  async #start(machineId: string, input: unknown, options: StartOptions): Promise<Job> {
    if (typeof machineId !== 'string') throw new ValidationError('A machine id must be a string.');
    options = requireOptions(options, 'start', ['jobId', 'idempotencyKey']);
    const def = this.registry.latest(machineId);
    const parsed = this.#validateInput(def, input);
    const jobId = options.jobId ?? this.#newId();
    checkId('job id', jobId);
    if (options.jobId !== undefined && jobId.includes('~')) {
      throw new ValidationError(`A job id must not contain "~": Spool derives the ids of child and scheduled jobs with it (got "${jobId}").`);
    }
    if (options.idempotencyKey !== undefined) checkId('idempotency key', options.idempotencyKey);
    const inputHash = hashJson({ machine: def.id, input: parsed });
    const key = options.idempotencyKey ?? null;

    const existing = await this.#findExisting(jobId, key);
    if (existing) return this.#sameStart(existing, def.id, inputHash, jobId, key, options.jobId);

    const { job: newJob, plan, relations, initial } = this.#newJob(def, parsed, jobId, key, inputHash, this.clock.now());
    await this.#backlog.admit(false); // backpressure (limits.ts): refused before anything is written; a repeated start returned above
    const { job: record, created } = await this.#submitCreate(newJob);
    if (!created) return this.#sameStart(record, def.id, inputHash, jobId, key, options.jobId);
    // The new job's own actor lends its scope: its first event neither reads nor hydrates it again.
    if (initial.actor !== undefined) this.#remember(record, def, initial.snapshot, initial.actor);
    return this.#started(record, def, plan, parsed, relations);
  }

  /** The job `start` writes (revision 1, its first history record, what its initial state asks for), not written yet. */
  #newJob(
    def: RegisteredMachine,
    parsed: JsonValue,
    jobId: string,
    key: string | null,
    inputHash: string,
    now: number,
  ): { job: NewJob; plan: ActionPlan; relations: Relations; initial: { snapshot: AnyMachineSnapshot; actor: unknown } } {
    const [snapshot, actions, actor] = safeInitial(def, parsed);
    const persisted = toJson(def.machine.getPersistedSnapshot(snapshot));
    const plan = planActions(def, jobId, 1, actions, now);
    const relations: Relations = { children: [], effects: [], deliveries: [], stopChildren: [], touched: new Set() };
    this.#spawnChildren(jobId, this.#owner, def, plan.spawnMachines, 1, now, relations, plan.problems);
    if (plan.childSends.length > 0) plan.problems.push('an initial state that sends to its children on entry is not supported; send on a later transition');
    if (plan.problems.length > 0) {
      throw new ValidationError(`Machine ${def.id} cannot start durably: ${plan.problems.join('; ')}`, { machineId: def.id });
    }
    const context = toJson(snapshot.context);
    const job: NewJob = {
      id: jobId,
      machineId: def.id,
      machineVersion: def.version,
      status: snapshot.status as JobStatus,
      value: toJson(snapshot.value),
      statePaths: statePaths(snapshot.value),
      context,
      snapshot: JSON.stringify(persisted),
      input: redact(parsed, def.sensitive),
      progress: contextProgress(context) ?? null,
      effects: [...plan.effects.create, ...relations.effects],
      timers: plan.timers.schedule,
      deliveries: plan.deliveries,
      children: relations.children,
      relatedDeliveries: relations.deliveries,
      inputHash,
      idempotencyKey: key,
      owner: this.#owner,
      at: now,
      runner: this.runnerId,
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
    };
    return { job, plan, relations, initial: { snapshot, actor } };
  }

  /** After a new job's commit: tell observers, run its initial actions, start its activities, apply its self-sends. */
  async #started(record: JobRecord, def: RegisteredMachine, plan: ActionPlan, parsed: JsonValue, relations?: Relations): Promise<Job> {
    const job = toJob(record, def);
    this.#emit({ type: 'job.started', job });
    this.#logEntry('info', 'job started', { jobId: record.id, machine: def.id, version: def.version, state: job.value });
    this.#afterCommit(record.id, record.revision, plan, (m) => redactText(m, [parsed, record.context], def.sensitive));
    if (relations) {
      relations.touched.delete(record.id);
      if (relations.deliveries.some((d) => d.jobId === record.id)) this.#pendingDrains.add(record.id);
      this.#afterRelations(relations);
    }
    if (this.#pendingDrains.delete(record.id) && this.#process) {
      await this.#drain(record.id);
      return this.get(record.id);
    }
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
    return this.#unit(() => this.#send(jobId, event, options));
  }

  async #send(jobId: string, event: unknown, options: SendOptions): Promise<SendResult> {
    options = requireOptions(options, 'send', ['eventId', 'wait']);
    if (options.wait !== undefined && typeof options.wait !== 'boolean') throw new ValidationError('send: wait must be true or false.');
    if (options.eventId !== undefined) {
      checkId('event id', options.eventId);
      if (RESERVED_EVENT_ID.test(options.eventId)) {
        throw new ValidationError(`Event id "${options.eventId}" is reserved for the runtime's own events (spool.*, timer~, effect~, self~, parent~, child~); choose another.`);
      }
    }
    const record = await this.#visible(jobId, true);
    // An id made up here names the revision the event is about to be applied at: applied there
    // as it is accepted, the store finds it by that history row's key (no index entry to write).
    const eventId = options.eventId ?? `r${record.revision + 1}.${this.#newId()}`;

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
    if (record.quarantine !== null && route && (await this.#withLock(jobId, () => this.#check(jobId))) !== 'quarantined') {
      return this.#send(jobId, event, options); // another runtime held it back; this one can run it
    }
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

    // Backpressure (limits.ts): refused before anything is written (a repeat of an accepted event id
    // returned its outcome above). An event that will wait in the inbox is counted at once.
    const queues = !(this.#process && (options.wait ?? true) && record.suspendedAt === null);
    await this.#backlog.admit(queues);
    // A suspended job accepts the event and leaves it pending (the commit would refuse it anyway).
    if (this.#process && (options.wait ?? true) && record.suspendedAt === null) {
      const inline = await this.#withLock(jobId, () => this.#applyInline(accept, record));
      if (inline) {
        if (this.#pendingDrains.delete(jobId)) {
          await this.#drain(jobId);
          return this.#outcome(jobId, eventId, false, true);
        }
        return { jobId, eventId, status: inline.status, revision: inline.record.revision, error: inline.error, duplicate: false, job: this.#view(inline.record) };
      }
    }
    const { event: stored, duplicate } = await this.store.acceptEvent(accept);
    if (!queues && !duplicate) this.#backlog.queued(); // the inline path could not take it: it waits in the inbox
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
    return this.#view(await this.#visible(jobId));
  }

  /** Jobs by machine, state path, status or quarantine, ordered by id. */
  async list(filter: ListFilter = {}): Promise<Job[]> {
    this.#assertOpen();
    filter = requireOptions(filter, 'list', ['machineId', 'state', 'status', 'quarantined', 'exhausted', 'cancelRequested', 'suspended', 'stuck', 'afterId', 'limit']);
    for (const key of ['machineId', 'state', 'status', 'afterId'] as const) {
      if (filter[key] !== undefined && typeof filter[key] !== 'string') throw new ValidationError(`list: ${key} must be a string.`);
    }
    if (filter.status !== undefined && !JOB_STATUSES.includes(filter.status)) {
      throw new ValidationError(`list: status must be one of ${JOB_STATUSES.join(', ')}; got "${filter.status}".`);
    }
    for (const key of ['quarantined', 'exhausted', 'cancelRequested', 'stuck', 'suspended'] as const) {
      const v = (filter as Record<string, unknown>)[key];
      if (v !== undefined && typeof v !== 'boolean') throw new ValidationError(`list: ${key} must be true or false.`);
    }
    if (filter.limit !== undefined && !(Number.isSafeInteger(filter.limit) && filter.limit >= 0)) throw new ValidationError('list: limit must be a non-negative safe integer (at most 2^53 - 1).');
    if (filter.stuck) {
      const { stuck: _stuck, ...rest } = filter;
      return (await ops.listStuck(this.#ops, rest)).stuck.map((r) => this.#view(r));
    }
    const f: JobFilter = { ...filter, owner: this.#owner };
    return (await this.store.listJobs(f)).map((r) => this.#view(r));
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
   * Resolve when the job satisfies `predicate`; checked now, after each commit this runtime makes
   * to it, and when another process commits to the store (a store that counts those, as SQLite
   * does with `data_version`, is polled every 50 ms while someone waits). Rejects with
   * {@link WaitTimeoutError} after `timeoutMs` real milliseconds. Without a timeout a wait keeps
   * the process alive until it resolves, is aborted, or the runtime closes.
   *
   * @example
   * await runtime.waitFor(id, (job) => job.final);
   */
  async waitFor(jobId: string, predicate: (job: Job) => boolean, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Job> {
    this.#assertOpen();
    requireText('job id', jobId);
    if (typeof predicate !== 'function') throw new ValidationError('waitFor needs a predicate function: (job) => boolean.');
    options = requireOptions(options, 'waitFor', ['timeoutMs', 'signal']);
    if (options.timeoutMs !== undefined && !(typeof options.timeoutMs === 'number' && options.timeoutMs >= 0 && Number.isFinite(options.timeoutMs))) {
      throw new ValidationError('waitFor timeoutMs must be a non-negative number of milliseconds.');
    }
    return new Promise<Job>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = (error: unknown, job?: Job) => {
        this.#waiters.delete(finish);
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
      const unsubscribe = this.subscribe((event) => {
        if ((event.type === 'job.committed' || event.type === 'job.started') && event.job.id === jobId) test(event.job);
      });
      this.#waiters.add(finish);
      const onAbort = () => finish(options.signal?.reason ?? new WaitTimeoutError(`Wait for job ${jobId} aborted.`));
      options.signal?.addEventListener('abort', onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => finish(new WaitTimeoutError(`Job ${jobId} did not reach the awaited condition within ${options.timeoutMs} ms.`, { jobId })), options.timeoutMs);
      }
      // The store's change counter is read before the job: a commit of another process in
      // between is seen by the read or by the next poll.
      const unwatch = this.#watchOthers(jobId, test);
      void this.#externalVersion().then(() => this.get(jobId)).then(test, (error: unknown) => finish(error));
    });
  }

  #externalSeen: number | undefined;

  async #externalVersion(): Promise<void> {
    if (this.store.externalChanges && this.#externalSeen === undefined) this.#externalSeen = await this.store.externalChanges();
  }

  /**
   * Commits of other processes raise no event here: while a `waitFor` waits on a store that
   * counts them (`externalChanges`), poll that counter every {@link WATCH_MS} (host-driven: at
   * each `tick()`) and test the waited jobs again when it moves. The timer keeps the process
   * alive while someone waits, as any pending wait on a socket would. Returns the function that
   * stops watching for this test.
   */
  #watchOthers(jobId: string, test: (job: Job) => void): () => void {
    if (!this.store.externalChanges) return () => undefined;
    const tests = this.#watched.get(jobId) ?? new Set();
    tests.add(test);
    this.#watched.set(jobId, tests);
    // Host-driven: no interval of Spool's own; the host's tick() looks instead.
    if (!this.#hostDriven) this.#watchTimer ??= setInterval(() => void this.#pollOthers(), WATCH_MS);
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

  #polling = false;

  async #pollOthers(): Promise<void> {
    if (this.#polling || this.#closed) return;
    this.#polling = true;
    try {
      const version = await this.store.externalChanges!();
      if (version === this.#externalSeen) return;
      this.#externalSeen = version;
      for (const [jobId, tests] of [...this.#watched]) {
        const job = await this.get(jobId).catch(() => undefined);
        if (job) for (const test of [...tests]) test(job);
      }
    } catch (error) {
      this.#logEntry('warn', 'watching for other processes\' commits failed', { error: toErrorInfo(error) });
    } finally {
      this.#polling = false;
    }
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
    const checkAll = async (filter: JobFilter) => {
      for (let afterId: string | undefined; ; ) {
        const page = await this.store.listJobs({ ...filter, owner: this.#owner, limit: 500, ...(afterId ? { afterId } : {}) });
        if (page.length === 0) break;
        for (const record of page) {
          checked += 1;
          const outcome = await this.#withLock(record.id, () =>
            this.#check(record.id, record).catch(async (error: unknown) => {
              // An unreadable row quarantines its job, never the whole file.
              const reason = `stored job is unreadable: ${toErrorInfo(error).message}`;
              await this.store.setQuarantine(record.id, reason, this.clock.now());
              this.#emit({ type: 'job.quarantined', jobId: record.id, reason });
              return 'quarantined' as const;
            }),
          );
          if (outcome === 'quarantined') quarantined += 1;
          if (outcome === 'migrated') migrated += 1;
        }
        afterId = page.at(-1)!.id;
      }
    };
    // Counted up to the limit only: the pairs come from an index, so this does not grow with waiting jobs.
    const pairs = await this.store.activeMachineVersions(this.#owner, AUTO_VERIFY_LIMIT + 1);
    const active = pairs.reduce((n, p) => n + p.jobs, 0);
    const verifyAll = this.#verifySnapshots === 'auto' ? active <= AUTO_VERIFY_LIMIT : this.#verifySnapshots;
    if (this.#verifySnapshots === 'auto' && !verifyAll) {
      this.#logEntry('info', 'recovery checks machine versions only', { activeJobsAtLeast: active, limit: AUTO_VERIFY_LIMIT, hint: 'snapshots are checked when each job is next loaded' });
    }
    if (verifyAll) {
      await checkAll({ status: 'active' });
    } else {
      // Only jobs whose version cannot run as it is (unregistered, or a migration waits), and
      // quarantined jobs that may be released: restart time does not grow with healthy waiting jobs.
      await checkAll({ status: 'active', quarantined: true });
      for (const pair of pairs) {
        const route = this.registry.route(pair.machineId, pair.machineVersion);
        if (!route || route.chain.length > 0) await checkAll({ status: 'active', machineId: pair.machineId, machineVersion: pair.machineVersion, quarantined: false });
      }
    }
    // Child jobs orphaned by a crash between their parent's commit and their stop: stopped now.
    if (this.#process && this.store.orphanedChildren) {
      for (const id of await this.store.orphanedChildren(ROUND_BOUNDS.jobsPerRound)) {
        this.#logEntry('warn', 'orphaned child job stopped', { jobId: id, reason: 'its invocation in the parent was no longer active' });
        await this.#unit(() => this.#stopJob(id));
      }
    }
    const processed = await this.processPending();
    return { checked, quarantined, migrated, processed };
  }

  /**
   * Apply every accepted but unprocessed event (sent by client-only runtimes, other processes,
   * or left by a crash). Returns how many were settled.
   */
  async processPending(): Promise<number> {
    this.#assertOpen();
    if (!this.#process) return 0;
    let processed = 0;
    const tried = new Set<string>();
    // Bounded (limits.ts): jobs beyond ROUND_BOUNDS.jobsPerRound keep their events pending for the next call.
    while (tried.size < ROUND_BOUNDS.jobsPerRound) {
      const ids = (await this.store.jobsWithPendingEvents(200, { runner: this.runnerId, now: this.clock.now() }))
        .filter((id) => !tried.has(id))
        .slice(0, ROUND_BOUNDS.jobsPerRound - tried.size);
      if (ids.length === 0) break;
      for (const id of ids) tried.add(id);
      processed += await this.#drainAll(ids);
    }
    return processed;
  }

  /**
   * Stop: claim no new attempts; with `graceMs`, let running activities finish until then (their
   * outcomes are recorded); abort the rest and give their attempts back (recorded `interrupted`,
   * not counted against `maxAttempts`, up to `MAX_RELEASES` times per activity; the next runtime
   * runs them again at once; one unsafe to repeat is left to be taken over, as after a crash);
   * wait for event processing in flight; close the store. Idempotent. Default `graceMs`: 0 (abort
   * at once). `releaseAttempts: false` leaves aborted attempts as a crash would: taken over, and
   * counted (the testing kit's in-process crash).
   *
   * @example
   * process.on('SIGTERM', () => runtime.close({ graceMs: 10_000 }));
   */
  async close(options: { graceMs?: number; releaseAttempts?: boolean } = {}): Promise<void> {
    // Checked before anything stops: a misspelt `grace` would otherwise abort every activity at once.
    options = requireOptions(options, 'close', ['graceMs', 'releaseAttempts']);
    if (options.graceMs !== undefined && !(typeof options.graceMs === 'number' && options.graceMs >= 0)) throw new ValidationError('close: graceMs must be a number of ms, 0 or more.', { option: 'graceMs' });
    if (options.releaseAttempts !== undefined && typeof options.releaseAttempts !== 'boolean') throw new ValidationError('close: releaseAttempts must be a boolean.', { option: 'releaseAttempts' });
    if (this.#closed) return;
    this.#closing = true; // no new attempts are claimed from here on
    const graceMs = typeof options?.graceMs === 'number' && options.graceMs > 0 ? options.graceMs : 0;
    const giveBack = options.releaseAttempts !== false;
    if (graceMs > 0 && this.#running.size > 0) {
      // Let running activities finish (their outcomes are recorded) until the deadline.
      let timer: ReturnType<typeof setTimeout> | undefined;
      let expired = false;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(() => ((expired = true), resolve()), graceMs)));
      const drained = (async () => {
        // Stops at the deadline: racing a settled deadline again would spin on microtasks and starve the event loop.
        while (this.#running.size > 0 && !expired) await Promise.race([Promise.allSettled([...this.#background]), deadline]);
      })();
      await Promise.race([drained, deadline]);
      if (timer) clearTimeout(timer);
    }
    const aborted = [...this.#running.entries()];
    for (const [, running] of aborted) running.controller.abort(new Error('runtime shutting down'));
    // Give their attempts back (a planned stop does not spend the retry budget), so any process
    // (on any host) runs them again now. One unsafe to repeat cannot be given back: its claim
    // ends now, and whoever takes it over records it indeterminate, as after a crash.
    const now = this.clock.now();
    for (const [effectId] of aborted) {
      const effect = await this.store.getEffect(effectId).catch(() => undefined);
      if (effect?.claimedBy !== this.runnerId) continue;
      const released = giveBack && this.store.releaseAttempt ? await this.store.releaseAttempt(effectId, effect.attempt, this.runnerId, now).catch(() => false) : false;
      if (released) this.#logEntry('info', 'activity attempt released', { jobId: effect.jobId, effectId, attempt: effect.attempt });
      else await this.store.renewClaim(effectId, effect.attempt, this.runnerId, now).catch(() => false);
    }
    await this.idle();
    if (this.#heartbeatTimer) clearInterval(this.#heartbeatTimer);
    // Release every lease at once: another process takes the jobs over now, not at expiry.
    await this.store.releaseLeases(this.runnerId, 'all').catch(() => 0);
    this.#leases.clear();
    this.#closed = true;
    retireRunner(this.runnerId);
    for (const finish of [...this.#waiters]) finish(new ClosedError('The runtime closed before the awaited condition held.'));
    this.#listeners.clear();
    await this.store.close();
  }

  /**
   * One round of time-driven work at the clock's current time: fire every due timer (each once,
   * into its job's inbox, then applied), start due activities and retries, and take over
   * activities whose runner is gone. The worker calls it in a loop; tests call it after moving
   * a virtual clock. Resolves when the round's events are applied (activities keep running: see `idle`).
   */
  async tick(): Promise<{ timersFired: number; activitiesStarted: number }> {
    this.#assertOpen();
    if (this.#hostDriven && this.#watched.size > 0) await this.#pollOthers();
    let timersFired = 0;
    if (this.#runEffects) {
      const now = this.clock.now();
      const touched = new Set<string>();
      const seen = new Set<string>();
      for (;;) {
        // A timer the store keeps listing but cannot fire (a damaged index or row) is seen once, then left.
        // Bounded (limits.ts): timers beyond ROUND_BOUNDS.timersPerTick stay scheduled, due, for the next tick.
        if (seen.size >= ROUND_BOUNDS.timersPerTick) break;
        const due = (await this.store.dueTimers(now, 200)).filter((t) => !seen.has(t.id)).slice(0, ROUND_BOUNDS.timersPerTick - seen.size);
        if (due.length === 0) break;
        for (const timer of due) {
          seen.add(timer.id);
          const stored = timer.event as { type?: unknown } | null;
          // A damaged row still fires once, as an event no machine handles: visible in the history, never blocking.
          const payload: JsonValue = stored !== null && typeof stored === 'object' && typeof stored.type === 'string' ? timer.event : { type: 'spool.unreadable-timer', timerId: timer.id };
          const event = payload as { type: string };
          const fired = await this.store.fireTimer(timer.id, {
            jobId: timer.jobId,
            eventId: `timer~${timer.id}`,
            type: event.type,
            payload,
            payloadHash: hashJson(payload),
            at: now,
            source: 'timer',
            sourceId: timer.id,
          });
          if (fired) {
            crashPoint('after-fire');
            timersFired += 1;
            touched.add(timer.jobId);
            this.#emit({ type: 'timer.fired', jobId: timer.jobId, timerId: timer.id, eventType: event.type, dueAt: timer.dueAt, firedAt: now });
          }
        }
      }
      if (this.#process) await this.#drainAll([...touched]);
      await sched.fireDueSchedules(this.#schedulesHost); // due occurrences start their jobs (schedules.ts)
    }
    if (this.#hostDriven) await this.#renewClaims();
    // This process is alive: renew its own leases before freeing expired ones (host-driven mode has
    // no other heartbeat; otherwise the clock may have moved past the interval's last beat).
    if (this.#hostDriven || this.clock.now() - this.#lastHeartbeatAt >= this.#leaseMs / 3) await this.#heartbeat();
    await this.#expireLeases();
    // A round already under way (started by a commit of this tick) finishes first: its claims wait
    // for their jobs' commits in flight, and what it starts is started when tick() returns.
    while (this.#pumping) await new Promise<void>((resolve) => setImmediate(resolve));
    const activitiesStarted = await this.#pumpEffects();
    return { timersFired, activitiesStarted };
  }

  /**
   * The lease heartbeat: renew the leases of jobs whose activities run here, release the rest
   * (nothing here works on them), and stop touching any job whose lease another runner took.
   */
  async #heartbeat(): Promise<void> {
    this.#lastHeartbeatAt = this.clock.now();
    if (this.#closed || this.#leases.size === 0) return;
    const busy = new Set(this.#attempting.values());
    const keep: [string, number][] = [];
    const idle: [string, number][] = [];
    for (const entry of this.#leases) (busy.has(entry[0]) ? keep : idle).push(entry);
    if (keep.length > 0) {
      const renewed = await this.store.renewLeases(this.runnerId, keep.map(([id]) => id), this.clock.now() + this.#leaseMs);
      for (const [jobId, fence] of keep) if (renewed.get(jobId) !== fence) this.#leaseLost(jobId, fence);
    }
    // Each under its job's lock, checked again there: an activity of the job claimed since `idle`
    // was taken keeps the lease (a release still in flight could otherwise run after its claim).
    await Promise.all(idle.map(([jobId]) => this.#releaseIdle(jobId)));
  }

  /**
   * Lease expiries, once per call: leases of runners known to be gone (a dead process on this
   * host) are freed now; leases past their expiry are freed (a held job of this runtime's that
   * expired is given up). The freed jobs' pending events are then applied here.
   */
  async #expireLeases(): Promise<void> {
    const now = this.clock.now();
    const freed: { jobId: string; owner: string; fence: number }[] = [];
    for (const owner of await this.store.leaseHolders(now)) {
      if (owner !== this.runnerId && runnerIsGone(owner)) freed.push(...(await this.store.expireLeases({ owner })));
    }
    freed.push(...(await this.store.expireLeases({ expiredBy: now })));
    if (freed.length === 0) return;
    for (const lease of freed) {
      if (lease.owner === this.runnerId) this.#leaseLost(lease.jobId, lease.fence);
      this.#logEntry('info', 'lease freed', { jobId: lease.jobId, runner: lease.owner, fence: lease.fence });
      this.#emit({ type: 'lease.freed', jobId: lease.jobId, runner: lease.owner, fence: lease.fence });
    }
    if (this.#process) await this.#drainAll([...new Set(freed.map((l) => l.jobId))]);
  }

  /** This runtime no longer holds the job: forget the lease, drop the cached snapshot, abort its activities here. */
  #leaseLost(jobId: string, fence: number): void {
    if (this.#leases.get(jobId) !== fence) return;
    this.#leases.delete(jobId);
    this.#snapshots.delete(jobId);
    for (const running of this.#running.values()) {
      if (running.jobId === jobId) running.controller.abort(new Error(`lease lost: another runner holds job ${jobId}`));
    }
    this.#logEntry('warn', 'lease lost', { jobId, fence });
  }

  /** The lease a commit of this job is made under: kept while activities of the job run here (or are about to), released otherwise. */
  #leaseFor(jobId: string, hold: boolean, now: number): LeaseClaim {
    return { runner: this.runnerId, fence: this.#leases.get(jobId) ?? null, now, until: hold ? now + this.#leaseMs : null };
  }

  /** Renew the claims of this runtime's running activities (the heartbeat, done by `tick()` in host-driven mode). */
  async #renewClaims(): Promise<void> {
    const until = this.clock.now() + this.#leaseMs;
    for (const effect of await this.store.runningEffects(10_000)) {
      if (effect.claimedBy === this.runnerId && this.#running.has(effect.id)) await this.store.renewClaim(effect.id, effect.attempt, this.runnerId, until);
    }
  }

  /** When the next timer, retry or schedule occurrence is due (clock time), or null: a worker sleeps until then. */
  async nextWakeAt(): Promise<number | null> {
    this.#assertOpen();
    return sched.earliest(await this.store.nextWakeAt(), await sched.nextScheduleWake(this.#schedulesHost));
  }

  /**
   * Resolve when this runtime has no activity running and no event processing in flight. An
   * activity that never settles (one awaiting a signal) keeps it pending: wait for an event instead.
   */
  async idle(): Promise<void> {
    while (this.#background.size > 0 || this.#locks.size > 0 || this.#pumping) {
      await Promise.allSettled([...this.#background, ...this.#locks.values()]);
      if (this.#pumping) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Request cancellation: recorded once (visible on the job), running activities of the job are
   * aborted, and the machine's cancel event (default `CANCEL`) is delivered through the inbox.
   * The job is cancelled only when the machine reaches its cancelled state. Repeating is harmless.
   *
   * @example
   * await runtime.cancel(jobId, 'customer asked');
   */
  async cancel(jobId: string, reason = 'cancelled'): Promise<Job> {
    this.#assertOpen();
    requireText('job id', jobId);
    if (typeof reason !== 'string' || reason.length > 2000) throw new ValidationError('A cancel reason must be a string of at most 2000 characters.');
    const record = await this.#visible(jobId);
    if (TERMINAL.has(record.status)) {
      throw new JobTerminalError(`Job ${jobId} is ${describeEnd(record)}: there is nothing to cancel.`, { jobId, status: record.status });
    }
    const def = this.registry.route(record.machineId, record.machineVersion)?.target;
    if (!def) throw new JobQuarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
    if (!namesEventType(def, def.cancel.event)) {
      // A child job is the parent's to stop: it ends when the parent leaves the invoking state.
      const how = record.parent
        ? `it is a child job of ${record.parent.jobId}: cancel that job (or send it an event that leaves the invoking state) to stop it`
        : `handle it or set \`cancel: { event }\` in its definition`;
      throw new ValidationError(`Machine ${def.id} has no "${def.cancel.event}" event, so it cannot be cancelled; ${how}.`);
    }
    const payload = this.#cancelPayload(def, reason);
    const now = this.clock.now();
    const { first } = await this.store.requestCancel(
      jobId,
      reason,
      { jobId, eventId: 'spool.cancel', type: def.cancel.event, payload, payloadHash: hashJson(payload), at: now, source: 'cancel' },
      now,
    );
    if (first) {
      this.#emit({ type: 'cancel.requested', jobId, reason });
      this.#logEntry('info', 'cancel requested', { jobId, reason });
    }
    for (const running of this.#running.values()) {
      if (running.jobId === jobId) running.controller.abort(new Error(`job cancelled: ${reason}`));
    }
    if (this.#process) await this.#drain(jobId);
    return this.get(jobId);
  }

  #cancelPayload(def: RegisteredMachine, reason: string): JsonValue {
    const schema = eventSchemaFor(def, def.cancel.event);
    const withReason = { type: def.cancel.event, reason };
    if (!schema) return withReason;
    if (schema.safeParse(withReason).success) return withReason;
    return { type: def.cancel.event };
  }

  /**
   * Complete an activity that finished out of band (see `defer` in {@link ActivityArgs}). The
   * token is single-use; a rejected payload leaves it usable.
   */
  async complete(token: string, output: unknown = null): Promise<Job> {
    return this.#settleToken(token, { kind: 'succeeded', output: this.#jsonPayload('output', output) });
  }

  /** Fail an activity that was waiting out of band. The machine receives `xstate.error.actor.<id>`. */
  async fail(token: string, error: unknown = 'failed'): Promise<Job> {
    const payload = this.#jsonPayload('error', error);
    const info: ErrorInfo =
      payload !== null && typeof payload === 'object' && !Array.isArray(payload)
        ? {
            name: typeof payload['name'] === 'string' ? payload['name'] : 'Error',
            message: typeof payload['message'] === 'string' ? payload['message'] : JSON.stringify(payload),
            ...(typeof payload['code'] === 'string' ? { code: payload['code'] } : {}),
          }
        : { name: 'Error', message: String(payload) };
    return this.#settleToken(token, { kind: 'failed', error: info });
  }

  async #settleToken(token: string, result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo }): Promise<Job> {
    this.#assertOpen();
    if (typeof token !== 'string' || !/^[A-Za-z0-9_-]{16,128}$/.test(token)) throw new TokenError('This is not a completion token.');
    const effect = await this.store.effectByToken(token);
    const record = effect ? await this.store.getJob(effect.jobId) : undefined;
    if (!effect || !record || record.owner !== this.#owner) throw new TokenError('Unknown completion token, or it was already used.');
    if (!effect.active || effect.status !== 'waiting') {
      throw new TokenError(`The invocation behind this token is no longer current (${effect.status}); its outcome would be stale.`);
    }
    const now = this.clock.now();
    const payload = outcomeEvent(effect, effect.attempt, result.kind === 'succeeded' ? { output: result.output } : { error: result.error });
    const ok = await this.store.completeByToken(token, result, { ...payload, at: now }, now);
    if (!ok) throw new TokenError('Unknown completion token, or it was already used.');
    this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt: effect.attempt, outcome: result.kind });
    if (this.#process) await this.#drain(effect.jobId);
    return this.get(effect.jobId);
  }

  /** Set a job's progress (0-100). Once the job is final the update is ignored, with a visible note. */
  async setProgress(jobId: string, percent: number): Promise<Job> {
    this.#assertOpen();
    requireText('job id', jobId);
    checkPercent(percent);
    await this.#visible(jobId);
    return this.#progress(jobId, percent);
  }

  /** Set progress; from an activity (`lease`: its runner's fence), only while that runner holds the job. */
  async #progress(jobId: string, percent: number, lease?: { runner: string; fence: number }): Promise<Job> {
    const now = this.clock.now();
    if (!(await this.store.setProgress(jobId, percent, now, lease))) {
      const job = await this.store.getJob(jobId);
      const why = job && !TERMINAL.has(job.status) ? "the reporting attempt's runner no longer holds the job (its lease was taken)" : 'the job is final';
      await this.store.addNote({ jobId, kind: 'progress-ignored', message: `progress update to ${percent} ignored: ${why}`, at: now });
    }
    return this.get(jobId);
  }

  /** Link an output to a job. The same key (default: the uri) is attached once, however often it is sent. */
  async attachAsset(jobId: string, asset: AssetInput, from?: { effectId: string; attempt: number }): Promise<{ attached: boolean }> {
    return this.#attach(jobId, asset, from);
  }

  /** Attach an asset; from an activity (`lease`: its runner's fence), only while that runner holds the job. */
  async #attach(jobId: string, asset: AssetInput, from?: { effectId: string; attempt: number }, lease?: { runner: string; fence: number }): Promise<{ attached: boolean }> {
    this.#assertOpen();
    requireText('job id', jobId);
    await this.#visible(jobId);
    if (asset === null || typeof asset !== 'object' || typeof asset.type !== 'string' || typeof asset.uri !== 'string' || asset.uri.length === 0) {
      throw new ValidationError('An asset needs a string `type` and a non-empty string `uri`.');
    }
    if (asset.size !== undefined && (!Number.isSafeInteger(asset.size) || asset.size < 0)) throw new ValidationError('An asset `size` must be a non-negative integer.');
    const meta = asset.meta === undefined ? null : this.#jsonPayload('asset meta', asset.meta);
    const attached = await this.store.attachAsset({
      jobId,
      key: asset.key ?? asset.uri,
      type: asset.type,
      uri: asset.uri,
      size: asset.size ?? null,
      meta,
      effectId: from?.effectId ?? null,
      attempt: from?.attempt ?? null,
      createdAt: this.clock.now(),
    }, lease);
    return { attached };
  }

  /** Delete a finished job with its history, inbox, effects, timers, notes and assets. */
  async purge(jobId: string): Promise<void> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    if (!TERMINAL.has(record.status)) {
      throw new JobNotFinishedError(`Job ${jobId} is still ${record.status}; cancel it and let it finish before purging.`, { jobId });
    }
    await this.store.purgeJob(jobId);
    this.#snapshots.delete(jobId); // a new job may take the id: never hydrate it from the old one's cache
  }

  /** Everything recorded about one job: what `spool show` prints. */
  async details(jobId: string): Promise<JobDetails> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    const job = this.#view(record);
    const [history, events, effects, attempts, timers, notes, assets] = await Promise.all([
      this.store.history(jobId),
      this.store.listEvents(jobId),
      this.store.listEffects(jobId),
      this.store.listAttempts(jobId),
      this.store.listTimers(jobId),
      this.store.listNotes(jobId),
      this.store.listAssets(jobId),
    ]);
    const waitingFor = ops.waitingFor(this.#ops, record);
    const stuck = ops.isStuckJob(this.#ops, record, { events, effects, timers });
    return { job, history, events, effects, attempts, timers, notes, assets, waitingFor, stuck };
  }

  // ---------------------------------------------------------------- operations (operations.ts)

  /**
   * Suspend a job. It keeps accepting events durably (they stay pending: `send` resolves with
   * status `pending`) but processes none, fires no timers (they stay scheduled with their
   * deadlines) and starts no activity attempts (one already running finishes; its outcome waits).
   * `get`/`show` and `list({ suspended: true })` show it, with a note. Suspending again changes
   * nothing; a finished job is a {@link JobTerminalError}.
   *
   * @example
   * await runtime.suspend(jobId, 'provider outage');
   */
  async suspend(jobId: string, reason = 'suspended by an operator'): Promise<Job> {
    this.#assertOpen();
    await ops.suspendJob(this.#ops, jobId, reason);
    return this.get(jobId);
  }

  /**
   * Resume a suspended job: its pending events are applied in accept order, and (in a runtime
   * that runs effects, else in the worker's next round) timers that fell due fire at once and
   * waiting activities start. Resuming a job that is not suspended changes nothing.
   *
   * @example
   * await runtime.resume(jobId);
   */
  async resume(jobId: string): Promise<Job> {
    this.#assertOpen();
    if (await ops.resumeJob(this.#ops, jobId)) {
      if (this.#process) await this.#drain(jobId);
      if (this.#runEffects) await this.tick();
    }
    return this.get(jobId);
  }

  /**
   * Redrive a recorded failure. For each activity of the job that failed for good (retries
   * exhausted, a terminal error, an indeterminate outcome) while its invoking state is still
   * current (the machine has not handled the error: the error event is pending, or was ignored
   * or failed), start a fresh sequence of attempts (the policy's `maxAttempts` more) with the same
   * idempotency key; a note records it, a still-pending error event is recorded as stale.
   * Anything else is a {@link RetryRefusedError} saying what to do instead: a machine that already
   * handled the failure keeps its history (for a finished job, see {@link Runtime.retryAsNew});
   * an activity marked `unsafeToRepeat` needs `allowUnsafe: true`.
   *
   * @example
   * const { effects } = await runtime.retry(jobId);
   */
  async retry(jobId: string, options: { allowUnsafe?: boolean } = {}): Promise<{ job: Job; effects: EffectRecord[] }> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    if (record.quarantine !== null) throw new JobQuarantined(jobId, record.quarantine);
    const effects = await ops.redrive(this.#ops, record, options);
    if (this.#process) await this.#drain(jobId);
    if (this.#runEffects) this.#track(this.#pumpEffects());
    return { job: await this.get(jobId), effects };
  }

  /**
   * Start a new job of the same machine (its newest version) with a finished job's input, linked
   * to it by notes on both. Retrying the same job again returns the same new job (`created:
   * false`). Refused ({@link RetryRefusedError}) for a job still active, and for input with
   * sensitive fields: Spool never replays stored sensitive values into a new job.
   *
   * @example
   * const { job } = await runtime.retryAsNew(failedJobId);
   */
  async retryAsNew(jobId: string, options: { jobId?: string } = {}): Promise<{ job: Job; created: boolean }> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    const input = ops.inputForNewJob(record, this.registry.get(record.machineId, record.machineVersion));
    const idempotencyKey = ops.retryKey(jobId);
    const existing = await this.store.findByIdempotencyKey(this.#owner, idempotencyKey);
    if (existing) return { job: this.#view(existing), created: false };
    const job = await this.start(record.machineId, input, { idempotencyKey, ...(options.jobId !== undefined ? { jobId: options.jobId } : {}) });
    const at = this.clock.now();
    await this.store.addNote({ jobId, kind: 'retried-as-new', message: `retried as new job ${job.id} (${job.machineId}@${job.machineVersion}) with the same input`, at });
    await this.store.addNote({ jobId: job.id, kind: 'retry-of', message: `started as a retry of job ${jobId} with its input`, at });
    this.#logEntry('info', 'job retried as new', { jobId, newJobId: job.id });
    return { job: await this.get(job.id), created: true };
  }

  /**
   * Retention: delete this owner's finished jobs (every final status, or `status`) last updated
   * more than `olderThanMs` ago, with their history, inbox, effects, timers, notes and assets.
   *
   * @example
   * await runtime.purgeFinished({ olderThanMs: 30 * 86_400_000, status: 'done' }); // { purged: 12 }
   */
  async purgeFinished(options: { olderThanMs: number; status?: JobStatus }): Promise<{ purged: number }> {
    this.#assertOpen();
    // A misspelt `status` would purge every finished status: refused by name.
    requireOptions(options, 'purgeFinished', ['olderThanMs', 'status']);
    const ids = await ops.purgeFinished(this.#ops, options);
    for (const id of ids) this.#snapshots.delete(id);
    return { purged: ids.length };
  }

  /**
   * Figures for operators, all aggregates over the stored records of this owner's jobs (no
   * counters are kept): jobs by machine, state and status; quarantined, suspended, stuck and
   * exhausted jobs; backlog and the age of its oldest event; timer lag; attempts and failures by
   * activity; the claims held on running activities.
   *
   * @example
   * const { backlog, timers } = await runtime.stats();
   */
  async stats(): Promise<RuntimeStats> {
    this.#assertOpen();
    return ops.collectStats(this.#ops);
  }

  #opsHost: ops.OperationsHost | undefined;

  /** What operations.ts needs from this runtime. */
  get #ops(): ops.OperationsHost {
    this.#opsHost ??= {
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      visible: (jobId) => this.#visible(jobId),
      ready: (record) => this.#readyFrom(record),
      definition: (record) => this.registry.get(record.machineId, record.machineVersion),
      log: (level, msg, fields) => this.#logEntry(level, msg, fields),
    };
    return this.#opsHost;
  }

  // ---------------------------------------------------------------- schedules (schedules.ts)

  /**
   * Create or update (by id) a schedule: a cron expression (read in `timezone`, default UTC) or an
   * interval that starts jobs of `machineId` with `input`. The machine, the input and the
   * definition are validated first (typed errors; nothing is stored on error). Writing the same
   * definition again changes nothing, so every process may call it at boot. Occurrences fire in
   * `tick()` (the worker), each at most once across all processes, with the `overlap` and
   * `catchUp` policies; see {@link ScheduleSpec}.
   *
   * @example
   * await runtime.schedule({ id: 'nightly-export', machineId: 'export-job', input: { format: 'csv' },
   *   cron: '0 3 * * *', timezone: 'Europe/Paris', overlap: 'skip', catchUp: 'run-once' });
   */
  async schedule(spec: sched.ScheduleSpec): Promise<sched.ScheduleResult> {
    this.#assertOpen();
    return sched.upsertSchedule(this.#schedulesHost, spec);
  }

  /** Remove a schedule (true if there was one). The jobs it started carry on. */
  async unschedule(id: string): Promise<boolean> {
    this.#assertOpen();
    return sched.removeSchedule(this.#schedulesHost, id);
  }

  /** This owner's schedules, ordered by id, with their next occurrence and what they last did. */
  async schedules(): Promise<sched.Schedule[]> {
    this.#assertOpen();
    return sched.listSchedules(this.#schedulesHost);
  }

  #schedulesHostValue: sched.SchedulesHost | undefined;

  /** What schedules.ts needs from this runtime. */
  get #schedulesHost(): sched.SchedulesHost {
    this.#schedulesHostValue ??= {
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      hasMachine: (machineId) => this.registry.all().some((m) => m.id === machineId),
      canCancel: (machineId) => {
        const def = this.registry.latest(machineId);
        return namesEventType(def, def.cancel.event);
      },
      prepareStart: (machineId, input, jobId, at) => {
        const def = this.registry.latest(machineId);
        const parsed = this.#validateInput(def, input);
        checkId('job id', jobId);
        const { job, plan } = this.#newJob(def, parsed, jobId, null, hashJson({ machine: def.id, input: parsed }), at);
        return { job, sensitivePaths: sensitivePaths(parsed, def.sensitive), started: async (record) => void (await this.#started(record, def, plan, parsed)) };
      },
      cancelEvent: (record, reason, at) => {
        const def = this.registry.route(record.machineId, record.machineVersion)?.target;
        if (!def || !namesEventType(def, def.cancel.event)) return undefined;
        const payload = this.#cancelPayload(def, reason);
        return { jobId: record.id, eventId: 'spool.cancel', type: def.cancel.event, payload, payloadHash: hashJson(payload), at, source: 'cancel' };
      },
      cancelled: async (jobId, reason) => {
        this.#emit({ type: 'cancel.requested', jobId, reason });
        try {
          await this.cancel(jobId, reason); // the request is recorded: this aborts its activities and applies the event
        } catch (error) {
          if (!(error instanceof SpoolError && (error.category === 'terminal' || error.category === 'conflict'))) throw error;
        }
      },
      emit: (event) => this.#emit(event),
      log: (level, msg, fields) => this.#logEntry(level, msg, fields),
    };
    return this.#schedulesHostValue;
  }

  // ---------------------------------------------------------------- internals

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('This Spool runtime is closed; create a new one with createRuntime().');
  }

  /** A job read from the record this runtime last committed or read of it, if any: only what moves without a commit is read then (see JobStore.getJob). */
  #readKnown(jobId: string): Promise<JobRecord | undefined> {
    return this.store.getJob(jobId, this.#snapshots.get(jobId)?.record);
  }

  /** A job of this runtime's owner; `cached`: read it with {@link #readKnown}. */
  async #visible(jobId: string, cached = false): Promise<JobRecord> {
    if (typeof jobId !== 'string' || jobId.length === 0) throw new ValidationError('A job id must be a non-empty string.');
    const record = await (cached ? this.#readKnown(jobId) : this.store.getJob(jobId));
    if (!record || record.owner !== this.#owner) throw new JobNotFoundError(jobId);
    return record;
  }

  async #findExisting(jobId: string, key: string | null): Promise<JobRecord | undefined> {
    const byId = await this.store.getJob(jobId);
    if (byId) return byId;
    return key === null ? undefined : this.store.findByIdempotencyKey(this.#owner, key);
  }

  #sameStart(record: JobRecord, machineId: string, inputHash: string, jobId: string, key: string | null, requestedId: string | undefined): Job {
    if (record.owner !== this.#owner) {
      throw new IdempotencyConflictError(`Job id "${jobId}" is taken; choose another id.`, { jobId });
    }
    const what = key !== null && record.idempotencyKey === key ? `idempotency key "${key}"` : `job id "${jobId}"`;
    if (requestedId !== undefined && record.id !== requestedId) {
      throw new IdempotencyConflictError(`Idempotency key "${key}" belongs to job ${record.id}, not "${requestedId}"; reuse a key only for the same request.`, { jobId: record.id });
    }
    // The job with this id was started under another key (or none): returning it would leave the
    // key unrecorded, and a later start with the key alone would make a second job.
    if (key !== null && record.idempotencyKey !== key) {
      const had = record.idempotencyKey === null ? 'no idempotency key' : `idempotency key "${record.idempotencyKey}"`;
      throw new IdempotencyConflictError(`Job ${record.id} already exists, started with ${had}, not "${key}"; reuse a job id only with the key it was started with.`, { jobId: record.id });
    }
    if (record.machineId !== machineId) {
      throw new IdempotencyConflictError(`A job with ${what} already exists (${record.id}) and runs machine ${record.machineId}, not ${machineId}.`, { jobId: record.id });
    }
    if (record.inputHash !== inputHash) {
      throw new IdempotencyConflictError(
        `A job with ${what} already exists (${record.id}) with different input; reuse the key only for the same request.`,
        { jobId: record.id },
      );
    }
    return this.#view(record);
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
      // A schema's message may quote the value it refused: sensitive ones are redacted like any error's.
      throw new ValidationError(`Invalid input for ${def.id}: ${redactText(formatIssues(result.error), json, def.sensitive)}`, { machineId: def.id });
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
    if (!namesEventType(def, type)) {
      const known = [...def.eventTypes].filter((t) => !t.startsWith('xstate.')).sort().join(', ');
      throw new UnknownEventError(`Machine ${def.id}@${def.version} has no event "${type}" (known: ${known}).`, { eventType: type, machineId: def.id });
    }
    const schema = eventSchemaFor(def, type);
    if (!schema) return json;
    const result = schema.safeParse(json);
    if (!result.success) {
      throw new ValidationError(`Invalid ${type} event for ${def.id}: ${redactText(formatIssues(result.error), json, def.sensitive)}`, { eventType: type, machineId: def.id });
    }
    return toJson(result.data);
  }

  #jsonPayload(what: string, value: unknown): JsonValue {
    let walked: { depth: number; toJSON: boolean };
    try {
      walked = nestingDepth(value, MAX_DEPTH + 1);
    } catch (error) {
      throw new ValidationError(`The ${what} cannot be read as JSON: ${(error as Error).message}`);
    }
    if (walked.depth > MAX_DEPTH) throw new ValidationError(`The ${what} is nested deeper than ${MAX_DEPTH} levels.`);
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
    const json = JSON.parse(text) as JsonValue;
    // A `toJSON` method writes what the walk above did not see: count the JSON itself.
    if (walked.toJSON && nestingDepth(json, MAX_DEPTH + 1).depth > MAX_DEPTH) throw new ValidationError(`The ${what} is nested deeper than ${MAX_DEPTH} levels.`);
    return json;
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
      job: this.#view(record),
    };
  }

  #track(work: Promise<unknown>): void {
    const p = work.catch((error) => this.#logEntry('error', 'background processing failed', { error: toErrorInfo(error) }));
    this.#background.add(p);
    void p.finally(() => this.#background.delete(p));
  }

  /**
   * Count an operation that may commit, for group commit: while it runs, a commit of another
   * operation waits (one event-loop turn at most) so both share a transaction.
   */
  async #unit<T>(work: () => Promise<T>): Promise<T> {
    this.#units += 1;
    try {
      return await work();
    } finally {
      this.#units -= 1;
      if (this.#commitQueue.length > 0 && this.#commitQueue.length >= this.#units) this.#flushCommits();
    }
  }

  /** Drain many jobs at once, so their commits share transactions (group commit). */
  async #drainAll(ids: readonly string[]): Promise<number> {
    let settled = 0;
    for (let i = 0; i < ids.length; i += DRAIN_CONCURRENCY) {
      const counts = await Promise.all(ids.slice(i, i + DRAIN_CONCURRENCY).map((id) => this.#unit(() => this.#drain(id))));
      settled += counts.reduce((a, b) => a + b, 0);
    }
    return settled;
  }

  /**
   * Group commit: commits submitted while other jobs are mid-transition wait (one event-loop turn
   * at most) and go to the store as one batch: one transaction, one disk sync, each commit still
   * checked on its own. A caller is resolved only after the batch that holds its commit is durable.
   */
  #submit(commit: TransitionCommit): Promise<CommitResult> {
    return new Promise<CommitResult>((resolve, reject) => this.#enqueue({ commit, resolve, reject }));
  }

  /** A new job, group-committed like a transition: concurrent starts share a transaction and a sync. */
  #submitCreate(create: NewJob): Promise<CreateJobResult> {
    return new Promise<CreateJobResult>((resolve, reject) => this.#enqueue({ create, resolve, reject }));
  }

  /**
   * An attempt's outcome, group-committed: attempts that end in the same event-loop turn share a
   * transaction and a sync, and the outcome is durable before the caller goes on.
   */
  #submitFinish(finish: AttemptFinish): Promise<FinishStatus> {
    return new Promise<FinishStatus>((resolve, reject) => this.#enqueue({ finish, resolve, reject }, false));
  }

  /** An activity claim, group-committed: the claims of one pump round share a transaction and a sync. */
  #submitClaim(claim: EffectClaim): Promise<ClaimedEffect | undefined> {
    return new Promise<ClaimedEffect | undefined>((resolve, reject) => this.#enqueue({ claim, resolve, reject }, false));
  }

  /**
   * `eager`: flush as soon as every counted operation has submitted. Outcomes and claims are not
   * counted operations (they arrive together without knowing of each other), so they wait for the
   * end of the event-loop turn, when the others of their round have joined.
   */
  #enqueue(entry: QueuedWrite, eager = true): void {
    this.#commitQueue.push(entry);
    if ((eager && this.#commitQueue.length >= this.#units) || this.#commitQueue.length >= MAX_BATCH) this.#flushCommits();
    else if (!this.#flushTimer) this.#flushTimer = setImmediate(() => this.#flushCommits());
  }

  #flushCommits(): void {
    if (this.#flushTimer) {
      clearImmediate(this.#flushTimer);
      this.#flushTimer = undefined;
    }
    while (this.#commitQueue.length > 0) {
      const batch = this.#commitQueue.splice(0, MAX_BATCH);
      const creates = batch.filter((b) => 'create' in b);
      const commits = batch.filter((b) => 'commit' in b);
      const finishes = batch.filter((b) => 'finish' in b);
      const claims = batch.filter((b) => 'claim' in b);
      const written =
        commits.length === batch.length
          ? this.store.commit(commits.map((b) => b.commit)).then((results) => ({ creates: [], commits: results, finishes: [], claims: [] }))
          : this.store.writeBatch({
              creates: creates.map((b) => b.create),
              commits: commits.map((b) => b.commit),
              finishes: finishes.map((b) => b.finish),
              claims: claims.map((b) => b.claim),
            });
      written.then(
        (results) => {
          // Callers go on in the order their writes took effect: a claim that took a job's lease
          // after a commit released it must set its fence after that commit forgot the old one.
          settle(creates, results.creates);
          commits.forEach((b, i) => {
            const result = results.commits[i];
            if (result) b.resolve(result);
            else b.reject(new RevisionConflictError(`The store returned no result for job ${b.commit.jobId}.`));
          });
          settle(finishes, results.finishes);
          settle(claims, results.claims);
        },
        (error: unknown) => batch.forEach((b) => b.reject(error)),
      );
    }
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
        if (loaded.record.suspendedAt !== null) return settled; // suspended: its events wait for resume
        this.#pendingDrains.delete(jobId);
        const [event] = await this.store.pendingEvents(jobId, 1);
        if (!event) return settled;
        const result = await this.#applyPending(loaded, event);
        if (result === 'leased') return settled; // another runner holds the job: it applies its events
        if (result === 'refused') return settled; // the store refused the job's rows: it is quarantined
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
      const record = await (round === 0 ? this.#readKnown(jobId) : this.store.getJob(jobId));
      if (!record) return undefined;
      if (TERMINAL.has(record.status)) return { kind: 'terminal', record };
      const ready = this.#readyFrom(record);
      if (ready) return ready;
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
  async #check(jobId: string, known?: JobRecord): Promise<'missing' | 'ok' | 'quarantined' | 'migrated' | 'terminal'> {
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
      // Recovery passes the row it just listed; a stale one only costs a conflict and a fresh read.
      const record = attempt === 0 && known ? known : await this.store.getJob(jobId);
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
            reason = `migration from ${record.machineVersion} to ${route.target.version} failed: ${redactText(toErrorInfo(error).message, record.context, route.target.sensitive)}`;
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
            if (result === 'leased') return 'ok'; // its holder migrates it
            if (result === 'refused') return 'quarantined';
            if (result === 'conflict' || result === 'duplicate') continue;
            this.#logEntry('info', 'job migrated', { jobId, from: record.machineVersion, to: route.target.version });
            // Held back before its migration was registered: it runs now.
            if (record.quarantine !== null) await this.#release(jobId);
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
      // A job the store refused to commit stays held until its history and revision agree again
      // (a repaired row): releasing it would only fail the next commit the same way.
      if (record.quarantine?.startsWith(STORE_REFUSED) && (await this.store.history(jobId)).at(-1)?.revision !== record.revision) return 'quarantined';
      if (record.quarantine !== null) await this.#release(jobId);
      return 'ok';
    }
    throw new RevisionConflictError(`Job ${jobId} kept changing while being checked.`, { jobId });
  }

  async #release(jobId: string): Promise<void> {
    await this.store.setQuarantine(jobId, null, this.clock.now());
    this.#emit({ type: 'job.released', jobId });
    this.#logEntry('info', 'job released from quarantine', { jobId });
  }

  /**
   * The fast path: accept and apply a new event in one commit. It starts from the record the
   * caller just read; the commit checks the revision and that nothing is queued before the
   * event, so a stale start only costs a fallback to the queued path.
   */
  async #applyInline(accept: NewInboxEvent, visible: JobRecord): Promise<Applied | undefined> {
    const loaded = this.#readyFrom(visible) ?? (await this.#load(accept.jobId));
    if (!loaded || loaded.kind !== 'ready') return undefined;
    const result = await this.#applyEvent(loaded, accept.payload, { accept });
    return typeof result === 'object' ? result : undefined;
  }

  /** A record that can transition as it is (no quarantine, migration or corruption), hydrated or from the cache. */
  #readyFrom(record: JobRecord): Extract<Loaded, { kind: 'ready' }> | undefined {
    if (TERMINAL.has(record.status) || record.quarantine !== null || record.corruption !== undefined) return undefined;
    const route = this.registry.route(record.machineId, record.machineVersion);
    if (!route || route.chain.length > 0) return undefined;
    const cached = this.#snapshots.get(record.id);
    if (cached && cached.record.revision === record.revision && cached.record.createdAt === record.createdAt && cached.def === route.target) {
      return { kind: 'ready', record, def: route.target, snapshot: cached.snapshot, actor: cached.actor };
    }
    const json = parseSnapshot(record.snapshot);
    const hydrated = typeof json === 'string' ? undefined : hydrate(route.target, json, record.status);
    if (!hydrated?.ok) return undefined;
    this.#remember(record, route.target, hydrated.snapshot, hydrated.actor);
    return { kind: 'ready', record, def: route.target, snapshot: hydrated.snapshot, actor: hydrated.actor };
  }

  /**
   * Keep the record and snapshot a commit produced (or a read hydrated): the job's next event
   * skips hydration, and its send reads only the columns that change without a commit. Bounded.
   */
  #remember(record: JobRecord, def: RegisteredMachine, snapshot: AnyMachineSnapshot, actor?: unknown): void {
    const jobId = record.id;
    const previous = this.#snapshots.get(jobId);
    this.#snapshots.delete(jobId);
    const scope = actor ?? (previous?.def === def ? previous.actor : undefined);
    if (scope === undefined) return; // without a scope of its own the next event hydrates afresh
    this.#snapshots.set(jobId, { record, def, snapshot, actor: scope });
    if (this.#snapshots.size > SNAPSHOT_CACHE) this.#snapshots.delete(this.#snapshots.keys().next().value!);
  }

  async #applyPending(loaded: Loaded, event: QueuedEvent): Promise<'ok' | 'conflict' | 'duplicate' | 'leased' | 'refused'> {
    if (loaded.kind === 'held') return 'ok';
    if (loaded.kind === 'terminal') {
      const error = toErrorInfo(new JobTerminalError(`Job ${event.jobId} is ${describeEnd(loaded.record)}: the event arrived after its end.`));
      // Processed now: its sensitive fields are redacted as any processed event's (when its machine is known here).
      const sensitive = this.registry.get(loaded.record.machineId, loaded.record.machineVersion)?.sensitive;
      await this.store.rejectEvent(event.seq, error, this.clock.now(), sensitive && sensitive.size > 0 ? redact(event.payload, sensitive) : undefined);
      this.#emit({ type: 'event.rejected', jobId: event.jobId, eventId: event.eventId, error });
      return 'ok';
    }
    const payload = event.payload as { type?: unknown } | null;
    if (payload === null || typeof payload !== 'object' || typeof payload.type !== 'string') {
      const error = toErrorInfo(new CorruptRecordError(`The stored event ${event.eventId} of job ${event.jobId} is unreadable; it was set aside.`));
      await this.store.rejectEvent(event.seq, error, this.clock.now());
      this.#emit({ type: 'event.rejected', jobId: event.jobId, eventId: event.eventId, error });
      return 'ok';
    }
    const stale = await this.#staleReason(event);
    const result = await this.#applyEvent(loaded, event.payload, { seq: event.seq, eventId: event.eventId }, stale, event.source === 'timer' ? event.sourceId : null);
    return typeof result === 'object' ? 'ok' : result === 'outcome-not-current' ? 'conflict' : result;
  }

  /** Why an outcome or timer event no longer belongs to the current state, or null if it does. */
  async #staleReason(event: InboxRecord): Promise<string | null> {
    if (event.source === 'effect' && event.sourceId !== null) {
      const effect = await this.store.getEffect(event.sourceId);
      if (!effect || !effect.active) return `invocation ${event.sourceId} is no longer current (its state was left)`;
      if (effect.attempt !== event.attempt) return `attempt ${event.attempt} of ${event.sourceId} was superseded by attempt ${effect.attempt}`;
      if (effect.status !== 'succeeded' && effect.status !== 'failed') return `invocation ${event.sourceId} is ${effect.status}`;
    }
    if (event.source === 'timer' && event.sourceId !== null) {
      const timer = (await this.store.listTimers(event.jobId)).find((t) => t.id === event.sourceId);
      if (!timer || timer.status !== 'fired') return `timer ${event.sourceId} was cancelled`;
    }
    return null;
  }

  /** Compute the transition for one event and commit it, with every record it asks for, in one transaction. */
  async #applyEvent(
    loaded: Extract<Loaded, { kind: 'ready' }>,
    payload: JsonValue,
    source: { accept: NewInboxEvent; outcome?: OutcomeInCommit } | { seq: number; eventId: string },
    stale: string | null = null,
    timerId: string | null = null,
  ): Promise<Applied | 'conflict' | 'duplicate' | 'leased' | 'refused' | 'outcome-not-current'> {
    const { record, def, snapshot } = loaded;
    const event = payload as { type: string };
    const eventId = 'accept' in source ? source.accept.eventId : source.eventId;
    const now = this.clock.now();
    const revision = record.revision + 1;
    let next: AnyMachineSnapshot = snapshot;
    let actions: unknown[] = [];
    let status: 'applied' | 'ignored' | 'failed' | 'stale' = stale ? 'stale' : 'applied';
    let error: ErrorInfo | null = stale ? { name: 'StaleOutcome', message: stale } : null;
    let plan: ActionPlan | undefined;
    let relations: Relations | undefined;
    // The new snapshot's JSON, made while a failure can still be recorded as the event's.
    let persisted: string | undefined;
    if (!stale) {
      try {
        let base = snapshot;
        if (record.parent) {
          const json = parseSnapshot(record.snapshot);
          if (typeof json === 'string') throw new Error(json);
          [next, actions, base] = transitionAsChild(def.machine, json, structuredClone(event));
        } else if (loaded.actor !== undefined && def.scopeReusable) {
          // The event is JSON: a JSON round trip copies it for XState in half structuredClone's time.
          [next, actions] = transitionInScope(def.machine, loaded.actor, snapshot, toJson(event) as typeof event);
        } else {
          [next, actions] = transition(def.machine, snapshot, structuredClone(event));
        }
        // XState hands back the very same snapshot, with no actions, when nothing handled the event.
        if (next === base && actions.length === 0) status = 'ignored';
        else if (next.status === 'error') {
          status = 'failed';
          error = toErrorInfo(next.error);
        } else {
          plan = planActions(def, record.id, revision, actions, now, record.parent ? PARENT_REF : undefined);
          if (plan.problems.length === 0 && touchesRelations(record, def, plan)) relations = await this.#relations(record, def, plan, next, revision, now);
          if (plan.problems.length > 0) {
            status = 'failed';
            error = { name: 'UnsupportedAction', message: plan.problems.join('; ') };
          } else {
            persisted = persistedJson(def, next);
          }
        }
      } catch (thrown) {
        status = 'failed';
        error = toErrorInfo(thrown);
      }
    }
    if (status !== 'applied') {
      persisted = undefined;
      next = snapshot;
      plan = undefined;
      relations = undefined;
    }
    // A message may quote a sensitive value of the event or of the job's context (which keeps them).
    if (error) error = { ...error, message: redactText(error.message, [payload, record.context], def.sensitive) };
    // Nothing to redact: the validated payload is already a private JSON copy, stored as it is.
    const redacted = def.sensitive.size === 0 ? payload : redact(payload, def.sensitive);
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
        at: now,
      },
      {
        ...('accept' in source ? { accept: source.accept } : { seq: source.seq }),
        status,
        error,
        payload: redacted,
      },
      plan,
      status === 'applied' && timerId !== null ? timerId : undefined,
      relations,
      'accept' in source ? source.outcome : undefined,
      persisted,
    );
    if (typeof result !== 'object') return result;
    crashPoint('after-commit');
    if (status === 'failed') this.#logEntry('warn', 'event failed', { jobId: record.id, eventId, eventType: event.type, error });
    if (status === 'stale') this.#logEntry('info', 'stale outcome recorded', { jobId: record.id, eventId, eventType: event.type, reason: stale });
    if (plan) this.#afterCommit(record.id, result.record.revision, plan, (m) => redactText(m, [payload, record.context, result.record.context], def.sensitive));
    if (relations) this.#afterRelations(relations);
    return { status, error, record: result.record };
  }

  /**
   * What a transition means for other jobs: child machines it invoked become child jobs (created
   * in the same commit), events it sends to children or its parent go to their inboxes in the
   * same commit, a child that ended settles its invocation in the parent, and children of states
   * it left are stopped after the commit. Called only for a plan that `touchesRelations`.
   */
  async #relations(record: JobRecord, def: RegisteredMachine, plan: ActionPlan, next: AnyMachineSnapshot, revision: number, now: number): Promise<Relations> {
    const out: Relations = { children: [], effects: [], deliveries: [], stopChildren: [], touched: new Set() };
    const existing = plan.childSends.length > 0 || plan.effects.deactivate.length > 0 ? await this.store.listEffects(record.id) : [];
    const liveChildren = new Map(existing.filter((e) => e.kind === 'child' && e.active).map((e) => [e.actorId, e.id]));
    for (const actorId of plan.effects.deactivate) {
      const childJob = liveChildren.get(actorId);
      if (childJob !== undefined) {
        out.stopChildren.push(childJob);
        liveChildren.delete(actorId);
      }
    }
    this.#spawnChildren(record.id, record.owner, def, plan.spawnMachines, revision, now, out, plan.problems);
    for (const spawn of plan.spawnMachines) liveChildren.set(spawn.actorId, `${record.id}~${spawn.actorId}~r${revision}`);
    plan.childSends.forEach((send, i) => {
      const childJob = liveChildren.get(send.actorId);
      if (childJob === undefined) {
        plan.problems.push(`sendTo ${send.actorId}: no running child machine with that id`);
        return;
      }
      out.deliveries.push(relatedEvent(childJob, `parent~${record.id}~r${revision}~${i}`, send.event, now, 'parent'));
      out.touched.add(childJob);
    });
    if (record.parent) {
      const parent = record.parent;
      plan.parentSends.forEach((event, i) => {
        out.deliveries.push(relatedEvent(parent.jobId, `child~${record.id}~r${revision}~${i}`, event, now, 'child'));
        out.touched.add(parent.jobId);
      });
      if (next.status === 'done') {
        const effect = await this.store.getEffect(parent.effectId);
        if (effect) {
          const output = toJson(next.output ?? null);
          out.settleParent = { effectId: effect.id, output, event: { ...outcomeEvent(effect, 1, { output }), at: now } };
          out.touched.add(parent.jobId);
        }
      }
    }
    return out;
  }

  /** Child jobs (and their own children) for the child machines a transition invoked. */
  #spawnChildren(
    parentId: string,
    owner: string | null,
    def: RegisteredMachine,
    spawns: ActionPlan['spawnMachines'],
    revision: number,
    now: number,
    out: Relations,
    problems: string[],
  ): void {
    for (const spawn of spawns) {
      const childDef = this.registry.get(`${def.id}.${spawn.src}`, def.version);
      if (!childDef) {
        problems.push(`child machine "${spawn.src}" is not registered with ${def.id}@${def.version}`);
        continue;
      }
      const childId = `${parentId}~${spawn.actorId}~r${revision}`;
      let snapshot: AnyMachineSnapshot;
      let actions: unknown[];
      try {
        [snapshot, actions] = initialAsChild(childDef.machine, spawn.input);
      } catch (error) {
        problems.push(`child machine "${spawn.src}" could not start: ${toErrorInfo(error).message}`);
        continue;
      }
      // XState keeps a start that threw (a context factory, an eventless loop) as an errored snapshot:
      // a child job born ended would leave its parent waiting for an outcome that never comes.
      if (snapshot.status === 'error') {
        problems.push(`child machine "${spawn.src}" could not start: ${toErrorInfo(snapshot.error).message}`);
        continue;
      }
      const childPlan = planActions(childDef, childId, 1, actions, now, PARENT_REF);
      problems.push(...childPlan.problems);
      if (childPlan.childSends.length > 0) problems.push(`child machine "${spawn.src}" sends to its own children on entry; not supported`);
      const value = toJson(snapshot.value);
      const context = toJson(snapshot.context);
      out.effects.push({ id: childId, jobId: parentId, actorId: spawn.actorId, src: spawn.src, kind: 'child', input: spawn.input, maxAttempts: 1, unsafe: false, createdRevision: revision, at: now });
      const job: NewJob = {
        id: childId,
        machineId: childDef.id,
        machineVersion: childDef.version,
        status: snapshot.status as JobStatus,
        value,
        statePaths: statePaths(snapshot.value),
        context,
        snapshot: JSON.stringify(childDef.machine.getPersistedSnapshot(snapshot)),
        input: redact(spawn.input, childDef.sensitive),
        inputHash: hashJson({ machine: childDef.id, input: spawn.input }),
        idempotencyKey: null,
        owner,
        at: now,
        parent: { jobId: parentId, effectId: childId },
        runner: this.runnerId,
        progress: contextProgress(context) ?? null,
        transition: { eventId: null, eventType: 'xstate.init', payload: redact(spawn.input, childDef.sensitive), from: null, to: value, outcome: 'started', error: null, at: now },
        effects: childPlan.effects.create,
        timers: childPlan.timers.schedule,
        deliveries: childPlan.deliveries,
      };
      out.children.push(job);
      out.touched.add(childId);
      const grandchildren: Relations = { children: [], effects: [], deliveries: [], stopChildren: [], touched: new Set() };
      this.#spawnChildren(childId, owner, childDef, childPlan.spawnMachines, 1, now, grandchildren, problems);
      job.effects = [...(job.effects ?? []), ...grandchildren.effects];
      out.children.push(...grandchildren.children);
      out.deliveries.push(...grandchildren.deliveries);
      for (const id of grandchildren.touched) out.touched.add(id);
      childPlan.parentSends.forEach((event, i) => out.deliveries.push(relatedEvent(parentId, `child~${childId}~r1~${i}`, event, now, 'child')));
      if (childPlan.parentSends.length > 0) out.touched.add(parentId);
    }
  }

  /** After a commit: stop children of left states, and let the jobs that received events run. */
  #afterRelations(relations: Relations): void {
    for (const childJob of relations.stopChildren) this.#track(this.#unit(() => this.#stopJob(childJob)));
    if (relations.children.some((c) => c.effects?.some((e) => e.kind !== 'child'))) this.#track(this.#pumpEffects());
    if (!this.#process) return;
    for (const jobId of relations.touched) this.#track(this.#unit(() => this.#drain(jobId)));
  }

  /** Stop a child job whose invoking state was left: status `stopped`, its effects and timers cancelled, its own children stopped. */
  async #stopJob(jobId: string): Promise<void> {
    const grandchildren = await this.#withLock(jobId, async () => {
      for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
        const record = await this.store.getJob(jobId);
        if (!record || TERMINAL.has(record.status)) return [];
        const children = (await this.store.listEffects(jobId)).filter((e) => e.kind === 'child' && e.active).map((e) => e.id);
        const json = parseSnapshot(record.snapshot);
        const snapshot = typeof json === 'string' ? record.snapshot : JSON.stringify({ ...json, status: 'stopped' });
        const now = this.clock.now();
        const [result] = await this.store.commit([
          {
            jobId,
            expectedRevision: record.revision,
            job: { status: 'stopped', value: record.value, statePaths: statePaths(record.value), context: record.context, snapshot, machineVersion: record.machineVersion, at: now },
            transition: { eventId: null, eventType: 'xstate.stop', payload: { type: 'xstate.stop' }, from: record.value, to: record.value, outcome: 'applied', error: null, at: now },
            stopAll: true,
            // The parent's decision overrides any lease on the child: the holder's next write fails its fence.
            lease: { ...this.#leaseFor(jobId, false, now), force: true },
          },
        ]);
        if (result?.ok) {
          this.#snapshots.delete(jobId);
          this.#leases.delete(jobId);
          for (const running of this.#running.values()) if (running.jobId === jobId) running.controller.abort(new Error('stopped: its parent left the invoking state'));
          this.#logEntry('info', 'child job stopped', { jobId });
          return children;
        }
      }
      return [];
    });
    for (const child of grandchildren) await this.#stopJob(child);
  }

  async #commitOne(
    record: JobRecord,
    def: RegisteredMachine,
    next: AnyMachineSnapshot,
    transitionDraft: TransitionCommit['transition'],
    event?: TransitionCommit['event'],
    plan?: ActionPlan,
    consumedTimer?: string,
    relations?: Relations,
    outcome?: OutcomeInCommit,
    persisted?: string,
  ): Promise<{ record: JobRecord } | 'conflict' | 'duplicate' | 'leased' | 'refused' | 'outcome-not-current'> {
    const now = transitionDraft.at;
    const context = toJson(next.context);
    // Progress follows context.progress when the machine changes it; activities may set it in between.
    const progress = contextProgress(context) === contextProgress(record.context) ? undefined : contextProgress(context);
    const commit: TransitionCommit = {
      jobId: record.id,
      expectedRevision: record.revision,
      job: {
        status: next.status as JobStatus,
        value: toJson(next.value),
        statePaths: statePaths(next.value),
        context,
        snapshot: persisted ?? persistedJson(def, next),
        machineVersion: def.version,
        ...(progress !== undefined ? { progress } : {}),
        at: now,
      },
      transition: transitionDraft,
      ...(event ? { event } : {}),
      ...(plan
        ? {
            effects: { create: [...plan.effects.create, ...(relations?.effects ?? [])], deactivate: plan.effects.deactivate },
            timers: plan.timers,
            deliveries: [...plan.deliveries, ...(relations?.deliveries ?? [])],
          }
        : {}),
      ...(relations?.children.length ? { children: relations.children } : {}),
      ...(relations?.settleParent ? { settleParent: relations.settleParent } : {}),
      ...(consumedTimer !== undefined ? { consumedTimer } : {}),
      lease: this.#leaseFor(record.id, next.status === 'active' && this.#holdsWork(record.id, plan), now),
      ...(outcome ? { finish: outcome.finish } : {}),
    };
    const result = await this.#submit(commit);
    if (!result) throw new RevisionConflictError(`The store returned no result for job ${record.id}.`);
    if (result.ok) {
      if (commit.lease?.until != null && result.fence !== null) this.#leases.set(record.id, result.fence);
      else this.#leases.delete(record.id);
    }
    if (!result.ok) {
      if (result.reason === 'leased') {
        // Another live runner holds the job: its events wait in the inbox for that runner.
        const held = this.#leases.get(record.id);
        if (held !== undefined) this.#leaseLost(record.id, held);
        return 'leased';
      }
      if (result.reason === 'conflict' || result.reason === 'event-settled') return 'conflict';
      if (result.reason === 'duplicate-event') return 'duplicate';
      if (result.reason === 'outcome-not-current') return 'outcome-not-current';
      // The store refused the rows themselves (a damaged job: its history disagrees with its
      // revision…): hold this job back with the reason, and let every other job carry on.
      const reason = `${STORE_REFUSED}${result.error.message}`;
      await this.store.setQuarantine(record.id, reason, this.clock.now());
      this.#snapshots.delete(record.id);
      this.#emit({ type: 'job.quarantined', jobId: record.id, reason });
      this.#logEntry('error', 'job quarantined', { jobId: record.id, reason });
      return 'refused';
    }
    const updated: JobRecord = {
      ...record,
      revision: result.revision,
      status: commit.job.status,
      value: commit.job.value,
      context: commit.job.context,
      snapshot: commit.job.snapshot,
      machineVersion: def.version,
      progress: commit.job.progress === undefined ? record.progress : commit.job.progress,
      updatedAt: now,
    };
    // The attempt's end is told before the transition it caused, as when it is recorded on its own.
    outcome?.recorded();
    // The job view and the event are built only for someone listening (the hot path has no one).
    if (this.#listeners.size > 0) {
      const job = toJob(updated, def);
      this.#emit({ type: 'job.committed', job, transition: { ...transitionDraft, jobId: record.id, revision: result.revision, runner: this.runnerId, fence: result.fence } });
    }
    if (TERMINAL.has(updated.status) && !TERMINAL.has(record.status)) {
      this.#logEntry('info', 'job finished', { jobId: record.id, status: updated.status, state: updated.value });
    }
    this.#remember(updated, def, next);
    return { record: updated };
  }

  /** Whether this runtime keeps the job's lease after a commit: its activities run (or are about to run) here. */
  #holdsWork(jobId: string, plan: ActionPlan | undefined): boolean {
    if (this.#runEffects && plan?.effects.create.length) return true;
    for (const [effectId, id] of this.#attempting) if (id === jobId && !this.#finishing.has(effectId)) return true;
    return false;
  }

  /** Carry out what a committed transition asked for: abort left invocations, run actions, start effects. */
  #afterCommit(jobId: string, revision: number, plan: ActionPlan, clean?: (message: string) => string): void {
    for (const actorId of plan.effects.deactivate) {
      for (const [effectId, running] of this.#running) {
        if (running.jobId === jobId && running.actorId === actorId && !plan.effects.create.some((e) => e.id === effectId)) {
          running.controller.abort(new Error(`state left: invocation ${actorId} is no longer current`));
        }
      }
    }
    this.#runActions(jobId, revision, plan.afterCommit, clean);
    if (plan.deliveries.length > 0) this.#pendingDrains.add(jobId);
    if (plan.effects.create.length > 0) this.#track(this.#pumpEffects());
    if (plan.timers.schedule.length > 0) this.#emit({ type: 'timers.scheduled', jobId, dueAt: plan.timers.schedule.map((t) => t.dueAt) });
  }

  /** Carry out the actions a committed transition asked for. Runs only after the commit. */
  #runActions(jobId: string, revision: number, actions: readonly unknown[], clean: (message: string) => string = (m) => m): void {
    for (const raw of actions) {
      const action = raw as { type: string; params?: Record<string, unknown>; info?: unknown; exec?: (info: unknown, params: unknown) => void };
      const emitted = action.type === 'xstate.emit';
      if (!emitted && (action.type.startsWith('xstate.') || typeof action.exec !== 'function')) continue;
      // The transition is committed: what an action throws (or an emitted event JSON cannot hold)
      // is reported, and never reaches the caller whose event was applied.
      try {
        if (emitted) this.#emit({ type: 'emitted', jobId, event: toJson(action.params?.['event']) });
        else action.exec!(action.info, action.params);
      } catch (error) {
        const raw = toErrorInfo(error);
        const info = { ...raw, message: clean(raw.message) };
        this.#emit({ type: 'action.failed', jobId, revision, action: action.type, error: info });
        this.#logEntry('error', 'action failed after commit', { jobId, action: action.type, error: info });
        // On the job's record too (`show` lists notes): the transition stands, the action's work did not happen.
        const note = { jobId, kind: 'action-failed', message: `action ${action.type} failed after the commit of revision ${revision} (the transition stands): ${info.message}`, at: this.clock.now() };
        this.#track(this.store.addNote(note).catch(() => undefined));
      }
    }
  }

  #view(record: JobRecord): Job {
    return toJob(record, this.registry.get(record.machineId, record.machineVersion));
  }

  /** Start due activities up to the concurrency limit. Returns how many attempts it started. */
  async #pumpEffects(): Promise<number> {
    if (!this.#runEffects || this.#closing) return 0;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return 0;
    }
    this.#pumping = true;
    let started = 0;
    try {
      do {
        this.#pumpAgain = false;
        started += await this.#takeOverOrphans();
        const free = this.#maxActivities - this.#running.size;
        if (free <= 0) break;
        for (let window: number | undefined = free + this.#running.size; window !== undefined; window = widerScan(window)) {
          const due = await this.store.dueEffects(this.clock.now(), window, this.runnerId);
          let held = 0;
          // The round's claims go out together and share one group-commit transaction. One claim
          // per job: a second claim of the same job needs the lease fence the first one returns.
          const starts: Promise<boolean>[] = [];
          const jobs = new Set<string>();
          for (const effect of due) {
            if (this.#running.size + starts.length >= this.#maxActivities || this.#closing) break;
            if (this.#running.has(effect.id)) continue;
            if (!this.#slots.has(effect.src)) held += 1; // over its activityConcurrency: stays pending in the store
            else if (jobs.has(effect.jobId)) this.#pumpAgain = true; // next round, with the fence
            else {
              jobs.add(effect.jobId);
              starts.push(this.#startAttempt(effect));
            }
          }
          for (const ok of await Promise.all(starts)) if (ok) started += 1;
          // Held rows may hide startable ones behind them: read further, up to a bound (limits.ts).
          if (held === 0 || due.length < window || this.#running.size >= this.#maxActivities || this.#closing) break;
        }
      } while (this.#pumpAgain && !this.#closing);
    } finally {
      this.#pumping = false;
    }
    return started;
  }

  /** Activities claimed by a runner that is gone (crashed process, closed runtime) are taken over now. */
  async #takeOverOrphans(): Promise<number> {
    let started = 0;
    for (const effect of await this.store.runningEffects(500)) {
      if (this.#running.size >= this.#maxActivities || this.#closing) break;
      if (effect.claimedBy === null || this.#running.has(effect.id) || !runnerIsGone(effect.claimedBy)) continue;
      if (await this.#recoverInterrupted(effect, effect.claimedBy)) started += 1;
    }
    return started;
  }

  /**
   * An attempt was interrupted (its runner died). Safe activities run again with the same
   * idempotency key; unsafe ones, and ones out of attempts, deliver an error event instead.
   */
  async #recoverInterrupted(effect: EffectRecord, deadRunner: string): Promise<boolean> {
    const now = this.clock.now();
    let error: ErrorInfo | undefined;
    if (effect.unsafe) {
      error = toErrorInfo(
        new IndeterminateOutcomeError(`Attempt ${effect.attempt} of ${effect.src} was interrupted and it is unsafe to repeat; its outcome is unknown. Reconcile with the provider.`),
      );
      error.code = 'SPOOL_INDETERMINATE';
    } else if (effect.attempt >= effect.maxAttempts) {
      error = { name: 'RetriesExhausted', message: `Attempt ${effect.attempt} of ${effect.maxAttempts} of ${effect.src} was interrupted and no attempts are left.`, code: 'SPOOL_RETRIES_EXHAUSTED' };
    }
    if (error) {
      const event = { ...outcomeEvent(effect, effect.attempt, { error }), at: now };
      if (await this.store.failEffect(effect.id, error, event, now)) {
        this.#logEntry('warn', 'interrupted activity not re-run', { jobId: effect.jobId, effectId: effect.id, error });
        if (this.#process) this.#track(this.#drain(effect.jobId));
      }
      return false;
    }
    return this.#startAttempt(effect, deadRunner);
  }

  /** Claim the next attempt of an activity and run it in the background. */
  async #startAttempt(effect: EffectRecord, takeOver?: string): Promise<boolean> {
    if (!this.#slots.has(effect.src)) return false; // over its activityConcurrency: left in the store for a free slot
    if (effect.status === 'running' && takeOver === undefined) {
      // Its claim expired: the runner may be alive but stuck. Treat as interrupted.
      if (effect.claimedBy !== null && (effect.unsafe || effect.attempt >= effect.maxAttempts)) {
        await this.#recoverInterrupted(effect, effect.claimedBy);
        return false;
      }
    }
    const now = this.clock.now();
    // Slot and attempt are counted before anything is awaited: other claims of the round see the
    // slot taken, and a commit of the job built meanwhile keeps the lease the claim is taking.
    this.#slots.take(effect.src);
    this.#attempting.set(effect.id, effect.jobId);
    let claimed: ClaimedEffect | undefined;
    let def: RegisteredMachine | undefined;
    try {
      // Only a runtime that has the job's machine version runs its activities. Another one (a
      // worker started without the module) leaves them unclaimed, where it would fail them for
      // good: the job is migrated or quarantined instead (visible), and its activities wait.
      const record = await this.#readKnown(effect.jobId);
      if (!record || TERMINAL.has(record.status)) return false;
      def = this.registry.get(record.machineId, record.machineVersion);
      if (!def) {
        this.#attempting.delete(effect.id); // no attempt: a migration committed by the check takes no lease for it
        await this.#withLock(effect.jobId, () => this.#check(effect.jobId)).catch((error: unknown) => {
          this.#logEntry('warn', 'could not check a job whose activity this runtime cannot run', { jobId: effect.jobId, error: toErrorInfo(error) });
        });
        return false;
      }
      // Under the job's lock, as its commits are: the claim goes to the store once a commit of the
      // job in flight has settled, with the fence that commit left (an asynchronous store may run
      // two writes in flight in either order, and deliver their results in either order).
      claimed = await this.#withLock(effect.jobId, async () => {
        const claim = await this.#submitClaim({ id: effect.id, runner: this.runnerId, now, claimUntil: now + this.#leaseMs, takeOver, fence: this.#leases.get(effect.jobId) ?? null });
        if (claim) this.#leases.set(claim.jobId, claim.leaseFence);
        return claim;
      });
    } finally {
      if (!claimed) {
        this.#slots.release(effect.src);
        this.#attempting.delete(effect.id);
      }
    }
    if (!claimed) return false;
    crashPoint('after-claim');
    const controller = new AbortController();
    this.#running.set(claimed.id, { jobId: claimed.jobId, actorId: claimed.actorId, controller });
    this.#emit({ type: 'activity.started', jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#logEntry('info', 'activity started', { jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#track(this.#runAttempt(claimed, def, controller).finally(() => this.#attempting.delete(claimed.id)));
    return true;
  }

  async #runAttempt(effect: EffectRecord, def: RegisteredMachine | undefined, controller: AbortController): Promise<void> {
    const attempt = effect.attempt;
    const heartbeat = this.#hostDriven
      ? undefined
      : setInterval(() => {
          void this.store.renewClaim(effect.id, attempt, this.runnerId, this.clock.now() + this.#leaseMs).catch(() => undefined);
        }, Math.max(1000, Math.floor(this.#leaseMs / 3)));
    heartbeat?.unref();
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      const logic = def?.machine.implementations.actors[effect.src] as { config?: (args: unknown) => unknown } | undefined;
      if (!def || typeof logic?.config !== 'function') {
        throw Object.assign(new Error(`No activity "${effect.src}" in the registered machine.`), { terminal: true });
      }
      const args: ActivityArgs & { self: undefined; system: undefined; emit: () => void } = {
        input: structuredClone(effect.input),
        idempotencyKey: effect.id,
        attempt,
        signal: controller.signal,
        jobId: effect.jobId,
        defer: (onToken) => {
          const token = tokenFor();
          pendingToken = { token, onToken };
          return deferred(token);
        },
        // Writes of an attempt are fenced like its outcome: ignored once another runner holds the job.
        progress: async (percent) => {
          this.#assertOpen();
          checkPercent(percent);
          await this.#progress(effect.jobId, percent, this.#attemptLease(effect.jobId));
        },
        attachAsset: async (asset) => {
          await this.#attach(effect.jobId, asset, { effectId: effect.id, attempt }, this.#attemptLease(effect.jobId));
        },
        self: undefined,
        system: undefined,
        emit: () => undefined,
      };
      let pendingToken: { token: string; onToken: ((token: string) => void | Promise<void>) | undefined } | undefined;
      // Shutdown aborts the attempt and stops waiting for it, whether or not the activity heeds
      // its signal: the attempt is taken over by the next runtime, and close() must not hang.
      const abandoned = new Promise<never>((_, reject) => {
        controller.signal.addEventListener('abort', () => this.#closing && reject(controller.signal.reason as Error), { once: true });
      });
      const value = await Promise.race([logic.config(args), abandoned]);
      if (isDeferred(value) && pendingToken && pendingToken.token === value.token) {
        const status = await this.#submitFinish({ id: effect.id, attempt, result: { kind: 'waiting', token: value.token }, at: this.clock.now(), lease: this.#attemptLease(effect.jobId) });
        this.#attempting.delete(effect.id);
        await this.#releaseIdle(effect.jobId); // waiting on a token: nothing runs here for it
        // The token is handed out only once the waiting state is durable.
        if (status === 'current') await pendingToken.onToken?.(value.token);
        this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt, outcome: status === 'current' ? 'waiting' : 'stale' });
        return;
      }
      outcome = { ok: true, value };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      if (heartbeat) clearInterval(heartbeat);
      this.#running.delete(effect.id);
      this.#slots.release(effect.src);
    }
    if (this.#closing && controller.signal.aborted) return; // shutdown: the next runtime takes the attempt over
    crashPoint('before-outcome');
    await this.#recordOutcome(effect, def, outcome);
  }

  /** The lease an attempt's outcome is recorded under: the fence this runtime holds on the job (-1: none, so it is refused). */
  #attemptLease(jobId: string): { runner: string; fence: number } {
    return { runner: this.runnerId, fence: this.#leases.get(jobId) ?? -1 };
  }

  async #recordOutcome(effect: EffectRecord, def: RegisteredMachine | undefined, outcome: { ok: true; value: unknown } | { ok: false; error: unknown }): Promise<void> {
    const attempt = effect.attempt;
    const now = this.clock.now();
    let status: FinishStatus;
    let reported: 'succeeded' | 'failed' | 'retrying' | 'stale';
    let errorInfo: ErrorInfo | undefined;
    let output: JsonValue | undefined;
    // Told once: by the commit that records the outcome with its transition (before that
    // transition's own event), or below once the outcome is recorded on its own.
    let told = false;
    const tell = (result: typeof reported) => {
      if (told) return;
      told = true;
      this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt, outcome: result, ...(errorInfo ? { error: errorInfo } : {}) });
      this.#logEntry(result === 'succeeded' ? 'info' : 'warn', `activity ${result}`, { jobId: effect.jobId, effectId: effect.id, attempt, ...(errorInfo ? { error: errorInfo } : {}) });
    };
    if (outcome.ok) {
      try {
        output = toJson(outcome.value === undefined ? null : outcome.value);
      } catch (error) {
        outcome = { ok: false, error: Object.assign(new Error(`activity output is not JSON: ${(error as Error).message}`), { terminal: true }) };
      }
    }
    if (outcome.ok) {
      const event = { ...outcomeEvent(effect, attempt, { output: output ?? null }), at: now };
      status = await this.#finishApplying({ id: effect.id, attempt, result: { kind: 'succeeded', output: output ?? null, event }, at: now, lease: this.#attemptLease(effect.jobId) }, effect.jobId, () => tell('succeeded'));
      reported = 'succeeded';
    } else {
      const { info, terminal, retryAfterMs } = classify(outcome.error);
      const policy = def?.activities[effect.src] ?? {};
      errorInfo = { ...info, message: redactText(info.message, effect.input, def?.sensitive ?? new Set()) };
      const retry = !terminal && attempt < effect.maxAttempts && (policy.retryOn ? policy.retryOn(errorInfo) : true);
      if (retry) {
        const retryAt = now + (retryAfterMs ?? backoffDelay(policy, attempt, effect.id));
        status = await this.#submitFinish({ id: effect.id, attempt, result: { kind: 'failed', error: errorInfo, retryAt, event: null }, at: now, lease: this.#attemptLease(effect.jobId) });
        reported = 'retrying';
      } else {
        const error: ErrorInfo = terminal ? errorInfo : { ...errorInfo, code: errorInfo.code ?? 'SPOOL_RETRIES_EXHAUSTED' };
        const event = { ...outcomeEvent(effect, attempt, { error: { ...error, attempts: attempt } }), at: now };
        status = await this.#finishApplying({ id: effect.id, attempt, result: { kind: 'failed', error, retryAt: null, event }, at: now, lease: this.#attemptLease(effect.jobId) }, effect.jobId, () => tell('failed'));
        reported = 'failed';
      }
    }
    this.#attempting.delete(effect.id); // recorded: a commit of the job may release its lease now
    crashPoint('after-outcome');
    if (status !== 'current') reported = 'stale';
    if (status === 'lease-lost') this.#leaseLost(effect.jobId, this.#leases.get(effect.jobId) ?? -1);
    tell(reported);
    if (this.#process && reported !== 'retrying') await this.#unit(() => this.#drain(effect.jobId));
    if (reported === 'retrying') this.#emit({ type: 'timers.scheduled', jobId: effect.jobId, dueAt: [] });
    await this.#releaseIdle(effect.jobId);
    this.#track(this.#pumpEffects());
  }

  /**
   * Record an attempt's outcome that goes to the machine as its event. When this runtime applies
   * events and nothing waits before it in the job's inbox, the outcome is recorded in the commit
   * that applies its event (the store writes the attempt's end first, and nothing at all if the
   * attempt is no longer current): one write, no queued inbox row. Otherwise, or when that commit
   * is refused, it is recorded on its own (group-committed) and applied in inbox order.
   */
  async #finishApplying(finish: AttemptFinish & { result: { event: NewInboxEvent } }, jobId: string, recorded: () => void): Promise<FinishStatus> {
    const event = finish.result.event;
    if (this.#process && !this.#closing) {
      const effectId = finish.id;
      // The commit decides the job's lease as if the attempt were over (released if nothing else
      // runs here); until it is durable the heartbeat still counts the attempt and keeps the lease.
      this.#finishing.add(effectId);
      // Set once the commit holding the outcome is durable: whatever happens after, it is recorded.
      let committed = false;
      const outcome = {
        finish,
        recorded: () => {
          committed = true;
          recorded();
        },
      };
      await this.#unit(() =>
        this.#withLock(jobId, async () => {
          const loaded = await this.#load(jobId);
          if (loaded?.kind !== 'ready' || loaded.record.suspendedAt !== null) return;
          if ((await this.store.pendingEvents(jobId, 1)).length > 0) return; // those come first
          await this.#applyEvent(loaded, event.payload, { accept: event, outcome });
        }),
      )
        .catch((error: unknown) => {
          if (committed) this.#logEntry('error', 'failed after the commit that recorded an outcome', { jobId, effectId, error: toErrorInfo(error) });
          else this.#logEntry('warn', 'outcome not applied with its commit; recorded on its own', { jobId, effectId, error: toErrorInfo(error) });
        })
        .finally(() => this.#finishing.delete(effectId));
      if (committed) return 'current';
    }
    return this.#submitFinish(finish);
  }

  /** Release the lease of a job nothing here works on any more (an outcome that led to no commit: a retry, a stale result). */
  async #releaseIdle(jobId: string): Promise<void> {
    await this.#withLock(jobId, async () => {
      const fence = this.#leases.get(jobId);
      if (fence === undefined || this.#holdsWork(jobId, undefined)) return;
      await this.store.releaseLeases(this.runnerId, [jobId]);
      if (this.#leases.get(jobId) === fence) this.#leases.delete(jobId);
    });
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
    const next = reason.startsWith(STORE_REFUSED)
      ? 'Its stored rows are damaged: restore them from a backup (or purge the job), then restart.'
      : 'Register the machine version it runs on (or a migration), then restart.';
    super(`Job ${jobId} is quarantined: ${reason}. ${next}`, { jobId, reason });
  }
}

/** A completion token that is unknown, used, malformed, or for an invocation no longer current. */
export class TokenError extends SpoolError {
  readonly code = 'SPOOL_BAD_TOKEN';
  readonly category = 'conflict';
}

/** The operation needs a finished job. */
export class JobNotFinishedError extends SpoolError {
  readonly code = 'SPOOL_NOT_FINISHED';
  readonly category = 'conflict';
}

function tokenFor(): string {
  return randomUUID().replace(/-/g, '') + randomUUID().replace(/-/g, '').slice(0, 16);
}

/** The inbox event that carries an activity's outcome back to its machine. */
function outcomeEvent(effect: EffectRecord, attempt: number, result: { output: JsonValue } | { error: JsonValue | ErrorInfo }): Omit<NewInboxEvent, 'at'> {
  const payload = ('output' in result
    ? { type: `xstate.done.actor.${effect.actorId}`, output: result.output, actorId: effect.actorId }
    : { type: `xstate.error.actor.${effect.actorId}`, error: toJson(result.error), actorId: effect.actorId }) as JsonValue;
  return {
    jobId: effect.jobId,
    eventId: `effect~${effect.id}~a${attempt}`,
    type: (payload as { type: string }).type,
    payload,
    payloadHash: hashJson(payload),
    source: 'effect',
    sourceId: effect.id,
    attempt,
  };
}

/** The initial snapshot and actions, and (when the machine's scope can be lent) the new job's own unstarted actor. */
function safeInitial(def: RegisteredMachine, input: JsonValue): [AnyMachineSnapshot, unknown[], unknown?] {
  let result: [AnyMachineSnapshot, unknown[], unknown?];
  try {
    result = def.scopeReusable ? initialInScope(def.machine, input) : (initialTransition(def.machine, input) as [AnyMachineSnapshot, unknown[]]);
  } catch (error) {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${redactText(toErrorInfo(error).message, input, def.sensitive)}`, { machineId: def.id });
  }
  if (result[0].status === 'error') {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${redactText(toErrorInfo(result[0].error).message, input, def.sensitive)}`, { machineId: def.id });
  }
  return result;
}

function toJob(record: JobRecord, def?: RegisteredMachine): Job {
  const parsed = record.status === 'active' ? 'no output while active' : parseSnapshot(record.snapshot);
  const cancelState = def?.cancel.state ?? 'cancelled';
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
    progress: record.progress,
    cancel:
      record.cancelRequestedAt === null
        ? null
        : { requestedAt: record.cancelRequestedAt, reason: record.cancelReason, completed: statePaths(record.value).includes(cancelState) },
    quarantine: record.quarantine,
    suspended: record.suspendedAt === null ? null : { at: record.suspendedAt, reason: record.suspendReason },
    lease: record.lease,
    idempotencyKey: record.idempotencyKey,
    owner: record.owner,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/** An attempt's outcome recorded in the commit that applies its event; `recorded` runs once that commit is durable. */
interface OutcomeInCommit {
  finish: AttemptFinish;
  recorded: () => void;
}

/** A caller waiting for its write's result. */
interface Waiting<T> {
  resolve: (r: T) => void;
  reject: (e: unknown) => void;
}

/** A write waiting for the next group-commit batch, with its caller's promise. */
type QueuedWrite =
  | ({ commit: TransitionCommit } & Waiting<CommitResult>)
  | ({ create: NewJob } & Waiting<CreateJobResult>)
  | ({ finish: AttemptFinish } & Waiting<FinishStatus>)
  | ({ claim: EffectClaim } & Waiting<ClaimedEffect | undefined>);

/** Hand each caller of a batch its own outcome; a store that returned too few fails the rest. */
function settle<T>(waiting: readonly Waiting<T>[], outcomes: readonly Outcome<T>[]): void {
  waiting.forEach((w, i) => {
    const outcome = outcomes[i];
    if (!outcome) w.reject(new RevisionConflictError('The store returned no result for a write of the batch.'));
    else if (outcome.ok) w.resolve(outcome.result);
    else w.reject(outcome.error);
  });
}

/** Whether a transition's plan concerns child or parent jobs (else `#relations` has nothing to do). */
function touchesRelations(record: JobRecord, def: RegisteredMachine, plan: ActionPlan): boolean {
  return (
    plan.spawnMachines.length > 0 ||
    plan.childSends.length > 0 ||
    plan.parentSends.length > 0 ||
    Boolean(record.parent) ||
    // A left invocation may have been a child job only where the machine can have any.
    (plan.effects.deactivate.length > 0 && def.hasChildMachines)
  );
}

function checkPercent(percent: unknown): void {
  if (typeof percent !== 'number' || !Number.isFinite(percent) || percent < 0 || percent > 100) throw new ValidationError('Progress must be a number from 0 to 100.');
}

/** `context.progress` when the machine keeps one (a number 0-100). */
function contextProgress(context: JsonValue): number | undefined {
  const p = context !== null && typeof context === 'object' && !Array.isArray(context) ? context['progress'] : undefined;
  return typeof p === 'number' && Number.isFinite(p) ? Math.min(100, Math.max(0, p)) : undefined;
}

function describeEnd(record: JobRecord): string {
  return record.status === 'done' ? `finished (final state ${JSON.stringify(record.value)})` : `ended with status "${record.status}"`;
}

/**
 * Nesting depth of a value, counted without recursion (stops counting past `limit`), and whether
 * some object in it has a `toJSON` method, whose JSON the walk cannot see.
 */
function nestingDepth(value: unknown, limit: number): { depth: number; toJSON: boolean } {
  let deepest = 0;
  let custom = false;
  const stack: [unknown, number][] = [[value, 0]];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    // JSON.stringify would write null for these, and the schema would then report a null.
    if (typeof v === 'number' && !Number.isFinite(v)) throw new Error(`${v} is not a JSON number`);
    if (v === null || typeof v !== 'object' || seen.has(v)) continue;
    seen.add(v);
    deepest = Math.max(deepest, d + 1);
    if (deepest > limit) return { depth: deepest, toJSON: custom };
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function') custom = true;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return { depth: deepest, toJSON: custom };
}

function requireText(what: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new ValidationError(`A ${what} must be a non-empty string.`);
}

/**
 * An options object (or nothing), with only the `known` names: a misspelt option (`jobid`) would
 * otherwise be ignored and its default used, which for an id or a key makes a retry a duplicate.
 */
function requireOptions<T>(options: T, call: string, known: readonly string[]): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new ValidationError(`${call}: options must be an object (or left out).`);
  const unknown = unknownNames(options, known);
  if (unknown) throw new ValidationError(`${call}: ${unknown.text}.`, { option: unknown.first });
  return options;
}

function checkId(what: string, id: unknown): void {
  if (typeof id !== 'string' || !EVENT_ID_PATTERN.test(id)) {
    throw new ValidationError(`${/^[aeiou]/.test(what) ? 'An' : 'A'} ${what} must be 1-200 printable ASCII characters without spaces.`);
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

/** A transition left a context JSON cannot hold: the event's error, recorded as `failed`. */
class UnserializableSnapshotError extends Error {
  override name = 'UnserializableSnapshot';
}

/**
 * A snapshot's persisted form as JSON. A context that JSON cannot hold (a BigInt, an object that
 * refers to itself, a `toJSON` that throws) is the machine's error, named as such.
 */
function persistedJson(def: RegisteredMachine, next: AnyMachineSnapshot): string {
  try {
    return JSON.stringify(def.machine.getPersistedSnapshot(next));
  } catch (error) {
    throw new UnserializableSnapshotError(
      `The new state of ${def.id} cannot be stored as JSON (${toErrorInfo(error).message}); keep context to JSON values: no BigInt, functions, class instances or cycles.`,
    );
  }
}
