import Database from 'better-sqlite3';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type {
  AcceptResult,
  CommitResult,
  CreateJobResult,
  ErrorInfo,
  InboxRecord,
  JobFilter,
  JobRecord,
  JobStore,
  JsonValue,
  NewInboxEvent,
  NewJob,
  TransitionCommit,
  TransitionRecord,
} from '../../src/ports/store.ts';
import { systemClock, type Clock } from '../../src/ports/clock.ts';
import { SchemaTooNewError, CorruptRecordError } from '../../src/runtime/errors.ts';

/** Options of {@link SqliteStore.open}. */
export interface SqliteStoreOptions {
  /**
   * `FULL` (default): an acknowledged commit survives power loss (one disk sync per transaction).
   * `NORMAL`: survives a process crash, but the last commits can roll back after a power loss.
   */
  synchronous?: 'FULL' | 'NORMAL';
  /** How long a writer waits for another process's lock, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Clock for the store's own bookkeeping (when a migration was applied). Default: real time. */
  clock?: Clock;
}

interface Migration {
  version: number;
  name: string;
  sql: string;
}

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

/** The migrations shipped with this code, in order. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((file) => ({ version: Number(file.slice(0, 4)), name: file, sql: readFileSync(`${dir}${file}`, 'utf8') }));
}

type Row = Record<string, unknown>;

class Abort {
  constructor(readonly result: CommitResult) {}
}

/**
 * The embedded default store: one SQLite file in WAL mode, `synchronous=FULL`, a busy timeout,
 * `BEGIN IMMEDIATE` for every write, numbered migrations, and a refusal to open a database
 * whose schema is newer than this code.
 *
 * @example
 * const store = await SqliteStore.open('./spool.db');               // FULL by default
 * const fast = await SqliteStore.open('./spool.db', { synchronous: 'NORMAL' });
 */
export class SqliteStore implements JobStore {
  readonly description: string;
  readonly db: Database.Database;
  readonly schemaVersion: number;
  readonly #stmts: ReturnType<typeof prepare>;
  readonly #listCache = new Map<string, Database.Statement>();
  #closed = false;

  private constructor(path: string, options: SqliteStoreOptions) {
    this.description = `sqlite:${path}`;
    this.db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      this.db.pragma('foreign_keys = ON');
      this.schemaVersion = migrate(this.db, path, (options.clock ?? systemClock).now());
      this.#stmts = prepare(this.db);
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  /** Open (creating and migrating as needed) a Spool database file. */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    return new SqliteStore(path, options);
  }

  async createJob(job: NewJob): Promise<CreateJobResult> {
    const s = this.#stmts;
    return this.#write(() => {
      const existing = (s.getJob.get(job.id) as Row | undefined) ??
        (job.idempotencyKey === null ? undefined : (s.byKey.get(job.owner ?? '', job.idempotencyKey) as Row | undefined));
      if (existing) return { job: toJobRecord(existing), created: false };
      s.insertJob.run({
        id: job.id,
        machine_id: job.machineId,
        machine_version: job.machineVersion,
        status: job.status,
        state_value: JSON.stringify(job.value),
        state_paths: pathsText(job.statePaths),
        context: JSON.stringify(job.context),
        snapshot: job.snapshot,
        input: JSON.stringify(job.input),
        input_hash: job.inputHash,
        idempotency_key: job.idempotencyKey,
        owner: job.owner ?? '',
        at: job.at,
      });
      insertTransition(s, job.id, 1, job.transition);
      return { job: toJobRecord(s.getJob.get(job.id) as Row), created: true };
    });
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    const row = this.#stmts.getJob.get(id) as Row | undefined;
    return row ? toJobRecord(row) : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    const row = this.#stmts.byKey.get(owner ?? '', key) as Row | undefined;
    return row ? toJobRecord(row) : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.machineId !== undefined) {
      where.push('machine_id = ?');
      params.push(filter.machineId);
    }
    if (filter.state !== undefined) {
      where.push("instr(state_paths, ?) > 0");
      params.push(`|${filter.state}|`);
    }
    if (filter.status !== undefined) {
      where.push('status = ?');
      params.push(filter.status);
    }
    if (filter.quarantined !== undefined) where.push(filter.quarantined ? 'quarantine IS NOT NULL' : 'quarantine IS NULL');
    if (filter.owner !== undefined) {
      where.push('owner = ?');
      params.push(filter.owner ?? '');
    }
    if (filter.afterId !== undefined) {
      where.push('id > ?');
      params.push(filter.afterId);
    }
    const sql = `SELECT * FROM jobs${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`;
    params.push(filter.limit ?? -1);
    let stmt = this.#listCache.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.#listCache.set(sql, stmt);
    }
    return (stmt.all(...params) as Row[]).map(toJobRecord);
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    const s = this.#stmts;
    return this.#write(() => {
      const info = s.insertEvent.run({ ...inboxParams(event), status: 'pending', error: null, revision: null, processed_at: null });
      const row = s.getEvent.get(event.jobId, event.eventId) as Row;
      return { event: toInboxRecord(row), duplicate: info.changes === 0 };
    });
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    const row = this.#stmts.getEvent.get(jobId, eventId) as Row | undefined;
    return row ? toInboxRecord(row) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    return (this.#stmts.listEvents.all(jobId) as Row[]).map(toInboxRecord);
  }

  async pendingEvents(jobId: string, limit: number): Promise<InboxRecord[]> {
    return (this.#stmts.pending.all(jobId, limit) as Row[]).map(toInboxRecord);
  }

  async jobsWithPendingEvents(limit: number): Promise<string[]> {
    return (this.#stmts.pendingJobs.all(limit) as Row[]).map((r) => r['job_id'] as string);
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    const s = this.#stmts;
    const one = this.db.transaction((c: TransitionCommit): CommitResult => applyCommit(s, c));
    return this.#write(() =>
      commits.map((c) => {
        try {
          return one(c);
        } catch (error) {
          if (error instanceof Abort) return error.result;
          return { ok: false, reason: 'error', error: { name: (error as Error).name, message: (error as Error).message } };
        }
      }),
    );
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number): Promise<boolean> {
    return this.#write(() => this.#stmts.rejectEvent.run(JSON.stringify(error), at, seq).changes === 1);
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    this.#write(() => this.#stmts.quarantine.run(reason, at, jobId));
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    return (this.#stmts.history.all(jobId) as Row[]).map(toTransitionRecord);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.db.close();
  }

  /** Every write is one `BEGIN IMMEDIATE` transaction: see docs/ARCHITECTURE.md. */
  #write<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }
}

function migrate(db: Database.Database, path: string, now: number): number {
  const migrations = loadMigrations();
  const latest = migrations.at(-1)?.version ?? 0;
  return db
    .transaction(() => {
      db.exec('CREATE TABLE IF NOT EXISTS spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
      const current = (db.prepare('SELECT max(version) AS v FROM spool_migrations').get() as { v: number | null }).v ?? 0;
      if (current > latest) {
        throw new SchemaTooNewError(
          `Database ${path} has schema version ${current}, but this Spool knows only up to ${latest}. ` +
            'It was written by a newer Spool: upgrade Spool to open it (nothing was changed).',
          { path, schemaVersion: current, supported: latest },
        );
      }
      for (const m of migrations) {
        if (m.version <= current) continue;
        db.exec(m.sql);
        db.prepare('INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now);
      }
      return Math.max(current, latest);
    })
    .immediate();
}

function prepare(db: Database.Database) {
  return {
    getJob: db.prepare('SELECT * FROM jobs WHERE id = ?'),
    byKey: db.prepare('SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?'),
    insertJob: db.prepare(`INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context,
        snapshot, input, input_hash, idempotency_key, owner, quarantine, created_at, updated_at)
      VALUES (@id, @machine_id, @machine_version, 1, @status, @state_value, @state_paths, @context,
        @snapshot, @input, @input_hash, @idempotency_key, @owner, NULL, @at, @at)`),
    updateJob: db.prepare(`UPDATE jobs SET revision = revision + 1, status = @status, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, machine_version = @machine_version, updated_at = @at
      WHERE id = @id AND revision = @expected`),
    revisionOf: db.prepare('SELECT revision FROM jobs WHERE id = ?'),
    insertTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    insertEvent: db.prepare(`INSERT INTO inbox (job_id, event_id, type, payload, payload_hash, status, error, revision, accepted_at, processed_at)
      VALUES (@job_id, @event_id, @type, @payload, @payload_hash, @status, @error, @revision, @accepted_at, @processed_at)
      ON CONFLICT (job_id, event_id) DO NOTHING`),
    settleEvent: db.prepare(`UPDATE inbox SET status = @status, error = @error, revision = @revision, processed_at = @at, payload = @payload
      WHERE seq = @seq AND job_id = @job_id AND status = 'pending'`),
    rejectEvent: db.prepare(`UPDATE inbox SET status = 'rejected', error = ?, processed_at = ? WHERE seq = ? AND status = 'pending'`),
    getEvent: db.prepare('SELECT * FROM inbox WHERE job_id = ? AND event_id = ?'),
    listEvents: db.prepare('SELECT * FROM inbox WHERE job_id = ? ORDER BY seq'),
    pending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT ?"),
    pendingJobs: db.prepare(`SELECT i.job_id, min(i.seq) AS first FROM inbox i JOIN jobs j ON j.id = i.job_id
      WHERE i.status = 'pending' AND j.quarantine IS NULL GROUP BY i.job_id ORDER BY first LIMIT ?`),
    quarantine: db.prepare('UPDATE jobs SET quarantine = ?, updated_at = ? WHERE id = ?'),
    history: db.prepare('SELECT * FROM transitions WHERE job_id = ? ORDER BY revision'),
  };
}

function applyCommit(s: ReturnType<typeof prepare>, c: TransitionCommit): CommitResult {
  const revision = c.expectedRevision + 1;
  const updated = s.updateJob.run({
    id: c.jobId,
    expected: c.expectedRevision,
    status: c.job.status,
    state_value: JSON.stringify(c.job.value),
    state_paths: pathsText(c.job.statePaths),
    context: JSON.stringify(c.job.context),
    snapshot: c.job.snapshot,
    machine_version: c.job.machineVersion,
    at: c.job.at,
  });
  if (updated.changes !== 1) {
    const row = s.revisionOf.get(c.jobId) as { revision: number } | undefined;
    throw new Abort({ ok: false, reason: 'conflict', currentRevision: row?.revision ?? null });
  }
  insertTransition(s, c.jobId, revision, c.transition);
  const e = c.event;
  if (e) {
    const error = e.error ? JSON.stringify(e.error) : null;
    if (e.accept) {
      const info = s.insertEvent.run({
        ...inboxParams(e.accept),
        payload: JSON.stringify(e.payload),
        status: e.status,
        error,
        revision,
        processed_at: c.job.at,
      });
      if (info.changes !== 1) throw new Abort({ ok: false, reason: 'duplicate-event' });
    } else {
      const info = s.settleEvent.run({ seq: e.seq, job_id: c.jobId, status: e.status, error, revision, at: c.job.at, payload: JSON.stringify(e.payload) });
      if (info.changes !== 1) throw new Abort({ ok: false, reason: 'event-settled' });
    }
  }
  return { ok: true, revision };
}

function insertTransition(s: ReturnType<typeof prepare>, jobId: string, revision: number, t: TransitionCommit['transition']): void {
  s.insertTransition.run(
    jobId,
    revision,
    t.eventId,
    t.eventType,
    JSON.stringify(t.payload),
    t.from === null ? null : JSON.stringify(t.from),
    JSON.stringify(t.to),
    t.outcome,
    t.error ? JSON.stringify(t.error) : null,
    t.at,
  );
}

function inboxParams(e: NewInboxEvent) {
  return {
    job_id: e.jobId,
    event_id: e.eventId,
    type: e.type,
    payload: JSON.stringify(e.payload),
    payload_hash: e.payloadHash,
    accepted_at: e.at,
  };
}

function pathsText(paths: string[]): string {
  return `|${paths.join('|')}|`;
}

/** Parse a JSON column; a corrupted one is reported, never thrown past the row. */
function column(row: Row, name: string, problems: string[]): JsonValue {
  const text = row[name];
  if (text === null || text === undefined) return null;
  try {
    return JSON.parse(text as string) as JsonValue;
  } catch {
    problems.push(name);
    return null;
  }
}

function toJobRecord(row: Row): JobRecord {
  const problems: string[] = [];
  const value = column(row, 'state_value', problems);
  const context = column(row, 'context', problems);
  const input = column(row, 'input', problems);
  const status = row['status'] as JobRecord['status'];
  const corrupt = problems.length ? `corrupted row: ${problems.join(', ')} ${problems.length > 1 ? 'are' : 'is'} not valid JSON` : null;
  if (typeof row['id'] !== 'string' || typeof row['revision'] !== 'number') {
    throw new CorruptRecordError(`A jobs row is unreadable (id ${String(row['id'])}).`);
  }
  return {
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
    quarantine: (row['quarantine'] as string | null) ?? corrupt,
    ...(corrupt ? { corruption: corrupt } : {}),
    createdAt: row['created_at'] as number,
    updatedAt: row['updated_at'] as number,
  };
}

function toInboxRecord(row: Row): InboxRecord {
  const problems: string[] = [];
  return {
    seq: row['seq'] as number,
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
  };
}

function toTransitionRecord(row: Row): TransitionRecord {
  const problems: string[] = [];
  return {
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
  };
}
