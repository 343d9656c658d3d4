/**
 * The Worker of the bench's browser section (bench/browserSection.ts), in Chromium on OPFS (the
 * SAH-pool VFS): durable transitions/s through a runtime on the sqlite-wasm driver, the same
 * workload as the sequential section (bench/workload.ts), and raw sqlite-wasm doing the same
 * writes in this same Worker; and the reopen of a database holding waiting jobs after a reload.
 */
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';
import { setup } from 'xstate';
import { jobLifecycle } from '../../machines/index.ts';
import { openSqliteWasmStore } from '../../persistence/drivers/sqlite-wasm/index.ts';
import { createRuntime } from '../../src/index.ts';
import { opfsOnce } from '../../test/browser/opfs.ts';
import { serveRpc } from '../../test/browser/rpc.ts';
import { timedSteps } from '../stats.ts';
import { JOB_INPUT, MACHINE_ID, persistedSnapshotTemplate, progressEvent } from '../workload.ts';

type Synchronous = 'FULL' | 'NORMAL';
interface RunArgs {
  synchronous: Synchronous;
  durationMs: number;
  warmupOps: number;
}

/** A job that waits an hour on a timer: what the reopen finds waiting. */
const sleeper = setup({}).createMachine({ id: 'sleeper', initial: 'waiting', states: { waiting: { after: { 3_600_000: 'done' } }, done: { type: 'final' } } });

/** The module and the pool, made once. */
const opfs = opfsOnce('spool-bench');

let runs = 0;

serveRpc({
  wipe: async () => {
    const { pool } = await opfs();
    await pool.wipeFiles();
    return pool.getFileNames();
  },

  /** `await runtime.send` one after another on one job-lifecycle job, each a commit (as bench/spoolRun.ts). */
  spool: async ({ synchronous, durationMs, warmupOps }: RunArgs) => {
    const { sqlite3, pool } = await opfs();
    const path = `/spool-${++runs}.db`;
    const store = await openSqliteWasmStore({ sqlite3, pool, path, synchronous });
    const runtime = await createRuntime({ store, machines: [jobLifecycle], hostDriven: true });
    try {
      const job = await runtime.start(MACHINE_ID, JOB_INPUT);
      await runtime.send(job.id, { type: 'START' });
      let i = 0;
      let notApplied = 0;
      for (; i < warmupOps; i++) if ((await runtime.send(job.id, progressEvent(i))).status !== 'applied') notApplied++;
      const { ops, seconds, perSec } = await timedSteps(durationMs, async () => {
        if ((await runtime.send(job.id, progressEvent(i++))).status !== 'applied') notApplied++;
      });
      const final = await runtime.get(job.id);
      if (notApplied > 0 || final.revision !== 2 + warmupOps + ops) throw new Error(`browser bench: ${notApplied} events not applied; revision ${final.revision}`);
      return { ops, seconds, perSec };
    } finally {
      await runtime.close();
      pool.unlink(path);
    }
  },

  /**
   * Raw sqlite-wasm, in this Worker, on the same VFS: per transition one `BEGIN IMMEDIATE`
   * transaction holding a versioned `UPDATE jobs … WHERE id = ? AND revision = ?` of a snapshot
   * the size of Spool's and one transition-log `INSERT` (bench/rawRun.ts's writes).
   */
  raw: async ({ synchronous, durationMs, warmupOps }: RunArgs) => {
    const { pool } = await opfs();
    const path = `/raw-${++runs}.db`;
    const db = new pool.OpfsSAHPoolDb(path);
    try {
      db.exec(`PRAGMA synchronous = ${synchronous};
        CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
        CREATE TABLE transitions (job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)) STRICT, WITHOUT ROWID;`);
      const template = persistedSnapshotTemplate();
      const snapshotOf = (i: number) => JSON.stringify({ ...template, context: { ...template.context, progress: i % 101 } });
      const jobId = 'raw-bench-job';
      db.exec({ sql: 'INSERT INTO jobs (id, revision, snapshot, updated_at) VALUES (?, 1, ?, ?)', bind: [jobId, snapshotOf(0), Date.now()] });
      const begin = db.prepare('BEGIN IMMEDIATE');
      const commit = db.prepare('COMMIT');
      const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
      const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, at) VALUES (?, ?, ?, ?, ?)');
      const once = (s: typeof begin) => {
        s.step();
        s.reset();
      };
      let revision = 1;
      let i = 0;
      const step = () => {
        const at = Date.now();
        once(begin);
        update.bind([snapshotOf(i), at, jobId, revision]);
        once(update);
        if (db.changes() !== 1) throw new Error(`raw bench: revision conflict at ${revision}`);
        insert.bind([jobId, revision + 1, 'PROGRESS', JSON.stringify(progressEvent(i)), at]);
        once(insert);
        once(commit);
        revision++;
        i++;
      };
      for (let w = 0; w < warmupOps; w++) step();
      // A synchronous loop, no await in it (as bench/rawRun.ts's).
      const start = performance.now();
      let ops = 0;
      while (performance.now() - start < durationMs) {
        step();
        ops++;
      }
      const seconds = (performance.now() - start) / 1000;
      for (const s of [begin, commit, update, insert]) s.finalize();
      return { ops, seconds, perSec: ops / seconds };
    } finally {
      db.close();
      pool.unlink(path);
    }
  },

  /** `count` sleeper jobs waiting on their timer, in the database `path` (startMany, 500 at a time). */
  seed: async ({ path, count }: { path: string; count: number }) => {
    const { sqlite3, pool } = await opfs();
    const store = await openSqliteWasmStore({ sqlite3, pool, path, synchronous: 'NORMAL' });
    const runtime = await createRuntime({ store, machines: [sleeper], hostDriven: true });
    const t0 = performance.now();
    for (let i = 0; i < count; i += 500) await runtime.startMany('sleeper', Array.from({ length: Math.min(500, count - i) }, () => ({ input: {} })));
    const perSec = count / ((performance.now() - t0) / 1000);
    await runtime.close();
    return { perSec };
  },

  /** After a reload: the module, the pool, the store, the runtime (recovery) and its first tick, each timed. */
  reopen: async ({ path }: { path: string }) => {
    const t0 = performance.now();
    const module = await sqlite3InitModule();
    const t1 = performance.now();
    const o = await opfs(module);
    const t2 = performance.now();
    const store = await openSqliteWasmStore({ sqlite3: o.sqlite3, pool: o.pool, path });
    const t3 = performance.now();
    const runtime = await createRuntime({ store, machines: [sleeper], hostDriven: true });
    const t4 = performance.now();
    const tick = await runtime.tick();
    const t5 = performance.now();
    const waiting = (await store.stats({ now: Date.now() })).jobs.filter((j) => j.value === 'waiting').reduce((n, j) => n + j.count, 0);
    await runtime.close();
    return { moduleMs: t1 - t0, poolMs: t2 - t1, storeMs: t3 - t2, runtimeMs: t4 - t3, tickMs: t5 - t4, totalMs: t5 - t0, tick, waiting };
  },
});
