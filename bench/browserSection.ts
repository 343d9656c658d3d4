/**
 * The browser section (`--only browser`): Spool in a Worker of headless Chromium (Debian's, through
 * playwright-core) on the sqlite-wasm driver, on OPFS through the SAH-pool VFS (bench/browser/worker.ts):
 *
 * - durable transitions/s of `await runtime.send` one after another (the sequential section's
 *   workload) against raw sqlite-wasm doing the same writes (a versioned UPDATE + a history
 *   INSERT per transaction) in the same Worker: a ratio, at FULL and NORMAL;
 * - the reopen after a page reload of a database holding 10k jobs waiting on timers: the module,
 *   the pool, the store, the runtime's recovery and its first tick().
 *
 * CPU is Chromium's (every process under this one, from /proc: the Worker runs in the renderer),
 * over a whole run (the store's open and the warm-up included) per transition made in it: 10 ms ticks, a rough figure.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { bundleWorker, openWasmPage } from '../test/helpers/wasmPage.ts';
import { browserForTests } from '../test/helpers/browser.ts';
import { SETTINGS, type Synchronous } from './rawRun.ts';
import type { SectionContext } from './sections.ts';
import { median } from './stats.ts';
import { fmtMs, fmtRate, fmtRatio, hostLoad, loadNow, printLoadNote, printTable, round } from './format.ts';

export const REOPEN_JOBS = 10_000;

/** CPU ms used so far by every process descended from this one (Chromium's), from /proc (Linux; null elsewhere). */
function childrenCpuMs(): number | null {
  try {
    const stats = new Map<number, { ppid: number; ticks: number }>();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const text = readFileSync(`/proc/${name}/stat`, 'utf8');
        const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
        stats.set(Number(name), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
      } catch {
        // gone meanwhile
      }
    }
    let ticks = 0;
    const mine = new Set([process.pid]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [pid, s] of stats) {
        if (!mine.has(pid) && mine.has(s.ppid)) {
          mine.add(pid);
          ticks += s.ticks;
          grew = true;
        }
      }
    }
    return ticks * 10; // USER_HZ = 100
  } catch {
    return null;
  }
}

interface Run {
  ops: number;
  seconds: number;
  perSec: number;
}

export async function browserSection(ctx: SectionContext) {
  const load0 = loadNow();
  console.log(`\n== 7. Browser: Spool in a Chromium Worker on sqlite-wasm (OPFS SAH pool) vs raw sqlite-wasm in the same Worker; reopen after a reload with ${REOPEN_JOBS / 1000}k waiting jobs\n`);
  const browserPath = browserForTests(process.env, (line) => console.log(`  ${line}`));
  if (browserPath === null) return { skipped: 'no browser' };
  const durationMs = ctx.quick ? 800 : 2000;
  // Commits on OPFS take milliseconds each (a flush of the file per sync): a short warm-up.
  const warmupOps = ctx.quick ? 20 : 50;
  const { code } = await bundleWorker('bench/browser/worker.ts');
  const wasm = await openWasmPage(browserPath, code);
  try {
    await wasm.rpc('wipe');
    const measured = async (kind: 'spool' | 'raw', synchronous: Synchronous) => {
      const cpu0 = childrenCpuMs();
      const r = await wasm.rpc<Run>(kind, { synchronous, durationMs, warmupOps });
      const cpu1 = childrenCpuMs();
      // Over the whole call (open, warm-up and the timed part): per transition made in it.
      return { ...r, cpuUsPerOp: cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) * 1000) / (r.ops + warmupOps) };
    };
    const rows = [];
    for (const synchronous of SETTINGS) {
      const spool: Awaited<ReturnType<typeof measured>>[] = [];
      const raw: Awaited<ReturnType<typeof measured>>[] = [];
      for (let round = 0; round < ctx.rounds; round++) {
        for (const kind of round % 2 === 0 ? (['raw', 'spool'] as const) : (['spool', 'raw'] as const)) {
          const r = await measured(kind, synchronous);
          (kind === 'raw' ? raw : spool).push(r);
          process.stdout.write(`  round ${round + 1} ${synchronous.padEnd(6)} ${kind.padEnd(5)} ${fmtRate(r.perSec).padStart(8)}/s\n`);
        }
      }
      const perSec = { spool: median(spool.map((r) => r.perSec)), raw: median(raw.map((r) => r.perSec)) };
      const cpu = (runs: typeof spool) => (runs.every((r) => r.cpuUsPerOp !== null) ? round(median(runs.map((r) => r.cpuUsPerOp!)), 0) : null);
      rows.push({ synchronous, spoolPerSec: round(perSec.spool), rawPerSec: round(perSec.raw), ratio: round(perSec.spool / perSec.raw, 3), spoolCpuUsPerOp: cpu(spool), rawCpuUsPerOp: cpu(raw) });
    }
    printTable(
      ['synchronous', 'Spool/s', 'raw/s', 'Spool/raw', 'CPU µs/transition Spool', 'raw'],
      rows.map((r) => [r.synchronous, fmtRate(r.spoolPerSec), fmtRate(r.rawPerSec), fmtRatio(r.ratio), String(r.spoolCpuUsPerOp ?? '?'), String(r.rawCpuUsPerOp ?? '?')]),
    );

    const path = '/reopen.db';
    const seeded = await wasm.rpc<{ perSec: number }>('seed', { path, count: REOPEN_JOBS });
    await wasm.reload();
    const cpu0 = childrenCpuMs();
    const reopen = await wasm.rpc<{ moduleMs: number; poolMs: number; storeMs: number; runtimeMs: number; tickMs: number; totalMs: number; waiting: number }>('reopen', { path });
    const cpu1 = childrenCpuMs();
    if (reopen.waiting !== REOPEN_JOBS) throw new Error(`browser bench: ${reopen.waiting} jobs waiting after the reload, expected ${REOPEN_JOBS}`);
    console.log('');
    printTable(
      ['reopen, 10k waiting', 'module', 'pool', 'store', 'runtime', 'first tick', 'total', 'CPU ms'],
      [['after a reload', fmtMs(reopen.moduleMs), fmtMs(reopen.poolMs), fmtMs(reopen.storeMs), fmtMs(reopen.runtimeMs), fmtMs(reopen.tickMs), fmtMs(reopen.totalMs), cpu0 === null || cpu1 === null ? '?' : String(cpu1 - cpu0)]],
    );
    console.log(`  (seeded with runtime.startMany at ${fmtRate(seeded.perSec)} jobs/s; the pool's install includes waiting for the reloaded page's Worker to let the files go)`);
    const load = hostLoad(load0);
    printLoadNote(load);
    return {
      method: {
        spool: `job-lifecycle PROGRESS events awaited one by one through a host-driven runtime in a Worker, openSqliteWasmStore on the OPFS SAH pool, ${durationMs} ms per run after ${warmupOps} warm-up`,
        limit: 'raw sqlite-wasm (oo1) in the same Worker and VFS: per transition BEGIN IMMEDIATE, versioned UPDATE jobs of the same snapshot JSON, one transitions INSERT, COMMIT',
        reopen: `${REOPEN_JOBS} sleeper jobs (an hour's after timer) made with startMany; page reloaded; module init + installOpfsSAHPoolVfs + openSqliteWasmStore + createRuntime + first tick()`,
        cpu: "Chromium's processes (utime+stime from /proc, the Worker in the renderer) over the whole run (open and warm-up included), per transition made; median",
        rounds: ctx.rounds,
      },
      transitions: rows,
      reopen: { jobs: REOPEN_JOBS, ...Object.fromEntries(Object.entries(reopen).map(([k, v]) => [k, typeof v === 'number' ? round(v, 1) : v])), cpuMs: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0 },
      hostLoad: load,
    };
  } finally {
    await wasm.close();
  }
}
