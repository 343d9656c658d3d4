/**
 * The queue section's runs (bench/queueSection.ts): a backlog of N jobs drained by workers in the
 * same process, measured from the first enqueue to the last job's end.
 *
 *   while-draining   producers (32 `runtime.start` calls in flight) enqueue N jobs while
 *                    `runWorker` (maxConcurrentActivities c) drains them
 *   then-drain       N jobs enqueued first (a runtime that runs no activities, 32 in flight),
 *                    then a fresh runtime + runWorker drains the backlog
 *   afternoon loop   a minimal hand-written SQLite job loop, the same two phases: one row per
 *                    job (INSERT), claimed by UPDATE … RETURNING, one UPDATE per step, c loops
 *   starts           N jobs enqueued and nothing else: no worker, no activities run
 *                    (`runEffects: false`), by `start` 64 in flight or `startMany` in batches
 *
 * Each reports jobs/s, this process's CPU per job (Postgres: and the server's), statements and
 * write transactions per job (bench/countingStore.ts, bench/benchDb.ts).
 */
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { createRuntime, runWorker, type Runtime } from '../src/index.ts';
import { countStatements, statementCounter } from './countingStore.ts';
import { freshBenchDb, type BenchDb, type StoreKind } from './benchDb.ts';
import type { JobShape } from './jobsRun.ts';
import type { Synchronous } from './rawRun.ts';
import { freshDbPath } from './tempDb.ts';
import { commitsBetween, walCommitCounter } from './walCommits.ts';

export const PRODUCERS = 32;
export type QueueMode = 'while-draining' | 'then-drain';

export interface QueueCase {
  store: StoreKind;
  synchronous: Synchronous;
  shape: JobShape;
  concurrency: number;
  backlog: number;
  mode: QueueMode;
}

export interface QueueResult {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  cpuUsPerJob: number;
  serverCpuUsPerJob: number | null;
  statementsPerJob: number;
  commitsPerJob: number | null;
}

/** Run `produce` on `loops` loops (default {@link PRODUCERS}) until `n` items are made. */
export async function producers(n: number, produce: (i: number) => Promise<unknown> | unknown, loops = PRODUCERS): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: loops }, async () => {
    while (next < n) await produce(next++);
  }));
}

/** CPU, statements and the database's meter around `run`. */
export async function metered(db: BenchDb | null, commits: (() => number | null) | null, jobs: number, run: () => Promise<void>): Promise<QueueResult> {
  await countStatements();
  const meter = db ? await db.meter() : null;
  const c0 = commits?.() ?? null;
  statementCounter.count = 0;
  statementCounter.on = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  try {
    await run();
  } finally {
    statementCounter.on = false;
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const m = meter ? await meter.stop() : null;
  const commitCount = commits ? commitsBetween(c0, commits()) : (m?.commits ?? null);
  return {
    jobs,
    seconds,
    jobsPerSec: jobs / seconds,
    cpuUsPerJob: (cpu.user + cpu.system) / jobs,
    serverCpuUsPerJob: m?.serverCpuUs == null ? null : m.serverCpuUs / jobs,
    statementsPerJob: statementCounter.count / jobs,
    commitsPerJob: commitCount === null ? null : commitCount / jobs,
  };
}

/** Resolves once `n` jobs have committed their final state in `runtime`. */
export function allFinal(runtime: Runtime, n: number): { done: Promise<void>; stop: () => void } {
  let finals = 0;
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  const stop = runtime.subscribe((event) => {
    if (event.type === 'job.committed' && event.job.final && ++finals === n) resolve();
  });
  if (n === 0) resolve();
  return { done, stop };
}

/** A runtime that drains `backlog` jobs with its worker (c activities at once), and what `run` adds meanwhile. */
async function drain(store: Awaited<ReturnType<BenchDb['openStore']>>, c: QueueCase, during: (runtime: Runtime) => Promise<void>): Promise<void> {
  const runtime = await createRuntime({ store, machines: [c.shape.def], maxConcurrentActivities: c.concurrency });
  const finals = allFinal(runtime, c.backlog);
  const controller = new AbortController();
  const worker = runWorker(runtime, { signal: controller.signal });
  try {
    await during(runtime);
    await finals.done;
  } finally {
    finals.stop();
    controller.abort();
    await worker;
    await runtime.close();
  }
}

/** Spool, one case. */
export async function runSpoolQueue(c: QueueCase): Promise<QueueResult> {
  const db = await freshBenchDb(c.store, `queue-${c.shape.name}-${c.synchronous.toLowerCase()}`);
  const id = c.shape.def.machine.id;
  try {
    if (c.mode === 'while-draining') {
      const store = await db.openStore(c.synchronous);
      return await metered(db, null, c.backlog, () => drain(store, c, (runtime) => producers(c.backlog, (n) => runtime.start(id, { n }))));
    }
    // The enqueuer's close checkpoints the WAL, which resets SQLite's commit counter: commits are
    // not counted here (null), Postgres's server-wide count is.
    const enqueuing = await db.openStore(c.synchronous);
    const r = await metered(db, null, c.backlog, async () => {
      const enqueuer = await createRuntime({ store: enqueuing, machines: [c.shape.def], runEffects: false });
      await producers(c.backlog, (n) => enqueuer.start(id, { n }));
      await enqueuer.close();
      await drain(await db.openStore(c.synchronous), c, async () => {});
    });
    return c.store === 'sqlite' ? { ...r, commitsPerJob: null } : r;
  } finally {
    await db.dispose();
  }
}

/**
 * The afternoon loop on SQLite: `jobs (id INTEGER PRIMARY KEY, status, step, steps, payload,
 * worker)`; a producer INSERTs a row (autocommit); a worker claims the oldest ready row by
 * UPDATE … RETURNING, awaits the step's work (the shape's, else none) and writes it (one UPDATE per step, the last marks the
 * row done), `concurrency` workers at once. The producers run beside the workers (while-draining)
 * or before them (then-drain).
 */
export async function runAfternoonQueue(c: Omit<QueueCase, 'store'>): Promise<QueueResult> {
  const tmp = freshDbPath(`queue-afternoon-${c.synchronous.toLowerCase()}`);
  const db = new Database(tmp.path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${c.synchronous}`);
  db.exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, step INTEGER NOT NULL, steps INTEGER NOT NULL, payload TEXT NOT NULL, worker TEXT);
    CREATE INDEX jobs_ready ON jobs (id) WHERE status = 'ready'`);
  const insert = db.prepare(`INSERT INTO jobs (status, step, steps, payload) VALUES ('ready', 0, ?, ?)`);
  const claim = db.prepare(`UPDATE jobs SET status = 'running', worker = ? WHERE id = (SELECT id FROM jobs WHERE status = 'ready' ORDER BY id LIMIT 1) RETURNING id, step, steps`);
  const step = db.prepare(`UPDATE jobs SET step = step + 1, payload = ?, status = CASE WHEN step + 1 = steps THEN 'done' ELSE status END WHERE id = ? AND worker = ?`);
  const requeue = db.prepare(`UPDATE jobs SET status = 'ready', worker = NULL WHERE id = ?`);
  /** Failed attempts per job step (a work that throws), and the jobs waiting out a backoff before they are ready again. */
  const failures = new Map<string, number>();
  let backingOff = 0;
  const work = c.shape.work;
  /** The retry policy's first backoff, as the shape's activity has it. */
  const backoffMs = c.shape.def.activities['work']?.backoff.initialMs ?? 0;
  /** One step's work, as a retry policy runs it: false when it failed (the job is ready again after the backoff, at this step). */
  const attempt = async (id: number, s: number): Promise<boolean> => {
    const key = `${id}:${s}`;
    try {
      await work!({ key, attempt: (failures.get(key) ?? 0) + 1 });
      return true;
    } catch {
      failures.set(key, (failures.get(key) ?? 0) + 1);
      backingOff += 1;
      setTimeout(() => (requeue.run(id), (backingOff -= 1)), backoffMs);
      return false;
    }
  };
  const counter = walCommitCounter(tmp.path);
  let produced = 0;
  let finished = 0;
  let producing = true;
  const worker = async (w: number) => {
    const name = `w${w}`;
    while (finished < c.backlog) {
      const row = claim.get(name) as { id: number; step: number; steps: number } | undefined;
      if (!row) {
        if (!producing && produced === finished) break;
        // Nothing ready: new jobs come on the next turn; a failed one only after its backoff.
        await new Promise((r) => (producing || backingOff === 0 ? setImmediate(r) : setTimeout(r, 1)));
        continue;
      }
      let failed = false;
      for (let s = row.step; s < row.steps; s += 1) {
        if (!work) await Promise.resolve();
        else if (!(await attempt(row.id, s))) {
          failed = true;
          break;
        }
        step.run(c.shape.snapshot(row.id), row.id, name);
      }
      if (!failed) finished += 1;
    }
  };
  const workers = () => Promise.all(Array.from({ length: c.concurrency }, (_, w) => worker(w)));
  const produce = () => producers(c.backlog, async (n) => {
    insert.run(c.shape.steps, c.shape.snapshot(n));
    produced += 1;
    await Promise.resolve();
  }).then(() => (producing = false));
  try {
    return await metered(null, counter.read, c.backlog, async () => {
      if (c.mode === 'while-draining') await Promise.all([produce(), workers()]);
      else {
        await produce();
        await workers();
      }
    });
  } finally {
    counter.close();
    db.close();
    tmp.dispose();
  }
}

/**
 * Jobs run unmetered before a case is measured, in the same process (a starts case enqueues them;
 * the queue section runs the same case with this backlog first): the JIT and the statement cache
 * warm, so a figure is a job's cost, not the first calls' compile. The bench collects garbage
 * before each case, and a case run right after that costs up to 1.7x as much CPU per job at a 1k
 * backlog (docs/performance.md, "Queue shape").
 */
export const WARMUP_JOBS = 500;

/** The starts case: N jobs enqueued by `start` (`batch` 1) or `startMany` (`batch` jobs a call), `inFlight` calls at once, no worker. */
export interface StartsCase {
  store: StoreKind;
  synchronous: Synchronous;
  shape: JobShape;
  jobs: number;
  inFlight: number;
  batch: number;
}

/** Spool, one starts case: CPU, statements and commits per job enqueued (its first activity waits: nothing runs it). */
export async function runStarts(c: StartsCase): Promise<QueueResult> {
  const db = await freshBenchDb(c.store, `starts-${c.batch}-${c.synchronous.toLowerCase()}`);
  const id = c.shape.def.machine.id;
  try {
    const runtime = await createRuntime({ store: await db.openStore(c.synchronous), machines: [c.shape.def], runEffects: false });
    try {
      const enqueue = (jobs: number, from: number) => {
        const call = (k: number) => {
          if (c.batch === 1) return runtime.start(id, { n: from + k });
          const items = Array.from({ length: Math.min(c.batch, jobs - k * c.batch) }, (_, j) => ({ input: { n: from + k * c.batch + j } }));
          return runtime.startMany(id, items);
        };
        return producers(Math.ceil(jobs / c.batch), call, c.inFlight);
      };
      // Warmed up first (the JIT, the statement cache): a start's cost, not the first calls' compile.
      await enqueue(WARMUP_JOBS, c.jobs);
      return await metered(db, null, c.jobs, () => enqueue(c.jobs, 0));
    } finally {
      await runtime.close();
    }
  } finally {
    await db.dispose();
  }
}
