/**
 * The afternoon baseline: what a user writes in an afternoon to persist XState jobs in SQLite (or
 * Postgres), run beside each case of the jobs section (bench/jobsSection.ts).
 *
 * Per job: `createActor` of the very machine Spool runs (the same activity chain, its
 * `fromPromise` steps resolving on a microtask as XState runs them), subscribed before `start`;
 * at every snapshot change `actor.getPersistedSnapshot()` becomes JSON and is written, one
 * autocommit statement each: the first (the initial snapshot) an INSERT, then
 * `UPDATE jobs SET snapshot = ?, version = version + 1 WHERE id = ? AND version = ?`. The job is
 * done when its snapshot's status is `done` (and, on Postgres, its last write has returned). N
 * async loops each drive one job at a time to its end, as the Spool case's N loops do.
 * SQLite: better-sqlite3, WAL, the case's `synchronous`, busy_timeout 5000, each write synchronous
 * in the subscriber. Postgres: a node-postgres pool of min(N, 10) connections (Spool's pool size),
 * each job's writes chained one after another (the subscriber cannot await them).
 *
 * It has no history rows, no event ids, no recovery of a running activity after a crash, no
 * leases: it is the floor a runtime's guarantees are paid for above.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createActor, type AnyMachineSnapshot } from 'xstate';
import { measured, type JobShape, type JobsRunResult } from './jobsRun.ts';
import type { Synchronous } from './rawRun.ts';
import { timedLoops } from './stats.ts';
import { freshBenchDb, type BenchDb, type StoreKind } from './benchDb.ts';

const SCHEMA = 'CREATE TABLE jobs (id TEXT PRIMARY KEY, version INTEGER NOT NULL, snapshot TEXT NOT NULL)';

/** The baseline's two writes: `version` 0 inserts, any other updates from that version; false = version conflict. */
interface BaselineWrites {
  write(id: string, version: number, text: string): boolean | Promise<boolean>;
  close(): Promise<void>;
}

function sqliteWrites(db: BenchDb, synchronous: Synchronous): BaselineWrites {
  const conn = new Database(db.target, { timeout: 5000 });
  conn.pragma('journal_mode = WAL');
  conn.pragma(`synchronous = ${synchronous}`);
  conn.exec(SCHEMA);
  const insert = conn.prepare('INSERT INTO jobs (id, version, snapshot) VALUES (?, 1, ?)');
  const update = conn.prepare('UPDATE jobs SET snapshot = ?, version = version + 1 WHERE id = ? AND version = ?');
  return {
    write: (id, version, text) => (version === 0 ? insert.run(id, text).changes === 1 : update.run(text, id, version).changes === 1),
    close: async () => void conn.close(),
  };
}

async function postgresWrites(db: BenchDb, loops: number): Promise<BaselineWrites> {
  const pool = new pg.Pool({ connectionString: db.target, max: Math.min(loops, 10) });
  // pool.end() resolves before its connections have closed; dropping the database then ends them with an error.
  pool.on('error', () => undefined);
  await pool.query(SCHEMA);
  return {
    write: async (id, version, text) =>
      (version === 0
        ? await pool.query('INSERT INTO jobs (id, version, snapshot) VALUES ($1, 1, $2)', [id, text])
        : await pool.query('UPDATE jobs SET snapshot = $1, version = version + 1 WHERE id = $2 AND version = $3', [text, id, version])
      ).rowCount === 1,
    close: () => pool.end(),
  };
}

/** `loops` concurrent loops of whole jobs for `durationMs`, after a warm-up of a few jobs per loop. */
export async function runBaseline(options: { synchronous: Synchronous; shape: JobShape; loops: number; durationMs: number; store?: StoreKind }): Promise<JobsRunResult> {
  const db = await freshBenchDb(options.store ?? 'sqlite', `baseline-${options.shape.name}-${options.synchronous.toLowerCase()}`);
  const writes = db.kind === 'sqlite' ? sqliteWrites(db, options.synchronous) : await postgresWrites(db, options.loops);
  try {
    const machine = options.shape.def.machine;
    let n = 0;
    const job = () =>
      new Promise<number>((resolve, reject) => {
        const t0 = performance.now();
        const id = randomUUID();
        let version = 0;
        let last: AnyMachineSnapshot | undefined;
        // Postgres: the job's writes so far, one after another.
        let tail: Promise<void> = Promise.resolve();
        const conflict = () => new Error(`baseline: version conflict on ${id}`);
        const finish = () => {
          if (version !== options.shape.steps + 1) reject(new Error(`baseline: ${id} wrote ${version} snapshots, expected ${options.shape.steps + 1}`));
          else if (db.kind === 'sqlite') resolve(performance.now() - t0);
          else tail.then(() => resolve(performance.now() - t0), reject);
        };
        const actor = createActor(machine, { input: { n: n++ } });
        actor.subscribe({
          next: (snapshot: AnyMachineSnapshot) => {
            if (snapshot === last) return;
            last = snapshot;
            try {
              const text = JSON.stringify(actor.getPersistedSnapshot());
              const v = version;
              if (db.kind === 'sqlite') {
                if (!(writes.write(id, v, text) as boolean)) throw conflict();
              } else {
                tail = tail.then(async () => {
                  if (!(await writes.write(id, v, text))) throw conflict();
                });
              }
              version += 1;
            } catch (error) {
              reject(error as Error);
              return;
            }
            if (snapshot.status === 'done') finish();
          },
          error: (error: unknown) => reject(error as Error),
        });
        actor.start();
      });
    await Promise.all(Array.from({ length: options.loops }, async () => {
      for (let k = 0; k < Math.max(3, Math.ceil(50 / options.loops)); k += 1) await job();
    }));
    return await measured(db, () => timedLoops(options.loops, options.durationMs, job));
  } finally {
    await writes.close();
    await db.dispose();
  }
}
