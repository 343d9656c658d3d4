/**
 * The Postgres server the bench runs on: `--pg-url` / `SPOOL_BENCH_PG_URL` if given, otherwise a
 * throwaway cluster started through the test helper (test/helpers/postgres.ts), switched back to
 * the durable defaults (`fsync`, `synchronous_commit`, `full_page_writes` on: the helper turns
 * them off for tests) so its figures compare with SQLite at FULL. Each run gets a fresh database.
 */
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
