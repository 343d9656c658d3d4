/**
 * A focused run for profiling (not part of `npm run bench`): one queue case, while-draining (or
 * `--then-drain`), on SQLite, or with `--pg` on Postgres (SPOOL_BENCH_PG_URL, else a throwaway
 * server: bench/pgServer.ts).
 * `tsx bench/queueProfile.ts [steps=3|timed|retried] [c=16] [backlog=2000] [NORMAL|FULL] [--then-drain] [--sql] [--pg]`; with
 * `--sql`, the statements run per job, by SQL text (Postgres: the round trips; SQLite: their wall µs, and
 * how COMMIT's time is spread). Profile with `node --import tsx --cpu-prof`.
 * `tsx bench/queueProfile.ts starts [jobs=5000] [inFlight=64] [batch=1] [--sql] [--pg]`: the starts
 * case (`runStarts`: `start` when batch is 1, else `startMany`), no worker, NORMAL.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { runSpoolQueue, runStarts } from './queueRun.ts';
import { JOB_SHAPES, RETRY_SHAPE, TIMED_SHAPE } from './jobsRun.ts';
import { benchPostgres } from './pgServer.ts';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const store = process.argv.includes('--pg') ? 'postgres' : 'sqlite';
if (store === 'postgres') await benchPostgres(process.env['SPOOL_BENCH_PG_URL']);
const [steps = '3', c = '16', backlog = '2000', sync = 'NORMAL'] = args;
const bySql = new Map<string, number>();
const timeBySql = new Map<string, number>();
/** Each COMMIT's wall ms (SQLite): the WAL writes, and a checkpoint when the commit runs one. */
const commitMs: number[] = [];
const keyOf = (text: string) => text.replace(/\s+/g, ' ').slice(0, 110);
const count = (text: string) => {
  const key = keyOf(text);
  bySql.set(key, (bySql.get(key) ?? 0) + 1);
};
if (process.argv.includes('--sql') && store === 'postgres') {
  // Every round trip a client makes (a query, or statements sent together as one simple query), by text.
  const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...a: unknown[]) {
    const q = a[0];
    count(typeof q === 'string' ? q : String((q as { text?: string; name?: string })?.text ?? (q as { name?: string })?.name ?? '?'));
    return original.apply(this, a);
  };
} else if (process.argv.includes('--sql')) {
  const memory = new Database(':memory:');
  const proto = Object.getPrototypeOf(memory.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
  memory.close();
  for (const name of ['run', 'get', 'all', 'iterate']) {
    const original = proto[name]!;
    proto[name] = function (this: { source: string }, ...a: unknown[]) {
      count(this.source);
      const t0 = performance.now();
      try {
        return original.apply(this, a);
      } finally {
        const key = keyOf(this.source);
        const ms = performance.now() - t0;
        timeBySql.set(key, (timeBySql.get(key) ?? 0) + ms);
        if (key === 'COMMIT') commitMs.push(ms);
      }
    };
  }
}
const shape = steps === 'retried' ? RETRY_SHAPE : steps === 'timed' ? TIMED_SHAPE : JOB_SHAPES.find((s) => s.steps === (args[0] === 'starts' ? 3 : Number(steps)))!;
const r =
  args[0] === 'starts'
    ? await runStarts({ store, synchronous: 'NORMAL', shape, jobs: Number(args[1] ?? 5000), inFlight: Number(args[2] ?? 64), batch: Number(args[3] ?? 1) })
    : await runSpoolQueue({ store, synchronous: sync as 'NORMAL', shape, concurrency: Number(c), backlog: Number(backlog), mode: process.argv.includes('--then-drain') ? 'then-drain' : 'while-draining' });
console.log(JSON.stringify(r));
// Per job: how many times each statement ran and, on SQLite, the wall µs it took (the native work, its I/O included).
for (const [sql, n] of [...bySql].sort((a, b) => b[1] - a[1])) {
  const us = timeBySql.get(sql);
  if (n / r.jobs >= 0.05) console.log((n / r.jobs).toFixed(2), us === undefined ? '' : `${((us * 1000) / r.jobs).toFixed(0).padStart(5)} µs`, sql);
}
if (commitMs.length > 0) {
  commitMs.sort((a, b) => a - b);
  const at = (q: number) => `${(commitMs[Math.floor(q * (commitMs.length - 1))]! * 1000).toFixed(0)} µs`;
  const total = commitMs.reduce((a, b) => a + b, 0);
  const top = commitMs.slice(Math.floor(commitMs.length * 0.99)).reduce((a, b) => a + b, 0);
  console.log(`COMMIT: p50 ${at(0.5)}, p99 ${at(0.99)}, max ${at(1)}; the slowest 1% take ${((100 * top) / total).toFixed(0)}% of COMMIT time`);
}
if (store === 'postgres') process.exit(0); // the throwaway server stops on exit
