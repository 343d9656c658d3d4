/**
 * Section 2, jobs: what a job runtime is for. Activity jobs (1 or 3 steps, each a no-work
 * `fromPromise`; bench/workerMachines.ts) started with `runtime.start` and run by `runWorker` to
 * their final state (bench/jobsRun.ts), on a grid of FULL / NORMAL × 1-step / 3-step × 1 / 64
 * at once ("N at once" = N jobs in flight, N loops each awaiting its job's end before the next,
 * and `maxConcurrentActivities: N`). Beside each case, in the same run:
 *
 *   raw       better-sqlite3 doing the same writes (per job a job INSERT + history INSERT, then per
 *             step a versioned UPDATE + history INSERT) for 100 jobs in flight, 100 to a
 *             transaction (bench/rawBatch.ts runRawJobs): one figure per setting and shape
 *   baseline  the afternoon baseline (bench/baseline.ts): createActor + getPersistedSnapshot +
 *             a versioned UPDATE after every snapshot change, N loops
 *
 * and a light-load case: jobs started at a steady 100/s by the real clock at FULL, p50/p99 start → final,
 * beside the disk's floor: raw SQLite making the same chain of commits per job, one after another.
 */
import { RAW_BATCH } from './groupCommit.ts';
import { AT_ONCE, JOB_SHAPES, runLightLoad, runSpoolJobs, type JobShape, type JobsRunResult } from './jobsRun.ts';
import { runBaseline } from './baseline.ts';
import { runRawJobs, runRawLight, type RawJobsResult } from './rawBatch.ts';
import { SETTINGS, type Synchronous } from './rawRun.ts';
import { latencySummary as latency, median, Samples } from './stats.ts';
import { check, TARGETS, type TargetCheck } from './targets.ts';
import { fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round } from './format.ts';
import type { SectionContext } from './sections.ts';

const LIGHT_PER_SEC = 100;

/** Medians over rounds; latencies pooled. */
function summary(runs: readonly (JobsRunResult | RawJobsResult)[]) {
  const commits = runs.map((r) => r.commitsPerJob).filter((c): c is number => c !== null);
  return {
    jobsPerSec: round(median(runs.map((r) => r.jobsPerSec))),
    roundsPerSec: runs.map((r) => round(r.jobsPerSec)),
    jobs: runs.reduce((n, r) => n + r.jobs, 0),
    cpuUsPerJob: round(median(runs.map((r) => r.cpuUsPerJob))),
    commitsPerJob: commits.length ? round(median(commits), 3) : null,
    startToFinal: latency(runs.map((r) => ('latencies' in r ? r.latencies : r.jobLatencies))),
  };
}
type Summary = ReturnType<typeof summary>;

interface CaseRow {
  synchronous: Synchronous;
  job: string;
  steps: number;
  atOnce: number;
  spool: Summary;
  baseline: Summary;
  raw: Summary;
  /** Spool jobs/s over raw SQLite's, the same writes 100 to a transaction. */
  ratioToRaw: number;
  /** Spool jobs/s over the afternoon baseline's. */
  ratioToBaseline: number;
}

export async function jobsSection(ctx: SectionContext) {
  const load0 = loadNow();
  const rounds = ctx.quick ? 1 : 2;
  const ms = ctx.quick ? { spool: 500, baseline: 300, raw: 200, light: 1000 } : { spool: 2500, baseline: 1500, raw: 1000, light: 4000 };
  printHeader(ctx, rounds, ms);
  // JIT warm-up of every path, untimed.
  await runSpoolJobs({ synchronous: 'NORMAL', shape: JOB_SHAPES[0]!, atOnce: 8, durationMs: 200, warmupJobs: 16 });
  await runBaseline({ synchronous: 'NORMAL', shape: JOB_SHAPES[0]!, loops: 8, durationMs: 100 });
  const rows: CaseRow[] = [];
  for (const synchronous of SETTINGS) {
    for (const shape of JOB_SHAPES) {
      const raws: RawJobsResult[] = [];
      for (let r = 0; r < rounds; r += 1) {
        ctx.gc();
        raws.push(runRawJobs({ synchronous, durationMs: ms.raw, steps: shape.steps, batch: RAW_BATCH, snapshot: shape.snapshot }));
      }
      const raw = summary(raws);
      process.stdout.write(`  ${synchronous.padEnd(6)} ${shape.name}  raw ${RAW_BATCH}/tx ${fmtRate(raw.jobsPerSec).padStart(7)} jobs/s\n`);
      for (const atOnce of AT_ONCE) rows.push(await runCase(ctx, { synchronous, shape, atOnce, rounds, ms, raw }));
    }
  }
  const light: { job: string; run: Awaited<ReturnType<typeof runLightLoad>>; raw: Awaited<ReturnType<typeof runRawLight>> }[] = [];
  for (const shape of JOB_SHAPES) {
    ctx.gc();
    const raw = await runRawLight({ synchronous: 'FULL', steps: shape.steps, perSec: LIGHT_PER_SEC, durationMs: ms.light, snapshot: shape.snapshot });
    ctx.gc();
    const run = await runLightLoad({ synchronous: 'FULL', shape, perSec: LIGHT_PER_SEC, durationMs: ms.light });
    light.push({ job: shape.name, run, raw });
    const [s, r] = [Samples.summarize([run.latencies]), Samples.summarize([raw.latencies])];
    process.stdout.write(`  light  FULL   ${shape.name}  ${LIGHT_PER_SEC}/s  start→final p50 ${fmtMs(s.p50Ms)} p99 ${fmtMs(s.p99Ms)}; raw, the same commits: p50 ${fmtMs(r.p50Ms)} p99 ${fmtMs(r.p99Ms)}\n`);
  }
  const lightLoad = light.map(({ job, run, raw }) => ({
    job,
    synchronous: 'FULL' as const,
    perSec: LIGHT_PER_SEC,
    ...summary([run]),
    startLagMs: { p99: round(run.lagMs.p99, 3), max: round(run.lagMs.max, 3) },
    raw: { startToFinal: latency([raw.latencies]), cpuUsPerJob: round(raw.cpuUsPerJob) },
  }));
  printResults(rows, lightLoad);
  // Printed with every other section's at the end of the run (bench/index.ts).
  const targets = targetChecks(rows, lightLoad);
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      jobs: Object.fromEntries(JOB_SHAPES.map((s) => [s.name, s.def.description])),
      atOnce: 'N at once = N jobs in flight (N loops, each starting a job and awaiting its final state before the next) and maxConcurrentActivities: N',
      spool:
        'one runtime per run: SqliteStore.open(tmp, { synchronous }) + createRuntime (defaults but maxConcurrentActivities) + runWorker(runtime) (default poll) in the same process; ' +
        'runtime.start, the end seen through runtime.subscribe (job.committed with job.final)',
      raw: `better-sqlite3: per job a job INSERT + history INSERT, then per step a versioned UPDATE + history INSERT; ${RAW_BATCH} jobs in flight, one write of each per BEGIN IMMEDIATE transaction (${RAW_BATCH} to a transaction)`,
      baseline: 'per job createActor(the same machine) subscribed before start; after every snapshot change getPersistedSnapshot() → JSON → INSERT (first) or UPDATE … WHERE id = ? AND version = ? (autocommit); N loops',
      lightLoad: `${LIGHT_PER_SEC} jobs/s started by the real clock (setTimeout to each slot, not awaiting earlier jobs) for ${ms.light} ms at FULL, runtime defaults (8 activities at once); raw: better-sqlite3 at FULL, the same rate, per job its own chain of transactions one after another (job INSERT + history INSERT, then per step after an event-loop turn a versioned UPDATE + history INSERT): the disk's floor for Spool's 1 + steps commits per job`,
      cpu: 'process.cpuUsage() over the timed part / jobs finished: everything in this one process (starter loops, runtime, worker, SQLite); for raw, SQLite and its loop only',
      commits: 'write transactions committed to the database over the timed part, read from SQLite\'s wal-index change counter (bench/walCommits.ts), per job',
      rounds,
      durationMs: ms,
    },
    results: rows,
    lightLoad,
    targets,
    hostLoad: load,
  };
}

function printHeader(ctx: SectionContext, rounds: number, ms: { spool: number; baseline: number; raw: number; light: number }): void {
  console.log(`\n== 2. Jobs: activity jobs from runtime.start to their final state, run by runWorker in the same process`);
  for (const s of JOB_SHAPES) console.log(`   ${s.name}  ${s.def.description}`);
  console.log(`   N at once = N jobs in flight and maxConcurrentActivities N (N = ${AT_ONCE.join(', ')}); beside each: raw SQLite, the same writes ${RAW_BATCH} to a transaction,`);
  console.log(`   and the afternoon baseline (createActor + getPersistedSnapshot + versioned UPDATE per snapshot change, N loops).`);
  console.log(`   ${rounds} round(s); ${ms.spool} ms per Spool run, ${ms.baseline} ms baseline, ${ms.raw} ms raw; light load ${LIGHT_PER_SEC} jobs/s for ${ms.light} ms at FULL${ctx.quick ? ' (--quick)' : ''}\n`);
}

async function runCase(
  ctx: SectionContext,
  c: { synchronous: Synchronous; shape: JobShape; atOnce: number; rounds: number; ms: { spool: number; baseline: number }; raw: Summary },
): Promise<CaseRow> {
  const spools: JobsRunResult[] = [];
  const baselines: JobsRunResult[] = [];
  for (let r = 0; r < c.rounds; r += 1) {
    // Alternate which goes first, so neither always meets the other's leftovers (page cache, GC).
    for (const kind of r % 2 === 0 ? (['spool', 'baseline'] as const) : (['baseline', 'spool'] as const)) {
      ctx.gc();
      if (kind === 'spool') spools.push(await runSpoolJobs({ synchronous: c.synchronous, shape: c.shape, atOnce: c.atOnce, durationMs: c.ms.spool }));
      else baselines.push(await runBaseline({ synchronous: c.synchronous, shape: c.shape, loops: c.atOnce, durationMs: c.ms.baseline }));
    }
  }
  const spool = summary(spools);
  const baseline = summary(baselines);
  process.stdout.write(
    `  ${c.synchronous.padEnd(6)} ${c.shape.name}  ${String(c.atOnce).padStart(2)} at once  Spool ${fmtRate(spool.jobsPerSec).padStart(7)} jobs/s, baseline ${fmtRate(baseline.jobsPerSec).padStart(7)} jobs/s\n`,
  );
  return {
    synchronous: c.synchronous,
    job: c.shape.name,
    steps: c.shape.steps,
    atOnce: c.atOnce,
    spool,
    baseline,
    raw: c.raw,
    ratioToRaw: round(spool.jobsPerSec / c.raw.jobsPerSec, 3),
    ratioToBaseline: round(spool.jobsPerSec / baseline.jobsPerSec, 3),
  };
}

type LightRow = Summary & { job: string; startLagMs: { p99: number; max: number }; raw: { startToFinal: Summary['startToFinal']; cpuUsPerJob: number } };

function printResults(rows: readonly CaseRow[], light: readonly LightRow[]): void {
  const commits = (s: Summary) => (s.commitsPerJob === null ? '—' : s.commitsPerJob.toFixed(2));
  const p = (s: Summary) => `${fmtMs(s.startToFinal.p50Ms)} / ${fmtMs(s.startToFinal.p99Ms)}`;
  console.log('');
  printTable(
    ['sync', 'job', 'at once', 'Spool jobs/s', `raw ${RAW_BATCH}/tx`, 'Spool/raw', 'baseline', 'Spool/base', 'CPU µs/job Spool/base/raw', 'commits/job Spool/base/raw', 'Spool p50 / p99', 'baseline p50 / p99'],
    rows.map((r) => [
      r.synchronous,
      r.job,
      String(r.atOnce),
      fmtRate(r.spool.jobsPerSec),
      fmtRate(r.raw.jobsPerSec),
      r.ratioToRaw.toFixed(3),
      fmtRate(r.baseline.jobsPerSec),
      fmtRatio(r.ratioToBaseline),
      `${r.spool.cpuUsPerJob.toFixed(0)}/${r.baseline.cpuUsPerJob.toFixed(0)}/${r.raw.cpuUsPerJob.toFixed(0)}`,
      `${commits(r.spool)}/${commits(r.baseline)}/${commits(r.raw)}`,
      p(r.spool),
      p(r.baseline),
    ]),
  );
  console.log('  p50 / p99 = runtime.start call → the job.committed event of its final commit (baseline: createActor → the write of its done snapshot).');
  console.log('  CPU = this process\'s user+system time per job: for Spool the starter loops, runtime, worker and SQLite together (one process); for raw, SQLite alone.');
  console.log('  commits = write transactions SQLite committed per job (its wal-index change counter), whatever the store called them.');
  console.log(`  raw ${RAW_BATCH}/tx does not depend on "at once": one figure per setting and job, beside both rows.`);
  console.log('');
  printTable(
    ['light load', 'job', 'started/s', 'jobs', 'start→final p50', 'p99', 'max', 'raw p50 / p99', 'CPU µs/job', 'commits/job', 'start lag p99'],
    light.map((l) => [
      'FULL',
      l.job,
      String(LIGHT_PER_SEC),
      String(l.jobs),
      fmtMs(l.startToFinal.p50Ms),
      fmtMs(l.startToFinal.p99Ms),
      fmtMs(l.startToFinal.maxMs),
      `${fmtMs(l.raw.startToFinal.p50Ms)} / ${fmtMs(l.raw.startToFinal.p99Ms)}`,
      l.cpuUsPerJob.toFixed(0),
      l.commitsPerJob === null ? '—' : l.commitsPerJob.toFixed(2),
      fmtMs(l.startLagMs.p99),
    ]),
  );
  console.log('  start lag = how late setTimeout started a job against its slot (latency counts from the actual call).');
  console.log('  raw = better-sqlite3 at FULL making the same commits per job one after another (1 + steps syncs): the disk\'s floor under the 5 ms target.');
}

function targetChecks(rows: readonly CaseRow[], light: readonly LightRow[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const find = (sync: Synchronous, steps: number, atOnce: number) => rows.find((r) => r.synchronous === sync && r.steps === steps && r.atOnce === atOnce);
  const full64 = find('FULL', 3, 64);
  checks.push(check(`3-step, FULL, 64 at once: Spool / raw ${RAW_BATCH}/tx (aim ${TARGETS.threeStepFull64VsRawAim})`, full64?.ratioToRaw ?? null, { min: TARGETS.threeStepFull64VsRaw }));
  for (const r of rows.filter((x) => x.synchronous === 'NORMAL')) {
    checks.push(check(`${r.job}, NORMAL, ${r.atOnce} at once: Spool / baseline`, r.ratioToBaseline, { min: TARGETS.normalVsBaseline }));
  }
  for (const r of rows.filter((x) => x.synchronous === 'NORMAL' && x.atOnce === 1)) {
    checks.push(check(`${r.job}, NORMAL, 1 at once: Spool / baseline (no poll wait between steps)`, r.ratioToBaseline, { min: TARGETS.oneAtOnceNormalVsBaseline }));
  }
  for (const r of rows.filter((x) => x.synchronous === 'NORMAL' && x.steps === 3)) {
    checks.push(check(`CPU µs per 3-step job, NORMAL, ${r.atOnce} at once`, r.spool.cpuUsPerJob, { max: TARGETS.cpuUsPerThreeStepJobNormal }));
  }
  for (const l of light) {
    checks.push(check(`light load ${LIGHT_PER_SEC} jobs/s, FULL, ${l.job}: p99 start → final, ms (raw, the same commits: ${fmtMs(l.raw.startToFinal.p99Ms)})`, l.startToFinal.p99Ms, { max: TARGETS.lightLoadP99MsFull }));
  }
  return checks;
}
