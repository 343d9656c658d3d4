/**
 * The database one bench run writes to, on either store: a fresh SQLite file (bench/tempDb.ts) or
 * a fresh database on the bench's Postgres server (bench/pgServer.ts). Every Spool-side runner
 * opens its store here, so "which store" is one parameter, not a copy of the runner.
 *
 * `meter()` measures what a run cost the database between its start and `stop()`:
 *   SQLite    write transactions committed, from the wal-index change counter (bench/walCommits.ts);
 *             no server (SQLite's work is in this process's CPU)
 *   Postgres  write transactions = COMMIT records in the WAL between the two positions
 *             (`pg_get_wal_stats`, the pg_walinspect extension, installed in the run's database; a
 *             read-only transaction writes none, a savepoint none of its own), WAL bytes
 *             (`pg_current_wal_lsn()`), and the server's CPU: the postmaster and every process it
 *             forked, from /proc (bench/pgServer.ts); all three are cluster-wide, so they count only
 *             the bench on a server nothing else uses.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import type { Synchronous } from './rawRun.ts';
import { freshPgDatabase, serverCpuMeter } from './pgServer.ts';
import { freshDbPath } from './tempDb.ts';
import { commitsBetween, walCommitCounter } from './walCommits.ts';

/** The two stores every section can run on (`npm run bench -- --store sqlite|postgres|both`). */
export const STORE_KINDS = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** What a run cost the database (null: this store cannot say). */
export interface Metered {
  /** Write transactions committed. */
  commits: number | null;
  /** Postgres: WAL bytes written. */
  walBytes: number | null;
  /** Postgres: the server processes' user + system CPU, µs. */
  serverCpuUs: number | null;
}

export interface BenchDb {
  kind: StoreKind;
  /** What a store opens: a file path or a postgres:// URL. */
  target: string;
  /** Spool's store on it: SQLite at `synchronous`; Postgres at the server's settings (synchronous is SQLite's only). */
  openStore(synchronous: Synchronous): Promise<SqliteStore | PostgresStore>;
  /** One value of a read-only query, `?` placeholders on both stores. */
  scalar(sql: string, ...params: unknown[]): Promise<unknown>;
  /** Start measuring (see the file's comment). */
  meter(): Promise<{ stop: () => Promise<Metered> }>;
  dispose(): Promise<void>;
}

/** A fresh database for one run. */
export async function freshBenchDb(kind: StoreKind, label: string): Promise<BenchDb> {
  return kind === 'sqlite' ? sqliteDb(label) : await postgresDb();
}

function sqliteDb(label: string): BenchDb {
  const tmp = freshDbPath(label);
  let reader: Database.Database | null = null;
  return {
    kind: 'sqlite',
    target: tmp.path,
    openStore: (synchronous) => SqliteStore.open(tmp.path, { synchronous }),
    scalar: async (sql, ...params) => {
      reader ??= new Database(tmp.path, { readonly: true, fileMustExist: true, timeout: 5000 });
      return reader.prepare(sql).pluck().get(...params);
    },
    meter: async () => {
      // Opened at the start, once the store has made the -shm file.
      const counter = walCommitCounter(tmp.path);
      const before = counter.read();
      return {
        stop: async () => {
          const commits = commitsBetween(before, counter.read());
          counter.close();
          return { commits, walBytes: null, serverCpuUs: null };
        },
      };
    },
    dispose: async () => {
      reader?.close();
      tmp.dispose();
    },
  };
}

async function postgresDb(): Promise<BenchDb> {
  const db = await freshPgDatabase();
  let client: pg.Client | null = null;
  const conn = async () => {
    if (!client) {
      client = new pg.Client({ connectionString: db.url });
      await client.connect();
    }
    return client;
  };
  const scalar = async (sql: string, ...params: unknown[]) => {
    let n = 0;
    const rows = (await (await conn()).query({ text: sql.replace(/\?/g, () => `$${++n}`), values: params, rowMode: 'array' })).rows as unknown[][];
    return rows[0]?.[0];
  };
  const lsn = async () => String((await (await conn()).query({ text: 'SELECT pg_current_wal_lsn()', rowMode: 'array' })).rows[0]![0]);
  // pg_walinspect reads only flushed WAL: an asynchronous commit (the notifications' transactions) may
  // leave the insert position ahead of it for up to the WAL writer's delay.
  const flushedTo = async (to: string) => {
    for (let i = 0; i < 200; i++) {
      const behind = (await (await conn()).query({ text: 'SELECT pg_current_wal_flush_lsn() < $1::pg_lsn', values: [to], rowMode: 'array' })).rows[0]![0];
      if (!behind) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  // Commits = COMMIT records in the WAL between two positions (pg_walinspect, PostgreSQL 15+): null when it cannot be installed.
  let walinspect: boolean | null = null;
  const installWalinspect = async () => (walinspect ??= await (await conn()).query('CREATE EXTENSION IF NOT EXISTS pg_walinspect').then(() => true, () => false));
  const commitsBetween = async (from: string, to: string): Promise<number | null> => {
    const c = await conn();
    if (!(await installWalinspect())) return null;
    if (from === to) return 0;
    const rows = (await c.query({ text: `SELECT count FROM pg_get_wal_stats($1, $2, true) WHERE "resource_manager/record_type" = 'Transaction/COMMIT'`, values: [from, to], rowMode: 'array' })).rows;
    return Number(rows[0]?.[0] ?? 0);
  };
  const bytesBetween = async (from: string, to: string) => Number((await (await conn()).query({ text: 'SELECT $2::pg_lsn - $1::pg_lsn', values: [from, to], rowMode: 'array' })).rows[0]![0]);
  return {
    kind: 'postgres',
    target: db.url,
    openStore: () => PostgresStore.open(db.url),
    scalar,
    meter: async () => {
      await installWalinspect(); // before the start, not in the measured part
      const cpu = await serverCpuMeter(db.url);
      const lsn0 = await lsn();
      return {
        stop: async () => {
          const serverCpuUs = cpu ? await cpu.stop() : null;
          const lsn1 = await lsn();
          await flushedTo(lsn1);
          return {
            commits: await commitsBetween(lsn0, lsn1),
            walBytes: await bytesBetween(lsn0, lsn1),
            serverCpuUs,
          };
        },
      };
    },
    dispose: async () => {
      await (client as pg.Client | null)?.end().catch(() => {});
      await db.dispose();
    },
  };
}
