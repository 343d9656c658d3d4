/**
 * The store port: everything the engine needs from a database, in terms of job operations.
 * It is async so a networked database can implement it, and its write path takes a batch
 * of commits so that transitions of many jobs can share one database transaction (and one
 * disk sync) while each commit is still checked, and succeeds or fails, on its own.
 *
 * No driver type crosses this file. Every `now`/`at` is a parameter: stores never read a clock
 * for retries, timers, schedules or the times they record.
 *
 * Lease clocks. Leases and activity claims are the one exception a store may make, to judge them
 * by a clock of its own (a server database's), so that hosts whose clocks disagree never both hold
 * a job. Every lease time the runtime passes is its `now` plus a duration: `until`/`claimUntil`
 * come with the `now` they were taken at (`LeaseClaim.now`, `claimEffect`'s `now`, the trailing
 * `now` of `renewLeases` and `renewClaim`, a commit's and a create's `at` for the claims it
 * writes). A store with a clock of its own writes the expiry `its now + (until - now)`, and judges
 * every lease and claim expiry (a write under a lease, `claimEffect`, `dueEffects`' expired claims,
 * `jobsWithPendingEvents`, `leaseHolders`, `expireLeases`, a commit's `leased` refusal, `stats`'
 * leases) by its own now instead of the caller's; the lease expiries it records and returns
 * (`JobRecord.lease.until`, `claimExpiresAt`, `nextWakeAt`'s lease and claim expiries) are then its
 * own clock's times. A store judging by the caller's clock (SQLite: one host, one clock) writes
 * `until` as given and compares with `now`. The Postgres store uses the server's clock (option
 * `leaseClock: 'caller'` makes it judge by the caller's, for tests that move an injected clock).
 *
 * Storage faults. Besides its results, any call may throw only Spool's typed storage faults
 * (src/base/errors.ts), never a driver's error: `StorageFullError` and `StorageIoError`
 * (retryable: nothing was changed; a Postgres store maps disk full, a lost connection before
 * COMMIT and a serialisation failure here), `DatabaseBusyError` (retryable: a lock held past the
 * timeout), `StorageAccessError` (bad configuration: read-only, permission denied) and
 * `DatabaseDamagedError` (the file is damaged: check it with `spool doctor`). Writes
 * (`writeBatch`, `commit`) may also throw {@link CommitOutcomeUnknown}. A fault fails the whole
 * call: it is never reported as one write's refusal (`reason: 'error'`, `Outcome.ok` false).
 */
export * from './jobs.ts';
export * from './effects.ts';
export * from './commits.ts';
export * from './queries.ts';
export * from './schedules.ts';
import type { AcceptResult, CreateJobResult, ErrorInfo, InboxRecord, JobRecord, JsonValue, NewInboxEvent, Outcome, QueuedEvent, TransitionRecord } from './jobs.ts';
import type { AssetRecord, AttemptRecord, AttemptResult, ClaimedEffect, DueClaim, DueClaimResult, EffectRecord, FinishStatus, NoteRecord, TimerRecord } from './effects.ts';
import type { CommitOutcomeUnknown, CommitResult, NewJob, TransitionCommit, WriteBatch, WriteBatchResult } from './commits.ts';
import type { FeedPage, HistoryFeedFilter, JobFilter, PurgeFilter, StoreStats } from './queries.ts';
import type { NewSchedule, OccurrenceRecord, ScheduleFire, ScheduleFireResult, ScheduleRecord } from './schedules.ts';

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
   * `unclaimableBy`: only those a batch claim (`claimDueEffects`) with these `machines` would never
   * take: out of attempts, a running attempt unsafe to repeat, of a job not active or of a machine
   * version not among them. A runtime's poll reads these for what the batch claim leaves to it
   * (recovery, migration, quarantine), never the rows another runner's batch claim is taking. It
   * looks only at the oldest `limit` due rows of each kind (pending by age, backoff by due time,
   * running by claim expiry), so its cost does not grow with the backlog: a row the batch claim
   * never takes stays due, and reaches the head as the claimable rows before it are taken.
   */
  dueEffects(now: number, limit: number, runner?: string, unclaimableBy?: readonly string[]): Promise<EffectRecord[]>;
  /** Active effects claimed as running (to check their runners after a restart). */
  runningEffects(limit: number): Promise<EffectRecord[]>;
  /**
   * Start the next attempt: only if the effect is active and pending, due from backoff, or
   * running under a claim that expired (or `takeOver` names the dead runner), and never past
   * the effect's stored `maxAttempts` (set by the engine's retry policy when the effect is
   * written; SQL: `attemptsLeft`, persistence/sql/predicates.ts; the runtime records a last
   * attempt interrupted as exhausted). The attempt a dead runner left is recorded as interrupted. In the same transaction the runner claims (or
   * renews, with `fence` held) its job's lease until `claimUntil`; while another live runner holds
   * it, or the job is suspended or quarantined, nothing is claimed. The claimed effect comes back with the job's lease fence. (`fence`
   * omitted, in tools and tests: the runner's own live lease is renewed whatever its fence.)
   */
  claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined>;
  /**
   * Claim due activities in ONE atomic write, as `claimEffect` would claim each: the oldest due
   * effects (in `dueEffects`' order) of active jobs of `machines` whose lease is free or expired,
   * at most one per job and `limit` in all, of the `srcs` it names, within each src's `budget` (each
   * src's oldest rows are read on their own: a backlog of another src costs nothing); each job's
   * lease is taken for `runner` until `claimUntil` (its fence grows) and each attempt recorded as
   * started. Never a running attempt unsafe to repeat or out of attempts (the caller recovers
   * those), never a row a concurrent claim holds: two runners claiming at once take disjoint rows
   * and neither waits on the other (Postgres: `FOR NO KEY UPDATE … SKIP LOCKED` in one statement).
   */
  claimDueEffects(claim: DueClaim): Promise<DueClaimResult>;
  /**
   * Extend the claim of a running attempt to `claimUntil`, taken at `now` (see "Lease clocks"
   * above; `claimUntil` = `now` ends the claim). False if the attempt, or its job's lease, is no
   * longer this runner's.
   */
  renewClaim(id: string, attempt: number, runner: string, claimUntil: number, now: number): Promise<boolean>;
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
  /**
   * Settle an effect that may not run again (unsafe to repeat, exhausted) with its error event,
   * only while it is as the caller saw it: still at `attempt`, that attempt running (or, at attempt
   * 0, never started). False, changing nothing, once that attempt ended or a newer one started: a
   * stale read must not fail an effect whose later attempt the machine is still owed.
   */
  failEffect(id: string, attempt: number, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean>;
  /** Find the waiting effect that holds this completion token. */
  effectByToken(token: string): Promise<EffectRecord | undefined>;
  /** Claim a completion token once: the effect settles and its outcome event is accepted. */
  completeByToken(token: string, result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo }, event: NewInboxEvent, at: number): Promise<boolean>;

  // Timers
  listTimers(jobId: string): Promise<TimerRecord[]>;
  dueTimers(now: number, limit: number): Promise<TimerRecord[]>;
  /** Move a due timer into its job's inbox, once. */
  fireTimer(id: string, event: NewInboxEvent): Promise<boolean>;
  /**
   * The earliest scheduled timer, effect retry, claim or lease expiry, for sleeping until it (held
   * jobs' effects wake nobody). With `now` (the caller's time), a store with a lease clock of its
   * own gives its lease and claim expiries in the caller's clock (`now + (expiry - its now)`), so a
   * host whose clock runs ahead does not wake at once for every live lease; without it, as stored.
   */
  nextWakeAt(now?: number): Promise<number | null>;

  // Leases
  /** Extend this runner's leases on these jobs to `until`, taken at `now` (see "Lease clocks" above); returns the ones it still holds, with their fences. */
  renewLeases(runner: string, jobIds: readonly string[], until: number, now: number): Promise<Map<string, number>>;
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
   * `lease` (an activity reporting): also false unless that runner still holds the job with that
   * fence, and it never lowers the stored progress (the stored value stays when it is higher: an
   * attempt run again after an interruption reports from its start). Only the machine (its
   * `context.progress`, written by a commit) and a call without `lease` (`Runtime.setProgress`) set it lower.
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
   * Optional: call `onChange` soon after another connection (another process) commits to the
   * store, not for this store's own commits, until the returned function is called. `what`:
   * `'all'` (default) every such commit; `'work'` only those that leave work a worker may take
   * (a new job, an event, an activity or timer to run, a lease given back: not a claim, a
   * heartbeat, progress, or a commit that ends a job). An idle worker wakes at once for `'work'`
   * instead of at its next poll; polling stays the fallback (a change may be told late, twice,
   * or, while the store reconnects, not at all). Postgres: LISTEN/NOTIFY. SQLite has none (its
   * worker polls `nextWakeAt`).
   */
  watchChanges?(onChange: () => void, what?: 'work' | 'all'): () => void;

  /**
   * Optional: history rows of every job in commit order, those with a `seq` above `after` that
   * match `filter`, at most `limit`, looking at most `scan` seqs past `after` (a filter that
   * matches little costs a bounded read, and `next` moves past what it looked at). Rows become
   * visible in seq order, so a reader that passes `next` back misses none and sees none twice.
   * SQLite: the `seq` column of schema 11 (rows written before it have none). Postgres: a
   * position the reader gives committed rows in seq order (persistence/drivers/pg/feed.ts).
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
 * query: `releasesLeft` in persistence/sql/predicates.ts), never a number of its own.
 */
export const MAX_RELEASES = 5;

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
