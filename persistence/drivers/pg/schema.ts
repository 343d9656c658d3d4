/** The Postgres schema as a database holds it (persistence/sql/schema.ts): its tables' columns, and DDL made from the catalogs. */
import pg from 'pg';
import type { SchemaShape } from '../../sql/schema.ts';
import { migrate } from './open.ts';
import { scratchDatabase } from './scratch.ts';

/** The schema of the connection's current schema. */
export async function postgresSchema(client: pg.ClientBase): Promise<SchemaShape> {
  const q = async <R extends pg.QueryResultRow>(text: string) => (await client.query<R>(text)).rows;
  const version = (await q<{ v: number | null }>('SELECT max(version) AS v FROM spool_migrations'))[0]?.v ?? 0;
  const columns = await q<{ table: string; name: string; type: string; not_null: boolean; def: string | null }>(`SELECT c.table_name AS table, c.column_name AS name, c.data_type AS type,
      c.is_nullable = 'NO' AS not_null, c.column_default AS def
    FROM information_schema.columns c JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position`);
  const constraints = await q<{ table: string; name: string; def: string }>(`SELECT r.relname AS table, k.conname AS name, pg_get_constraintdef(k.oid) AS def
    FROM pg_constraint k JOIN pg_class r ON r.oid = k.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
    WHERE n.nspname = current_schema() ORDER BY r.relname, k.contype, k.conname`);
  const others = await q<{ name: string; def: string }>(`SELECT indexname AS name, indexdef AS def FROM pg_indexes i
      WHERE schemaname = current_schema() AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)
    UNION ALL SELECT c.relname, 'CREATE SEQUENCE ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'S'
    UNION ALL SELECT c.relname, 'CREATE VIEW ' || c.relname || ' AS' || chr(10) || pg_get_viewdef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind = 'v'
    UNION ALL SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND NOT t.tgisinternal
    UNION ALL SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()
    ORDER BY 1`);
  const names = [...new Set(columns.map((c) => c.table))];
  const tables = names.map((name) => ({
    name,
    columns: columns.filter((c) => c.table === name).map((c) => ({ name: c.name, type: c.type, notNull: c.not_null })),
  }));
  const tableDdl = tables.map(({ name }) => {
    const lines = [
      ...columns.filter((c) => c.table === name).map((c) => `  ${c.name} ${c.type}${c.not_null ? ' NOT NULL' : ''}${c.def === null ? '' : ` DEFAULT ${c.def}`}`),
      ...constraints.filter((k) => k.table === name).map((k) => `  CONSTRAINT ${k.name} ${k.def}`),
    ];
    return `CREATE TABLE ${name} (\n${lines.join(',\n')}\n)`;
  });
  return { dialect: 'postgres', version, tables, ddl: [...tableDdl, ...others.map((o) => o.def.trim().replace(/;$/, ''))] };
}

/** The schema the shipped migrations produce, in a scratch database made on `url`'s server (and dropped). */
export async function migratedPostgresSchema(url: string): Promise<SchemaShape> {
  const scratch = await scratchDatabase(url, 'spool_schema');
  try {
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    try {
      await migrate(client as unknown as pg.PoolClient, 'schema dump', 0);
      return await postgresSchema(client);
    } finally {
      await client.end();
    }
  } finally {
    await scratch.drop();
  }
}
