/**
 * The crash harness on Postgres (the long run: `npm run crash -- --store postgres --kills 1000
 * --workers 4`): two worker processes and one client process on one Postgres database, SIGKILLed
 * at random moments and at the engine's crash points, and the server itself restarted once
 * mid-run (`pg_ctl restart -m fast`: every connection dropped). Then every invariant of the
 * SQLite run (invariants.ts, on a copy of the tables): nothing acknowledged lost, nothing applied
 * twice, no job stuck, and the fence audit (no two runners' attempts of one effect overlapping).
 *
 * The server is this file's own throwaway cluster, not the project's shared one: restarting
 * that would drop the other test files' connections.
 */
import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, startPostgres, type TestPostgres } from '../helpers/postgres.ts';
import { Resources } from '../helpers/resources.ts';
import { byKind, runCrashHarness, type CrashReport } from './harness.ts';
import { restartPostgres } from './postgres.ts';

const KILLS = 24;
const res = new Resources();
let server: TestPostgres;
let report: CrashReport;
const seed = process.env['SPOOL_CRASH_SEED'] ? Number(process.env['SPOOL_CRASH_SEED']) : Math.floor(Math.random() * 2 ** 31);

beforeAll(async () => {
  server = await startPostgres();
  report = await runCrashHarness({ kills: KILLS, workers: 2, seed, dir: res.tempDir(), db: server.url, serverRestarts: 1, restartServer: () => restartPostgres(server.url) });
  const t = report.tally;
  console.log(
    `crash harness on Postgres (seed ${seed}): ${t.kills} kills (worker ${t.workerKills}, client ${t.clientKills}), ${t.serverRestarts} server restart(s), ` +
      `${t.eventsAcked} events acknowledged, ${t.db.jobs} jobs, ${t.db.transitions} transitions, ${t.db.attempts} attempts, overlap pairs checked ${t.db.overlapPairsChecked}, ` +
      `${report.violations.length} violations, ${(t.durationMs / 1000).toFixed(1)} s`,
  );
}, 180_000);
afterAll(() => {
  server?.stop();
  res.dispose();
});

describe(`crash harness on Postgres, ${KILLS} kills and a server restart (seed ${seed})`, () => {
  it('holds every invariant: nothing acknowledged lost, nothing applied twice, no job stuck, no overlapping ownership', () => {
    const { tally, violations } = report;
    expect(violations, `seed ${seed}: ${JSON.stringify(byKind(violations))}\n${violations.slice(0, 5).map((v) => v.detail).join('\n')}`).toEqual([]);
    expect(tally.kills).toBeGreaterThanOrEqual(KILLS);
    expect(tally.serverRestarts).toBe(1);
    // Real work under fire: events acknowledged and applied, activities attempted, jobs ended.
    expect(tally.eventsAcked).toBeGreaterThan(20);
    expect(tally.db.outcomes['applied']).toBeGreaterThan(20);
    expect(tally.db.attempts).toBeGreaterThan(10);
    expect(tally.db.jobs).toBe(Object.values(tally.db.ends).reduce((a, b) => a + b, 0));
    expect(tally.maxConcurrentWorkers).toBe(2);
  });
});

describe('npm run crash -- --db URL', () => {
  it('refuses a database Spool refuses before any worker starts: the store\'s message, exit 2, nothing written', async () => {
    // Another application's table: every worker would die on it at start, and the run went round
    // with none (0 commands acknowledged), then failed reading a jobs table that was never made.
    const { url, drop } = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query('CREATE TABLE orders (id int PRIMARY KEY)');
      const run = spawnSync(process.execPath, ['--import', 'tsx', 'test/crash/cli.ts', '--kills', '1', '--db', url], { encoding: 'utf8', timeout: 60_000 });
      expect(run.status).toBe(2);
      expect(run.stderr).toContain('is not a Spool database');
      expect(run.stdout).not.toContain('kills, ');
      const tables = await client.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`);
      expect(tables.rows.map((r) => r.table_name)).toEqual(['orders']);
    } finally {
      await client.end();
      await drop();
    }
  }, 90_000);
});
