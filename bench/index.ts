/**
 * `npm run bench` — durable transitions per second through Spool, beside the raw SQLite limit.
 *
 *   npm run bench                 3 alternating rounds per setting, ~2.5 s per run (~40 s)
 *   npm run bench -- --quick      1 round, ~0.8 s per run (~8 s)
 *   npm run bench -- --profile    where a Spool send spends its time at NORMAL (no results file)
 *
 * Options: --rounds N, --duration-ms N, --warmup N. A ratio below the target is reported, never
 * an exit code: this is a measurement, not a test.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { machineInfo } from './machineInfo.ts';
import { runRaw, type RunResult, type Synchronous } from './rawRun.ts';
import { runSpool } from './spoolRun.ts';
import { median, Samples } from './stats.ts';
import { WORKLOAD } from './workload.ts';
import { runProfile } from './profile.ts';

const TARGET_RATIO = 0.7;
const SETTINGS: readonly Synchronous[] = ['FULL', 'NORMAL'];

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    'duration-ms': { type: 'string' },
    warmup: { type: 'string' },
  },
  strict: true,
});

const quick = args.quick ?? false;
const rounds = positiveInt(args.rounds, quick ? 1 : 3, '--rounds');
const durationMs = positiveInt(args['duration-ms'], quick ? 800 : 2500, '--duration-ms');
const warmupOps = positiveInt(args.warmup, quick ? 100 : 300, '--warmup');

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
  console.log(`Spool bench: ${WORKLOAD}`);
  console.log(
    `node ${machine.node}, SQLite ${machine.sqlite} (better-sqlite3 ${machine.betterSqlite3}), xstate ${machine.xstate}, ` +
      `${machine.cpus} × ${machine.cpuModel}, load ${machine.loadavg.join(' ')}`,
  );
  console.log(`${rounds} round(s) per setting, raw and Spool alternating, ${durationMs} ms per run after ${warmupOps} warm-up commits, fresh db in ${machine.tmpdir}\n`);

  // Warm the JIT on both paths before anything is timed.
  runRaw({ synchronous: 'NORMAL', durationMs: 300, warmupOps: 50 });
  await runSpool({ synchronous: 'NORMAL', durationMs: quick ? 300 : 600, warmupOps: 50 });

  type Collected = { raw: RunResult[]; spool: RunResult[]; snapshotBytes: number };
  const collected = new Map<Synchronous, Collected>(SETTINGS.map((s) => [s, { raw: [], spool: [], snapshotBytes: 0 }]));
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
    }
  }

  const results = SETTINGS.map((synchronous) => {
    const c = collected.get(synchronous)!;
    const spoolPerSec = median(c.spool.map((r) => r.perSec));
    const rawPerSec = median(c.raw.map((r) => r.perSec));
    const ratio = spoolPerSec / rawPerSec;
    return {
      synchronous,
      spool: {
        transitionsPerSec: round1(spoolPerSec),
        roundsPerSec: c.spool.map((r) => round1(r.perSec)),
        latency: roundLatency(Samples.summarize(c.spool.map((r) => r.latencies))),
      },
      limit: {
        transitionsPerSec: round1(rawPerSec),
        roundsPerSec: c.raw.map((r) => round1(r.perSec)),
        latency: roundLatency(Samples.summarize(c.raw.map((r) => r.latencies))),
      },
      ratio: Math.round(ratio * 1000) / 1000,
      pairedRatios: c.spool.map((s, i) => Math.round((s.perSec / c.raw[i]!.perSec) * 1000) / 1000),
      target: TARGET_RATIO,
      verdict: ratio >= TARGET_RATIO ? ('PASS' as const) : ('BELOW' as const),
      snapshotBytes: c.snapshotBytes,
    };
  });

  const loadAfter = os.loadavg()[0]!;
  const busiest = Math.max(machine.loadavg[0]!, loadAfter);
  const hostBusy = busiest > machine.cpus;

  console.log('');
  const header = ['sync', 'Spool tx/s', 'raw limit tx/s', 'ratio', `target ${TARGET_RATIO}`, 'send p50', 'send p99', 'raw p50', 'raw p99'];
  const rows = results.map((r) => [
    r.synchronous,
    fmtRate(r.spool.transitionsPerSec),
    fmtRate(r.limit.transitionsPerSec),
    r.ratio.toFixed(2),
    r.verdict,
    fmtMs(r.spool.latency.p50Ms),
    fmtMs(r.spool.latency.p99Ms),
    fmtMs(r.limit.latency.p50Ms),
    fmtMs(r.limit.latency.p99Ms),
  ]);
  printTable(header, rows);
  for (const r of results) {
    console.log(`  ${r.synchronous}: Spool per round ${r.spool.roundsPerSec.map(fmtRate).join(' / ')}, raw ${r.limit.roundsPerSec.map(fmtRate).join(' / ')}, paired ratios ${r.pairedRatios.join(' / ')}`);
  }

  if (hostBusy) {
    console.log(
      `\nWARNING: the host was busy (1-min load up to ${busiest.toFixed(2)} on ${machine.cpus} CPUs): figures swing with other work, ` +
        'FULL most (its commits queue behind other processes\' disk syncs). Re-run when the host is quiet before quoting them.',
    );
  }

  const report = {
    generatedAt: new Date().toISOString(),
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    quick,
    machine,
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
    target: TARGET_RATIO,
    hostBusy,
    loadAfter: Math.round(loadAfter * 100) / 100,
    results,
    elapsedSeconds: Math.round((performance.now() - started) / 100) / 10,
  };
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const out = new URL('./results/latest.json', import.meta.url);
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nwrote bench/results/latest.json (${report.elapsedSeconds} s)`);
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

function roundLatency(l: ReturnType<typeof Samples.summarize>) {
  const r = (ms: number) => Math.round(ms * 1000) / 1000;
  return { p50Ms: r(l.p50Ms), p99Ms: r(l.p99Ms), maxMs: r(l.maxMs), samples: l.samples };
}

function fmtRate(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : Math.round(n).toLocaleString('en-US');
}

function fmtMs(ms: number): string {
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`;
}

function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}
