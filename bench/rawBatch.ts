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
import { commitsBetween, walCommitCounter } from './walCommits.ts';
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
  /** Per job: from the transaction that created it to the end of the one that made its last write (ms). */
  jobLatencies: Samples;
  /** This process's CPU time (user + system) per job. */
  cpuUsPerJob: number;
  /** Write transactions committed per job, counted by SQLite (bench/walCommits.ts). */
  commitsPerJob: number | null;
}

/**
 * Whole jobs with `steps` transitions after their start: per job one job INSERT + history INSERT,
 * then `steps` × (versioned UPDATE + history INSERT). `batch` jobs are in flight and every
 * transaction makes one write of each (so 1 = one transaction per write, awaited one after another;
 * 100 = the "100 to a transaction"). Job ids are random UUIDs, as Spool's are unordered too.
 */
export function runRawJobs(options: { synchronous: Synchronous; durationMs: number; steps: number; batch: number; snapshot: (i: number) => string }): RawJobsResult {
  const { db, path, dispose } = openRawDb(`rawjobs-${options.synchronous.toLowerCase()}`, options.synchronous);
  const counter = walCommitCounter(path);
  try {
    const insertJob = db.prepare('INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)');
    const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
    const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
    let seq = 0;
    let finished = 0;
    let jobLatencies = new Samples();
    // In-flight jobs: revision = writes done (0 = not created yet); startedAt = when its first write's transaction began.
    const slots: { id: string; revision: number; startedAt: number }[] = [];
    const newJob = () => {
      seq += 1;
      return { id: randomUUID(), revision: 0, startedAt: 0 };
    };
    for (let k = 0; k < options.batch; k += 1) slots.push(newJob());
    const finishedInTx: number[] = [];
    const stepOne = (k: number, at: number, t0: number) => {
      const slot = slots[k]!;
      if (slot.revision === 0) {
        insertJob.run(slot.id, options.snapshot(seq), at);
        insert.run(slot.id, 1, 'xstate.init', '{}', at);
        slot.revision = 1;
        slot.startedAt = t0;
      } else {
        if (update.run(options.snapshot(seq + slot.revision), at, slot.id, slot.revision).changes !== 1) throw new Error(`raw jobs: conflict on ${slot.id}`);
        slot.revision += 1;
        insert.run(slot.id, slot.revision, 'xstate.done.actor.work', '{"type":"xstate.done.actor.work"}', at);
      }
      if (slot.revision === options.steps + 1) {
        finishedInTx.push(slot.startedAt);
        slots[k] = newJob();
      }
    };
    const tx = db.transaction((t0: number) => {
      const at = Date.now();
      for (let k = 0; k < slots.length; k += 1) stepOne(k, at, t0);
    });
    const round = () => {
      finishedInTx.length = 0;
      tx.immediate(performance.now());
      const t1 = performance.now();
      for (const startedAt of finishedInTx) jobLatencies.push(t1 - startedAt);
      finished += finishedInTx.length;
    };
    for (let w = 0; w < 20; w += 1) round();
    finished = 0;
    jobLatencies = new Samples();
    const commits0 = counter.read();
    const { seconds, ops, cpuUsPerOp } = timedSyncSteps(options.durationMs, slots.length, round);
    const commits = commitsBetween(commits0, counter.read());
    return {
      jobsPerSec: finished / seconds,
      writesPerSec: ops / seconds,
      jobs: finished,
      seconds,
      jobLatencies,
      cpuUsPerJob: (cpuUsPerOp * ops) / finished,
      commitsPerJob: commits === null ? null : commits / finished,
    };
  } finally {
    counter.close();
    dispose();
  }
}

/**
 * The disk's floor for the light-load case: jobs started at `perSec` by the real clock, each its
 * own chain of transactions one after another, as Spool's commits are at light load (a job INSERT
 * + history INSERT, then per step, after an event-loop turn, a versioned UPDATE + history INSERT,
 * each its own `BEGIN IMMEDIATE` transaction). Start → last commit, ms.
 */
export async function runRawLight(options: { synchronous: Synchronous; durationMs: number; steps: number; perSec: number; snapshot: (i: number) => string }): Promise<{ latencies: Samples; cpuUsPerJob: number }> {
  const { db, dispose } = openRawDb(`rawlight-${options.synchronous.toLowerCase()}`, options.synchronous);
  try {
    const insertJob = db.prepare('INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)');
    const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
    const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
    const create = db.transaction((id: string, i: number) => {
      insertJob.run(id, options.snapshot(i), Date.now());
      insert.run(id, 1, 'xstate.init', '{}', Date.now());
    });
    const step = db.transaction((id: string, i: number, revision: number) => {
      if (update.run(options.snapshot(i + revision), Date.now(), id, revision).changes !== 1) throw new Error(`raw light: conflict on ${id}`);
      insert.run(id, revision + 1, 'xstate.done.actor.work', '{"type":"xstate.done.actor.work"}', Date.now());
    });
    const job = async (i: number): Promise<number> => {
      const t0 = performance.now();
      const id = randomUUID();
      create.immediate(id, i);
      for (let revision = 1; revision <= options.steps; revision += 1) {
        await new Promise((resolve) => setImmediate(resolve));
        step.immediate(id, i, revision);
      }
      return performance.now() - t0;
    };
    for (let k = 0; k < 20; k += 1) await job(k); // warm-up, one at a time
    const latencies = new Samples();
    const count = Math.round((options.durationMs / 1000) * options.perSec);
    const interval = 1000 / options.perSec;
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const jobs: Promise<void>[] = [];
    for (let k = 0; k < count; k += 1) {
      const wait = start + k * interval - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      jobs.push(job(k).then((ms) => latencies.push(ms)));
    }
    await Promise.all(jobs);
    const cpu = process.cpuUsage(cpu0);
    return { latencies, cpuUsPerJob: (cpu.user + cpu.system) / count };
  } finally {
    dispose();
  }
}
