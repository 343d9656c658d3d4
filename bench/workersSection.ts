/**
 * Section 5, worker processes (bench/workers.ts): jobs/s with K = 1, 2, 4 `runWorker` processes
 * on one SQLite file (FULL) and on one Postgres database (the server's durable defaults,
 * bench/pgServer.ts), each beside its own raw limit measured in the same run: SQLite one
 * `BEGIN IMMEDIATE` per job; Postgres one transaction per job from 1 and from 4 connections, and
 * 100 to a transaction. Targets (issue #16): on Postgres more processes never finish fewer jobs
 * than one, and 2 processes finish at least 1.3× one.
 */
import { runRawPerJob, runWorkers, WORKER_COUNTS, WORKER_RUNS, type WorkersRun, type WorkersStore } from './workers.ts';
import { runPgRaw } from './pgRaw.ts';
import { check, type TargetCheck } from './targets.ts';
import { fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round } from './format.ts';
import type { SectionContext } from './sections.ts';

/** Issue #16's targets for K worker processes on one Postgres database, as a ratio to one process. */
export const WORKERS_TARGETS = { twoVsOne: 1.3, moreVsOne: 1.0 } as const;

/** The raw limits of one store, measured beside its workers. */
interface Limits {
  /** One transaction per job, one connection: versioned UPDATE + history INSERT. */
  perJob: number;
  /** Postgres only: the same from 4 connections at once, and 100 to a transaction. */
  perJob4?: number;
  batched100?: number;
}

const snapshot = (i: number) => JSON.stringify({ status: 'active', value: 'step1', context: { n: i, result: null }, children: {}, historyValue: {} });

async function limitsOf(store: WorkersStore, jobs: number): Promise<Limits> {
  if (store === 'sqlite') return { perJob: runRawPerJob(jobs).perSec };
  const one = await runPgRaw({ batch: 1, totalOps: jobs, snapshot });
  const four = await runPgRaw({ batch: 1, clients: 4, totalOps: jobs, snapshot });
  const batched = await runPgRaw({ batch: 100, totalOps: Math.max(jobs, 2000), snapshot });
  return { perJob: one.perSec, perJob4: four.perSec, batched100: batched.perSec };
}

export async function workersSection(ctx: SectionContext) {
  const load0 = loadNow();
  const jobs = ctx.quick ? 500 : 2000;
  console.log(`\n== 5. Worker processes: ${jobs} bench-work jobs (one trivial activity → done) drained by K = ${WORKER_COUNTS.join(', ')} runWorker processes on one ${ctx.stores.join(' / one ')} database, each running 8 activities at once (the default), then K = 1, 2 running 64`);
  console.log(`   jobs started with runEffects: false; K children (node --import tsx bench/workerChild.ts, the default 250 ms poll) timed from spawn until the parent sees every job final\n`);
  const { runs, limits } = await runAllWorkers(ctx, jobs);
  const rows = workersRows(runs, limits);
  printWorkersResults(rows, limits, jobs);
  const load = hostLoad(load0);
  printLoadNote(load);
  const targets: TargetCheck[] = [];
  for (const store of ctx.stores.filter((s) => s === 'postgres')) {
    const of = (k: number) => rows.find((r) => r.store === store && r.workers === k && r.concurrency === 8);
    targets.push(check(`workers on Postgres: 2 processes / 1 (jobs/s)`, of(2)?.speedup ?? null, { min: WORKERS_TARGETS.twoVsOne }));
    targets.push(check(`workers on Postgres: 4 processes / 1 (jobs/s)`, of(4)?.speedup ?? null, { min: WORKERS_TARGETS.moreVsOne }));
  }
  return {
    method: {
      machine: 'bench-work (bench/workerMachines.ts, activityChain with 1 step): step1 invokes a no-work fromPromise activity, onDone → final done',
      setup: `${jobs} jobs started by a runtime with runEffects: false (64 starts in flight), then closed; a fresh database per run`,
      workers: 'K child processes: node --import tsx bench/workerChild.ts: openStore(db) (SQLite FULL, WAL; Postgres pool 10) + createRuntime (defaults, recover on; maxConcurrentActivities: the "concurrency" of the row) + runWorker() (its default poll, 250 ms, as `spool worker`)',
      timing: `from the first spawn until a read-only count of active jobs (polled every 50 ms) reaches 0; then SIGTERM`,
      limits: 'SQLite: better-sqlite3, one process, one BEGIN IMMEDIATE per job (versioned UPDATE + INSERT), WAL, FULL. Postgres: node-postgres, the same two statements one transaction per job (1 and 4 connections) and 100 to a transaction',
      synchronous: 'SQLite FULL; Postgres fsync on, synchronous_commit on',
    },
    jobs,
    limits: Object.fromEntries([...limits].map(([k, v]) => [k, Object.fromEntries(Object.entries(v).map(([n, x]) => [n, round(x as number)]))])),
    results: rows,
    targets,
    hostLoad: load,
  };
}

/** Every worker run on every store, then that store's raw limits. */
async function runAllWorkers(ctx: SectionContext, jobs: number): Promise<{ runs: WorkersRun[]; limits: Map<WorkersStore, Limits> }> {
  const runs: WorkersRun[] = [];
  const limits = new Map<WorkersStore, Limits>();
  for (const store of ctx.stores) {
    for (const { workers: k, concurrency } of WORKER_RUNS) {
      ctx.gc();
      const r = await runWorkers(k, concurrency, jobs, store);
      runs.push(r);
      process.stdout.write(`  ${store.padEnd(8)} K=${k} x${String(concurrency).padEnd(2)} ${fmtRate(r.perSec).padStart(8)} jobs/s from spawn, ${r.perSecFromReady === null ? '—' : fmtRate(r.perSecFromReady)} from last ready, CPU ${r.cpuUsPerJob?.toFixed(0) ?? '?'} µs/job, attempts per runner ${r.attemptsPerRunner.join('/')}\n`);
    }
    limits.set(store, await limitsOf(store, jobs));
  }
  return { runs, limits };
}

/** Each run's figures, with its speed-up over one worker and its ratio to its store's raw limit. */
function workersRows(runs: WorkersRun[], limits: Map<WorkersStore, Limits>) {
  // Speed-up over one worker on the same store running as many activities at once.
  const baseOf = (r: WorkersRun) => runs.find((b) => b.store === r.store && b.workers === 1 && b.concurrency === r.concurrency) ?? r;
  return runs.map((r) => {
    const base = baseOf(r);
    const limit = limits.get(r.store)!;
    return {
      store: r.store,
      workers: r.workers,
      concurrency: r.concurrency,
      jobs: r.jobs,
      seconds: round(r.seconds, 3),
      jobsPerSec: round(r.perSec),
      speedup: round(r.perSec / base.perSec, 2),
      jobsPerSecFromReady: r.perSecFromReady === null ? null : round(r.perSecFromReady),
      speedupFromReady: r.perSecFromReady === null || base.perSecFromReady === null ? null : round(r.perSecFromReady / base.perSecFromReady, 2),
      cpuUsPerJob: r.cpuUsPerJob === null ? null : round(r.cpuUsPerJob),
      firstReadyMs: round(r.firstReadyMs),
      lastReadyMs: round(r.lastReadyMs),
      ratioToRaw: round(r.perSec / limit.perJob, 3),
      statuses: r.statuses,
      attemptsPerRunner: r.attemptsPerRunner,
      childrenStopped: r.childrenStopped,
      transitionsPerJob: round(r.transitionsPerJob, 2),
      setupJobsPerSec: round(r.setupJobsPerSec),
    };
  });
}

/** The workers table and the notes on the raw limits and CPU. */
function printWorkersResults(rows: ReturnType<typeof workersRows>, limits: Map<WorkersStore, Limits>, jobs: number): void {
  console.log('');
  printTable(
    ['store', 'K', 'at once', 'jobs', 'spawn→all final', 'jobs/s', 'speed-up', 'jobs/s from ready', 'speed-up', 'CPU µs/job', 'raw 1/tx', 'ratio', 'attempts per runner'],
    rows.map((r) => [
      r.store,
      String(r.workers),
      String(r.concurrency),
      String(r.jobs),
      fmtMs(r.seconds * 1000),
      fmtRate(r.jobsPerSec),
      fmtRatio(r.speedup),
      r.jobsPerSecFromReady === null ? '—' : fmtRate(r.jobsPerSecFromReady),
      r.speedupFromReady === null ? '—' : fmtRatio(r.speedupFromReady),
      r.cpuUsPerJob === null ? '—' : r.cpuUsPerJob.toFixed(0),
      fmtRate(limits.get(r.store)!.perJob),
      r.ratioToRaw.toFixed(3),
      r.attemptsPerRunner.join('/'),
    ]),
  );
  const pg = limits.get('postgres');
  if (limits.has('sqlite')) console.log(`  SQLite raw limit: ${jobs} single-process BEGIN IMMEDIATE transactions at FULL, one versioned UPDATE + one INSERT each.`);
  if (pg) console.log(`  Postgres raw limit: versioned UPDATE + history INSERT, one per transaction ${fmtRate(pg.perJob)}/s from 1 connection, ${fmtRate(pg.perJob4!)}/s from 4; 100 to a transaction (one round trip) ${fmtRate(pg.batched100!)}/s.`);
  console.log(`  A Spool job finished by a worker takes more than one commit (claim the activity, then its outcome with the transition to done), so the ratio to raw is not like-for-like.`);
  console.log(`  CPU µs/job = the worker processes' user+system CPU from ready to stop, summed, over jobs (Postgres's own server processes are not in it).`);
}
