/**
 * `claimDueEffects` on one Postgres server from two stores (two processes' pools): runners
 * claiming at once take disjoint rows, and a row another transaction holds is passed by, never
 * waited on (`FOR NO KEY UPDATE … SKIP LOCKED`, persistence/drivers/pg/claimDue.ts).
 */
import { afterEach, expect, it } from 'vitest';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { claimDueArgs, claimDueStatement } from '../persistence/drivers/pg/claimDue.ts';
import { quoted } from '../persistence/drivers/pg/deferred.ts';
import { bind } from '../persistence/drivers/pg/sql.ts';
import { POSTGRES } from '../persistence/sql/predicates.ts';
import { claim, effectOf, NOW, T0 } from './helpers/dueClaims.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { newJob } from './store.contract.ts';

const opened: PostgresStore[] = [];
const drops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  for (const drop of drops.splice(0)) await drop();
});

it('two runners claiming at once take disjoint rows, and a row another transaction holds is skipped without waiting', async () => {
  const db = await freshDatabase();
  drops.push(db.drop);
  const [store, other] = [await PostgresStore.open(db.url, { leaseClock: 'caller' }), await PostgresStore.open(db.url, { leaseClock: 'caller' })];
  opened.push(store, other);
  const jobs = 40;
  for (let i = 0; i < jobs; i++) {
    const id = `J${String(i).padStart(2, '0')}`;
    expect((await store.createJob({ ...newJob(id), effects: [effectOf(id, 'x', { at: T0 + i })] })).created).toBe(true);
  }
  // Another transaction holds J00's effect row: the claims pass it by, neither waits (a wait would
  // end in the store's lock_timeout error, not a result).
  const holder = await other.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query("SELECT 1 FROM effects WHERE id = 'J00~x' FOR UPDATE");
    const seen = new Map<string, string>();
    for (let round = 0; round < 5; round++) {
      const [a, b] = await Promise.all([store.claimDueEffects(claim({ limit: 8 })), other.claimDueEffects(claim({ runner: 'w2', limit: 8 }))]);
      for (const [runner, r] of [['w1', a], ['w2', b]] as const) {
        for (const e of r.claimed) {
          expect(seen.has(e.id), `${e.id} claimed twice`).toBe(false);
          seen.set(e.id, runner);
        }
      }
    }
    expect(seen.has('J00~x')).toBe(false);
    expect(seen.size).toBe(jobs - 1);
    await holder.query('ROLLBACK');
  } finally {
    holder.release();
  }
  // Each claimed attempt is recorded once, under the runner that claimed it.
  const rows = (await other.pool.query("SELECT effect_id, runner FROM attempts WHERE outcome = 'running' ORDER BY effect_id")).rows;
  expect(rows).toHaveLength(jobs - 1);
  expect((await store.claimDueEffects(claim())).claimed.map((e) => e.id)).toEqual(['J00~x']);
});

/**
 * A store on a fresh database, and the batch claim as the store runs it on one of its connections:
 * one generic plan, made at the first run (`explain` runs it, rolled back), on the database as it
 * is then (empty, as every store's first claims find it). `explain` gives the plan's JSON.
 */
async function preparedClaim() {
  const db = await freshDatabase();
  drops.push(db.drop);
  const store = await PostgresStore.open(db.url);
  opened.push(store);
  const stmt = claimDueStatement(POSTGRES, 4);
  const values = bind(stmt, claimDueArgs(claim({ limit: 4, now: NOW + 60_000, claimUntil: NOW + 90_000 })));
  const client = await store.pool.connect();
  await client.query('SET plan_cache_mode = force_generic_plan');
  await client.query(`PREPARE claim AS ${stmt.text}`);
  const literal = (v: unknown) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : quoted(String(v)));
  return {
    store,
    client,
    explain: async (): Promise<PlanNode> => {
      await client.query('BEGIN');
      try {
        return (await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE claim(${values.map(literal).join(', ')})`)).rows[0]['QUERY PLAN'][0].Plan;
      } finally {
        await client.query('ROLLBACK');
      }
    },
  };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Alias?: string;
  'Index Name'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

function* nodes(plan: PlanNode): Generator<PlanNode> {
  yield plan;
  for (const p of plan.Plans ?? []) yield* nodes(p);
}

/** `n` jobs (ids from `from`), each with a pending activity. */
async function pendingJobs(store: PostgresStore, from: number, n: number): Promise<void> {
  const creates = Array.from({ length: n }, (_, i) => {
    const id = `B${String(from + i).padStart(5, '0')}`;
    return { ...newJob(id), effects: [effectOf(id, 'x', { at: T0 })] };
  });
  await store.writeBatch({ creates, commits: [], finishes: [], claims: [] });
}

it("reads due backoff rows in the index's order, so a claim's work does not grow with how many wait (schema 7: effects_due ends with rowid)", async () => {
  const { store, client, explain } = await preparedClaim();
  try {
    /** Buffers one claim reads. */
    const hits = async () => {
      const plan = await explain();
      return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    };
    /** `n` more jobs, each with an activity in backoff, due (oldest first by due time). */
    let made = 0;
    const backoffs = async (n: number) => {
      await pendingJobs(store, made, n);
      made += n;
      await client.query(`UPDATE effects SET status = 'backoff', attempt = 1, next_run_at = ${T0} + rowid WHERE status = 'pending'`);
    };
    await hits(); // planned now, on the empty tables
    await backoffs(20);
    const few = await hits();
    await backoffs(2_000);
    const many = await hits();
    // Sorting every due row read each one (about 68,000 buffers here against 194 with 20 waiting);
    // the index's order reads the first few (about 330 against 160).
    expect(many).toBeLessThan(3 * few);
  } finally {
    client.release();
  }
});

it("finds each candidate's effect by its primary key, even in a plan made on an empty database (not through effects_due, dead entries and all)", async () => {
  const { store, client, explain } = await preparedClaim();
  try {
    await explain(); // planned now, on the empty tables
    await pendingJobs(store, 0, 50);
    // `e` twice: the candidates locked (`e_1`, which the plan walked effects_due for) and the held ones.
    const lookups = [...nodes(await explain())].filter((n) => n['Relation Name'] === 'effects' && /^e(_\d+)?$/.test(n.Alias ?? ''));
    expect(lookups.map((n) => [n.Alias, n['Index Name']])).toEqual([['e_1', 'effects_pkey'], ['e', 'effects_pkey']]);
  } finally {
    client.release();
  }
});
