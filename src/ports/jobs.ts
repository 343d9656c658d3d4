/**
 * Job rows and what is recorded of them: the job and its lease, inbox events and history (its
 * writes: commits.ts). Part of the store port (store.ts).
 */

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
  /** The timer or effect id behind a `timer`/`effect` event; for an `external` one, the event it redelivers (`redeliver~<id>`), else null. */
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
 * What the reason of a quarantine for a damaged stored record starts with ("damaged record:
 * jobs.context is not valid JSON"): the job's rows need checking (`spool doctor`) or restoring,
 * not a machine version registered. A store writes it; the engine keeps such a quarantine.
 */
export const DAMAGED_RECORD = 'damaged record: ';
