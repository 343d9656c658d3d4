/**
 * The better-sqlite3 driver (persistence/sql/driver.ts): synchronous, so every call returns its
 * value. Every write is one `BEGIN IMMEDIATE` transaction (one writer: no row locks to take), the
 * writes of a batch without savepoints unless one fails (persistence/sql/syncDriver.ts); reads run on the connection outside a transaction, or in a
 * deferred (read) one for a snapshot.
 */
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { DatabaseDamagedError } from '../../../src/base/errors.ts';
import { CHECK } from '../../sql/faults.ts';
import type { FeedPage, HistoryFeedFilter } from '../../../src/ports/store.ts';
import { commitOutcomeUnknown } from '../../sql/commit.ts';
import type { SqlDriver, WriteOptions, WriteTx } from '../../sql/driver.ts';
import { SQLITE } from '../../sql/predicates.ts';
import { runSync, type Program } from '../../sql/program.ts';
import type { Row } from '../../sql/records.ts';
import { batchTxs, runBatch } from '../../sql/syncDriver.ts';
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
  /** A write's batch writes: first without savepoints, then each in a savepoint of its own (syncDriver.ts, runBatch). */
  readonly #txs: { first: WriteTx; isolated: WriteTx };
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
    const pick = (limit: number) => {
      let stmt = this.#claimPicks.get(limit);
      if (!stmt) this.#claimPicks.set(limit, (stmt = db.prepare(dueClaimPickSql(SQLITE, limit))));
      return stmt;
    };
    this.#txs = batchTxs(s, <T>(fn: () => T) => this.#savepoint(fn) as T, pick);
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

  /** The write's batch writes without savepoints, then with one each if one failed after changing rows (syncDriver.ts, runBatch). */
  #transaction<T>(fn: (t: WriteTx) => T | Promise<T>, ops: WriteOptions['ops']): T {
    return runBatch(this.#txs, (t) => this.#once(fn, t, ops));
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
    this.#wal.close();
    this.#db.close();
  }
}
