/**
 * The runtime's public types: the options of `createRuntime`, a job as the API returns it, what
 * `send` resolves with, the filters and options of its calls, and the events observers receive.
 */
import type { AnyStateMachine } from 'xstate';
import type { InspectionObserver } from './options.ts';
import type { Clock } from '../ports/clock.ts';
import type {
  AssetRecord,
  AttemptRecord,
  EffectRecord,
  ErrorInfo,
  EventStatus,
  InboxRecord,
  JobLease,
  JobStatus,
  JobStore,
  JsonValue,
  NoteRecord,
  TimerRecord,
  TransitionRecord,
} from '../ports/store.ts';
import type { InputOptional, JobId, MachineCatalog, MachineTypes, UntypedMachine } from './machineTypes.ts';
import type { JobDefinition } from '../base/definition.ts';
import type { ScheduleEvent } from './schedules.ts';

/** What `machines` takes: job definitions and bare XState machines, in any iterable. */
export type MachineEntries = Iterable<JobDefinition | AnyStateMachine>;

/**
 * Options of {@link createRuntime}. `TMachines` is the type of `machines`: a literal array of
 * definitions types the runtime's calls by them (see machineTypes.ts).
 */
export interface RuntimeOptions<TMachines extends MachineEntries = MachineEntries> {
  /** Where jobs live: `SqliteStore` (persistence/drivers/better-sqlite3) or `MemoryStore` (persistence/memory). */
  store: JobStore;
  /** Job definitions or bare XState machines. */
  machines: TMachines;
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
   * How long a write waits, at most, for the outcomes of other activities still running in this
   * runtime to share its transaction (group commit), in ms. Activities that end at different
   * moments (real work) would otherwise commit one transaction each. A write waits only while
   * another attempt runs here, and goes as soon as none does. Default 1; 0: never wait.
   */
  commitDelayMs?: number;
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
  /**
   * The host part of this runtime's runner id (`<host>/<pid>/<random>`: a job's lease owner, an
   * activity's claimant). Default: the machine's host name on Node, `web` elsewhere (a browser
   * Worker, a Durable Object). Only a runner of the machine's own host name is probed for being gone;
   * any other is left to its lease's expiry. No `/`.
   */
  runnerHost?: string;
  /** Structured log sink, one object per lifecycle event, sensitive fields already redacted. */
  log?: (entry: LogEntry) => void;
  /**
   * The Stately inspector: an XState inspection observer (`createWebSocketInspector(...).inspect`
   * or `createBrowserInspector().inspect` of `@statelyai/inspect`, or any function or observer of
   * `InspectionEvent`s). Every job is shown as an actor, each committed event and snapshot after
   * its commit; the active jobs are announced on open. An observer that throws is logged.
   */
  inspect?: InspectionObserver;
}

/** One structured log line. */
export interface LogEntry {
  at: number;
  level: 'info' | 'warn' | 'error';
  msg: string;
  jobId?: string;
  [key: string]: unknown;
}

/**
 * A job as the API returns it. `T` holds its machine's types (machineTypes.ts): a runtime typed
 * by its machines returns `Job<that machine's types>`, one per machine id (narrow on `machineId`).
 */
export interface Job<T extends MachineTypes = UntypedMachine> {
  id: JobId<T['id']>;
  machineId: T['id'];
  machineVersion: string;
  revision: number;
  status: JobStatus;
  /** True once the job is in a final state (or errored): it accepts no more events. */
  final: boolean;
  value: T['value'];
  context: T['context'];
  input: T['storedInput'];
  output: T['output'] | undefined;
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

/** The job of machine `K` in catalog `C` (one per machine id when `K` is a union of them). */
export type JobOf<C extends MachineCatalog, K extends string> = K extends keyof C ? Job<C[K]> : never;

/** What `send` resolves with for a job of machine `K` in catalog `C`. */
export type SendResultOf<C extends MachineCatalog, K extends string> = K extends keyof C ? SendResult<C[K]> : never;

/** `details` of a job of machine `K` in catalog `C`. */
export type JobDetailsOf<C extends MachineCatalog, K extends string> = K extends keyof C ? JobDetails<C[K]> : never;

/** What `send` resolves with: the event's outcome and the job after it. */
export interface SendResult<T extends MachineTypes = UntypedMachine> {
  jobId: string;
  eventId: string;
  /** `applied`, `ignored` (no transition in the current state), `failed` (a guard or action threw), `pending` or `rejected`. */
  status: EventStatus;
  revision: number | null;
  error: ErrorInfo | null;
  /** True when this event id had been sent before: this is the first outcome. */
  duplicate: boolean;
  job: Job<T>;
}

/** Options of `start`. */
export interface StartOptions {
  /** Your own job id. Starting twice with the same id and input returns the same job. */
  jobId?: string;
  /** Starting twice with the same key and input returns the same job; other input is a conflict. */
  idempotencyKey?: string;
}

/** One item of `startMany`: a job's input (optional when its machine needs none) and `start`'s options. */
export type StartManyItem<TInput = unknown> = StartOptions & (InputOptional<TInput> extends true ? { input?: TInput } : { input: TInput });

/** Options of `send`. */
export interface SendOptions {
  /** Deduplication id. A second send with the same id returns the first outcome. Default: random. */
  eventId?: string;
  /** Wait for the event to be applied (default) or resolve once it is durably accepted. */
  wait?: boolean;
}

/** Options of `startOrSend`: the event's id (give one, so that concurrent callers converge) and whether to wait for it. */
export type StartOrSendOptions = SendOptions;

/** What `startOrSend` resolves with: the event's outcome, and whether this call created the job. */
export interface StartOrSendResult extends SendResult {
  created: boolean;
}

/** What `list` selects. */
export interface ListFilter<TMachineId extends string = string> {
  machineId?: TMachineId;
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

/**
 * What the runtime tells its observers. The CLI, the demo and tests listen to these. One union,
 * discriminated by `type`; every kind carries `jobId`: the job's id, or `null` for the kinds that
 * are about no job (`storage.fault`, `schedule.missed`, `schedule.damaged`; `schedule.fired` names
 * the job it started, if any). `job.started` and `job.committed` also carry the whole `job`.
 */
export type RuntimeEvent<TJob extends Job<any> = Job> =
  | { type: 'job.started'; jobId: TJob['id']; job: TJob }
  | { type: 'job.committed'; jobId: TJob['id']; job: TJob; transition: TransitionRecord }
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
  | StorageFaultEvent
  | ScheduleEvent;

/**
 * A retryable storage fault (disk full, I/O, busy, an unresolved commit outcome) the worker loop
 * rides out (`runWorker`): nothing acknowledged was lost; it tries again in `retryInMs`.
 * `attempt` counts the faults in a row (1 for the first since the last good round).
 */
export interface StorageFaultEvent {
  type: 'storage.fault';
  /** About no job. */
  jobId: null;
  /** The error's code, e.g. `SPOOL_STORAGE_FULL`. */
  code: string;
  message: string;
  attempt: number;
  retryInMs: number;
}

/** Everything `show` needs about one job. */
export interface JobDetails<T extends MachineTypes = UntypedMachine> {
  job: Job<T>;
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
  /** Set when the job's rows are damaged: it is held back (quarantined) and never runs again; `wayOut` says how to end it (purge). */
  held?: { damaged: string; wayOut: string };
}
