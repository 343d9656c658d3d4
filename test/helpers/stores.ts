/**
 * The one place tests choose the store under test, by `SPOOL_TEST_STORE`:
 * - unset: the SQLite store (the `sync` project);
 * - `async`: the SQLite store behind an asynchronous boundary (asyncStore.ts; the `async-store` project);
 * - `postgres`: a PostgresStore, each on a database of its own on the run's server
 *   (postgres.ts; the `postgres` project);
 * - `sqlite-wasm`: the contract suites' stores are sqlite-wasm stores in memory (the `sqlite-wasm` project). A test that reads or edits rows the port does not
 *   reach does it through rawSql.ts, on either store, never through `store.db`.
 */
import { PostgresStore } from '../../persistence/drivers/pg/index.ts';
import type { SqliteStore, SqliteStoreOptions } from '../../persistence/drivers/better-sqlite3/index.ts';
import { openSqliteWasmStore, type SqliteWasmStore } from '../../persistence/drivers/sqlite-wasm/index.ts';
import { freshDatabase } from './postgres.ts';

/** True when this run's stores are PostgresStores (`SPOOL_TEST_STORE=postgres`). */
export const ON_POSTGRES = process.env['SPOOL_TEST_STORE'] === 'postgres';

/** True when this run's contract suites run on sqlite-wasm stores (`SPOOL_TEST_STORE=sqlite-wasm`). */
export const ON_SQLITE_WASM = process.env['SPOOL_TEST_STORE'] === 'sqlite-wasm';

/** The store a contract suite runs on in this run, for its name. */
export const CONTRACT_STORE = ON_POSTGRES ? 'PostgresStore' : ON_SQLITE_WASM ? 'SqliteWasmStore (memory)' : 'SqliteStore (file)';

/** The database made for each SQLite path this process named: a test that reopens a path reopens its database. */
const databases = new Map<string, { url: string; drop: () => Promise<void> }>();

/** The Postgres database standing for SQLite file `path` (made on first use). */
export async function databaseFor(path: string): Promise<{ url: string; drop: () => Promise<void> }> {
  let db = databases.get(path);
  if (!db) {
    db = await freshDatabase();
    databases.set(path, db);
  }
  return db;
}

/** Drop the database standing for `path`, if one was made (its stores closed first). */
export async function dropDatabaseFor(path: string): Promise<void> {
  const db = databases.get(path);
  databases.delete(path);
  await db?.drop();
}

/** What `--db` names for the store a test opened at SQLite path `path`: the file, or (postgres project) its database's URL. */
export async function dbArgFor(path: string): Promise<string> {
  return ON_POSTGRES ? (await databaseFor(path)).url : path;
}

/**
 * A PostgresStore on the database standing for `path`, with the SQLite options that have a meaning
 * there (the clock). A test that injects a clock expires leases by moving it, which the server's
 * clock does not follow: its store judges leases by the caller's clock (`leaseClock: 'caller'`),
 * as SQLite does. Without one, by the server's (production's path).
 */
export async function postgresAt(path: string, options: SqliteStoreOptions = {}): Promise<PostgresStore> {
  const { url } = await databaseFor(path);
  return PostgresStore.open(url, options.clock ? { clock: options.clock, leaseClock: 'caller' } : {});
}

/**
 * With `SPOOL_TEST_STORE=postgres`, the store a test opens at a SQLite path is a PostgresStore
 * (typed as the SQLite store the test expects: such a test uses the port, and rawSql.ts for raw rows).
 */
export async function openUnderTest(path: string, options: SqliteStoreOptions, sqlite: () => Promise<SqliteStore>): Promise<SqliteStore> {
  if (!ON_POSTGRES) return sqlite();
  return (await postgresAt(path, options)) as unknown as SqliteStore;
}

/**
 * A contract suite's factory on Postgres: a fresh database; disposing checks the suite closed the
 * store, then drops it. The suites pass every time themselves (expiring a lease by naming a later
 * `now`), so leases are judged by the caller's clock; test/leaseClock.pg.test.ts checks the server's.
 */
export async function postgresContractStore(): Promise<{ store: PostgresStore; dispose: () => Promise<void> }> {
  const db = await freshDatabase();
  const store = await PostgresStore.open(db.url, { leaseClock: 'caller' });
  return {
    store,
    dispose: async () => {
      if (!store.pool.ended) throw new Error('the suite left the Postgres store open');
      await db.drop();
    },
  };
}

/** The sqlite-wasm module, initialised once per process (loaded only by the tests that use it). */
let sqliteWasm: Promise<import('@sqlite.org/sqlite-wasm').Sqlite3Static> | undefined;

/** A contract suite's factory on sqlite-wasm: a fresh in-memory store; disposing checks the suite closed it. */
export async function sqliteWasmContractStore(): Promise<{ store: SqliteWasmStore; dispose: () => Promise<void> }> {
  sqliteWasm ??= import('@sqlite.org/sqlite-wasm').then((m) => m.default());
  const store = await openSqliteWasmStore({ sqlite3: await sqliteWasm });
  return {
    store,
    dispose: async () => {
      if (store.db.isOpen()) throw new Error('the suite left the sqlite-wasm store open');
    },
  };
}
