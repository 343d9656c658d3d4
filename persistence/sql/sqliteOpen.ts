/**
 * What every SQLite driver does when it opens a database, over the few calls it needs of a
 * connection ({@link SqliteConnection}): refuse another application's schema or a newer Spool's,
 * then apply the migrations the file lacks. better-sqlite3 (persistence/drivers/better-sqlite3/open.ts)
 * and sqlite-wasm (persistence/drivers/sqlite-wasm) open through these.
 */
import { migrationsOf, NotASpoolDatabaseError, tooNew } from './migrations.ts';

/** A SQLite connection, as the open sequence uses it. */
export interface SqliteConnection {
  /** Every row of `sql` (none for a statement that returns no data), its `?` parameters bound to `args`. */
  rows(sql: string, args?: readonly unknown[]): Record<string, unknown>[];
  /** Run `sql` (one or more statements, no result). */
  exec(sql: string): void;
  /** Whether a transaction is open. */
  inTransaction(): boolean;
}

/**
 * Refuse a non-empty database without `spool_migrations` (read-only: sqlite_master only); true when
 * the file already holds Spool's schema. A new or 0-byte file has an empty schema and is migrated
 * as usual.
 */
export function refuseForeignDatabase(db: SqliteConnection, path: string): boolean {
  const objects = db.rows("SELECT type, name FROM sqlite_master ORDER BY type <> 'table', type, name") as Array<{ type: string; name: string }>;
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

function currentVersion(db: SqliteConnection): number {
  return (db.rows('SELECT max(version) AS v FROM spool_migrations')[0]?.['v'] as number | null | undefined) ?? 0;
}

/** A Spool schema newer than this code is refused (the file holds `spool_migrations`). */
export function refuseNewerSchema(db: SqliteConnection, path: string): void {
  const current = currentVersion(db);
  const latest = migrationsOf('sqlite').at(-1)?.version ?? 0;
  if (current > latest) throw tooNew(path, current, latest);
}

/** Applies the migrations this file lacks in one IMMEDIATE transaction; the schema version it ends at (a newer one is refused). */
export function migrate(db: SqliteConnection, path: string, now: number): number {
  const migrations = migrationsOf('sqlite');
  const latest = migrations.at(-1)?.version ?? 0;
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec('CREATE TABLE IF NOT EXISTS spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    const current = currentVersion(db);
    if (current > latest) throw tooNew(path, current, latest);
    for (const m of migrations) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      db.rows('INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)', [m.version, m.name, now]);
    }
    db.exec('COMMIT');
    return Math.max(current, latest);
  } catch (error) {
    if (db.inTransaction()) db.exec('ROLLBACK');
    throw error;
  }
}
