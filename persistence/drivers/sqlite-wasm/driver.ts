/**
 * The sqlite-wasm driver (persistence/sql/driver.ts), over one connection of the official
 * `@sqlite.org/sqlite-wasm` build: synchronous like the better-sqlite3 one, so every call returns
 * its value. Every write is one `BEGIN IMMEDIATE` transaction, the writes of a batch without
 * savepoints unless one fails (persistence/sql/syncDriver.ts); reads run on the connection outside
 * a transaction, or in a deferred (read) one for a snapshot. Faults are SQLite's, mapped as every
 * SQLite driver maps them (persistence/sql/sqliteFaults.ts).
 */
import type { Database, SAHPoolUtil, Sqlite3Static } from '@sqlite.org/sqlite-wasm';
import { StorageAccessError } from '../../../src/base/errors.ts';
import type { FeedPage, HistoryFeedFilter } from '../../../src/ports/store.ts';
import { commitOutcomeUnknown } from '../../sql/commit.ts';
import type { SqlDriver, WriteOptions, WriteTx } from '../../sql/driver.ts';
import { SQLITE } from '../../sql/predicates.ts';
import { runSync, type Program } from '../../sql/program.ts';
import type { Row } from '../../sql/records.ts';
import { isSqliteFault, outcomeUnknownAtCommit, sqliteStorageFault } from '../../sql/sqliteFaults.ts';
import type { SqliteConnection } from '../../sql/sqliteOpen.ts';
import { dueClaimPickSql, statementsSql, type StatementName } from '../../sql/statements.ts';
import { batchTxs, feedPage, runBatch, SQLITE_FEED_SQL } from '../../sql/syncDriver.ts';
import { asSqliteError, WasmStatement } from './statements.ts';

/**
 * A file the SAH pool could not open or create (SQLITE_CANTOPEN) while every file of the pool is in
 * use: the fault says so, and how to make room. Any other fault as it is.
 */
export function withPoolHint(fault: unknown, pool: SAHPoolUtil | undefined): unknown {
  if (!pool || !(fault instanceof StorageAccessError) || pool.getFileCount() < pool.getCapacity()) return fault;
  return new StorageAccessError(
    `${fault.message} The SAH pool is full: its ${pool.getCapacity()} files are all in use (a Spool database takes two, with its journal). ` +
      'Give installOpfsSAHPoolVfs a larger initialCapacity, or call pool.reserveMinimumCapacity(n).',
    { ...fault.details, poolCapacity: pool.getCapacity() },
  );
}

/** The statements read as arrays of values. */
const RAW: readonly StatementName[] = ['uncommittedOf'];

/** A sqlite-wasm connection: its statements by text, transactions, and what the open sequence asks of it. */
export class WasmConnection implements SqliteConnection {
  readonly #byText = new Map<string, WasmStatement>();
  #savepoints = 0;

  constructor(
    readonly sqlite3: Sqlite3Static,
    readonly db: Database,
  ) {}

  /** The statement of `sql`, prepared once. */
  statement(sql: string, raw = false): WasmStatement {
    const key = raw ? `raw:${sql}` : sql;
    let stmt = this.#byText.get(key);
    if (!stmt) this.#byText.set(key, (stmt = new WasmStatement(this.sqlite3, this.db, sql, raw)));
    return stmt;
  }

  rows(sql: string, args: readonly unknown[] = []): Record<string, unknown>[] {
    const stmt = new WasmStatement(this.sqlite3, this.db, sql);
    try {
      return stmt.all(...args) as Record<string, unknown>[];
    } finally {
      stmt.finalize();
    }
  }

  exec(sql: string): void {
    try {
      this.db.exec(sql);
    } catch (error) {
      throw asSqliteError(this.sqlite3, error);
    }
  }

  inTransaction(): boolean {
    return this.sqlite3.capi.sqlite3_get_autocommit(this.db.pointer as number) === 0;
  }

  /** `fn` in a transaction (`BEGIN IMMEDIATE` or a deferred, read one), committed when it returns, rolled back when it throws; inside one, in a savepoint. */
  transaction<T>(mode: 'IMMEDIATE' | 'DEFERRED', fn: () => T): T {
    if (this.inTransaction()) return this.savepoint(fn);
    this.exec(`BEGIN ${mode}`);
    try {
      const result = fn();
      this.exec('COMMIT');
      return result;
    } catch (error) {
      if (this.inTransaction()) this.exec('ROLLBACK');
      throw error;
    }
  }

  /** `fn` in a savepoint of the transaction open: released when it returns, rolled back alone when it throws. */
  savepoint<T>(fn: () => T): T {
    const name = `spool_${++this.#savepoints}`;
    this.exec(`SAVEPOINT ${name}`);
    try {
      const result = fn();
      this.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      if (this.inTransaction()) this.exec(`ROLLBACK TO ${name}; RELEASE ${name}`);
      throw error;
    } finally {
      this.#savepoints--;
    }
  }

  close(): void {
    for (const stmt of this.#byText.values()) stmt.finalize();
    this.#byText.clear();
    this.db.close();
  }
}

export class SqliteWasmDriver implements SqlDriver {
  readonly dialect = SQLITE;
  readonly isFault = isSqliteFault;
  readonly #c: WasmConnection;
  readonly #path: string;
  readonly #s: Record<StatementName, WasmStatement>;
  readonly #txs: { first: WriteTx; isolated: WriteTx };
  #closed = false;

  readonly #pool: SAHPoolUtil | undefined;

  constructor(connection: WasmConnection, path: string, readonly description: string, readonly schemaVersion: number, pool?: SAHPoolUtil) {
    this.#c = connection;
    this.#pool = pool;
    this.#path = path;
    const sql = statementsSql(SQLITE);
    const s = {} as Record<StatementName, WasmStatement>;
    for (const name of Object.keys(sql) as StatementName[]) s[name] = connection.statement(sql[name], RAW.includes(name));
    this.#s = s;
    this.#txs = batchTxs(s, (fn) => connection.savepoint(fn), (limit) => connection.statement(dueClaimPickSql(SQLITE, limit)));
  }

  fault(error: unknown, call: string): unknown {
    return withPoolHint(sqliteStorageFault(asSqliteError(this.#c.sqlite3, error), { path: this.#path, call }), this.#pool);
  }

  get(name: StatementName, args: unknown[]): Row | undefined {
    return this.#s[name].get(...args) as Row | undefined;
  }

  all(name: StatementName, args: unknown[]): Row[] {
    return this.#s[name].all(...args) as Row[];
  }

  values(name: StatementName, args: unknown[]): unknown[] | undefined {
    return this.#s[name].get(...args) as unknown[] | undefined; // prepared raw (RAW)
  }

  job(id: string): Row | undefined {
    return this.#s.getJob.get(id) as Row | undefined;
  }

  query(sql: string, params: readonly unknown[]): Row[] {
    return this.#c.statement(sql).all(...params) as Row[];
  }

  read<R>(program: Program<R>): R {
    return runSync(program, this.#s);
  }

  snapshot<R>(program: Program<R>): R {
    return this.#c.transaction('DEFERRED', () => runSync(program, this.#s));
  }

  /**
   * One `BEGIN IMMEDIATE` transaction. With `ops` (the job operations it carries), an I/O error
   * raised by the COMMIT itself, after `fn` ran, is CommitOutcomeUnknown: the transaction may have landed.
   */
  write<T>(fn: (t: WriteTx) => T | Promise<T>, options?: WriteOptions): T {
    const ops = options?.ops;
    return runBatch(this.#txs, (t) => {
      let ran = false;
      try {
        return this.#c.transaction('IMMEDIATE', () => {
          const result = fn(t) as T;
          ran = true;
          return result;
        });
      } catch (error) {
        if (ops && ran && outcomeUnknownAtCommit(error)) throw commitOutcomeUnknown(this.description, error, ops());
        throw error;
      }
    });
  }

  historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): FeedPage {
    const s = { head: this.#c.statement(SQLITE_FEED_SQL.head), page: this.#c.statement(SQLITE_FEED_SQL.page) };
    // One read snapshot: the head and the page agree.
    return this.#c.transaction('DEFERRED', () => feedPage(s, after, limit, scan, filter));
  }

  externalChanges(): number {
    return (this.#c.statement('PRAGMA data_version').get() as { data_version: number }).data_version;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#c.close();
  }
}
