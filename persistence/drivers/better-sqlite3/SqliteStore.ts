import Database from 'better-sqlite3';
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
  DueClaim,
  DueClaimed,
  DueClaimResult,
  EffectClaim,
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
  NewInboxEvent,
  NewJob,
  PurgeFilter,
  StoreStats,
  NewSchedule,
  OccurrenceRecord,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  TransitionCommit,
  TransitionRecord,
  UnresolvedOperation,
} from '../../../src/ports/store.ts';
import { CommitOutcomeUnknown, operationsOf } from '../../../src/ports/store.ts';
import { systemClock, type Clock } from '../../../src/ports/clock.ts';
import { DatabaseBusyError, DatabaseDamagedError, SpoolError } from '../../../src/base/errors.ts';
import { fireScheduleIn, putScheduleIn, Refused, toOccurrenceRecord, toScheduleRecord } from '../../sql/schedules.ts';
import { isSqliteFault, outcomeUnknownAtCommit, sqliteEntryFault, storageFault } from './storageFault.ts';
import { CHECK, guardEntryPoints } from '../../sql/faults.ts';
import type {
  Row,
} from '../../sql/records.ts';
import { damageReason, withUncommitted, toAssetRecord, toAttemptRecord, toEffectRecord, toInboxRecord, toJobRecord, toTimerRecord, toTransitionRecord } from '../../sql/records.ts';
import { OpenBusy, checkOpenOptions, openDatabase, refuseForeignDatabase, refuseNewerSchema, migrate } from './open.ts';
import { jobListSql } from '../../sql/statements.ts';
import { type RawRows, rawRows, prepare } from './prepared.ts';
import { SQLITE } from '../../sql/predicates.ts';
import { run, runSync, type Program } from '../../sql/program.ts';
import { activeVersionsIn, acceptEventIn, attachAssetIn, completeByTokenIn, expireLeasesIn, failEffectIn, fireTimerIn, notedIn, releaseAttemptIn, requestCancelIn } from '../../sql/writes.ts';
import { statsIn } from '../../sql/stats.ts';
import { feedPage, prepareFeed } from './feed.ts';
import { failure, outcomeOf, unlessLeaseHeld } from '../../sql/outcomes.ts';
import { byteOrder } from '../../sql/values.ts';
import { dueClaimCounts, dueClaimParams, dueRead } from '../../sql/dueClaims.ts';
import { applyCommit, createIn, claimIn, finishIn, findEvent, commitOutcomeUnknown } from '../../sql/commit.ts';

export { DatabaseBusyError };
export { loadMigrations } from './open.ts';
export { NotASpoolDatabaseError } from '../../sql/migrations.ts';

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
      this.#savepoint = this.db.transaction((c: TransitionCommit) => runSync(applyCommit(c), stmts));
      this.#createSavepoint = this.db.transaction((job: NewJob) => runSync(createIn(job), stmts));
      this.#finishSavepoint = this.db.transaction((f: AttemptFinish) => runSync(finishIn(f), stmts));
      this.#claimSavepoint = this.db.transaction((c: EffectClaim) => runSync(claimIn(c), stmts));
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
    return this.#write(() => this.#run(createIn(job)));
  }

  async writeBatch(batch: WriteBatch): Promise<WriteBatchResult> {
    const { creates = [], commits = [], finishes = [], claims = [] } = batch;
    if (creates.length + finishes.length + claims.length === 0) return { creates: [], commits: await this.commit(commits), finishes: [], claims: [] };
    const ops = () => operationsOf(batch);
    // One new job alone (a lone start): no savepoint, as a failure rolls the whole transaction back.
    if (creates.length === 1 && commits.length + finishes.length + claims.length === 0) {
      const job = creates[0]!;
      return { creates: [outcomeOf(() => this.#write(() => this.#run(createIn(job)), ops), isSqliteFault)], commits: [], finishes: [], claims: [] };
    }
    // Each write in its own savepoint: a refused one rolls back alone.
    return this.#write(() => ({
      creates: creates.map((job) => outcomeOf(() => this.#createSavepoint(job), isSqliteFault)),
      commits: commits.map((c) => {
        try {
          return this.#savepoint(c);
        } catch (error) {
          return failure(error, isSqliteFault);
        }
      }),
      finishes: finishes.map((f) => outcomeOf(() => this.#finishSavepoint(f), isSqliteFault)),
      claims: claims.map((c) => outcomeOf(() => unlessLeaseHeld(() => this.#claimSavepoint(c)), isSqliteFault)),
    }), ops);
  }

  async getJob(id: string, known?: JobRecord): Promise<JobRecord | undefined> {
    if (known?.id === id) {
      // What moves without a commit, read as an array.
      const current = withUncommitted(known, this.#stmts.uncommittedOf.get(id) as unknown[] | undefined);
      if (current) return current;
    }
    const values = this.#jobById.stmt.get(id) as unknown[] | undefined;
    return values ? this.#recordDamage([toJobRecord(this.#jobById.named(values))])[0] : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    const row = this.#stmts.byKey.get(owner ?? '', key) as Row | undefined;
    return row ? this.#recordDamage([toJobRecord(row)])[0] : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    const { sql, params } = jobListSql(filter, SQLITE);
    let stmt = this.#listCache.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.#listCache.set(sql, stmt);
    }
    return this.#recordDamage((stmt.all(...params) as Row[]).map(toJobRecord));
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    return (this.#stmts.orphanedChildren.all(limit) as Row[]).map((r) => r['id'] as string);
  }

  async activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    return this.#run(activeVersionsIn(owner, countUpTo));
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    return this.#write(() => this.#run(acceptEventIn(event)));
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    const row = this.#run(findEvent(jobId, eventId));
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
        return [this.#write(() => this.#run(applyCommit(commits[0]!)), ops)];
      } catch (error) {
        if (error instanceof CommitOutcomeUnknown) throw error;
        return [failure(error, isSqliteFault)];
      }
    }
    return this.#write(
      () =>
        commits.map((c) => {
          try {
            return this.#savepoint(c);
          } catch (error) {
            return failure(error, isSqliteFault);
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

  async dueEffects(now: number, limit: number, runner?: string, unclaimableBy?: readonly string[]): Promise<EffectRecord[]> {
    const read = dueRead(now, limit, runner, unclaimableBy);
    return (this.#stmts[read.name].all(read.params) as Row[]).map(toEffectRecord);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    return (this.#stmts.runningEffects.all(limit) as Row[]).map(toEffectRecord);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined> {
    return unlessLeaseHeld(() => this.#write(() => this.#run(claimIn({ id, runner, now, claimUntil, takeOver, fence }))));
  }

  async claimDueEffects(c: DueClaim): Promise<DueClaimResult> {
    return this.#write(() => {
      // One writer: the pick reads what nobody else changes before its claims (no rows to skip).
      const rows = this.#stmts.dueClaimPick.all(dueClaimParams(c)) as Row[];
      const claimed: DueClaimed[] = [];
      const held: EffectRecord[] = [];
      for (const row of rows) {
        if (row['kind'] === 'held') {
          const effect = this.#stmts.getEffect.get(row['id']) as Row | undefined;
          if (effect) held.push(toEffectRecord(effect));
        } else if (row['kind'] === 'claim') {
          const effect = unlessLeaseHeld(() => this.#claimSavepoint({ id: row['id'] as string, runner: c.runner, now: c.now, claimUntil: c.claimUntil, fence: null }));
          if (effect) claimed.push({ ...effect, machineId: row['machine_id'] as string, machineVersion: row['machine_version'] as string });
        }
      }
      return { claimed, held, ...dueClaimCounts(rows[0], claimed.length) };
    }, () => [{ kind: 'due-claims', runner: c.runner }]);
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number, now: number): Promise<boolean> {
    return this.#write(() => this.#stmts.renewClaim.run({ until: claimUntil, now, id, attempt, runner }).changes === 1);
  }

  async releaseAttempt(id: string, attempt: number, runner: string, at: number): Promise<boolean> {
    return this.#write(() => this.#run(releaseAttemptIn(id, attempt, runner, at)));
  }

  async renewLeases(runner: string, jobIds: readonly string[], until: number, now: number): Promise<Map<string, number>> {
    if (jobIds.length === 0) return new Map();
    const rows = this.#write(() => this.#stmts.renewLeases.all({ runner, until, now, ids: JSON.stringify(jobIds) }) as Row[]);
    return new Map(rows.map((r) => [r['id'] as string, r['lease_fence'] as number]));
  }

  async releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number> {
    if (jobIds !== 'all' && jobIds.length === 0) return 0;
    const params = { runner, all: jobIds === 'all' ? 1 : 0, ids: jobIds === 'all' ? '[]' : JSON.stringify(jobIds) };
    return this.#write(() => this.#stmts.releaseLeases.run(params).changes);
  }

  async leaseHolders(now: number): Promise<string[]> {
    return (this.#stmts.leaseHolders.all({ now }) as Row[]).map((r) => r['lease_owner'] as string);
  }

  async expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]> {
    const s = this.#stmts;
    // Called every worker round: look first, and take the write lock only when something expired.
    if ('expiredBy' in filter && s.expireLeases.all({ now: filter.expiredBy }).length === 0) return [];
    return this.#write(() => this.#run(expireLeasesIn(filter)));
  }

  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus> {
    return this.#write(() => this.#run(finishIn({ id, attempt, result, at, lease })));
  }

  async failEffect(id: string, attempt: number, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean> {
    return this.#write(() => this.#run(failEffectIn(id, attempt, error, event, at)));
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
    return this.#write(() => this.#run(completeByTokenIn(token, result, event, at)));
  }

  async listTimers(jobId: string): Promise<TimerRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listTimers.all(jobId) as Row[]).map(toTimerRecord));
  }

  async dueTimers(now: number, limit: number): Promise<TimerRecord[]> {
    return (this.#stmts.dueTimers.all(now, limit) as Row[]).map(toTimerRecord);
  }

  async fireTimer(id: string, event: NewInboxEvent): Promise<boolean> {
    return this.#write(() => this.#run(fireTimerIn(id, event)));
  }

  /** Leases are judged by the caller's clock here: every time is as stored, whatever `now`. */
  async nextWakeAt(): Promise<number | null> {
    const s = this.#stmts;
    const times = [s.nextTimer.get(), s.nextRetry.get(), s.nextClaimExpiry.get(), s.nextLeaseExpiry.get()]
      .map((r) => (r as { t: number | null } | undefined)?.t ?? null)
      .filter((t): t is number => t !== null);
    return times.length ? Math.min(...times) : null;
  }

  async requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }> {
    return this.#write(() => this.#run(requestCancelIn(jobId, reason, event, at)));
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
    return this.#write(() => this.#run(attachAssetIn(a, lease)));
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    return this.#jobDamage(jobId, (this.#stmts.listAssets.all(jobId) as Row[]).map(toAssetRecord));
  }

  async purgeJob(jobId: string): Promise<boolean> {
    return this.#write(() => this.#stmts.purge.run(jobId).changes === 1);
  }

  async suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean> {
    return this.#write(() => this.#run(notedIn(note, run('suspend', at, reason, jobId))));
  }

  async resumeJob(jobId: string, note: NoteRecord): Promise<boolean> {
    return this.#write(() => this.#run(notedIn(note, run('resume', jobId))));
  }

  async redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean> {
    return this.#write(() => this.#run(notedIn(note, run('redrive', maxAttempts, at, id))));
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

  /** The figures from one read transaction (stats.ts). */
  #statsOnce(p: { all: number; owner: string; now: number }, damaged: string[]): StoreStats {
    return this.#tx.deferred(() => this.#run(statsIn(p, damaged))) as StoreStats;
  }


  // Schedules (schedules.ts)

  async putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
    return this.#write(() => this.#run(putScheduleIn(schedule, expectedRevision)));
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    const row = this.#stmts.scheduleGet.get(id) as Row | undefined;
    return row ? toScheduleRecord(row) : undefined;
  }

  async listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]> {
    const rows = (filter.owner === undefined ? this.#stmts.scheduleListAll.all() : this.#stmts.scheduleListOwner.all(filter.owner ?? '')) as Row[];
    return rows.map(toScheduleRecord);
  }

  async deleteSchedule(id: string, owner: string | null): Promise<boolean> {
    return this.#write(() => this.#stmts.scheduleDelete.run(id, owner ?? '').changes === 1);
  }

  async dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]> {
    return (this.#stmts.scheduleDue.all({ owner: owner ?? '', now, limit }) as Row[]).map(toScheduleRecord);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    try {
      return this.#write(() => this.#run(fireScheduleIn(fire)));
    } catch (error) {
      if (error instanceof Refused) return error.result;
      throw error;
    }
  }

  async listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]> {
    return (this.#stmts.occurrences.all(scheduleId, limit) as Row[]).map(toOccurrenceRecord);
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
  #feedStmts: ReturnType<typeof prepareFeed> | undefined;

  async historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    this.#feedStmts ??= prepareFeed(this.db);
    const s = this.#feedStmts;
    // One read snapshot: the head and the page agree.
    return this.#tx.deferred(() => feedPage(s, after, limit, scan, filter)) as FeedPage;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.db.close();
  }

  /** Run a program (program.ts) on this connection's statements, inside the caller's transaction. */
  #run<R>(program: Program<R>): R {
    return runSync(program, this.#stmts);
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


// Every entry point: storage faults typed (storageFault.ts), never a driver's error.
guardEntryPoints(SqliteStore, (store) => store.path, sqliteEntryFault);
