/**
 * Lease expiry by the database's clock (src/ports/store.ts, "Lease clocks"): hosts whose clocks
 * disagree by minutes never hold one job at once.
 *
 * First the store's rules, with callers' clocks 10 minutes behind and ahead of the server's: every
 * lease and claim expression (a commit, a claim, the due and pending queries, the lease holders
 * and expiry, stats, renewals, the next wake-up) judges by the server's clock; the same calls on a
 * store judging by the caller's clock (`leaseClock: 'caller'`) let the host ahead take the lease.
 *
 * Then the proof: two real child processes ("hosts", test/fixtures/leaseHostChild.ts) on one
 * database, their runtimes' clocks 10 minutes behind and ahead, work the same jobs with 3-second
 * leases and heartbeats. Each activity run records its owner, fence, start and end by the
 * database's clock (test/fixtures/leaseAudit.ts). By the database's clock: no two owners' runs of
 * one job overlap, no attempt is stale, every job finishes once. The negative control runs the same
 * hosts with leases judged by the callers' clocks (the old behaviour): the host ahead takes live
 * leases over, and the audit shows the overlap. Waits are on the children's lines and on database
 * predicates polled with a deadline, never a sleep for its own sake.
 */
import { describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { createRuntime } from '../src/index.ts';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import type { LeaseClaim, TransitionCommit } from '../src/ports/store.ts';
import { perTestPostgres } from './helpers/pgTest.ts';
import { ChildScript } from './helpers/proc.ts';
import { commitOf, newJob } from './store.contract.ts';
import { AUDIT_TABLE, AUDITED, DB_MS, HOLD_MS, LEASE_MS } from './fixtures/leaseAudit.ts';

const HOST = fileURLToPath(new URL('./fixtures/leaseHostChild.ts', import.meta.url));
const SKEW_MS = 10 * 60_000;

const { cleanups, database, open } = perTestPostgres();

/** The server's clock, in ms. */
async function dbNow(store: PostgresStore): Promise<number> {
  return (await store.pool.query<{ t: number }>(`SELECT ${DB_MS} AS t`)).rows[0]!.t;
}

/**
 * Read `check` (a database read) again after each change another process commits (the store's
 * LISTEN/NOTIFY wake-ups; the audited activity notifies its own writes too) until it gives a
 * value, failing after `timeoutMs` with `what`.
 */
function until<T>(store: PostgresStore, what: string, check: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let reading = false;
    let again = false;
    const finish = (fn: () => void) => {
      clearTimeout(limit);
      stop();
      fn();
    };
    const read = async (): Promise<void> => {
      if (reading) return void (again = true);
      reading = true;
      try {
        do {
          again = false;
          const value = await check();
          if (value !== undefined && value !== false) return finish(() => resolve(value));
        } while (again);
      } catch (error) {
        finish(() => reject(error as Error));
      } finally {
        reading = false;
      }
    };
    const stop = store.watchChanges(() => void read());
    const limit = setTimeout(() => finish(() => reject(new Error(`timed out waiting for ${what}`))), timeoutMs);
    void read();
  });
}

const lease = (runner: string, fence: number | null, now: number, until: number | null): LeaseClaim => ({ runner, fence, now, until });
const under = (c: TransitionCommit, l: LeaseClaim): TransitionCommit => ({ ...c, lease: l });

describe('lease rules by the database clock (callers 10 minutes behind and ahead)', () => {
  /** A job `A` whose activity `behind` (a host 10 minutes behind) claimed with a one-minute lease; the times of both hosts. */
  async function leasedByBehind(store: PostgresStore) {
    const real = Date.now();
    const behind = real - SKEW_MS;
    const ahead = real + SKEW_MS;
    await store.createJob(newJob('A'));
    const effect = { id: 'A~act~r2', jobId: 'A', actorId: 'act', src: 'src.act', input: {}, maxAttempts: 3, unsafe: false, createdRevision: 2, at: behind };
    await store.commit([{ ...commitOf('A', 1), effects: { create: [effect], deactivate: [] } }]);
    const claimed = await store.claimEffect(effect.id, 'behind', behind, behind + 60_000, undefined, null);
    expect(claimed?.leaseFence).toBe(1);
    return { behind, ahead, effect };
  }

  it("a lease taken by a host behind stays live for a host ahead: every lease and claim expression judges by the server's clock", async () => {
    const store = await open(await database());
    const { behind, ahead, effect } = await leasedByBehind(store);
    // Written as the server's now + the duration asked for (one minute), not the caller's time.
    const job = await store.getJob('A');
    expect(Math.abs(job!.lease!.until - (await dbNow(store)) - 60_000)).toBeLessThan(10_000);
    expect(Math.abs((await store.getEffect(effect.id))!.claimExpiresAt! - job!.lease!.until)).toBeLessThan(1000);
    // The host ahead sees it live everywhere.
    expect(await store.commit([under(commitOf('A', 2), lease('ahead', null, ahead, ahead + 60_000))])).toMatchObject([{ ok: false, reason: 'leased', owner: 'behind' }]);
    expect(await store.claimEffect(effect.id, 'ahead', ahead, ahead + 60_000, undefined, null)).toBeUndefined();
    expect(await store.dueEffects(ahead, 10, 'ahead')).toEqual([]);
    await store.acceptEvent({ jobId: 'A', eventId: 'e1', type: 'GO', payload: { type: 'GO' }, payloadHash: 'h1', at: ahead });
    expect(await store.jobsWithPendingEvents(10, { runner: 'ahead', now: ahead })).toEqual([]);
    expect(await store.jobsWithPendingEvents(10, { runner: 'behind', now: behind })).toEqual(['A']);
    expect(await store.leaseHolders(ahead)).toEqual(['behind']);
    expect(await store.expireLeases({ expiredBy: ahead })).toEqual([]);
    expect((await store.stats({ now: ahead })).leases).toMatchObject([{ runner: 'behind', jobs: 1 }]);
    // The next wake-up in each caller's own clock: about a minute from its now.
    expect(Math.abs((await store.nextWakeAt(ahead))! - ahead - 60_000)).toBeLessThan(10_000);
    expect(Math.abs((await store.nextWakeAt(behind))! - behind - 60_000)).toBeLessThan(10_000);
    // The holder renews (lease and claim) and commits under it, by durations from its own now.
    expect(await store.renewLeases('behind', ['A'], behind + 120_000, behind)).toEqual(new Map([['A', 1]]));
    expect(await store.renewClaim(effect.id, 1, 'behind', behind + 120_000, behind)).toBe(true);
    expect((await store.getJob('A'))!.lease!.until - (await dbNow(store))).toBeGreaterThan(60_000);
    expect(await store.commit([under(commitOf('A', 2), lease('behind', 1, behind, behind + 120_000))])).toEqual([{ ok: true, revision: 3, fence: 1 }]);
  });

  it('a lease or claim ended at its now (until = now) has expired for every host at once, and the host ahead then takes it', async () => {
    const store = await open(await database());
    const { behind, ahead, effect } = await leasedByBehind(store);
    expect(await store.renewClaim(effect.id, 1, 'behind', behind, behind)).toBe(true);
    expect(await store.renewLeases('behind', ['A'], behind, behind)).toEqual(new Map([['A', 1]]));
    expect(await store.leaseHolders(behind)).toEqual([]);
    expect((await store.dueEffects(behind, 10)).map((e) => e.id)).toEqual([effect.id]);
    expect((await store.claimEffect(effect.id, 'ahead', ahead, ahead + 60_000, undefined, null))?.leaseFence).toBe(2);
    // Now the host behind is the one refused.
    expect(await store.commit([under(commitOf('A', 2), lease('behind', 1, behind, behind + 60_000))])).toMatchObject([{ ok: false, reason: 'leased', owner: 'ahead' }]);
  });

  it("by the caller's clock (leaseClock: 'caller', the old rule) the host ahead takes the live lease: the rule above is the database clock's doing", async () => {
    const store = await open(await database(), { leaseClock: 'caller' });
    const { ahead, effect } = await leasedByBehind(store);
    expect(await store.leaseHolders(ahead)).toEqual([]);
    expect((await store.claimEffect(effect.id, 'ahead', ahead, ahead + 60_000, undefined, null))?.leaseFence).toBe(2);
  });

  it('refuses a leaseClock that is neither database nor caller', async () => {
    const url = await database();
    await expect(PostgresStore.open(url, { leaseClock: 'host' as 'caller' })).rejects.toMatchObject({ name: 'ValidationError', message: expect.stringMatching(/leaseClock must be 'database' or 'caller'/) });
  });
});

/** One audited run, by the database's clock. */
interface Run {
  job_id: string;
  step: string;
  attempt: number;
  runner: string;
  lease_owner: string | null;
  fence: number | null;
  started_at: number;
  ended_at: number | null;
  aborted: boolean | null;
}

/** Runs of one job by two different owners whose spans meet (a run not ended yet spans to now). */
const OVERLAPS = `SELECT a.job_id, a.runner AS first, b.runner AS second, a.fence AS first_fence, b.fence AS second_fence FROM lease_audit a JOIN lease_audit b
  ON a.job_id = b.job_id AND a.id < b.id AND a.runner <> b.runner
  AND b.started_at < coalesce(a.ended_at, ${DB_MS}) AND a.started_at < coalesce(b.ended_at, ${DB_MS})`;

/**
 * Two hosts on one database, clocks 10 minutes behind and ahead, leases judged by `leaseClock`.
 * Batch 1 (6 jobs) is claimed by the host behind (6 activity slots: it is full); the host ahead
 * (12 slots: always free ones, so it keeps looking at the other's running activities) comes up,
 * the test records when in `lease_hold` (batch 1's runs hold until a lease past it), and batch 2
 * (6 jobs) follows, for whichever host claims them.
 */
async function skewedHosts(leaseClock: 'database' | 'caller') {
  const url = await database();
  const store = await open(url);
  await store.pool.query(AUDIT_TABLE);
  // The jobs are made here and run there: this runtime runs no activity.
  const maker = await createRuntime({ store, machines: [AUDITED], runEffects: false });
  cleanups.push(() => maker.close());
  const makeJobs = async (prefix: string) => {
    for (let i = 0; i < 6; i++) await maker.start('audited', {}, { jobId: `${prefix}${i}` });
  };
  const host = (offset: number, slots: number) => {
    const child = new ChildScript(HOST, [url, String(offset), leaseClock, String(slots)]);
    cleanups.push(async () => {
      await child.kill();
    });
    return child;
  };
  await makeJobs('one-');
  const behind = host(-SKEW_MS, 6);
  const behindRunner = (await behind.waitFor((l) => l.type === 'ready'))['runner'] as string;
  let claimed = 0;
  await behind.waitFor((l) => l.type === 'attempt' && ++claimed >= 6);
  const ahead = host(SKEW_MS, 12);
  const aheadRunner = (await ahead.waitFor((l) => l.type === 'ready'))['runner'] as string;
  await store.pool.query(`INSERT INTO lease_hold (since) VALUES (${DB_MS})`);
  const since = (await store.pool.query<{ since: number }>('SELECT since FROM lease_hold')).rows[0]!.since;
  await makeJobs('two-');
  const runs = async () => (await store.pool.query<Run>('SELECT * FROM lease_audit ORDER BY id')).rows;
  const overlaps = async () => (await store.pool.query<{ job_id: string; first: string; second: string; first_fence: number; second_fence: number }>(OVERLAPS)).rows;
  const stop = async () => {
    for (const child of [behind, ahead]) child.proc.kill('SIGTERM');
    for (const child of [behind, ahead]) expect(await child.exited).toEqual({ code: 0, signal: null });
  };
  return { store, behind, ahead, behindRunner, aheadRunner, since, runs, overlaps, stop };
}

describe('two hosts with clocks 20 minutes apart on one database', () => {
  it("by the database's clock: no two owners' runs of a job overlap, no attempt is stale, every job finishes once", async () => {
    const h = await skewedHosts('database');
    await until(h.store, 'every job to end', async () => {
      const { rows } = await h.store.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status <> 'active'");
      return rows[0]!.n === 12;
    });
    await h.stop();
    expect(h.behind.lines.filter((l) => l.type === 'log')).toEqual([]);
    expect(h.ahead.lines.filter((l) => l.type === 'log')).toEqual([]);
    const runs = await h.runs();

    // No overlap, and each run began under its own host's lease.
    expect(await h.overlaps()).toEqual([]);
    for (const r of runs) expect(r).toMatchObject({ lease_owner: r.runner, aborted: false });
    // Both hosts worked: the host behind kept batch 1 across whole leases while the host ahead was
    // up and looking (its runs reach past the hold), the host ahead ran batch 2.
    const batch1 = runs.filter((r) => r.job_id.startsWith('one-') && r.step === 'first');
    expect(batch1.map((r) => r.runner)).toEqual(Array(6).fill(h.behindRunner));
    for (const r of batch1) expect(r.ended_at! - h.since).toBeGreaterThanOrEqual(HOLD_MS - 1);
    expect(HOLD_MS).toBeGreaterThan(LEASE_MS);
    expect(runs.some((r) => r.runner === h.aheadRunner)).toBe(true);

    // Every job done once, each step run once (attempt 1), nothing stale or interrupted.
    const jobs = (await h.store.pool.query<{ id: string; status: string }>('SELECT id, status FROM jobs ORDER BY id')).rows;
    expect(jobs.map((j) => j.status)).toEqual(Array(12).fill('done'));
    expect(runs.map((r) => `${r.job_id}/${r.step}/${r.attempt}`).sort()).toEqual(jobs.flatMap((j) => [`${j.id}/first/1`, `${j.id}/second/1`]).sort());
    const attempts = (await h.store.pool.query<{ outcome: string; n: number }>('SELECT outcome, count(*)::int AS n FROM attempts GROUP BY outcome')).rows;
    expect(attempts).toEqual([{ outcome: 'succeeded', n: 24 }]);
    // Fences: a job's commits never go back to a lower fence, and no fence is two runners'.
    const history = (await h.store.pool.query<{ job_id: string; runner: string | null; fence: number | null }>(
      'SELECT job_id, runner, fence FROM transitions WHERE runner IS NOT NULL ORDER BY job_id, revision',
    )).rows;
    const seen = new Map<string, { fence: number; runner: string }>();
    for (const row of history) {
      const last = seen.get(row.job_id);
      if (last) {
        expect(row.fence!).toBeGreaterThanOrEqual(last.fence);
        if (row.fence === last.fence) expect(row.runner).toBe(last.runner);
      }
      seen.set(row.job_id, { fence: row.fence!, runner: row.runner! });
    }
    expect(new Set(history.map((r) => r.job_id)).size).toBe(12);
  }, 150_000);

  it("negative control, by the callers' clocks (the old rule): the host ahead takes live leases over and two owners' runs of a job overlap", async () => {
    const h = await skewedHosts('caller');
    const overlaps = await until(h.store, 'an overlap in the audit', async () => {
      const found = await h.overlaps();
      return found.length > 0 ? found : undefined;
    });
    // The host ahead started a run of a job while the host behind's run of it was still going,
    // under a fence it took from the live lease (a higher one).
    const taken = overlaps.find((o) => o.first === h.behindRunner && o.second === h.aheadRunner);
    expect(taken).toBeDefined();
    expect(taken!.second_fence).toBeGreaterThan(taken!.first_fence);
  }, 150_000);
});
