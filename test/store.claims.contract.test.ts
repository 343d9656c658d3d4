/**
 * The JobStore contract for `claimDueEffects`, the batch claim of due activities: which rows it
 * takes and leaves, and what it records. Records are built by hand (no runtime). Runners claiming
 * at once on one server: test/claimDue.pg.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { JobStore, NewEffect, NoteRecord } from '../src/ports/store.ts';
import { claim, effectOf, NOW, T0, UNTIL } from './helpers/dueClaims.ts';
import { commitOf, newJob } from './store.contract.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { CONTRACT_STORE, ON_POSTGRES, ON_SQLITE_WASM, sqliteWasmContractStore } from './helpers/stores.ts';

const TMP_ROOT = fileURLToPath(new URL('../.vitest-tmp/', import.meta.url));
interface Opened {
  store: JobStore;
  dispose: () => Promise<void>;
}

async function open(): Promise<Opened> {
  if (ON_POSTGRES) {
    const db = await freshDatabase();
    const store = await PostgresStore.open(db.url, { leaseClock: 'caller' });
    return {
      store,
      dispose: async () => {
        await store.close();
        await db.drop();
      },
    };
  }
  if (ON_SQLITE_WASM) {
    const { store } = await sqliteWasmContractStore();
    return { store, dispose: () => store.close() };
  }
  const dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
  mkdirSync(dir, { recursive: true });
  const store = storeUnderTest(await SqliteStore.open(join(dir, 'claims.db')));
  return {
    store,
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe(`JobStore batch claim contract: ${CONTRACT_STORE}`, () => {
  let opened: Opened;
  let store: JobStore;
  beforeEach(async () => {
    opened = await open();
    store = opened.store;
  });
  afterEach(async () => {
    await opened.dispose();
  });

  /** A job of machine `m@1` (or `machine`) whose create writes these pending effects. */
  async function jobWith(id: string, effects: NewEffect[], machine = { machineId: 'm', machineVersion: '1' }): Promise<void> {
    expect((await store.createJob({ ...newJob(id, machine), effects })).created).toBe(true);
  }

  it('claims the oldest due effects, one per job, takes each job lease and records each attempt started', async () => {
    await jobWith('A', [effectOf('A', 'a1', { at: T0 + 1 }), effectOf('A', 'a2', { at: T0 + 2 })]);
    await jobWith('B', [effectOf('B', 'b1', { at: T0 })]);
    const r = await store.claimDueEffects(claim());
    expect(r.claimed.map((e) => e.id)).toEqual(['B~b1', 'A~a1']);
    expect(r.claimed[0]).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w1', jobId: 'B', job: { id: 'B', machineId: 'm', machineVersion: '1' } });
    expect(r.held).toEqual([]);
    // A's second effect was left for a claim with the fence this one returned.
    expect(r.more).toBe(true);
    expect(r.limited).toBe(false);
    for (const e of r.claimed) {
      const job = await store.getJob(e.jobId);
      expect(job!.lease).toMatchObject({ owner: 'w1', fence: e.leaseFence });
      // The job's record as the claim left it (its lease taken): what a read of it returns now.
      expect(e.job).toEqual(job);
      expect(await store.listAttempts(e.jobId)).toMatchObject([{ effectId: e.id, attempt: 1, runner: 'w1', outcome: 'running' }]);
    }
    // The next call sees A's second effect under w1's live lease: held, not claimed.
    const again = await store.claimDueEffects(claim());
    expect(again.claimed).toEqual([]);
    expect(again.held.map((e) => e.id)).toEqual(['A~a2']);
    expect(again.held[0]).toMatchObject({ jobId: 'A', status: 'pending', attempt: 0 });
    const fence = r.claimed.find((e) => e.jobId === 'A')!.leaseFence;
    expect(await store.claimEffect('A~a2', 'w1', NOW, UNTIL, undefined, fence)).toMatchObject({ id: 'A~a2', leaseFence: fence });
  });

  it('leaves what it may not take: other machine versions, held jobs, live leases of others, backoff not yet due, unsafe expired attempts', async () => {
    await jobWith('other-version', [effectOf('other-version', 'x')], { machineId: 'm', machineVersion: '2' });
    await jobWith('suspended', [effectOf('suspended', 'x')]);
    const note: NoteRecord = { jobId: 'suspended', kind: 'suspended', message: 'hold', at: T0 };
    expect(await store.suspendJob('suspended', 'hold', T0, note)).toBe(true);
    await jobWith('quarantined', [effectOf('quarantined', 'x')]);
    await store.setQuarantine('quarantined', 'bad', T0);
    await jobWith('leased', [effectOf('leased', 'x'), effectOf('leased', 'y', { at: T0 + 5 })]);
    expect(await store.claimEffect('leased~x', 'w2', NOW, UNTIL)).toBeDefined();
    await jobWith('unsafe', [effectOf('unsafe', 'x', { unsafe: true })]);
    expect(await store.claimEffect('unsafe~x', 'w2', T0, T0 + 10)).toBeDefined(); // its claim expires at T0 + 10
    await jobWith('ok', [effectOf('ok', 'x', { at: T0 + 9 })]);
    const r = await store.claimDueEffects(claim());
    expect(r.claimed.map((e) => e.id)).toEqual(['ok~x']);
    expect(r.held).toEqual([]);
    expect(r.more).toBe(false);
    expect((await store.getEffect('other-version~x'))!.status).toBe('pending');
    expect((await store.getEffect('unsafe~x'))!).toMatchObject({ status: 'running', claimedBy: 'w2', attempt: 1 });
    // The version it can run: claimed.
    expect((await store.claimDueEffects(claim({ machines: ['m@2'] }))).claimed.map((e) => e.id)).toEqual(['other-version~x']);
  });

  it('takes over an expired claim of an effect safe to repeat, recording the attempt left as interrupted, and never past max attempts', async () => {
    await jobWith('A', [effectOf('A', 'x', { maxAttempts: 2 })]);
    expect(await store.claimEffect('A~x', 'gone', T0, T0 + 10)).toBeDefined();
    const r = await store.claimDueEffects(claim());
    expect(r.claimed).toMatchObject([{ id: 'A~x', attempt: 2, claimedBy: 'w1' }]);
    expect(await store.listAttempts('A')).toMatchObject([
      { attempt: 1, runner: 'gone', outcome: 'interrupted' },
      { attempt: 2, runner: 'w1', outcome: 'running' },
    ]);
    // Its claim expired again at its last attempt: nothing left to claim (the executor records it exhausted).
    expect((await store.claimDueEffects(claim({ now: UNTIL + 1, claimUntil: UNTIL + 100 }))).claimed).toEqual([]);
  });

  it('claims a backoff when it is due, not before', async () => {
    await jobWith('A', [effectOf('A', 'x')]);
    const first = await store.claimEffect('A~x', 'w1', T0, T0 + 100);
    const fin = await store.finishAttempt('A~x', 1, { kind: 'failed', error: { name: 'Error', message: 'boom' }, retryAt: NOW + 500, event: null }, T0 + 1, { runner: 'w1', fence: first!.leaseFence });
    expect(fin).toBe('current');
    await store.releaseLeases('w1', 'all');
    expect((await store.claimDueEffects(claim())).claimed).toEqual([]);
    expect((await store.claimDueEffects(claim({ now: NOW + 500 }))).claimed).toMatchObject([{ id: 'A~x', attempt: 2 }]);
  });

  it('keeps to its limit and to each src budget, and says what it left', async () => {
    for (let i = 0; i < 4; i++) await jobWith(`J${i}`, [effectOf(`J${i}`, 'x', { at: T0 + i, src: i % 2 === 0 ? 'charge' : 'work' })]);
    const r = await store.claimDueEffects(claim({ limit: 3, budgets: { charge: 1 } }));
    // J0 (charge), J1 (work), J3 (work): J2 is over charge's one slot, left.
    expect(r.claimed.map((e) => e.id)).toEqual(['J0~x', 'J1~x', 'J3~x']);
    expect(r).toMatchObject({ limited: true, more: false });
    // A src out of slots is not read at all, and its rows waiting are told (`limited`).
    const none = await store.claimDueEffects(claim({ budgets: { charge: 0 } }));
    expect(none).toMatchObject({ claimed: [], limited: true, more: false });
    expect((await store.claimDueEffects(claim({ limit: 1 }))).claimed.map((e) => e.id)).toEqual(['J2~x']);
    // Limit reached with more due: `more`.
    for (let i = 4; i < 7; i++) await jobWith(`J${i}`, [effectOf(`J${i}`, 'x', { at: T0 + i })]);
    const window = await store.claimDueEffects(claim({ limit: 2 }));
    expect(window.claimed.map((e) => e.id)).toEqual(['J4~x', 'J5~x']);
    expect(window.more).toBe(true);
    // Exactly as many due as the limit: nothing more (the pick reads one row past it to know).
    const last = await store.claimDueEffects(claim({ limit: 1 }));
    expect(last.claimed.map((e) => e.id)).toEqual(['J6~x']);
    expect(last.more).toBe(false);
  });

  it('finds a claimable row behind any backlog of a src it may not take (out of slots, or not among its srcs)', async () => {
    for (let i = 0; i < 40; i++) await jobWith(`C${i}`, [effectOf(`C${i}`, 'x', { at: T0 + i, src: 'charge' })]);
    await jobWith('W', [effectOf('W', 'x', { at: T0 + 100 })]);
    // charge out of slots: its 40 older rows are not claimable, and do not hide W's (limit 1: the pick reads 2 rows of each src).
    expect(await store.claimDueEffects(claim({ limit: 1, budgets: { charge: 0 } }))).toMatchObject({ claimed: [{ id: 'W~x', src: 'work' }], limited: true, more: false });
    // A claim that does not name charge (a worker that does not run it) never takes its rows, budget or not.
    await jobWith('V', [effectOf('V', 'x', { at: T0 + 200 })]);
    expect(await store.claimDueEffects(claim({ limit: 1, srcs: ['work'] }))).toMatchObject({ claimed: [{ id: 'V~x' }], more: false });
    expect(await store.claimDueEffects(claim({ srcs: ['work', 'ship'] }))).toMatchObject({ claimed: [], more: false, limited: false });
    // The poll still sees every src's rows, oldest first.
    expect((await store.dueEffects(NOW, 2)).map((e) => e.id)).toEqual(['C0~x', 'C1~x']);
    expect((await store.claimDueEffects(claim({ limit: 2 }))).claimed.map((e) => e.id)).toEqual(['C0~x', 'C1~x']);
  });

  it('merges the srcs it reads oldest first, one row per job, each src within its budget', async () => {
    // Srcs in the opposite order of their rows' age, and a job with rows of two srcs.
    await jobWith('A', [effectOf('A', 'a1', { at: T0 + 5, src: 'alpha' }), effectOf('A', 'z1', { at: T0 + 1, src: 'zulu' })]);
    await jobWith('B', [effectOf('B', 'a2', { at: T0 + 2, src: 'alpha' })]);
    await jobWith('C', [effectOf('C', 'z2', { at: T0 + 3, src: 'zulu' })]);
    await jobWith('D', [effectOf('D', 'm1', { at: T0 + 4, src: 'mike' })]);
    await jobWith('E', [effectOf('E', 'z3', { at: T0 + 6, src: 'zulu' })]);
    const srcs = ['alpha', 'mike', 'zulu'];
    expect((await store.dueEffects(NOW, 10)).map((e) => e.id)).toEqual(['A~z1', 'B~a2', 'C~z2', 'D~m1', 'A~a1', 'E~z3']);
    const r = await store.claimDueEffects(claim({ srcs, budgets: { zulu: 1 } }));
    // A's second row waits for the fence of its first; zulu has one slot (A's z1), so C's and E's wait.
    expect(r.claimed.map((e) => e.id)).toEqual(['A~z1', 'B~a2', 'D~m1']);
    expect(r).toMatchObject({ more: true, limited: true });
  });

  it('changes nothing when nothing is due', async () => {
    await jobWith('A', []);
    const before = await store.getJob('A');
    expect(await store.claimDueEffects(claim())).toEqual({ claimed: [], held: [], more: false, limited: false });
    expect(await store.getJob('A')).toEqual(before);
    expect((await store.commit([commitOf('A', 1)]))[0]).toMatchObject({ ok: true });
  });
});
