/**
 * One way to open a store from what a user types as `--db` (or `SPOOL_DB`): a `postgres://` or
 * `postgresql://` URL opens a {@link PostgresStore}; anything else is a SQLite file path
 * (`:memory:` included), resolved against `cwd`. The CLI, `spool serve` and `spool test` open
 * their stores here.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { SqlStore } from './sql/SqlStore.ts';

/** A store opened from a `--db` string (narrow it with `instanceof` for a driver's own fields). */
export type OpenedStore = SqlStore;

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

/**
 * The drivers, first match wins: each is imported only when a `--db` string names it (the
 * `spool/postgres` entry never loads better-sqlite3). A new driver is one line here.
 */
const DRIVERS: { claims: (db: string) => boolean; open: (db: string, options: OpenStoreOptions) => Promise<OpenedStore> }[] = [
  { claims: isPostgresUrl, open: async (db, o) => (await import('./drivers/pg/opener.ts')).openPostgres(db, o) },
  { claims: () => true, open: async (db, o) => (await import('./drivers/better-sqlite3/opener.ts')).openSqlite(db, o) },
];

/** Open (creating and migrating as needed) the store `db` names. */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<OpenedStore> {
  return DRIVERS.find((d) => d.claims(db))!.open(db, options);
}
