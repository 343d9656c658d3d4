/**
 * The crash harness on Postgres (`--db postgres://…`): restarting the server mid-run, probing it, and
 * copying it for the checks. Its checks (invariants.ts, the settle probe) read a SQLite file
 * with synchronous SQL, so at the end of a run on Postgres every Spool table is copied, row for
 * row and column for column, into a fresh SQLite store file (the same tables: the Postgres schema
 * mirrors SQLite's), and the same checks run on the copy. One set of invariants for both stores.
 */
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import { PG_BIN } from '../helpers/postgres.ts';
import { CHANNELS } from '../../persistence/drivers/pg/changes.ts';
import { isRetryableFault, pause } from '../../src/runtime/backoff.ts';

/** Spool's tables, parents before children. */
const TABLES = ['jobs', 'inbox', 'timers', 'notes', 'assets', 'schedules', 'schedule_occurrences', 'event_keys', 'transitions', 'effects', 'effect_attempts'] as const;

/** BIGINT and NUMERIC as numbers (every stored number is a safe integer or a float). */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) => (oid === 20 || oid === 1700 ? (text: string) => Number(text) : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
};

/** Copy every Spool table of the Postgres database `url` into a new SQLite store file at `path`. */
export async function copyPostgresToSqlite(url: string, path: string): Promise<void> {
  await (await SqliteStore.open(path)).close();
  const client = new pg.Client({ connectionString: url, types: TYPES });
  await client.connect();
  const db = new Database(path);
  try {
    db.pragma('foreign_keys = OFF');
    // One snapshot of the whole database, so the copy is as consistent as a SQLite read.
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    for (const table of TABLES) {
      const target = new Set((db.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(table) as string[]).concat(table === 'effects' ? ['rowid'] : []));
      const rows = (await client.query(`SELECT * FROM ${table}`)).rows as Record<string, unknown>[];
      if (rows.length === 0) continue;
      const columns = Object.keys(rows[0]!).filter((c) => target.has(c));
      const insert = db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`);
      db.transaction(() => {
        for (const row of rows) insert.run(...columns.map((c) => row[c] ?? null));
      })();
    }
    await client.query('COMMIT');
  } finally {
    db.close();
    await client.end();
  }
}

/**
 * Restart the server behind `url` (every connection dropped): `pg_ctl restart -m fast` on its
 * data directory (asked of the server), as the `postgres` user when this process is root. For the
 * throwaway clusters of test/helpers/postgres.ts; pg_ctl keeps the options the server was started with.
 */
export async function restartPostgres(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const dir = (await client.query<{ data_directory: string }>('SHOW data_directory')).rows[0]!.data_directory;
  await client.end();
  const pgCtl = join(PG_BIN, 'pg_ctl');
  const args = ['-D', dir, '-m', 'fast', '-w', '-l', join(dir, '..', 'server.log'), 'restart'];
  const [cmd, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', pgCtl, ...args]] : [pgCtl, args];
  await promisify(execFile)(cmd, argv);
}

/**
 * The harness's probe of a Postgres database during the final phase: the same two queries as on
 * SQLite (harness.ts), run once at start and again after every commit any store makes (each write
 * transaction sends NOTIFY on the stores' channel, changes.ts), on one connection; `latest` is the
 * last answer, read synchronously by the settle predicate, and `onRead` tells when a new one lands.
 */
export async function watchPostgres<T>(url: string, read: (query: (sql: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<{ latest: () => T | undefined; onRead: (listener: () => void) => () => void; close: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: url, types: TYPES });
  await client.connect();
  client.on('error', () => undefined);
  const listeners = new Set<() => void>();
  let latest: T | undefined;
  let reading: Promise<void> | undefined;
  let again = false;
  const query = async (sql: string) => (await client.query(sql)).rows as Record<string, unknown>[];
  // One read at a time; commits that land during a read cost one more read, not one each.
  const refresh = (): void => {
    if (reading) {
      again = true;
      return;
    }
    reading = (async () => {
      do {
        again = false;
        latest = await read(query).catch(() => latest);
        for (const listener of listeners) listener();
      } while (again);
      reading = undefined;
    })();
  };
  client.on('notification', refresh);
  await client.query(`LISTEN ${CHANNELS.work}; LISTEN ${CHANNELS.changed}`);
  refresh();
  return {
    latest: () => latest,
    onRead: (listener) => (listeners.add(listener), () => void listeners.delete(listener)),
    close: async () => {
      client.removeListener('notification', refresh);
      await reading;
      await client.end().catch(() => undefined);
    },
  };
}

/**
 * What a careful process does with a retryable fault (the database restarting under it, a
 * commit whose outcome could not be read back): the same call again (a command with the same
 * job and event ids, so it lands once), a few times, backing off; then the error stands. The
 * client child uses it for opening and its commands (the worker child opens with `rideOutFaults`,
 * as `spool worker` does, for as long as the fault lasts).
 */
export async function ridingOutFaults<T>(fn: () => Promise<T>, tries = 20): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await fn();
    } catch (error) {
      if (!isRetryableFault(error) || attempt >= tries) throw error;
      await pause(Math.min(1000, 50 * attempt));
    }
  }
}
