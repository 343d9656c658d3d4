/**
 * The batch claim's pick and the poll's reads, timed as statements (not part of `npm run bench`):
 * a backlog of `backlog` pending activities of a src at budget 0 (at its `activityConcurrency`, or
 * not run by a scoped remote worker) created ahead of `backlog` (at least 64) claimable ones of
 * another src, on a store's own schema. The claims: `pick` a runtime's at c16 with the first src
 * out of slots (limit 8), `queue1`/`queue16` a queue worker's (the second src only, no budgets,
 * limit 1 and 16). Each statement runs `runs` times; the median and p90 per run are printed
 * (SQLite: and the CPU per run, steadier than wall time on a busy host).
 * `tsx bench/pickProfile.ts [backlog=1000,10000] [runs=200] [--pg] [--plan]`. SQLite: the pick
 * (`duePick`: dueClaimPickSql's read of the candidates, what it takes of them, `starved` when a
 * src is out of slots; the claims follow it one by one). Postgres (`--pg`:
 * SPOOL_BENCH_PG_URL, else a throwaway server): the whole claim, one statement, rolled back after
 * each run. `--plan`: each statement's plan (SQLite: EXPLAIN QUERY PLAN; Postgres: EXPLAIN ANALYZE's
 * planning and execution times, `--plan-full` its whole plan).
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { claimDueSql } from '../persistence/drivers/pg/claimDue.ts';
import { toPostgres } from '../persistence/drivers/pg/sql.ts';
import { dueClaimParams, dueRead } from '../persistence/sql/dueClaims.ts';
import { duePick } from '../persistence/sql/syncDriver.ts';
import { POSTGRES, SQLITE } from '../persistence/sql/predicates.ts';
import { dueClaimPickSql, statementsSql } from '../persistence/sql/statements.ts';
import { benchPostgres, freshPgDatabase } from './pgServer.ts';
import { percentileSorted } from './stats.ts';
import { freshDbPath } from './tempDb.ts';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const backlogs = (args[0] ?? '1000,10000').split(',').map(Number);
const runs = Number(args[1] ?? 200);
const onPg = process.argv.includes('--pg');
const plan = process.argv.includes('--plan-full') ? 'full' : process.argv.includes('--plan');

const T0 = 1_700_000_000_000;
const NOW = T0 + 10_000_000;
const CLAIMABLE_ROWS = 64;
const LIMIT = 8;
/** The claim a runtime makes at c16 with src `limited` out of slots. */
const CLAIM = { runner: 'w1', now: NOW, claimUntil: NOW + 30_000, limit: LIMIT, machines: ['m@1'], srcs: ['limited', 'work'], budgets: { limited: 0 } };
/** The claims a queue worker makes (one src, no budgets) at c1 and c16. */
const CLAIMS = { pick: CLAIM, queue1: { ...CLAIM, limit: 1, srcs: ['work'], budgets: {} }, queue16: { ...CLAIM, limit: 16, srcs: ['work'], budgets: {} } };
/** The poll's reads: `dueEffects` with this runtime's machine versions (`dueUnclaimable`), and without. */
const POLL = [dueRead(NOW, 16, 'w1', ['m@1']), dueRead(NOW, 16, 'w1', undefined)];

/** `count` jobs of `m@1`, each with one pending effect of `src`, ids `<prefix><n>`, created from `at` on (one ms apart); one statement for both SQL stores. */
const FILL = (prefix: string, src: string, count: number, at: number) => [
  `WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
    INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context, snapshot, input, input_hash, owner, created_at, updated_at)
    SELECT '${prefix}' || i, 'm', '1', 1, 'active', '"a"', '["a"]', '{}', '{}', '{}', 'h', '', ${at} + i, ${at} + i FROM n`,
  `WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
    INSERT INTO effects (id, job_id, actor_id, src, input, status, active, max_attempts, created_revision, created_at, updated_at)
    SELECT '${prefix}' || i || '~x', '${prefix}' || i, 'x', '${src}', '{}', 'pending', 1, 3, 1, ${at} + i, ${at} + i FROM n`,
];

/** The backlog, then the claimable rows behind it. */
const fills = (backlog: number) => [...FILL('L', 'limited', backlog, T0), ...FILL('W', 'work', Math.max(CLAIMABLE_ROWS, backlog), T0 + backlog + 1)];

/** The median and p90 in ms of `runs` runs of `run`, each timing itself (its own setup left out). */
async function timed(run: () => number | Promise<number>): Promise<{ median: number; p90: number }> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) ms.push(await run());
  ms.sort((a, b) => a - b);
  return { median: percentileSorted(ms, 50), p90: percentileSorted(ms, 90) };
}

/** How long `run` takes, in ms. */
function clocked(run: () => unknown): number {
  const t = performance.now();
  run();
  return performance.now() - t;
}

const fmt = (r: { median: number; p90: number }) => `${(r.median * 1000).toFixed(0)} µs (p90 ${(r.p90 * 1000).toFixed(0)})`;

async function onSqlite(backlog: number): Promise<void> {
  const file = freshDbPath('pick');
  await (await SqliteStore.open(file.path, { synchronous: 'NORMAL' })).close();
  const db = new Database(file.path);
  try {
    db.transaction(() => {
      for (const sql of fills(backlog)) db.exec(sql);
    })();
    const s = statementsSql(SQLITE);
    const starved = db.prepare(s.dueStarved);
    // Parameters a statement does not name are left out (better-sqlite3 refuses them).
    const named = (sql: string, params: object) => Object.fromEntries(Object.entries(params).filter(([k]) => new RegExp(`@${k}\\b`).test(sql)));
    const statements = {
      ...Object.fromEntries(
        Object.entries(CLAIMS).map(([name, claim]) => {
          const sql = dueClaimPickSql(SQLITE, claim.limit);
          const pick = db.prepare(sql);
          return [name, { sql, params: named(sql, dueClaimParams(claim)), run: () => duePick(claim, pick, starved).picked.length }];
        }),
      ),
      ...Object.fromEntries(
        POLL.map((r) => {
          const stmt = db.prepare(s[r.name]);
          const params = named(s[r.name], r.params);
          return [r.name, { sql: s[r.name], params, run: () => stmt.all(params).length }];
        }),
      ),
    };
    for (const [name, { sql, params, run }] of Object.entries(statements)) {
      const rows = run();
      const cpu = process.cpuUsage();
      const wall = await timed(() => clocked(run));
      const { user, system } = process.cpuUsage(cpu);
      console.log(`sqlite backlog ${backlog} ${name}: ${fmt(wall)}, CPU ${((user + system) / runs).toFixed(0)} µs per run, ${rows} rows`);
      if (plan) for (const r of db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]) console.log(`  ${r.detail}`);
    }
  } finally {
    db.close();
    file.dispose();
  }
}

async function onPostgres(backlog: number): Promise<void> {
  const made = await freshPgDatabase();
  await (await PostgresStore.open(made.url)).close();
  const client = new pg.Client({ connectionString: made.url });
  await client.connect();
  try {
    for (const sql of fills(backlog)) await client.query(sql);
    // What autovacuum does to a table this size soon after (without it the planner has no statistics).
    await client.query('ANALYZE');
    const s = statementsSql(POSTGRES);
    const statements = {
      ...Object.fromEntries(
        Object.entries(CLAIMS).map(([name, claim]) => [name, { sql: claimDueSql(POSTGRES, claim.limit), params: { ...dueClaimParams(claim), held: null, any_fence: 0, take_over: null, force: 0 } as Record<string, unknown> }]),
      ),
      ...Object.fromEntries(POLL.map((r) => [r.name, { sql: s[r.name], params: r.params as Record<string, unknown> }])),
    };
    for (const [name, { sql, params }] of Object.entries(statements)) {
      const stmt = toPostgres(sql, name);
      const query = { name: `s_${name}`, text: stmt.text, values: stmt.names!.map((n) => params[n as keyof typeof params]) };
      // The statement alone, in a transaction rolled back after it (the claim writes).
      const once = async () => {
        await client.query('BEGIN');
        try {
          const t = performance.now();
          const rows = (await client.query(query)).rowCount;
          return { rows, ms: performance.now() - t };
        } finally {
          await client.query('ROLLBACK');
        }
      };
      const { rows } = await once();
      const wall = await timed(async () => (await once()).ms);
      // Postgres plans a prepared statement afresh at each run while it finds a generic plan dearer than a custom one.
      const plans = (await client.query(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, [query.name])).rows[0] as Record<string, string>;
      console.log(`postgres backlog ${backlog} ${name}: ${fmt(wall)}, ${rows} rows, ${plans['generic_plans']} generic plans, ${plans['custom_plans']} custom`);
      if (plan) {
        await client.query('BEGIN');
        const explained = await client.query({ text: `EXPLAIN ANALYZE ${stmt.text}`, values: query.values });
        await client.query('ROLLBACK');
        for (const r of explained.rows as { 'QUERY PLAN': string }[]) if (plan === 'full' || /^(Planning|Execution) Time/.test(r['QUERY PLAN'])) console.log(`  ${r['QUERY PLAN']}`);
      }
    }
  } finally {
    await client.end();
    await made.dispose();
  }
}

if (onPg) await benchPostgres(process.env['SPOOL_BENCH_PG_URL']);
for (const backlog of backlogs) await (onPg ? onPostgres(backlog) : onSqlite(backlog));
if (onPg) process.exit(0); // the throwaway server stops on exit
