/**
 * Schedules and their occurrences (`schedules` and `schedule_occurrences`, migration 0004): their
 * statements' texts (in statements.ts's `statementsSql`), the multi-statement writes as programs
 * (program.ts), and rows read as records. Jobs a fire starts are written by commit.ts's `insertJob`,
 * so the job tables stay written in one place.
 */
import type {
  JobRecord,
  NewSchedule,
  OccurrenceRecord,
  ScheduleCatchUp,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
} from '../../src/ports/store.ts';
import { acceptPending, insertJob } from './commit.ts';
import { get, run, type Program } from './program.ts';
import { toJobRecord, type Row } from './records.ts';

/** Ends a fire step with its result; the transaction rolls back. */
export class Refused {
  constructor(readonly result: ScheduleFireResult) {}
}

/** `putSchedule`: create (`expectedRevision` null) or replace on its revision; on refusal, the stored one. */
export function* putScheduleIn(schedule: NewSchedule, expectedRevision: number | null): Program<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
  const params = scheduleParams(schedule);
  const row = expectedRevision === null ? yield* get('scheduleInsert', params) : yield* get('scheduleReplace', { ...params, expected: expectedRevision });
  if (row) return { ok: true as const, schedule: toScheduleRecord(row) };
  const current = yield* get('scheduleGet', schedule.id);
  return { ok: false as const, current: current ? toScheduleRecord(current) : null };
}

/**
 * `fireSchedule`, all or nothing: the schedule advances on its revision, the occurrence is taken
 * once by its key, its job is created, the previous run cancelled. A refusal throws {@link Refused}
 * (the caller rolls back and returns its result).
 */
export function* fireScheduleIn(f: ScheduleFire): Program<ScheduleFireResult> {
  const row = yield* get('scheduleAdvance', {
    id: f.scheduleId,
    expected: f.expectedRevision,
    next_due_at: f.state.nextDueAt,
    buffered_due_at: f.state.bufferedDueAt,
    last_due_at: f.state.lastDueAt,
    last_job_id: f.state.lastJobId,
    missed: f.state.missed,
    at: f.at,
  });
  if (!row) {
    const current = yield* get('scheduleGet', f.scheduleId);
    throw new Refused({ ok: false, reason: 'conflict', schedule: current ? toScheduleRecord(current) : null });
  }
  let job: JobRecord | null = null;
  const o = f.occurrence;
  if (o) {
    const inserted = (yield* run('occurrenceInsert', f.scheduleId, o.dueAt, o.outcome, o.job?.id ?? null, o.reason, f.at)).changes === 1;
    if (!inserted) throw new Refused({ ok: false, reason: 'occurrence-taken' });
    if (o.job) {
      if (yield* get('getJob', o.job.id)) throw new Refused({ ok: false, reason: 'occurrence-taken' });
      yield* insertJob(o.job);
      const created = yield* get('getJob', o.job.id);
      job = created ? toJobRecord(created) : null;
    }
  }
  if (f.cancel && (yield* run('scheduleCancel', f.at, f.cancel.reason, f.cancel.jobId)).changes === 1) yield* acceptPending(f.cancel.event);
  return { ok: true, schedule: toScheduleRecord(row), job };
}

/** A schedule's handled occurrences, from their rows. */
export function toOccurrenceRecord(r: Row): OccurrenceRecord {
  return {
    scheduleId: r['schedule_id'] as string,
    dueAt: r['due_at'] as number,
    outcome: r['outcome'] as OccurrenceRecord['outcome'],
    jobId: (r['job_id'] as string | null) ?? null,
    reason: (r['reason'] as string | null) ?? null,
    at: r['at'] as number,
  };
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
export function toScheduleRecord(row: Row): ScheduleRecord {
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
