/**
 * The queue section (`npm run bench -- --only queue`; issue 32): a backlog of N jobs drained by
 * workers in the same process (bench/queueRun.ts), two ways: enqueued by 32 producers while the
 * workers drain (while-draining), and all enqueued first (then-drain). 1- and 3-step jobs of
 * no-op activities, c1 and c16 activities at once (c64 with --queue-full), and at c16 3-step jobs
 * whose activities take a random 0-4 ms (they end at different moments) and 3-step jobs one step in
 * five of which fails its first attempt (retried after the backoff, 50 ms), NORMAL and FULL, on
 * the stores --store names. Backlogs: 500 and 2k (--quick), 1k and 10k, or 1k, 10k and 100k
 * (--queue-full); c1 runs the smallest only (a job at a time: minutes per 10k). Each run (Spool's
 * and the afternoon loop's) follows the same case run unmetered with WARMUP_JOBS jobs.
 *
 * Beside each case, in the same run: raw SQLite doing the same writes 100 to a transaction
 * (bench/rawBatch.ts) and the afternoon loop (bench/queueRun.ts), as ratios; Postgres rows also
 * beside Postgres's raw limit on the same server (`pgJobLimits`: 1/tx from c connections, and
 * 100/tx). Each case reports jobs/s, CPU µs/job, statements and commits per job, and the growth
 * of CPU per job from the smallest backlog to the largest.
 *
 * Then the starts (bench/queueRun.ts `runStarts`): N jobs enqueued and nothing else, by `start`
 * 64 in flight and by `startMany` in batches of 100 (one call at a time), at NORMAL: starts/s, CPU µs, statements and
 * commits per start, against the CPU-per-start target (bench/targets.ts).
 * The remote worker's line is its own section (bench/remoteSection.ts, `--only remote`).
 */
import { RAW_BATCH } from './groupCommit.ts';
import { JOB_SHAPES, RETRY_SHAPE, TIMED_SHAPE } from './jobsRun.ts';
import { runAfternoonQueue, runSpoolQueue, runStarts, WARMUP_JOBS, type QueueCase, type QueueMode, type QueueResult } from './queueRun.ts';
import { runRawJobs } from './rawBatch.ts';
import { SETTINGS } from './rawRun.ts';
import { fmtRate, hostLoad, loadNow, printLoadNote, printTable, round } from './format.ts';
import type { SectionContext } from './sections.ts';
import { check, TARGETS } from './targets.ts';
import { pgJobLimits, type PgJobLimits } from './pgSections.ts';

export async function queueSection(ctx: SectionContext & { queueFull: boolean }) {
  const load0 = loadNow();
  const backlogs = ctx.quick ? [500, 2000] : ctx.queueFull ? [1000, 10_000, 100_000] : [1000, 10_000];
  const concurrencies = ctx.queueFull ? [1, 16, 64] : [1, 16];
  console.log(`\n== Queue: N jobs drained by runWorker in the same process (producers 32 in flight), backlogs ${backlogs.join(', ')}; stores ${ctx.stores.join(', ')}`);
  const rows: ReturnType<typeof row>[] = [];
  for (const synchronous of SETTINGS) {
    for (const shape of [...JOB_SHAPES, TIMED_SHAPE, RETRY_SHAPE]) {
      ctx.gc();
      const raw = runRawJobs({ synchronous, durationMs: ctx.quick ? 200 : 1000, steps: shape.steps, batch: RAW_BATCH, snapshot: shape.snapshot });
      // Postgres's own raw limit for this shape, on the same server (its rows run at NORMAL only).
      const rawPg = synchronous === 'NORMAL' && ctx.stores.includes('postgres')
        ? await pgJobLimits(shape, Math.max(...concurrencies), ctx.quick ? 300 : 1000)
        : undefined;
      for (const c of concurrencies) {
        for (const mode of ['while-draining', 'then-drain'] as QueueMode[]) {
          if (mode === 'then-drain' && (c !== 16 || shape.steps !== 3 || shape.work)) continue;
          if (shape.work && c !== 16) continue; // the timed and retried shapes: c16 only (at c1 their waits, not Spool, set the rate)
          const sizes = c === 1 ? backlogs.slice(0, 1) : backlogs;
          for (const store of ctx.stores) {
            if (store === 'postgres' && synchronous === 'FULL') continue; // synchronous is SQLite's setting
            const runs: QueueResult[] = [];
            let afternoon: QueueResult | null = null;
            for (const backlog of sizes) {
              const k = { store, synchronous, shape, concurrency: c, backlog, mode };
              ctx.gc();
              runs.push(await warmed(runSpoolQueue, k));
              if (backlog === sizes.at(-1)) afternoon = await warmed(runAfternoonQueue, k);
            }
            const r = row({ store, synchronous, job: shape.name, concurrency: c, mode, backlogs: sizes, runs, afternoon: afternoon!, rawJobsPerSec: raw.jobsPerSec, rawPg: store === 'postgres' ? rawPg : undefined });
            rows.push(r);
            process.stdout.write(`  ${store.padEnd(8)} ${synchronous.padEnd(6)} ${shape.name} c${String(c).padEnd(2)} ${mode.padEnd(14)} ${fmtRate(r.jobsPerSec).padStart(7)} jobs/s  CPU ${r.cpuUsPerJob} µs/job  growth ${r.cpuGrowth ?? '—'}\n`);
          }
        }
      }
    }
  }
  print(rows);
  const starts = await startsPart(ctx);
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      shape: 'N jobs enqueued by 32 producers (runtime.start) while runWorker drains them (while-draining), or all enqueued by a runtime that runs no activities and then drained by a fresh runtime + runWorker (then-drain); first enqueue → last final commit',
      cpu: 'process.cpuUsage() per job over the whole run (producers, runtime, worker, SQLite); Postgres: server CPU separately',
      statements: 'better-sqlite3 run/get/all/iterate and pg Client.query calls per job (bench/countingStore.ts)',
      raw: `better-sqlite3, the same writes ${RAW_BATCH} jobs to a transaction (bench/rawBatch.ts)`,
      rawPostgres: `Postgres rows: Postgres's raw limit on the same server (bench/pgRaw.ts: the versioned UPDATE + history INSERT per transition), 1/tx from c connections and ${RAW_BATCH}/tx, in jobs/s = transitions/s ÷ (steps + 1)`,
      afternoon: 'SQLite, one row per job, claim by UPDATE … RETURNING, one UPDATE per step, c loops, the same producers (bench/queueRun.ts), at the largest backlog',
      backlogs,
      warmup: `each run follows the same case run unmetered with ${WARMUP_JOBS} jobs`,
    },
    results: rows,
    starts: starts.rows,
    targets: starts.targets,
    hostLoad: load,
  };
}

/** One run of a case, after the same case run unmetered with {@link WARMUP_JOBS} jobs. */
async function warmed(run: (k: QueueCase) => Promise<QueueResult>, k: QueueCase): Promise<QueueResult> {
  await run({ ...k, backlog: WARMUP_JOBS });
  return run(k);
}

/** The starts: `start` 64 in flight and `startMany` by 100, NORMAL, no worker (see the file's comment). */
async function startsPart(ctx: SectionContext) {
  const jobs = ctx.quick ? 2000 : 10_000;
  const shape = JOB_SHAPES.find((s) => s.steps === 3)!;
  const ways = [{ way: 'start', inFlight: 64, batch: 1 }, { way: 'startMany', inFlight: 1, batch: 100 }];
  console.log(`\n== Starts: ${jobs} ${shape.name} jobs enqueued, no worker running, NORMAL (CPU target ≤ ${TARGETS.cpuUsPerStartNormal} µs per start)`);
  const rows = [];
  for (const store of ctx.stores) {
    for (const w of ways) {
      ctx.gc();
      const r = await runStarts({ store, synchronous: 'NORMAL', shape, jobs, inFlight: w.inFlight, batch: w.batch });
      rows.push({
        store, way: w.way, inFlight: w.inFlight, batch: w.batch, jobs,
        startsPerSec: round(r.jobsPerSec), cpuUsPerStart: round(r.cpuUsPerJob, 0),
        serverCpuUsPerStart: r.serverCpuUsPerJob === null ? null : round(r.serverCpuUsPerJob, 0),
        statementsPerStart: round(r.statementsPerJob, 2), commitsPerStart: r.commitsPerJob === null ? null : round(r.commitsPerJob, 3),
        cpuToTarget: round(r.cpuUsPerJob / TARGETS.cpuUsPerStartNormal, 2),
      });
    }
  }
  printTable(
    ['store', 'way', 'in flight', 'batch', 'starts/s', 'CPU µs/start', 'stmts/start', 'commits/start', `CPU / ${TARGETS.cpuUsPerStartNormal} µs`],
    rows.map((r) => [
      r.store, r.way, String(r.inFlight), String(r.batch), fmtRate(r.startsPerSec),
      `${r.cpuUsPerStart}${r.serverCpuUsPerStart === null ? '' : ` +${r.serverCpuUsPerStart} server`}`,
      String(r.statementsPerStart), r.commitsPerStart === null ? '—' : String(r.commitsPerStart), r.cpuToTarget.toFixed(2),
    ]),
  );
  // The target is SQLite's (NORMAL is its setting); a Postgres row is reported beside it.
  const targets = rows.filter((r) => r.store === 'sqlite').map((r) => check(`${r.way}, ${r.inFlight} in flight${r.batch > 1 ? ` × ${r.batch}` : ''}, NORMAL, no worker: CPU µs per start`, r.cpuUsPerStart, { max: TARGETS.cpuUsPerStartNormal }));
  return { rows, targets };
}

function row(r: { store: string; synchronous: string; job: string; concurrency: number; mode: QueueMode; backlogs: number[]; runs: QueueResult[]; afternoon: QueueResult; rawJobsPerSec: number; rawPg: PgJobLimits | undefined }) {
  const last = r.runs.at(-1)!;
  // 1/tx from as many connections as the case runs activities at once (c1: one), and 100/tx.
  const pgOneTx = r.rawPg && (r.concurrency === 1 ? r.rawPg.oneTx : r.rawPg.oneTxAtOnce);
  return {
    store: r.store,
    synchronous: r.synchronous,
    job: r.job,
    concurrency: r.concurrency,
    mode: r.mode,
    backlog: r.backlogs.at(-1)!,
    jobsPerSec: round(last.jobsPerSec),
    cpuUsPerJob: round(last.cpuUsPerJob, 0),
    serverCpuUsPerJob: last.serverCpuUsPerJob === null ? null : round(last.serverCpuUsPerJob, 0),
    statementsPerJob: round(last.statementsPerJob, 2),
    commitsPerJob: last.commitsPerJob === null ? null : round(last.commitsPerJob, 2),
    byBacklog: r.runs.map((x, i) => ({ backlog: r.backlogs[i]!, jobsPerSec: round(x.jobsPerSec), cpuUsPerJob: round(x.cpuUsPerJob, 0) })),
    /** CPU per job at the largest backlog over the smallest's (null: one backlog). */
    cpuGrowth: r.runs.length > 1 ? round(last.cpuUsPerJob / r.runs[0]!.cpuUsPerJob, 2) : null,
    afternoon: { jobsPerSec: round(r.afternoon.jobsPerSec), cpuUsPerJob: round(r.afternoon.cpuUsPerJob, 0), statementsPerJob: round(r.afternoon.statementsPerJob, 2), commitsPerJob: r.afternoon.commitsPerJob },
    rawJobsPerSec: round(r.rawJobsPerSec),
    ratioToAfternoon: round(last.jobsPerSec / r.afternoon.jobsPerSec, 3),
    ratioToRaw: round(last.jobsPerSec / r.rawJobsPerSec, 3),
    rawPostgres: r.rawPg && pgOneTx
      ? {
          oneTx: { clients: pgOneTx.clients, jobsPerSec: pgOneTx.jobsPerSec, ratio: round(last.jobsPerSec / pgOneTx.jobsPerSec, 3) },
          batched: { jobsPerSec: r.rawPg.batched.jobsPerSec, ratio: round(last.jobsPerSec / r.rawPg.batched.jobsPerSec, 3) },
        }
      : null,
  };
}

function print(rows: readonly ReturnType<typeof row>[]): void {
  console.log('');
  printTable(
    ['store', 'sync', 'job', 'c', 'mode', 'backlog', 'jobs/s', 'CPU µs/job', 'growth', 'stmts/job', 'commits/job', 'afternoon jobs/s', '/afternoon', `raw ${RAW_BATCH}/tx`, '/raw'],
    rows.map((r) => [
      r.store, r.synchronous, r.job, String(r.concurrency), r.mode, String(r.backlog), fmtRate(r.jobsPerSec),
      `${r.cpuUsPerJob}${r.serverCpuUsPerJob === null ? '' : ` +${r.serverCpuUsPerJob} server`}`, r.cpuGrowth === null ? '—' : `×${r.cpuGrowth}`,
      String(r.statementsPerJob), r.commitsPerJob === null ? '—' : String(r.commitsPerJob), fmtRate(r.afternoon.jobsPerSec),
      r.ratioToAfternoon.toFixed(3), fmtRate(r.rawJobsPerSec), r.ratioToRaw.toFixed(3),
    ]),
  );
  console.log('  growth = CPU µs/job at the largest backlog / at the smallest; the afternoon loop and raw SQLite run on SQLite at the same setting (Postgres rows compare with them too).');
  const pgRows = rows.filter((r) => r.rawPostgres !== null);
  if (pgRows.length === 0) return;
  console.log('\n  Postgres rows beside Postgres\'s raw limit on the same server, in the same run (jobs/s = transitions/s ÷ (steps + 1)):');
  printTable(
    ['job', 'c', 'mode', 'jobs/s', 'raw 1/tx ×c', '/raw 1/tx', `raw ${RAW_BATCH}/tx`, `/raw ${RAW_BATCH}/tx`],
    pgRows.map((r) => [
      r.job, String(r.concurrency), r.mode, fmtRate(r.jobsPerSec),
      `${fmtRate(r.rawPostgres!.oneTx.jobsPerSec)} (×${r.rawPostgres!.oneTx.clients})`, r.rawPostgres!.oneTx.ratio.toFixed(3),
      fmtRate(r.rawPostgres!.batched.jobsPerSec), r.rawPostgres!.batched.ratio.toFixed(3),
    ]),
  );
  console.log(`  graphile-worker and pg-boss commit at least once per job step from c connections (a claim, then a completion): raw 1/tx ×c bounds them from above.`);
}
