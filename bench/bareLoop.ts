/**
 * The bare loop: the least work the runtime issue asks of a durable send, with none of the rest.
 * It is the reference a ratio target can be read against: what any runtime that runs XState's
 * pure transition over this SQLite layout could reach on this machine, before event ids,
 * duplicate detection, leases, the inbox's order, the async store port or runtime events.
 *
 * Per event: the machine's zod schema parses it; XState's `machine.transition` runs on the job's
 * held, hydrated snapshot (in the job's own never-started actor's scope, as the runtime does, so
 * no actor is built per event); the persisted snapshot, the context and both state values become
 * JSON; then the raw limit's two writes, widened by the columns the job record and
 * history record name: `UPDATE jobs SET revision, state_value, context, snapshot, updated_at
 * WHERE id = ? AND revision = ?` and `INSERT INTO transitions (…, from_value, to_value, …)`.
 * Sequential: one `BEGIN IMMEDIATE` transaction per event, each awaited (the API is async).
 * Batched: `batch` events of many jobs per transaction, each in its own savepoint (one job's
 * failed write must not sink the others). WAL, the given `synchronous`, busy_timeout 5000.
 */
import Database from 'better-sqlite3';
import { createActor, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import { transitionInScope } from '../src/step/childScope.ts';
import type { RunResult, Synchronous } from './rawRun.ts';
import { timedSteps, timedSyncSteps } from './stats.ts';
import { freshDbPath } from './tempDb.ts';
import { persistedSnapshotTemplate, progressEvent } from './workload.ts';

const SCHEMA = `
  CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, state_value TEXT NOT NULL, context TEXT NOT NULL,
    snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
  CREATE TABLE transitions (
    job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
    from_value TEXT, to_value TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)
  ) STRICT, WITHOUT ROWID;`;

interface HeldJob {
  id: string;
  revision: number;
  actor: unknown;
  snapshot: AnyMachineSnapshot;
}

interface Write {
  job: HeldJob;
  next: AnyMachineSnapshot;
  type: string;
  payload: string;
  from: string;
  to: string;
  context: string;
  snapshot: string;
  at: number;
}

function openBare(label: string, synchronous: Synchronous, jobs: number) {
  const tmp = freshDbPath(label);
  const db = new Database(tmp.path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec(SCHEMA);
  const machine = jobLifecycle.machine;
  const template = persistedSnapshotTemplate();
  const insertJob = db.prepare('INSERT INTO jobs (id, revision, state_value, context, snapshot, updated_at) VALUES (?, 1, ?, ?, ?, ?)');
  const held: HeldJob[] = [];
  db.transaction(() => {
    for (let k = 0; k < jobs; k += 1) {
      const id = `bare-job-${k}`;
      const text = JSON.stringify(template);
      insertJob.run(id, JSON.stringify(template['value']), JSON.stringify(template.context), text, Date.now());
      const actor = createActor(machine as AnyStateMachine, { snapshot: JSON.parse(text) as never });
      held.push({ id, revision: 1, actor, snapshot: actor.getSnapshot() as AnyMachineSnapshot });
    }
  })();
  const update = db.prepare('UPDATE jobs SET revision = revision + 1, state_value = ?, context = ?, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
  const insert = db.prepare('INSERT INTO transitions (job_id, revision, event_type, payload, from_value, to_value, at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const write = (w: Write) => {
    if (update.run(w.to, w.context, w.snapshot, w.at, w.job.id, w.job.revision).changes !== 1) throw new Error(`bare loop: revision conflict on ${w.job.id}`);
    insert.run(w.job.id, w.job.revision + 1, w.type, w.payload, w.from, w.to, w.at);
  };
  // A nested better-sqlite3 transaction is a savepoint.
  const writeOne = db.transaction(write);
  const writeBatch = db.transaction((ws: Write[]) => {
    for (const w of ws) writeOne(w);
  });
  return {
    held,
    /** Validate, transition and serialise one event of `job`: everything but the write. */
    prepare(job: HeldJob, event: unknown): Write {
      const parsed = jobLifecycle.events.PROGRESS.parse(event);
      const [next] = transitionInScope(machine, job.actor, job.snapshot, parsed);
      return {
        job,
        next,
        type: parsed.type,
        payload: JSON.stringify(parsed),
        from: JSON.stringify(job.snapshot.value),
        to: JSON.stringify(next.value),
        context: JSON.stringify(next.context),
        snapshot: JSON.stringify(machine.getPersistedSnapshot(next)),
        at: Date.now(),
      };
    },
    commitOne(w: Write) {
      writeOne.immediate(w);
      w.job.revision += 1;
      w.job.snapshot = w.next;
    },
    commitBatch(ws: Write[]) {
      writeBatch.immediate(ws);
      for (const w of ws) {
        w.job.revision += 1;
        w.job.snapshot = w.next;
      }
    },
    revisionOf(id: string): number {
      return db.prepare('SELECT revision FROM jobs WHERE id = ?').pluck().get(id) as number;
    },
    dispose() {
      db.close();
      tmp.dispose();
    },
  };
}

/** Sequential: one job, `await` one event after another, one transaction each. */
export async function runBareLoop(options: { synchronous: Synchronous; durationMs: number; warmupOps: number }): Promise<RunResult> {
  const bare = openBare(`bare-${options.synchronous.toLowerCase()}`, options.synchronous, 1);
  try {
    const job = bare.held[0]!;
    const send = async (i: number) => bare.commitOne(bare.prepare(job, progressEvent(i)));
    let i = 0;
    for (; i < options.warmupOps; i += 1) await send(i);
    const run = await timedSteps(options.durationMs, () => send(i++));
    if (bare.revisionOf(job.id) !== job.revision) throw new Error('bare loop: stored revision differs from the held one');
    return run;
  } finally {
    bare.dispose();
  }
}

/** Batched: `jobs` jobs round-robin, `batch` events per transaction, a savepoint each. */
export function runBareBatched(options: { synchronous: Synchronous; durationMs: number; jobs: number; batch: number }): { perSec: number; ops: number; cpuUsPerOp: number } {
  const bare = openBare(`barebatch-${options.synchronous.toLowerCase()}`, options.synchronous, options.jobs);
  try {
    let next = 0;
    let i = 0;
    const round = () => {
      const writes: Write[] = [];
      for (let k = 0; k < options.batch; k += 1) {
        writes.push(bare.prepare(bare.held[next]!, progressEvent(i++)));
        next = (next + 1) % bare.held.length;
      }
      bare.commitBatch(writes);
    };
    for (let w = 0; w < 10; w += 1) round();
    const { perSec, ops, cpuUsPerOp } = timedSyncSteps(options.durationMs, options.batch, round);
    return { perSec, ops, cpuUsPerOp };
  } finally {
    bare.dispose();
  }
}
