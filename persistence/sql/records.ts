/**
 * Rows of the SQLite store as the port's records. A JSON column that does not parse never throws
 * past its row: it reads as null and the record says which column is damaged (`corruption` on a
 * job, `damaged` on the others), as "damaged record: <table>.<column>", the reason the store
 * quarantines the row's job with (SqliteStore) and `spool doctor` reports.
 */
import type { AssetRecord, AttemptRecord, EffectRecord, ErrorInfo, InboxRecord, JobRecord, JsonValue, TimerRecord, TransitionRecord } from '../../src/ports/store.ts';
import { DAMAGED_RECORD } from '../../src/ports/store.ts';
import { DatabaseDamagedError } from '../../src/base/errors.ts';
import { CHECK } from './faults.ts';

export type Row = Record<string, unknown>;


/** The reason for damaged columns of one table: "damaged record: jobs.context is not valid JSON". */
export function damageReason(table: string, columns: readonly string[]): string {
  return `${DAMAGED_RECORD}${columns.map((c) => `${table}.${c}`).join(', ')} ${columns.length > 1 ? 'are' : 'is'} not valid JSON`;
}

/** The record, with `damaged` set when columns of it are damaged (set on it, not spread into a copy). */
function withDamage<T extends { damaged?: string }>(record: T, table: string, problems: string[]): T {
  if (problems.length) record.damaged = damageReason(table, problems);
  return record;
}

/** Parse a JSON column; a damaged one is reported in `problems`, never thrown past the row. */
export function column(row: Row, name: string, problems: string[]): JsonValue {
  const text = row[name];
  if (text === null || text === undefined) return null;
  try {
    return JSON.parse(text as string) as JsonValue;
  } catch {
    problems.push(name);
    return null;
  }
}

/**
 * `known` brought up to date from its `uncommittedOf` row (the columns that move without a
 * commit, as an array in that statement's order), or undefined when the row is another revision
 * or another job under the same id (a job purged and made again has another birth time): then
 * read the whole row. No JSON to parse, no snapshot text to copy.
 */
export function withUncommitted(known: JobRecord, v: readonly unknown[] | undefined): JobRecord | undefined {
  if (!v || Number(v[0]) !== known.revision || Number(v[11]) !== known.createdAt) return undefined;
  return {
    ...known,
    quarantine: v[1] as string | null,
    progress: v[2] === null ? null : Number(v[2]),
    cancelRequestedAt: v[3] === null ? null : Number(v[3]),
    cancelReason: v[4] as string | null,
    suspendedAt: v[5] === null ? null : Number(v[5]),
    suspendReason: v[6] as string | null,
    lease: typeof v[7] === 'string' ? { owner: v[7], fence: Number(v[8]), until: Number(v[9]) } : null,
    updatedAt: Number(v[10]),
  };
}

/** The jobs columns a record is read from (toJobRecord): a statement that returns a job's record without `*` names these (state_paths, for list filters, is never read back). */
export const JOB_RECORD_COLUMNS = [
  'id', 'machine_id', 'machine_version', 'revision', 'status', 'state_value', 'context', 'snapshot', 'input', 'input_hash', 'idempotency_key',
  'owner', 'quarantine', 'progress', 'parent_job_id', 'parent_effect_id', 'cancel_requested_at', 'cancel_reason', 'suspended_at',
  'suspend_reason', 'lease_owner', 'lease_fence', 'lease_until', 'created_at', 'updated_at',
] as const;

export function toJobRecord(row: Row): JobRecord {
  const problems: string[] = [];
  const value = column(row, 'state_value', problems);
  const context = column(row, 'context', problems);
  const input = column(row, 'input', problems);
  const status = row['status'] as JobRecord['status'];
  const corrupt = problems.length ? damageReason('jobs', problems) : null;
  if (typeof row['id'] !== 'string' || typeof row['revision'] !== 'number') {
    throw new DatabaseDamagedError(`A jobs row is unreadable (id ${String(row['id'])}). ${CHECK}`, { table: 'jobs', row: String(row['id']) });
  }
  const record: JobRecord = {
    id: row['id'],
    machineId: row['machine_id'] as string,
    machineVersion: row['machine_version'] as string,
    revision: row['revision'],
    status,
    value,
    context,
    snapshot: row['snapshot'] as string,
    input,
    inputHash: row['input_hash'] as string,
    idempotencyKey: (row['idempotency_key'] as string | null) ?? null,
    owner: row['owner'] === '' ? null : (row['owner'] as string),
    quarantine: (row['quarantine'] as string | null) ?? null,
    progress: (row['progress'] as number | null) ?? null,
    parent: row['parent_job_id'] ? { jobId: row['parent_job_id'] as string, effectId: row['parent_effect_id'] as string } : null,
    cancelRequestedAt: (row['cancel_requested_at'] as number | null) ?? null,
    cancelReason: (row['cancel_reason'] as string | null) ?? null,
    suspendedAt: (row['suspended_at'] as number | null) ?? null,
    suspendReason: (row['suspend_reason'] as string | null) ?? null,
    lease: typeof row['lease_owner'] === 'string' ? { owner: row['lease_owner'], fence: row['lease_fence'] as number, until: row['lease_until'] as number } : null,
    createdAt: row['created_at'] as number,
    updatedAt: row['updated_at'] as number,
  };
  if (corrupt) record.corruption = corrupt;
  return record;
}

export function toInboxRecord(row: Row): InboxRecord {
  const problems: string[] = [];
  const record: InboxRecord = {
    seq: (row['seq'] as number | null) ?? null,
    jobId: row['job_id'] as string,
    eventId: row['event_id'] as string,
    type: row['type'] as string,
    payload: column(row, 'payload', problems),
    payloadHash: row['payload_hash'] as string,
    status: row['status'] as InboxRecord['status'],
    error: column(row, 'error', problems) as ErrorInfo | null,
    revision: (row['revision'] as number | null) ?? null,
    acceptedAt: row['accepted_at'] as number,
    processedAt: (row['processed_at'] as number | null) ?? null,
    source: row['source_kind'] as InboxRecord['source'],
    sourceId: (row['source_id'] as string | null) ?? null,
    attempt: (row['attempt'] as number | null) ?? null,
  };
  return withDamage(record, 'inbox', problems);
}

export function toEffectRecord(row: Row): EffectRecord {
  const problems: string[] = [];
  const record: EffectRecord = {
    id: row['id'] as string,
    jobId: row['job_id'] as string,
    actorId: row['actor_id'] as string,
    src: row['src'] as string,
    kind: row['kind'] === 'child' ? 'child' : 'activity',
    input: column(row, 'input', problems),
    status: row['status'] as EffectRecord['status'],
    active: row['active'] === 1,
    attempt: row['attempt'] as number,
    maxAttempts: row['max_attempts'] as number,
    unsafe: row['unsafe'] === 1,
    nextRunAt: (row['next_run_at'] as number | null) ?? null,
    claimedBy: (row['claimed_by'] as string | null) ?? null,
    claimExpiresAt: (row['claim_expires_at'] as number | null) ?? null,
    token: (row['token'] as string | null) ?? null,
    output: column(row, 'output', problems),
    error: column(row, 'error', problems) as ErrorInfo | null,
    createdRevision: row['created_revision'] as number,
    createdAt: row['created_at'] as number,
    updatedAt: row['updated_at'] as number,
  };
  return withDamage(record, 'effects', problems);
}

export function toAttemptRecord(row: Row): AttemptRecord {
  const problems: string[] = [];
  const record: AttemptRecord = {
    effectId: row['effect_id'] as string,
    attempt: row['attempt'] as number,
    runner: (row['runner'] as string | null) ?? null,
    startedAt: row['started_at'] as number,
    endedAt: (row['ended_at'] as number | null) ?? null,
    outcome: row['outcome'] as AttemptRecord['outcome'],
    error: column(row, 'error', problems) as ErrorInfo | null,
  };
  return withDamage(record, 'effect_attempts', problems);
}

export function toTimerRecord(row: Row): TimerRecord {
  const problems: string[] = [];
  const record: TimerRecord = {
    id: row['id'] as string,
    jobId: row['job_id'] as string,
    key: row['key'] as string,
    kind: row['kind'] as TimerRecord['kind'],
    event: column(row, 'event', problems),
    dueAt: row['due_at'] as number,
    status: row['status'] as TimerRecord['status'],
    createdRevision: row['created_revision'] as number,
    createdAt: row['created_at'] as number,
  };
  return withDamage(record, 'timers', problems);
}

export function toAssetRecord(row: Row): AssetRecord {
  const problems: string[] = [];
  const record: AssetRecord = {
    jobId: row['job_id'] as string,
    key: row['key'] as string,
    type: row['type'] as string,
    uri: row['uri'] as string,
    size: (row['size'] as number | null) ?? null,
    meta: column(row, 'meta', problems),
    effectId: (row['effect_id'] as string | null) ?? null,
    attempt: (row['attempt'] as number | null) ?? null,
    createdAt: row['created_at'] as number,
  };
  return withDamage(record, 'assets', problems);
}

export function toTransitionRecord(row: Row): TransitionRecord {
  const problems: string[] = [];
  const record: TransitionRecord = {
    jobId: row['job_id'] as string,
    revision: row['revision'] as number,
    eventId: (row['event_id'] as string | null) ?? null,
    eventType: row['event_type'] as string,
    payload: column(row, 'payload', problems),
    from: column(row, 'from_value', problems),
    to: column(row, 'to_value', problems),
    outcome: row['outcome'] as TransitionRecord['outcome'],
    error: column(row, 'error', problems) as ErrorInfo | null,
    at: row['at'] as number,
    runner: (row['runner'] as string | null) ?? null,
    fence: (row['fence'] as number | null) ?? null,
  };
  return withDamage(record, 'transitions', problems);
}
