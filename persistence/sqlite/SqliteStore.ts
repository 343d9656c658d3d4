import Database from 'better-sqlite3';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type {
  FeedPage,
  HistoryFeedFilter,
  AcceptResult,
  AssetRecord,
  AttemptRecord,
  AttemptResult,
  EffectRecord,
  NoteRecord,
  TimerRecord,
  CommitResult,
  CreateJobResult,
  AttemptFinish,
  ClaimedEffect,
  EffectClaim,
  EffectStart,
  FinishStatus,
  WriteBatch,
  WriteBatchResult,
  ErrorInfo,
  InboxRecord,
  QueuedEvent,
  JobFilter,
  JobRecord,
  JobStore,
  JsonValue,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
  PurgeFilter,
  StoreStats,
  NewSchedule,
  OccurrenceRecord,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  TransitionCommit,
  TransitionRecord,
  LeaseClaim,
  Outcome,
  UnresolvedOperation,
} from '../../src/ports/store.ts';
import { CommitOutcomeUnknown, inlineDraft, isExternal, leaseLostError, MAX_RELEASES, operationsOf, RELEASED_ATTEMPT, revisionNamedBy } from '../../src/ports/store.ts';
import { systemClock, type Clock } from '../../src/ports/clock.ts';
import { DatabaseBusyError, DatabaseDamagedError, SchemaTooNewError, SpoolError, ValidationError } from '../../src/runtime/errors.ts';
import { attemptsLeft, exhausted, releasesLeft, SQLITE, stuck } from './predicates.ts';
import { SqliteSchedules } from './schedules.ts';
import { CHECK, guardEntryPoints, isSqliteFault, outcomeUnknownAtCommit, storageFault } from './storageFault.ts';
import { damageReason, toAssetRecord, toAttemptRecord, toEffectRecord, toInboxRecord, toJobRecord, toTimerRecord, toTransitionRecord, type Row } from './records.ts';
import { CommitJson } from './commitJson.ts';

export { DatabaseBusyError };

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

/** The open sequence met another process's lock: `open` tries again (internal). */
class OpenBusy extends Error {
  override readonly cause: Error;
  constructor(cause: Error) {
    super(cause.message);
    this.cause = cause;
  }
}

const OPEN_OPTIONS = ['synchronous', 'busyTimeoutMs', 'clock'] as const;

/**
 * `open`'s arguments, checked before the file is touched: a typo (`synchronous: 'normal'`, an
 * unknown option name) would otherwise fall back to a default the caller did not ask for.
 */
function checkOpenOptions(path: unknown, options: unknown): void {
  const refuse = (message: string, option?: string) => {
    throw new ValidationError(`SqliteStore.open: ${message}.`, option ? { option } : {});
  };
  if (typeof path !== 'string' || path === '') refuse('the path must be a non-empty string (a file, or ":memory:")');
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return refuse('options must be an object');
  const o = options as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(OPEN_OPTIONS as readonly string[]).includes(k));
  if (unknown.length > 0) refuse(`unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${OPEN_OPTIONS.join(', ')})`, unknown[0]);
  if (o['synchronous'] !== undefined && o['synchronous'] !== 'FULL' && o['synchronous'] !== 'NORMAL') {
    refuse(`synchronous must be 'FULL' or 'NORMAL' (got ${JSON.stringify(o['synchronous']) ?? String(o['synchronous'])})`, 'synchronous');
  }
  const busy = o['busyTimeoutMs'];
  if (busy !== undefined && !(typeof busy === 'number' && Number.isSafeInteger(busy) && busy >= 0)) refuse('busyTimeoutMs must be a whole number of ms, 0 or more', 'busyTimeoutMs');
  const clock = o['clock'];
  if (clock !== undefined && typeof (clock as { now?: unknown } | null)?.now !== 'function') refuse('clock must be a Clock: { now(): number }', 'clock');
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

type RawRows = { stmt: Database.Statement; named: (values: unknown[]) => Row };

/**
 * A `SELECT *` statement in raw mode, with a function that names a row's values. better-sqlite3
 * builds a named row property by property (about 3 µs for a jobs row, read on every send); an
 * object literal generated once for the statement's columns costs a fraction of that.
 */
function rawRows(stmt: Database.Statement): RawRows {
  const names = stmt.columns().map((c) => c.name);
  const body = `return { ${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(', ')} };`;
  return { stmt: stmt.raw(true), named: new Function('v', body) as (values: unknown[]) => Row };
}

class Abort {
  constructor(readonly result: CommitResult) {}
}

/** Rolls back an effect claim whose job another live runner holds. */
class LeaseHeld {}

/** One commit of a batch refused by its own checks; a storage fault fails the whole transaction instead. */
function failure(error: unknown): CommitResult {
  if (error instanceof Abort) return error.result;
  if (isSqliteFault(error)) throw error;
  return { ok: false, reason: 'error', error: { name: (error as Error).name, message: (error as Error).message } };
}

/** One write of a batch, run (as the port's `outcomeOf`), except that a storage fault (or an unknown outcome) fails the whole call. */
function outcomeOf<T>(write: () => T): Outcome<T> {
  try {
    return { ok: true, result: write() };
  } catch (error) {
    if (isSqliteFault(error) || error instanceof CommitOutcomeUnknown) throw error;
    return { ok: false, error };
  }
}

/** A claim while another live runner holds the job's lease claims nothing (its writes rolled back). */
function unlessLeaseHeld<T>(claim: () => T): T | undefined {
  try {
    return claim();
  } catch (error) {
    if (error instanceof LeaseHeld) return undefined;
    throw error;
  }
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
  /** The database file (`:memory:` for the in-memory store). */
  readonly path: string;
  readonly db: Database.Database;
  readonly schemaVersion: number;
  /** The durability this connection commits with, as SQLite reports it after open. */
  readonly synchronous: 'FULL' | 'NORMAL';
  readonly #stmts: ReturnType<typeof prepare>;
  readonly #listCache = new Map<string, Database.Statement>();
  /** `getJob`, read by every send: the row as an array, named by a function built once (rawRows). */
  readonly #jobById: RawRows;
  /** Transaction wrappers, built once: `#tx.immediate(fn)` runs fn in BEGIN IMMEDIATE; `#savepoint(c)` one commit of a batch. */
  readonly #tx: Database.Transaction<(fn: () => unknown) => unknown>;
  readonly #savepoint: Database.Transaction<(c: TransitionCommit) => CommitResult>;
  readonly #createSavepoint: Database.Transaction<(job: NewJob) => CreateJobResult>;
  readonly #finishSavepoint: Database.Transaction<(f: AttemptFinish) => FinishStatus>;
  readonly #claimSavepoint: Database.Transaction<(c: EffectClaim) => ClaimedEffect | undefined>;
  /** Schedules and their occurrences (schedules.ts). */
  readonly #schedules: SqliteSchedules;
  #closed = false;

  /**
   * Opens the database synchronously (better-sqlite3 is synchronous). Use {@link SqliteStore.open},
   * which checks the options and retries while another process sets a new file up; subclasses
   * (the in-memory store) call it with `:memory:`, which no other connection can lock.
   */
  protected constructor(path: string, options: SqliteStoreOptions, description = `sqlite:${path}`) {
    this.description = description;
    this.path = path;
    this.db = openDatabase(path, options.busyTimeoutMs ?? 5000);
    try {
      // Before anything is changed, even the journal mode: another application's file, or a newer Spool's.
      if (refuseForeignDatabase(this.db, path)) refuseNewerSchema(this.db, path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      this.synchronous = this.db.pragma('synchronous', { simple: true }) === 1 ? 'NORMAL' : 'FULL';
      // Checkpoint the WAL every ~16 MB instead of every 4 MB: fewer checkpoint stalls on the commit path.
      this.db.pragma('wal_autocheckpoint = 4000');
      this.db.pragma('foreign_keys = ON');
      this.schemaVersion = migrate(this.db, path, (options.clock ?? systemClock).now());
      this.#stmts = prepare(this.db);
      this.#jobById = rawRows(this.db.prepare('SELECT * FROM jobs WHERE id = ?'));
      this.#tx = this.db.transaction((fn: () => unknown) => fn());
      const stmts = this.#stmts;
      this.#savepoint = this.db.transaction((c: TransitionCommit) => applyCommit(stmts, c));
      this.#createSavepoint = this.db.transaction((job: NewJob) => createIn(stmts, job));
      this.#finishSavepoint = this.db.transaction((f: AttemptFinish) => finishIn(stmts, f));
      this.#claimSavepoint = this.db.transaction((c: EffectClaim) => claimIn(stmts, c));
      this.#schedules = new SqliteSchedules(this.db, {
        write: (fn) => this.#write(fn),
        insertJob: (job) => insertJob(stmts, job),
        getJob: (id) => {
          const row = stmts.getJob.get(id) as Row | undefined;
          return row ? toJobRecord(row) : undefined;
        },
        acceptPending: (event) => void acceptPending(stmts, event),
      });
    } catch (error) {
      this.db.close();
      if (error instanceof SpoolError) throw error;
      // Another process opening the same new file at the same moment (its journal mode switch or
      // migration holds the lock past what SQLite's busy handler waits for): `open` tries again.
      if (String((error as { code?: unknown }).code ?? '').startsWith('SQLITE_BUSY')) throw new OpenBusy(error as Error);
      // A full disk, a read-only file: that storage fault. Not a Spool database, or a damaged one
      // (SQLITE_NOTADB, SQLITE_CORRUPT…): a typed refusal; nothing was changed.
      const fault = storageFault(error, { path, call: 'open' });
      if (fault instanceof SpoolError && !(fault instanceof DatabaseDamagedError)) throw fault;
      throw new DatabaseDamagedError(`Cannot open ${path} as a Spool database: ${(error as Error).message}. ${CHECK} Or point --db at another file.`, {
        path,
        sqlite: (error as { code?: unknown }).code ?? null,
      });
    }
  }

  /**
   * Open (creating and migrating as needed) a Spool database file. While another process holds
   * the file's lock to set it up (two workers started at once on a new file), it tries again for
   * up to `busyTimeoutMs`, then refuses with {@link DatabaseBusyError}.
   */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    checkOpenOptions(path, options);
    const patience = options.busyTimeoutMs ?? 5000;
    const started = Date.now();
    for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
      try {
        return new SqliteStore(path, options);
      } catch (error) {
        if (!(error instanceof OpenBusy)) throw error;
        const left = patience - (Date.now() - started);
        if (left <= 0) {
          throw new DatabaseBusyError(`Cannot open ${path}: another process held its lock for ${patience} ms (${error.cause.message}). Nothing was changed; try again.`, { path });
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(wait, left)));
      }
    }
  }

  async createJob(job: NewJob): Promise<CreateJobResult> {
    return this.#write(() => createIn(this.#stmts, job));
  }

  async writeBatch(batch: WriteBatch): Promise<WriteBatchResult> {
    const { creates = [], commits = [], finishes = [], claims = [] } = batch;
    if (creates.length + finishes.length + claims.length === 0) return { creates: [], commits: await this.commit(commits), finishes: [], claims: [] };
    const ops = () => operationsOf(batch);
    // One new job alone (a lone start): no savepoint, as a failure rolls the whole transaction back.
    if (creates.length === 1 && commits.length + finishes.length + claims.length === 0) {
      const job = creates[0]!;
      return { creates: [outcomeOf(() => this.#write(() => createIn(this.#stmts, job), ops))], commits: [], finishes: [], claims: [] };
    }
    // Each write in its own savepoint: a refused one rolls back alone.
    return this.#write(() => ({
      creates: creates.map((job) => outcomeOf(() => this.#createSavepoint(job))),
      commits: commits.map((c) => {
        try {
          return this.#savepoint(c);
        } catch (error) {
          return failure(error);
        }
      }),
      finishes: finishes.map((f) => outcomeOf(() => this.#finishSavepoint(f))),
      claims: claims.map((c) => outcomeOf(() => unlessLeaseHeld(() => this.#claimSavepoint(c)))),
    }), ops);
  }

  async getJob(id: string, known?: JobRecord): Promise<JobRecord | undefined> {
    if (known?.id === id) {
      // What moves without a commit, read as an array: no JSON to parse, no snapshot text to copy.
      const v = this.#stmts.uncommittedOf.get(id) as unknown[] | undefined;
      // The same revision of the same job (a job purged and made again under its id has another birth time).
      if (v && v[0] === known.revision && v[11] === known.createdAt) {
        return {
          ...known,
          quarantine: v[1] as string | null,
          progress: v[2] as number | null,
          cancelRequestedAt: v[3] as number | null,
          cancelReason: v[4] as string | null,
          suspendedAt: v[5] as number | null,
          suspendReason: v[6] as string | null,
          lease: typeof v[7] === 'string' ? { owner: v[7], fence: v[8] as number, until: v[9] as number } : null,
          updatedAt: v[10] as number,
        };
      }
    }
    const values = this.#jobById.stmt.get(id) as unknown[] | undefined;
    return values ? this.#recordDamage([toJobRecord(this.#jobById.named(values))])[0] : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    const row = this.#stmts.byKey.get(owner ?? '', key) as Row | undefined;
    return row ? this.#recordDamage([toJobRecord(row)])[0] : undefined;
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
    if (filter.exhausted !== undefined) where.push(filter.exhausted ? EXHAUSTED : `NOT ${EXHAUSTED}`);
    if (filter.cancelRequested !== undefined) where.push(filter.cancelRequested ? 'cancel_requested_at IS NOT NULL' : 'cancel_requested_at IS NULL');
    if (filter.suspended !== undefined) where.push(filter.suspended ? 'suspended_at IS NOT NULL' : 'suspended_at IS NULL');
    if (filter.stuck !== undefined) where.push(filter.stuck ? `(${STUCK})` : `NOT (${STUCK})`);
    if (filter.owner !== undefined) {
      where.push('owner = ?');
      params.push(filter.owner ?? '');
    }
    if (filter.afterId !== undefined) {
      where.push('id > ?');
      params.push(filter.afterId);
    }
    // The few quarantined or suspended jobs come from their partial indexes, not a scan of the rest
    // (recovery lists quarantined jobs on every open).
    const from = filter.quarantined === true ? 'jobs INDEXED BY jobs_quarantined' : filter.suspended === true ? 'jobs INDEXED BY jobs_suspended' : 'jobs';
    const sql = `SELECT * FROM ${from}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`;
    params.push(filter.limit ?? -1);
    let stmt = this.#listCache.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.#listCache.set(sql, stmt);
    }
    return this.#recordDamage((stmt.all(...params) as Row[]).map(toJobRecord));
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    return this.#stmts.orphanedChildren.pluck().all(limit) as string[];
  }

  async activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    const s = this.#stmts;
    const pairs: { machineId: string; machineVersion: string; jobs: number }[] = [];
    // A loose index scan: one probe of jobs_active_versions per pair, then a count bounded by countUpTo.
    for (let row = s.firstActiveVersion.get(owner ?? '') as Row | undefined; row; ) {
      const pair = { owner: owner ?? '', m: row['machine_id'] as string, v: row['machine_version'] as string };
      pairs.push({ machineId: pair.m, machineVersion: pair.v, jobs: s.countActiveVersion.pluck().get({ ...pair, limit: countUpTo }) as number });
      row = (s.nextActiveVersion.get(pair) ?? s.nextActiveMachine.get({ owner: pair.owner, m: pair.m })) as Row | undefined;
    }
    return pairs;
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    const s = this.#stmts;
    return this.#write(() => {
      // A repeat of a recorded id is refused by its key (event_keys; the inbox's own for the runtime's events).
      const info = insertInbox(s, { ...inboxParams(event), status: 'pending', error: null, revision: null, processed_at: null });
      const row = findEvent(s, event.jobId, event.eventId) as Row;
      return { event: toInboxRecord(row), duplicate: info.changes === 0 };
    });
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    const row = findEvent(this.#stmts, jobId, eventId);
    return row ? toInboxRecord(row) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listEvents.all(jobId) as Row[]).map(toInboxRecord));
  }

  async pendingEvents(jobId: string, limit: number): Promise<QueuedEvent[]> {
    if (limit === 1) {
      const row = this.#stmts.firstPending.get(jobId) as Row | undefined; // LIMIT 1 literal: no re-prepare per bind
      return row ? [toInboxRecord(row) as QueuedEvent] : [];
    }
    return (this.#stmts.pending.all(jobId, limit) as Row[]).map((r) => toInboxRecord(r) as QueuedEvent);
  }

  async jobsWithPendingEvents(limit: number, lease?: { runner: string; now: number }): Promise<string[]> {
    const rows = this.#stmts.pendingJobs.all({ limit, runner: lease?.runner ?? null, now: lease?.now ?? 0 }) as Row[];
    return rows.map((r) => r['job_id'] as string);
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    const ops = () => operationsOf({ commits });
    if (commits.length === 1) {
      // One commit: no savepoint; a failed check rolls the whole transaction back.
      try {
        return [this.#write(() => applyCommit(this.#stmts, commits[0]!), ops)];
      } catch (error) {
        if (error instanceof CommitOutcomeUnknown) throw error;
        return [failure(error)];
      }
    }
    return this.#write(
      () =>
        commits.map((c) => {
          try {
            return this.#savepoint(c);
          } catch (error) {
            return failure(error);
          }
        }),
      ops,
    );
  }

  async commitLanded(jobId: string, revision: number, eventId: string | null): Promise<boolean> {
    return this.#stmts.landed.get({ job: jobId, revision, event: eventId }) !== undefined;
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number, payload?: JsonValue): Promise<boolean> {
    return this.#write(() => this.#stmts.rejectEvent.run(JSON.stringify(error), at, payload === undefined ? null : JSON.stringify(payload), seq).changes === 1);
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    this.#write(() => this.#stmts.quarantine.run(reason, at, jobId));
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.history.all(jobId) as Row[]).map(toTransitionRecord));
  }

  async getEffect(id: string): Promise<EffectRecord | undefined> {
    const row = this.#stmts.getEffect.get(id) as Row | undefined;
    return row ? toEffectRecord(row) : undefined;
  }

  async listEffects(jobId: string): Promise<EffectRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listEffects.all(jobId) as Row[]).map(toEffectRecord));
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listAttempts.all(jobId) as Row[]).map(toAttemptRecord));
  }

  async dueEffects(now: number, limit: number, runner?: string): Promise<EffectRecord[]> {
    return (this.#stmts.dueEffects.all({ now, limit, runner: runner ?? null }) as Row[]).map(toEffectRecord);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    return (this.#stmts.runningEffects.all(limit) as Row[]).map(toEffectRecord);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined> {
    return unlessLeaseHeld(() => this.#write(() => claimIn(this.#stmts, { id, runner, now, claimUntil, takeOver, fence })));
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number): Promise<boolean> {
    return this.#write(() => this.#stmts.renewClaim.run({ until: claimUntil, id, attempt, runner }).changes === 1);
  }

  async releaseAttempt(id: string, attempt: number, runner: string, at: number): Promise<boolean> {
    return this.#write(() => {
      if (this.#stmts.releaseEffect.run({ id, attempt, runner, at, limit: MAX_RELEASES }).changes !== 1) return false;
      this.#stmts.endAttempt.run('interrupted', at, JSON.stringify(RELEASED_ATTEMPT), id, attempt);
      return true;
    });
  }

  async renewLeases(runner: string, jobIds: readonly string[], until: number): Promise<Map<string, number>> {
    if (jobIds.length === 0) return new Map();
    const rows = this.#write(() => this.#stmts.renewLeases.all({ runner, until, ids: JSON.stringify(jobIds) }) as Row[]);
    return new Map(rows.map((r) => [r['id'] as string, r['lease_fence'] as number]));
  }

  async releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number> {
    if (jobIds !== 'all' && jobIds.length === 0) return 0;
    const params = { runner, all: jobIds === 'all' ? 1 : 0, ids: jobIds === 'all' ? '[]' : JSON.stringify(jobIds) };
    return this.#write(() => this.#stmts.releaseLeases.run(params).changes);
  }

  async leaseHolders(now: number): Promise<string[]> {
    return (this.#stmts.leaseHolders.all(now) as Row[]).map((r) => r['lease_owner'] as string);
  }

  async expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]> {
    const s = this.#stmts;
    // Called every worker round: look first, and take the write lock only when something expired.
    if ('expiredBy' in filter && s.expireLeases.all(filter.expiredBy).length === 0) return [];
    return this.#write(() => {
      let rows: Row[];
      if ('owner' in filter) rows = s.expireOwnerLeases.all(filter.owner, filter.owner) as Row[];
      else {
        rows = s.expireLeases.all(filter.expiredBy) as Row[];
        for (const r of rows) s.freeLease.run(r['id'], r['owner'], r['lease_fence']);
      }
      return rows.map((r) => ({ jobId: r['id'] as string, owner: r['owner'] as string, fence: r['lease_fence'] as number }));
    });
  }

  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus> {
    return this.#write(() => finishIn(this.#stmts, { id, attempt, result, at, lease }));
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
    return this.#jobDamage(jobId, (this.#stmts.listTimers.all(jobId) as Row[]).map(toTimerRecord));
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
    const times = [s.nextTimer.get(), s.nextRetry.get(), s.nextClaimExpiry.get(), s.nextLeaseExpiry.get()]
      .map((r) => (r as { t: number | null } | undefined)?.t ?? null)
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

  async setProgress(jobId: string, progress: number, _at: number, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#write(() => this.#stmts.setProgress.run({ progress, id: jobId, runner: lease?.runner ?? null, fence: lease?.fence ?? null }).changes === 1);
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

  async attachAsset(a: AssetRecord, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#write(() => {
      if (lease && !this.#stmts.holdsLease.get(a.jobId, lease.runner, lease.fence)) return false;
      return this.#stmts.attachAsset.run(a.jobId, a.key, a.type, a.uri, a.size, a.meta === null ? null : JSON.stringify(a.meta), a.effectId, a.attempt, a.createdAt).changes === 1;
    });
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listAssets.all(jobId) as Row[]).map(toAssetRecord));
  }

  async purgeJob(jobId: string): Promise<boolean> {
    return this.#write(() => this.#stmts.purge.run(jobId).changes === 1);
  }

  async suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean> {
    return this.#noted(note, () => this.#stmts.suspend.run(at, reason, jobId).changes === 1);
  }

  async resumeJob(jobId: string, note: NoteRecord): Promise<boolean> {
    return this.#noted(note, () => this.#stmts.resume.run(jobId).changes === 1);
  }

  async redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean> {
    return this.#noted(note, () => this.#stmts.redrive.run(maxAttempts, at, id).changes === 1);
  }

  /** An operation and its note in one transaction: the note is written only when the operation changed something. */
  #noted(note: NoteRecord, change: () => boolean): boolean {
    return this.#write(() => {
      if (!change()) return false;
      this.#stmts.addNote.run(note.jobId, note.kind, note.message, note.at);
      return true;
    });
  }

  async purgeFinished(filter: PurgeFilter): Promise<string[]> {
    const params = {
      before: filter.before,
      statuses: JSON.stringify(filter.statuses),
      all: filter.owner === undefined ? 1 : 0,
      owner: filter.owner ?? '',
      limit: filter.limit,
    };
    return this.#write(() => (this.#stmts.purgeFinished.all(params) as Row[]).map((r) => r['id'] as string).sort(byteOrder));
  }

  async stats(filter: { owner?: string | null; now: number }): Promise<StoreStats> {
    const p = { all: filter.owner === undefined ? 1 : 0, owner: filter.owner ?? '', now: filter.now };
    const damaged: string[] = [];
    const first = this.#statsOnce(p, damaged);
    if (damaged.length === 0) return first;
    // A state value that does not parse: its jobs are quarantined (one job's problem), and the
    // figures are read again so that they count them so.
    const reason = damageReason('jobs', ['state_value']);
    for (const text of damaged) {
      for (const id of this.#stmts.jobsWithState.pluck().all(text) as string[]) this.#quarantineDamaged(id, reason);
    }
    return this.#statsOnce(p, []);
  }

  /** The figures of `stats`, from one read transaction; state values that do not parse are added to `damaged` (and count as null). */
  #statsOnce(p: { all: number; owner: string; now: number }, damaged: string[]): StoreStats {
    const s = this.#stmts;
    // One read transaction: every figure from the same snapshot of the tables.
    return this.db.transaction(() => {
      const counts = s.statsCounts.get(p) as Row;
      const backlog = s.statsBacklog.get(p) as Row;
      const timers = s.statsTimers.get(p) as Row;
      const activities = new Map<string, StoreStats['activities'][number]>();
      const activity = (src: string) => {
        let a = activities.get(src);
        if (!a) {
          a = { src, effects: 0, effectsFailed: 0, attempts: 0, succeeded: 0, failed: 0, interrupted: 0, stale: 0, running: 0, waiting: 0 };
          activities.set(src, a);
        }
        return a;
      };
      for (const r of s.statsEffects.all(p) as Row[]) {
        const a = activity(r['src'] as string);
        a.effects = r['effects'] as number;
        a.effectsFailed = r['failed'] as number;
      }
      for (const r of s.statsAttempts.all(p) as Row[]) {
        const a = activity(r['src'] as string);
        const n = r['n'] as number;
        a.attempts += n;
        a[r['outcome'] as 'succeeded' | 'failed' | 'interrupted' | 'stale' | 'running' | 'waiting'] += n;
      }
      return {
        jobs: (s.statsJobs.all(p) as Row[]).map((r) => ({
          machineId: r['machine_id'] as string,
          machineVersion: r['machine_version'] as string,
          status: r['status'] as StoreStats['jobs'][number]['status'],
          value: parsedOr(r['state_value'], damaged),
          count: r['n'] as number,
        })),
        quarantined: counts['quarantined'] as number,
        suspended: counts['suspended'] as number,
        cancelRequested: counts['cancel_requested'] as number,
        exhausted: counts['exhausted'] as number,
        idle: counts['idle'] as number,
        backlog: {
          events: backlog['events'] as number,
          jobs: backlog['jobs'] as number,
          held: backlog['held'] as number,
          oldestAcceptedAt: (backlog['oldest'] as number | null) ?? null,
        },
        timers: {
          scheduled: timers['scheduled'] as number,
          due: timers['due'] as number,
          held: timers['held'] as number,
          oldestDueAt: (timers['oldest'] as number | null) ?? null,
        },
        activities: [...activities.values()].sort((a, b) => byteOrder(a.src, b.src)),
        running: (s.statsRunning.all(p) as Row[]).map((r) => ({
          effectId: r['id'] as string,
          jobId: r['job_id'] as string,
          src: r['src'] as string,
          attempt: r['attempt'] as number,
          runner: (r['claimed_by'] as string | null) ?? null,
          claimExpiresAt: (r['claim_expires_at'] as number | null) ?? null,
        })),
        leases: (s.statsLeases.all(p) as Row[]).map((r) => ({ runner: r['lease_owner'] as string, jobs: r['n'] as number, earliestUntil: r['until'] as number })),
      };
    }).deferred();
  }

  // Schedules (schedules.ts)

  async putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
    return this.#schedules.put(schedule, expectedRevision);
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    return this.#schedules.get(id);
  }

  async listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]> {
    return this.#schedules.list(filter);
  }

  async deleteSchedule(id: string, owner: string | null): Promise<boolean> {
    return this.#schedules.delete(id, owner);
  }

  async dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]> {
    return this.#schedules.due(owner, now, limit);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    return this.#schedules.fire(fire);
  }

  async listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]> {
    return this.#schedules.occurrences(scheduleId, limit);
  }

  /** Counted on the partial index `inbox_pending` (a covering scan of pending rows only); prepared once, on first use. */
  #pendingBacklogStmt: Database.Statement | undefined;

  async pendingBacklog(): Promise<number> {
    this.#pendingBacklogStmt ??= this.db.prepare("SELECT count(*) AS n FROM inbox WHERE status = 'pending'");
    return (this.#pendingBacklogStmt.get() as { n: number }).n;
  }

  async externalChanges(): Promise<number> {
    return this.db.pragma('data_version', { simple: true }) as number;
  }

  /** Statements of `historySince`, prepared on first use. */
  #feedStmts: { head: Database.Statement; page: Database.Statement } | undefined;

  async historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    this.#feedStmts ??= {
      head: this.db.prepare('SELECT max(seq) AS seq FROM transitions'),
      page: this.db.prepare(`SELECT t.*, j.machine_id FROM transitions t JOIN jobs j ON j.id = t.job_id
        WHERE t.seq > @after AND t.seq <= @upto
          AND (@all = 1 OR j.owner = @owner) AND (@machine IS NULL OR j.machine_id = @machine) AND (@job IS NULL OR t.job_id = @job)
          AND (@outcomes IS NULL OR t.outcome IN (SELECT value FROM json_each(@outcomes)))
        ORDER BY t.seq LIMIT @limit`),
    };
    const s = this.#feedStmts;
    // One read snapshot: the head and the page agree.
    return this.#tx.deferred(() => {
      const head = ((s.head.get() as { seq: number | null }).seq ?? 0);
      const upto = Math.min(head, after + scan);
      const rows = s.page.all({
        after,
        upto,
        all: filter.owner === undefined ? 1 : 0,
        owner: filter.owner ?? '',
        machine: filter.machineId ?? null,
        job: filter.jobId ?? null,
        outcomes: filter.outcomes === undefined ? null : JSON.stringify(filter.outcomes),
        limit,
      }) as Row[];
      const records = rows.map((row) => ({ ...toTransitionRecord(row), seq: row['seq'] as number, machineId: row['machine_id'] as string }));
      return { records, next: records.length === limit ? records.at(-1)!.seq : Math.max(after, upto) };
    }) as FeedPage;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.db.close();
  }

  /**
   * Every write is one `BEGIN IMMEDIATE` transaction: see docs/ARCHITECTURE.md. With `ops` (the
   * job operations it carries), an I/O error raised by the COMMIT itself, after `fn` ran, is
   * {@link CommitOutcomeUnknown}: the transaction may have landed.
   */
  #write<T>(fn: () => T, ops?: () => UnresolvedOperation[]): T {
    if (!ops) return this.#tx.immediate(fn) as T;
    let ran = false;
    try {
      return this.#tx.immediate(() => {
        const result = fn();
        ran = true;
        return result;
      }) as T;
    } catch (error) {
      if (ran && outcomeUnknownAtCommit(error)) throw commitOutcomeUnknown(this.description, error, ops());
      throw error;
    }
  }

  /**
   * A damaged jobs row met by a read becomes the job's quarantine, recorded once (best effort: on a
   * read-only or failing file the record still says it). The reason names the table and column.
   */
  #recordDamage<T extends { corruption?: string; id: string }>(jobs: T[]): T[] {
    for (const job of jobs) if (job.corruption !== undefined) this.#quarantineDamaged(job.id, job.corruption);
    return jobs;
  }

  #quarantineDamaged(jobId: string, reason: string): void {
    try {
      this.#write(() => this.#stmts.quarantineDamaged.run(reason, jobId));
    } catch {
      // Read-only, full or busy: the record returned says it; the next read that can write records it.
    }
  }

  /** Quarantine the jobs of records with a damaged JSON column (history, events, effects, timers, assets). */
  #jobDamage<T extends { damaged?: string }>(jobId: string, records: T[]): T[] {
    const damaged = records.find((r) => r.damaged !== undefined)?.damaged;
    if (damaged !== undefined) this.#quarantineDamaged(jobId, damaged);
    return records;
  }
}

/** The connection, or the typed fault that refused it (a read-only directory, a file this process may not open). */
function openDatabase(path: string, timeout: number): Database.Database {
  try {
    return new Database(path, { timeout });
  } catch (error) {
    throw storageFault(error, { path, call: 'open' });
  }
}

function tooNew(path: string, current: number, latest: number): SchemaTooNewError {
  return new SchemaTooNewError(
    `Database ${path} has schema version ${current}, but this Spool knows only up to ${latest}. ` +
      'It was written by a newer Spool: upgrade Spool to open it (nothing was changed).',
    { path, schemaVersion: current, supported: latest },
  );
}

/**
 * The file holds another application's schema (tables, views, indexes or triggers) and no Spool
 * migrations table: Spool refuses to install its schema into it. Nothing was changed.
 */
export class NotASpoolDatabaseError extends SpoolError {
  readonly code = 'SPOOL_NOT_A_SPOOL_DATABASE';
  readonly category = 'bad-input';
}

/**
 * Refuse a non-empty database without `spool_migrations` (read-only: sqlite_master only); true when
 * the file already holds Spool's schema. A new or 0-byte file has an empty schema and is migrated
 * as usual. A file that is not SQLite at all fails this first read (SQLITE_NOTADB), which the
 * constructor reports as before.
 */
function refuseForeignDatabase(db: Database.Database, path: string): boolean {
  const objects = db.prepare("SELECT type, name FROM sqlite_master ORDER BY type <> 'table', type, name").all() as Array<{ type: string; name: string }>;
  if (objects.length === 0) return false;
  if (objects.some((o) => o.type === 'table' && o.name === 'spool_migrations')) return true;
  // Name the application's own objects; SQLite's (sqlite_autoindex_…, sqlite_sequence) only if there is nothing else.
  const own = objects.filter((o) => !o.name.startsWith('sqlite_'));
  const named = own.length > 0 ? own : objects;
  const kinds = [...new Set(named.map((o) => (o.type === 'index' ? 'indexes' : `${o.type}s`)))].join(', ');
  const shown = named.slice(0, 5).map((o) => o.name);
  const more = named.length > shown.length ? `, ... ${named.length - shown.length} more` : '';
  throw new NotASpoolDatabaseError(
    `${path} is not a Spool database: it already holds ${kinds} (${shown.join(', ')}${more}) and no Spool schema; nothing was changed. ` +
      'Point --db at a new file or at a Spool database.',
    { path, objects: named.slice(0, 20).map((o) => `${o.type} ${o.name}`), count: named.length },
  );
}

/** A Spool schema newer than this code is refused (the file holds `spool_migrations`). */
function refuseNewerSchema(db: Database.Database, path: string): void {
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

/** A stored JSON text parsed, or null with the text added to `damaged`. */
function parsedOr(text: unknown, damaged: string[]): JsonValue {
  try {
    return JSON.parse(text as string) as JsonValue;
  } catch {
    damaged.push(String(text));
    return null;
  }
}

/** SQLite's BINARY collation (UTF-8 byte order), for what is sorted after it is read. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * A new history row's global seq (schema 12: the table's rowid), computed in its INSERT: one more
 * than the highest given, kept or purged (history_seq_floor; SQLite's own rowid choice would give a
 * purged one again). Writers are serialised, so rows become visible in seq order (`historySince`).
 */
const HISTORY_SEQ = `(SELECT max(coalesce((SELECT max(seq) FROM transitions), 0),
  coalesce((SELECT seq FROM history_seq_floor WHERE id = 1), 0)) + 1)`;

/** The inbox columns an accepted event writes, and their parameters (see inboxParams). */
const INBOX_COLUMNS = 'job_id, event_id, type, payload, payload_hash, status, error, revision, accepted_at, processed_at, source_kind, source_id, attempt';
const INBOX_VALUES = INBOX_COLUMNS.split(', ').map((c) => `@${c}`).join(', ');

/** `<jobIdColumn>`'s job is not suspended. */
const NOT_SUSPENDED = (jobIdColumn: string) => `NOT EXISTS (SELECT 1 FROM jobs sj WHERE sj.id = ${jobIdColumn} AND sj.suspended_at IS NOT NULL)`;

/**
 * `<jobIdColumn>`'s job is neither suspended nor quarantined: its activities may run. A
 * quarantined job's runtime cannot apply their outcomes, and one without the job's machine cannot
 * run them at all; they wait, unclaimed, for its release.
 */
const NOT_HELD = (jobIdColumn: string) =>
  `NOT EXISTS (SELECT 1 FROM jobs sj WHERE sj.id = ${jobIdColumn} AND (sj.suspended_at IS NOT NULL OR sj.quarantine IS NOT NULL))`;

/**
 * A write under a lease (`@runner` null: no lease given, nothing checked or changed). Allowed when
 * the lease is free, expired, held by a dead runner named in `@take_over`, held by `@runner` with
 * the fence `@held`, or forced. The fence grows unless `@runner` renews its own live lease.
 */
const LEASE_OK = `(@runner IS NULL OR @force = 1 OR lease_owner IS NULL OR lease_until <= @now OR lease_owner = @take_over
  OR (lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1)))`;
const LEASE_SET = `lease_fence = CASE WHEN @runner IS NULL OR (@force = 0 AND lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1) AND lease_until > @now)
    THEN lease_fence ELSE lease_fence + 1 END,
  lease_owner = CASE WHEN @runner IS NULL THEN lease_owner WHEN @until IS NULL THEN NULL ELSE @runner END,
  lease_until = CASE WHEN @runner IS NULL THEN lease_until ELSE @until END`;

/**
 * An event accepted and applied in one commit (`@inline_event`, its id) goes in only when no
 * event waits before it (events apply in accept order). Its id's uniqueness is a key, written
 * after this UPDATE (`recordKey`), except for a made-up id applied at the revision it names
 * (`@at_named` = 1): the history's primary key holds that one, and this probe makes sure the id
 * was not recorded under a key before (a caller that sent such an id itself, earlier).
 */
const INLINE_OK = `(@inline_event IS NULL OR (NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @id AND status = 'pending')
  AND (@at_named = 0 OR NOT EXISTS (SELECT 1 FROM event_keys WHERE job_id = @id AND event_id = @inline_event))))`;

/** A history row of an event applied as it was accepted, read as an event (as the `events` view maps it). */
const INLINE_EVENT = `SELECT NULL AS seq, job_id, event_id, event_type AS type, payload, payload_hash, outcome AS status,
  'external' AS source_kind, NULL AS source_id, NULL AS attempt, error, revision, at AS accepted_at, at AS processed_at FROM transitions`;

/** The history row recording an event applied as it was accepted, by the event's id. */
function inlineEvent(s: ReturnType<typeof prepare>, jobId: string, eventId: string): Row | undefined {
  const keyed = s.keyedEvent.get({ job: jobId, event: eventId }) as Row | undefined;
  if (keyed) return keyed;
  const at = revisionNamedBy(eventId);
  return at > 0 ? (s.locatedEvent.get(jobId, at, eventId) as Row | undefined) : undefined;
}

/** An accepted event by id, wherever it is recorded: its inbox row, or its history row. */
function findEvent(s: ReturnType<typeof prepare>, jobId: string, eventId: string): Row | undefined {
  return (s.getEvent.get(jobId, eventId) as Row | undefined) ?? inlineEvent(s, jobId, eventId);
}

function leaseParams(lease: (Omit<LeaseClaim, 'fence'> & { fence: number | null | undefined }) | undefined, now: number) {
  return {
    runner: lease?.runner ?? null,
    held: lease?.fence ?? null,
    // A claim that names no fence (tools and tests) renews the runner's own lease whatever its fence.
    any_fence: lease && lease.fence === undefined ? 1 : 0,
    now: lease?.now ?? now,
    until: lease?.until ?? null,
    take_over: lease?.takeOver ?? null,
    force: lease?.force ? 1 : 0,
  };
}

/** `JobFilter.exhausted` in SQLite's spelling (predicates.ts). */
const EXHAUSTED = exhausted(SQLITE);

/** `JobFilter.stuck` in SQLite's spelling (predicates.ts). */
const STUCK = stuck(SQLITE);

/** `stats`: aggregates over the tables for one owner (`@all = 1`: every owner) at `@now`. */
function prepareStats(db: Database.Database) {
  const scope = '(@all = 1 OR jobs.owner = @owner)';
  return {
    statsJobs: db.prepare(`SELECT machine_id, machine_version, status, state_value, count(*) AS n FROM jobs WHERE ${scope}
      GROUP BY machine_id, machine_version, status, state_value ORDER BY machine_id, machine_version, status, state_value`),
    // Each job count uses exactly the condition of its `listJobs` filter (whatever the job's
    // status), so a count always equals the length of the list it summarises.
    statsCounts: db.prepare(`SELECT
        count(*) FILTER (WHERE quarantine IS NOT NULL) AS quarantined,
        count(*) FILTER (WHERE suspended_at IS NOT NULL) AS suspended,
        count(*) FILTER (WHERE cancel_requested_at IS NOT NULL) AS cancel_requested,
        count(*) FILTER (WHERE ${EXHAUSTED}) AS exhausted,
        count(*) FILTER (WHERE ${STUCK}) AS idle
      FROM jobs WHERE ${scope}`),
    // The oldest pending event counts held ones too: an event waiting on a suspension is still waiting.
    statsBacklog: db.prepare(`SELECT count(*) AS events, count(DISTINCT i.job_id) AS jobs,
        count(*) FILTER (WHERE jobs.suspended_at IS NOT NULL OR jobs.quarantine IS NOT NULL) AS held,
        min(i.accepted_at) AS oldest
      FROM inbox i JOIN jobs ON jobs.id = i.job_id WHERE i.status = 'pending' AND ${scope}`),
    statsTimers: db.prepare(`SELECT count(*) AS scheduled,
        count(*) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NULL) AS due,
        count(*) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NOT NULL) AS held,
        min(t.due_at) FILTER (WHERE t.due_at <= @now AND jobs.suspended_at IS NULL) AS oldest
      FROM timers t JOIN jobs ON jobs.id = t.job_id WHERE t.status = 'scheduled' AND ${scope}`),
    statsEffects: db.prepare(`SELECT e.src, count(*) AS effects, count(*) FILTER (WHERE e.status = 'failed') AS failed
      FROM effects e JOIN jobs ON jobs.id = e.job_id WHERE ${scope} GROUP BY e.src`),
    statsAttempts: db.prepare(`SELECT e.src, a.outcome, count(*) AS n
      FROM effect_attempts a JOIN effects e ON e.id = a.effect_id JOIN jobs ON jobs.id = e.job_id WHERE ${scope} GROUP BY e.src, a.outcome`),
    statsLeases: db.prepare(`SELECT lease_owner, count(*) AS n, min(lease_until) AS until FROM jobs
      WHERE lease_owner IS NOT NULL AND lease_until > @now AND ${scope} GROUP BY lease_owner ORDER BY lease_owner`),
    statsRunning: db.prepare(`SELECT e.id, e.job_id, e.src, e.attempt, e.claimed_by, e.claim_expires_at
      FROM effects e JOIN jobs ON jobs.id = e.job_id WHERE e.active = 1 AND e.status = 'running' AND ${scope} ORDER BY e.id`),
  };
}

/** An effect a round may start: its job is not held (suspended, quarantined), and no other live runner holds the job's lease. */
const DUE_FILTER = `${NOT_HELD('effects.job_id')}
  AND (@runner IS NULL OR NOT EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id
    AND lj.lease_owner IS NOT NULL AND lj.lease_owner <> @runner AND lj.lease_until > @now))`;

function prepare(db: Database.Database) {
  return {
    getJob: db.prepare('SELECT * FROM jobs WHERE id = ?'),
    firstActiveVersion: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = ? ORDER BY machine_id, machine_version LIMIT 1`),
    // Two seeks, not a row-value comparison: SQLite seeks `(a, b) > (?, ?)` on `a` only and would
    // walk every entry of the current machine.
    nextActiveVersion: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version > @v ORDER BY machine_version LIMIT 1`),
    nextActiveMachine: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id > @m ORDER BY machine_id, machine_version LIMIT 1`),
    countActiveVersion: db.prepare(`SELECT count(*) FROM (SELECT 1 FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version = @v LIMIT @limit)`),
    byKey: db.prepare('SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?'),
    insertJob: db.prepare(`INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context,
        snapshot, input, input_hash, idempotency_key, owner, quarantine, progress, parent_job_id, parent_effect_id, created_at, updated_at)
      VALUES (@id, @machine_id, @machine_version, 1, @status, @state_value, @state_paths, @context,
        @snapshot, @input, @input_hash, @idempotency_key, @owner, NULL, @progress, @parent_job_id, @parent_effect_id, @at, @at)`),
    /** Status and version unchanged (the usual case): their index entries are not rewritten. */
    updateState: db.prepare(`UPDATE jobs SET revision = revision + 1, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END,
        ${LEASE_SET}
      WHERE id = @id AND revision = @expected AND status = @status AND machine_version = @machine_version
        AND (suspended_at IS NULL OR @settles = 0) AND ${LEASE_OK} AND ${INLINE_OK}
      RETURNING lease_fence`),
    updateJob: db.prepare(`UPDATE jobs SET revision = revision + 1, status = @status, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, machine_version = @machine_version, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END,
        ${LEASE_SET}
      WHERE id = @id AND revision = @expected AND (suspended_at IS NULL OR @settles = 0) AND ${LEASE_OK} AND ${INLINE_OK}
      RETURNING lease_fence`),
    revisionOf: db.prepare('SELECT revision, lease_owner, lease_until FROM jobs WHERE id = ?'),
    /** A job's revision and the columns written without a commit (getJob with a known record). */
    uncommittedOf: db.prepare(`SELECT revision, quarantine, progress, cancel_requested_at, cancel_reason, suspended_at, suspend_reason,
        lease_owner, lease_fence, lease_until, updated_at, created_at FROM jobs WHERE id = ?`).raw(),
    insertTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HISTORY_SEQ})`),
    /** The history row of an event applied as it is accepted: its only record (no inbox row). */
    insertInlineTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        payload_hash, seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HISTORY_SEQ})`),
    /** A (job, event id) recorded once: a second record of it does nothing (changes 0), read as a duplicate. */
    insertKey: db.prepare('INSERT INTO event_keys (job_id, event_id, revision) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
    keyedEvent: db.prepare(`${INLINE_EVENT} WHERE job_id = @job AND revision = (SELECT revision FROM event_keys WHERE job_id = @job AND event_id = @event)`),
    locatedEvent: db.prepare(`${INLINE_EVENT} WHERE job_id = ? AND revision = ? AND event_id = ? AND payload_hash IS NOT NULL`),
    insertEvent: db.prepare(`INSERT INTO inbox (${INBOX_COLUMNS}) VALUES (${INBOX_VALUES}) ON CONFLICT (job_id, event_id) DO NOTHING`),
    /** The runtime's own event accepted and applied in one commit: inserted only while nothing waits before it in the job's inbox. */
    insertAppliedEvent: db.prepare(`INSERT INTO inbox (${INBOX_COLUMNS}) SELECT ${INBOX_VALUES}
      WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @job_id AND status = 'pending')
      ON CONFLICT (job_id, event_id) DO NOTHING`),
    settleEvent: db.prepare(`UPDATE inbox SET status = @status, error = @error, revision = @revision, processed_at = @at, payload = @payload
      WHERE seq = @seq AND job_id = @job_id AND status = 'pending'`),
    rejectEvent: db.prepare(`UPDATE inbox SET status = 'rejected', error = ?, processed_at = ?, payload = coalesce(?, payload) WHERE seq = ? AND status = 'pending'`),
    getEvent: db.prepare('SELECT * FROM inbox WHERE job_id = ? AND event_id = ?'),
    // Accept order: a job's events apply in accept order, so the revision orders every applied
    // one; pending and rejected events (no revision) follow in seq order.
    listEvents: db.prepare('SELECT * FROM events WHERE job_id = ? ORDER BY revision IS NULL, revision, seq'),
    firstPending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT 1"),
    pending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT ?"),
    pendingJobs: db.prepare(`SELECT i.job_id, min(i.seq) AS first FROM inbox i JOIN jobs j ON j.id = i.job_id
      WHERE i.status = 'pending' AND j.quarantine IS NULL AND j.suspended_at IS NULL
        AND (@runner IS NULL OR j.lease_owner IS NULL OR j.lease_owner = @runner OR j.lease_until <= @now)
      GROUP BY i.job_id ORDER BY first LIMIT @limit`),
    quarantine: db.prepare('UPDATE jobs SET quarantine = ?, updated_at = ? WHERE id = ?'),
    /** A damaged row's quarantine, recorded once and never over another reason (no clock here: updated_at is kept). */
    jobsWithState: db.prepare('SELECT id FROM jobs WHERE state_value = ? AND quarantine IS NULL'),
    quarantineDamaged: db.prepare('UPDATE jobs SET quarantine = ? WHERE id = ? AND quarantine IS NULL'),
    /** `commitLanded`: the history row of that revision, recorded for that event (null-safe). */
    landed: db.prepare('SELECT 1 FROM transitions WHERE job_id = @job AND revision = @revision AND event_id IS @event'),
    history: db.prepare('SELECT * FROM transitions WHERE job_id = ? ORDER BY revision'),
    insertEffect: db.prepare(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`),
    settleChild: db.prepare(`UPDATE effects SET status = 'succeeded', output = ?, updated_at = ? WHERE id = ? AND kind = 'child' AND status = 'waiting' AND active = 1`),
    deactivateAll: db.prepare(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND active = 1`),
    cancelAllTimers: db.prepare(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status IN ('scheduled', 'fired')`),
    cancelScheduledTimers: db.prepare(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status = 'scheduled'`),
    deactivateEffects: db.prepare(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND actor_id = ? AND active = 1`),
    getEffect: db.prepare('SELECT * FROM effects WHERE id = ?'),
    /** What a claim or an outcome needs to know of an effect before it writes. */
    effectClaimState: db.prepare('SELECT job_id, status, attempt FROM effects WHERE id = ?'),
    /** An effect's job, and whether `runner` holds its lease under `fence` (1) or not (0). */
    effectLeaseState: db.prepare(`SELECT e.job_id, EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.lease_owner = @runner AND j.lease_fence = @fence) AS held
      FROM effects e WHERE e.id = @id`),
    listEffects: db.prepare('SELECT * FROM effects WHERE job_id = ? ORDER BY created_revision, id'),
    listAttempts: db.prepare(`SELECT a.* FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
      WHERE e.job_id = ? ORDER BY e.created_revision, a.effect_id, a.attempt`),
    // Three index-ordered reads (pending by age, backoff by due time, running by claim expiry),
    // each stopping at @limit rows it may start, merged in the order the round starts them.
    dueEffects: db.prepare(`SELECT * FROM (
        SELECT * FROM (SELECT *, rowid AS r FROM effects INDEXED BY effects_pending WHERE active = 1 AND status = 'pending' AND ${DUE_FILTER}
          ORDER BY created_at, rowid LIMIT @limit)
        UNION ALL
        SELECT * FROM (SELECT *, rowid AS r FROM effects WHERE active = 1 AND status = 'backoff' AND next_run_at <= @now AND ${DUE_FILTER}
          ORDER BY next_run_at, rowid LIMIT @limit)
        UNION ALL
        SELECT * FROM (SELECT *, rowid AS r FROM effects WHERE active = 1 AND status = 'running' AND claim_expires_at <= @now AND ${DUE_FILTER}
          ORDER BY claim_expires_at, rowid LIMIT @limit))
      ORDER BY coalesce(next_run_at, created_at), r LIMIT @limit`),
    runningEffects: db.prepare(`SELECT * FROM effects WHERE active = 1 AND status = 'running' LIMIT ?`),
    // A child job's id is its invocation's effect id.
    orphanedChildren: db.prepare(`SELECT j.id FROM jobs j INDEXED BY jobs_active_children JOIN effects e ON e.id = j.id
      WHERE j.status = 'active' AND j.parent_job_id IS NOT NULL AND e.active = 0 ORDER BY j.id LIMIT ?`),
    claimEffect: db.prepare(`UPDATE effects SET status = 'running', attempt = attempt + 1, claimed_by = @runner,
        claim_expires_at = @until, next_run_at = NULL, updated_at = @now
      WHERE id = @id AND active = 1 AND (status = 'pending' OR (status = 'backoff' AND next_run_at <= @now)
        OR (status = 'running' AND (claim_expires_at <= @now OR claimed_by = @takeOver)))
        AND ${attemptsLeft('effects')}
        AND ${NOT_HELD('effects.job_id')}
      RETURNING *`),
    releaseEffect: db.prepare(`UPDATE effects SET status = 'pending', max_attempts = max_attempts + 1, claimed_by = NULL, claim_expires_at = NULL,
        next_run_at = NULL, updated_at = @at
      WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running' AND active = 1 AND unsafe = 0
        AND ${releasesLeft(SQLITE)}`),
    interruptAttempt: db.prepare(`UPDATE effect_attempts SET outcome = 'interrupted', ended_at = ?
      WHERE effect_id = ? AND attempt = ? AND outcome = 'running'`),
    insertAttempt: db.prepare(`INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, outcome) VALUES (?, ?, ?, ?, 'running')`),
    renewClaim: db.prepare(`UPDATE effects SET claim_expires_at = @until WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running'
        AND EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id AND lj.lease_owner = @runner)`),
    /** An activity its creating commit claims (EffectStart): written running, at its first attempt. */
    insertClaimedEffect: db.prepare(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        claimed_by, claim_expires_at, created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, 'activity', ?, 'running', 1, 1, ?, ?, ?, ?, ?, ?, ?)`),
    /** A new job whose create claims its first activities: this runner's lease, fence 1. */
    takeNewLease: db.prepare('UPDATE jobs SET lease_owner = @runner, lease_fence = 1, lease_until = @until WHERE id = @id AND lease_owner IS NULL'),
    claimJobLease: db.prepare(`UPDATE jobs SET ${LEASE_SET}
      WHERE id = @id AND ${LEASE_OK} RETURNING lease_fence`),
    holdsLease: db.prepare('SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    dropClaim: db.prepare(`UPDATE effects SET claim_expires_at = ? WHERE id = ? AND attempt = ? AND status = 'running'`),
    renewLeases: db.prepare(`UPDATE jobs SET lease_until = @until WHERE lease_owner = @runner AND id IN (SELECT value FROM json_each(@ids))
      RETURNING id, lease_fence`),
    releaseLeases: db.prepare(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = @runner
      AND (@all = 1 OR id IN (SELECT value FROM json_each(@ids)))`),
    leaseHolders: db.prepare('SELECT DISTINCT lease_owner FROM jobs WHERE lease_owner IS NOT NULL AND lease_until > ? ORDER BY lease_owner'),
    expireOwnerLeases: db.prepare(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?
      RETURNING id, lease_fence, ? AS owner`),
    expireLeases: db.prepare(`SELECT id, lease_owner AS owner, lease_fence FROM jobs WHERE lease_owner IS NOT NULL AND lease_until <= ?`),
    freeLease: db.prepare('UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    nextLeaseExpiry: db.prepare('SELECT min(lease_until) AS t FROM jobs WHERE lease_owner IS NOT NULL AND suspended_at IS NULL'),
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
    dueTimers: db.prepare(`SELECT * FROM timers WHERE status = 'scheduled' AND due_at <= ? AND ${NOT_SUSPENDED('timers.job_id')}
      ORDER BY due_at, id LIMIT ?`),
    fireTimer: db.prepare(`UPDATE timers SET status = 'fired' WHERE id = ? AND status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')}`),
    insertTimer: db.prepare(`INSERT INTO timers (id, job_id, key, kind, event, due_at, status, created_revision, created_at)
      VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?, ?)`),
    /** The timers of the keys in a JSON array (one statement however many keys a transition cancels). */
    cancelTimers: db.prepare(`UPDATE timers SET status = 'cancelled'
      WHERE job_id = ? AND key IN (SELECT value FROM json_each(?)) AND status IN ('scheduled', 'fired')`),
    deliverTimer: db.prepare(`UPDATE timers SET status = 'delivered' WHERE id = ? AND status = 'fired'`),
    // Suspended jobs wake nobody: their timers and retries wait for resume. (ORDER BY + LIMIT 1
    // walks the index in order and stops at the first row of a job that is not suspended.)
    nextTimer: db.prepare(`SELECT due_at AS t FROM timers WHERE status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')} ORDER BY due_at LIMIT 1`),
    nextRetry: db.prepare(`SELECT next_run_at AS t FROM effects WHERE active = 1 AND status = 'backoff' AND ${NOT_HELD('effects.job_id')}
      ORDER BY next_run_at LIMIT 1`),
    nextClaimExpiry: db.prepare(`SELECT claim_expires_at AS t FROM effects WHERE active = 1 AND status = 'running' AND ${NOT_HELD('effects.job_id')}
      ORDER BY claim_expires_at LIMIT 1`),
    requestCancel: db.prepare(`UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL`),
    setProgress: db.prepare(`UPDATE jobs SET progress = @progress WHERE id = @id AND status = 'active'
        AND (@runner IS NULL OR (lease_owner = @runner AND lease_fence = @fence))`),
    addNote: db.prepare('INSERT INTO notes (job_id, kind, message, at) VALUES (?, ?, ?, ?)'),
    listNotes: db.prepare('SELECT job_id, kind, message, at FROM notes WHERE job_id = ? ORDER BY id'),
    attachAsset: db.prepare(`INSERT INTO assets (job_id, key, type, uri, size, meta, effect_id, attempt, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, key) DO NOTHING`),
    listAssets: db.prepare('SELECT * FROM assets WHERE job_id = ? ORDER BY created_at, key'),
    purge: db.prepare('DELETE FROM jobs WHERE id = ?'),
    suspend: db.prepare(`UPDATE jobs SET suspended_at = ?, suspend_reason = ? WHERE id = ? AND status = 'active' AND suspended_at IS NULL`),
    resume: db.prepare(`UPDATE jobs SET suspended_at = NULL, suspend_reason = NULL WHERE id = ? AND suspended_at IS NOT NULL`),
    redrive: db.prepare(`UPDATE effects SET status = 'pending', max_attempts = ?, error = NULL, next_run_at = NULL, token = NULL,
        claimed_by = NULL, claim_expires_at = NULL, updated_at = ?
      WHERE id = ? AND active = 1 AND status = 'failed' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id AND j.status = 'active')`),
    purgeFinished: db.prepare(`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status <> 'active' AND updated_at < @before
        AND status IN (SELECT value FROM json_each(@statuses)) AND (@all = 1 OR owner = @owner) ORDER BY updated_at, id LIMIT @limit)
      RETURNING id`),
    ...prepareStats(db),
  };
}

/** The JSON text of the commit being written (see CommitJson): one per process, commits are synchronous. */
const json = new CommitJson();

function applyCommit(s: ReturnType<typeof prepare>, c: TransitionCommit): CommitResult {
  json.begin();
  try {
    return writeCommit(s, c);
  } finally {
    json.end();
  }
}

function writeCommit(s: ReturnType<typeof prepare>, c: TransitionCommit): CommitResult {
  // The attempt whose outcome this is, recorded first; its event is accepted below, applied.
  if (c.finish && finishIn(s, c.finish, false) !== 'current') throw new Abort({ ok: false, reason: 'outcome-not-current' });
  const revision = c.expectedRevision + 1;
  const e = c.event;
  const inline = e?.accept !== undefined && isExternal(e.accept);
  const namedAt = inline ? revisionNamedBy(e.accept.eventId) : -1;
  const params = {
    id: c.jobId,
    expected: c.expectedRevision,
    status: c.job.status,
    state_value: json.of(c.job.value),
    state_paths: pathsText(c.job.statePaths),
    context: json.of(c.job.context),
    snapshot: c.job.snapshot,
    machine_version: c.job.machineVersion,
    at: c.job.at,
    set_progress: c.job.progress === undefined ? 0 : 1,
    // A commit that settles an event is refused (a conflict) while the job is suspended.
    settles: c.event ? 1 : 0,
    progress: c.job.progress ?? null,
    ...leaseParams(c.lease, c.job.at),
    inline_event: inline ? e.accept.eventId : null,
    at_named: namedAt === revision ? 1 : 0,
  };
  // A job that stays active on its version takes the narrow update (no status index rewritten);
  // one that ends changes its status, so it goes straight to the full one.
  const updated = ((c.job.status === 'active' ? s.updateState.get(params) : undefined) ?? s.updateJob.get(params)) as { lease_fence: number } | undefined;
  if (!updated) {
    const row = s.revisionOf.get(c.jobId) as { revision: number; lease_owner: string | null; lease_until: number | null } | undefined;
    if (c.lease && row?.revision === c.expectedRevision && row.lease_owner !== null && row.lease_until !== null && row.lease_until > params.now) {
      throw new Abort({ ok: false, reason: 'leased', owner: row.lease_owner, until: row.lease_until });
    }
    // The revision held, so the inline event's own checks refused it: its id is recorded already
    // (a duplicate), or events wait before it (they come first: a conflict, to apply those).
    if (inline && row?.revision === c.expectedRevision && findEvent(s, c.jobId, e.accept.eventId)) {
      throw new Abort({ ok: false, reason: 'duplicate-event' });
    }
    throw new Abort({ ok: false, reason: 'conflict', currentRevision: row?.revision ?? null });
  }
  const fence = c.lease ? updated.lease_fence : null;
  // Applied as it is accepted: the history row is the event's record, and its key says so (a
  // repeat of the id is a duplicate). An id that names this revision is keyed by the history's
  // primary key: no key row.
  if (inline && namedAt !== revision && !recordKey(s, c.jobId, e.accept.eventId, revision)) throw new Abort({ ok: false, reason: 'duplicate-event' });
  const inlineHash = inline ? e.accept.payloadHash : undefined;
  insertTransition(s, c.jobId, revision, inline ? inlineDraft(c.transition, e) : c.transition, c.lease?.runner ?? null, fence, inlineHash);
  if (e && !inline) {
    const error = e.error ? JSON.stringify(e.error) : null;
    if (e.accept) {
      // Accept-and-apply only when nothing is queued for the job (events apply in accept order):
      // the INSERT itself checks, and a refusal is read back as a duplicate or that conflict.
      const params = { ...inboxParams(e.accept, json.of(e.payload)), status: e.status, error, revision, processed_at: c.job.at };
      if (params.source_kind === 'external' && !recordKey(s, c.jobId, e.accept.eventId, null)) throw new Abort({ ok: false, reason: 'duplicate-event' });
      if (s.insertAppliedEvent.run(params).changes !== 1) {
        if (s.getEvent.get(c.jobId, e.accept.eventId)) throw new Abort({ ok: false, reason: 'duplicate-event' });
        throw new Abort({ ok: false, reason: 'conflict', currentRevision: c.expectedRevision });
      }
    } else {
      const info = s.settleEvent.run({ seq: e.seq, job_id: c.jobId, status: e.status, error, revision, at: c.job.at, payload: json.of(e.payload) });
      if (info.changes !== 1) throw new Abort({ ok: false, reason: 'event-settled' });
    }
  }
  if (c.stopAll) {
    s.deactivateAll.run(c.job.at, c.jobId);
    s.cancelAllTimers.run(c.jobId);
  }
  for (const actorId of c.effects?.deactivate ?? []) s.deactivateEffects.run(c.job.at, c.jobId, actorId);
  // Deliver the consumed timer before this transition's cancellations: an `after` transition that
  // leaves its state also cancels its own key, which must not turn the delivered timer into a cancelled one.
  if (c.consumedTimer !== undefined) s.deliverTimer.run(c.consumedTimer);
  if (c.timers?.cancel.length) s.cancelTimers.run(c.jobId, JSON.stringify(c.timers.cancel));
  if (c.claims?.length && (!c.lease || c.lease.until === null)) throw new Error('A commit claims new effects only under a lease it keeps.');
  writeRequests(s, c.effects?.create, c.timers?.schedule, [], claimsBy(c.claims, c.lease?.runner, c.job.at));
  // A job that ends cancels its delayed events still to come, as XState does when a machine stops
  // (after delivering the one this commit consumed; a fired one's pending event is rejected later).
  if (c.job.status !== 'active') s.cancelScheduledTimers.run(c.jobId);
  for (const child of c.children ?? []) insertJob(s, child);
  for (const d of c.deliveries ?? []) acceptPending(s, d);
  if (c.settleParent && s.settleChild.run(JSON.stringify(c.settleParent.output), c.job.at, c.settleParent.effectId).changes === 1) {
    acceptPending(s, c.settleParent.event);
  }
  return { ok: true, revision, fence };
}

/** `createJob` inside a transaction: the existing job with this id or key, or the new one. */
function createIn(s: ReturnType<typeof prepare>, job: NewJob): CreateJobResult {
  const existing = (s.getJob.get(job.id) as Row | undefined) ??
    (job.idempotencyKey === null ? undefined : (s.byKey.get(job.owner ?? '', job.idempotencyKey) as Row | undefined));
  if (existing) return { job: toJobRecord(existing), created: false };
  insertJob(s, job);
  for (const child of job.children ?? []) insertJob(s, child);
  for (const d of job.relatedDeliveries ?? []) acceptPending(s, d);
  return { job: toJobRecord(s.getJob.get(job.id) as Row), created: true };
}

/** A new job at revision 1 with its first history record and what its initial state asked for. */
function insertJob(s: ReturnType<typeof prepare>, job: NewJob): void {
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
    parent_job_id: job.parent?.jobId ?? null,
    parent_effect_id: job.parent?.effectId ?? null,
    at: job.at,
  });
  insertTransition(s, job.id, 1, job.transition, job.runner ?? null, 0);
  if (job.claims?.length) {
    if (!job.runner) throw new Error('A new job claims its effects only for the runner that creates it.');
    s.takeNewLease.run({ id: job.id, runner: job.runner, until: Math.max(...job.claims.map((c) => c.claimUntil)) });
  }
  writeRequests(s, job.effects, job.timers, job.deliveries, claimsBy(job.claims, job.runner ?? undefined, job.at));
}

/** A commit's claims of the effects it writes (EffectStart), by effect id: written running for `runner`. */
interface ClaimsBy {
  runner: string;
  at: number;
  until: Map<string, number>;
}

function claimsBy(claims: readonly EffectStart[] | undefined, runner: string | undefined, at: number): ClaimsBy | undefined {
  if (!claims?.length || runner === undefined) return undefined;
  return { runner, at, until: new Map(claims.map((c) => [c.effectId, c.claimUntil])) };
}

/**
 * Effects, timers and self-sends a transition asked for: written in the transition's own
 * transaction. A claimed activity (`claims`) is written running, its first attempt started.
 */
function writeRequests(s: ReturnType<typeof prepare>, effects: NewEffect[] = [], timers: NewTimer[] = [], deliveries: NewInboxEvent[] = [], claims?: ClaimsBy): void {
  let claimed = 0;
  for (const e of effects) {
    const child = e.kind === 'child';
    const until = child ? undefined : claims?.until.get(e.id);
    if (until === undefined) {
      s.insertEffect.run(e.id, e.jobId, e.actorId, e.src, child ? 'child' : 'activity', JSON.stringify(e.input), child ? 'waiting' : 'pending', child ? 1 : 0, e.maxAttempts, e.unsafe ? 1 : 0, e.createdRevision, e.at, e.at);
      continue;
    }
    s.insertClaimedEffect.run(e.id, e.jobId, e.actorId, e.src, JSON.stringify(e.input), e.maxAttempts, e.unsafe ? 1 : 0, claims!.runner, until, e.createdRevision, e.at, e.at);
    s.insertAttempt.run(e.id, 1, claims!.runner, claims!.at);
    claimed += 1;
  }
  if (claims && claimed !== claims.until.size) throw new Error('A commit claims an effect it does not create as an activity.');
  for (const t of timers) {
    s.insertTimer.run(t.id, t.jobId, t.key, t.kind, JSON.stringify(t.event), t.dueAt, t.createdRevision, t.createdAt);
  }
  for (const d of deliveries) acceptPending(s, d);
}

/** Append a history row; `inlineHash` (an event applied as it is accepted: its payload hash) makes it the event's record too. */
function insertTransition(
  s: ReturnType<typeof prepare>,
  jobId: string,
  revision: number,
  t: TransitionCommit['transition'],
  runner: string | null,
  fence: number | null,
  inlineHash?: string,
): void {
  const args = [
    jobId,
    revision,
    t.eventId,
    t.eventType,
    json.of(t.payload),
    t.from === null ? null : json.of(t.from),
    json.of(t.to),
    t.outcome,
    t.error ? JSON.stringify(t.error) : null,
    t.at,
    runner,
    fence,
  ] as const;
  if (inlineHash === undefined) s.insertTransition.run(...args);
  else s.insertInlineTransition.run(...args, inlineHash);
}

/** An inbox row's columns from the event; `payload` its text when another value is stored (a redacted copy). */
function inboxParams(e: NewInboxEvent, payload = json.of(e.payload)) {
  return {
    job_id: e.jobId,
    event_id: e.eventId,
    type: e.type,
    payload,
    payload_hash: e.payloadHash,
    accepted_at: e.at,
    source_kind: e.source ?? 'external',
    source_id: e.sourceId ?? null,
    attempt: e.attempt ?? null,
  };
}

/** `claimEffect` inside a transaction; throws LeaseHeld (to roll back) while another live runner holds the job. */
function claimIn(s: ReturnType<typeof prepare>, c: EffectClaim): ClaimedEffect | undefined {
  const { id, runner, now, claimUntil } = c;
  const takeOver = c.takeOver ?? null;
  const before = s.effectClaimState.get(id) as Row | undefined;
  if (!before) return undefined;
  const row = s.claimEffect.get({ id, runner, until: claimUntil, now, takeOver }) as Row | undefined;
  if (!row) return undefined;
  // The job's lease in the same transaction: while another live runner holds it, nothing is claimed.
  const lease = s.claimJobLease.get({ id: before['job_id'], ...leaseParams({ runner, fence: c.fence, now, until: claimUntil, takeOver }, now) }) as { lease_fence: number } | undefined;
  if (!lease) throw new LeaseHeld();
  if (before['status'] === 'running') s.interruptAttempt.run(now, id, before['attempt']);
  s.insertAttempt.run(id, row['attempt'], runner, now);
  return { ...toEffectRecord(row), leaseFence: lease.lease_fence };
}

/** `finishAttempt` inside a transaction; `acceptEvent` false: the caller accepts the outcome event itself (a commit's `finish`). */
function finishIn(s: ReturnType<typeof prepare>, f: AttemptFinish, acceptEvent = true): FinishStatus {
  const { id, attempt, result, at, lease } = f;
  if (lease) {
    const effect = s.effectLeaseState.get({ id, runner: lease.runner, fence: lease.fence }) as { held: number } | undefined;
    if (effect && effect.held === 0) {
      // Another runner took the job: this outcome is not recorded, and the attempt's claim ends
      // now so the lease holder takes the attempt over at once.
      s.endAttempt.run('stale', at, JSON.stringify(leaseLostError(lease.fence)), id, attempt);
      s.dropClaim.run(at, id, attempt);
      return 'lease-lost';
    }
  }
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
  if (event && acceptEvent) acceptPending(s, event);
  return current ? 'current' : 'stale';
}

function acceptPending(s: ReturnType<typeof prepare>, e: NewInboxEvent): boolean {
  return insertInbox(s, { ...inboxParams(e), status: 'pending', error: null, revision: null, processed_at: null }).changes === 1;
}

/**
 * Record that (job, event id) is taken, once: false when it already is. A key row (event_keys'
 * primary key refuses a second); for an id that names a revision (`r<revision>.<uuid>`), also the
 * history row there, which holds such an id applied at that revision without a key row.
 */
function recordKey(s: ReturnType<typeof prepare>, jobId: string, eventId: string, revision: number | null): boolean {
  const named = revisionNamedBy(eventId);
  if (named > 0 && s.locatedEvent.get(jobId, named, eventId)) return false;
  return s.insertKey.run(jobId, eventId, revision).changes === 1;
}

/**
 * Insert an inbox row. An event a caller could name (source `external`) takes its key first, so
 * that one id is never both queued and in history; the runtime's own events (reserved ids) are
 * kept unique by the inbox's UNIQUE (job_id, event_id). `changes` 0: the id was recorded already.
 */
function insertInbox(s: ReturnType<typeof prepare>, params: ReturnType<typeof inboxParams> & Record<string, unknown>): { changes: number } {
  if (params.source_kind === 'external' && !recordKey(s, params.job_id, params.event_id, null)) return { changes: 0 };
  return s.insertEvent.run(params);
}

function pathsText(paths: string[]): string {
  return `|${paths.join('|')}|`;
}

/** A COMMIT that failed with an I/O error: the batch's operations, unresolved. */
function commitOutcomeUnknown(where: string, error: unknown, ops: UnresolvedOperation[]): CommitOutcomeUnknown {
  return new CommitOutcomeUnknown(
    `The commit to ${where} failed at COMMIT (${(error as Error).message}), so whether it landed is unknown: read back each operation before writing it again.`,
    ops,
    { driverCode: (error as { code?: unknown }).code ?? null },
  );
}

// Every entry point: storage faults typed (storageFault.ts), never a driver's error.
guardEntryPoints(SqliteStore, (store) => store.path);
