import type { Database, SAHPoolUtil, Sqlite3Static } from '@sqlite.org/sqlite-wasm';
import { DatabaseDamagedError, SpoolError, ValidationError } from '../../../src/base/errors.ts';
import { systemClock, type Clock } from '../../../src/ports/clock.ts';
import { CHECK } from '../../sql/faults.ts';
import { SqlStore } from '../../sql/SqlStore.ts';
import { sqliteStorageFault } from '../../sql/sqliteFaults.ts';
import { migrate, refuseForeignDatabase, refuseNewerSchema } from '../../sql/sqliteOpen.ts';
import { SqliteWasmDriver, WasmConnection } from './driver.ts';
import { asSqliteError } from './statements.ts';

/** Options of {@link openSqliteWasmStore}. */
export interface SqliteWasmStoreOptions {
  /** The sqlite-wasm module, initialised (`await sqlite3InitModule()`). */
  sqlite3: Sqlite3Static;
  /**
   * The OPFS SAH-pool VFS (`await sqlite3.installOpfsSAHPoolVfs({})`, in a Worker): the database
   * is the file `path` in it, and survives a reload. Without it, the database is in memory.
   */
  pool?: SAHPoolUtil;
  /** The database's name in the pool (`/spool.db`). Required with `pool`; none (or `:memory:`) without. */
  path?: string;
  /**
   * `FULL` (default): an acknowledged commit is flushed to OPFS before the call returns.
   * `NORMAL`: fewer flushes; the last commits can be lost if the browser or the machine dies.
   */
  synchronous?: 'FULL' | 'NORMAL';
  /** Clock for the store's own bookkeeping (when a migration was applied). Default: real time. */
  clock?: Clock;
}

const OPTIONS = ['sqlite3', 'pool', 'path', 'synchronous', 'clock'] as const;

/** The options, checked before anything is opened: a typed refusal of a typo. */
function checkOptions(options: unknown): asserts options is SqliteWasmStoreOptions {
  const refuse = (message: string, option?: string): never => {
    throw new ValidationError(`openSqliteWasmStore: ${message}.`, option ? { option } : {});
  };
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return refuse('options must be an object');
  const o = options as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(OPTIONS as readonly string[]).includes(k));
  if (unknown.length > 0) refuse(`unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${OPTIONS.join(', ')})`, unknown[0]);
  if (typeof (o['sqlite3'] as { oo1?: { DB?: unknown } } | undefined)?.oo1?.DB !== 'function') refuse('sqlite3 must be the initialised sqlite-wasm module (await sqlite3InitModule())', 'sqlite3');
  const pool = o['pool'];
  if (pool !== undefined && typeof (pool as { OpfsSAHPoolDb?: unknown } | null)?.OpfsSAHPoolDb !== 'function') refuse('pool must be the SAH-pool VFS (await sqlite3.installOpfsSAHPoolVfs({}))', 'pool');
  const path = o['path'];
  if (pool !== undefined && !(typeof path === 'string' && path.startsWith('/') && path.length > 1)) refuse('with a pool, path must name the database in it, starting with "/" ("/spool.db")', 'path');
  if (pool === undefined && path !== undefined && path !== ':memory:') refuse(`path ${JSON.stringify(path)} needs a pool (an in-memory database has none)`, 'path');
  if (o['synchronous'] !== undefined && o['synchronous'] !== 'FULL' && o['synchronous'] !== 'NORMAL') {
    refuse(`synchronous must be 'FULL' or 'NORMAL' (got ${JSON.stringify(o['synchronous']) ?? String(o['synchronous'])})`, 'synchronous');
  }
  const clock = o['clock'];
  if (clock !== undefined && typeof (clock as { now?: unknown } | null)?.now !== 'function') refuse('clock must be a Clock: { now(): number }', 'clock');
}

/**
 * The store on sqlite-wasm: in a browser's Worker on OPFS (the SAH-pool VFS), or in memory. The
 * same store as SqliteStore (the SQL core, persistence/sql), over one connection; the host drives
 * the runtime (`tick()`): see docs/browser.md.
 */
export class SqliteWasmStore extends SqlStore {
  /** The database's name in the pool, or `:memory:`. */
  readonly path: string;
  readonly db: Database;
  readonly synchronous: 'FULL' | 'NORMAL';

  protected constructor(driver: SqliteWasmDriver, path: string, db: Database, synchronous: 'FULL' | 'NORMAL') {
    super(driver);
    this.path = path;
    this.db = db;
    this.synchronous = synchronous;
  }

  /** @internal {@link openSqliteWasmStore}. */
  static openWith(options: SqliteWasmStoreOptions): SqliteWasmStore {
    checkOptions(options);
    const { sqlite3, pool } = options;
    const path = pool ? options.path! : ':memory:';
    let db: Database;
    try {
      db = pool ? new pool.OpfsSAHPoolDb(path) : new sqlite3.oo1.DB(':memory:', 'c');
    } catch (error) {
      throw sqliteStorageFault(asSqliteError(sqlite3, error), { path, call: 'open' });
    }
    const c = new WasmConnection(sqlite3, db);
    try {
      // Before anything is changed: another application's database, or a newer Spool's.
      if (refuseForeignDatabase(c, path)) refuseNewerSchema(c, path);
      c.exec(`PRAGMA synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      const synchronous = c.rows('PRAGMA synchronous')[0]?.['synchronous'] === 1 ? 'NORMAL' : 'FULL';
      c.exec('PRAGMA foreign_keys = ON');
      const version = migrate(c, path, (options.clock ?? systemClock).now());
      const description = pool ? `sqlite-wasm:opfs-sahpool:${path}` : 'sqlite-wasm::memory:';
      return new SqliteWasmStore(new SqliteWasmDriver(c, path, description, version), path, db, synchronous);
    } catch (error) {
      c.close();
      if (error instanceof SpoolError) throw error;
      // A full quota, a file this origin may not use: that storage fault. Not a Spool database, or a damaged one: a typed refusal.
      const fault = sqliteStorageFault(asSqliteError(sqlite3, error), { path, call: 'open' });
      if (fault instanceof SpoolError && !(fault instanceof DatabaseDamagedError)) throw fault;
      throw new DatabaseDamagedError(`Cannot open ${path} as a Spool database: ${(error as Error).message}. ${CHECK}`, { path });
    }
  }
}

/**
 * Open (creating and migrating as needed) the Spool store on sqlite-wasm.
 *
 * @example
 * // In a Worker:
 * const sqlite3 = await sqlite3InitModule();
 * const pool = await sqlite3.installOpfsSAHPoolVfs({});
 * const store = await openSqliteWasmStore({ sqlite3, pool, path: '/spool.db' });
 */
export async function openSqliteWasmStore(options: SqliteWasmStoreOptions): Promise<SqliteWasmStore> {
  return SqliteWasmStore.openWith(options);
}
