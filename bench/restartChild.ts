/**
 * Section 3's child process: open an existing Spool database of N jobs waiting on timers, time
 * `SqliteStore.open` (or `PostgresStore.open` for a URL) + `createRuntime` (with recover, the default) + the first `tick()`, and
 * report resident memory. Prints one JSON line. Run by bench/restart.ts in a fresh process so
 * nothing (page cache aside) is warm.
 *
 *   node --import tsx bench/restartChild.ts <db path> [verify|no-verify]
 *
 * `verify` (the default) opens with createRuntime's defaults; `no-verify` passes
 * `verifySnapshots: false` (recovery checks machine versions by SQL aggregate, not every job).
 */
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createRuntime } from '../src/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../machines/index.ts';
import { countingStore, StoreCounter } from './countingStore.ts';

const importedAtMs = performance.now(); // since process start: node boot + tsx + module load
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const path = process.argv[2];
const mode = process.argv[3] ?? 'verify';
if (!path || (mode !== 'verify' && mode !== 'no-verify')) {
  console.error('usage: restartChild.ts <db path or postgres:// URL> [verify|no-verify]');
  process.exit(2);
}
// Postgres's module is loaded before the clock starts, and only for a URL (SQLite's RSS stays as it was).
const Postgres = /^postgres(ql)?:\/\//i.test(path) ? (await import('../persistence/drivers/pg/index.ts')).PostgresStore : null;

const mem = () => {
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers };
};

gc();
const before = mem();
const counter = new StoreCounter();
const t0 = performance.now();
const store: SqliteStore | PostgresStore = Postgres ? await Postgres.open(path) : await SqliteStore.open(path); // SQLite's defaults: synchronous FULL, WAL
const t1 = performance.now();
const runtime = await createRuntime({
  store: countingStore(store, counter),
  machines: [jobLifecycle, retryingJob, exportJob, approvalFlow],
  ...(mode === 'no-verify' ? { verifySnapshots: false } : {}),
});
const t2 = performance.now();
const recoverCalls = counter.perUnit(1, 0);
const recoverStoreMs = counter.totalMs();
const afterRecover = mem();
counter.reset();
const tick = await runtime.tick();
const t3 = performance.now();
const tickCalls = counter.perUnit(1, 0);
const afterTick = mem();
const peakRss = process.resourceUsage().maxRSS * 1024;
gc();
const afterGc = mem();
const count = async (sql: string) => Number('db' in store ? store.db.prepare(sql).pluck().get() : Object.values((await store.pool.query(sql)).rows[0] as object)[0]) || 0;
const activeJobs = await count("SELECT count(*) FROM jobs WHERE status = 'active'");
const scheduledTimers = await count("SELECT count(*) FROM timers WHERE status = 'scheduled'");
await runtime.close();

process.stdout.write(
  `${JSON.stringify({
    type: 'restart',
    mode,
    activeJobs,
    scheduledTimers,
    importedAtMs,
    openStoreMs: t1 - t0,
    createRuntimeMs: t2 - t1,
    firstTickMs: t3 - t2,
    totalMs: t3 - t0,
    recoverStoreMs,
    recoverCalls,
    tick,
    tickCalls,
    memory: { before, afterRecover, afterTick, afterGc, peakRss },
  })}\n`,
);
