/**
 * Raw SQL on the tables of the store a test opened, whichever store it is: the SQLite file (through
 * `store.db`, behind the asynchronous boundary too) or the PostgresStore's database (through its
 * pool). The two schemas have the same tables and columns (persistence/sql/migrations/postgres/0001),
 * so a test that must arrange a row the port cannot write, or check one the port cannot read,
 * writes its SQL once with `?` parameters; on Postgres they become `$n` (persistence/drivers/pg/sql.ts).
 */
import type Database from 'better-sqlite3';
import type { PostgresStore } from '../../persistence/drivers/pg/index.ts';
import { toPostgres } from '../../persistence/drivers/pg/sql.ts';
import { dumpDatabase, type Resources } from './resources.ts';
import { ON_POSTGRES, postgresAt } from './stores.ts';

/** What raw SQL runs on: a SQLite store or connection (`db`), or a PostgresStore (`pool`; typed as a SQLite store in the tests). */
type RawTarget = { readonly db: Database.Database } | { readonly pool: PostgresStore['pool'] };

function pgPool(store: RawTarget): PostgresStore['pool'] | null {
  return 'pool' in store ? store.pool : null;
}

/**
 * Raw access to the store at `path` without a store of the test's: a better-sqlite3 connection on
 * the file, or a PostgresStore on the database standing for it (its pool reads numbers as numbers).
 * Closed by `res.dispose()`.
 */
export async function rawAt(res: Resources, path: string, options: Database.Options = {}): Promise<RawTarget> {
  if (!ON_POSTGRES) return { db: res.raw(path, options) };
  return res.track(await postgresAt(path));
}

/** Every row `sql` returns. */
export async function rawAll<T = Record<string, unknown>>(store: RawTarget, sql: string, ...params: unknown[]): Promise<T[]> {
  const pool = pgPool(store);
  if (!pool) return (store as { db: Database.Database }).db.prepare(sql).all(...params) as T[];
  return (await pool.query(toPostgres(sql, 'test').text, params)).rows as T[];
}

/** The first row `sql` returns, or undefined. */
export async function rawGet<T = Record<string, unknown>>(store: RawTarget, sql: string, ...params: unknown[]): Promise<T | undefined> {
  return (await rawAll<T>(store, sql, ...params))[0];
}

/** Run a write; the number of rows it changed. */
export async function rawRun(store: RawTarget, sql: string, ...params: unknown[]): Promise<number> {
  const pool = pgPool(store);
  if (!pool) return (store as { db: Database.Database }).db.prepare(sql).run(...params).changes;
  return (await pool.query(toPostgres(sql, 'test').text, params)).rowCount ?? 0;
}

/**
 * Every row of every table, sorted, as text: compare before/after to prove nothing was written.
 * On SQLite, `sqlite_sequence` too (see dumpDatabase); Postgres's sequences are no table and are
 * left out (they move on an insert that rolls back, by design).
 */
export async function dumpRows(store: RawTarget): Promise<Record<string, string[]>> {
  const pool = pgPool(store);
  if (!pool) return dumpDatabase((store as { db: Database.Database }).db);
  const tables = await pool.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name",
  );
  const out: Record<string, string[]> = {};
  for (const { name } of tables.rows) {
    out[name] = (await pool.query(`SELECT * FROM "${name}"`)).rows.map((r: unknown) => JSON.stringify(r)).sort();
  }
  return out;
}
