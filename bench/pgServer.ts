/**
 * The Postgres server the bench runs on: `--pg-url` / `SPOOL_BENCH_PG_URL` if given, otherwise a
 * throwaway cluster started through the test helper (test/helpers/postgres.ts), switched back to
 * the durable defaults (`fsync`, `synchronous_commit`, `full_page_writes` on: the helper turns
 * them off for tests) so its figures compare with SQLite at FULL. Each run gets a fresh database.
 */
import { readdirSync, readFileSync } from 'node:fs';
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

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux the bench meets). */
const TICKS_PER_SEC = 100;

/** ppid and reaped children's CPU (cutime + cstime, µs) of /proc/<pid>/stat, or null when it is not readable. */
function procStat(pid: number): { ppid: number; childrenUs: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // f[0] is field 3 (state): ppid is field 4, cutime and cstime fields 16 and 17.
    return { ppid: Number(f[1]), childrenUs: ((Number(f[13]) + Number(f[14])) * 1e6) / TICKS_PER_SEC };
  } catch {
    return null;
  }
}

/** A process's own CPU time in µs, from /proc/<pid>/schedstat (ns, exact: /proc/<pid>/stat's ticks round each process to 10 ms). */
function ownCpuUs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  } catch {
    return 0;
  }
}

const postmasters = new Map<string, number | null>();

/**
 * A reader of the Postgres server's CPU (user + system, µs, cumulative): the postmaster's own and
 * every live child's (backends, WAL writer, checkpointer…) from /proc/<pid>/schedstat, and its
 * reaped children's (cutime + cstime, 10 ms ticks: backends that exit during a run are few). Null when the server is not on this host (its backend's pid has no /proc entry here).
 */
export async function serverCpuReader(url: string): Promise<(() => number) | null> {
  const key = new URL(url).host;
  if (!postmasters.has(key)) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const pid = Number((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      const ppid = procStat(pid)?.ppid ?? null;
      postmasters.set(key, ppid !== null && readFileSync(`/proc/${ppid}/comm`, 'utf8').startsWith('postgres') ? ppid : null);
    } catch {
      postmasters.set(key, null);
    } finally {
      await c.end();
    }
  }
  const postmaster = postmasters.get(key) ?? null;
  if (postmaster === null) return null;
  return () => {
    let us = ownCpuUs(postmaster) + (procStat(postmaster)?.childrenUs ?? 0);
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid === postmaster) continue;
      if (procStat(pid)?.ppid === postmaster) us += ownCpuUs(pid);
    }
    return us;
  };
}
