/**
 * The better-sqlite3 driver (persistence/sql/driver.ts): synchronous, so every call returns its
 * value. Every write is one `BEGIN IMMEDIATE` transaction (one writer: no row locks to take), the
 * writes of a batch without savepoints unless one fails (#transaction); reads run on the connection outside a transaction, or in a
 * deferred (read) one for a snapshot.
 */
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { DatabaseDamagedError } from '../../../src/base/errors.ts';
import { CHECK } from '../../sql/faults.ts';
import type { ClaimedEffect, DueClaim, DueClaimed, DueClaimResult, EffectRecord, FeedPage, HistoryFeedFilter, Outcome } from '../../../src/ports/store.ts';
import { claimIn, commitOutcomeUnknown } from '../../sql/commit.ts';
import type { SqlDriver, WriteOptions, WriteTx } from '../../sql/driver.ts';
import { dueClaimCounts, dueClaimParams } from '../../sql/dueClaims.ts';
import { failure, outcomeOf, RunIsolated, unlessLeaseHeld } from '../../sql/outcomes.ts';
import { SQLITE } from '../../sql/predicates.ts';
import { runSync, type Program, type SyncStatement } from '../../sql/program.ts';
import { toEffectRecord, type Row } from '../../sql/records.ts';
import { dueClaimPickSql, type StatementName } from '../../sql/statements.ts';
import { feedPage, prepareFeed } from './feed.ts';
import { prepare, rawRows, type RawRows } from './prepared.ts';
import { isSqliteFault, outcomeUnknownAtCommit, storageFault } from './storageFault.ts';
import { WalGuard } from './wal.ts';
import { sqliteCheck } from './doctor.ts';

/** The largest file (16 MiB) whose `quick_check` runs before the first write. */
export const QUICK_CHECK_MAX_BYTES = 16 * 1024 * 1024;

/** The refusal of writes to a damaged file, by `quick_check`, or null (healthy, in memory, or too large to check at open). */
function quickCheckRefusal(db: Database.Database, path: string): DatabaseDamagedError | null {
  if (path === ':memory:' || path === '') return null;
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return null;
  }
  if (size > QUICK_CHECK_MAX_BYTES) return null;
  const found = sqliteCheck(db, 'quick_check');
  if (found.length === 0) return null;
  const said = found.slice(0, 3).map((f) => f.message).join('; ');
  return new DatabaseDamagedError(
    `The database file ${path} is damaged (quick_check found ${found.length} problem${found.length === 1 ? '' : 's'}: ${said}); writes to it are refused. ${CHECK}`,
    { path, findings: found.length },
  );
}

/** A program run without a savepoint: one that fails after changing rows throws RunIsolated (a storage fault as it is). */
function unisolated<T>(program: Program<T>, s: Record<StatementName, SyncStatement>): T {
  const changed = { rows: 0 };
  try {
    return runSync(program, s, changed);
  } catch (error) {
    if (changed.rows > 0 && !isSqliteFault(error)) throw new RunIsolated(error);
    throw error;
  }
}

/** A write transaction whose batch writes each run by `one`; `fatal`: an error that fails the whole call. */
function batchTx(s: Record<StatementName, SyncStatement>, one: <T>(program: Program<T>) => T, fatal: (error: unknown) => boolean): WriteTx {
  return {
    run: (program) => runSync(program, s),
    each: (items, write, leaseHeld) => items.map((item) => outcomeOf(() => (leaseHeld ? unlessLeaseHeld(() => one(write(item))) : one(write(item))), fatal)),
    eachCommit: (commits, write) =>
      commits.map((c) => {
        try {
          return one(write(c));
        } catch (error) {
          return failure(error, fatal);
        }
      }),
  };
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = SQLITE;
  readonly isFault = isSqliteFault;
  readonly #db: Database.Database;
  readonly #path: string;
  readonly #s: ReturnType<typeof prepare>;
  /** `getJob`, read by every send: the row as an array, named by a function built once (rawRows). */
  readonly #jobById: RawRows;
  readonly #byText = new Map<string, Database.Statement>();
  /** `claimDueEffects`' pick, one statement per limit (the limit written in: dueClaimPickSql). */
  readonly #claimPicks = new Map<number, Database.Statement>();
  /** `#tx.immediate(fn)`: fn in BEGIN IMMEDIATE; `#tx.deferred(fn)`: in a read transaction; `#savepoint(fn)`, inside one: a savepoint. */
  readonly #tx: Database.Transaction<(fn: () => unknown) => unknown>;
  readonly #savepoint: Database.Transaction<(fn: () => unknown) => unknown>;
  /** The first run of a write: a batch's writes without savepoints (see #transaction). */
  readonly #t: WriteTx;
  /** A run again after a write of its batch failed: each write in a savepoint of its own. */
  readonly #isolated: WriteTx;
  #feed: ReturnType<typeof prepareFeed> | undefined;
  #closed = false;
  /** What `quick_check` found before the first write: undefined until then, null when healthy (or not checked). */
  #damage: DatabaseDamagedError | null | undefined;
  /** The WAL on a disk that fills (wal.ts), bounded when the store opened. */
  readonly #wal: WalGuard;

  constructor(db: Database.Database, path: string, readonly description: string, readonly schemaVersion: number, wal: WalGuard) {
    this.#db = db;
    this.#path = path;
    this.#wal = wal;
    const s = (this.#s = prepare(db));
    this.#jobById = rawRows(db.prepare('SELECT * FROM jobs WHERE id = ?'));
    this.#tx = db.transaction((fn: () => unknown) => fn());
    this.#savepoint = db.transaction((fn: () => unknown) => fn());
    const inSavepoint = <T>(program: Program<T>) => this.#savepoint(() => runSync(program, s)) as T;
    this.#isolated = batchTx(s, inSavepoint, isSqliteFault);
    this.#t = batchTx(s, (program) => unisolated(program, s), (error) => error instanceof RunIsolated || isSqliteFault(error));
  }

  fault(error: unknown, call: string): unknown {
    return storageFault(error, { path: this.#path, call });
  }

  get(name: StatementName, args: unknown[]): Row | undefined {
    return this.#s[name].get(...args) as Row | undefined;
  }

  all(name: StatementName, args: unknown[]): Row[] {
    return this.#s[name].all(...args) as Row[];
  }

  values(name: StatementName, args: unknown[]): unknown[] | undefined {
    return this.#s[name].get(...args) as unknown[] | undefined; // prepared raw (prepared.ts, RAW)
  }

  job(id: string): Row | undefined {
    const values = this.#jobById.stmt.get(id) as unknown[] | undefined;
    return values ? this.#jobById.named(values) : undefined;
  }

  query(sql: string, params: readonly unknown[]): Row[] {
    let stmt = this.#byText.get(sql);
    if (!stmt) {
      stmt = this.#db.prepare(sql);
      this.#byText.set(sql, stmt);
    }
    return stmt.all(...params) as Row[];
  }

  read<R>(program: Program<R>): R {
    return runSync(program, this.#s);
  }

  snapshot<R>(program: Program<R>): R {
    return this.#tx.deferred(() => runSync(program, this.#s)) as R;
  }

  /**
   * One `BEGIN IMMEDIATE` transaction: see docs/ARCHITECTURE.md. With `ops` (the job operations it
   * carries), an I/O error raised by the COMMIT itself, after `fn` ran, is CommitOutcomeUnknown:
   * the transaction may have landed. A damaged file refuses it (quick_check before the first
   * write); on a full disk the WAL is checkpointed and the write runs once more (wal.ts).
   */
  write<T>(fn: (t: WriteTx) => T | Promise<T>, options?: WriteOptions): T {
    if (this.#damage === undefined) this.#damage = quickCheckRefusal(this.#db, this.#path);
    if (this.#damage !== null) throw this.#damage;
    return this.#wal.write(() => this.#transaction(fn, options?.ops));
  }

  /**
   * A batch's writes run first without savepoints (a SAVEPOINT and a RELEASE per write saved). A
   * write its own checks refuse before it changed a row is refused alone as it is; one that fails
   * after changing rows rolls the whole transaction back (RunIsolated), which runs again with a
   * savepoint per write, where that write rolls back alone.
   */
  #transaction<T>(fn: (t: WriteTx) => T | Promise<T>, ops: WriteOptions['ops']): T {
    try {
      return this.#once(fn, this.#t, ops);
    } catch (error) {
      if (!(error instanceof RunIsolated)) throw error;
    }
    return this.#once(fn, this.#isolated, ops);
  }

  #once<T>(fn: (t: WriteTx) => T | Promise<T>, t: WriteTx, ops: WriteOptions['ops']): T {
    if (!ops) return this.#tx.immediate(() => fn(t)) as T;
    let ran = false;
    try {
      return this.#tx.immediate(() => {
        const result = fn(t);
        ran = true;
        return result;
      }) as T;
    } catch (error) {
      if (ran && outcomeUnknownAtCommit(error)) throw commitOutcomeUnknown(this.description, error, ops());
      throw error;
    }
  }

  claimDue(c: DueClaim): DueClaimResult {
    const s = this.#s;
    return this.write(
      (t) => {
        // One writer: the pick reads what nobody else changes before its claims (no rows to skip).
        let pick = this.#claimPicks.get(c.limit);
        if (!pick) this.#claimPicks.set(c.limit, (pick = this.#db.prepare(dueClaimPickSql(SQLITE, c.limit))));
        const rows = pick.all(dueClaimParams(c)) as Row[];
        const held: EffectRecord[] = [];
        for (const row of rows) {
          if (row['kind'] !== 'held') continue;
          const effect = s.getEffect.get(row['id']) as Row | undefined;
          if (effect) held.push(toEffectRecord(effect));
        }
        // Each claim from the job, status and attempt its pick read (a batch write: see #transaction).
        const picked = rows.filter((row) => row['kind'] === 'claim');
        const claim = (row: Row) => claimIn({ id: row['id'] as string, runner: c.runner, now: c.now, claimUntil: c.claimUntil, fence: null }, row);
        const outcomes = t.each(picked, claim, true) as Outcome<ClaimedEffect | undefined>[];
        const claimed: DueClaimed[] = [];
        outcomes.forEach((o, i) => {
          if (!o.ok) throw o.error;
          const row = picked[i]!;
          if (o.result) claimed.push({ ...o.result, machineId: row['machine_id'] as string, machineVersion: row['machine_version'] as string });
        });
        return { claimed, held, ...dueClaimCounts(rows[0], claimed.length) };
      },
      { ops: () => [{ kind: 'due-claims', runner: c.runner }] },
    );
  }

  historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): FeedPage {
    this.#feed ??= prepareFeed(this.#db);
    const s = this.#feed;
    // One read snapshot: the head and the page agree.
    return this.#tx.deferred(() => feedPage(s, after, limit, scan, filter)) as FeedPage;
  }

  externalChanges(): number {
    return this.#db.pragma('data_version', { simple: true }) as number;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }
}
