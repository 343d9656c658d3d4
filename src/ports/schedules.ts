/**
 * Schedules as stored: the schedule row, its occurrences, and one planned step (a fire).
 * Part of the store port (store.ts).
 */
import type { JobRecord, JsonValue, NewInboxEvent } from './jobs.ts';
import type { NewJob } from './commits.ts';

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
