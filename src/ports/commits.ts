/**
 * The port's writes: a new job, a transition's commit, a group-commit batch, and what a write
 * whose outcome is unknown left to resolve.
 */
import { SpoolError } from '../base/errors.ts';
import type { AttemptFinish, ClaimedEffect, DueClaim, DueClaimResult, EffectClaim, FinishStatus, NewEffect, NewTimer } from './effects.ts';
import type { CreateOutcome, ErrorInfo, EventStatus, JobStatus, JsonValue, LeaseClaim, NewInboxEvent, Outcome, TransitionDraft } from './jobs.ts';

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
  /** `JSON.stringify(context)`, when the start made it already (as TransitionCommit's `job.contextJson`). */
  contextJson?: string;
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
    /** `JSON.stringify(context)`, when the step made it already (the store writes it as it is; absent: the store makes it). */
    contextJson?: string;
    snapshot: string;
    /** The job's stored version; another only in a migration commit (`transition.outcome` `migrated`), else the commit is a conflict. */
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
   * Made from the job's record as this process last knew it, not read again before the commit:
   * refused as a `conflict` while the job is quarantined or is another job under the same id
   * (born at another `createdAt`); the result then carries the job's stored progress, which is
   * most often `progress`, the one this process knew (a store may count on it: program.ts, `Expected`).
   */
  unread?: { createdAt: number; progress?: number | null };
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
  /** `fence`: the lease fence after the commit (null: made without a lease); `progress`: the job's, for an `unread` commit. */
  | { ok: true; revision: number; fence: number | null; progress?: number | null }
  | { ok: false; reason: 'conflict'; currentRevision: number | null }
  /** Another runner holds the job's lease (not expired): nothing was written. */
  | { ok: false; reason: 'leased'; owner: string; until: number }
  | { ok: false; reason: 'event-settled' }
  /** The event's id is already recorded for the job (a key refused it): nothing was written. */
  | { ok: false; reason: 'duplicate-event' }
  /** The commit's `finish` is not the current attempt (stale, or the lease moved on): nothing was written. */
  | { ok: false; reason: 'outcome-not-current' }
  | { ok: false; reason: 'error'; error: ErrorInfo };

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
    ...(batch.dueClaims ?? []).map((c) => ({ kind: 'due-claims' as const, runner: c.runner })),
  ];
}

/**
 * A group-commit batch: writes of many jobs that share one transaction and one disk sync. Each
 * is checked and fails on its own; the order within the transaction is creates, commits,
 * finishes, releases, claims, due claims.
 */
export interface WriteBatch {
  creates?: readonly NewJob[];
  commits?: readonly TransitionCommit[];
  finishes?: readonly AttemptFinish[];
  /**
   * Leases freed (`releaseLeases` of one runner on some jobs), after the finishes and before the
   * claims: a job nothing runs on any more (an attempt that ended in a retry) is let go in the
   * next batch's transaction, not one of its own, and a claim of the same batch takes it again.
   */
  releases?: readonly LeaseRelease[];
  claims?: readonly EffectClaim[];
  /**
   * Batch claims (`claimDueEffects`), last: a slot an attempt's outcome frees in this batch is
   * refilled from the backlog in the same transaction (the next job's first activity claimed in
   * the commit that ended the last one). A storage fault fails the batch, as for every write.
   */
  dueClaims?: readonly DueClaim[];
}

/** A runner's leases on some jobs, freed as `releaseLeases` frees them (fences kept). */
export interface LeaseRelease {
  runner: string;
  jobIds: readonly string[];
}

/** The results of a {@link WriteBatch}, in the order of its lists. */
export interface WriteBatchResult {
  creates: CreateOutcome[];
  commits: CommitResult[];
  finishes: Outcome<FinishStatus>[];
  /** One per `releases`: how many leases it freed (absent: the batch had none). */
  releases?: Outcome<number>[];
  claims: Outcome<ClaimedEffect | undefined>[];
  /** One per `dueClaims` (absent: the batch had none). */
  dueClaims?: DueClaimResult[];
}
