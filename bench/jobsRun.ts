/**
 * Section 2's Spool side: whole activity jobs, `runtime.start` to the final state, run by
 * `runWorker` in the same process as the starter.
 *
 * The job: an activity chain (bench/workerMachines.ts) of 1 or 3 steps, each a `fromPromise`
 * that does no work. One runtime per run (SqliteStore.open(tmp, { synchronous }), defaults but
 * `maxConcurrentActivities`; or a Postgres database, bench/benchDb.ts), `runWorker(runtime)` with its default poll interval, and N loops
 * each starting a job and awaiting its final state before starting the next. A job's end is
 * seen through `runtime.subscribe` (the `job.committed` event of the commit that made it final):
 * nothing polls the store for it.
 *
 * Per run it reports jobs/s, this process's CPU per job (starter loops, runtime, worker and
 * SQLite together: one process), write transactions per job counted by SQLite
 * (bench/walCommits.ts), and each job's latency from the `start` call to the event of its final commit.
 */
import { performance } from 'node:perf_hooks';
import { createActor } from 'xstate';
import { createRuntime, runWorker, type Job, type Runtime } from '../src/index.ts';
import type { Synchronous } from './rawRun.ts';
import { Samples, timedLoops } from './stats.ts';
import { freshBenchDb, type BenchDb, type StoreKind } from './benchDb.ts';
import { activityChain, type AttemptInfo, type ChainDefinition } from './workerMachines.ts';

/** The grid's "N at once": N jobs in flight (N loops) and `maxConcurrentActivities: N`. */
export const AT_ONCE = [1, 64] as const;

export interface JobShape {
  name: string;
  /** Activities per job, one after another; transitions per job = steps + 1 (the start). */
  steps: number;
  def: ChainDefinition;
  /** Persisted snapshots of this machine (the context's `n` varies with i), for raw SQLite to write the same bytes. */
  snapshot: (i: number) => string;
  /** What each step's activity awaits (absent: nothing, it resolves on a microtask); the afternoon loop awaits it too. It may throw: the attempt fails. */
  work?: (attempt: AttemptInfo) => Promise<void>;
}

function chainShape(steps: number, work?: { name: string; run: (attempt: AttemptInfo) => Promise<void> }): JobShape {
  const def = activityChain(`bench-chain-${steps}${work ? `-${work.name.replace(/[^A-Za-z0-9-]/g, '')}` : ''}`, steps, work?.run);
  const actor = createActor(def.machine, { input: { n: 0 } }).start();
  const template = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { context: Record<string, unknown> };
  actor.stop();
  return {
    name: `${steps}-step${work ? ` ${work.name}` : ''}`,
    steps,
    def,
    snapshot: (i) => JSON.stringify({ ...template, context: { ...template.context, n: i } }),
    ...(work ? { work: work.run } : {}),
  };
}

export const JOB_SHAPES: readonly JobShape[] = [chainShape(1), chainShape(3)];

/** Longest wait of {@link TIMED_SHAPE}'s activities, ms: each waits a random 0 to this (a call to another service, say). */
export const TIMED_ACTIVITY_MS = 4;

/**
 * 3 steps whose activities take a random 0-4 ms each (a timer): they end at different moments,
 * as real work does, not all in one turn as no-ops do. The queue section runs it beside the no-op shapes.
 */
export const TIMED_SHAPE: JobShape = chainShape(3, {
  name: `0-${TIMED_ACTIVITY_MS}ms`,
  run: () => new Promise<void>((resolve) => setTimeout(resolve, Math.random() * TIMED_ACTIVITY_MS)),
});

/** Share of {@link RETRY_SHAPE}'s steps whose first attempt fails (the issue's W3: 20% retried). */
export const RETRIED_SHARE = 0.2;

/**
 * 3 no-op steps, of which one in five fails its first attempt and is retried after the chain's
 * backoff (50 ms): which ones, by a hash of the attempt's key, so a retried attempt (number 2)
 * always succeeds. The queue section runs it at c16 beside the other shapes.
 */
export const RETRY_SHAPE: JobShape = chainShape(3, {
  name: `${RETRIED_SHARE * 100}% retried`,
  run: async ({ key, attempt }) => {
    if (attempt === 1 && keyHash(key) % 100 < RETRIED_SHARE * 100) throw new Error('transient failure (the bench fails it on purpose)');
  },
});

/** FNV-1a of a key: the same key, the same verdict, in Spool's run and the afternoon loop's. */
function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** What every run of the jobs section reports: Spool's, the afternoon baseline's and the light load's. */
export interface JobsRunResult {
  jobsPerSec: number;
  jobs: number;
  seconds: number;
  /** This process's user + system CPU over the timed part, per job finished in it. */
  cpuUsPerJob: number;
  /** Write transactions committed to the database over the timed part, per job (null: no counter). */
  commitsPerJob: number | null;
  /** Postgres: the server's CPU over the timed part, per job (null: SQLite, whose work is in cpuUsPerJob, or a server not on this host). */
  serverCpuUsPerJob: number | null;
  /** start → final state, per job (ms). */
  latencies: Samples;
}

/**
 * Time `run` (which runs jobs on `db` and says how many it finished and in how long) and add this
 * process's CPU and the database's commits (and Postgres's server CPU) over it (bench/benchDb.ts).
 */
export async function measured(db: BenchDb, run: () => Promise<{ jobs: number; seconds: number; latencies: Samples }>): Promise<JobsRunResult> {
  const meter = await db.meter();
  const cpu0 = process.cpuUsage();
  const r = await run();
  const cpu = process.cpuUsage(cpu0);
  const { commits, serverCpuUs } = await meter.stop();
  return {
    jobsPerSec: r.jobs / r.seconds,
    jobs: r.jobs,
    seconds: r.seconds,
    cpuUsPerJob: (cpu.user + cpu.system) / r.jobs,
    commitsPerJob: commits === null ? null : commits / r.jobs,
    serverCpuUsPerJob: serverCpuUs === null ? null : serverCpuUs / r.jobs,
    latencies: r.latencies,
  };
}

/** A job not final this long after its start fails the run (an engine change that loses a job must not hang the bench). */
const JOB_TIMEOUT_MS = 30_000;

/**
 * Final states seen through runtime events. `finalOf(id)` resolves with the time
 * (performance.now()) of the commit event that made the job final, even when that event came
 * before the caller asked (the start's promise may resolve after the worker finished the job).
 * One watchdog timer a second, not one per job, fails the jobs waiting longer than JOB_TIMEOUT_MS.
 */
function watchFinals(runtime: Runtime) {
  type End = { at: number; job: Job };
  const seen = new Map<string, End>();
  const waiting = new Map<string, { since: number; resolve: (end: End) => void; reject: (error: Error) => void }>();
  const unsubscribe = runtime.subscribe((event) => {
    if (event.type !== 'job.committed' || !event.job.final) return;
    const end = { at: performance.now(), job: event.job };
    const waiter = waiting.get(event.job.id);
    if (waiter) {
      waiting.delete(event.job.id);
      waiter.resolve(end);
    } else seen.set(event.job.id, end);
  });
  const watchdog = setInterval(() => {
    const now = performance.now();
    for (const [jobId, w] of waiting) {
      if (now - w.since < JOB_TIMEOUT_MS) continue;
      waiting.delete(jobId);
      w.reject(new Error(`jobs bench: job ${jobId} not final ${JOB_TIMEOUT_MS} ms after its start was acknowledged`));
    }
  }, 1000);
  watchdog.unref();
  const finalOf = async (jobId: string): Promise<number> => {
    const early = seen.get(jobId);
    if (early) seen.delete(jobId);
    const end = early ?? (await new Promise<End>((resolve, reject) => waiting.set(jobId, { since: performance.now(), resolve, reject })));
    if (end.job.status !== 'done' || end.job.value !== 'done') throw new Error(`jobs bench: ${jobId} ended ${end.job.status} in ${JSON.stringify(end.job.value)}`);
    return end.at;
  };
  const stop = () => {
    clearInterval(watchdog);
    unsubscribe();
  };
  return { finalOf, stop };
}

/** One runtime + its worker on a fresh database; `job(n)` starts a job and resolves with its start → final latency. */
async function openSpool(options: { synchronous: Synchronous; shape: JobShape; maxConcurrentActivities?: number; store?: StoreKind }) {
  const db = await freshBenchDb(options.store ?? 'sqlite', `jobs-${options.shape.name}-${options.synchronous.toLowerCase()}`);
  const store = await db.openStore(options.synchronous);
  const runtime = await createRuntime({
    store,
    machines: [options.shape.def],
    ...(options.maxConcurrentActivities === undefined ? {} : { maxConcurrentActivities: options.maxConcurrentActivities }),
  });
  const controller = new AbortController();
  const worker = runWorker(runtime, { signal: controller.signal });
  const finals = watchFinals(runtime);
  const machineId = options.shape.def.machine.id;
  let n = 0;
  return {
    db,
    async job(): Promise<number> {
      const t0 = performance.now();
      const job = await runtime.start(machineId, { n: n++ });
      return (await finals.finalOf(job.id)) - t0;
    },
    async close(): Promise<void> {
      controller.abort();
      finals.stop();
      try {
        await worker;
        await runtime.close();
      } finally {
        await db.dispose();
      }
    },
  };
}

/** The grid: `atOnce` loops and `maxConcurrentActivities: atOnce`, for `durationMs` after a warm-up. */
export async function runSpoolJobs(options: { synchronous: Synchronous; shape: JobShape; atOnce: number; durationMs: number; warmupJobs?: number; store?: StoreKind }): Promise<JobsRunResult> {
  const spool = await openSpool({ ...options, maxConcurrentActivities: options.atOnce });
  try {
    const warm = options.warmupJobs ?? Math.max(50, options.atOnce * 3);
    await Promise.all(Array.from({ length: options.atOnce }, async () => {
      for (let k = 0; k < Math.ceil(warm / options.atOnce); k += 1) await spool.job();
    }));
    return await measured(spool.db, () => timedLoops(options.atOnce, options.durationMs, () => spool.job()));
  } finally {
    await spool.close();
  }
}

/**
 * Light load: jobs started at a steady `perSec` by the real clock (each start at its own slot,
 * whether or not earlier jobs have finished), for `durationMs`; the runtime's defaults (8
 * activities at once). `lagMs` is how late the starts were against their slots (timer jitter:
 * the latency is measured from the actual call).
 */
export async function runLightLoad(options: { synchronous: Synchronous; shape: JobShape; perSec: number; durationMs: number; store?: StoreKind }): Promise<JobsRunResult & { lagMs: { p99: number; max: number } }> {
  const spool = await openSpool(options);
  const lag = new Samples();
  try {
    for (let k = 0; k < 20; k += 1) await spool.job(); // warm-up, one at a time
    const result = await measured(spool.db, async () => {
      const latencies = new Samples();
      const interval = 1000 / options.perSec;
      const count = Math.round((options.durationMs / 1000) * options.perSec);
      const start = performance.now();
      const jobs: Promise<void>[] = [];
      for (let k = 0; k < count; k += 1) {
        const slot = start + k * interval;
        const wait = slot - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        lag.push(Math.max(0, performance.now() - slot));
        jobs.push(spool.job().then((ms) => latencies.push(ms)));
      }
      await Promise.all(jobs);
      return { jobs: count, seconds: (performance.now() - start) / 1000, latencies };
    });
    const l = Samples.summarize([lag]);
    return { ...result, lagMs: { p99: l.p99Ms, max: l.maxMs } };
  } finally {
    await spool.close();
  }
}
