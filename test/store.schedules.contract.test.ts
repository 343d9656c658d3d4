/**
 * The JobStore contract for schedules: putSchedule (create, replace on revision), get/list/delete,
 * dueSchedules, fireSchedule (state on revision + occurrence under its unique key + the job, all
 * or nothing; the cancel request of cancel-previous) and listOccurrences. One suite, run against
 * every store on records built by hand (no runtime); a last test runs one scenario on both stores
 * and compares everything they return.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { JobStore, NewSchedule, ScheduleFire } from '../src/ports/store.ts';
import { Resources } from './helpers/resources.ts';
import { newEvent, newJob } from './store.contract.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';
import { CONTRACT_STORE, ON_POSTGRES, ON_SQLITE_WASM, postgresContractStore, sqliteWasmContractStore } from './helpers/stores.ts';

const T0 = 1_700_000_000_000;
const MIN = 60_000;

interface StoreUnderTest {
  store: JobStore;
  dispose?: () => Promise<void>;
}
type StoreFactory = () => Promise<StoreUnderTest>;

function scheduleOf(id: string, o: Partial<NewSchedule> = {}): NewSchedule {
  return {
    id,
    owner: null,
    machineId: 'm',
    input: { id },
    cron: null,
    timezone: null,
    everyMs: MIN,
    overlap: 'skip',
    catchUp: 'skip-missed',
    graceMs: 60_000,
    startAt: null,
    nextDueAt: T0 + MIN,
    bufferedDueAt: null,
    lastDueAt: null,
    lastJobId: null,
    missed: 0,
    at: T0,
    ...o,
  };
}

function fireOf(scheduleId: string, expectedRevision: number, o: Partial<ScheduleFire> = {}): ScheduleFire {
  return {
    scheduleId,
    expectedRevision,
    at: T0 + MIN,
    state: { nextDueAt: T0 + 2 * MIN, bufferedDueAt: null, lastDueAt: T0 + MIN, lastJobId: null, missed: 0 },
    ...o,
  };
}

function scheduleContract(name: string, factory: StoreFactory): void {
  describe(`schedule store contract: ${name}`, () => {
    let store: JobStore;
    let dispose: (() => Promise<void>) | undefined;
    beforeEach(async () => {
      ({ store, dispose } = await factory());
    });
    afterEach(async () => {
      await store.close();
      await dispose?.();
    });

    it('putSchedule creates at revision 1, refuses a second create, replaces on the expected revision only', async () => {
      const created = await store.putSchedule(scheduleOf('s1', { cron: '0 3 * * *', timezone: 'Europe/Paris', everyMs: null, catchUp: { runEach: 3 } }), null);
      expect(created).toEqual({
        ok: true,
        schedule: {
          ...scheduleOf('s1', { cron: '0 3 * * *', timezone: 'Europe/Paris', everyMs: null, catchUp: { runEach: 3 } }),
          at: undefined,
          revision: 1,
          createdAt: T0,
          updatedAt: T0,
        },
      });
      if (!created.ok) throw new Error('unreachable');
      expect(await store.putSchedule(scheduleOf('s1', { machineId: 'other' }), null)).toEqual({ ok: false, current: created.schedule });
      expect(await store.putSchedule(scheduleOf('s1', { machineId: 'other' }), 7)).toEqual({ ok: false, current: created.schedule });
      expect(await store.putSchedule(scheduleOf('nope'), 1)).toEqual({ ok: false, current: null });
      expect(await store.getSchedule('nope')).toBeUndefined();

      const replaced = await store.putSchedule(scheduleOf('s1', { input: { v: 2 }, at: T0 + 5 }), 1);
      expect(replaced).toMatchObject({ ok: true, schedule: { id: 's1', input: { v: 2 }, cron: null, everyMs: MIN, revision: 2, createdAt: T0, updatedAt: T0 + 5 } });
      expect(await store.getSchedule('s1')).toEqual(replaced.ok ? replaced.schedule : undefined);
    });

    it('listSchedules orders by id and filters by owner; deleteSchedule is scoped to its owner and keeps occurrences', async () => {
      await store.putSchedule(scheduleOf('b'), null);
      await store.putSchedule(scheduleOf('a', { owner: 'tenant' }), null);
      await store.putSchedule(scheduleOf('c'), null);
      expect((await store.listSchedules({})).map((s) => s.id)).toEqual(['a', 'b', 'c']);
      expect((await store.listSchedules({ owner: null })).map((s) => s.id)).toEqual(['b', 'c']);
      expect((await store.listSchedules({ owner: 'tenant' })).map((s) => [s.id, s.owner])).toEqual([['a', 'tenant']]);

      expect((await store.fireSchedule(fireOf('b', 1, { occurrence: { dueAt: T0 + MIN, outcome: 'skipped', reason: 'busy' } }))).ok).toBe(true);
      expect(await store.deleteSchedule('a', null)).toBe(false); // another owner's
      expect(await store.deleteSchedule('b', 'tenant')).toBe(false);
      expect(await store.deleteSchedule('b', null)).toBe(true);
      expect(await store.deleteSchedule('b', null)).toBe(false);
      expect((await store.listSchedules({})).map((s) => s.id)).toEqual(['a', 'c']);
      expect(await store.listOccurrences('b', 10)).toEqual([{ scheduleId: 'b', dueAt: T0 + MIN, outcome: 'skipped', jobId: null, reason: 'busy', at: T0 + MIN }]);
    });

    it('dueSchedules: one owner, due by now or buffered, earliest first, limited', async () => {
      await store.putSchedule(scheduleOf('late', { nextDueAt: T0 + 3 * MIN }), null);
      await store.putSchedule(scheduleOf('early', { nextDueAt: T0 + MIN }), null);
      await store.putSchedule(scheduleOf('future', { nextDueAt: T0 + 60 * MIN }), null);
      await store.putSchedule(scheduleOf('buffered', { nextDueAt: T0 + 60 * MIN, bufferedDueAt: T0 + 2 * MIN }), null);
      await store.putSchedule(scheduleOf('ended', { nextDueAt: null }), null);
      await store.putSchedule(scheduleOf('theirs', { owner: 'tenant', nextDueAt: T0 }), null);
      const ids = async (owner: string | null, now: number, limit = 10) => (await store.dueSchedules(owner, now, limit)).map((s) => s.id);
      expect(await ids(null, T0)).toEqual(['buffered']);
      expect(await ids(null, T0 + 3 * MIN)).toEqual(['early', 'buffered', 'late']);
      expect(await ids(null, T0 + 3 * MIN, 2)).toEqual(['early', 'buffered']);
      expect(await ids('tenant', T0 + 3 * MIN)).toEqual(['theirs']);
    });

    it('fireSchedule writes the state, the occurrence and its job in one step, on the expected revision', async () => {
      await store.putSchedule(scheduleOf('s'), null);
      const job = newJob('schedule~s~1', { at: T0 + MIN });
      const fired = await store.fireSchedule(
        fireOf('s', 1, { state: { nextDueAt: T0 + 2 * MIN, bufferedDueAt: null, lastDueAt: T0 + MIN, lastJobId: job.id, missed: 2 }, occurrence: { dueAt: T0 + MIN, outcome: 'started', reason: null, job } }),
      );
      expect(fired).toMatchObject({
        ok: true,
        schedule: { id: 's', revision: 2, nextDueAt: T0 + 2 * MIN, lastDueAt: T0 + MIN, lastJobId: job.id, missed: 2, updatedAt: T0 + MIN, createdAt: T0 },
        job: { id: job.id, revision: 1, status: 'active', input: job.input },
      });
      expect(await store.history(job.id)).toHaveLength(1);
      expect(await store.listOccurrences('s', 10)).toEqual([{ scheduleId: 's', dueAt: T0 + MIN, outcome: 'started', jobId: job.id, reason: null, at: T0 + MIN }]);

      // The same step again (a retry, or a second process that read revision 1): refused, nothing written.
      const again = await store.fireSchedule(fireOf('s', 1, { occurrence: { dueAt: T0 + MIN, outcome: 'started', reason: null, job: newJob('schedule~s~1b') } }));
      expect(again).toEqual({ ok: false, reason: 'conflict', schedule: fired.ok ? fired.schedule : null });
      expect(await store.getJob('schedule~s~1b')).toBeUndefined();
      expect(await store.listOccurrences('s', 10)).toHaveLength(1);
      expect(await store.fireSchedule(fireOf('gone', 1))).toEqual({ ok: false, reason: 'conflict', schedule: null });
    });

    it('an occurrence that already has a row, or whose job id is taken, is refused and nothing is written', async () => {
      await store.putSchedule(scheduleOf('s'), null);
      expect((await store.fireSchedule(fireOf('s', 1, { occurrence: { dueAt: T0 + MIN, outcome: 'skipped', reason: 'busy' } }))).ok).toBe(true);
      const before = await store.getSchedule('s');
      const taken = await store.fireSchedule(
        fireOf('s', 2, { state: { nextDueAt: T0 + 9 * MIN, bufferedDueAt: null, lastDueAt: T0 + MIN, lastJobId: 'x', missed: 0 }, occurrence: { dueAt: T0 + MIN, outcome: 'started', reason: null, job: newJob('x') } }),
      );
      expect(taken).toEqual({ ok: false, reason: 'occurrence-taken' });
      expect(await store.getSchedule('s')).toEqual(before);
      expect(await store.getJob('x')).toBeUndefined();

      await store.createJob(newJob('mine'));
      const jobTaken = await store.fireSchedule(fireOf('s', 2, { occurrence: { dueAt: T0 + 2 * MIN, outcome: 'started', reason: null, job: newJob('mine', { input: { other: true } }) } }));
      expect(jobTaken).toEqual({ ok: false, reason: 'occurrence-taken' });
      expect(await store.getSchedule('s')).toEqual(before);
      expect(await store.listOccurrences('s', 10)).toHaveLength(1);
      expect((await store.getJob('mine'))?.input).toEqual({ id: 'mine' });
    });

    it('cancel: the request is recorded once with its event, on an active job only, in the same step', async () => {
      await store.putSchedule(scheduleOf('s'), null);
      await store.createJob(newJob('prev'));
      const event = { ...newEvent('prev', 'spool.cancel', { type: 'CANCEL', reason: 'replaced' }, T0 + MIN), source: 'cancel' as const };
      const next = newJob('next', { at: T0 + MIN });
      const fired = await store.fireSchedule(
        fireOf('s', 1, { occurrence: { dueAt: T0 + MIN, outcome: 'started', reason: null, job: next }, cancel: { jobId: 'prev', reason: 'replaced', event } }),
      );
      expect(fired.ok).toBe(true);
      expect(await store.getJob('prev')).toMatchObject({ cancelRequestedAt: T0 + MIN, cancelReason: 'replaced' });
      expect((await store.listEvents('prev')).map((e) => [e.eventId, e.type, e.status, e.source])).toEqual([['spool.cancel', 'CANCEL', 'pending', 'cancel']]);

      // A second request changes nothing; a finished job gets none.
      await store.fireSchedule(fireOf('s', 2, { cancel: { jobId: 'prev', reason: 'again', event: { ...event, eventId: 'spool.cancel.2' } } }));
      expect(await store.getJob('prev')).toMatchObject({ cancelRequestedAt: T0 + MIN, cancelReason: 'replaced' });
      expect(await store.listEvents('prev')).toHaveLength(1);
      await store.createJob(newJob('ended', { status: 'done', value: 'done' }));
      await store.fireSchedule(fireOf('s', 3, { cancel: { jobId: 'ended', reason: 'late', event: { ...event, jobId: 'ended' } } }));
      expect(await store.getJob('ended')).toMatchObject({ cancelRequestedAt: null });
      expect(await store.listEvents('ended')).toEqual([]);
    });

    it('listOccurrences: newest first, limited, per schedule', async () => {
      await store.putSchedule(scheduleOf('s'), null);
      await store.putSchedule(scheduleOf('t'), null);
      for (let i = 1; i <= 3; i += 1) {
        await store.fireSchedule(fireOf('s', i, { at: T0 + i * MIN, occurrence: { dueAt: T0 + i * MIN, outcome: i === 2 ? 'failed' : 'skipped', reason: `r${i}` } }));
      }
      await store.fireSchedule(fireOf('t', 1, { occurrence: { dueAt: T0 + 2 * MIN, outcome: 'skipped', reason: 't' } }));
      expect((await store.listOccurrences('s', 10)).map((o) => [o.dueAt - T0, o.outcome, o.reason])).toEqual([
        [3 * MIN, 'skipped', 'r3'],
        [2 * MIN, 'failed', 'r2'],
        [MIN, 'skipped', 'r1'],
      ]);
      expect((await store.listOccurrences('s', 1)).map((o) => o.dueAt - T0)).toEqual([3 * MIN]);
      expect(await store.listOccurrences('none', 10)).toEqual([]);
    });
  });
}

const res = new Resources();
afterEach(() => res.dispose());

scheduleContract(CONTRACT_STORE, async () => {
  if (ON_POSTGRES) return postgresContractStore();
  if (ON_SQLITE_WASM) return sqliteWasmContractStore();
  const store = storeUnderTest(await SqliteStore.open(join(res.tempDir(), 'schedules.db')));
  return { store };
});
