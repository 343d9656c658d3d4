import Database from 'better-sqlite3';
import { performance } from 'node:perf_hooks';
import { Samples } from './stats.ts';
import { freshDbPath } from './tempDb.ts';
import { persistedSnapshotTemplate, progressEvent } from './workload.ts';

export type Synchronous = 'FULL' | 'NORMAL';

/** The settings every section measures, in this order. */
export const SETTINGS: readonly Synchronous[] = ['FULL', 'NORMAL'];

export interface RunOptions {
  synchronous: Synchronous;
  /** Timed part of the run, in ms (after warm-up). */
  durationMs: number;
  /** Commits done on the fresh database before timing starts. */
  warmupOps: number;
}

export interface RunResult {
  ops: number;
  seconds: number;
  perSec: number;
  latencies: Samples;
}

/**
 * The raw SQLite limit: better-sqlite3 directly, no Spool. Each step is one `BEGIN IMMEDIATE`
 * transaction holding a versioned `UPDATE jobs … WHERE id = ? AND revision = ?` of a snapshot
 * the size of Spool's, plus one transition-log `INSERT`. WAL, the given `synchronous`, the same
 * busy timeout Spool uses, fresh database file in os.tmpdir().
 */
export function runRaw(options: RunOptions): RunResult {
  const tmp = freshDbPath(`raw-${options.synchronous.toLowerCase()}`);
  const db = new Database(tmp.path, { timeout: 5000 });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous}`);
    db.exec(`
      CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
      CREATE TABLE transitions (
        job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
        at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)
      ) STRICT, WITHOUT ROWID;`);
    const template = persistedSnapshotTemplate();
    const snapshotOf = (i: number) => JSON.stringify({ ...template, context: { ...template.context, progress: i % 101 } });
    const jobId = 'raw-bench-job';
    db.prepare('INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)').run(jobId, snapshotOf(0), Date.now());
    const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
    const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
    const step = db.transaction((revision: number, i: number) => {
      const at = Date.now();
      if (update.run(snapshotOf(i), at, jobId, revision).changes !== 1) throw new Error(`raw bench: revision conflict at ${revision}`);
      insert.run(jobId, revision + 1, 'PROGRESS', JSON.stringify(progressEvent(i)), at);
    });

    let revision = 1;
    let i = 0;
    for (; i < options.warmupOps; i += 1) step.immediate(revision++, i);

    const latencies = new Samples();
    const start = performance.now();
    const end = start + options.durationMs;
    let ops = 0;
    let now = start;
    while (now < end) {
      step.immediate(revision++, i++);
      const after = performance.now();
      latencies.push(after - now);
      now = after;
      ops += 1;
    }
    const seconds = (now - start) / 1000;
    const stored = db.prepare('SELECT revision FROM jobs WHERE id = ?').pluck().get(jobId) as number;
    if (stored !== revision) throw new Error(`raw bench: expected revision ${revision}, found ${stored}`);
    return { ops, seconds, perSec: ops / seconds, latencies };
  } finally {
    db.close();
    tmp.dispose();
  }
}
