/**
 * A focused run for profiling (not part of `npm run bench`): one queue case, while-draining, on
 * SQLite, or with `--pg` on Postgres (SPOOL_BENCH_PG_URL, else a throwaway server: bench/pgServer.ts).
 * `tsx bench/queueProfile.ts [steps=3] [c=16] [backlog=2000] [NORMAL|FULL] [--sql] [--pg]`; with
 * `--sql` (SQLite), the statements run per job, by SQL text. Profile with `node --import tsx --cpu-prof`.
 * `tsx bench/queueProfile.ts starts [jobs=5000] [inFlight=64] [batch=1] [--sql] [--pg]`: the starts
 * case (`runStarts`: `start` when batch is 1, else `startMany`), no worker, NORMAL.
 */
import Database from 'better-sqlite3';
import { runSpoolQueue, runStarts } from './queueRun.ts';
import { JOB_SHAPES } from './jobsRun.ts';
import { benchPostgres } from './pgServer.ts';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const store = process.argv.includes('--pg') ? 'postgres' : 'sqlite';
if (store === 'postgres') await benchPostgres(process.env['SPOOL_BENCH_PG_URL']);
const [steps = '3', c = '16', backlog = '2000', sync = 'NORMAL'] = args;
const bySql = new Map<string, number>();
if (process.argv.includes('--sql')) {
  const memory = new Database(':memory:');
  const proto = Object.getPrototypeOf(memory.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
  memory.close();
  for (const name of ['run', 'get', 'all', 'iterate']) {
    const original = proto[name]!;
    proto[name] = function (this: { source: string }, ...a: unknown[]) {
      const key = this.source.replace(/\s+/g, ' ').slice(0, 110);
      bySql.set(key, (bySql.get(key) ?? 0) + 1);
      return original.apply(this, a);
    };
  }
}
const shape = JOB_SHAPES.find((s) => s.steps === (args[0] === 'starts' ? 3 : Number(steps)))!;
const r =
  args[0] === 'starts'
    ? await runStarts({ store, synchronous: 'NORMAL', shape, jobs: Number(args[1] ?? 5000), inFlight: Number(args[2] ?? 64), batch: Number(args[3] ?? 1) })
    : await runSpoolQueue({ store, synchronous: sync as 'NORMAL', shape, concurrency: Number(c), backlog: Number(backlog), mode: 'while-draining' });
console.log(JSON.stringify(r));
if (store === 'postgres') process.exit(0); // the throwaway server stops on exit
for (const [sql, n] of [...bySql].sort((a, b) => b[1] - a[1])) if (n / r.jobs >= 0.05) console.log((n / r.jobs).toFixed(2), sql);
