/**
 * What the store is asked to find: job filters, the history feed, purges and the stats figures.
 * Part of the store port (store.ts).
 */
import type { JobRecord, JobStatus, JsonValue, TransitionOutcome, TransitionRecord } from './jobs.ts';

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
   * SQL is `exhausted` in persistence/sql/predicates.ts, written once.
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
   * over stored facts: the SQL is `STUCK` in persistence/sql/predicates.ts, written once.
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

/** A page of `JobStore.historySince`: the rows, and the cursor to read the next page from. */
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
  /** Active effects claimed as running, by effect id: the claims held and their runners; `expired`: the claim has expired by `now` (the store's lease clock, src/ports/store.ts). */
  running: { effectId: string; jobId: string; src: string; attempt: number; runner: string | null; claimExpiresAt: number | null; expired: boolean }[];
  /** Job leases held (not expired by `now`), by runner: how many jobs and the earliest expiry. */
  leases: { runner: string; jobs: number; earliestUntil: number }[];
}

/**
 * The error codes of an effect that failed for good although attempts were left: no attempt left
 * after an interruption (`SPOOL_RETRIES_EXHAUSTED`) and an interrupted activity unsafe to repeat
 * (`SPOOL_INDETERMINATE`). Part of what {@link JobFilter.exhausted} means.
 */
export const EXHAUSTED_ERROR_CODES: readonly string[] = ['SPOOL_RETRIES_EXHAUSTED', 'SPOOL_INDETERMINATE'];
