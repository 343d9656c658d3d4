/**
 * The sections `npm run bench` runs after the sequential-send section (bench/index.ts): each
 * prints a table and a host-load note, and returns what goes into bench/results/latest.json.
 */
import { runSpoolGroup, workloadSnapshot, GROUP_JOBS, RAW_BATCH, STEADY_IN_FLIGHT, type GroupMode, type GroupRunResult } from './groupCommit.ts';
import { JOB_SHAPES, JOBS_IN_FLIGHT, runSpoolJobs, type SpoolJobsResult } from './jobsRun.ts';
import { runRawBatched, runRawJobs, type RawBatchResult, type RawJobsResult } from './rawBatch.ts';
import { makeRestartDb, measureRestart, TEMPLATE_JOBS, type ChildReport } from './restart.ts';
import { pathInventory, runPathTesting, type PathConfig, type PathTestingRun } from './pathTesting.ts';
import type { Synchronous } from './rawRun.ts';
import { median, Samples } from './stats.ts';
import { fmtMiB, fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round, type HostLoad } from './format.ts';

export interface SectionContext {
  quick: boolean;
  big: boolean;
  rounds: number;
  gc: () => void;
}

const SETTINGS: readonly Synchronous[] = ['FULL', 'NORMAL'];

function latency(sets: readonly Samples[]) {
  const l = Samples.summarize(sets);
  const r = (ms: number) => Math.round(ms * 1000) / 1000;
  return { p50Ms: r(l.p50Ms), p99Ms: r(l.p99Ms), maxMs: r(l.maxMs), samples: l.samples };
}

// ---------------------------------------------------------------- 1. group commit

export const GROUP_TARGET = 0.6;

export async function groupCommitSection(ctx: SectionContext) {
  const load0 = loadNow();
  const durationMs = ctx.quick ? 800 : 2000;
  const modes: GroupMode[] = ['steady', 'waves'];
  console.log(`\n== 1. Group commit: ${GROUP_JOBS} jobs sending at once through one runtime, vs raw SQLite ${RAW_BATCH} transitions per transaction`);
  console.log(`   steady = ${STEADY_IN_FLIGHT} sends in flight; waves = Promise.all of one send per job (${GROUP_JOBS}); ${ctx.rounds} round(s), ${durationMs} ms per run\n`);
  const snapshot = workloadSnapshot();
  await runSpoolGroup({ synchronous: 'NORMAL', durationMs: 300, mode: 'steady', warmupWaves: 2 }); // JIT warm-up
  type Collected = { raw: RawBatchResult[]; spool: Record<GroupMode, GroupRunResult[]> };
  const collected = new Map<Synchronous, Collected>(SETTINGS.map((s) => [s, { raw: [], spool: { steady: [], waves: [] } }]));
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
    }
  }
  const results = SETTINGS.flatMap((synchronous) => {
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
        },
        limit: {
          transitionsPerSec: round(rawPerSec),
          roundsPerSec: c.raw.map((r) => round(r.perSec)),
          batch: RAW_BATCH,
          commitLatency: latency(c.raw.map((r) => r.latencies)),
        },
        ratio: round(ratio, 3),
        target,
        verdict: target === null ? null : ratio >= target ? ('PASS' as const) : ('BELOW' as const),
      };
    });
  });
  console.log('');
  printTable(
    ['sync', 'senders', 'Spool tx/s', `raw ${RAW_BATCH}/tx tx/s`, 'ratio', `target ${GROUP_TARGET}`, 'batch mean/p50/max', 'commits', 'send p50', 'send p99', 'µs/tx in commit', 'µs/tx engine'],
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
    ]),
  );
  console.log(`  batch = commits per store.commit call (counted by a store wrapper); "in commit" = wall time inside store.commit (SQLite + sync) per transition;`);
  console.log('  "engine" = wall time outside every store call per transition (validation, hashing, transition, serialisation, awaits). Waves latency = wave time.');
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
    results,
    hostLoad: load,
  };
}

// ---------------------------------------------------------------- 2. jobs per second

export async function jobsSection(ctx: SectionContext) {
  const load0 = loadNow();
  const spoolMs = ctx.quick ? 500 : 2000;
  const rawMs = ctx.quick ? 300 : 1000;
  console.log(`\n== 2. Jobs per second, start to final state; latency = each start/send call to its durable acknowledgement`);
  for (const s of JOB_SHAPES) console.log(`   ${s.name.padEnd(10)} ${s.description}`);
  console.log(`   sequential = one job at a time; concurrent = ${JOBS_IN_FLIGHT} job chains in flight. Limit: raw SQLite, the same minimal writes per job`);
  console.log(`   (job INSERT + log INSERT, then per event a versioned UPDATE + log INSERT), one transaction each (sequential) or ${RAW_BATCH} per transaction (concurrent). ${spoolMs} ms per Spool run\n`);
  for (const shape of JOB_SHAPES) await runSpoolJobs({ synchronous: 'NORMAL', durationMs: 150, shape, concurrency: 8, warmupJobs: 16 }); // JIT warm-up
  const results: {
    synchronous: Synchronous;
    job: string;
    steps: number;
    mode: 'sequential' | 'concurrent';
    concurrency: number;
    spool: {
      jobsPerSec: number;
      acksPerSec: number;
      jobs: number;
      opLatency: ReturnType<typeof latency>;
      jobLatency: ReturnType<typeof latency>;
      batches: SpoolJobsResult['batches'];
      storeCallsPerJob: SpoolJobsResult['storeCallsPerJob'];
    };
    limit: { jobsPerSec: number; writesPerSec: number; batch: number; latency: ReturnType<typeof latency> };
    ratio: number;
  }[] = [];
  for (const synchronous of SETTINGS) {
    for (const shape of JOB_SHAPES) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        const concurrency = mode === 'sequential' ? 1 : JOBS_IN_FLIGHT;
        const batch = mode === 'sequential' ? 1 : RAW_BATCH;
        ctx.gc();
        const raw: RawJobsResult = runRawJobs({ synchronous, durationMs: rawMs, steps: shape.steps, batch, snapshot: (() => { const s = shape.snapshot(); return () => s; })() });
        ctx.gc();
        const spool = await runSpoolJobs({ synchronous, durationMs: spoolMs, shape, concurrency });
        const ratio = spool.jobsPerSec / raw.jobsPerSec;
        process.stdout.write(`  ${synchronous.padEnd(6)} ${shape.name.padEnd(10)} ${mode.padEnd(10)} Spool ${fmtRate(spool.jobsPerSec).padStart(7)} jobs/s, raw ${fmtRate(raw.jobsPerSec).padStart(7)} jobs/s\n`);
        results.push({
          synchronous,
          job: shape.name,
          steps: shape.steps,
          mode,
          concurrency,
          spool: {
            jobsPerSec: round(spool.jobsPerSec),
            acksPerSec: round(spool.opsPerSec),
            jobs: spool.jobs,
            opLatency: latency([spool.opLatencies]),
            jobLatency: latency([spool.jobLatencies]),
            batches: spool.batches,
            storeCallsPerJob: spool.storeCallsPerJob,
          },
          limit: { jobsPerSec: round(raw.jobsPerSec), writesPerSec: round(raw.writesPerSec), batch, latency: latency([raw.latencies]) },
          ratio: round(ratio, 3),
        });
      }
    }
  }
  console.log('');
  printTable(
    ['sync', 'job', 'mode', 'Spool jobs/s', 'raw jobs/s', 'ratio', 'acks/s', 'ack p50', 'ack p99', 'job p50', 'job p99', 'commit batch mean', 'start (createJob) µs'],
    results.map((r) => [
      r.synchronous,
      r.job,
      r.mode === 'sequential' ? 'sequential' : `${r.concurrency} in flight`,
      fmtRate(r.spool.jobsPerSec),
      fmtRate(r.limit.jobsPerSec),
      fmtRatio(r.ratio),
      fmtRate(r.spool.acksPerSec),
      fmtMs(r.spool.opLatency.p50Ms),
      fmtMs(r.spool.opLatency.p99Ms),
      fmtMs(r.spool.jobLatency.p50Ms),
      fmtMs(r.spool.jobLatency.p99Ms),
      String(r.spool.batches.mean),
      (r.spool.storeCallsPerJob['createJob']?.us ?? Number.NaN).toFixed(0),
    ]),
  );
  console.log('  ack = one start or send call to its durable acknowledgement; job = start call to the acknowledgement that made it final.');
  console.log('  commit batch = transition commits per store.commit call; `start` writes through store.createJob, one transaction of its own (not in those batches).');
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      jobs: Object.fromEntries(JOB_SHAPES.map((s) => [s.name, s.description])),
      spool: `one runtime per run, SqliteStore.open(tmp, { synchronous }); sequential: await each call; concurrent: ${JOBS_IN_FLIGHT} chains each running whole jobs one after another`,
      limit: `better-sqlite3 directly: per job a job INSERT + log INSERT, then per event a versioned UPDATE + log INSERT (Spool also writes inbox rows and timers); sequential: one BEGIN IMMEDIATE transaction per write pair; concurrent: ${RAW_BATCH} write pairs of ${RAW_BATCH} jobs in flight per transaction`,
      durationMsPerSpoolRun: spoolMs,
      durationMsPerRawRun: rawMs,
      rounds: 1,
    },
    results,
    hostLoad: load,
  };
}

// ---------------------------------------------------------------- 3. restart and memory

export const RSS_TARGET_BYTES = 200 * 2 ** 20;

export async function restartSection(ctx: SectionContext) {
  const load0 = loadNow();
  const sizes = ctx.big ? [10_000, 100_000, 1_000_000] : [10_000, 100_000];
  const repeats = (n: number) => (ctx.quick || n >= 1_000_000 ? 1 : n >= 100_000 ? 2 : 3);
  console.log(`\n== 3. Restart with many jobs waiting on timers: SqliteStore.open + createRuntime (recover on open) + first tick(), in a fresh child process`);
  console.log(`   ${TEMPLATE_JOBS} approval-flow jobs (each pending with 2 durable timers, days away) started through the runtime, then copied with SQL to each size\n`);
  const db = await makeRestartDb();
  const rows: {
    jobs: number;
    fileBytes: number;
    runs: ChildReport[];
    median: ChildReport;
  }[] = [];
  try {
    console.log(`  template: ${TEMPLATE_JOBS} jobs via runtime.start (64 at a time, NORMAL) at ${fmtRate(db.templateStartsPerSec)} jobs/s`);
    for (const size of sizes) {
      db.grow(size);
      const runs: ChildReport[] = [];
      for (let k = 0; k < repeats(size); k += 1) runs.push(await measureRestart(db.path));
      const total = median(runs.map((r) => r.totalMs));
      const mid = runs.find((r) => r.totalMs === total) ?? runs[0]!;
      rows.push({ jobs: size, fileBytes: db.fileBytes(), runs, median: mid });
      process.stdout.write(`  ${fmtRate(size).padStart(6)} jobs: copied at ${fmtRate(db.copiedPerSec)} jobs/s; restart ${runs.map((r) => fmtMs(r.totalMs)).join(' / ')}\n`);
    }
  } finally {
    db.dispose();
  }
  const view = rows.map((r) => {
    const m = r.median;
    const perJob = (name: string) => (m.recoverCalls[name]?.calls ?? 0) / r.jobs;
    const recoverEngineMs = m.createRuntimeMs - m.recoverStoreMs;
    return {
      jobs: r.jobs,
      scheduledTimers: m.scheduledTimers,
      fileBytes: r.fileBytes,
      openStoreMs: round(m.openStoreMs, 2),
      createRuntimeMs: round(m.createRuntimeMs, 1),
      firstTickMs: round(m.firstTickMs, 2),
      totalMs: round(m.totalMs, 1),
      totalMsRuns: r.runs.map((x) => round(x.totalMs, 1)),
      recover: {
        usPerJob: round((m.createRuntimeMs * 1000) / r.jobs, 2),
        storeMs: round(m.recoverStoreMs, 1),
        engineMs: round(recoverEngineMs, 1),
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
      rssTarget: r.jobs >= 1_000_000 ? { bytes: RSS_TARGET_BYTES, verdict: m.memory.peakRss < RSS_TARGET_BYTES ? 'PASS' : 'ABOVE' } : null,
    };
  });
  console.log('');
  printTable(
    ['jobs', 'timers', 'db file', 'open store', 'createRuntime', 'first tick', 'total', 'µs/job', 'store reads in recover', 'RSS before', 'RSS after', 'RSS peak', 'heap after gc'],
    view.map((v) => [
      fmtRate(v.jobs),
      fmtRate(v.scheduledTimers),
      fmtMiB(v.fileBytes),
      fmtMs(v.openStoreMs),
      fmtMs(v.createRuntimeMs),
      fmtMs(v.firstTickMs),
      fmtMs(v.totalMs),
      v.recover.usPerJob.toFixed(1),
      `${v.recover.listJobsCalls} list + ${v.recover.getJobPerJob}×getJob/job`,
      fmtMiB(v.memory.rssBeforeOpen),
      fmtMiB(v.memory.rssAfterTick),
      fmtMiB(v.memory.rssPeak),
      fmtMiB(v.memory.heapUsedAfterGc),
    ]),
  );
  const last = view.at(-1)!;
  const first = view[0]!;
  const growth = (last.createRuntimeMs - first.createRuntimeMs) / (last.jobs - first.jobs);
  console.log(
    `  What grows with job count: createRuntime's open-time recovery checks EVERY active job (listJobs pages of 500, then per job getJob + parse + hydrate):`,
  );
  console.log(
    `  ${(growth * 1000).toFixed(1)} µs per extra job between ${fmtRate(first.jobs)} and ${fmtRate(last.jobs)} (${fmtMs(last.recover.storeMs)} of ${fmtMs(last.createRuntimeMs)} in store reads at ${fmtRate(last.jobs)}); ` +
      `opening the store and the first tick stay flat (${fmtMs(last.openStoreMs)}, ${fmtMs(last.firstTickMs)}).`,
  );
  console.log(
    `  RSS before open is node + tsx + modules (${fmtMiB(first.memory.rssBeforeOpen)}); growth to peak: ${view.map((v) => `${fmtRate(v.jobs)} +${fmtMiB(v.memory.rssPeak - v.memory.rssBeforeOpen)}`).join(', ')}; ` +
      `heap after gc ${view.map((v) => fmtMiB(v.memory.heapUsedAfterGc)).join(' / ')} (nothing per job is retained).`,
  );
  if (!ctx.big) console.log('  1M jobs: run with --big (the target is RSS < 200 MB at 1M waiting jobs).');
  else if (last.rssTarget) console.log(`  1M jobs: peak RSS ${fmtMiB(last.memory.rssPeak)} vs target 200 MB: ${last.rssTarget.verdict}.`);
  const load = hostLoad(load0);
  printLoadNote(load, 'times');
  return {
    method: {
      jobs: `approval-flow jobs pending with 2 scheduled timers each (reminder +1 day, deadline +3 days: none due at the first tick)`,
      creation: `${TEMPLATE_JOBS} jobs started through the runtime (runtime.start, 64 concurrent, NORMAL), then copied with SQL (INSERT … SELECT of jobs, transitions and timers rows with new ids) to each size; WAL checkpointed (TRUNCATE) before each restart; OS page cache left warm`,
      restart: 'fresh child process (node --import tsx bench/restartChild.ts): SqliteStore.open (FULL, the default), createRuntime({ recover: true by default, the 4 reference machines }), runtime.tick(); store wrapped to count calls; memory from process.memoryUsage() and resourceUsage().maxRSS',
      repeats: Object.fromEntries(sizes.map((n) => [n, repeats(n)])),
      templateStartsPerSec: round(db.templateStartsPerSec),
      copiedPerSec: round(db.copiedPerSec),
    },
    rssTargetBytesAt1M: RSS_TARGET_BYTES,
    results: view,
    recoverUsPerExtraJob: round(growth * 1000, 2),
    hostLoad: load,
  };
}

// ---------------------------------------------------------------- 4. path testing

export async function pathTestingSection(ctx: SectionContext) {
  const load0 = loadNow();
  console.log(`\n== 4. Path testing: generate and replay every path of the reference machines (collectPathTests(machines/index.ts) + runPathTests)`);
  const inventory = await pathInventory();
  console.log(`   ${inventory.machines} machines, ${inventory.paths} paths, ${inventory.steps} steps; SQLite NORMAL (the path-test default)`);
  const configs: PathConfig[] = ctx.quick ? ['child'] : ['plain', 'restart', 'child'];
  if (ctx.quick) console.log('   --quick: one run with plain + child; the restart replay is measured in the full bench');
  console.log('');
  const runs: PathTestingRun[] = [];
  for (const config of configs) {
    ctx.gc();
    const r = await runPathTesting(config, inventory.steps);
    runs.push(r);
    process.stdout.write(`  ${config.padEnd(8)} ${fmtMs(r.wallMs)} wall, ${r.runs.plain + r.runs.restart + r.runs.child} path runs, ok ${r.ok}\n`);
    for (const f of r.failures.slice(0, 5)) console.log(`    failure: ${f}`);
  }
  const rows = runs.map((r) => {
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
      msPerStep: { plain: round(r.replayMs.plain / r.steps, 2), ...(r.config !== 'plain' && r.config !== 'child' ? { [r.config]: round(extraMs / r.steps, 2) } : {}) },
      perMachine: r.perMachine,
      failures: r.failures,
    };
  });
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
  console.log(`  replay times are summed from runPathTests' path.finished events; generation from machine.started → machine.generated; a child-crash`);
  console.log(`  path runs every step in a new child process (node + tsx boot each), which is what its time is made of.`);
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
      synchronous: 'NORMAL',
    },
    inventory,
    results: rows,
    hostLoad: load,
  };
}

export type { HostLoad };
