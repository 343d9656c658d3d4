/** The SQLite schema as a database holds it (persistence/sql/schema.ts): its tables' columns, and its DDL as sqlite_master keeps it. */
import Database from 'better-sqlite3';
import type { SchemaShape } from '../../sql/schema.ts';
import { migrate } from './open.ts';

/** The schema of `db`. */
export function sqliteSchema(db: Database.Database): SchemaShape {
  const version = (db.prepare('SELECT max(version) AS v FROM spool_migrations').get() as { v: number | null }).v ?? 0;
  const objects = db.prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type <> 'table', name").all() as { type: string; name: string; sql: string }[];
  const tables = objects
    .filter((o) => o.type === 'table')
    .map((t) => ({
      name: t.name,
      columns: (db.pragma(`table_info(${JSON.stringify(t.name)})`) as { name: string; type: string; notnull: number; pk: number }[]).map((c) => ({
        name: c.name,
        type: c.type.toLowerCase(),
        notNull: c.notnull === 1 || c.pk > 0,
      })),
    }));
  return { dialect: 'sqlite', version, tables, ddl: objects.map((o) => o.sql) };
}

/** The schema the shipped migrations produce, on a new in-memory database. */
export function migratedSqliteSchema(): SchemaShape {
  const db = new Database(':memory:');
  try {
    migrate(db, ':memory:', 0);
    return sqliteSchema(db);
  } finally {
    db.close();
  }
}
