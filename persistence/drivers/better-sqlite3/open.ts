import Database from 'better-sqlite3';
import { closeSync, openSync, readSync } from 'node:fs';
import { SpoolError, ValidationError } from '../../../src/base/errors.ts';
import { type Migration, migrationsOf, NotASpoolDatabaseError } from '../../sql/migrations.ts';
import { migrate as migrateConnection, refuseForeignDatabase as refuseForeign, refuseNewerSchema as refuseNewer, type SqliteConnection } from '../../sql/sqliteOpen.ts';
import { storageFault } from './storageFault.ts';

/** The open sequence met another process's lock: `open` tries again (internal). */
export class OpenBusy extends Error {
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
export function checkOpenOptions(path: unknown, options: unknown): void {
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



/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Refuse a file that is not a SQLite database at all (a text file given as --db): its first bytes
 * are not SQLite's header. A missing or empty file is a new database. Reads 16 bytes, changes nothing.
 */
export function refuseNonSqliteFile(path: string): void {
  if (path === ':memory:' || path === '') return;
  let head: Buffer;
  try {
    const fd = openSync(path, 'r');
    try {
      head = Buffer.alloc(SQLITE_HEADER.length);
      head = head.subarray(0, readSync(fd, head, 0, head.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return; // missing, or not readable: opening it says why
  }
  if (head.length === 0 || head.equals(SQLITE_HEADER)) return;
  throw new NotASpoolDatabaseError(`${path} is not a SQLite database; nothing was changed. Point --db at a Spool database, or at a new file.`, { path, reason: 'not-sqlite' });
}

/** The connection, or the typed fault that refused it (a read-only directory, a file this process may not open, one that is not SQLite). */
export function openDatabase(path: string, timeout: number): Database.Database {
  refuseNonSqliteFile(path);
  try {
    return new Database(path, { timeout });
  } catch (error) {
    throw storageFault(error, { path, call: 'open' });
  }
}



/** better-sqlite3's connection as the open sequence uses it (persistence/sql/sqliteOpen.ts). */
export function connection(db: Database.Database): SqliteConnection {
  const rows = (sql: string, args: readonly unknown[] = []): Record<string, unknown>[] => {
    const stmt = db.prepare(sql);
    if (stmt.reader) return stmt.all(...args) as Record<string, unknown>[];
    stmt.run(...args);
    return [];
  };
  return { rows, exec: (sql) => void db.exec(sql), inTransaction: () => db.inTransaction };
}

/** Refuse another application's database (true: it holds Spool's schema): see persistence/sql/sqliteOpen.ts. */
export const refuseForeignDatabase = (db: Database.Database, path: string): boolean => refuseForeign(connection(db), path);
/** Refuse a newer Spool's schema. */
export const refuseNewerSchema = (db: Database.Database, path: string): void => refuseNewer(connection(db), path);
/** Apply the migrations the file lacks; the schema version it ends at. */
export const migrate = (db: Database.Database, path: string, now: number): number => migrateConnection(connection(db), path, now);

/** The SQLite migrations shipped with this code, in order. */
export function loadMigrations(): Migration[] {
  return migrationsOf('sqlite');
}
