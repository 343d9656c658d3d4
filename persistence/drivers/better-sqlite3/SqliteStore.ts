import Database from 'better-sqlite3';
import { systemClock, type Clock } from '../../../src/ports/clock.ts';
import { DatabaseBusyError, DatabaseDamagedError, SpoolError } from '../../../src/base/errors.ts';
import { CHECK } from '../../sql/faults.ts';
import { SqlStore } from '../../sql/SqlStore.ts';
import { SqliteDriver } from './driver.ts';
import { WalGuard } from './wal.ts';
import { OpenBusy, checkOpenOptions, openDatabase, refuseForeignDatabase, refuseNewerSchema, migrate } from './open.ts';
import { storageFault } from './storageFault.ts';

export { DatabaseBusyError };
export { QUICK_CHECK_MAX_BYTES } from './driver.ts';
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
export class SqliteStore extends SqlStore {
  /** The database file (`:memory:` for the in-memory store). */
  readonly path: string;
  readonly db: Database.Database;
  /** The durability this connection commits with, as SQLite reports it after open. */
  readonly synchronous: 'FULL' | 'NORMAL';

  /**
   * Opens the database synchronously (better-sqlite3 is synchronous). Use {@link SqliteStore.open},
   * which checks the options and retries while another process sets a new file up; subclasses
   * (the in-memory store) call it with `:memory:`, which no other connection can lock.
   */
  protected constructor(path: string, options: SqliteStoreOptions, description = `sqlite:${path}`) {
    const opened = openSqlite(path, options, description);
    super(opened.driver);
    this.path = path;
    this.db = opened.db;
    this.synchronous = opened.synchronous;
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
}

/** The connection to `path`, set up (WAL, synchronous, migrated) and its driver; a typed refusal otherwise, nothing changed. */
function openSqlite(path: string, options: SqliteStoreOptions, description: string): { db: Database.Database; synchronous: 'FULL' | 'NORMAL'; driver: SqliteDriver } {
  const db = openDatabase(path, options.busyTimeoutMs ?? 5000);
  try {
    // Before anything is changed, even the journal mode: another application's file, or a newer Spool's.
    if (refuseForeignDatabase(db, path)) refuseNewerSchema(db, path);
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
    const synchronous = db.pragma('synchronous', { simple: true }) === 1 ? 'NORMAL' : 'FULL';
    // Checkpoint the WAL every ~16 MB instead of every 4 MB (fewer checkpoint stalls on the commit
    // path), or every quarter of the free space when that is less; after a full disk, get it back (wal.ts).
    const wal = new WalGuard(db, path);
    wal.bound();
    db.pragma('foreign_keys = ON');
    const schemaVersion = migrate(db, path, (options.clock ?? systemClock).now());
    return { db, synchronous, driver: new SqliteDriver(db, path, description, schemaVersion, wal) };
  } catch (error) {
    db.close();
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
