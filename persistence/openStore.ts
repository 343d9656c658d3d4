/**
 * One way to open a store from what a user types as `--db` (or `SPOOL_DB`): a `postgres://` or
 * `postgresql://` URL opens a {@link PostgresStore}; anything else is a SQLite file path
 * (`:memory:` included), resolved against `cwd`. The CLI, `spool serve` and `spool test` open
 * their stores here.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { PostgresStore } from './postgres/PostgresStore.ts';
import { SqliteStore } from './sqlite/SqliteStore.ts';

/** A store opened from a `--db` string. */
export type OpenedStore = SqliteStore | PostgresStore;

/** Options of {@link openStore}. */
export interface OpenStoreOptions {
  /** What a relative file path is resolved against. Default: the process's directory. */
  cwd?: string;
  /** SQLite only: `FULL` (default) or `NORMAL` (Postgres: set `synchronous_commit` on the server or the role). */
  synchronous?: 'FULL' | 'NORMAL';
  /** Postgres only: connections in the pool. Default 10. */
  poolSize?: number;
  /** Postgres only: the clock leases are judged by (`PostgresStore` option; SQLite always judges by the caller's). Default: the database's. */
  leaseClock?: 'database' | 'caller';
}

/** Whether `db` names a Postgres database (a `postgres://` or `postgresql://` URL). */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//i.test(db);
}

/** Whether the database `db` names already exists (a Postgres URL: assumed, the server says at open). */
export function storeExists(db: string, cwd = process.cwd()): boolean {
  return isPostgresUrl(db) || db === ':memory:' || existsSync(resolve(cwd, db));
}

/** Open (creating and migrating as needed) the store `db` names. */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<OpenedStore> {
  if (isPostgresUrl(db)) {
    const { poolSize, leaseClock } = options;
    return PostgresStore.open(db, { ...(poolSize !== undefined ? { poolSize } : {}), ...(leaseClock ? { leaseClock } : {}) });
  }
  const path = db === ':memory:' ? db : resolve(options.cwd ?? process.cwd(), db);
  return SqliteStore.open(path, options.synchronous ? { synchronous: options.synchronous } : {});
}
