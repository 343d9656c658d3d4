/**
 * The store port: everything the engine needs from a database, in terms of job operations.
 * It is async so a networked database can implement it, and its write path takes a batch
 * of commits so that transitions of many jobs can share one database transaction (and one
 * disk sync) while each commit is still checked, and succeeds or fails, on its own.
 *
 * No driver type crosses this file. Every `now`/`at` is a parameter: stores never read a clock.
 *
 * Storage faults. Besides its results, any call may throw only Spool's typed storage faults
 * (src/runtime/errors.ts), never a driver's error: `StorageFullError` and `StorageIoError`
 * (retryable: nothing was changed; a Postgres store maps disk full, a lost connection before
 * COMMIT and a serialisation failure here), `DatabaseBusyError` (retryable: a lock held past the
 * timeout), `StorageAccessError` (bad configuration: read-only, permission denied) and
 * `DatabaseDamagedError` (the file is damaged: check it with `spool doctor`). Writes
 * (`writeBatch`, `commit`) may also throw {@link CommitOutcomeUnknown}. A fault fails the whole
 * call: it is never reported as one write's refusal (`reason: 'error'`, `Outcome.ok` false).
 */
import { SpoolError } from '../runtime/errors.ts';

/** Any JSON value as stored. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * A record read back from a row with JSON columns. `damaged` is set when one of them could not be
 * read ("damaged record: <table>.<column> is not valid JSON"; the value reads as null): the store
 * quarantines the row's job with that reason, and the other jobs go on.
 */
export interface MayBeDamaged {
  damaged?: string;
}

/** XState's actor status as persisted in the snapshot. `done` and `error` are terminal. */
export type JobStatus = 'active' | 'done' | 'error' | 'stopped';

/**
 * Every {@link JobStatus}, for checking a status given as text.
 *
 * @example
 * JOB_STATUSES.includes(flag) // a valid `--status`
 */
export const JOB_STATUSES: readonly JobStatus[] = ['active', 'done', 'error', 'stopped'];

/** A stored job: one XState actor, its persisted snapshot and its bookkeeping. */
export interface JobRecord {
  id: string;
  machineId: string;
  machineVersion: string;
  /** Incremented by every commit: 1 after start. Every write checks it. */
  revision: number;
  status: JobStatus;
  /** XState state value, e.g. `"processing"` or `{ "a": "b" }`. */
  value: JsonValue;
  context: JsonValue;
  /** The persisted snapshot as stored text: parse it afresh for every restore. */
  snapshot: string;
  input: JsonValue;
  inputHash: string;
  idempotencyKey: string | null;
  /** Tenant scope; `null` means unscoped. */
  owner: string | null;
  /** Why this job is held back (unknown machine version, snapshot that no longer fits…), or null. */
  quarantine: string | null;
  /** 0-100 when the job reports progress (from `context.progress` or `setProgress`), else null. */
  progress: number | null;
  /** When a cancel was requested (a request, not a completed cancellation), and why. */
  cancelRequestedAt: number | null;
  cancelReason: string | null;
  /**
   * When the job was suspended, and why; null when it is not. A suspended job keeps accepting
   * events (they stay pending) but processes none, fires no timers and starts no activity attempts.
   */
  suspendedAt: number | null;
  suspendReason: string | null;
  /** For a child job (an invoked child machine): the parent job and the invocation it settles. */
  parent: { jobId: string; effectId: string } | null;
  /**
   * The runner (one runtime in one process) that holds the job: it alone commits the job's
   * transitions and runs its activities until `until` (renewed by heartbeat); null when free.
   * `fence` grows with every claim and is checked by every write under the lease.
   */
  lease: JobLease | null;
  /**
   * Set by a store when a stored column of the job could not be read back ("damaged record:
   * jobs.context"): the job cannot run. The value of such a column reads as null. `quarantine` is
   * the column as it was read; a store records the same reason as the job's quarantine when it can
   * (once: never over another reason), so the job is listed with the quarantined ones from then
   * on, and it is never stuck (`JobFilter.stuck` leaves damaged rows out).
   */
  corruption?: string;
  createdAt: number;
  updatedAt: number;
}

/** A held job lease. */
export interface JobLease {
  owner: string;
  fence: number;
  until: number;
}

/**
 * Who writes, under which lease. A write that carries one succeeds only if the job's lease is
 * free, expired, held by `takeOver` (a runner known to be dead), or held by `runner` with
 * `fence`; it claims the lease otherwise free (the fence grows), keeps it until `until`, or
 * releases it (`until` null). `force` ends another runner's lease regardless (stopping a child
 * job whose parent left its state): the fence grows, so the old holder's next write fails.
 */
export interface LeaseClaim {
  runner: string;
  /** The fence this runner holds on the job, or null when it holds none. */
  fence: number | null;
  now: number;
  until: number | null;
  takeOver?: string | null;
  force?: boolean;
}

/** What `createJob` writes: the job at revision 1 and its first history record. */
export interface NewJob {
  id: string;
  machineId: string;
  machineVersion: string;
  status: JobStatus;
  value: JsonValue;
  /** Every state path the value is in (`["a", "a.b"]`), for `list --state`. */
  statePaths: string[];
  context: JsonValue;
  snapshot: string;
  input: JsonValue;
  inputHash: string;
  idempotencyKey: string | null;
  owner: string | null;
  at: number;
  /** The `xstate.init` history record (revision 1). */
  transition: TransitionDraft;
  /** The runner that creates it, recorded in that history record (fence 0: nobody has claimed it yet). */
  runner?: string | null;
  progress?: number | null;
  /** For a child job: its parent job and the invocation (effect id) it settles when it ends. */
  parent?: { jobId: string; effectId: string } | null;
  /** Effects, timers and self-sends the initial state asked for, written in the same transaction. */
  effects?: NewEffect[];
  timers?: NewTimer[];
  deliveries?: NewInboxEvent[];
  /** Child jobs its initial state invoked (created after it), and events between them, in the same transaction. */
  children?: NewJob[];
  relatedDeliveries?: NewInboxEvent[];
  /**
   * First attempts of `effects` that this create claims for `runner` (see {@link EffectStart}):
   * the new job's lease is taken by `runner` too (fence 1, until the latest `claimUntil`).
   */
  claims?: EffectStart[];
}

/**
 * The first attempt of an effect a commit creates, claimed by that same commit for the runner
 * that will run it (status `running`, attempt 1, `claimed_by` the runner, claim until
 * `claimUntil`, an attempt row started at the commit's time): a job run by a worker is one write
 * per step, not a claim and then an outcome. Refused with the commit that carries it.
 */
export interface EffectStart {
  /** One of the commit's new activity effects (not a child job's). */
  effectId: string;
  claimUntil: number;
}

/** The result of `createJob`: the new job, or the existing one with the same id or idempotency key. */
export interface CreateJobResult {
  job: JobRecord;
  created: boolean;
}

/** One write of a group-commit batch: its result, or the error that refused it (and only it). */
export type Outcome<T> = { ok: true; result: T } | { ok: false; error: unknown };

/** A new job of a group-commit batch: created (or found, as `createJob`), or the error that refused it. */
export type CreateOutcome = Outcome<CreateJobResult>;

export type EventStatus = 'pending' | 'applied' | 'ignored' | 'failed' | 'rejected' | 'stale';

/** Where an inbox event came from: a caller, a due timer, an effect's outcome, the machine itself, or a cancel request. */
export type EventSource = 'external' | 'timer' | 'effect' | 'self' | 'cancel' | 'parent' | 'child';

/** Error details as stored: never a live Error, never a sensitive field. */
export interface ErrorInfo {
  name: string;
  message: string;
  code?: string;
}

/**
 * One accepted event of a job. Events that wait (and the runtime's own) are held in the inbox;
 * an external event applied in the very commit that accepted it (nothing queued before it) is
 * recorded by its history row alone, and has no `seq`.
 */
export interface InboxRecord extends MayBeDamaged {
  /** Inbox order (global); null for an event applied as it was accepted (it was never queued). */
  seq: number | null;
  jobId: string;
  eventId: string;
  type: string;
  payload: JsonValue;
  payloadHash: string;
  status: EventStatus;
  error: ErrorInfo | null;
  /** The job revision this event's commit produced (null while pending or when rejected). */
  revision: number | null;
  acceptedAt: number;
  processedAt: number | null;
  source: EventSource;
  /** The timer or effect id behind a `timer`/`effect` event. */
  sourceId: string | null;
  /** The effect attempt behind an `effect` event. */
  attempt: number | null;
}

/** An event waiting in (or once held by) the inbox: it has its place in the queue. */
export type QueuedEvent = InboxRecord & { seq: number };

/**
 * The payload hash of an event whose id the runtime made up (an activity's outcome, a self-send, an
 * event between a parent and a child job): never compared, since its id is reserved and kept unique
 * by the inbox's key, so none is computed. A hash is made only for an id a caller chose (`send`),
 * which a repeat is checked against.
 */
export const UNCOMPARED_HASH = '';

export interface NewInboxEvent {
  jobId: string;
  eventId: string;
  type: string;
  payload: JsonValue;
  payloadHash: string;
  at: number;
  /** Default `external`. */
  source?: EventSource;
  sourceId?: string | null;
  attempt?: number | null;
}

export interface AcceptResult {
  event: InboxRecord;
  /** True when an event with this id was already accepted for this job. */
  duplicate: boolean;
}

export type TransitionOutcome = 'started' | 'applied' | 'ignored' | 'failed' | 'migrated' | 'stale';

/** One history record: the commit that produced `revision`. */
export interface TransitionRecord extends MayBeDamaged {
  jobId: string;
  revision: number;
  eventId: string | null;
  eventType: string;
  /** The event as recorded, with sensitive fields redacted. */
  payload: JsonValue;
  from: JsonValue | null;
  to: JsonValue;
  outcome: TransitionOutcome;
  error: ErrorInfo | null;
  at: number;
  /** The runner that committed it and the lease fence it held (the audit of single ownership). */
  runner: string | null;
  fence: number | null;
}

export type TransitionDraft = Omit<TransitionRecord, 'jobId' | 'revision' | 'runner' | 'fence' | 'damaged'>;

/**
 * One job's commit: write the new job state `WHERE id = ? AND revision = expectedRevision`,
 * append the history record for `expectedRevision + 1`, and settle the inbox event that
 * caused it, all or nothing. A commit that settles an event (`event` set) is refused as a
 * `conflict` while the job is suspended; one without an event (a migration) is not.
 */
export interface TransitionCommit {
  jobId: string;
  expectedRevision: number;
  job: {
    status: JobStatus;
    value: JsonValue;
    statePaths: string[];
    context: JsonValue;
    snapshot: string;
    machineVersion: string;
    /** 0-100 or null; `undefined` leaves the stored progress as it is. */
    progress?: number | null;
    at: number;
  };
  transition: TransitionDraft;
  /** Effects this transition asked for, and invocations it left (by invoke id). */
  effects?: { create: NewEffect[]; deactivate: string[] };
  /** Timers this transition scheduled, and keys it cancelled. */
  timers?: { schedule: NewTimer[]; cancel: string[] };
  /** Events the machine sent without delay (to itself, a child job, its parent job): accepted in the same commit. */
  deliveries?: NewInboxEvent[];
  /** Child jobs the transition invoked: created in the same commit. */
  children?: NewJob[];
  /** A child job that ended: its invocation in the parent succeeds, and the outcome event is accepted there. */
  settleParent?: { effectId: string; output: JsonValue; event: NewInboxEvent };
  /** The job stopped (its parent left the invoking state): every effect deactivated, every timer cancelled. */
  stopAll?: boolean;
  /** The timer this event consumed: marked delivered. */
  consumedTimer?: string;
  /** The lease this commit is made under (see {@link LeaseClaim}); absent only in store tests and tools. */
  lease?: LeaseClaim;
  /**
   * The attempt this commit's event (`event.accept`, the attempt's outcome event) ends: recorded
   * first in the same transaction, as `finishAttempt` records it, and its event is then applied
   * here rather than queued. When the attempt is no longer the effect's current one, or the job's
   * lease is no longer the attempt's, nothing is written: `outcome-not-current`.
   */
  finish?: AttemptFinish;
  /**
   * First attempts of this commit's new effects (`effects.create`) that it claims for
   * `lease.runner` (see {@link EffectStart}). Only with a `lease` that is kept (`until` set).
   */
  claims?: EffectStart[];
  /**
   * The inbox event this commit settles: a pending one (`seq`, which must still be pending), or
   * a new one (`accept`) recorded and settled in the same transaction (the inline fast path),
   * which is refused as a conflict while the job has pending events (they come first).
   */
  event?: ({ seq: number; accept?: never } | { accept: NewInboxEvent; seq?: never }) & {
    status: Exclude<EventStatus, 'pending' | 'rejected'>;
    error: ErrorInfo | null;
    /** Replaces the stored payload once processed (sensitive fields redacted). */
    payload: JsonValue;
  };
}

export type CommitResult =
  /** `fence`: the lease fence after the commit (null: made without a lease). */
  | { ok: true; revision: number; fence: number | null }
  | { ok: false; reason: 'conflict'; currentRevision: number | null }
  /** Another runner holds the job's lease (not expired): nothing was written. */
  | { ok: false; reason: 'leased'; owner: string; until: number }
  | { ok: false; reason: 'event-settled' }
  /** The event's id is already recorded for the job (a key refused it): nothing was written. */
  | { ok: false; reason: 'duplicate-event' }
  /** The commit's `finish` is not the current attempt (stale, or the lease moved on): nothing was written. */
  | { ok: false; reason: 'outcome-not-current' }
  | { ok: false; reason: 'error'; error: ErrorInfo };

/**
 * What the reason of a quarantine for a damaged stored record starts with ("damaged record:
 * jobs.context is not valid JSON"): the job's rows need checking (`spool doctor`) or restoring,
 * not a machine version registered. A store writes it; the engine keeps such a quarantine.
 */
export const DAMAGED_RECORD = 'damaged record: ';

/** A job operation of a batch whose outcome is not known (see {@link CommitOutcomeUnknown}). */
export type UnresolvedOperation =
  /** A new job: it landed if `getJob(jobId)` finds it. */
  | { kind: 'create'; jobId: string }
  /** A transition to `revision` settling `eventId` (null: none): it landed if `commitLanded` says so. */
  | { kind: 'commit'; jobId: string; revision: number; eventId: string | null }
  /** An attempt's outcome: it landed if `getEffect(effectId)` is past `attempt`'s running state. */
  | { kind: 'finish'; effectId: string; attempt: number }
  /** An activity claim: treat it as not claimed; a landed claim expires at its `claimUntil`. */
  | { kind: 'claim'; effectId: string };

/**
 * A write (`writeBatch`, `commit`) whose transaction's outcome the store cannot know: the
 * connection failed, or an I/O error was raised by the COMMIT itself, so the whole transaction may
 * or may not have landed (all of it or none: it is one transaction). `unresolved` lists its job
 * operations. The engine resolves each by reading back (`commitLanded`, `getJob`, `getEffect`):
 * landed → as committed; absent → write it again; never apply one twice. Retryable for a caller
 * that sends again with the same event id (a repeat of a recorded id is never applied twice).
 */
export class CommitOutcomeUnknown extends SpoolError {
  readonly code = 'SPOOL_COMMIT_OUTCOME_UNKNOWN';
  readonly category = 'retryable';
  readonly unresolved: readonly UnresolvedOperation[];
  constructor(message: string, unresolved: readonly UnresolvedOperation[], details: Record<string, unknown> = {}) {
    super(message, { ...details, unresolved });
    this.unresolved = unresolved;
  }
}

/** The operations of a batch, as {@link CommitOutcomeUnknown} lists them. */
export function operationsOf(batch: WriteBatch): UnresolvedOperation[] {
  return [
    ...(batch.creates ?? []).map((j) => ({ kind: 'create' as const, jobId: j.id })),
    ...(batch.commits ?? []).map((c) => ({
      kind: 'commit' as const,
      jobId: c.jobId,
      revision: c.expectedRevision + 1,
      eventId: c.event?.accept?.eventId ?? c.transition.eventId ?? null,
    })),
    ...(batch.finishes ?? []).map((f) => ({ kind: 'finish' as const, effectId: f.id, attempt: f.attempt })),
    ...(batch.claims ?? []).map((c) => ({ kind: 'claim' as const, effectId: c.id })),
  ];
}

export type EffectStatus = 'pending' | 'running' | 'waiting' | 'backoff' | 'succeeded' | 'failed' | 'cancelled';

/** One invocation of an activity: its idempotency key is `id`, stable across retries and restarts. */
export interface EffectRecord extends MayBeDamaged {
  id: string;
  jobId: string;
  /** The invoke id: outcomes come back as `xstate.done.actor.<actorId>` / `xstate.error.actor.<actorId>`. */
  actorId: string;
  src: string;
  /** `activity`: a fromPromise run by a worker; `child`: a child job (its id is this effect's id). */
  kind: 'activity' | 'child';
  input: JsonValue;
  status: EffectStatus;
  /** True while the state that invoked it is current. */
  active: boolean;
  /** Attempts started so far. */
  attempt: number;
  maxAttempts: number;
  /** Never re-run after a crash: the machine gets an indeterminate-outcome error instead. */
  unsafe: boolean;
  nextRunAt: number | null;
  claimedBy: string | null;
  claimExpiresAt: number | null;
  token: string | null;
  output: JsonValue | null;
  error: ErrorInfo | null;
  createdRevision: number;
  createdAt: number;
  updatedAt: number;
}

export interface NewEffect {
  id: string;
  jobId: string;
  actorId: string;
  src: string;
  /** Default `activity`. A `child` effect starts as `waiting` at attempt 1: its child job runs it. */
  kind?: 'activity' | 'child';
  input: JsonValue;
  maxAttempts: number;
  unsafe: boolean;
  createdRevision: number;
  at: number;
}

export type AttemptOutcome = 'running' | 'succeeded' | 'failed' | 'waiting' | 'interrupted' | 'stale';

export interface AttemptRecord extends MayBeDamaged {
  effectId: string;
  attempt: number;
  runner: string | null;
  startedAt: number;
  endedAt: number | null;
  outcome: AttemptOutcome;
  error: ErrorInfo | null;
}

/** An effect claimed for its next attempt, with the fence of its job's lease the runner now holds. */
export type ClaimedEffect = EffectRecord & { leaseFence: number };

/** One claim of a write batch: the arguments of `claimEffect`. */
export interface EffectClaim {
  id: string;
  runner: string;
  now: number;
  claimUntil: number;
  takeOver?: string | undefined;
  fence?: number | null | undefined;
}

/** One attempt outcome of a write batch: the arguments of `finishAttempt`. */
export interface AttemptFinish {
  id: string;
  attempt: number;
  result: AttemptResult;
  at: number;
  lease?: { runner: string; fence: number } | undefined;
}

/** What `finishAttempt` recorded: the outcome (`current`), a stale attempt, or nothing but a stale attempt because the job's lease was taken. */
export type FinishStatus = 'current' | 'stale' | 'lease-lost';

/**
 * A group-commit batch: writes of many jobs that share one transaction and one disk sync. Each
 * is checked and fails on its own; the order within the transaction is creates, commits,
 * finishes, claims.
 */
export interface WriteBatch {
  creates?: readonly NewJob[];
  commits?: readonly TransitionCommit[];
  finishes?: readonly AttemptFinish[];
  claims?: readonly EffectClaim[];
}

/** The results of a {@link WriteBatch}, in the order of its lists. */
export interface WriteBatchResult {
  creates: CreateOutcome[];
  commits: CommitResult[];
  finishes: Outcome<FinishStatus>[];
  claims: Outcome<ClaimedEffect | undefined>[];
}

/** How an attempt ended, as recorded by `finishAttempt`. */
export type AttemptResult =
  | { kind: 'succeeded'; output: JsonValue; event: NewInboxEvent }
  /** `retryAt` set: another attempt is due then; null: the error goes to the machine as `event`. */
  | { kind: 'failed'; error: ErrorInfo; retryAt: number | null; event: NewInboxEvent | null }
  | { kind: 'waiting'; token: string };

export type TimerKind = 'after' | 'raise' | 'sendTo';
export type TimerStatus = 'scheduled' | 'fired' | 'delivered' | 'cancelled';

/** A durable timer: an event due at an absolute time. */
export interface TimerRecord extends MayBeDamaged {
  id: string;
  jobId: string;
  key: string;
  kind: TimerKind;
  event: JsonValue;
  dueAt: number;
  status: TimerStatus;
  createdRevision: number;
  createdAt: number;
}

export type NewTimer = Omit<TimerRecord, 'status' | 'damaged'>;

export interface NoteRecord {
  jobId: string;
  kind: string;
  message: string;
  at: number;
}

/** An output linked to its job (a file, an upload, a report). */
export interface AssetRecord extends MayBeDamaged {
  jobId: string;
  /** Unique per job: attaching the same key again (a retried attempt) is a no-op. */
  key: string;
  type: string;
  uri: string;
  size: number | null;
  meta: JsonValue | null;
  effectId: string | null;
  attempt: number | null;
  createdAt: number;
}

export interface JobFilter {
  machineId?: string;
  /** With `machineId`: only jobs on this machine version. */
  machineVersion?: string;
  /** Matches a state path: `processing` matches `processing` and `{ processing: 'upload' }`. */
  state?: string;
  status?: JobStatus;
  quarantined?: boolean;
  /**
   * Jobs with an effect that failed for good: status `failed` with `attempt >= maxAttempts`, or
   * with an error whose code is one of {@link EXHAUSTED_ERROR_CODES} (no attempt left after an
   * interruption, or unsafe to repeat). `false`: the complement. A query over stored facts: the
   * SQL is `exhausted` in persistence/sqlite/predicates.ts, written once.
   */
  exhausted?: boolean;
  /** Jobs with a cancel request. */
  cancelRequested?: boolean;
  /** Suspended jobs (see {@link JobRecord.suspendedAt}). */
  suspended?: boolean;
  /**
   * Jobs nothing recorded will move: active, not suspended, not quarantined, held by no lease,
   * with no pending inbox event, no scheduled or fired timer and no active effect that is pending,
   * running, waiting or in backoff. `false`: the complement. (The runtime narrows this to jobs whose
   * current state also accepts no external event: see `Runtime.list({ stuck: true })`.) A query
   * over stored facts: the SQL is `STUCK` in persistence/sqlite/predicates.ts, written once.
   */
  stuck?: boolean;
  /** `undefined`: every owner; `null`: unscoped jobs only. */
  owner?: string | null;
  /** Only jobs with an id greater than this (keyset paging). */
  afterId?: string;
  limit?: number;
}

/** Which history rows `historySince` reads (every filter optional but the owner scope). */
export interface HistoryFeedFilter {
  /** `undefined`: every owner; `null`: unscoped jobs only. */
  owner?: string | null;
  machineId?: string;
  jobId?: string;
  /** Only rows with one of these outcomes. */
  outcomes?: readonly TransitionOutcome[];
}

/** A history record with its place in the global order of every job's commits. */
export interface FeedRecord extends TransitionRecord {
  /** Grows with every history row written, across jobs and processes; never given twice. */
  seq: number;
  machineId: string;
}

/** A page of {@link JobStore.historySince}: the rows, and the cursor to read the next page from. */
export interface FeedPage {
  records: FeedRecord[];
  /** Pass as `after` next: the last row's seq when the page is full, else the highest seq looked at. */
  next: number;
}

/** Which finished jobs `purgeFinished` deletes. */
export interface PurgeFilter {
  /** Jobs last updated before this time. */
  before: number;
  /** Final statuses to delete (`done`, `error`, `stopped`); `active` matches nothing. */
  statuses: readonly JobStatus[];
  /** `undefined`: every owner; `null`: unscoped jobs only. */
  owner?: string | null;
  /** At most this many jobs per call (one transaction). */
  limit: number;
}

/**
 * Aggregates over the stored records (SQL `count`/`min` over the tables, no counters kept
 * anywhere), for one owner's jobs (or every owner's). See `JobStore.stats`.
 */
export interface StoreStats {
  /** Jobs by machine, version, status and state value (ordered by those, the value as JSON text). */
  jobs: { machineId: string; machineVersion: string; status: JobStatus; value: JsonValue; count: number }[];
  /** Jobs listJobs({ quarantined: true }) returns (any status). */
  quarantined: number;
  /** Jobs listJobs({ suspended: true }) returns (any status). */
  suspended: number;
  /** Jobs listJobs({ cancelRequested: true }) returns: a cancel request, applied or not, active or finished. */
  cancelRequested: number;
  /** Jobs `listJobs({ exhausted: true })` returns. */
  exhausted: number;
  /** Jobs `listJobs({ stuck: true })` returns: nothing recorded will move them. */
  idle: number;
  /**
   * Pending inbox events: how many, of how many jobs, how many of them are held (their job is
   * suspended or quarantined), and the accept time of the oldest one, held ones included.
   */
  backlog: { events: number; jobs: number; held: number; oldestAcceptedAt: number | null };
  /**
   * Scheduled timers: how many, how many are due by `now` (of jobs not suspended), how many due
   * ones are held by a suspension, and the deadline of the oldest due one that is not held.
   */
  timers: { scheduled: number; due: number; held: number; oldestDueAt: number | null };
  /** Per activity src (ordered by src): its effects, those that failed for good, its attempts by outcome. */
  activities: {
    src: string;
    effects: number;
    effectsFailed: number;
    attempts: number;
    succeeded: number;
    failed: number;
    interrupted: number;
    stale: number;
    running: number;
    waiting: number;
  }[];
  /** Active effects claimed as running, by effect id: the claims held and their runners. */
  running: { effectId: string; jobId: string; src: string; attempt: number; runner: string | null; claimExpiresAt: number | null }[];
  /** Job leases held (not expired by `now`), by runner: how many jobs and the earliest expiry. */
  leases: { runner: string; jobs: number; earliestUntil: number }[];
}

/** How an occurrence of a schedule meets the previous run it started when that run has not finished. */
export type ScheduleOverlap = 'skip' | 'buffer-one' | 'allow-all' | 'cancel-previous';

/** What happens to occurrences that fell due while nothing fired them (downtime, a clock jump). */
export type ScheduleCatchUp = 'skip-missed' | 'run-once' | { runEach: number };

/** A stored schedule: its definition (cron or interval, what it starts, its policies) and its state. */
export interface ScheduleRecord {
  id: string;
  /** Tenant scope; `null` means unscoped. Its jobs get the same owner. */
  owner: string | null;
  machineId: string;
  /** The validated input every job it starts receives. */
  input: JsonValue;
  /** A cron expression (5 fields, or 6 with seconds), or null for an interval schedule. */
  cron: string | null;
  /** The IANA time zone the cron expression is read in (null for an interval). */
  timezone: string | null;
  /** The interval in ms, or null for a cron schedule. */
  everyMs: number | null;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
  /** How late an occurrence may be handled and still count as on time (not missed), in ms. */
  graceMs: number;
  /** No occurrence before this time; for an interval, the anchor of its occurrences (null: the epoch). */
  startAt: number | null;
  /** The earliest occurrence not handled yet; null when none will come. */
  nextDueAt: number | null;
  /** `buffer-one`: the occurrence waiting for the previous run to end, or null. */
  bufferedDueAt: number | null;
  /** The latest occurrence handled (started, skipped, buffered or failed), or null. */
  lastDueAt: number | null;
  /** The job the latest started occurrence created: the "previous run" of the overlap policy. */
  lastJobId: string | null;
  /** Occurrences dropped by the catch-up policy so far. */
  missed: number;
  /**
   * Set when the stored row cannot be used (its input or policies are not readable): why. Such a
   * schedule never fires and is listed with this reason; `schedule()` under its id rewrites it.
   */
  damaged?: string;
  /** Incremented by every write; every write checks it. */
  revision: number;
  createdAt: number;
  updatedAt: number;
}

/** What `putSchedule` writes: a schedule's definition and state. */
export type NewSchedule = Omit<ScheduleRecord, 'revision' | 'createdAt' | 'updatedAt'> & { at: number };

/** How an occurrence was handled: a job started for it, it was skipped (overlap), or starting failed. */
export type OccurrenceOutcome = 'started' | 'skipped' | 'failed';

/**
 * One handled occurrence of a schedule, unique per (schedule id, due time) across all processes:
 * the row is inserted in the transaction that starts its job. Rows outlive their schedule, so
 * re-creating a schedule under the same id never fires an occurrence twice.
 */
export interface OccurrenceRecord {
  scheduleId: string;
  dueAt: number;
  outcome: OccurrenceOutcome;
  jobId: string | null;
  /** Why it did not start (the previous run, an error), or null. */
  reason: string | null;
  /** When it was handled. */
  at: number;
}

/**
 * One step of a schedule, in one transaction: write its new state `WHERE id = ? AND revision =
 * expectedRevision`, record the occurrence it handled (refused if that occurrence already has a
 * row) with the job started for it, and request the cancellation of the previous run.
 */
export interface ScheduleFire {
  scheduleId: string;
  expectedRevision: number;
  at: number;
  /** The schedule's state after this step. */
  state: Pick<ScheduleRecord, 'nextDueAt' | 'bufferedDueAt' | 'lastDueAt' | 'lastJobId' | 'missed'>;
  /** The occurrence this step handled; `job` (outcome `started`) is created in the same transaction. */
  occurrence?: { dueAt: number; outcome: OccurrenceOutcome; reason: string | null; job?: NewJob };
  /**
   * `cancel-previous`: record a cancel request on this job (once, if it is still active) and accept
   * its cancel event, as `requestCancel` does.
   */
  cancel?: { jobId: string; reason: string; event: NewInboxEvent };
}

export type ScheduleFireResult =
  | { ok: true; schedule: ScheduleRecord; job: JobRecord | null }
  /** The schedule changed (or was removed) since it was read: nothing was written. */
  | { ok: false; reason: 'conflict'; schedule: ScheduleRecord | null }
  /** The occurrence already has a row, or its job id is taken: nothing was written. */
  | { ok: false; reason: 'occurrence-taken' };

/** The store interface every backend implements and the contract suite checks. */
export interface JobStore {
  /** A short name for messages, e.g. `sqlite:/path/spool.db` or `memory`. */
  readonly description: string;
  /** Create a job, or return the existing job with the same id or the same (owner, idempotency key). */
  createJob(job: NewJob): Promise<CreateJobResult>;
  /**
   * Group commit: new jobs (each as `createJob`), transitions (each as in `commit`), attempt
   * outcomes (each as `finishAttempt`) and activity claims (each as `claimEffect`), in ONE
   * transaction and one disk sync. Each is checked and fails on its own (a savepoint each in
   * SQLite); nothing is acknowledged before the whole transaction is durable.
   */
  writeBatch(batch: WriteBatch): Promise<WriteBatchResult>;
  /**
   * A job by id. With `known` (a record of this job the caller read or committed), a store may
   * read only what changes without a commit (quarantine, progress, cancel request, suspension,
   * lease, update time) and, while the stored job is still `known`'s revision of the same job
   * (same creation time), return those over `known`: a commit writes every other column.
   */
  getJob(id: string, known?: JobRecord): Promise<JobRecord | undefined>;
  /** The job started under this (owner, idempotency key), if any. */
  findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined>;
  /** Jobs ordered by id. */
  listJobs(filter: JobFilter): Promise<JobRecord[]>;
  /**
   * Active child jobs whose invocation in the parent is no longer active (the parent left the
   * invoking state, or ended, and its process died before it stopped the child): up to `limit`
   * ids, for recovery to stop. Optional: a store without it leaves such orphans to the operator.
   */
  orphanedChildren?(limit: number): Promise<string[]>;
  /**
   * The (machine, version) pairs of one owner's active jobs and how many each, counted up to
   * `countUpTo`: recovery checks versions without reading every job, in time that does not grow
   * with the number of jobs.
   */
  activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]>;
  /**
   * Durably record an event, or return the one already recorded under (jobId, eventId), queued or
   * applied as it was accepted. A second record of one id must be impossible by a key, not by
   * looking first (docs/ARCHITECTURE.md, "The store contract").
   */
  acceptEvent(event: NewInboxEvent): Promise<AcceptResult>;
  getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined>;
  /** A job's events, all statuses: those applied in revision order, then the rest (pending, rejected) in accept order. */
  listEvents(jobId: string): Promise<InboxRecord[]>;
  /** The oldest pending events of a job, in accept order. */
  pendingEvents(jobId: string, limit: number): Promise<QueuedEvent[]>;
  /** Ids of jobs that have pending events, oldest event first; with `lease`, leaving out jobs another runner holds. */
  jobsWithPendingEvents(limit: number, lease?: { runner: string; now: number }): Promise<string[]>;
  /** Apply commits, each on its own revision check; all share one durable transaction. */
  commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]>;
  /**
   * Whether the commit of a {@link CommitOutcomeUnknown} landed: the job's history holds
   * `revision`, recorded for `eventId` (null: a transition without an event). A revision is
   * written once, so true means that very commit landed, and false (the revision is absent, or
   * holds another event) that it did not.
   */
  commitLanded(jobId: string, revision: number, eventId: string | null): Promise<boolean>;
  /**
   * Settle a pending event without touching the job (e.g. it arrived for a job that has since
   * ended). `payload`, when given, replaces the stored one (the payload with sensitive fields
   * redacted, as every processed event's is).
   */
  rejectEvent(seq: number, error: ErrorInfo, at: number, payload?: JsonValue): Promise<boolean>;
  /** Set or clear (reason `null`) a job's quarantine; no revision change. */
  setQuarantine(jobId: string, reason: string | null, at: number): Promise<void>;
  /** A job's history in revision order. */
  history(jobId: string): Promise<TransitionRecord[]>;

  // Effects
  getEffect(id: string): Promise<EffectRecord | undefined>;
  listEffects(jobId: string): Promise<EffectRecord[]>;
  listAttempts(jobId: string): Promise<AttemptRecord[]>;
  /**
   * Active effects ready to run: pending, backoff due by `now`, or running with a claim expired by
   * `now`, of jobs that are neither suspended nor quarantined (a held job's activities wait, unclaimed).
   */
  dueEffects(now: number, limit: number, runner?: string): Promise<EffectRecord[]>;
  /** Active effects claimed as running (to check their runners after a restart). */
  runningEffects(limit: number): Promise<EffectRecord[]>;
  /**
   * Start the next attempt: only if the effect is active and pending, due from backoff, or
   * running under a claim that expired (or `takeOver` names the dead runner), and never past
   * the effect's stored `maxAttempts` (set by the engine's retry policy when the effect is
   * written; SQL: `attemptsLeft`, persistence/sqlite/predicates.ts; the runtime records a last
   * attempt interrupted as exhausted). The attempt a dead runner left is recorded as interrupted. In the same transaction the runner claims (or
   * renews, with `fence` held) its job's lease until `claimUntil`; while another live runner holds
   * it, or the job is suspended or quarantined, nothing is claimed. The claimed effect comes back with the job's lease fence. (`fence`
   * omitted, in tools and tests: the runner's own live lease is renewed whatever its fence.)
   */
  claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined>;
  /** Extend the claim of a running attempt. False if the attempt, or its job's lease, is no longer this runner's. */
  renewClaim(id: string, attempt: number, runner: string, claimUntil: number): Promise<boolean>;
  /**
   * A graceful stop gives back an attempt it aborted: the attempt is recorded `interrupted` with
   * the error {@link RELEASED_ATTEMPT}, and the effect is pending again with one more attempt
   * allowed (`maxAttempts` + 1), so a planned restart does not spend the retry budget. Only for an
   * activity safe to repeat, still running under this runner's claim, and given back fewer than
   * {@link MAX_RELEASES} times before (an activity that never finishes must not outlive every
   * restart); false otherwise: the attempt is then left to be taken over and counted, as after a
   * crash (an unsafe one ends indeterminate). Optional: a store without it gets crash semantics.
   */
  releaseAttempt?(id: string, attempt: number, runner: string, at: number): Promise<boolean>;
  /**
   * Record how an attempt ended, with its outcome event accepted in the same transaction. When
   * the attempt is no longer current (the state was left, a newer attempt started) the attempt is
   * recorded as stale and the event, if any, is still accepted so the history shows it as stale.
   */
  finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus>;
  /** Settle an effect that may not run again (unsafe to repeat, exhausted) with its error event. */
  failEffect(id: string, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean>;
  /** Find the waiting effect that holds this completion token. */
  effectByToken(token: string): Promise<EffectRecord | undefined>;
  /** Claim a completion token once: the effect settles and its outcome event is accepted. */
  completeByToken(token: string, result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo }, event: NewInboxEvent, at: number): Promise<boolean>;

  // Timers
  listTimers(jobId: string): Promise<TimerRecord[]>;
  dueTimers(now: number, limit: number): Promise<TimerRecord[]>;
  /** Move a due timer into its job's inbox, once. */
  fireTimer(id: string, event: NewInboxEvent): Promise<boolean>;
  /** The earliest scheduled timer, effect retry, claim or lease expiry, for sleeping until it (held jobs' effects wake nobody). */
  nextWakeAt(): Promise<number | null>;

  // Leases
  /** Extend this runner's leases on these jobs; returns the ones it still holds, with their fences. */
  renewLeases(runner: string, jobIds: readonly string[], until: number): Promise<Map<string, number>>;
  /** Free this runner's leases (on these jobs, or all of them); fences are kept. Returns how many. */
  releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number>;
  /** Runners holding a lease that has not expired by `now`. */
  leaseHolders(now: number): Promise<string[]>;
  /**
   * Free leases once: every lease of `owner` (a runner known to be dead), or every lease expired by
   * `now`. Returns the jobs freed and who held them.
   */
  expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]>;

  // Cancellation, progress, notes, assets
  /** Record a cancel request once and accept its cancel event in the same transaction. */
  requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }>;
  /**
   * Set progress on a job that is still active; false if it is final (nothing changed). With
   * `lease` (an activity reporting): also false unless that runner still holds the job with that fence.
   */
  setProgress(jobId: string, progress: number, at: number, lease?: { runner: string; fence: number }): Promise<boolean>;
  addNote(note: NoteRecord): Promise<void>;
  listNotes(jobId: string): Promise<NoteRecord[]>;
  /**
   * Attach an asset once per (job, key); returns false when it was already attached. With `lease`
   * (an activity attaching): also false, writing nothing, unless that runner still holds the job with that fence.
   */
  attachAsset(asset: AssetRecord, lease?: { runner: string; fence: number }): Promise<boolean>;
  listAssets(jobId: string): Promise<AssetRecord[]>;
  /** Delete a job with its inbox, history, effects, timers, notes and assets. */
  purgeJob(jobId: string): Promise<boolean>;

  // Operations: suspension, redrive, retention, stats
  /**
   * Suspend an active job once (`suspendedAt` = `at`), writing `note` in the same transaction.
   * False (nothing written) when the job is missing, final or already suspended.
   */
  suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean>;
  /** Clear a job's suspension, writing `note` in the same transaction. False (nothing written) when it was not suspended. */
  resumeJob(jobId: string, note: NoteRecord): Promise<boolean>;
  /**
   * Start a fresh attempt sequence of a failed effect whose invoking state is still current
   * (`active`, job active): status `pending`, `maxAttempts` as given, error, claim, token and
   * retry time cleared; its attempts are kept. Writes `note` in the same transaction. False otherwise.
   */
  redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean>;
  /** Delete up to `limit` finished jobs matching `filter` with everything of theirs, in one transaction; returns their ids. */
  purgeFinished(filter: PurgeFilter): Promise<string[]>;
  /** Aggregates over the records of one owner's jobs (`owner` undefined: every owner's) at time `now`. */
  stats(filter: { owner?: string | null; now: number }): Promise<StoreStats>;
  // Schedules
  /**
   * Create a schedule (`expectedRevision` null: refused if the id exists) or replace one
   * `WHERE id = ? AND revision = expectedRevision` (its revision + 1, `createdAt` kept). On refusal
   * nothing is written and the stored schedule (if any) is returned.
   */
  putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }>;
  getSchedule(id: string): Promise<ScheduleRecord | undefined>;
  /** Schedules ordered by id; `owner` undefined: every owner's, null: unscoped ones only. */
  listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]>;
  /** Delete one owner's schedule; its occurrence rows stay. False when there was none. */
  deleteSchedule(id: string, owner: string | null): Promise<boolean>;
  /** One owner's schedules with an occurrence due by `now` or one buffered, earliest first. */
  dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]>;
  /** Apply one step of a schedule (see {@link ScheduleFire}), all or nothing. */
  fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult>;
  /** A schedule's handled occurrences, newest first. */
  listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]>;
  // Bounded work
  /**
   * How many events are accepted but not yet applied (inbox status `pending`), in the whole store,
   * held ones (suspended, quarantined jobs) included: what `maxBacklog` limits. Cheap: an index
   * count in SQLite; the runtime calls it at most every 100 ms of its clock.
   */
  pendingBacklog(): Promise<number>;

  /**
   * Optional: a number that changes whenever another connection (another process) commits to
   * the store, and not for this store's own commits. A runtime polls it while `waitFor` waits,
   * so it also sees commits of other processes. A store only one runtime writes may omit it.
   * SQLite: `PRAGMA data_version`.
   */
  externalChanges?(): Promise<number>;

  /**
   * Optional: history rows of every job in commit order, those with a `seq` above `after` that
   * match `filter`, at most `limit`, looking at most `scan` seqs past `after` (a filter that
   * matches little costs a bounded read, and `next` moves past what it looked at). Rows become
   * visible in seq order, so a reader that passes `next` back misses none and sees none twice.
   * SQLite: the `seq` column of schema 11 (rows written before it have none).
   */
  historySince?(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage>;

  close(): Promise<void>;
}

/**
 * The history row of an event applied as it is accepted, which is also the event's record: its
 * id, type and (redacted) payload are the event's; accepted and processed at the commit's time.
 */
export function inlineDraft(t: TransitionCommit['transition'], e: NonNullable<TransitionCommit['event']> & { accept: NewInboxEvent }): TransitionCommit['transition'] {
  return { ...t, eventId: e.accept.eventId, eventType: e.accept.type, payload: e.payload };
}

/** One write of a batch, run: its result, or the error that refused it (for `WriteBatchResult`). */
export function outcomeOf<T>(write: () => T): Outcome<T> {
  try {
    return { ok: true, result: write() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * The id the runtime makes up for an event sent without one: `r<revision>.<unique>`, naming the
 * revision it is about to commit (see docs/ARCHITECTURE.md, "A made-up event id names its
 * revision"). {@link revisionNamedBy} reads it back.
 */
export function madeUpEventId(revision: number, unique: string): string {
  return `r${revision}.${unique}`;
}

/**
 * The revision an event id names (`r<revision>.<unique>`, as {@link madeUpEventId} makes them),
 * or -1. A store finds such an event applied at that revision by the history's primary key.
 */
export function revisionNamedBy(eventId: string): number {
  const m = /^r([1-9][0-9]{0,14})\./.exec(eventId);
  return m ? Number(m[1]) : -1;
}

/** An external event with no source: one that can be recorded by its history row alone. */
export function isExternal(e: NewInboxEvent): boolean {
  return (e.source ?? 'external') === 'external' && (e.sourceId ?? null) === null && (e.attempt ?? null) === null;
}

/**
 * How many attempts of one activity graceful stops may give back (`releaseAttempt`); later ones
 * count. The engine's rule; a store compares with this constant (bound as a parameter of its
 * query: `releasesLeft` in persistence/sqlite/predicates.ts), never a number of its own.
 */
export const MAX_RELEASES = 5;

/**
 * The error codes of an effect that failed for good although attempts were left: no attempt left
 * after an interruption (`SPOOL_RETRIES_EXHAUSTED`) and an interrupted activity unsafe to repeat
 * (`SPOOL_INDETERMINATE`). Part of what {@link JobFilter.exhausted} means.
 */
export const EXHAUSTED_ERROR_CODES: readonly string[] = ['SPOOL_RETRIES_EXHAUSTED', 'SPOOL_INDETERMINATE'];

/** The error of an attempt a graceful stop gave back (`releaseAttempt`): not counted against `maxAttempts`. */
export const RELEASED_ATTEMPT: ErrorInfo & { code: string } = {
  name: 'Released',
  message: 'the runner stopped (graceful shutdown) before the attempt finished; it is run again and does not count against maxAttempts',
  code: 'SPOOL_RELEASED',
};

/**
 * Why an attempt's outcome was not recorded because its runner no longer held the job's lease
 * (`finishAttempt` with a lease): fence -1 is a runner that holds no lease on the job any more.
 */
export function leaseLostError(fence: number): ErrorInfo {
  return {
    name: 'LeaseLost',
    message:
      fence < 0
        ? 'this runner no longer held the job\'s lease when the attempt ended (the lease expired, or the job ended or left the invoking state first)'
        : `the job's lease (fence ${fence}) was taken by another runner`,
  };
}
