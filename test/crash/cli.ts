/**
 * The long crash run: `npm run crash -- --kills 1000 [--workers N] [--seed N] [--async-store] [--keep] [--dir DIR]`.
 * `--async-store`: every worker's store behind the asynchronous boundary (test/helpers/asyncStore.ts).
 *
 * On Postgres: `--store postgres` (a throwaway cluster of its own, test/helpers/postgres.ts) or `--db postgres://…` (an empty database); `--server-restarts N` (default 1 on
 * Postgres) restarts the server mid-run with `pg_ctl restart -m fast` (a server this machine runs).
 *
 * Prints progress, then the tally (kills, events acknowledged, transitions, timers, attempts,
 * violations by kind) and every violation; exits 1 on any violation. The database is kept (and its
 * path printed) when something failed or with --keep; otherwise it is deleted.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { scriptArgs } from '../../bench/cliArgs.ts';
import { TMP_ROOT } from '../helpers/resources.ts';
import { byKind, runCrashHarness } from './harness.ts';
import { restartPostgres } from './postgres.ts';
import { startPostgres, type TestPostgres } from '../helpers/postgres.ts';
import { openStore } from '../../persistence/openStore.ts';

const USAGE = `npm run crash -- [options]: worker processes SIGKILLed at random; every guarantee checked after

  --kills N               kills before the run ends (default 1000)
  --workers N             worker processes at once (default 1)
  --seed N                the random seed (printed; the same choices again, though not the same timings)
  --async-store           every worker's store behind the asynchronous boundary
  --store KIND            sqlite (default) or postgres (a throwaway cluster of its own)
  --db URL                an empty Postgres database to run on instead
  --server-restarts N     Postgres only: restart the server mid-run N times (default 1)
  --max-kill-delay MS     a worker is killed 0 to MS ms after it is ready (default 40; 800 with several workers)
  --commands-per-round N  client commands per round (default 12)
  --dir DIR               where the SQLite file goes
  --keep                  keep the database even when nothing failed

Exits 1 on any violation, and keeps the database then.`;

const values = scriptArgs('crash', USAGE, {
  kills: { type: 'string', default: '1000' },
  workers: { type: 'string', default: '1' },
  seed: { type: 'string' },
  dir: { type: 'string' },
  keep: { type: 'boolean', default: false },
  'async-store': { type: 'boolean', default: false },
  'max-kill-delay': { type: 'string' },
  'commands-per-round': { type: 'string' },
  store: { type: 'string', default: 'sqlite' },
  db: { type: 'string' },
  'server-restarts': { type: 'string' },
});

const kills = Number(values.kills);
if (!Number.isInteger(kills) || kills < 1) {
  console.error('crash: --kills must be a positive integer');
  process.exit(2);
}
const workers = Number(values.workers);
if (!Number.isInteger(workers) || workers < 1) {
  console.error('crash: --workers must be a positive integer');
  process.exit(2);
}
if (values.store !== 'sqlite' && values.store !== 'postgres') {
  console.error('crash: --store takes sqlite or postgres');
  process.exit(2);
}
const onPostgres = values.store === 'postgres' || values.db !== undefined;
const serverRestarts = Number(values['server-restarts'] ?? (onPostgres ? 1 : 0));
if (!Number.isInteger(serverRestarts) || serverRestarts < 0 || (serverRestarts > 0 && !onPostgres)) {
  console.error('crash: --server-restarts takes a whole number, on Postgres only');
  process.exit(2);
}
let server: TestPostgres | undefined;
let db = values.db;
if (onPostgres && db === undefined) {
  server = await startPostgres(); // its own cluster: its default database is empty
  db = server.url;
} else if (db !== undefined) {
  // A database Spool refuses (another application's tables, a newer schema) is told now, before
  // any worker starts: each worker would die on it at start, and the run would go round with none.
  try {
    await (await openStore(db)).close();
  } catch (error) {
    console.error(`crash: ${(error as Error).message}`);
    process.exit(2);
  }
}
process.on('exit', () => server?.stop());
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const dir = values.dir ?? join(TMP_ROOT, `crash-${seed}-${randomBytes(4).toString('hex')}`);
const asyncStore = values['async-store'] ?? false;
console.log(`crash: ${kills} kills, ${workers} concurrent worker(s), seed ${seed}${asyncStore ? ', workers\' stores behind the asynchronous boundary' : ''}, database ${db ? `${db.replace(/\/\/[^@]*@/, '//')}, ${serverRestarts} server restart(s), checked on a copy in ${join(dir, 'crash.db')}` : join(dir, 'crash.db')}`);

let lastPrint = 0;
const report = await runCrashHarness({
  kills,
  workers,
  seed,
  dir,
  asyncStore,
  ...(db ? { db, serverRestarts, restartServer: () => restartPostgres(db) } : {}),
  ...(values['max-kill-delay'] ? { maxKillDelayMs: Number(values['max-kill-delay']) } : {}),
  ...(values['commands-per-round'] ? { commandsPerRound: Number(values['commands-per-round']) } : {}),
  onProgress: (p) => {
    if (p.kills - lastPrint >= Math.max(1, Math.floor(kills / 20)) || p.kills >= kills) {
      lastPrint = p.kills;
      console.log(`  round ${p.round}: ${p.kills}/${p.target} kills, ${p.acked} commands acknowledged, ${p.jobs} jobs, ${(p.elapsedMs / 1000).toFixed(1)} s`);
    }
  },
});

const t = report.tally;
const kinds = byKind(report.violations);
console.log(`
tally (seed ${t.seed}, ${(t.durationMs / 1000).toFixed(1)} s, ${t.rounds} rounds${t.asyncStore ? ', asynchronous store boundary in every worker' : ''})
  kills:             ${t.kills} (worker ${t.workerKills}, client ${t.clientKills}); server restarts ${t.serverRestarts}
  workers:           ${t.workers} concurrent; at most ${t.maxConcurrentWorkers} running at once, >= 2 running for ${(t.concurrentMs / 1000).toFixed(1)} s
  crash points hit:  ${JSON.stringify(t.crashPoints)}
  commands:          ${t.commands} sent, ${t.acked} acknowledged, ${t.resent} re-sent after a client crash
  events acked:      ${t.eventsAcked} (duplicates recognised ${t.duplicatesAcked}, conflicts refused ${t.conflictsRefused}, refused as terminal ${t.terminalRefusals})
  jobs:              ${t.db.jobs}
  transitions:       ${t.db.transitions} ${JSON.stringify(t.db.outcomes)}
  inbox:             ${JSON.stringify(t.db.inbox)}
  timers:            ${JSON.stringify(t.db.timers)}; fired lines ${t.timersFiredLines}
  activity attempts: ${t.db.attempts} over ${t.db.effects} effects ${JSON.stringify(t.db.attemptOutcomes)}; claimed lines ${t.attemptsClaimedLines}; overlap pairs checked ${t.db.overlapPairsChecked}, skipped ${t.db.overlapPairsSkipped}
  ends:              ${JSON.stringify(t.db.ends)}
  violations:        ${report.violations.length} ${JSON.stringify(kinds)}`);
for (const v of report.violations.slice(0, 50)) console.log(`  - ${v.kind}${v.jobId ? ` [${v.jobId}]` : ''}: ${v.detail}`);
if (report.violations.length > 50) console.log(`  ... and ${report.violations.length - 50} more`);

if (report.violations.length > 0 || values.keep) console.log(`database kept: ${report.dbPath}`);
else rmSync(dir, { recursive: true, force: true });
process.exit(report.violations.length > 0 ? 1 : 0);
