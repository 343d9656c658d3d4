/**
 * Job rows and what is recorded of them: the job and its lease, inbox events, history, and the
 * transition commit with its results (an outcome unknown included). Part of the store port (store.ts).
 */
import { SpoolError } from '../runtime/errors.ts';
import type { AttemptFinish, NewEffect, NewTimer, WriteBatch } from './effects.ts';

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
  /**
   * Effects, timers and self-sends the initial state asked for, written in the same transaction;
   * `deliveries` may end with a caller's event (`startOrSend`, source `external`), whose event id
   * is recorded once for the job as `acceptEvent` records it.
   */
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
  /**
   * A child job that ended: its invocation in the parent (a `child` effect still `waiting` and
   * active) succeeds with `output`, or, with `error`, fails with it (status `failed`, `error`
   * stored); only then is the outcome event accepted there.
   */
  settleParent?: { effectId: string; output: JsonValue; error?: ErrorInfo; event: NewInboxEvent };
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
  | { kind: 'claim'; effectId: string }
  /** A batch claim (`claimDueEffects`) of `runner`: as a claim, each attempt it may have taken expires at its `claimUntil`. */
  | { kind: 'due-claims'; runner: string };

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
