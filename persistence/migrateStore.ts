/**
 * `spool migrate-store --from spool.db --to postgres://…`: copy a SQLite store into a Postgres
 * one, row for row (every job with its history, inbox, event keys, effects, attempts, timers,
 * notes and assets; then the schedules and their occurrences), so nothing is re-derived and every
 * revision, fence and event id stays as it was.
 *
 * - **Refuses while workers hold leases on the source** (`leaseHolders` through the port): a
 *   worker still committing there would write after its job was copied. Nothing is changed.
 * - **Resumable:** each job is copied in one Postgres transaction with all its rows, so a job is on
 *   the target whole or not at all; a job already there is the progress marker and is skipped.
 *   A run killed midway is run again with the same arguments.
 * - **Verified:** at the end every table's row count on the target is compared with the source's.
 *
 * Why rows and not the port's writes: the port writes through the engine's rules (a new job
 * starts at revision 1, a commit advances one revision), which cannot recreate a finished
 * history; the Postgres schema mirrors SQLite's (persistence/sql/migrations/postgres), so the copy is
 * column for column. The source is read as a SQLite file, so `--from` names a file.
 */
import type pg from 'pg';
import { PostgresStore } from './drivers/pg/PostgresStore.ts';
import { SqliteStore } from './drivers/better-sqlite3/SqliteStore.ts';
import { ValidationError } from '../src/base/errors.ts';

/** A job's rows, table by table, in the order they are inserted (parents first). */
const JOB_TABLES = [
  ['jobs', 'id = ?'],
  ['inbox', 'job_id = ?'],
  ['event_keys', 'job_id = ?'],
  ['transitions', 'job_id = ?'],
  ['timers', 'job_id = ?'],
  ['notes', 'job_id = ?'],
  ['assets', 'job_id = ?'],
  ['effects', 'job_id = ?'],
  ['effect_attempts', 'effect_id IN (SELECT id FROM effects WHERE job_id = ?)'],
] as const;
/** Rows that belong to no job, copied once after the jobs (a row already there is kept). */
const SHARED_TABLES = ['schedules', 'schedule_occurrences'] as const;
/** Identity columns: inserted with their values, then the generators moved past them. */
const IDENTITY: Record<string, string> = { inbox: 'seq', notes: 'id', effects: 'rowid' };

/** Progress of a copy, after each job copied or skipped. */
export interface MigrateProgress {
  total: number;
  copied: number;
  skipped: number;
}

/** What a finished copy reports. */
export interface MigrateReport extends MigrateProgress {
  from: string;
  to: string;
  /** Rows per table on the source and on the target after the copy. */
  counts: Record<string, { source: number; target: number }>;
  /** Every table's counts agree. */
  verified: boolean;
}

/** Options of {@link migrateStore}. */
export interface MigrateOptions {
  /** The source SQLite file. */
  from: string;
  /** The target `postgres://` URL. */
  to: string;
  /** Now, on the source's clock, for the lease check. Default: `Date.now()`. */
  now?: number;
  onProgress?: (progress: MigrateProgress) => void;
}

/** Copy the SQLite store `from` into the Postgres database `to` (see the file's comment). */
export async function migrateStore(options: MigrateOptions): Promise<MigrateReport> {
  const source = await SqliteStore.open(options.from);
  try {
    const holders = await source.leaseHolders(options.now ?? Date.now());
    if (holders.length > 0) {
      throw new ValidationError(`Workers hold leases on ${options.from} (${holders.slice(0, 5).join(', ')}${holders.length > 5 ? ', …' : ''}): stop them (and let their leases end) before migrating. Nothing was copied.`, { holders });
    }
    const target = await PostgresStore.open(options.to, { poolSize: 1 });
    try {
      const client = await target.pool.connect();
      try {
        return await copyAll(source, client, options);
      } finally {
        client.release();
      }
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

async function copyAll(source: SqliteStore, client: pg.PoolClient, options: MigrateOptions): Promise<MigrateReport> {
  const columns = await targetColumns(client);
  const ids = source.db.prepare('SELECT id FROM jobs ORDER BY id').pluck().all() as string[];
  const present = new Set((await client.query<{ id: string }>('SELECT id FROM jobs')).rows.map((r) => r.id));
  const progress: MigrateProgress = { total: ids.length, copied: 0, skipped: 0 };
  // An effect's rowid is its insertion order (the due queue's tie-break): copied too.
  const reads = JOB_TABLES.map(([table, where]) => [table, source.db.prepare(`SELECT *${table === 'effects' ? ', rowid' : ''} FROM ${table} WHERE ${where}`)] as const);
  for (const id of ids) {
    if (present.has(id)) progress.skipped += 1;
    else {
      await client.query('BEGIN');
      try {
        for (const [table, read] of reads) await insertRows(client, table, columns, read.all(id) as Record<string, unknown>[]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
      progress.copied += 1;
    }
    options.onProgress?.({ ...progress });
  }
  for (const table of SHARED_TABLES) await insertRows(client, table, columns, source.db.prepare(`SELECT * FROM ${table}`).all() as Record<string, unknown>[], true);
  // The generators continue after the copied values.
  await client.query(`SELECT setval('transitions_seq', greatest((SELECT max(seq) FROM transitions), 1))`);
  for (const [table, column] of Object.entries(IDENTITY)) {
    await client.query(`SELECT setval(pg_get_serial_sequence('${table}', '${column}'), greatest((SELECT max(${column}) FROM ${table}), 1))`);
  }
  const counts: MigrateReport['counts'] = {};
  for (const table of [...JOB_TABLES.map(([t]) => t), ...SHARED_TABLES]) {
    const sourceCount = source.db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
    const targetCount = Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0]!['n']);
    counts[table] = { source: sourceCount, target: targetCount };
  }
  const verified = Object.values(counts).every((c) => c.source === c.target);
  return { from: options.from, to: options.to, ...progress, counts, verified };
}

/** Each Spool table's columns on the target. */
async function targetColumns(client: pg.PoolClient): Promise<Map<string, Set<string>>> {
  const rows = (await client.query<{ table_name: string; column_name: string }>('SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()')).rows;
  const out = new Map<string, Set<string>>();
  for (const r of rows) out.set(r.table_name, (out.get(r.table_name) ?? new Set()).add(r.column_name));
  return out;
}

/** Multi-row INSERTs of `rows` (the columns both stores have; under Postgres's 65,535 parameters each); `keep`: a row already there stays. */
async function insertRows(client: pg.PoolClient, table: string, columns: Map<string, Set<string>>, rows: Record<string, unknown>[], keep = false): Promise<void> {
  if (rows.length === 0) return;
  const have = columns.get(table) ?? new Set<string>();
  const names = Object.keys(rows[0]!).filter((c) => have.has(c));
  const perInsert = Math.floor(60_000 / names.length);
  const overriding = table in IDENTITY ? ' OVERRIDING SYSTEM VALUE' : '';
  for (let i = 0; i < rows.length; i += perInsert) {
    const values: unknown[] = [];
    const tuples = rows.slice(i, i + perInsert).map((row) => `(${names.map((c) => (values.push(row[c] ?? null), `$${values.length}`)).join(', ')})`);
    await client.query(`INSERT INTO ${table} (${names.join(', ')})${overriding} VALUES ${tuples.join(', ')}${keep ? ' ON CONFLICT DO NOTHING' : ''}`, values);
  }
}
