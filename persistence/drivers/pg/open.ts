/**
 * Opening a Postgres database: refuse another application's tables and a newer Spool schema
 * (the same errors as SQLite: NotASpoolDatabaseError, SchemaTooNewError), then apply the numbered
 * migrations of persistence/sql/migrations/postgres in one transaction, under an advisory lock so
 * that processes opening a new database at once migrate it once.
 */
import type pg from 'pg';
import { type Migration, migrationsOf, NotASpoolDatabaseError, tooNew } from '../../sql/migrations.ts';

/** The Postgres migrations shipped with this code, in order. */
export function pgMigrations(): Migration[] {
  return migrationsOf('postgres');
}

/** The advisory lock key every Spool store takes while it migrates (any fixed number). */
const MIGRATION_LOCK = 7_270_516;

/** Tables, views and sequences of the current schema (where Spool's tables go). */
async function objectsOf(client: pg.PoolClient): Promise<{ type: string; name: string }[]> {
  const r = await client.query<{ type: string; name: string }>(`SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence'
      WHEN 'i' THEN 'index' ELSE 'object' END AS type, c.relname AS name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'S', 'p', 'm', 'f') ORDER BY c.relkind <> 'r', c.relname`);
  return r.rows;
}

/**
 * Refuse a schema holding tables without `spool_migrations`, or a Spool schema newer than this
 * code; then migrate. Returns the schema version. Nothing is changed when it refuses.
 */
export async function migrate(client: pg.PoolClient, where: string, now: number): Promise<number> {
  const migrations = pgMigrations();
  const latest = migrations.at(-1)?.version ?? 0;
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const objects = await objectsOf(client);
    if (objects.length > 0 && !objects.some((o) => o.type === 'table' && o.name === 'spool_migrations')) {
      const shown = objects.slice(0, 5).map((o) => o.name);
      const more = objects.length > shown.length ? `, ... ${objects.length - shown.length} more` : '';
      const kinds = [...new Set(objects.map((o) => `${o.type}s`))].join(', ');
      throw new NotASpoolDatabaseError(
        `${where} is not a Spool database: its schema already holds ${kinds} (${shown.join(', ')}${more}) and no Spool schema; nothing was changed. ` +
          'Point --db at a new database (or schema) or at a Spool database.',
        { database: where, objects: objects.slice(0, 20).map((o) => `${o.type} ${o.name}`), count: objects.length },
      );
    }
    await client.query('CREATE TABLE IF NOT EXISTS spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
    const current = (await client.query<{ v: number | null }>('SELECT max(version) AS v FROM spool_migrations')).rows[0]?.v ?? 0;
    if (current > latest) throw tooNew(where, current, latest);
    for (const m of migrations) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO spool_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, now]);
    }
    await client.query('COMMIT');
    return Math.max(current, latest);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
