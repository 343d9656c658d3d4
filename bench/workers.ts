/**
 * Section 5, worker processes: jobs/s with K = 1, 2, 4 `runWorker` processes on one SQLite file
 * (synchronous FULL, WAL) or one Postgres database (bench/pgServer.ts; the children open either
 * through `openStore`, and the parent counts with a read-only connection of its own).
 *
 * Per run: a fresh database; N `bench-work` jobs (bench/workerMachines.ts: one trivial activity,
 * then final `done`) started through a runtime with `runEffects: false`, so every job waits with
 * its activity due; that runtime is closed. Then K children (bench/workerChild.ts, `node --import
 * tsx`) are spawned, each opening SqliteStore + createRuntime (defaults but maxConcurrentActivities,
 * recover on) + runWorker (its default poll, 250 ms, as `spool worker`: idle workers wake on
 * other processes' commits on Postgres; a 20 ms poll cost an idle worker 16% of a core, 2.6% at 250). The clock runs from spawn until the parent, reading the file with a raw read-only
 * better-sqlite3 connection every 50 ms, sees every job final; then the children get SIGTERM.
 * "From spawn" includes node + tsx start-up and open; "from ready" starts when the last child has
 * printed its ready line (createRuntime done), so it is the steady-state draining rate.
 *
 * The raw limit: the same number of single-process transactions at FULL by better-sqlite3, one
 * BEGIN IMMEDIATE per job holding a versioned UPDATE of a job row plus one transition INSERT. It is
 * one commit per job; a Spool job done by a worker takes two writes (the activity's claim, then
 * its outcome with the transition to `done`; each shares a transaction with other jobs' writes),
 * so the ratio is an upper-bound comparison, not like-for-like.
 */
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRuntime } from '../src/index.ts';
import pg from 'pg';
import { openStore } from '../persistence/openStore.ts';
import { freshPgDatabase } from './pgServer.ts';
import { benchWork } from './workerMachines.ts';
import { freshDbPath } from './tempDb.ts';

const CHILD = fileURLToPath(new URL('./workerChild.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
export const WORKER_COUNTS = [1, 2, 4] as const;
/** Activities each worker runs at once: the runtime's default (8), and 64 (`spool worker --concurrency 64`). */
export const WORKER_RUNS: readonly { workers: number; concurrency: number }[] = [
  ...WORKER_COUNTS.map((workers) => ({ workers, concurrency: 8 })),
  { workers: 1, concurrency: 64 },
  { workers: 2, concurrency: 64 },
];
const POLL_PARENT_MS = 50;
const TIMEOUT_MS = 180_000;

export interface WorkersRun {
  store: WorkersStore;
  workers: number;
  /** maxConcurrentActivities of each worker. */
  concurrency: number;
  jobs: number;
  /** Spawn → every job final. */
  seconds: number;
  perSec: number;
  /** Last child ready → every job final (null if every job was done before the last child was ready). */
  secondsFromReady: number | null;
  perSecFromReady: number | null;
  /** Spawn → first / last child ready. */
  firstReadyMs: number;
  lastReadyMs: number;
  /** Jobs per final status. */
  statuses: Record<string, number>;
  /** Activity attempts per runner (the attempts view's runner), most first: how the work spread over the children. */
  attemptsPerRunner: number[];
  /** Children that printed their `stopped` line after SIGTERM (closed cleanly). */
  childrenStopped: number;
  /** The worker processes' CPU (user + system) from ready to stop, summed, per job (null if a child did not report). Postgres's server CPU is not in it. */
  cpuUsPerJob: number | null;
  /** transitions rows per job. */
  transitionsPerJob: number;
  setupJobsPerSec: number;
}

/** Which store the workers share: one SQLite file, or one Postgres database (bench/pgServer.ts). */
export type WorkersStore = 'sqlite' | 'postgres';

/** The shared database of one run, and the parent's read-only view of it. */
interface WorkersDb {
  /** What the children open: a file path or a postgres:// URL. */
  target: string;
  setupJobsPerSec: number;
  /** Runs a read-only SQL query in the parent (the same texts on both stores). */
  query(sql: string): Promise<Record<string, unknown>[]>;
  dispose(): Promise<void>;
}

async function makeDb(kind: WorkersStore, jobs: number): Promise<WorkersDb> {
  const made = kind === 'sqlite' ? freshDbPath('workers') : await freshPgDatabase();
  const target = 'path' in made ? made.path : made.url;
  const store = await openStore(target); // SQLite: FULL, WAL (the defaults); Postgres: the server's settings
  const runtime = await createRuntime({ store, machines: [benchWork], runEffects: false });
  const t0 = performance.now();
  for (let i = 0; i < jobs; i += 64) {
    await Promise.all(Array.from({ length: Math.min(64, jobs - i) }, (_, k) => runtime.start('bench-work', { n: i + k }, { jobId: `w-${String(i + k).padStart(6, '0')}` })));
  }
  const setupJobsPerSec = jobs / ((performance.now() - t0) / 1000);
  await runtime.close();
  if ('path' in made) {
    const reader = new Database(made.path, { readonly: true, fileMustExist: true, timeout: 5000 });
    return {
      target,
      setupJobsPerSec,
      query: async (sql) => reader.prepare(sql).all() as Record<string, unknown>[],
      dispose: async () => (reader.close(), made.dispose()),
    };
  }
  const reader = new pg.Client({ connectionString: made.url });
  await reader.connect();
  return {
    target,
    setupJobsPerSec,
    query: async (sql) => (await reader.query(sql)).rows as Record<string, unknown>[],
    dispose: async () => (await reader.end(), await made.dispose()),
  };
}

function lines(child: ChildProcess, onLine: (obj: Record<string, unknown>) => void): void {
  let buf = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line.startsWith('{')) continue;
      try {
        onLine(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* not ours */
      }
    }
  });
}

export async function runWorkers(workers: number, concurrency: number, jobs: number, kind: WorkersStore = 'sqlite'): Promise<WorkersRun> {
  const db = await makeDb(kind, jobs);
  const children: ChildProcess[] = [];
  const stderr: string[] = [];
  const count = async (sql: string) => Number(Object.values((await db.query(sql))[0] ?? {})[0] ?? 0);
  try {
    const countActive = () => count("SELECT count(*) AS n FROM jobs WHERE status = 'active'");
    const readyAt: number[] = [];
    const stopped: Record<string, unknown>[] = [];
    const exited: Promise<void>[] = [];
    const t0 = performance.now();
    for (let k = 0; k < workers; k += 1) {
      const child = spawn(process.execPath, ['--import', TSX, CHILD, db.target, String(concurrency)], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (s: string) => stderr.push(s));
      lines(child, (o) => {
        if (o['type'] === 'ready') readyAt.push(performance.now() - t0);
        if (o['type'] === 'stopped') stopped.push(o);
      });
      exited.push(new Promise((resolve) => child.on('exit', () => resolve())));
    }
    let elapsed = 0;
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_PARENT_MS));
      elapsed = performance.now() - t0;
      const active = await countActive();
      if (active === 0) break;
      if (elapsed > TIMEOUT_MS) throw new Error(`workers bench: K=${workers} still ${active} active jobs after ${TIMEOUT_MS} ms${stderr.length ? `; child stderr: ${stderr.join('').slice(0, 2000)}` : ''}`);
      if (children.every((c) => c.exitCode !== null)) throw new Error(`workers bench: every child exited; stderr: ${stderr.join('').slice(0, 2000)}`);
    }
    for (const c of children) c.kill('SIGTERM');
    await Promise.race([Promise.all(exited), new Promise((r) => setTimeout(r, 10_000))]);
    const statuses = Object.fromEntries((await db.query('SELECT status, count(*) AS n FROM jobs GROUP BY status')).map((r) => [String(r['status']), Number(r['n'])]));
    const transitions = await count('SELECT count(*) AS n FROM transitions');
    const perRunner = (await db.query("SELECT count(*) AS n FROM attempts GROUP BY coalesce(runner, '') ORDER BY 1 DESC")).map((r) => Number(r['n']));
    const seconds = elapsed / 1000;
    const lastReady = readyAt.length === workers ? Math.max(...readyAt) : elapsed;
    const fromReady = lastReady < elapsed ? (elapsed - lastReady) / 1000 : null;
    const cpuUs = stopped.reduce((sum, o) => sum + Number(o['cpuUs'] ?? 0), 0);
    return {
      store: kind,
      workers,
      concurrency,
      jobs,
      seconds,
      perSec: jobs / seconds,
      secondsFromReady: fromReady,
      // Jobs some child had already finished before the last one was ready are counted too: an upper bound.
      perSecFromReady: fromReady === null ? null : jobs / fromReady,
      firstReadyMs: readyAt.length ? Math.min(...readyAt) : NaN,
      lastReadyMs: lastReady,
      statuses,
      attemptsPerRunner: perRunner,
      childrenStopped: stopped.length,
      cpuUsPerJob: stopped.length === workers ? cpuUs / jobs : null,
      transitionsPerJob: transitions / jobs,
      setupJobsPerSec: db.setupJobsPerSec,
    };
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await db.dispose();
  }
}

/** The raw limit: `jobs` transactions at FULL, one versioned UPDATE + one INSERT each, one process. */
export function runRawPerJob(jobs: number): { perSec: number; seconds: number } {
  const tmp = freshDbPath('workers-raw');
  const db = new Database(tmp.path, { timeout: 5000 });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(`
      CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, status TEXT NOT NULL, snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
      CREATE TABLE transitions (job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)) STRICT, WITHOUT ROWID;`);
    const snapshot = (i: number, value: string) => JSON.stringify({ status: value === 'done' ? 'done' : 'active', value, context: { n: i, result: value === 'done' ? i + 1 : null }, children: {}, historyValue: {} });
    const ids = Array.from({ length: jobs }, (_, i) => `raw-${i}`);
    db.transaction(() => ids.forEach((id, i) => db.prepare("INSERT INTO jobs VALUES (?, 1, 'active', ?, ?)").run(id, snapshot(i, 'step1'), Date.now())))();
    const update = db.prepare("UPDATE jobs SET revision = revision + 1, status = 'done', snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?");
    const insert = db.prepare('INSERT INTO transitions VALUES (?, ?, ?, ?, ?)');
    const one = db.transaction((i: number) => {
      const at = Date.now();
      if (update.run(snapshot(i, 'done'), at, ids[i]!, 1).changes !== 1) throw new Error('raw: revision conflict');
      insert.run(ids[i]!, 2, 'xstate.done.actor.work', JSON.stringify({ output: i + 1 }), at);
    });
    const t0 = performance.now();
    for (let i = 0; i < jobs; i += 1) one.immediate(i);
    const seconds = (performance.now() - t0) / 1000;
    return { perSec: jobs / seconds, seconds };
  } finally {
    db.close();
    tmp.dispose();
  }
}
