/**
 * The Postgres half of the bench's sections (issue #16): the very runners of the SQLite half with
 * `store: 'postgres'` (bench/benchDb.ts opens the store), each figure beside Postgres's own raw
 * limit measured in the same run (bench/pgRaw.ts: the versioned UPDATE + history INSERT), three ways:
 *
 *   1/tx ×1     one transaction per transition, one connection, each awaited before the next
 *   1/tx ×N     the same from N connections at once, N = the case's sends or jobs in flight (at most 64)
 *   100/tx      100 transitions of 100 jobs in one transaction (one round trip), one connection
 *
 * Postgres runs at the server's durable settings (fsync, synchronous_commit on: what SQLite's FULL
 * promises); there is no NORMAL row. Postgres has no speed targets here (bench/targets.ts is
 * SQLite's; the workers section keeps its scaling ones): these sections report ratios, no verdicts.
 * CPU µs = this process's user + system time (process.cpuUsage) "+" the server's (the postmaster
 * and its children, from /proc: bench/pgServer.ts), per transition or per job.
 */
import { runSpool } from './spoolRun.ts';
import { runStoreOnly } from './storeOnlyRun.ts';
import { runSpoolGroup, workloadSnapshot, GROUP_JOBS, RAW_BATCH, STEADY_IN_FLIGHT, type GroupMode, type GroupRunResult } from './groupCommit.ts';
import { AT_ONCE, JOB_SHAPES, runLightLoad, runSpoolJobs, type JobShape, type JobsRunResult } from './jobsRun.ts';
import { runBaseline } from './baseline.ts';
import { runPgRaw, type PgRawResult } from './pgRaw.ts';
import { pathInventory, runPathTesting, type PathConfig } from './pathTesting.ts';
import { performance } from 'node:perf_hooks';
import { benchPostgres } from './pgServer.ts';
import { scratchDatabase } from '../persistence/drivers/pg/scratch.ts';
import { latencySummary as latency, median, Samples } from './stats.ts';
import { fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round, type HostLoad } from './format.ts';
import { restartSection, type SectionContext } from './sections.ts';

/** The most connections a "1/tx ×N" limit opens (the cases' 200-job waves are capped to it). */
const MAX_RAW_CONNECTIONS = 64;
/** What Spool's store is opened with on Postgres: the runners' `synchronous` is SQLite's only. */
const PG = { store: 'postgres', synchronous: 'FULL' } as const;

/** The notes under every Postgres table, and the section's host load. */
function endNotes(load0: number): HostLoad {
  console.log(NOTE_CPU);
  console.log(NOTE_NO_TARGETS);
  const load = hostLoad(load0);
  printLoadNote(load);
  return load;
}
const NOTE_CPU = '  CPU µs = this process (process.cpuUsage) + the Postgres server (postmaster and backends, /proc), per unit; "?" = the server is not on this host.';
const NOTE_NO_TARGETS = '  Postgres has no speed targets in this section: ratios, no verdicts (bench/targets.ts is SQLite\'s).';

/** One raw limit, per transition. */
export interface PgLimit {
  perSec: number;
  clients: number;
  batch: number;
  cpuUsPerOp: number;
  serverCpuUsPerOp: number | null;
  walBytesPerOp: number | null;
}
export interface PgLimits {
  oneTx: PgLimit;
  /** null when the case has one send or job in flight. */
  oneTxAtOnce: PgLimit | null;
  batched: PgLimit;
}

const nullableMedian = (xs: readonly (number | null)[], digits = 1) => (xs.some((x) => x === null) ? null : round(median(xs as number[]), digits));

function medianLimit(runs: readonly PgRawResult[]): PgLimit {
  return {
    perSec: round(median(runs.map((r) => r.perSec))),
    clients: runs[0]!.clients,
    batch: runs[0]!.batch,
    cpuUsPerOp: round(median(runs.map((r) => r.cpuUsPerOp))),
    serverCpuUsPerOp: nullableMedian(runs.map((r) => r.serverCpuUsPerOp)),
    walBytesPerOp: nullableMedian(runs.map((r) => r.walBytesPerOp)),
  };
}

/** Postgres's raw limits for a case with `atOnce` in flight, `rounds` times each (medians), the 100/tx one over `jobs` jobs. */
async function pgLimits(o: { atOnce: number; durationMs: number; snapshot: (i: number) => string; jobs?: number; runs: PgRawResult[][] }): Promise<void> {
  const [one, many, batched] = o.runs as [PgRawResult[], PgRawResult[], PgRawResult[]];
  one.push(await runPgRaw({ batch: 1, durationMs: o.durationMs, snapshot: o.snapshot }));
  if (o.atOnce > 1) many.push(await runPgRaw({ batch: 1, clients: Math.min(o.atOnce, MAX_RAW_CONNECTIONS), durationMs: o.durationMs, snapshot: o.snapshot }));
  batched.push(await runPgRaw({ batch: RAW_BATCH, durationMs: o.durationMs, snapshot: o.snapshot, jobsPerClient: o.jobs ?? RAW_BATCH }));
}
const limitsOf = (runs: PgRawResult[][]): PgLimits => ({ oneTx: medianLimit(runs[0]!), oneTxAtOnce: runs[1]!.length ? medianLimit(runs[1]!) : null, batched: medianLimit(runs[2]!) });
const emptyRuns = (): PgRawResult[][] => [[], [], []];

const cpu = (here: number, server: number | null) => `${here.toFixed(0)}+${server === null ? '?' : server.toFixed(0)}`;
const limitCpu = (l: PgLimit | null, per = 1) => (l === null ? '—' : cpu(l.cpuUsPerOp * per, l.serverCpuUsPerOp === null ? null : l.serverCpuUsPerOp * per));

function printLimits(l: PgLimits, unit = 'transitions'): void {
  const one = (x: PgLimit) => `${fmtRate(x.perSec)} ${unit}/s (CPU ${limitCpu(x)} µs, WAL ${x.walBytesPerOp === null ? '?' : x.walBytesPerOp.toFixed(0)} B per transition)`;
  console.log(`  Postgres raw limit: 1/tx ×1 ${one(l.oneTx)}${l.oneTxAtOnce ? `; 1/tx ×${l.oneTxAtOnce.clients} ${one(l.oneTxAtOnce)}` : ''}; ${RAW_BATCH}/tx ${one(l.batched)}`);
}

// ---------------------------------------------------------------- 0. sequential sends

export async function sequentialPg(ctx: SectionContext, o: { durationMs: number; warmupOps: number }) {
  const load0 = loadNow();
  await benchPostgres();
  console.log(`\n== 0. Sequential sends on Postgres: await runtime.send one after another on one job, vs Postgres's raw limit`);
  console.log(`   ${ctx.rounds} round(s), raw and Spool alternating, ${o.durationMs} ms per run after ${o.warmupOps} warm-up commits, a fresh database each\n`);
  await runSpool({ ...PG, durationMs: 300, warmupOps: 50 }); // warm-up
  const spools: Awaited<ReturnType<typeof runSpool>>[] = [];
  const stores: number[] = [];
  const raws = emptyRuns();
  const snapshot = workloadSnapshot();
  for (let r = 0; r < ctx.rounds; r += 1) {
    for (const kind of r % 2 === 0 ? (['raw', 'spool'] as const) : (['spool', 'raw'] as const)) {
      ctx.gc();
      if (kind === 'raw') await pgLimits({ atOnce: 1, durationMs: o.durationMs, snapshot, runs: raws });
      else spools.push(await runSpool({ ...PG, durationMs: o.durationMs, warmupOps: o.warmupOps }));
    }
    ctx.gc();
    stores.push((await runStoreOnly({ ...PG, durationMs: o.durationMs, warmupOps: o.warmupOps })).perSec);
    process.stdout.write(`  round ${r + 1} postgres Spool ${fmtRate(spools.at(-1)!.perSec).padStart(7)}/s, raw 1/tx ${fmtRate(raws[0]!.at(-1)!.perSec).padStart(7)}/s, store-only ${fmtRate(stores.at(-1)!).padStart(7)}/s\n`);
  }
  const limits = limitsOf(raws);
  const perSec = median(spools.map((s) => s.perSec));
  const result = {
    spool: {
      transitionsPerSec: round(perSec),
      roundsPerSec: spools.map((s) => round(s.perSec)),
      latency: latency(spools.map((s) => s.latencies)),
      cpuUsPerTransition: round(median(spools.map((s) => s.cpuUsPerOp))),
      serverCpuUsPerTransition: nullableMedian(spools.map((s) => s.serverCpuUsPerOp)),
    },
    limits,
    ratioToOneTx: round(perSec / limits.oneTx.perSec, 3),
    ratioToBatched: round(perSec / limits.batched.perSec, 3),
    storeOnly: { transitionsPerSec: round(median(stores)), ratioToOneTx: round(median(stores) / limits.oneTx.perSec, 3) },
  };
  console.log('');
  printTable(
    ['store', 'Spool tx/s', 'raw 1/tx ×1', 'Spool/raw', `raw ${RAW_BATCH}/tx`, 'Spool/raw', 'store-only tx/s', '/raw 1/tx', 'send p50', 'send p99', 'CPU µs/tx Spool', 'CPU µs/tx raw 1/tx'],
    [[
      'postgres',
      fmtRate(perSec),
      fmtRate(limits.oneTx.perSec),
      fmtRatio(result.ratioToOneTx),
      fmtRate(limits.batched.perSec),
      fmtRatio(result.ratioToBatched),
      fmtRate(result.storeOnly.transitionsPerSec),
      fmtRatio(result.storeOnly.ratioToOneTx),
      fmtMs(result.spool.latency.p50Ms),
      fmtMs(result.spool.latency.p99Ms),
      cpu(result.spool.cpuUsPerTransition, result.spool.serverCpuUsPerTransition),
      limitCpu(limits.oneTx),
    ]],
  );
  printLimits(limits);
  console.log(`  store-only = Spool's store.commit alone (no engine, no read), as in the SQLite half. The bare loop is not run on Postgres: it is a SQLite-only reference (better-sqlite3's synchronous writes).`);
  const load = endNotes(load0);
  return {
    method: {
      spool: 'the SQLite half\'s runner (bench/spoolRun.ts) on a fresh Postgres database (PostgresStore.open, pool 10), the server\'s durable settings',
      limits: 'bench/pgRaw.ts: versioned UPDATE + history INSERT, 1 per transaction from 1 connection, and 100 per transaction (one round trip) from 1 connection',
      rounds: ctx.rounds,
      durationMsPerRun: o.durationMs,
    },
    ...result,
    hostLoad: load,
  };
}

// ---------------------------------------------------------------- 1. group commit

export async function groupCommitPg(ctx: SectionContext) {
  const load0 = loadNow();
  await benchPostgres();
  const durationMs = ctx.quick ? 800 : 2000;
  const modes: GroupMode[] = ['steady', 'waves'];
  console.log(`\n== 1. Group commit on Postgres: ${GROUP_JOBS} jobs sending at once through one runtime (pool 10), vs Postgres's raw limit`);
  console.log(`   steady = ${STEADY_IN_FLIGHT} sends in flight, waves = ${GROUP_JOBS}; raw 1/tx from ${STEADY_IN_FLIGHT} connections (both modes) and ${RAW_BATCH}/tx over ${GROUP_JOBS} jobs; ${ctx.rounds} round(s), ${durationMs} ms per run\n`);
  await runSpoolGroup({ ...PG, durationMs: 300, mode: 'steady', warmupWaves: 2 });
  const snapshot = workloadSnapshot();
  const raws = emptyRuns();
  const spool: Record<GroupMode, GroupRunResult[]> = { steady: [], waves: [] };
  for (let r = 0; r < ctx.rounds; r += 1) {
    for (const kind of r % 2 === 0 ? (['raw', ...modes] as const) : ([...modes, 'raw'] as const)) {
      ctx.gc();
      if (kind === 'raw') await pgLimits({ atOnce: STEADY_IN_FLIGHT, durationMs, snapshot, jobs: GROUP_JOBS, runs: raws });
      else spool[kind].push(await runSpoolGroup({ ...PG, durationMs, mode: kind }));
    }
    process.stdout.write(`  round ${r + 1} postgres steady ${fmtRate(spool.steady.at(-1)!.perSec)}/s, waves ${fmtRate(spool.waves.at(-1)!.perSec)}/s, raw ${RAW_BATCH}/tx ${fmtRate(raws[2]!.at(-1)!.perSec)}/s, 1/tx ×${STEADY_IN_FLIGHT} ${fmtRate(raws[1]!.at(-1)!.perSec)}/s\n`);
  }
  const limits = limitsOf(raws);
  const results = modes.map((mode) => {
    const runs = spool[mode];
    const perSec = median(runs.map((x) => x.perSec));
    const mid = runs.find((x) => x.perSec === perSec) ?? runs[0]!;
    const server = (pick: (s: NonNullable<GroupRunResult['server']>) => number | null, digits = 1) => nullableMedian(runs.map((x) => (x.server ? pick(x.server) : null)), digits);
    return {
      mode,
      inFlight: mode === 'steady' ? STEADY_IN_FLIGHT : GROUP_JOBS,
      spool: {
        transitionsPerSec: round(perSec),
        roundsPerSec: runs.map((x) => round(x.perSec)),
        latency: latency(runs.map((x) => x.latencies)),
        batches: mid.batches,
        cpuUsPerTransition: round(median(runs.map((x) => x.cpuUsPerOp))),
        serverCpuUsPerTransition: server((s) => s.cpuUsPerOp),
        walBytesPerTransition: server((s) => s.walBytesPerOp),
        commitsPerTransition: server((s) => s.commitsPerOp, 3),
      },
      ratioToBatched: round(perSec / limits.batched.perSec, 3),
      ratioToOneTxAtOnce: round(perSec / limits.oneTxAtOnce!.perSec, 3),
    };
  });
  console.log('');
  printTable(
    ['store', 'senders', 'Spool tx/s', `raw ${RAW_BATCH}/tx`, 'Spool/raw', `raw 1/tx ×${STEADY_IN_FLIGHT}`, 'Spool/raw', 'batch mean/p50/max', 'send p50', 'send p99', 'commits/tx', 'WAL B/tx', 'CPU µs/tx Spool', `raw ${RAW_BATCH}/tx`],
    results.map((r) => [
      'postgres',
      `${r.mode} ${r.inFlight}`,
      fmtRate(r.spool.transitionsPerSec),
      fmtRate(limits.batched.perSec),
      fmtRatio(r.ratioToBatched),
      fmtRate(limits.oneTxAtOnce!.perSec),
      fmtRatio(r.ratioToOneTxAtOnce),
      `${r.spool.batches.mean}/${r.spool.batches.p50}/${r.spool.batches.max}`,
      fmtMs(r.spool.latency.p50Ms),
      fmtMs(r.spool.latency.p99Ms),
      r.spool.commitsPerTransition === null ? '?' : r.spool.commitsPerTransition.toFixed(3),
      r.spool.walBytesPerTransition === null ? '?' : r.spool.walBytesPerTransition.toFixed(0),
      cpu(r.spool.cpuUsPerTransition, r.spool.serverCpuUsPerTransition),
      limitCpu(limits.batched),
    ]),
  );
  printLimits(limits);
  console.log('  commits/tx = COMMIT records Postgres wrote to its WAL (pg_walinspect; write transactions, a savepoint is not one) per transition; WAL B/tx = pg_current_wal_lsn() moved, over the timed part.');
  console.log('  SQLite\'s WAL pages/tx (its -wal file\'s frames) and µs in commit/engine splits have no Postgres counterpart here: the store\'s calls wait on the network, not only on the disk.');
  console.log(`  The bare loop is SQLite-only. The waves' ${GROUP_JOBS} senders are compared with ${STEADY_IN_FLIGHT} raw connections (the cap of this limit).`);
  const load = endNotes(load0);
  return {
    method: {
      spool: 'the SQLite half\'s runner (bench/groupCommit.ts) on a fresh Postgres database (PostgresStore.open, pool 10), the server\'s durable settings',
      limits: `bench/pgRaw.ts: 1/tx from 1 and from ${STEADY_IN_FLIGHT} connections, ${RAW_BATCH}/tx over ${GROUP_JOBS} jobs from 1 connection`,
      rounds: ctx.rounds,
      durationMsPerRun: durationMs,
    },
    limits,
    results,
    hostLoad: load,
  };
}

// ---------------------------------------------------------------- 2. jobs

type Summary = ReturnType<typeof summary>;
function summary(runs: readonly JobsRunResult[]) {
  const commits = runs.map((r) => r.commitsPerJob);
  return {
    jobsPerSec: round(median(runs.map((r) => r.jobsPerSec))),
    roundsPerSec: runs.map((r) => round(r.jobsPerSec)),
    jobs: runs.reduce((n, r) => n + r.jobs, 0),
    cpuUsPerJob: round(median(runs.map((r) => r.cpuUsPerJob))),
    serverCpuUsPerJob: nullableMedian(runs.map((r) => r.serverCpuUsPerJob)),
    commitsPerJob: commits.some((c) => c === null) ? null : round(median(commits as number[]), 3),
    startToFinal: latency(runs.map((r) => r.latencies)),
  };
}

/** A raw limit in jobs: a job of `steps` activities is steps + 1 transitions (its start counted as one UPDATE + INSERT). */
const perJob = (l: PgLimit | null, shape: JobShape) => (l === null ? null : { ...l, jobsPerSec: round(l.perSec / (shape.steps + 1)) });

/** Postgres's raw limits for jobs of `shape` (medians of `rounds` measurements), in jobs/s: 1/tx ×1, 1/tx ×`atOnce` (null when 1) and 100/tx. */
export async function pgJobLimits(shape: JobShape, atOnce: number, durationMs: number, rounds = 1) {
  const raws = emptyRuns();
  for (let r = 0; r < rounds; r += 1) await pgLimits({ atOnce, durationMs, snapshot: shape.snapshot, runs: raws });
  const l = limitsOf(raws);
  return { oneTx: perJob(l.oneTx, shape)!, oneTxAtOnce: perJob(l.oneTxAtOnce, shape), batched: perJob(l.batched, shape)! };
}
export type PgJobLimits = Awaited<ReturnType<typeof pgJobLimits>>;

export async function jobsPg(ctx: SectionContext) {
  const load0 = loadNow();
  await benchPostgres();
  const rounds = ctx.quick ? 1 : 2;
  const ms = ctx.quick ? { spool: 500, baseline: 300, raw: 300, light: 1000 } : { spool: 2500, baseline: 1500, raw: 1000, light: 4000 };
  // SQLite's light load is 100 jobs/s; Spool on Postgres does fewer than that here at all (see the grid), so 100/s would
  // measure a growing queue, not a light load: Postgres's is 10 jobs/s.
  const lightPerSec = 10;
  console.log(`\n== 2. Jobs on Postgres: the same activity jobs (${JOB_SHAPES.map((s) => s.name).join(', ')}; ${AT_ONCE.join(' and ')} at once), runWorker in the same process, PostgresStore (pool 10)`);
  console.log(`   beside Postgres's raw limit (in jobs/s = transitions/s ÷ (steps + 1)) and the afternoon baseline on Postgres (pool min(N, 10)); ${rounds} round(s); light load ${lightPerSec} jobs/s for ${ms.light} ms\n`);
  await runSpoolJobs({ ...PG, shape: JOB_SHAPES[0]!, atOnce: 8, durationMs: 200, warmupJobs: 16 });
  const rows = [];
  for (const shape of JOB_SHAPES) {
    const limits = await pgJobLimits(shape, Math.max(...AT_ONCE), ms.raw, rounds);
    for (const atOnce of AT_ONCE) {
      const spools: JobsRunResult[] = [];
      const baselines: JobsRunResult[] = [];
      for (let r = 0; r < rounds; r += 1) {
        for (const kind of r % 2 === 0 ? (['spool', 'baseline'] as const) : (['baseline', 'spool'] as const)) {
          ctx.gc();
          if (kind === 'spool') spools.push(await runSpoolJobs({ ...PG, shape, atOnce, durationMs: ms.spool }));
          else baselines.push(await runBaseline({ ...PG, shape, loops: atOnce, durationMs: ms.baseline }));
        }
      }
      const spool = summary(spools);
      const baseline = summary(baselines);
      const oneTx = (atOnce === 1 ? limits.oneTx : limits.oneTxAtOnce)!;
      const batched = limits.batched;
      process.stdout.write(`  postgres ${shape.name} ${String(atOnce).padStart(2)} at once  Spool ${fmtRate(spool.jobsPerSec).padStart(7)} jobs/s, baseline ${fmtRate(baseline.jobsPerSec).padStart(7)}, raw 1/tx ×${oneTx.clients} ${fmtRate(oneTx.jobsPerSec)}, ${RAW_BATCH}/tx ${fmtRate(batched.jobsPerSec)}\n`);
      rows.push({
        job: shape.name,
        steps: shape.steps,
        atOnce,
        spool,
        baseline,
        limits: { oneTx, batched },
        ratioToOneTx: round(spool.jobsPerSec / oneTx.jobsPerSec, 3),
        ratioToBatched: round(spool.jobsPerSec / batched.jobsPerSec, 3),
        ratioToBaseline: round(spool.jobsPerSec / baseline.jobsPerSec, 3),
      });
    }
  }
  const light = [];
  for (const shape of JOB_SHAPES) {
    ctx.gc();
    const run = await runLightLoad({ ...PG, shape, perSec: lightPerSec, durationMs: ms.light });
    light.push({ job: shape.name, perSec: lightPerSec, ...summary([run]), startLagMs: { p99: round(run.lagMs.p99, 3), max: round(run.lagMs.max, 3) } });
    process.stdout.write(`  light postgres ${shape.name} ${lightPerSec}/s  start→final p50 ${fmtMs(Samples.summarize([run.latencies]).p50Ms)} p99 ${fmtMs(Samples.summarize([run.latencies]).p99Ms)}\n`);
  }
  printJobs(rows, light);
  console.log(`  light load on Postgres: ${lightPerSec} jobs/s (SQLite's is 100/s: above what Spool on Postgres finishes per second on this host, see the grid).`);
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      spool: 'the SQLite half\'s runner (bench/jobsRun.ts) on a fresh Postgres database (PostgresStore.open, pool 10), the server\'s durable settings',
      baseline: 'bench/baseline.ts on Postgres: autocommit INSERT / versioned UPDATE per snapshot change, pool min(N, 10), each job\'s writes chained',
      limits: `bench/pgRaw.ts in transitions/s ÷ (steps + 1): 1/tx from 1 connection (beside 1 at once) and from ${Math.max(...AT_ONCE)} (beside ${Math.max(...AT_ONCE)} at once), ${RAW_BATCH}/tx from 1`,
      commits: 'COMMIT records in the WAL over the timed part (pg_get_wal_stats, pg_walinspect), per job',
      rounds,
      durationMs: ms,
    },
    results: rows,
    lightLoad: light,
    hostLoad: load,
  };
}

function printJobs(rows: readonly { job: string; steps: number; atOnce: number; spool: Summary; baseline: Summary; limits: { oneTx: PgLimit & { jobsPerSec: number }; batched: PgLimit & { jobsPerSec: number } }; ratioToOneTx: number; ratioToBatched: number; ratioToBaseline: number }[], light: readonly (Summary & { job: string; perSec: number; startLagMs: { p99: number } })[]): void {
  const c = (s: Summary) => cpu(s.cpuUsPerJob, s.serverCpuUsPerJob);
  console.log('');
  printTable(
    ['store', 'job', 'at once', 'Spool jobs/s', 'raw 1/tx', 'Spool/raw', `raw ${RAW_BATCH}/tx`, 'Spool/raw', 'baseline', 'Spool/base', 'CPU µs/job Spool', 'baseline', 'raw 1/tx', 'commits/job Spool/base', 'Spool p50 / p99'],
    rows.map((r) => [
        'postgres',
        r.job,
        String(r.atOnce),
        fmtRate(r.spool.jobsPerSec),
        `${fmtRate(r.limits.oneTx.jobsPerSec)} ×${r.limits.oneTx.clients}`,
        fmtRatio(r.ratioToOneTx),
        fmtRate(r.limits.batched.jobsPerSec),
        fmtRatio(r.ratioToBatched),
        fmtRate(r.baseline.jobsPerSec),
        fmtRatio(r.ratioToBaseline),
        c(r.spool),
        c(r.baseline),
        limitCpu(r.limits.oneTx, r.steps + 1),
        `${r.spool.commitsPerJob?.toFixed(2) ?? '?'}/${r.baseline.commitsPerJob?.toFixed(2) ?? '?'}`,
        `${fmtMs(r.spool.startToFinal.p50Ms)} / ${fmtMs(r.spool.startToFinal.p99Ms)}`,
    ]),
  );
  console.log('  raw 1/tx ×N = one transaction per write from N connections, N = the jobs at once; raw jobs/s = its transitions/s ÷ (steps + 1).');
  console.log('  commits/job = COMMIT records in Postgres\'s WAL per job (pg_walinspect: write transactions, whoever made them; the baseline\'s autocommit writes are one each; "?" = no pg_walinspect).');
  console.log(NOTE_CPU);
  console.log('');
  printTable(
    ['light load', 'job', 'started/s', 'jobs', 'start→final p50', 'p99', 'max', 'CPU µs/job', 'commits/job', 'start lag p99'],
    light.map((l) => [
      'postgres',
      l.job,
      String(l.perSec),
      String(l.jobs),
      fmtMs(l.startToFinal.p50Ms),
      fmtMs(l.startToFinal.p99Ms),
      fmtMs(l.startToFinal.maxMs),
      c(l),
      l.commitsPerJob?.toFixed(2) ?? '?',
      fmtMs(l.startLagMs.p99),
    ]),
  );
  console.log(NOTE_NO_TARGETS);
}

// ---------------------------------------------------------------- 4. path testing

export async function pathTestingPg(ctx: SectionContext) {
  const load0 = loadNow();
  const server = await benchPostgres();
  console.log(`\n== 4. Path testing on Postgres: runPathTests({ db: the bench's server }): every path run in a new database, dropped after it (as spool test --db postgres://)`);
  if (ctx.quick) {
    console.log('   --quick: not run (every path run creates and drops a database: over a minute on a busy 2-core host); the full bench runs it');
    return { notRun: '--quick: path testing on Postgres runs in the full bench only' };
  }
  const inventory = await pathInventory();
  const configs: PathConfig[] = ['plain', 'restart', 'child'];
  // What a path run pays on Postgres that a SQLite run does not: its database's CREATE and DROP.
  const t0 = performance.now();
  await (await scratchDatabase(server.url, 'spool_bench')).drop();
  const scratchMs = performance.now() - t0;
  console.log(`   ${inventory.machines} machines, ${inventory.paths} paths, ${inventory.steps} steps; no untimed warm-up run (the SQLite half's, if it ran, warmed the JIT); CREATE + DROP DATABASE ${fmtMs(scratchMs)} once\n`);
  const rows = [];
  for (const config of configs) {
    ctx.gc();
    const r = await runPathTesting(config, inventory.steps, server.url);
    const extra = r.config === 'plain' ? null : r.config;
    rows.push({
      config,
      ok: r.ok,
      wallMs: round(r.wallMs),
      plainReplayMs: round(r.replayMs.plain),
      plainPathsPerSec: round(r.runs.plain / (r.replayMs.plain / 1000)),
      extraRuns: extra === null ? 0 : r.runs[extra],
      extraReplayMs: extra === null ? 0 : round(r.replayMs[extra]),
      pathRunsPerSec: round(r.pathRunsPerSec, 2),
      failures: r.failures,
    });
    process.stdout.write(`  postgres ${config.padEnd(8)} ${fmtMs(r.wallMs)} wall, ok ${r.ok}\n`);
    for (const f of r.failures.slice(0, 5)) console.log(`    failure: ${f}`);
  }
  console.log('');
  printTable(
    ['store', 'config', 'plain replay', 'paths/s plain', 'crash replay runs', 'crash replay', 'wall', 'all path runs/s', 'ok'],
    rows.map((r) => [
      'postgres',
      r.config === 'plain' ? 'no crash replay' : r.config === 'restart' ? '+ restart between steps' : '+ 1 child-crash path/machine',
      fmtMs(r.plainReplayMs),
      r.plainPathsPerSec.toFixed(1),
      String(r.extraRuns),
      r.config === 'plain' ? '—' : fmtMs(r.extraReplayMs),
      fmtMs(r.wallMs),
      r.pathRunsPerSec.toFixed(1),
      r.ok ? 'yes' : 'NO',
    ]),
  );
  console.log(`  Each path run on Postgres includes CREATE DATABASE and DROP DATABASE (${fmtMs(scratchMs)} measured once; the SQLite half: a new file). No speed target.`);
  const load = hostLoad(load0);
  printLoadNote(load, 'times');
  return { method: { db: 'runPathTests({ db: <server URL> }): a scratch database per path run', configsRun: configs, createDropDatabaseMs: round(scratchMs) }, inventory, results: rows, hostLoad: load };
}

// ---------------------------------------------------------------- 3. restart

/** The restart section on Postgres: the SQLite half's own code with the store as its parameter (bench/sections.ts). */
export async function restartPg(ctx: SectionContext) {
  await benchPostgres();
  return restartSection(ctx, 'postgres');
}
