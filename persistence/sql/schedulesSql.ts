import type { SqlDialect } from './predicates.ts';

const COLUMNS = `id, owner, machine_id, input, cron, timezone, every_ms, overlap, catch_up, grace_ms, start_at,
  next_due_at, buffered_due_at, last_due_at, last_job_id, missed`;
const VALUES = `@id, @owner, @machine_id, @input, @cron, @timezone, @every_ms, @overlap, @catch_up, @grace_ms, @start_at,
  @next_due_at, @buffered_due_at, @last_due_at, @last_job_id, @missed`;

/** The schedule statements' texts in one dialect (part of statements.ts's `statementsSql`). */
export function schedulesSql(d: SqlDialect) {
  return {
    scheduleInsert: `INSERT INTO schedules (${COLUMNS}, revision, created_at, updated_at) VALUES (${VALUES}, 1, @at, @at)
      ON CONFLICT (id) DO NOTHING RETURNING *`,
    scheduleReplace: `UPDATE schedules SET owner = @owner, machine_id = @machine_id, input = @input, cron = @cron, timezone = @timezone,
        every_ms = @every_ms, overlap = @overlap, catch_up = @catch_up, grace_ms = @grace_ms, start_at = @start_at,
        next_due_at = @next_due_at, buffered_due_at = @buffered_due_at, last_due_at = @last_due_at, last_job_id = @last_job_id,
        missed = @missed, revision = revision + 1, updated_at = @at
      WHERE id = @id AND revision = @expected RETURNING *`,
    scheduleGet: 'SELECT * FROM schedules WHERE id = ?',
    scheduleListAll: 'SELECT * FROM schedules ORDER BY id',
    scheduleListOwner: 'SELECT * FROM schedules WHERE owner = ? ORDER BY id',
    scheduleDelete: 'DELETE FROM schedules WHERE id = ? AND owner = ?',
    scheduleDue: `SELECT * FROM schedules WHERE owner = @owner AND ((next_due_at IS NOT NULL AND next_due_at <= @now) OR buffered_due_at IS NOT NULL)
      ORDER BY ${d.least('coalesce(next_due_at, buffered_due_at)', 'coalesce(buffered_due_at, next_due_at)')}, id LIMIT @limit`,
    scheduleAdvance: `UPDATE schedules SET next_due_at = @next_due_at, buffered_due_at = @buffered_due_at, last_due_at = @last_due_at,
        last_job_id = @last_job_id, missed = @missed, revision = revision + 1, updated_at = @at
      WHERE id = @id AND revision = @expected RETURNING *`,
    occurrenceInsert: `INSERT INTO schedule_occurrences (schedule_id, due_at, outcome, job_id, reason, at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (schedule_id, due_at) DO NOTHING`,
    // As `requestCancel`, for a job that is still active.
    scheduleCancel: `UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL AND status = 'active'`,
    occurrences: 'SELECT * FROM schedule_occurrences WHERE schedule_id = ? ORDER BY due_at DESC LIMIT ?',
  };
}
