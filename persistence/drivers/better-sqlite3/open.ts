import Database from 'better-sqlite3';
import { closeSync, openSync, readSync } from 'node:fs';
import { SpoolError, ValidationError } from '../../../src/base/errors.ts';
import { type Migration, migrationsOf, NotASpoolDatabaseError, tooNew } from '../../sql/migrations.ts';
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



/**
 * Refuse a non-empty database without `spool_migrations` (read-only: sqlite_master only); true when
 * the file already holds Spool's schema. A new or 0-byte file has an empty schema and is migrated
 * as usual. A file that is not SQLite at all was refused before ({@link refuseNonSqliteFile}).
 */
export function refuseForeignDatabase(db: Database.Database, path: string): boolean {
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
export function refuseNewerSchema(db: Database.Database, path: string): void {
  const current = (db.prepare('SELECT max(version) AS v FROM spool_migrations').get() as { v: number | null }).v ?? 0;
  const latest = migrationsOf('sqlite').at(-1)?.version ?? 0;
  if (current > latest) throw tooNew(path, current, latest);
}

/** Applies the migrations this file lacks in one IMMEDIATE transaction; the schema version it ends at (a newer one is refused). */
export function migrate(db: Database.Database, path: string, now: number): number {
  const migrations = migrationsOf('sqlite');
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

/** The SQLite migrations shipped with this code, in order. */
export function loadMigrations(): Migration[] {
  return migrationsOf('sqlite');
}
