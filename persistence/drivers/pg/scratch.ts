/**
 * A scratch database: a new, empty database on the server a URL names, and a way to drop it.
 * `spool test --db postgres://…` runs each path in one (as each SQLite run gets a fresh file);
 * tests make theirs the same way (test/helpers/postgres.ts). Needs the CREATEDB privilege.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A scratch database's URL, and `drop()`, which removes it (closing any connection left on it). */
export interface ScratchDatabase {
  url: string;
  drop: () => Promise<void>;
}

/** Make database `<prefix>_<random>` on `url`'s server (connecting to `url` to create it). */
export async function scratchDatabase(url: string, prefix = 'spool_scratch'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await onServer(url, `CREATE DATABASE ${name}`);
  const at = new URL(url);
  at.pathname = `/${name}`;
  return { url: at.toString(), drop: () => onServer(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

async function onServer(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
