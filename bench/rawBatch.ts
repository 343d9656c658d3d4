/**
 * Raw SQLite limits for the concurrent sections: better-sqlite3 directly, no Spool, the same
 * minimal writes per transition (a versioned UPDATE of the job's snapshot plus one transition-log
 * INSERT; a new job is a job INSERT plus its first log INSERT), batched `batch` to one
 * `BEGIN IMMEDIATE` transaction. WAL, the given `synchronous`, busy_timeout 5000, fresh file.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Synchronous } from './rawRun.ts';
import { Samples, timedSyncSteps } from './stats.ts';
import { walFrames } from './groupCommit.ts';
import { freshDbPath } from './tempDb.ts';

const SCHEMA = `
  CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
  CREATE TABLE transitions (
    job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
    at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)
  ) STRICT, WITHOUT ROWID;`;

function openRawDb(label: string, synchronous: Synchronous) {
  const tmp = freshDbPath(label);
  const db = new Database(tmp.path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec(SCHEMA);
  return { db, path: tmp.path, dispose: () => (db.close(), tmp.dispose()) };
}

export interface RawBatchResult {
  /** Transitions (one UPDATE + one INSERT each) per second. */
  perSec: number;
  ops: number;
  seconds: number;
  /** Per transaction: how long one batch took to commit (ms). */
  latencies: Samples;
  /** WAL frames (4 KiB pages) written per transition, measured after the timed part. */
  walFramesPerOp: number;
  /** This process's CPU time (user + system) per transition. */
  cpuUsPerOp: number;
}

/**
 * `jobs` jobs, transitions handed out round-robin, `batch` transitions per transaction: the
 * group-commit limit for "many jobs sending at once".
 */
export function runRawBatched(options: { synchronous: Synchronous; durationMs: number; jobs: number; batch: number; snapshot: (i: number) => string; warmupBatches?: number }): RawBatchResult {
  const { db, path, dispose } = openRawDb(`rawbatch-${options.synchronous.toLowerCase()}`, options.synchronous);
  try {
    const insertJob = db.prepare('INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)');
    const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
    const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
    const ids = Array.from({ length: options.jobs }, (_, i) => `raw-job-${i}`);
    const revisions = new Array<number>(options.jobs).fill(1);
    db.transaction(() => ids.forEach((id) => insertJob.run(id, options.snapshot(0), Date.now())))();
    let next = 0;
    let i = 0;
    const batch = db.transaction(() => {
      const at = Date.now();
      for (let k = 0; k < options.batch; k += 1) {
        const j = next;
        next = (next + 1) % options.jobs;
        const rev = revisions[j]!;
        if (update.run(options.snapshot(i), at, ids[j], rev).changes !== 1) throw new Error(`raw batch: revision conflict on ${ids[j]}`);
        insert.run(ids[j], rev + 1, 'PROGRESS', `{"type":"PROGRESS","percent":${i % 101}}`, at);
        revisions[j] = rev + 1;
        i += 1;
      }
    });
    for (let w = 0; w < (options.warmupBatches ?? 5); w += 1) batch.immediate();
    const { perSec, ops, seconds, latencies, cpuUsPerOp } = timedSyncSteps(options.durationMs, options.batch, () => batch.immediate());
    const wal = walFrames(db, path);
    wal.start();
    for (let w = 0; w < 10; w += 1) batch.immediate();
    return { perSec, ops, seconds, latencies, walFramesPerOp: wal.frames() / (10 * options.batch), cpuUsPerOp };
  } finally {
    dispose();
  }
}

export interface RawJobsResult {
  jobsPerSec: number;
  /** Transactions-worth of writes per second (1 + steps per job). */
  writesPerSec: number;
  jobs: number;
  seconds: number;
  /** Sequential: per operation (one transaction). Batched: per transaction of `batch` operations. */
  latencies: Samples;
  /** This process's CPU time (user + system) per job. */
  cpuUsPerJob: number;
}

/**
 * Whole jobs with `steps` events after their start: per job one job INSERT + log INSERT, then
 * `steps` × (versioned UPDATE + log INSERT). `batch` 1 = one transaction per operation, awaited
 * one after another (the sequential limit); `batch` > 1 = that many operations of up to `batch`
 * jobs in flight per transaction (the concurrent limit). Job ids are random UUIDs, as Spool's.
 */
export function runRawJobs(options: { synchronous: Synchronous; durationMs: number; steps: number; batch: number; snapshot: (i: number) => string }): RawJobsResult {
  // Job ids are random UUIDs like Spool's default; snapshots change at every step like Spool's.
  const { db, dispose } = openRawDb(`rawjobs-${options.synchronous.toLowerCase()}`, options.synchronous);
  try {
    const insertJob = db.prepare('INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)');
    const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
    const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
    let seq = 0;
    let finished = 0;
    // Random UUID job ids, as Spool's default newId: rows of new jobs land all over the B-trees, as Spool's do.
    // In-flight jobs: [id, revision] where revision = steps done + 1.
    const slots: { id: string; revision: number }[] = [];
    const newJob = () => {
      seq += 1;
      return { id: randomUUID(), revision: 0 };
    };
    for (let k = 0; k < options.batch; k += 1) slots.push(newJob());
    const stepOne = (k: number, at: number) => {
      const slot = slots[k]!;
      if (slot.revision === 0) {
        insertJob.run(slot.id, options.snapshot(seq), at);
        insert.run(slot.id, 1, 'xstate.init', '{}', at);
        slot.revision = 1;
      } else {
        if (update.run(options.snapshot(seq + slot.revision), at, slot.id, slot.revision).changes !== 1) throw new Error(`raw jobs: conflict on ${slot.id}`);
        slot.revision += 1;
        insert.run(slot.id, slot.revision, 'STEP', '{"type":"STEP"}', at);
      }
      if (slot.revision === options.steps + 1) {
        finished += 1;
        slots[k] = newJob();
      }
    };
    const tx = db.transaction(() => {
      const at = Date.now();
      for (let k = 0; k < slots.length; k += 1) stepOne(k, at);
    });
    for (let w = 0; w < 20; w += 1) tx.immediate();
    finished = 0;
    const latencies = new Samples();
    let writes = 0;
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const end = start + options.durationMs;
    let now = start;
    while (now < end) {
      tx.immediate();
      const after = performance.now();
      latencies.push(after - now);
      now = after;
      writes += slots.length;
    }
    const seconds = (now - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    return { jobsPerSec: finished / seconds, writesPerSec: writes / seconds, jobs: finished, seconds, latencies, cpuUsPerJob: (cpu.user + cpu.system) / finished };
  } finally {
    dispose();
  }
}
