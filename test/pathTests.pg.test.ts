/**
 * `spool --db postgres://… test`: path tests on Postgres, as a new user runs them. Every run
 * (plain, with restarts, in a child process SIGKILLed between steps) gets a database of its own
 * on the named server, dropped after it: none is left behind, and the named database is untouched.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { freshDatabase } from './helpers/postgres.ts';
import { PROJECT_ROOT } from './helpers/resources.ts';
import { runSpool } from './helpers/spoolCli.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Names of the databases on the server whose name starts with `prefix`. */
async function databasesLike(url: string, prefix: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY 1', [prefix])).rows.map((r) => r.datname);
  } finally {
    await c.end();
  }
}

describe('spool test on Postgres', () => {
  it('replays every path of a reference machine on the server, each run in a new database, all dropped after', async () => {
    const db = await freshDatabase();
    cleanups.push(db.drop);
    const before = await databasesLike(db.url, 'spool_path_');
    const run = await runSpool(['--db', db.url, '--machines', join(PROJECT_ROOT, 'machines', 'index.ts'), 'test', '--machine', 'job-lifecycle', '--child-crash', '1', '--json'], PROJECT_ROOT);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as { ok: boolean; machines: { machineId: string; transitions: number; covered: number; runs: { plain: number; restart: number; child: number } }[] };
    expect(result.ok).toBe(true);
    const [m] = result.machines;
    expect(m!.machineId).toBe('job-lifecycle');
    expect(m!.covered).toBe(m!.transitions);
    expect(m!.runs.plain).toBeGreaterThan(0);
    expect(m!.runs.restart).toBe(m!.runs.plain);
    expect(m!.runs.child).toBe(1);
    expect(await databasesLike(db.url, 'spool_path_')).toEqual(before);
    // The database --db names is only where the runs' databases are made from: nothing written to it.
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    cleanups.push(() => c.end());
    expect((await c.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0].n).toBe(0);
  });
});
