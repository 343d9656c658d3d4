/**
 * The sections `npm run bench` runs after the sequential-send section (bench/index.ts), but for
 * the jobs section (bench/jobsSection.ts): each prints a table and a host-load note, and returns
 * what goes into bench/results/latest.json.
 */
import { runSpoolGroup, workloadSnapshot, GROUP_JOBS, RAW_BATCH, STEADY_IN_FLIGHT, type GroupMode, type GroupRunResult } from './groupCommit.ts';
import { runRawBatched, type RawBatchResult } from './rawBatch.ts';
import { runBareBatched } from './bareLoop.ts';
import { makeRestartDb, measureRestart, TEMPLATE_JOBS, type ChildReport, type RecoverMode } from './restart.ts';
import { pathInventory, runPathTesting, type PathConfig, type PathTestingRun } from './pathTesting.ts';
import { SETTINGS, type Synchronous } from './rawRun.ts';
import type { StoreKind } from './benchDb.ts';
import { latencySummary as latency, median } from './stats.ts';
import { check, TARGETS } from './targets.ts';
import { fmtMiB, fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round, type HostLoad } from './format.ts';

export interface SectionContext {
  quick: boolean;
  /** The stores every section runs on (`--store`): SQLite, Postgres, or both. */
  stores: readonly ('sqlite' | 'postgres')[];
  big: boolean;
  rounds: number;
  gc: () => void;
}

// ---------------------------------------------------------------- 1. group commit

const GROUP_TARGET = TARGETS.groupCommitFullVsRaw;

export async function groupCommitSection(ctx: SectionContext) {
  const load0 = loadNow();
  const durationMs = ctx.quick ? 800 : 2000;
  const modes: GroupMode[] = ['steady', 'waves'];
  console.log(`\n== 1. Group commit: ${GROUP_JOBS} jobs sending at once through one runtime, vs raw SQLite ${RAW_BATCH} transitions per transaction`);
  console.log(`   steady = ${STEADY_IN_FLIGHT} sends in flight; waves = Promise.all of one send per job (${GROUP_JOBS}); ${ctx.rounds} round(s), ${durationMs} ms per run\n`);
  const snapshot = workloadSnapshot();
  await runSpoolGroup({ synchronous: 'NORMAL', durationMs: 300, mode: 'steady', warmupWaves: 2 }); // JIT warm-up
  const collected = await collectGroupRuns(ctx, durationMs, modes, snapshot);
  const results = groupResults(collected, modes);
  printGroupResults(results);
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      spool:
        `${GROUP_JOBS} job-lifecycle jobs in processing, one runtime, SqliteStore.open(tmp, { synchronous }); PROGRESS events; steady: ${STEADY_IN_FLIGHT} senders each awaiting ` +
        `its send before the next (each sender owns every ${STEADY_IN_FLIGHT}th job); waves: await Promise.all(one send per job) repeatedly. Store wrapped to count commits per store.commit call.`,
      limit: `better-sqlite3 directly: ${GROUP_JOBS} jobs, per transition a versioned UPDATE jobs … WHERE id=? AND revision=? of the same snapshot JSON + one transitions INSERT, ${RAW_BATCH} transitions per BEGIN IMMEDIATE transaction; WAL, same synchronous`,
      rounds: ctx.rounds,
      durationMsPerRun: durationMs,
      figures: 'medians over rounds; batch figures and µs splits from the median round',
    },
    target: { ratio: GROUP_TARGET, at: 'FULL' },
    targets: results.filter((r) => r.target !== null).map((r) => check(`group commit, FULL, ${r.mode} ${r.inFlight}: Spool / raw ${RAW_BATCH}/tx`, r.ratio, { min: GROUP_TARGET })),
    results,
    hostLoad: load,
  };
}


/** The runs of one synchronous setting: raw batched, the bare loop, Spool in each mode. */
type GroupCollected = { raw: RawBatchResult[]; bare: ReturnType<typeof runBareBatched>[]; spool: Record<GroupMode, GroupRunResult[]> };

/** Every round of every setting: raw and the Spool modes (alternating which goes first), then the bare loop. */
async function collectGroupRuns(ctx: SectionContext, durationMs: number, modes: GroupMode[], snapshot: (i: number) => string): Promise<Map<Synchronous, GroupCollected>> {
  const collected = new Map<Synchronous, GroupCollected>(SETTINGS.map((s) => [s, { raw: [], bare: [], spool: { steady: [], waves: [] } }]));
  for (let round = 0; round < ctx.rounds; round += 1) {
    for (const synchronous of SETTINGS) {
      const c = collected.get(synchronous)!;
      const kinds = round % 2 === 0 ? (['raw', ...modes] as const) : ([...modes, 'raw'] as const);
      for (const kind of kinds) {
        ctx.gc();
        if (kind === 'raw') {
          const r = runRawBatched({ synchronous, durationMs, jobs: GROUP_JOBS, batch: RAW_BATCH, snapshot });
          c.raw.push(r);
          process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} raw    ${fmtRate(r.perSec).padStart(8)}/s\n`);
        } else {
          const r = await runSpoolGroup({ synchronous, durationMs, mode: kind });
          c.spool[kind].push(r);
          process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} ${kind.padEnd(6)} ${fmtRate(r.perSec).padStart(8)}/s  batches mean ${r.batches.mean}\n`);
        }
      }
      // The bare loop, batched as the limit is, a savepoint per transition: the least work, and nothing else.
      ctx.gc();
      c.bare.push(runBareBatched({ synchronous, durationMs, jobs: GROUP_JOBS, batch: RAW_BATCH }));
      process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} bare   ${fmtRate(c.bare.at(-1)!.perSec).padStart(8)}/s  (validate, transition, serialise, write: nothing else)\n`);
    }
  }
  return collected;
}

/** Per setting and mode: Spool's figures beside the limit's and the bare loop's, medians over rounds. */
function groupResults(collected: Map<Synchronous, GroupCollected>, modes: GroupMode[]) {
  return SETTINGS.flatMap((synchronous) => {
    const c = collected.get(synchronous)!;
    const rawPerSec = median(c.raw.map((r) => r.perSec));
    return modes.map((mode) => {
      const runs = c.spool[mode];
      const perSec = median(runs.map((r) => r.perSec));
      const ratio = perSec / rawPerSec;
      const mid = runs.find((r) => r.perSec === perSec) ?? runs[0]!;
      const target = synchronous === 'FULL' ? GROUP_TARGET : null;
      return {
        synchronous,
        mode,
        inFlight: mode === 'steady' ? STEADY_IN_FLIGHT : GROUP_JOBS,
        spool: {
          transitionsPerSec: round(perSec),
          roundsPerSec: runs.map((r) => round(r.perSec)),
          latency: latency(runs.map((r) => r.latencies)),
          batches: mid.batches,
          commitShare: round(mid.commitShare, 3),
          commitUsPerTransition: round(mid.commitUsPerOp),
          engineUsPerTransition: round(mid.engineUsPerOp),
          storeCallsPerSend: mid.storeCallsPerOp,
          walFramesPerTransition: round(mid.walFramesPerOp ?? Number.NaN, 2),
          cpuUsPerTransition: round(median(runs.map((r) => r.cpuUsPerOp))),
        },
        limit: {
          transitionsPerSec: round(rawPerSec),
          roundsPerSec: c.raw.map((r) => round(r.perSec)),
          batch: RAW_BATCH,
          commitLatency: latency(c.raw.map((r) => r.latencies)),
          walFramesPerTransition: round(median(c.raw.map((r) => r.walFramesPerOp)), 2),
          cpuUsPerTransition: round(median(c.raw.map((r) => r.cpuUsPerOp))),
        },
        ratio: round(ratio, 3),
        /** The bare loop batched as the limit is (bench/bareLoop.ts): what any XState runtime on this layout could reach. */
        bareLoop: {
          transitionsPerSec: round(median(c.bare.map((r) => r.perSec))),
          ratio: round(median(c.bare.map((r) => r.perSec)) / rawPerSec, 3),
          cpuUsPerTransition: round(median(c.bare.map((r) => r.cpuUsPerOp))),
        },
        target,
        verdict: target === null ? null : ratio >= target ? ('PASS' as const) : ('BELOW' as const),
      };
    });
  });
}

/** The group-commit table and its notes. */
function printGroupResults(results: ReturnType<typeof groupResults>): void {
  console.log('');
  printTable(
    ['sync', 'senders', 'Spool tx/s', `raw ${RAW_BATCH}/tx tx/s`, 'ratio', `target ${GROUP_TARGET}`, 'batch mean/p50/max', 'commits', 'send p50', 'send p99', 'µs/tx in commit', 'µs/tx engine', 'CPU µs/tx Spool/raw', 'WAL pages/tx Spool/raw'],
    results.map((r) => [
      r.synchronous,
      r.mode === 'steady' ? `steady ${r.inFlight}` : `waves ${r.inFlight}`,
      fmtRate(r.spool.transitionsPerSec),
      fmtRate(r.limit.transitionsPerSec),
      fmtRatio(r.ratio),
      r.verdict ?? '—',
      `${r.spool.batches.mean}/${r.spool.batches.p50}/${r.spool.batches.max}`,
      String(r.spool.batches.commitCalls),
      fmtMs(r.spool.latency.p50Ms),
      fmtMs(r.spool.latency.p99Ms),
      r.spool.commitUsPerTransition.toFixed(1),
      r.spool.engineUsPerTransition.toFixed(1),
      `${r.spool.cpuUsPerTransition.toFixed(0)}/${r.limit.cpuUsPerTransition.toFixed(0)}`,
      `${r.spool.walFramesPerTransition.toFixed(2)}/${r.limit.walFramesPerTransition.toFixed(2)}`,
    ]),
  );
  console.log(`  batch = commits per store.commit call (counted by a store wrapper); "in commit" = wall time inside store.commit (SQLite + sync) per transition;`);
  console.log('  "engine" = wall time outside every store call per transition (validation, hashing, transition, serialisation, awaits). Waves latency = wave time.');
  console.log('  CPU µs/tx = this process\'s user+system CPU per transition (steadier than wall time on a busy host: it shows the work, not the waiting).');
  console.log('  WAL pages/tx = 4 KiB WAL frames written per transition (what a commit writes and, at FULL, syncs), measured after each timed run.');
  for (const r of results.filter((x) => x.mode === 'steady')) {
    console.log(`  ${r.synchronous}: the bare loop, ${RAW_BATCH} per transaction with a savepoint each (zod validation, XState transition, snapshot JSON, the limit's writes with state and context; nothing else): ${fmtRate(r.bareLoop.transitionsPerSec)}/s = ${fmtRatio(r.bareLoop.ratio)} of the limit, ${r.bareLoop.cpuUsPerTransition.toFixed(0)} µs CPU/tx`);
  }
}

// ---------------------------------------------------------------- 3. restart and memory

const RSS_TARGET_BYTES = TARGETS.restartRssBytesAt1M;

/** On Postgres (bench/restart.ts makePgRestartDb) the same section, but the RSS target (SQLite's) is not checked. */
export async function restartSection(ctx: SectionContext, kind: StoreKind = 'sqlite') {
  const load0 = loadNow();
  const pg = kind === 'postgres';
  // Postgres --quick: 10k only (its template and copies take a minute on a busy host).
  const sizes = pg && ctx.quick ? [10_000] : ctx.big ? [10_000, 100_000, 1_000_000] : [10_000, 100_000];
  const modes: RecoverMode[] = ['verify', 'no-verify'];
  const repeats = (n: number) => (ctx.quick || n >= 1_000_000 ? 1 : n >= 100_000 ? 2 : 3);
  if (pg) console.log(`\n== 3. Restart on Postgres with many jobs waiting on timers: PostgresStore.open + createRuntime (recover on open) + first tick(), in a fresh child process`);
  else console.log(`\n== 3. Restart with many jobs waiting on timers: SqliteStore.open + createRuntime (recover on open) + first tick(), in a fresh child process`);
  console.log(`   ${TEMPLATE_JOBS} approval-flow jobs (each pending with 2 durable timers, days away) started through the runtime, then copied with SQL to each size`);
  console.log(`   recover: "verify" = createRuntime's defaults (verifySnapshots: 'auto': every snapshot up to 10,000 active jobs, versions only above); "no-verify" = verifySnapshots: false\n`);
  const { rows, templateStartsPerSec, copiedPerSec } = await measureRestarts(kind, sizes, modes, repeats);
  const view = restartView(rows, pg);
  printRestartTable(view, pg);
  const of = (mode: RecoverMode) => view.filter((v) => v.recover === mode);
  const verify = of('verify');
  const noVerify = of('no-verify');
  printRestartNotes(view, verify, noVerify, ctx.big, pg);
  const load = hostLoad(load0);
  printLoadNote(load, 'times');
  return {
    method: {
      jobs: `approval-flow jobs pending with 2 scheduled timers each (reminder +1 day, deadline +3 days: none due at the first tick)`,
      store: kind,
      creation: pg
        ? `${TEMPLATE_JOBS} jobs started through the runtime (PostgresStore, 64 concurrent), then copied with SQL (INSERT … SELECT over generate_series of jobs, transitions and timers rows with new ids), VACUUM ANALYZE before each restart`
        : `${TEMPLATE_JOBS} jobs started through the runtime (runtime.start, 64 concurrent, NORMAL), then copied with SQL (INSERT … SELECT of jobs, transitions and timers rows with new ids) to each size; WAL checkpointed (TRUNCATE) before each restart; OS page cache left warm`,
      restart:
        `fresh child process (node --import tsx bench/restartChild.ts): ${pg ? 'PostgresStore.open (pool 10)' : 'SqliteStore.open (FULL, the default)'}, createRuntime({ the 4 reference machines; recover: true by default; verify: defaults, no-verify: verifySnapshots: false }), runtime.tick(); ` +
        'store wrapped to count calls; memory from process.memoryUsage() and resourceUsage().maxRSS',
      repeats: Object.fromEntries(sizes.map((n) => [n, repeats(n)])),
      templateStartsPerSec: round(templateStartsPerSec),
      copiedPerSec: round(copiedPerSec),
    },
    rssTargetBytesAt1M: RSS_TARGET_BYTES,
    targets: view.filter((v) => v.rssTarget).map((v) => check(`restart, 1M waiting jobs, ${v.recover}: peak RSS, MB`, v.memory.rssPeak / 1e6, { max: RSS_TARGET_BYTES / 1e6 })),
    results: view,
    recoverUsPerExtraJob: { verify: round(restartSlope(verify) * 1000, 2), noVerify: round(restartSlope(noVerify) * 1000, 3) },
    hostLoad: load,
  };
}

/** The restarts at one size and recover mode: every run, and the median one. */
type RestartRow = { jobs: number; mode: RecoverMode; fileBytes: number; runs: ChildReport[]; median: ChildReport };

/** The figures of every size and mode, as latest.json records them. */
type RestartView = ReturnType<typeof restartView>;

/** Make the template database, grow it to each size and restart it `repeats(size)` times in each mode. */
async function measureRestarts(kind: StoreKind, sizes: number[], modes: RecoverMode[], repeats: (n: number) => number): Promise<{ rows: RestartRow[]; templateStartsPerSec: number; copiedPerSec: number }> {
  const pg = kind === 'postgres';
  const db = await makeRestartDb(kind);
  const rows: RestartRow[] = [];
  let templateStartsPerSec = Number.NaN;
  let copiedPerSec = Number.NaN;
  try {
    templateStartsPerSec = db.templateStartsPerSec;
    console.log(`  template: ${TEMPLATE_JOBS} jobs via runtime.start (64 at a time, ${pg ? 'the server\'s settings' : 'NORMAL'}) at ${fmtRate(db.templateStartsPerSec)} jobs/s`);
    for (const size of sizes) {
      await db.grow(size);
      copiedPerSec = db.copiedPerSec;
      for (const mode of modes) {
        const runs: ChildReport[] = [];
        for (let k = 0; k < repeats(size); k += 1) runs.push(await measureRestart(db.path, mode));
        const total = median(runs.map((r) => r.totalMs));
        const mid = runs.find((r) => r.totalMs === total) ?? runs[0]!;
        rows.push({ jobs: size, mode, fileBytes: await db.fileBytes(), runs, median: mid });
        process.stdout.write(`  ${fmtRate(size).padStart(6)} jobs ${mode.padEnd(9)}: restart ${runs.map((r) => fmtMs(r.totalMs)).join(' / ')}\n`);
      }
      process.stdout.write(`  ${fmtRate(size).padStart(6)} jobs: copied with SQL at ${fmtRate(db.copiedPerSec)} jobs/s so far\n`);
    }
  } finally {
    await db.dispose();
  }
  return { rows, templateStartsPerSec, copiedPerSec };
}

/** Each size and mode's median restart: its times, store calls and memory, and the RSS target at 1M (SQLite). */
function restartView(rows: RestartRow[], pg: boolean) {
  return rows.map((r) => {
    const m = r.median;
    const perJob = (name: string) => (m.recoverCalls[name]?.calls ?? 0) / r.jobs;
    return {
      jobs: r.jobs,
      recover: r.mode,
      scheduledTimers: m.scheduledTimers,
      fileBytes: r.fileBytes,
      openStoreMs: round(m.openStoreMs, 2),
      createRuntimeMs: round(m.createRuntimeMs, 1),
      firstTickMs: round(m.firstTickMs, 2),
      totalMs: round(m.totalMs, 1),
      totalMsRuns: r.runs.map((x) => round(x.totalMs, 1)),
      recovery: {
        usPerJob: round((m.createRuntimeMs * 1000) / r.jobs, 2),
        storeMs: round(m.recoverStoreMs, 1),
        engineMs: round(m.createRuntimeMs - m.recoverStoreMs, 1),
        listJobsCalls: m.recoverCalls['listJobs']?.calls ?? 0,
        getJobPerJob: round(perJob('getJob'), 2),
        calls: m.recoverCalls,
      },
      firstTick: { ...m.tick, calls: m.tickCalls },
      processBootMs: round(m.importedAtMs, 1),
      memory: {
        rssBeforeOpen: m.memory.before.rss,
        rssAfterTick: m.memory.afterTick.rss,
        rssPeak: m.memory.peakRss,
        rssGrowth: m.memory.afterTick.rss - m.memory.before.rss,
        heapUsedAfterRecover: m.memory.afterRecover.heapUsed,
        heapUsedAfterGc: m.memory.afterGc.heapUsed,
        rssAfterGc: m.memory.afterGc.rss,
      },
      rssTarget: r.jobs >= 1_000_000 && !pg ? { bytes: RSS_TARGET_BYTES, verdict: m.memory.peakRss < RSS_TARGET_BYTES ? 'PASS' : 'ABOVE' } : null,
    };
  });
}

/** The restart table. */
function printRestartTable(view: RestartView, pg: boolean): void {
  console.log('');
  printTable(
    ['jobs', 'recover', 'timers', pg ? 'database' : 'db file', 'open store', 'createRuntime', 'first tick', 'total', 'µs/job', 'store reads in recover', 'RSS before', 'RSS after', 'RSS peak', 'heap after gc'],
    view.map((v) => [
      fmtRate(v.jobs),
      v.recover,
      fmtRate(v.scheduledTimers),
      fmtMiB(v.fileBytes),
      fmtMs(v.openStoreMs),
      fmtMs(v.createRuntimeMs),
      fmtMs(v.firstTickMs),
      fmtMs(v.totalMs),
      v.recovery.usPerJob.toFixed(2),
      `${v.recovery.listJobsCalls} list + ${v.recovery.getJobPerJob}×getJob/job`,
      fmtMiB(v.memory.rssBeforeOpen),
      fmtMiB(v.memory.rssAfterTick),
      fmtMiB(v.memory.rssPeak),
      fmtMiB(v.memory.heapUsedAfterGc),
    ]),
  );
}

/** createRuntime's ms per extra job from the smallest size to the largest (NaN with one size). */
function restartSlope(vs: RestartView): number {
  return vs.length < 2 ? Number.NaN : (vs.at(-1)!.createRuntimeMs - vs[0]!.createRuntimeMs) / (vs.at(-1)!.jobs - vs[0]!.jobs);
}

/** What grows with the job count and what stays flat, in both modes; the RSS target at 1M (with --big). */
function printRestartNotes(view: RestartView, verify: RestartView, noVerify: RestartView, big: boolean, pg: boolean): void {
  const perExtra = (vs: RestartView) => (vs.length < 2 ? '— (one size)' : (restartSlope(vs) * 1000).toFixed(2));
  const vLast = verify.at(-1)!;
  const nLast = noVerify.at(-1)!;
  console.log(
    `  What grows with job count: with the defaults (verifySnapshots 'auto'), open-time recovery hydrates every active job up to 10,000 of them,`,
  );
  console.log(
    `  then checks machine versions only: ${perExtra(verify)} µs per extra job; at ${fmtRate(vLast.jobs)} jobs ${fmtMs(vLast.createRuntimeMs)}, ` +
      `${fmtMs(vLast.recovery.storeMs)} of it in store reads. With verifySnapshots: false it is ${perExtra(noVerify)} µs per extra job ` +
      `(${fmtMs(nLast.createRuntimeMs)} at ${fmtRate(nLast.jobs)}: the machine versions come from an index, one probe per version, counted up to 10,001).`,
  );
  console.log(`  Opening the store and the first tick (nothing due) stay flat: ${fmtMs(vLast.openStoreMs)}, ${fmtMs(vLast.firstTickMs)}.`);
  console.log(
    `  RSS before open is node + tsx + modules (${fmtMiB(verify[0]!.memory.rssBeforeOpen)}); growth to peak, verify: ${verify.map((v) => `${fmtRate(v.jobs)} +${fmtMiB(v.memory.rssPeak - v.memory.rssBeforeOpen)}`).join(', ')}; ` +
      `no-verify: ${noVerify.map((v) => `${fmtRate(v.jobs)} +${fmtMiB(v.memory.rssPeak - v.memory.rssBeforeOpen)}`).join(', ')}.`,
  );
  console.log(`  Heap after gc stays ${fmtMiB(Math.max(...view.map((v) => v.memory.heapUsedAfterGc)))} at most: the growth is garbage made during recovery, not retained per job.`);
  if (pg) console.log('  Postgres: store reads are round trips to the server (not in this process\'s RSS); no RSS target (bench/targets.ts is SQLite\'s): figures only.');
  if (!big) console.log('  1M jobs: run with --big (the target is RSS < 200 MB at 1M waiting jobs).');
  else {
    for (const v of view.filter((x) => x.rssTarget)) {
      console.log(
        `  1M jobs, ${v.recover}: peak RSS ${(v.memory.rssPeak / 1e6).toFixed(1)} MB (${fmtMiB(v.memory.rssPeak)}), after the first tick ${(v.memory.rssAfterTick / 1e6).toFixed(1)} MB, ` +
          `vs target < 200 MB: ${v.rssTarget!.verdict} (${(v.memory.rssBeforeOpen / 1e6).toFixed(0)} MB of it is node + tsx + modules before the store opens).`,
      );
    }
  }
}

// ---------------------------------------------------------------- 4. path testing

export async function pathTestingSection(ctx: SectionContext) {
  const load0 = loadNow();
  console.log(`\n== 4. Path testing: generate and replay every path of the reference machines (collectPathTests(machines/index.ts) + runPathTests)`);
  const inventory = await pathInventory();
  console.log(`   ${inventory.machines} machines, ${inventory.paths} paths, ${inventory.steps} steps; SQLite NORMAL (the path-test default); child-crash sample: ${inventory.childProcesses} child processes`);
  // --quick leaves out the child-crash replay: its ~10 s is process boots (see the full bench).
  const configs: PathConfig[] = ctx.quick ? ['plain', 'restart'] : ['plain', 'restart', 'child'];
  if (ctx.quick) console.log('   --quick: no child-crash replay (about 10 s of child-process boots); the full bench runs it');
  await runPathTesting('plain', inventory.steps); // warm-up: module loading and JIT, not timed
  console.log('');
  const runs: PathTestingRun[] = [];
  for (const config of configs) {
    ctx.gc();
    const r = await runPathTesting(config, inventory.steps);
    runs.push(r);
    process.stdout.write(`  ${config.padEnd(8)} ${fmtMs(r.wallMs)} wall, ${r.runs.plain + r.runs.restart + r.runs.child} path runs, ok ${r.ok}\n`);
    for (const f of r.failures.slice(0, 5)) console.log(`    failure: ${f}`);
  }
  const rows = pathTestingRows(runs, inventory);
  printPathTestingResults(rows, inventory);
  const load = hostLoad(load0);
  printLoadNote(load, 'times');
  return {
    method: {
      subjects: 'collectPathTests(await import("machines/index.ts")) with the module\'s pathTests options',
      configs: {
        plain: 'runPathTests({ crash: false, sampleChildCrash: 0 })',
        restart: 'runPathTests({ crash: true, sampleChildCrash: 0 }): every path again with the runtime closed and reopened between every two steps',
        child: 'runPathTests({ crash: false, sampleChildCrash: 1, module }): one path per machine replayed in child processes SIGKILLed between steps',
      },
      warmup: 'one untimed plain run first (module loading, JIT)',
      configsRun: configs,
      synchronous: 'NORMAL',
    },
    inventory,
    results: rows,
    hostLoad: load,
  };
}

/** The reference machines' path inventory: machines, paths, steps, child processes of the child-crash sample. */
type PathInventory = Awaited<ReturnType<typeof pathInventory>>;

/** Each configuration's figures: generation, the plain replay and the extra (crash) replay, per step and per machine. */
function pathTestingRows(runs: PathTestingRun[], inventory: PathInventory) {
  return runs.map((r) => {
    const extra = r.config === 'plain' ? 'plain' : r.config;
    const extraRuns = r.runs[extra];
    const extraMs = r.replayMs[extra];
    return {
      config: r.config,
      ok: r.ok,
      wallMs: round(r.wallMs),
      generateMs: round(r.generateMs),
      plainReplayMs: round(r.replayMs.plain),
      plainPathsPerSec: round(r.runs.plain / (r.replayMs.plain / 1000)),
      extraMode: r.config === 'plain' ? null : r.config,
      extraRuns: r.config === 'plain' ? 0 : extraRuns,
      extraReplayMs: r.config === 'plain' ? 0 : round(extraMs),
      extraPathsPerSec: r.config === 'plain' ? null : round(extraRuns / (extraMs / 1000), 2),
      runs: r.runs,
      pathRunsPerSec: round(r.pathRunsPerSec, 2),
      msPerStep: {
        plain: round(r.replayMs.plain / r.steps, 2),
        ...(r.config === 'restart' ? { restart: round(extraMs / r.steps, 2) } : {}),
        ...(r.config === 'child' ? { childProcess: round(extraMs / inventory.childProcesses, 1) } : {}),
      },
      perMachine: r.perMachine,
      failures: r.failures,
    };
  });
}

/** The path-testing table and its notes. */
function printPathTestingResults(rows: ReturnType<typeof pathTestingRows>, inventory: PathInventory): void {
  console.log('');
  printTable(
    ['config', 'machines', 'paths', 'generate', 'plain replay', 'paths/s plain', 'crash replay runs', 'crash replay', 'crash paths/s', 'wall', 'all path runs/s', 'ok'],
    rows.map((r) => [
      r.config === 'plain' ? 'no crash replay' : r.config === 'restart' ? '+ restart between steps' : '+ 1 child-crash path/machine',
      String(inventory.machines),
      String(inventory.paths),
      fmtMs(r.generateMs),
      fmtMs(r.plainReplayMs),
      r.plainPathsPerSec.toFixed(1),
      String(r.extraRuns),
      r.extraMode ? fmtMs(r.extraReplayMs) : '—',
      r.extraPathsPerSec === null ? '—' : r.extraPathsPerSec.toFixed(2),
      fmtMs(r.wallMs),
      r.pathRunsPerSec.toFixed(1),
      r.ok ? 'yes' : 'NO',
    ]),
  );
  const child = rows.find((r) => r.config === 'child');
  const restart = rows.find((r) => r.config === 'restart');
  console.log(`  replay times are summed from runPathTests' path.finished events; generation from machine.started → machine.generated.`);
  if (restart) console.log(`  restart replay: ${restart.msPerStep.restart?.toFixed(1)} ms per step (close + reopen + step) vs ${restart.msPerStep.plain.toFixed(1)} ms per step plain.`);
  if (child) console.log(`  child-crash replay: every step in a new child process (node + tsx boot, open, step, SIGKILL): ${child.msPerStep.childProcess?.toFixed(0)} ms per child process, ${inventory.childProcesses} processes.`);
}

export type { HostLoad };
