/**
 * `claimDueEffects` on one Postgres server from two stores (two processes' pools): runners
 * claiming at once take disjoint rows, and a row another transaction holds is passed by, never
 * waited on (`FOR NO KEY UPDATE … SKIP LOCKED`, persistence/drivers/pg/claimDue.ts).
 */
import { afterEach, expect, it } from 'vitest';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { claim, effectOf, T0 } from './helpers/dueClaims.ts';
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
