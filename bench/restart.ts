/**
 * Section 3, restart time and resident memory with many jobs waiting on timers.
 *
 * How the jobs are made: TEMPLATE_JOBS `approval-flow` jobs are started through the runtime (in
 * concurrent batches of 64 `runtime.start` calls, synchronous NORMAL; each waits in `pending`
 * with two durable timers, its reminder and its deadline, days away), then copied with SQL to
 * the target count: each copy gets a new job id and its own jobs, transitions and timers rows
 * (timer ids rewritten), deadlines shifted by a few ms per copy. The WAL is checkpointed, so the
 * restart reads a clean database file (warm in the OS page cache: no cache is dropped).
 *
 * Each size is then opened in a fresh child process (bench/restartChild.ts): SqliteStore.open,
 * createRuntime (recover on open, the default), the first tick(), RSS after; once with the
 * defaults (verifySnapshots: 'auto': every snapshot checked up to 10,000 active jobs) and once with verifySnapshots:
 * false. Sizes grow one database: 10k, then 100k, then (--big) 1M.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRuntime } from '../src/internal.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { JobStore } from '../src/internal.ts';
import { freshBenchDb, type StoreKind } from './benchDb.ts';
import { approvalFlow } from '../machines/index.ts';
import { freshDbPath } from './tempDb.ts';

export const TEMPLATE_JOBS = 1000;
const CHILD = fileURLToPath(new URL('./restartChild.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DAY = 86_400_000;

export type RecoverMode = 'verify' | 'no-verify';

export interface ChildReport {
  mode: RecoverMode;
  activeJobs: number;
  scheduledTimers: number;
  importedAtMs: number;
  openStoreMs: number;
  createRuntimeMs: number;
  firstTickMs: number;
  totalMs: number;
  recoverStoreMs: number;
  recoverCalls: Record<string, { calls: number; us: number }>;
  tick: { timersFired: number; activitiesStarted: number };
  tickCalls: Record<string, { calls: number; us: number }>;
  memory: {
    before: { rss: number; heapUsed: number; external: number };
    afterRecover: { rss: number; heapUsed: number; external: number };
    afterTick: { rss: number; heapUsed: number; external: number };
    afterGc: { rss: number; heapUsed: number; external: number };
    peakRss: number;
  };
}

export interface RestartDb {
  /** What the child opens: a SQLite file path or a postgres:// URL. */
  path: string;
  jobs: number;
  /** Template jobs started through the runtime, per second. */
  templateStartsPerSec: number;
  /** Jobs copied with SQL, per second (cumulative). */
  copiedPerSec: number;
  copySeconds: number;
  grow: (target: number) => Promise<void>;
  /** SQLite: the file's size; Postgres: pg_database_size. */
  fileBytes: () => number | Promise<number>;
  dispose: () => void | Promise<void>;
}

const id = (n: number) => `job-${String(n).padStart(8, '0')}`;

/** TEMPLATE_JOBS approval-flow jobs started through the runtime on `store` (closed after); their rate. */
async function startTemplate(store: JobStore): Promise<number> {
  const runtime = await createRuntime({ store, machines: [approvalFlow] });
  const t0 = performance.now();
  try {
    for (let i = 0; i < TEMPLATE_JOBS; i += 64) {
      await Promise.all(
        Array.from({ length: Math.min(64, TEMPLATE_JOBS - i) }, (_, k) =>
          runtime.start('approval-flow', { subject: `approval ${i + k}`, remindAfterMs: DAY + (i + k) * 1000, deadlineMs: 3 * DAY + (i + k) * 1000 }, { jobId: id(i + k) }),
        ),
      );
    }
  } finally {
    await runtime.close();
  }
  return TEMPLATE_JOBS / ((performance.now() - t0) / 1000);
}

/** Create the database with TEMPLATE_JOBS jobs started through the runtime; `grow` copies them with SQL. */
export async function makeRestartDb(kind: StoreKind = 'sqlite'): Promise<RestartDb> {
  if (kind === 'postgres') return makePgRestartDb();
  const tmp = freshDbPath('restart');
  const templateStartsPerSec = await startTemplate(await SqliteStore.open(tmp.path, { synchronous: 'NORMAL' }));

  const db = new Database(tmp.path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.pragma('foreign_keys = OFF'); // the copied rows reference copied jobs; checked below by count
  const tpl = `substr(id, 1, 4) || printf('%08d', (@c * ${TEMPLATE_JOBS}) + CAST(substr(id, 5) AS INTEGER))`;
  const jobColumns = (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('jobs') as string[]).join(', ');
  const tplJob = (col: string) => `substr(${col}, 1, 4) || printf('%08d', (@c * ${TEMPLATE_JOBS}) + CAST(substr(${col}, 5, 8) AS INTEGER))`;
  // Columns are copied by name so the copy keeps working when a migration adds columns to jobs.
  const copyJobsByName = db.prepare(`INSERT INTO jobs (${jobColumns}) SELECT ${jobColumns.split(', ').map((c) => (c === 'id' ? `${tpl} AS id` : c)).join(', ')}
    FROM jobs WHERE id < '${id(TEMPLATE_JOBS)}' ORDER BY id`);
  const transitionColumns = (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('transitions') as string[]).join(', ');
  const copyTransitions = db.prepare(`INSERT INTO transitions (${transitionColumns}) SELECT ${transitionColumns.split(', ').map((c) => (c === 'job_id' ? `${tplJob('job_id')} AS job_id` : c === 'seq' ? 'NULL AS seq' : c)).join(', ')}
    FROM transitions WHERE job_id < '${id(TEMPLATE_JOBS)}'`);
  const timerColumns = (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('timers') as string[]).join(', ');
  const timerExpr = (c: string) => {
    if (c === 'id') return `${tplJob('job_id')} || substr(id, length(job_id) + 1) AS id`;
    if (c === 'job_id') return `${tplJob('job_id')} AS job_id`;
    if (c === 'due_at') return 'due_at + @c AS due_at';
    return c;
  };
  const copyTimers = db.prepare(`INSERT INTO timers (${timerColumns}) SELECT ${timerColumns.split(', ').map(timerExpr).join(', ')}
    FROM timers WHERE job_id < '${id(TEMPLATE_JOBS)}'`);
  const copyOnce = db.transaction((c: number) => {
    copyJobsByName.run({ c });
    copyTransitions.run({ c });
    copyTimers.run({ c });
  });
  return growingDb({
    path: tmp.path,
    templateStartsPerSec,
    copy: (from, to) => {
      for (let c = from; c <= to; c += 1) copyOnce(c);
      db.pragma('wal_checkpoint(TRUNCATE)');
    },
    count: async (sql) => db.prepare(sql).pluck().get() as number,
    fileBytes: () => statSync(tmp.path).size,
    dispose: () => {
      db.close();
      tmp.dispose();
    },
  });
}

/** A restart database's bookkeeping on either store: `grow` copies the template (copies `from`..`to`) and checks the counts. */
function growingDb(o: {
  path: string;
  templateStartsPerSec: number;
  copy: (from: number, to: number) => void | Promise<void>;
  count: (sql: string) => Promise<number>;
  fileBytes: RestartDb['fileBytes'];
  dispose: RestartDb['dispose'];
}): RestartDb {
  let jobs = TEMPLATE_JOBS;
  let copySeconds = 0;
  let copied = 0;
  return {
    path: o.path,
    get jobs() {
      return jobs;
    },
    templateStartsPerSec: o.templateStartsPerSec,
    get copiedPerSec() {
      return copySeconds > 0 ? copied / copySeconds : Number.NaN;
    },
    get copySeconds() {
      return copySeconds;
    },
    async grow(target: number) {
      const t = performance.now();
      const from = jobs / TEMPLATE_JOBS;
      const to = Math.ceil(target / TEMPLATE_JOBS) - 1;
      if (to >= from) await o.copy(from, to);
      const n = Math.max(jobs, (to + 1) * TEMPLATE_JOBS);
      copied += n - jobs;
      jobs = n;
      copySeconds += (performance.now() - t) / 1000;
      const active = Number(await o.count("SELECT count(*) AS n FROM jobs WHERE status = 'active'"));
      const timers = Number(await o.count("SELECT count(*) AS n FROM timers WHERE status = 'scheduled'"));
      if (active !== jobs || timers !== 2 * jobs) throw new Error(`restart bench: expected ${jobs} jobs and ${2 * jobs} timers, found ${active} and ${timers}`);
    },
    fileBytes: o.fileBytes,
    dispose: o.dispose,
  };
}

/**
 * The same on a fresh Postgres database (the server's settings): the template through the
 * runtime, then each copy in one statement per table over generate_series (new ids as on SQLite;
 * history rows take new seqs and no feed position), then VACUUM ANALYZE (Postgres's "checkpoint":
 * the restart reads settled tables).
 */
async function makePgRestartDb(): Promise<RestartDb> {
  const db = await freshBenchDb('postgres', 'restart');
  const templateStartsPerSec = await startTemplate(await db.openStore('FULL'));
  const conn = new pg.Client({ connectionString: db.target });
  await conn.connect();
  const columns = async (table: string) =>
    (await conn.query<{ c: string }>('SELECT column_name AS c FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position', [table])).rows.map((r) => r.c);
  const newId = (col: string) => `substr(${col}, 1, 4) || lpad(((c * ${TEMPLATE_JOBS}) + substr(${col}, 5, 8)::int)::text, 8, '0')`;
  const copy = async (table: string, expr: (c: string) => string) => {
    const cols = await columns(table);
    return (from: number, to: number) =>
      conn.query(`INSERT INTO ${table} (${cols.join(', ')}) SELECT ${cols.map((c) => `${expr(c)}`).join(', ')}
        FROM ${table}, generate_series(${from}, ${to}) AS c WHERE job_id_of < '${id(TEMPLATE_JOBS)}'`.replace('job_id_of', table === 'jobs' ? 'id' : 'job_id'));
  };
  const copyJobs = await copy('jobs', (c) => (c === 'id' ? newId('id') : c));
  const copyTransitions = await copy('transitions', (c) => (c === 'job_id' ? newId('job_id') : c === 'seq' ? "nextval('transitions_seq')" : c === 'feed_pos' ? 'NULL' : c));
  const copyTimers = await copy('timers', (c) =>
    c === 'id' ? `${newId('job_id')} || substr(id, length(job_id) + 1)` : c === 'job_id' ? newId('job_id') : c === 'due_at' ? 'due_at + c' : c);
  const count = async (sql: string) => Number((await conn.query<{ n: string }>(sql)).rows[0]!.n);
  return growingDb({
    path: db.target,
    templateStartsPerSec,
    copy: async (from, to) => {
      await conn.query('BEGIN');
      for (const step of [copyJobs, copyTransitions, copyTimers]) await step(from, to);
      await conn.query('COMMIT');
      await conn.query('VACUUM ANALYZE');
    },
    count,
    fileBytes: () => count('SELECT pg_database_size(current_database()) AS n'),
    dispose: async () => {
      await conn.end();
      await db.dispose();
    },
  });
}

/** Open the database in a fresh child process and measure the restart. */
export function measureRestart(path: string, mode: RecoverMode, timeoutMs = 15 * 60_000): Promise<ChildReport> {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', tsx, CHILD, path, mode], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith('{"type":"restart"'));
      if (code === 0 && line) resolve(JSON.parse(line) as ChildReport);
      else reject(new Error(`restart child exited ${code ?? signal}: ${err.slice(-2000)}`));
    });
  });
}
