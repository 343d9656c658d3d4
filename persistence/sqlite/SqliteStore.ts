import Database from 'better-sqlite3';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type {
  AcceptResult,
  AssetRecord,
  AttemptRecord,
  AttemptResult,
  EffectRecord,
  NoteRecord,
  TimerRecord,
  CommitResult,
  CreateJobResult,
  ErrorInfo,
  InboxRecord,
  JobFilter,
  JobRecord,
  JobStore,
  JsonValue,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
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

function failure(error: unknown): CommitResult {
  if (error instanceof Abort) return error.result;
  return { ok: false, reason: 'error', error: { name: (error as Error).name, message: (error as Error).message } };
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
  /** Transaction wrappers, built once: `#tx.immediate(fn)` runs fn in BEGIN IMMEDIATE; `#savepoint(c)` one commit of a batch. */
  readonly #tx: Database.Transaction<(fn: () => unknown) => unknown>;
  readonly #savepoint: Database.Transaction<(c: TransitionCommit) => CommitResult>;
  #closed = false;

  private constructor(path: string, options: SqliteStoreOptions) {
    this.description = `sqlite:${path}`;
    this.db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      refuseNewerSchema(this.db, path); // before anything is changed, even the journal mode
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      // Checkpoint the WAL every ~16 MB instead of every 4 MB: fewer checkpoint stalls on the commit path.
      this.db.pragma('wal_autocheckpoint = 4000');
      this.db.pragma('foreign_keys = ON');
      this.schemaVersion = migrate(this.db, path, (options.clock ?? systemClock).now());
      this.#stmts = prepare(this.db);
      this.#tx = this.db.transaction((fn: () => unknown) => fn());
      const stmts = this.#stmts;
      this.#savepoint = this.db.transaction((c: TransitionCommit) => applyCommit(stmts, c));
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
        progress: job.progress ?? null,
        at: job.at,
      });
      insertTransition(s, job.id, 1, job.transition);
      writeRequests(s, job.effects, job.timers, job.deliveries);
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
    if (filter.machineVersion !== undefined) {
      where.push('machine_version = ?');
      params.push(filter.machineVersion);
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
    if (filter.exhausted !== undefined) {
      where.push(`${filter.exhausted ? '' : 'NOT '}EXISTS (SELECT 1 FROM effects e WHERE e.job_id = jobs.id AND e.status = 'failed'
        AND (e.attempt >= e.max_attempts OR json_extract(e.error, '$.code') IN ('SPOOL_RETRIES_EXHAUSTED', 'SPOOL_INDETERMINATE')))`);
    }
    if (filter.cancelRequested !== undefined) where.push(filter.cancelRequested ? 'cancel_requested_at IS NOT NULL' : 'cancel_requested_at IS NULL');
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

  async activeMachineVersions(owner: string | null): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    return (this.#stmts.activeVersions.all(owner ?? '') as Row[]).map((r) => ({
      machineId: r['machine_id'] as string,
      machineVersion: r['machine_version'] as string,
      jobs: r['jobs'] as number,
    }));
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
    if (limit === 1) {
      const row = this.#stmts.firstPending.get(jobId) as Row | undefined; // LIMIT 1 literal: no re-prepare per bind
      return row ? [toInboxRecord(row)] : [];
    }
    return (this.#stmts.pending.all(jobId, limit) as Row[]).map(toInboxRecord);
  }

  async jobsWithPendingEvents(limit: number): Promise<string[]> {
    return (this.#stmts.pendingJobs.all(limit) as Row[]).map((r) => r['job_id'] as string);
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    if (commits.length === 1) {
      // One commit: no savepoint; a failed check rolls the whole transaction back.
      try {
        return [this.#write(() => applyCommit(this.#stmts, commits[0]!))];
      } catch (error) {
        return [failure(error)];
      }
    }
    return this.#write(() =>
      commits.map((c) => {
        try {
          return this.#savepoint(c);
        } catch (error) {
          return failure(error);
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

  async getEffect(id: string): Promise<EffectRecord | undefined> {
    const row = this.#stmts.getEffect.get(id) as Row | undefined;
    return row ? toEffectRecord(row) : undefined;
  }

  async listEffects(jobId: string): Promise<EffectRecord[]> {
    return (this.#stmts.listEffects.all(jobId) as Row[]).map(toEffectRecord);
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return (this.#stmts.listAttempts.all(jobId) as Row[]).map(toAttemptRecord);
  }

  async dueEffects(now: number, limit: number): Promise<EffectRecord[]> {
    return (this.#stmts.dueEffects.all({ now, limit }) as Row[]).map(toEffectRecord);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    return (this.#stmts.runningEffects.all(limit) as Row[]).map(toEffectRecord);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string): Promise<EffectRecord | undefined> {
    const s = this.#stmts;
    return this.#write(() => {
      const before = s.getEffect.get(id) as Row | undefined;
      const row = s.claimEffect.get({ id, runner, until: claimUntil, now, takeOver: takeOver ?? null }) as Row | undefined;
      if (!row) return undefined;
      if (before && before['status'] === 'running') s.interruptAttempt.run(now, id, before['attempt']);
      s.insertAttempt.run(id, row['attempt'], runner, now);
      return toEffectRecord(row);
    });
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number): Promise<boolean> {
    return this.#write(() => this.#stmts.renewClaim.run(claimUntil, id, attempt, runner).changes === 1);
  }

  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number): Promise<'current' | 'stale'> {
    const s = this.#stmts;
    return this.#write(() => {
      const params =
        result.kind === 'succeeded'
          ? { status: 'succeeded', output: JSON.stringify(result.output), error: null, next: null, token: null }
          : result.kind === 'waiting'
            ? { status: 'waiting', output: null, error: null, next: null, token: result.token }
            : {
                status: result.retryAt === null ? 'failed' : 'backoff',
                output: null,
                error: JSON.stringify(result.error),
                next: result.retryAt,
                token: null,
              };
      const current = s.settleEffect.run({ ...params, id, attempt, at }).changes === 1;
      const error = result.kind === 'failed' ? JSON.stringify(result.error) : null;
      s.endAttempt.run(current ? result.kind : 'stale', at, error, id, attempt);
      const event = result.kind === 'waiting' ? null : result.event;
      if (event) acceptPending(s, event);
      return current ? 'current' : 'stale';
    });
  }

  async failEffect(id: string, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean> {
    const s = this.#stmts;
    return this.#write(() => {
      const effect = s.getEffect.get(id) as Row | undefined;
      if (s.failEffect.run(JSON.stringify(error), at, id).changes !== 1) return false;
      if (effect && effect['status'] === 'running') s.interruptAttempt.run(at, id, effect['attempt']);
      acceptPending(s, event);
      return true;
    });
  }

  async effectByToken(token: string): Promise<EffectRecord | undefined> {
    const row = this.#stmts.effectByToken.get(token) as Row | undefined;
    return row ? toEffectRecord(row) : undefined;
  }

  async completeByToken(
    token: string,
    result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo },
    event: NewInboxEvent,
    at: number,
  ): Promise<boolean> {
    const s = this.#stmts;
    return this.#write(() => {
      const row = s.completeByToken.get({
        token,
        at,
        status: result.kind,
        output: result.kind === 'succeeded' ? JSON.stringify(result.output) : null,
        error: result.kind === 'failed' ? JSON.stringify(result.error) : null,
      }) as Row | undefined;
      if (!row) return false;
      s.endAttempt.run(result.kind, at, result.kind === 'failed' ? JSON.stringify(result.error) : null, row['id'], row['attempt']);
      acceptPending(s, event);
      return true;
    });
  }

  async listTimers(jobId: string): Promise<TimerRecord[]> {
    return (this.#stmts.listTimers.all(jobId) as Row[]).map(toTimerRecord);
  }

  async dueTimers(now: number, limit: number): Promise<TimerRecord[]> {
    return (this.#stmts.dueTimers.all(now, limit) as Row[]).map(toTimerRecord);
  }

  async fireTimer(id: string, event: NewInboxEvent): Promise<boolean> {
    const s = this.#stmts;
    return this.#write(() => {
      if (s.fireTimer.run(id).changes !== 1) return false;
      acceptPending(s, event);
      return true;
    });
  }

  async nextWakeAt(): Promise<number | null> {
    const s = this.#stmts;
    const times = [s.nextTimer.get(), s.nextRetry.get(), s.nextClaimExpiry.get()]
      .map((r) => (r as { t: number | null }).t)
      .filter((t): t is number => t !== null);
    return times.length ? Math.min(...times) : null;
  }

  async requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }> {
    const s = this.#stmts;
    return this.#write(() => {
      const first = s.requestCancel.run(at, reason, jobId).changes === 1;
      if (first) acceptPending(s, event);
      return { first };
    });
  }

  async setProgress(jobId: string, progress: number, _at: number): Promise<boolean> {
    return this.#write(() => this.#stmts.setProgress.run(progress, jobId).changes === 1);
  }

  async addNote(note: NoteRecord): Promise<void> {
    this.#write(() => this.#stmts.addNote.run(note.jobId, note.kind, note.message, note.at));
  }

  async listNotes(jobId: string): Promise<NoteRecord[]> {
    return (this.#stmts.listNotes.all(jobId) as Row[]).map((r) => ({
      jobId: r['job_id'] as string,
      kind: r['kind'] as string,
      message: r['message'] as string,
      at: r['at'] as number,
    }));
  }

  async attachAsset(a: AssetRecord): Promise<boolean> {
    return this.#write(
      () =>
        this.#stmts.attachAsset.run(a.jobId, a.key, a.type, a.uri, a.size, a.meta === null ? null : JSON.stringify(a.meta), a.effectId, a.attempt, a.createdAt)
          .changes === 1,
    );
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    return (this.#stmts.listAssets.all(jobId) as Row[]).map(toAssetRecord);
  }

  async purgeJob(jobId: string): Promise<boolean> {
    return this.#write(() => this.#stmts.purge.run(jobId).changes === 1);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.db.close();
  }

  /** Every write is one `BEGIN IMMEDIATE` transaction: see docs/ARCHITECTURE.md. */
  #write<T>(fn: () => T): T {
    return this.#tx.immediate(fn) as T;
  }
}

function tooNew(path: string, current: number, latest: number): SchemaTooNewError {
  return new SchemaTooNewError(
    `Database ${path} has schema version ${current}, but this Spool knows only up to ${latest}. ` +
      'It was written by a newer Spool: upgrade Spool to open it (nothing was changed).',
    { path, schemaVersion: current, supported: latest },
  );
}

function refuseNewerSchema(db: Database.Database, path: string): void {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'spool_migrations'").get();
  if (!table) return;
  const current = (db.prepare('SELECT max(version) AS v FROM spool_migrations').get() as { v: number | null }).v ?? 0;
  const latest = loadMigrations().at(-1)?.version ?? 0;
  if (current > latest) throw tooNew(path, current, latest);
}

function migrate(db: Database.Database, path: string, now: number): number {
  const migrations = loadMigrations();
  const latest = migrations.at(-1)?.version ?? 0;
  return db
    .transaction(() => {
      db.exec('CREATE TABLE IF NOT EXISTS spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
      const current = (db.prepare('SELECT max(version) AS v FROM spool_migrations').get() as { v: number | null }).v ?? 0;
      if (current > latest) throw tooNew(path, current, latest);
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
    activeVersions: db.prepare(`SELECT machine_id, machine_version, count(*) AS jobs FROM jobs WHERE status = 'active' AND owner = ?
      GROUP BY machine_id, machine_version ORDER BY machine_id, machine_version`),
    byKey: db.prepare('SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?'),
    insertJob: db.prepare(`INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context,
        snapshot, input, input_hash, idempotency_key, owner, quarantine, progress, created_at, updated_at)
      VALUES (@id, @machine_id, @machine_version, 1, @status, @state_value, @state_paths, @context,
        @snapshot, @input, @input_hash, @idempotency_key, @owner, NULL, @progress, @at, @at)`),
    /** Status and version unchanged (the usual case): their index entries are not rewritten. */
    updateState: db.prepare(`UPDATE jobs SET revision = revision + 1, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END
      WHERE id = @id AND revision = @expected AND status = @status AND machine_version = @machine_version`),
    updateJob: db.prepare(`UPDATE jobs SET revision = revision + 1, status = @status, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, machine_version = @machine_version, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END
      WHERE id = @id AND revision = @expected`),
    revisionOf: db.prepare('SELECT revision FROM jobs WHERE id = ?'),
    insertTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    insertEvent: db.prepare(`INSERT INTO inbox (job_id, event_id, type, payload, payload_hash, status, error, revision, accepted_at, processed_at,
        source_kind, source_id, attempt)
      VALUES (@job_id, @event_id, @type, @payload, @payload_hash, @status, @error, @revision, @accepted_at, @processed_at,
        @source_kind, @source_id, @attempt)
      ON CONFLICT (job_id, event_id) DO NOTHING`),
    settleEvent: db.prepare(`UPDATE inbox SET status = @status, error = @error, revision = @revision, processed_at = @at, payload = @payload
      WHERE seq = @seq AND job_id = @job_id AND status = 'pending'`),
    rejectEvent: db.prepare(`UPDATE inbox SET status = 'rejected', error = ?, processed_at = ? WHERE seq = ? AND status = 'pending'`),
    getEvent: db.prepare('SELECT * FROM inbox WHERE job_id = ? AND event_id = ?'),
    listEvents: db.prepare('SELECT * FROM inbox WHERE job_id = ? ORDER BY seq'),
    firstPending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT 1"),
    hasPending: db.prepare(`SELECT 1 FROM inbox WHERE job_id = ? AND status = 'pending' LIMIT 1`),
    pending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT ?"),
    pendingJobs: db.prepare(`SELECT i.job_id, min(i.seq) AS first FROM inbox i JOIN jobs j ON j.id = i.job_id
      WHERE i.status = 'pending' AND j.quarantine IS NULL GROUP BY i.job_id ORDER BY first LIMIT ?`),
    quarantine: db.prepare('UPDATE jobs SET quarantine = ?, updated_at = ? WHERE id = ?'),
    history: db.prepare('SELECT * FROM transitions WHERE job_id = ? ORDER BY revision'),
    insertEffect: db.prepare(`INSERT INTO effects (id, job_id, actor_id, src, input, status, active, attempt, max_attempts, unsafe,
        created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', 1, 0, ?, ?, ?, ?, ?)`),
    deactivateEffects: db.prepare(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND actor_id = ? AND active = 1`),
    getEffect: db.prepare('SELECT * FROM effects WHERE id = ?'),
    listEffects: db.prepare('SELECT * FROM effects WHERE job_id = ? ORDER BY created_revision, id'),
    listAttempts: db.prepare(`SELECT a.* FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
      WHERE e.job_id = ? ORDER BY e.created_revision, a.effect_id, a.attempt`),
    dueEffects: db.prepare(`SELECT * FROM effects WHERE active = 1 AND (status = 'pending'
        OR (status = 'backoff' AND next_run_at <= @now) OR (status = 'running' AND claim_expires_at <= @now))
      ORDER BY coalesce(next_run_at, created_at) LIMIT @limit`),
    runningEffects: db.prepare(`SELECT * FROM effects WHERE active = 1 AND status = 'running' LIMIT ?`),
    claimEffect: db.prepare(`UPDATE effects SET status = 'running', attempt = attempt + 1, claimed_by = @runner,
        claim_expires_at = @until, next_run_at = NULL, updated_at = @now
      WHERE id = @id AND active = 1 AND (status = 'pending' OR (status = 'backoff' AND next_run_at <= @now)
        OR (status = 'running' AND (claim_expires_at <= @now OR claimed_by = @takeOver)))
      RETURNING *`),
    interruptAttempt: db.prepare(`UPDATE effect_attempts SET outcome = 'interrupted', ended_at = ?
      WHERE effect_id = ? AND attempt = ? AND outcome = 'running'`),
    insertAttempt: db.prepare(`INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, outcome) VALUES (?, ?, ?, ?, 'running')`),
    renewClaim: db.prepare(`UPDATE effects SET claim_expires_at = ? WHERE id = ? AND attempt = ? AND claimed_by = ? AND status = 'running'`),
    endAttempt: db.prepare(`UPDATE effect_attempts SET outcome = ?, ended_at = ?, error = ?
      WHERE effect_id = ? AND attempt = ? AND outcome IN ('running', 'waiting', 'interrupted')`),
    settleEffect: db.prepare(`UPDATE effects SET status = @status, output = @output, error = @error, next_run_at = @next,
        token = @token, claimed_by = NULL, claim_expires_at = NULL, updated_at = @at
      WHERE id = @id AND attempt = @attempt AND status = 'running' AND active = 1`),
    failEffect: db.prepare(`UPDATE effects SET status = 'failed', error = ?, token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?
      WHERE id = ? AND active = 1 AND status NOT IN ('succeeded', 'failed', 'cancelled')`),
    effectByToken: db.prepare('SELECT * FROM effects WHERE token = ?'),
    completeByToken: db.prepare(`UPDATE effects SET status = @status, output = @output, error = @error, token = NULL, updated_at = @at
      WHERE token = @token AND status = 'waiting' AND active = 1 RETURNING id, attempt`),
    listTimers: db.prepare('SELECT * FROM timers WHERE job_id = ? ORDER BY due_at, id'),
    dueTimers: db.prepare(`SELECT * FROM timers WHERE status = 'scheduled' AND due_at <= ? ORDER BY due_at, id LIMIT ?`),
    fireTimer: db.prepare(`UPDATE timers SET status = 'fired' WHERE id = ? AND status = 'scheduled'`),
    insertTimer: db.prepare(`INSERT INTO timers (id, job_id, key, kind, event, due_at, status, created_revision, created_at)
      VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?, ?)`),
    cancelTimers: db.prepare(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND key = ? AND status IN ('scheduled', 'fired')`),
    deliverTimer: db.prepare(`UPDATE timers SET status = 'delivered' WHERE id = ? AND status = 'fired'`),
    nextTimer: db.prepare(`SELECT min(due_at) AS t FROM timers WHERE status = 'scheduled'`),
    nextRetry: db.prepare(`SELECT min(next_run_at) AS t FROM effects WHERE active = 1 AND status = 'backoff'`),
    nextClaimExpiry: db.prepare(`SELECT min(claim_expires_at) AS t FROM effects WHERE active = 1 AND status = 'running'`),
    requestCancel: db.prepare(`UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL`),
    setProgress: db.prepare(`UPDATE jobs SET progress = ? WHERE id = ? AND status = 'active'`),
    addNote: db.prepare('INSERT INTO notes (job_id, kind, message, at) VALUES (?, ?, ?, ?)'),
    listNotes: db.prepare('SELECT job_id, kind, message, at FROM notes WHERE job_id = ? ORDER BY id'),
    attachAsset: db.prepare(`INSERT INTO assets (job_id, key, type, uri, size, meta, effect_id, attempt, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, key) DO NOTHING`),
    listAssets: db.prepare('SELECT * FROM assets WHERE job_id = ? ORDER BY created_at, key'),
    purge: db.prepare('DELETE FROM jobs WHERE id = ?'),
  };
}

function applyCommit(s: ReturnType<typeof prepare>, c: TransitionCommit): CommitResult {
  const revision = c.expectedRevision + 1;
  const params = {
    id: c.jobId,
    expected: c.expectedRevision,
    status: c.job.status,
    state_value: JSON.stringify(c.job.value),
    state_paths: pathsText(c.job.statePaths),
    context: JSON.stringify(c.job.context),
    snapshot: c.job.snapshot,
    machine_version: c.job.machineVersion,
    at: c.job.at,
    set_progress: c.job.progress === undefined ? 0 : 1,
    progress: c.job.progress ?? null,
  };
  const updated = s.updateState.run(params).changes === 1 ? 1 : s.updateJob.run(params).changes;
  if (updated !== 1) {
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
      // Accept-and-apply only when nothing is queued for the job: events apply in accept order.
      if (s.hasPending.get(c.jobId)) throw new Abort({ ok: false, reason: 'conflict', currentRevision: c.expectedRevision });
    } else {
      const info = s.settleEvent.run({ seq: e.seq, job_id: c.jobId, status: e.status, error, revision, at: c.job.at, payload: JSON.stringify(e.payload) });
      if (info.changes !== 1) throw new Abort({ ok: false, reason: 'event-settled' });
    }
  }
  for (const actorId of c.effects?.deactivate ?? []) s.deactivateEffects.run(c.job.at, c.jobId, actorId);
  // Deliver the consumed timer before this transition's cancellations: an `after` transition that
  // leaves its state also cancels its own key, which must not turn the delivered timer into a cancelled one.
  if (c.consumedTimer !== undefined) s.deliverTimer.run(c.consumedTimer);
  for (const key of c.timers?.cancel ?? []) s.cancelTimers.run(c.jobId, key);
  writeRequests(s, c.effects?.create, c.timers?.schedule, c.deliveries);
  return { ok: true, revision };
}

/** Effects, timers and self-sends a transition asked for: written in the transition's own transaction. */
function writeRequests(s: ReturnType<typeof prepare>, effects: NewEffect[] = [], timers: NewTimer[] = [], deliveries: NewInboxEvent[] = []): void {
  for (const e of effects) {
    s.insertEffect.run(e.id, e.jobId, e.actorId, e.src, JSON.stringify(e.input), e.maxAttempts, e.unsafe ? 1 : 0, e.createdRevision, e.at, e.at);
  }
  for (const t of timers) {
    s.insertTimer.run(t.id, t.jobId, t.key, t.kind, JSON.stringify(t.event), t.dueAt, t.createdRevision, t.createdAt);
  }
  for (const d of deliveries) acceptPending(s, d);
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
    source_kind: e.source ?? 'external',
    source_id: e.sourceId ?? null,
    attempt: e.attempt ?? null,
  };
}

function acceptPending(s: ReturnType<typeof prepare>, e: NewInboxEvent): boolean {
  return s.insertEvent.run({ ...inboxParams(e), status: 'pending', error: null, revision: null, processed_at: null }).changes === 1;
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
    quarantine: (row['quarantine'] as string | null) ?? null,
    progress: (row['progress'] as number | null) ?? null,
    cancelRequestedAt: (row['cancel_requested_at'] as number | null) ?? null,
    cancelReason: (row['cancel_reason'] as string | null) ?? null,
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
    source: row['source_kind'] as InboxRecord['source'],
    sourceId: (row['source_id'] as string | null) ?? null,
    attempt: (row['attempt'] as number | null) ?? null,
  };
}

function toEffectRecord(row: Row): EffectRecord {
  const problems: string[] = [];
  return {
    id: row['id'] as string,
    jobId: row['job_id'] as string,
    actorId: row['actor_id'] as string,
    src: row['src'] as string,
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
}

function toAttemptRecord(row: Row): AttemptRecord {
  const problems: string[] = [];
  return {
    effectId: row['effect_id'] as string,
    attempt: row['attempt'] as number,
    runner: (row['runner'] as string | null) ?? null,
    startedAt: row['started_at'] as number,
    endedAt: (row['ended_at'] as number | null) ?? null,
    outcome: row['outcome'] as AttemptRecord['outcome'],
    error: column(row, 'error', problems) as ErrorInfo | null,
  };
}

function toTimerRecord(row: Row): TimerRecord {
  const problems: string[] = [];
  return {
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
}

function toAssetRecord(row: Row): AssetRecord {
  const problems: string[] = [];
  return {
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
