/**
 * `npm run bench` — Spool's performance, each figure beside a limit measured in the same run.
 *
 *   0. sequential sends: durable transitions/s of `await runtime.send` one after another (FULL, NORMAL)
 *   1. group commit: many jobs sending at once through one runtime vs raw SQLite 100 transitions/transaction
 *   2. jobs: activity jobs (1 or 3 no-work fromPromise steps) from runtime.start to their final state,
 *      run by runWorker, at FULL / NORMAL with 1 and 64 at once: jobs/s, CPU µs/job, commits/job,
 *      p50/p99 start → final, beside raw SQLite doing the same writes 100 to a transaction and the
 *      afternoon baseline (createActor + getPersistedSnapshot + versioned UPDATE); and a light load
 *      of 100 jobs/s at FULL (bench/jobsSection.ts)
 *   3. restart: createRuntime (recover) + first tick and RSS with 10k / 100k (--big: 1M) jobs waiting on timers
 *   4. path testing: generate and replay every path of the reference machines, with and without crash replay
 *   6. queue: a backlog of N jobs drained while 32 producers enqueue, and enqueue-all-then-drain (bench/queueSection.ts; --queue-full: 1k/10k/100k)
 *   7. browser: in a Chromium Worker, transitions/s on the sqlite-wasm driver (OPFS SAH pool) vs raw sqlite-wasm in
 *      the same Worker, and the reopen after a reload with 10k waiting jobs (bench/browserSection.ts; skipped without a browser)
 *   5. workers: jobs/s with 1, 2 and 4 runWorker processes on one SQLite file (FULL) and on one Postgres database, 8 activities at
 *      once each (and 1, 2 at 64), CPU µs/job, vs each store's raw limit (Postgres: 1 per transaction from 1 and 4 connections, and 100 batched)
 *
 * Every section runs on SQLite and on Postgres (bench/pgSections.ts; issue #16): the same runners with
 * the store as a parameter (bench/benchDb.ts), each Postgres figure beside Postgres's raw limit
 * measured in the same run (bench/pgRaw.ts: the versioned UPDATE + history INSERT, one per
 * transaction from 1 connection and from the case's in-flight count, and 100 per transaction),
 * with CPU µs this process + the server (/proc). A section's report keeps its SQLite fields and
 * gains `postgres`. Postgres has no speed targets but the workers' scaling ones: ratios only.
 *
 * The run ends with issue #14's targets (bench/targets.ts) against the figures it measured.
 *
 *   npm run bench                 full, both stores (27 min on the shared 2-core host at load 8-17; SQLite alone ~4 min quiet)
 *   npm run bench -- --quick      shorter runs, one round (8 min there, both stores; SQLite alone ~1 min quiet)
 *   npm run bench -- --big        also restart with 1M waiting jobs (adds a few minutes and ~1.3 GB of temp disk)
 *   npm run bench -- --only group,jobs   some sections (sequential, group, jobs, restart, paths, workers): writes results/partial.json
 *   npm run bench -- --profile    where a Spool send spends its time at NORMAL (no results file)
 *   npm run bench -- --store sqlite|postgres|both   the stores (default both); --pg-url URL (or
 *                                 SPOOL_BENCH_PG_URL) names a server, else a throwaway cluster is started (bench/pgServer.ts)
 *
 * Options: --rounds N, --duration-ms N, --warmup N (sequential section; --rounds also the group
 * section). A ratio below its target is reported, never an exit code: this is a measurement, not a test.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import os from 'node:os';
import { scriptArgs } from './cliArgs.ts';
import { machineInfo } from './machineInfo.ts';
import { runRaw, SETTINGS, type RunResult, type Synchronous } from './rawRun.ts';
import { runSpool } from './spoolRun.ts';
import { runStoreOnly } from './storeOnlyRun.ts';
import { runBareLoop } from './bareLoop.ts';
import { latencySummary, median } from './stats.ts';
import { WORKLOAD } from './workload.ts';
import { runProfile } from './profile.ts';
import { fmtMs, fmtRate, hostLoad, loadNow, printLoadNote, printTable } from './format.ts';
import { groupCommitSection, pathTestingSection, restartSection, type SectionContext } from './sections.ts';
import { browserSection } from './browserSection.ts';
import { workersSection } from './workersSection.ts';
import { benchPostgres } from './pgServer.ts';
import { STORE_KINDS, type StoreKind } from './benchDb.ts';
import { groupCommitPg, jobsPg, pathTestingPg, restartPg, sequentialPg } from './pgSections.ts';
import { jobsSection } from './jobsSection.ts';
import { queueSection } from './queueSection.ts';
import { check, printTargets, TARGETS, type TargetCheck } from './targets.ts';

const USAGE = `npm run bench -- [options]: Spool's performance, each figure beside a limit measured in the same run

  --quick                 shorter runs, one round
  --only LIST             some sections: sequential, group, jobs, restart, paths, workers, queue, browser (comma-separated)
  --queue-full            the queue section at backlogs 1k, 10k and 100k, and c64 (default 1k, 10k; --quick 500, 2k)
  --store KIND            sqlite, postgres or both (default both)
  --pg-url URL            a Postgres server to use (or SPOOL_BENCH_PG_URL); otherwise a throwaway cluster is started
  --big                   also restart with 1M waiting jobs (a few minutes, ~1.3 GB of temp disk)
  --profile               where one send spends its time at NORMAL (no results file)
  --rounds N              rounds of the sequential and group sections (default 3; --quick 1)
  --duration-ms N         each sequential run's length (default 2500; --quick 800)
  --warmup N              sends before each timed sequential run (default 300; --quick 100)

Writes bench/results/latest.json (partial.json with --only). A ratio below its target is reported, never an exit code.`;

const args = scriptArgs('bench', USAGE, {
  quick: { type: 'boolean', default: false },
  profile: { type: 'boolean', default: false },
  rounds: { type: 'string' },
  'duration-ms': { type: 'string' },
  warmup: { type: 'string' },
  big: { type: 'boolean', default: false },
  only: { type: 'string' },
  store: { type: 'string' },
  'pg-url': { type: 'string' },
  'queue-full': { type: 'boolean', default: false },
});

const quick = args.quick ?? false;
const rounds = positiveInt(args.rounds, quick ? 1 : 3, '--rounds');
const durationMs = positiveInt(args['duration-ms'], quick ? 800 : 2500, '--duration-ms');
const warmupOps = positiveInt(args.warmup, quick ? 100 : 300, '--warmup');
const SECTIONS = ['sequential', 'group', 'jobs', 'restart', 'paths', 'workers', 'queue', 'browser'] as const;
type Section = (typeof SECTIONS)[number];
const only = new Set<Section>((args.only ?? SECTIONS.join(',')).split(',').map((s) => s.trim()).filter(Boolean) as Section[]);
for (const s of only) {
  if (!SECTIONS.includes(s)) {
    console.error(`--only takes a comma-separated list of ${SECTIONS.join(', ')}; got "${s}".`);
    process.exit(2);
  }
}

const storeArg = args.store ?? 'both';
const stores = (storeArg === 'both' ? STORE_KINDS.join(',') : storeArg).split(',').map((s) => s.trim()).filter(Boolean) as StoreKind[];
for (const s of stores) {
  if (!STORE_KINDS.includes(s)) {
    console.error(`--store takes sqlite, postgres or both; got "${storeArg}".`);
    process.exit(2);
  }
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

if (args.profile) {
  await runProfile({ durationMs: Math.max(durationMs, 2000), warmupOps, gc });
} else {
  await main();
}

async function main(): Promise<void> {
  const started = performance.now();
  const machine = machineInfo();
  console.log(`Spool bench${quick ? ' (--quick)' : ''}${args.big ? ' (--big)' : ''}: sections ${[...only].join(', ')}`);
  console.log(
    `node ${machine.node}, SQLite ${machine.sqlite} (better-sqlite3 ${machine.betterSqlite3}), xstate ${machine.xstate}, ` +
      `${machine.cpus} × ${machine.cpuModel}, load ${machine.loadavg.join(' ')}, git ${machine.gitCommit ?? '?'}${machine.gitDirty ? ' (engine files modified)' : ''}`,
  );
  const ctx: SectionContext = { quick, stores, big: args.big ?? false, rounds, gc };
  if (stores.includes('postgres')) {
    const pg = await benchPostgres(args['pg-url'] ?? process.env['SPOOL_BENCH_PG_URL']);
    console.log(`Postgres ${pg.settings['server_version']} at ${pg.url.replace(/\/\/[^@]*@/, '//')}${args['pg-url'] ?? process.env['SPOOL_BENCH_PG_URL'] ? '' : ' (a throwaway cluster, bench/pgServer.ts)'}: fsync ${pg.settings['fsync']}, synchronous_commit ${pg.settings['synchronous_commit']}`);
  }
  const report: Record<string, unknown> = {
    generatedAt: new Date().toISOString(),
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    quick,
    sections: [...only],
    machine,
  };
  const loads: number[] = [machine.loadavg[0]!];
  // A section that throws (an engine change broke it) is reported and recorded; the others still run.
  const run = async (name: Section, key: string | null, section: () => Promise<Record<string, unknown>>) => {
    if (!only.has(name)) return;
    try {
      const result = await section();
      if (key === null) Object.assign(report, result);
      else report[key] = result;
    } catch (error) {
      console.error(`\nSection ${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      report[key ?? name] = { error: error instanceof Error ? error.message : String(error) };
      process.exitCode = 1;
    }
    loads.push(loadNow());
  };
  await run('sequential', null, () => onStores(() => sequentialSection(machine), () => sequentialPg(ctx, { durationMs, warmupOps })));
  await run('group', 'groupCommit', () => onStores(() => groupCommitSection(ctx), () => groupCommitPg(ctx)));
  await run('jobs', 'jobs', () => onStores(() => jobsSection(ctx), () => jobsPg(ctx)));
  await run('restart', 'restart', () => onStores(() => restartSection(ctx), () => restartPg(ctx)));
  await run('paths', 'pathTesting', () => onStores(() => pathTestingSection(ctx), () => pathTestingPg(ctx)));
  await run('workers', 'workers', () => workersSection(ctx));
  await run('queue', 'queue', () => queueSection({ ...ctx, queueFull: args['queue-full'] ?? false }));
  await run('browser', 'browser', () => browserSection(ctx));

  // Every target a section checked, in one table at the end (bench/targets.ts).
  // The sequential section's figures sit at the top level of the report, the others under their keys.
  const targets = [report, ...Object.values(report)].flatMap((v) => {
    const list = v !== null && typeof v === 'object' ? (v as { targets?: unknown }).targets : undefined;
    return Array.isArray(list) ? (list as TargetCheck[]) : [];
  });
  if (targets.length > 0) {
    console.log('\n== Targets (bench/targets.ts: issue #14 and the one before; a figure below its target is reported, never an exit code)\n');
    printTargets(targets);
  }
  const busiest = Math.max(...loads);
  report['hostLoad'] = { samples: loads, busiest, cpus: machine.cpus, busy: busiest > machine.cpus };
  report['elapsedSeconds'] = Math.round((performance.now() - started) / 100) / 10;
  console.log(
    `\nHost load (1-min average) over the run: ${loads.map((l) => l.toFixed(2)).join(' → ')} on ${machine.cpus} CPUs` +
      (busiest > machine.cpus ? ': BUSY at some point, compare ratios rather than absolute figures, and re-run when quiet before quoting them.' : ': quiet enough.'),
  );
  // A run of some sections (--only) does not replace the full results.
  const file = only.size === SECTIONS.length ? 'latest.json' : 'partial.json';
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(new URL(`./results/${file}`, import.meta.url), `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote bench/results/${file} (${report['elapsedSeconds']} s)`);
}

/**
 * A section on the stores `--store` names: its SQLite half's report as it always was, and the
 * Postgres half's (bench/pgSections.ts) under `postgres`.
 */
async function onStores(sqlite: () => Promise<Record<string, unknown>>, postgres: () => Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
  const report = stores.includes('sqlite') ? await sqlite() : {};
  if (!stores.includes('postgres')) return report;
  // A Postgres half that throws is reported and recorded without losing the SQLite half's figures.
  try {
    report['postgres'] = await postgres();
  } catch (error) {
    if (!stores.includes('sqlite')) throw error;
    console.error(`\nThe Postgres half failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    report['postgres'] = { error: error instanceof Error ? error.message : String(error) };
    process.exitCode = 1;
  }
  return report;
}

/** Section 0 (the original bench): sequential `await runtime.send` vs one raw transaction per step. */
async function sequentialSection(machine: ReturnType<typeof machineInfo>) {
  const load0 = loadNow();
  console.log(`\n== 0. Sequential sends: ${WORKLOAD}`);
  console.log(`   ${rounds} round(s) per setting, raw and Spool alternating, ${durationMs} ms per run after ${warmupOps} warm-up commits, fresh db in ${machine.tmpdir}\n`);

  // Warm the JIT on both paths before anything is timed.
  runRaw({ synchronous: 'NORMAL', durationMs: 300, warmupOps: 50 });
  await runSpool({ synchronous: 'NORMAL', durationMs: quick ? 300 : 600, warmupOps: 50 });

  const collected = await collectSequentialRuns();
  const results = sequentialResults(collected);

  const load = hostLoad(load0);
  const loadAfter = load.after;
  const busiest = Math.max(machine.loadavg[0]!, loadAfter);
  const hostBusy = busiest > machine.cpus;

  printSequentialResults(results);
  printLoadNote({ ...load, before: Math.max(load.before, machine.loadavg[0]!), busy: hostBusy });

  // The original report's fields, unchanged, at the top level of latest.json.
  return {
    method: {
      workload: WORKLOAD,
      spool: 'await runtime.send(jobId, event) one after another; SqliteStore.open(tmp, { synchronous }); one event = one commit (revision checked)',
      limit:
        'better-sqlite3 directly: per step one BEGIN IMMEDIATE transaction with a versioned UPDATE jobs … WHERE id=? AND revision=? ' +
        'of the same snapshot JSON plus one transitions INSERT; WAL, same synchronous, busy_timeout 5000',
      rounds,
      durationMsPerRun: durationMs,
      warmupOps,
      order: 'per round and setting, raw and Spool alternate which goes first; figures are medians over rounds; latencies pooled over rounds',
      tmpdir: machine.tmpdir,
    },
    target: TARGETS.sequentialVsRaw,
    targets: results.map((r) => check(`sequential send, ${r.synchronous}: Spool / raw`, r.ratio, { min: r.target })),
    hostBusy,
    loadAfter: Math.round(loadAfter * 100) / 100,
    results,
  };
}

/** The runs of one synchronous setting: raw, Spool, Spool's commit statements alone, the bare loop; the snapshot's size. */
type SequentialCollected = { raw: RunResult[]; spool: RunResult[]; store: RunResult[]; bare: RunResult[]; snapshotBytes: number };

/** Every round of every setting: raw and Spool (alternating which goes first), then the store alone and the bare loop. */
async function collectSequentialRuns(): Promise<Map<Synchronous, SequentialCollected>> {
  const collected = new Map<Synchronous, SequentialCollected>(SETTINGS.map((s) => [s, { raw: [], spool: [], store: [], bare: [], snapshotBytes: 0 }]));
  for (let round = 0; round < rounds; round += 1) {
    for (const synchronous of SETTINGS) {
      const c = collected.get(synchronous)!;
      const order = round % 2 === 0 ? (['raw', 'spool'] as const) : (['spool', 'raw'] as const);
      for (const kind of order) {
        gc();
        const opts = { synchronous, durationMs, warmupOps };
        if (kind === 'raw') c.raw.push(runRaw(opts));
        else {
          const r = await runSpool(opts);
          c.snapshotBytes = r.snapshotBytes;
          c.spool.push(r);
        }
        const last = (kind === 'raw' ? c.raw : c.spool).at(-1)!;
        process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} ${kind.padEnd(5)} ${fmtRate(last.perSec).padStart(8)}/s\n`);
      }
      // The ceiling of Spool's storage layout: its commit statements alone, no engine, no read.
      gc();
      c.store.push(await runStoreOnly({ synchronous, durationMs, warmupOps }));
      process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} store ${fmtRate(c.store.at(-1)!.perSec).padStart(8)}/s (commit statements only)\n`);
      // The bare loop: the least work the runtime issue asks of a send, and nothing else.
      gc();
      c.bare.push(await runBareLoop({ synchronous, durationMs, warmupOps }));
      process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} bare  ${fmtRate(c.bare.at(-1)!.perSec).padStart(8)}/s (validate, transition, serialise, write: nothing else)\n`);
    }
  }
  return collected;
}

/** Per setting: Spool's figures beside the limit's, the store alone's and the bare loop's, medians over rounds. */
function sequentialResults(collected: Map<Synchronous, SequentialCollected>) {
  return SETTINGS.map((synchronous) => {
    const c = collected.get(synchronous)!;
    const spoolPerSec = median(c.spool.map((r) => r.perSec));
    const rawPerSec = median(c.raw.map((r) => r.perSec));
    const ratio = spoolPerSec / rawPerSec;
    const target = TARGETS.sequentialVsRaw[synchronous];
    return {
      synchronous,
      spool: {
        transitionsPerSec: round1(spoolPerSec),
        roundsPerSec: c.spool.map((r) => round1(r.perSec)),
        latency: latencySummary(c.spool.map((r) => r.latencies)),
      },
      limit: {
        transitionsPerSec: round1(rawPerSec),
        roundsPerSec: c.raw.map((r) => round1(r.perSec)),
        latency: latencySummary(c.raw.map((r) => r.latencies)),
      },
      ratio: Math.round(ratio * 1000) / 1000,
      pairedRatios: c.spool.map((s, i) => Math.round((s.perSec / c.raw[i]!.perSec) * 1000) / 1000),
      /** Spool's store commit alone (no engine, no job read) against the same limit: the storage layout's ceiling. */
      storeOnly: {
        transitionsPerSec: round1(median(c.store.map((r) => r.perSec))),
        ratio: Math.round((median(c.store.map((r) => r.perSec)) / rawPerSec) * 1000) / 1000,
      },
      /**
       * The bare loop (bench/bareLoop.ts) against the same limit: zod validation, XState's
       * transition, the snapshot's JSON and the limit's writes with state and context, and nothing
       * else (no event ids, duplicate checks, leases, inbox order or async store). What any
       * XState runtime on this layout could reach here: the room a target leaves for the rest.
       */
      bareLoop: {
        transitionsPerSec: round1(median(c.bare.map((r) => r.perSec))),
        ratio: Math.round((median(c.bare.map((r) => r.perSec)) / rawPerSec) * 1000) / 1000,
      },
      target,
      verdict: ratio >= target ? ('PASS' as const) : ('BELOW' as const),
      snapshotBytes: c.snapshotBytes,
    };
  });
}

/** The sequential-send table and, per setting, its rounds, the store alone and the bare loop. */
function printSequentialResults(results: ReturnType<typeof sequentialResults>): void {
  console.log('');
  const header = ['sync', 'Spool tx/s', 'raw limit tx/s', 'ratio', 'target', 'send p50', 'send p99', 'raw p50', 'raw p99'];
  const rows = results.map((r) => [
    r.synchronous,
    fmtRate(r.spool.transitionsPerSec),
    fmtRate(r.limit.transitionsPerSec),
    r.ratio.toFixed(2),
    `${r.target}: ${r.verdict}`,
    fmtMs(r.spool.latency.p50Ms),
    fmtMs(r.spool.latency.p99Ms),
    fmtMs(r.limit.latency.p50Ms),
    fmtMs(r.limit.latency.p99Ms),
  ]);
  printTable(header, rows);
  for (const r of results) {
    console.log(`  ${r.synchronous}: Spool per round ${r.spool.roundsPerSec.map(fmtRate).join(' / ')}, raw ${r.limit.roundsPerSec.map(fmtRate).join(' / ')}, paired ratios ${r.pairedRatios.join(' / ')}`);
    console.log(`  ${r.synchronous}: Spool's commit statements alone (no engine, no read) ${fmtRate(r.storeOnly.transitionsPerSec)}/s = ${r.storeOnly.ratio.toFixed(2)} of the limit: the ceiling of its storage layout`);
    console.log(`  ${r.synchronous}: the bare loop (zod validation, XState transition, snapshot JSON, the limit's writes with state and context; nothing else) ${fmtRate(r.bareLoop.transitionsPerSec)}/s = ${r.bareLoop.ratio.toFixed(2)} of the limit`);
  }
}

function positiveInt(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`${name} takes a positive integer, got "${text}".`);
    process.exit(2);
  }
  return n;
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}
