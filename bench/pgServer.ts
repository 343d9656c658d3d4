/**
 * The Postgres server the bench runs on: `--pg-url` / `SPOOL_BENCH_PG_URL` if given, otherwise a
 * throwaway cluster started through the test helper (test/helpers/postgres.ts), switched back to
 * the durable defaults (`fsync`, `synchronous_commit`, `full_page_writes` on: the helper turns
 * them off for tests) so its figures compare with SQLite at FULL. Each run gets a fresh database.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { freshDatabase, startPostgres } from '../test/helpers/postgres.ts';

/** The bench's server: its URL and how to stop it (a no-op for a server the user named). */
export interface BenchPostgres {
  url: string;
  stop(): void;
  /** `synchronous_commit` and `fsync` as the server reports them. */
  settings: Record<string, string>;
}

let server: BenchPostgres | null = null;

/** Start (once per bench run) or name the bench's Postgres server; `SPOOL_TEST_PG_URL` is set to it for {@link freshPgDatabase}. */
export async function benchPostgres(url?: string): Promise<BenchPostgres> {
  if (server) return server;
  let stop = () => {};
  if (!url) {
    const started = await startPostgres();
    url = started.url;
    stop = started.stop;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      for (const setting of ['fsync', 'synchronous_commit', 'full_page_writes']) await admin.query(`ALTER SYSTEM SET ${setting} = on`);
      await admin.query('SELECT pg_reload_conf()');
    } finally {
      await admin.end();
    }
  }
  process.env['SPOOL_TEST_PG_URL'] = url;
  const settings = await serverSettings(url);
  server = { url, stop: () => (stop(), (server = null)), settings };
  process.once('exit', () => server?.stop());
  return server;
}

async function serverSettings(url: string): Promise<Record<string, string>> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const rows = (await c.query<{ name: string; setting: string }>("SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'server_version', 'max_connections')")).rows;
    return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
  } finally {
    await c.end();
  }
}

/** A new database on the bench's server; `dispose` drops it. */
export async function freshPgDatabase(): Promise<{ url: string; dispose: () => Promise<void> }> {
  const db = await freshDatabase();
  return { url: db.url, dispose: db.drop };
}

/** A process's ppid, from /proc/<pid>/stat, or null when it is not readable. */
function parentOf(pid: number): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command's closing parenthesis: field 3 (state), then field 4, the ppid.
    return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/** A process's own CPU time in µs, from /proc/<pid>/schedstat (ns, exact: /proc/<pid>/stat's ticks round each process to 10 ms), or null when it is gone. */
function ownCpuUs(pid: number): number | null {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  } catch {
    return null;
  }
}

const postmasters = new Map<string, number | null>();

/**
 * A meter of the Postgres server's CPU spent for one database, from now until `stop`: the own CPU
 * (user + system, µs, /proc/<pid>/schedstat) of every backend connected to the URL's database and
 * of the server's shared processes (WAL writer, checkpointer, background writer…), which serve
 * every database. Backends of other databases on a shared server are not counted, and nothing is
 * taken back when a process exits (no reaped children's 10 ms ticks, which once made a reading
 * negative). The processes are read every 100 ms and their list every second (one query), so a
 * backend that exits (the store's close at the end of a run, when its work is done) keeps all but
 * its last 100 ms; the reads cost this process a few ms of CPU a second, not per job. Null
 * when the server is not on this host (its backend's pid has no /proc entry here).
 */
export async function serverCpuMeter(url: string): Promise<{ stop(): Promise<number> } | null> {
  const key = new URL(url).host;
  const q = new pg.Client({ connectionString: url });
  await q.connect();
  try {
    if (!postmasters.has(key)) {
      const pid = Number((await q.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      const ppid = parentOf(pid);
      postmasters.set(key, ppid !== null && readFileSync(`/proc/${ppid}/comm`, 'utf8').startsWith('postgres') ? ppid : null);
    }
  } catch {
    postmasters.set(key, null);
  }
  const postmaster = postmasters.get(key) ?? null;
  if (postmaster === null) {
    await q.end();
    return null;
  }
  // The meter's own connection is left out of what it counts.
  const listed = async () =>
    (await q.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE (datname = current_database() OR datname IS NULL) AND pid <> pg_backend_pid()')).rows
      .map((r) => Number(r.pid))
      .filter((pid) => parentOf(pid) === postmaster);
  let pids = [postmaster, ...(await listed())];
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  let started = false;
  const read = () => {
    for (const pid of pids) {
      const us = ownCpuUs(pid);
      if (us === null) continue;
      // A process first seen after the start counts whole: it began within the run.
      if (!first.has(pid)) first.set(pid, started ? 0 : us);
      last.set(pid, us);
    }
  };
  read();
  started = true;
  let listing: Promise<void> | null = null;
  const relist = () => {
    listing ??= listed().then(
      (found) => void (pids = [postmaster, ...found.filter((pid) => pid !== postmaster)]),
      () => {},
    ).finally(() => (listing = null));
  };
  let ticks = 0;
  const timer = setInterval(() => {
    read();
    if (++ticks % 10 === 0) relist();
  }, 100);
  return {
    stop: async () => {
      clearInterval(timer);
      await listing;
      relist();
      await listing;
      read();
      await q.end();
      let us = 0;
      for (const [pid, t] of last) us += Math.max(0, t - first.get(pid)!);
      return us;
    },
  };
}
