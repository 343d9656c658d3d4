/**
 * The SQLite store's schedule operations (`schedules` and `schedule_occurrences`, migration 0004).
 * `SqliteStore` delegates to this class; what it needs of the store (its write transaction, the job
 * insert, the inbox insert) comes in as hooks, so the job tables stay written in one place.
 */
import type Database from 'better-sqlite3';
import type {
  JobRecord,
  NewInboxEvent,
  NewJob,
  NewSchedule,
  OccurrenceRecord,
  ScheduleCatchUp,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
} from '../../src/ports/store.ts';

type Row = Record<string, unknown>;

/** What the schedule operations need from `SqliteStore`. */
export interface SqliteScheduleHooks {
  /** Run `fn` in one `BEGIN IMMEDIATE` transaction. */
  write<T>(fn: () => T): T;
  /** Insert a job at revision 1 with its history record and initial requests (inside the transaction). */
  insertJob(job: NewJob): void;
  getJob(id: string): JobRecord | undefined;
  /** Accept a pending inbox event (ignored if (job, event id) is already there). */
  acceptPending(event: NewInboxEvent): void;
}

/** Ends a fire step with its result; the transaction rolls back. */
class Refused {
  constructor(readonly result: ScheduleFireResult) {}
}

export class SqliteSchedules {
  readonly #hooks: SqliteScheduleHooks;
  readonly #s: ReturnType<typeof prepare>;

  constructor(db: Database.Database, hooks: SqliteScheduleHooks) {
    this.#hooks = hooks;
    this.#s = prepare(db);
  }

  put(schedule: NewSchedule, expectedRevision: number | null): { ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null } {
    const s = this.#s;
    return this.#hooks.write(() => {
      const params = scheduleParams(schedule);
      const row = (expectedRevision === null ? s.insert.get(params) : s.replace.get({ ...params, expected: expectedRevision })) as Row | undefined;
      if (row) return { ok: true as const, schedule: toScheduleRecord(row) };
      const current = s.get.get(schedule.id) as Row | undefined;
      return { ok: false as const, current: current ? toScheduleRecord(current) : null };
    });
  }

  get(id: string): ScheduleRecord | undefined {
    const row = this.#s.get.get(id) as Row | undefined;
    return row ? toScheduleRecord(row) : undefined;
  }

  list(filter: { owner?: string | null }): ScheduleRecord[] {
    const rows = (filter.owner === undefined ? this.#s.listAll.all() : this.#s.listOwner.all(filter.owner ?? '')) as Row[];
    return rows.map(toScheduleRecord);
  }

  delete(id: string, owner: string | null): boolean {
    return this.#hooks.write(() => this.#s.delete.run(id, owner ?? '').changes === 1);
  }

  due(owner: string | null, now: number, limit: number): ScheduleRecord[] {
    return (this.#s.due.all({ owner: owner ?? '', now, limit }) as Row[]).map(toScheduleRecord);
  }

  fire(f: ScheduleFire): ScheduleFireResult {
    const s = this.#s;
    try {
      return this.#hooks.write((): ScheduleFireResult => {
        const row = s.advance.get({
          id: f.scheduleId,
          expected: f.expectedRevision,
          next_due_at: f.state.nextDueAt,
          buffered_due_at: f.state.bufferedDueAt,
          last_due_at: f.state.lastDueAt,
          last_job_id: f.state.lastJobId,
          missed: f.state.missed,
          at: f.at,
        }) as Row | undefined;
        if (!row) {
          const current = s.get.get(f.scheduleId) as Row | undefined;
          throw new Refused({ ok: false, reason: 'conflict', schedule: current ? toScheduleRecord(current) : null });
        }
        let job: JobRecord | null = null;
        const o = f.occurrence;
        if (o) {
          const inserted = s.insertOccurrence.run(f.scheduleId, o.dueAt, o.outcome, o.job?.id ?? null, o.reason, f.at).changes === 1;
          if (!inserted) throw new Refused({ ok: false, reason: 'occurrence-taken' });
          if (o.job) {
            if (this.#hooks.getJob(o.job.id)) throw new Refused({ ok: false, reason: 'occurrence-taken' });
            this.#hooks.insertJob(o.job);
            job = this.#hooks.getJob(o.job.id) ?? null;
          }
        }
        if (f.cancel && s.requestCancel.run(f.at, f.cancel.reason, f.cancel.jobId).changes === 1) this.#hooks.acceptPending(f.cancel.event);
        return { ok: true, schedule: toScheduleRecord(row), job };
      });
    } catch (error) {
      if (error instanceof Refused) return error.result;
      throw error;
    }
  }

  occurrences(scheduleId: string, limit: number): OccurrenceRecord[] {
    return (this.#s.occurrences.all(scheduleId, limit) as Row[]).map((r) => ({
      scheduleId: r['schedule_id'] as string,
      dueAt: r['due_at'] as number,
      outcome: r['outcome'] as OccurrenceRecord['outcome'],
      jobId: (r['job_id'] as string | null) ?? null,
      reason: (r['reason'] as string | null) ?? null,
      at: r['at'] as number,
    }));
  }
}

function scheduleParams(s: NewSchedule) {
  return {
    id: s.id,
    owner: s.owner ?? '',
    machine_id: s.machineId,
    input: JSON.stringify(s.input),
    cron: s.cron,
    timezone: s.timezone,
    every_ms: s.everyMs,
    overlap: s.overlap,
    catch_up: JSON.stringify(s.catchUp),
    grace_ms: s.graceMs,
    start_at: s.startAt,
    next_due_at: s.nextDueAt,
    buffered_due_at: s.bufferedDueAt,
    last_due_at: s.lastDueAt,
    last_job_id: s.lastJobId,
    missed: s.missed,
    at: s.at,
  };
}

const OVERLAPS: readonly unknown[] = ['skip', 'buffer-one', 'allow-all', 'cancel-previous'];

/** A stored column's JSON, or `undefined` when it does not parse. */
function parsed(text: unknown): unknown {
  try {
    return typeof text === 'string' ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

function readableCatchUp(value: unknown): value is ScheduleCatchUp {
  if (value === 'skip-missed' || value === 'run-once') return true;
  const each = (value as { runEach?: unknown } | null)?.runEach;
  return typeof each === 'number' && Number.isInteger(each) && each >= 1;
}

/**
 * A row read as a schedule. One whose input, catch-up or overlap cannot be read (a damaged file)
 * comes back `damaged` with the reason, so that one bad row never stops the others.
 */
function toScheduleRecord(row: Row): ScheduleRecord {
  const input = parsed(row['input']);
  const catchUp = parsed(row['catch_up']);
  const problems = [
    ...(input === undefined ? ['its input is not JSON'] : []),
    ...(readableCatchUp(catchUp) ? [] : ['its catch-up policy is unreadable']),
    ...(OVERLAPS.includes(row['overlap']) ? [] : ['its overlap policy is unreadable']),
  ];
  const record: ScheduleRecord = {
    id: row['id'] as string,
    owner: row['owner'] === '' ? null : (row['owner'] as string),
    machineId: row['machine_id'] as string,
    input: (input ?? null) as ScheduleRecord['input'],
    cron: (row['cron'] as string | null) ?? null,
    timezone: (row['timezone'] as string | null) ?? null,
    everyMs: (row['every_ms'] as number | null) ?? null,
    overlap: row['overlap'] as ScheduleRecord['overlap'],
    catchUp: readableCatchUp(catchUp) ? catchUp : 'skip-missed',
    graceMs: row['grace_ms'] as number,
    startAt: (row['start_at'] as number | null) ?? null,
    nextDueAt: (row['next_due_at'] as number | null) ?? null,
    bufferedDueAt: (row['buffered_due_at'] as number | null) ?? null,
    lastDueAt: (row['last_due_at'] as number | null) ?? null,
    lastJobId: (row['last_job_id'] as string | null) ?? null,
    missed: row['missed'] as number,
    revision: row['revision'] as number,
    createdAt: row['created_at'] as number,
    updatedAt: row['updated_at'] as number,
  };
  if (problems.length > 0) record.damaged = `the stored schedule is damaged: ${problems.join(', ')}. It does not fire; add it again under its id to rewrite it, or remove it.`;
  return record;
}

const COLUMNS = `id, owner, machine_id, input, cron, timezone, every_ms, overlap, catch_up, grace_ms, start_at,
  next_due_at, buffered_due_at, last_due_at, last_job_id, missed`;
const VALUES = `@id, @owner, @machine_id, @input, @cron, @timezone, @every_ms, @overlap, @catch_up, @grace_ms, @start_at,
  @next_due_at, @buffered_due_at, @last_due_at, @last_job_id, @missed`;

function prepare(db: Database.Database) {
  return {
    insert: db.prepare(`INSERT INTO schedules (${COLUMNS}, revision, created_at, updated_at) VALUES (${VALUES}, 1, @at, @at)
      ON CONFLICT (id) DO NOTHING RETURNING *`),
    replace: db.prepare(`UPDATE schedules SET owner = @owner, machine_id = @machine_id, input = @input, cron = @cron, timezone = @timezone,
        every_ms = @every_ms, overlap = @overlap, catch_up = @catch_up, grace_ms = @grace_ms, start_at = @start_at,
        next_due_at = @next_due_at, buffered_due_at = @buffered_due_at, last_due_at = @last_due_at, last_job_id = @last_job_id,
        missed = @missed, revision = revision + 1, updated_at = @at
      WHERE id = @id AND revision = @expected RETURNING *`),
    get: db.prepare('SELECT * FROM schedules WHERE id = ?'),
    listAll: db.prepare('SELECT * FROM schedules ORDER BY id'),
    listOwner: db.prepare('SELECT * FROM schedules WHERE owner = ? ORDER BY id'),
    delete: db.prepare('DELETE FROM schedules WHERE id = ? AND owner = ?'),
    due: db.prepare(`SELECT * FROM schedules WHERE owner = @owner AND ((next_due_at IS NOT NULL AND next_due_at <= @now) OR buffered_due_at IS NOT NULL)
      ORDER BY min(coalesce(next_due_at, buffered_due_at), coalesce(buffered_due_at, next_due_at)), id LIMIT @limit`),
    advance: db.prepare(`UPDATE schedules SET next_due_at = @next_due_at, buffered_due_at = @buffered_due_at, last_due_at = @last_due_at,
        last_job_id = @last_job_id, missed = @missed, revision = revision + 1, updated_at = @at
      WHERE id = @id AND revision = @expected RETURNING *`),
    insertOccurrence: db.prepare(`INSERT INTO schedule_occurrences (schedule_id, due_at, outcome, job_id, reason, at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (schedule_id, due_at) DO NOTHING`),
    // As `requestCancel`, for a job that is still active.
    requestCancel: db.prepare(`UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL AND status = 'active'`),
    occurrences: db.prepare('SELECT * FROM schedule_occurrences WHERE schedule_id = ? ORDER BY due_at DESC LIMIT ?'),
  };
}
