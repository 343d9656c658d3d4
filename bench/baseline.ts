/**
 * The afternoon baseline: what a user writes in an afternoon to persist XState jobs in SQLite,
 * run beside each case of the jobs section (bench/jobsSection.ts).
 *
 * Per job: `createActor` of the very machine Spool runs (the same activity chain, its
 * `fromPromise` steps resolving on a microtask as XState runs them), subscribed before `start`;
 * at every snapshot change `actor.getPersistedSnapshot()` becomes JSON and is written with
 * better-sqlite3, one autocommit statement each: the first (the initial snapshot) an INSERT, then
 * `UPDATE jobs SET snapshot = ?, version = version + 1 WHERE id = ? AND version = ?`. The job is
 * done when its snapshot's status is `done`. N async loops each drive one job at a time to its
 * end, as the Spool case's N loops do. WAL, the case's `synchronous`, busy_timeout 5000.
 *
 * It has no history rows, no event ids, no recovery of a running activity after a crash, no
 * leases: it is the floor a runtime's guarantees are paid for above.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createActor, type AnyMachineSnapshot } from 'xstate';
import { measured, type JobShape, type JobsRunResult } from './jobsRun.ts';
import type { Synchronous } from './rawRun.ts';
import { timedLoops } from './stats.ts';
import { freshDbPath } from './tempDb.ts';

/** `loops` concurrent loops of whole jobs for `durationMs`, after a warm-up of a few jobs per loop. */
export async function runBaseline(options: { synchronous: Synchronous; shape: JobShape; loops: number; durationMs: number }): Promise<JobsRunResult> {
  const tmp = freshDbPath(`baseline-${options.shape.name}-${options.synchronous.toLowerCase()}`);
  const db = new Database(tmp.path, { timeout: 5000 });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous}`);
    db.exec('CREATE TABLE jobs (id TEXT PRIMARY KEY, version INTEGER NOT NULL, snapshot TEXT NOT NULL)');
    const insert = db.prepare('INSERT INTO jobs (id, version, snapshot) VALUES (?, 1, ?)');
    const update = db.prepare('UPDATE jobs SET snapshot = ?, version = version + 1 WHERE id = ? AND version = ?');
    const machine = options.shape.def.machine;
    let n = 0;
    const job = () =>
      new Promise<number>((resolve, reject) => {
        const t0 = performance.now();
        const id = randomUUID();
        let version = 0;
        let last: AnyMachineSnapshot | undefined;
        const actor = createActor(machine, { input: { n: n++ } });
        actor.subscribe({
          next: (snapshot: AnyMachineSnapshot) => {
            if (snapshot === last) return;
            last = snapshot;
            try {
              const text = JSON.stringify(actor.getPersistedSnapshot());
              if (version === 0) insert.run(id, text);
              else if (update.run(text, id, version).changes !== 1) throw new Error(`baseline: version conflict on ${id}`);
              version += 1;
            } catch (error) {
              reject(error as Error);
              return;
            }
            if (snapshot.status === 'done') {
              if (version !== options.shape.steps + 1) reject(new Error(`baseline: ${id} wrote ${version} snapshots, expected ${options.shape.steps + 1}`));
              else resolve(performance.now() - t0);
            }
          },
          error: (error: unknown) => reject(error as Error),
        });
        actor.start();
      });
    await Promise.all(Array.from({ length: options.loops }, async () => {
      for (let k = 0; k < Math.max(3, Math.ceil(50 / options.loops)); k += 1) await job();
    }));
    return await measured(tmp.path, () => timedLoops(options.loops, options.durationMs, job));
  } finally {
    db.close();
    tmp.dispose();
  }
}
