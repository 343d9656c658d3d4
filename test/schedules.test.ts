/**
 * Schedules: cron expressions and intervals that start jobs, on a VirtualClock (no sleeping).
 * Validation stores nothing; each overlap and catch-up policy; two runtimes on one SQLite file (and
 * on one memory store) ticking at the same moments never fire an occurrence twice; re-creating a
 * schedule never re-fires an occurrence; the worker's wake-up time includes the next occurrence.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../persistence/memory/index.ts';
import type { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import {
  IdempotencyConflictError,
  InvalidScheduleError,
  UnknownMachineError,
  ValidationError,
  occurrenceJobId,
  type Runtime,
  type RuntimeEvent,
  type ScheduleSpec,
} from '../src/internal.ts';
import type { JobStore, OccurrenceRecord, ScheduleFire } from '../src/ports/store.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { counter } from './fixtures/machines.ts';
import { report, reportV2 } from './fixtures/scheduleMachines.ts';
import { dumpRows, rawRun } from './helpers/rawSql.ts';
import { dumpStore, Resources } from './helpers/resources.ts';

const res = new Resources();
afterEach(() => res.dispose());

const T0 = Date.parse('2026-01-01T00:00:00Z');
const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const MACHINES = [report, counter];

/** `database`: the store under test (a SQLite file; a Postgres database in the postgres project); `memory`: a MemoryStore. */
type Kind = 'database' | 'memory';

interface Opened {
  runtime: Runtime;
  store: JobStore;
  clock: VirtualClock;
  seen: RuntimeEvent[];
}

async function open(kind: Kind, o: { clock?: VirtualClock; store?: JobStore; path?: string; machines?: typeof MACHINES | unknown[] } = {}): Promise<Opened & { path: string | undefined }> {
  const clock = o.clock ?? new VirtualClock(T0);
  const path = kind === 'database' ? (o.path ?? res.dbPath()) : undefined;
  const store = o.store ?? (path ? await res.sqlite(path, { clock }) : new MemoryStore());
  const runtime = await res.runtime({ store, machines: (o.machines ?? MACHINES) as typeof MACHINES, clock });
  const seen: RuntimeEvent[] = [];
  runtime.subscribe((e) => seen.push(e));
  return { runtime, store, clock, seen, path };
}

/** Every row for the database stores (SQLite or Postgres), every record through the port for memory (schedules included). */
async function dump(store: JobStore): Promise<unknown> {
  if (!(store instanceof MemoryStore)) return dumpRows(store as SqliteStore);
  return { jobs: await dumpStore(store), schedules: await store.listSchedules({}) };
}

type Patch = { [K in keyof ScheduleSpec]?: ScheduleSpec[K] | undefined };

/** A schedule of `report` every minute from T0 + 1 min; `undefined` in the patch removes a field. */
function spec(o: Patch = {}): ScheduleSpec {
  const merged: Patch = { id: 'daily', machineId: 'report', input: { day: 'today' }, everyMs: MIN, startAt: T0 + MIN, overlap: 'allow-all', catchUp: 'skip-missed', ...o };
  return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined)) as unknown as ScheduleSpec;
}

/**
 * Another handle on a store: for a memory store, what a second process has on one file (closing it
 * leaves the store open); `refused` counts the fire steps the store refused (lost races).
 */
function handle(store: JobStore, refused?: { count: number }, keepOpen = true): JobStore {
  return new Proxy(store, {
    get: (target, key) => {
      if (key === 'close' && keepOpen) return async () => {};
      if (key === 'fireSchedule' && refused) {
        return async (fire: ScheduleFire) => {
          const result = await target.fireSchedule(fire);
          if (!result.ok) refused.count += 1;
          return result;
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** Occurrence rows oldest first, as [minutes after T0, outcome]. */
async function occurrences(store: JobStore, id = 'daily'): Promise<[number, OccurrenceRecord['outcome']][]> {
  return (await store.listOccurrences(id, 1000)).reverse().map((o) => [(o.dueAt - T0) / MIN, o.outcome]);
}

/** The report jobs, as [minutes after T0 of their occurrence (from the id), status, state]. */
async function runs(runtime: Runtime): Promise<[string, string, unknown][]> {
  return (await runtime.list({ machineId: 'report' })).map((j) => [j.id, j.status, j.value]);
}

const idAt = (minutes: number, id = 'daily') => occurrenceJobId(id, T0 + minutes * MIN);

describe('schedule(): validation first, nothing stored on error', () => {
  for (const kind of ['database', 'memory'] as const) {
    it(`${kind}: a bad cron expression, time zone, interval or policy is an InvalidScheduleError; an unknown machine or invalid input their own typed errors`, async () => {
      const { runtime, store } = await open(kind);
      const before = await dump(store);
      const invalid: [Patch, string][] = [
        [{ everyMs: undefined, cron: 'not a cron' }, 'cron'],
        [{ everyMs: undefined, cron: '61 * * * *' }, 'cron'],
        [{ everyMs: undefined, cron: '* * * *' }, 'cron'],
        [{ everyMs: undefined, cron: '0 0 30 2 *' }, 'cron'], // never matches
        [{ everyMs: undefined, cron: '0 3 * * *', timezone: 'Mars/Olympus' }, 'timezone'],
        [{ cron: '0 3 * * *' }, 'cron'], // both cron and everyMs
        [{ everyMs: undefined }, 'cron'], // neither
        [{ everyMs: 10 }, 'everyMs'],
        [{ timezone: 'UTC' }, 'timezone'], // a zone with an interval
        [{ overlap: 'queue' as never }, 'overlap'],
        [{ catchUp: { runEach: 0 } }, 'catchUp'],
        [{ catchUp: 'all' as never }, 'catchUp'],
        [{ graceMs: -1 }, 'graceMs'],
        [{ startAt: 8.64e15 + 1 }, 'startAt'], // past the last date a Date can hold
        [{ startAt: Date.UTC(10000, 0, 1) }, 'startAt'], // its occurrences could not be printed
        [{ startAt: -1 }, 'startAt'],
        [{ id: 'has space' }, 'id'],
        [{ id: 'a~b' }, 'id'],
        [{ overlap: 'cancel-previous', machineId: 'counter', input: {} }, 'overlap'], // counter has no CANCEL
        [{ everyMs: undefined, cron: '0 3 * * *', timeZone: 'Europe/Paris' } as Patch, 'timeZone'], // misspelt: not ignored (UTC)
      ];
      for (const [patch, field] of invalid) {
        const error = await runtime.schedule(spec(patch)).catch((e: unknown) => e);
        expect(error, JSON.stringify(patch)).toBeInstanceOf(InvalidScheduleError);
        expect(error).toMatchObject({ code: 'SPOOL_INVALID_SCHEDULE', category: 'bad-input', details: { field } });
      }
      await expect(runtime.schedule(spec({ machineId: 'nope' }))).rejects.toBeInstanceOf(UnknownMachineError);
      await expect(runtime.schedule(spec({ input: { day: 5 } }))).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.schedule(spec({ input: { day: 'x', extra: 1 } }))).rejects.toMatchObject({ code: 'SPOOL_INVALID', category: 'bad-input' });
      expect(await runtime.schedules()).toEqual([]);
      expect(await dump(store)).toEqual(before);
    });
  }

  it('refuses an input with a sensitive field, which it could only replay as [redacted]', async () => {
    const { runtime, store } = await open('database', { machines: [{ ...report, sensitive: ['day'] }, counter] });
    const before = await dump(store);
    const error = await runtime.schedule(spec({ input: { day: 'monday' } })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidScheduleError);
    expect(error).toMatchObject({ details: { field: 'input' } });
    expect((error as Error).message).toContain('its input carries sensitive day');
    expect((error as Error).message).not.toContain('monday');
    expect(await runtime.schedules()).toEqual([]);
    expect(await dump(store)).toEqual(before);
  });

  it('a cron expression is read in its time zone (default UTC); 6 fields add seconds', async () => {
    const { runtime } = await open('memory');
    const paris = await runtime.schedule(spec({ id: 'paris', everyMs: undefined, startAt: undefined, cron: '0 9 * * *', timezone: 'Europe/Paris' }));
    expect(paris).toMatchObject({ status: 'created', schedule: { cron: '0 9 * * *', timezone: 'Europe/Paris', everyMs: null, nextDueAt: Date.parse('2026-01-01T08:00:00Z') } });
    const utc = await runtime.schedule(spec({ id: 'utc', everyMs: undefined, startAt: undefined, cron: '  0  9 * * * ' }));
    expect(utc.schedule).toMatchObject({ cron: '0 9 * * *', timezone: 'UTC', nextDueAt: Date.parse('2026-01-01T09:00:00Z') });
    const seconds = await runtime.schedule(spec({ id: 'sec', everyMs: undefined, startAt: undefined, cron: '*/30 * * * * *' }));
    expect(seconds.schedule.nextDueAt).toBe(T0); // now matches: the first occurrence is now
  });
});

describe('schedule(): an upsert by id', () => {
  it('the same definition again changes nothing; new input or policy keeps its place; a new time rule counts from now', async () => {
    const { runtime, clock } = await open('database');
    const first = await runtime.schedule(spec({ everyMs: 10 * MIN, startAt: undefined }));
    expect(first).toMatchObject({ status: 'created', schedule: { id: 'daily', revision: 1, nextDueAt: T0, startAt: null, graceMs: 60_000 } });
    clock.advance(MIN);
    expect(await runtime.schedule(spec({ everyMs: 10 * MIN, startAt: undefined }))).toEqual({ status: 'unchanged', schedule: first.schedule });
    const updated = await runtime.schedule(spec({ everyMs: 10 * MIN, startAt: undefined, input: { day: 'tomorrow' }, overlap: 'skip' }));
    expect(updated).toMatchObject({ status: 'updated', schedule: { revision: 2, input: { day: 'tomorrow' }, overlap: 'skip', nextDueAt: T0, createdAt: T0, updatedAt: T0 + MIN } });
    const retimed = await runtime.schedule(spec({ everyMs: 15 * MIN, startAt: undefined, input: { day: 'tomorrow' }, overlap: 'skip' }));
    expect(retimed.schedule).toMatchObject({ revision: 3, everyMs: 15 * MIN, nextDueAt: T0 + 15 * MIN });
    expect((await runtime.schedules()).map((s) => s.id)).toEqual(['daily']);
    expect(await runtime.nextWakeAt()).toBe(T0 + 15 * MIN);
    expect(await runtime.unschedule('daily')).toBe(true);
    expect(await runtime.unschedule('daily')).toBe(false);
    expect(await runtime.schedules()).toEqual([]);
    expect(await runtime.nextWakeAt()).toBeNull();
  });

  it("another owner's schedule id is taken; owners see only their own schedules", async () => {
    const store = new MemoryStore();
    const clock = new VirtualClock(T0);
    const a = await res.runtime({ store, machines: MACHINES, clock, owner: 'a' });
    const b = await res.runtime({ store: handle(store), machines: MACHINES, clock, owner: 'b' });
    await a.schedule(spec());
    await expect(b.schedule(spec())).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(await b.schedules()).toEqual([]);
    expect(await b.unschedule('daily')).toBe(false);
    clock.set(T0 + MIN);
    await b.tick();
    expect(await store.listOccurrences('daily', 10)).toEqual([]);
    await a.tick();
    expect(await a.list()).toMatchObject([{ id: idAt(1), owner: 'a', input: { day: 'today' } }]);
  });
});

describe('firing: tick() starts the job of each due occurrence, once', () => {
  for (const kind of ['database', 'memory'] as const) {
    it(`${kind}: not a millisecond early; the job id comes from the schedule id and the due time; nextWakeAt includes the next occurrence`, async () => {
      const { runtime, store, clock, seen } = await open(kind);
      clock.advance(SEC); // T0 itself matches */5: start just after it
      await runtime.schedule(spec({ everyMs: undefined, startAt: undefined, cron: '*/5 * * * *' }));
      expect(await runtime.nextWakeAt()).toBe(T0 + 5 * MIN);
      clock.set(T0 + 5 * MIN - 1);
      await runtime.tick();
      expect(await runs(runtime)).toEqual([]);
      clock.set(T0 + 5 * MIN);
      await runtime.tick();
      await runtime.tick(); // however often it ticks
      expect(await runs(runtime)).toEqual([[occurrenceJobId('daily', T0 + 5 * MIN), 'active', 'running']]);
      expect((await runtime.get(idAt(5))).input).toEqual({ day: 'today' });
      expect(await occurrences(store)).toEqual([[5, 'started']]);
      expect(seen.filter((e) => e.type === 'schedule.fired')).toEqual([
        { type: 'schedule.fired', scheduleId: 'daily', dueAt: T0 + 5 * MIN, outcome: 'started', jobId: idAt(5), reason: null },
      ]);
      expect(seen.some((e) => e.type === 'job.started' && e.job.id === idAt(5))).toBe(true);
      expect(await runtime.nextWakeAt()).toBe(T0 + 10 * MIN);
      expect((await runtime.schedules())[0]).toMatchObject({ lastDueAt: T0 + 5 * MIN, lastJobId: idAt(5), nextDueAt: T0 + 10 * MIN, revision: 2 });
    });
  }

  it('a runtime that does not run effects (a CLI command) fires nothing; one without the machine leaves the schedule to one that has it', async () => {
    const path = res.dbPath();
    const clock = new VirtualClock(T0);
    const full = await open('database', { path, clock });
    await full.runtime.schedule(spec());
    const client = await res.runtime({ store: await res.sqlite(path, { clock }), machines: MACHINES, clock, runEffects: false });
    const other = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [counter], clock });
    clock.set(T0 + MIN);
    await client.tick();
    await other.tick();
    expect(await other.nextWakeAt()).toBeNull(); // not its machine: no wake-up for it (no busy loop)
    expect(await occurrences(full.store)).toEqual([]);
    await full.runtime.tick();
    expect(await occurrences(full.store)).toEqual([[1, 'started']]);
  });

  it('an occurrence whose job can no longer start (the machine changed) is recorded as failed, and the schedule goes on', async () => {
    const path = res.dbPath();
    const clock = new VirtualClock(T0);
    const v1 = await open('database', { path, clock });
    await v1.runtime.schedule(spec());
    await v1.runtime.close();
    const v2 = await open('database', { path, clock, machines: [report, reportV2] });
    clock.set(T0 + MIN);
    await v2.runtime.tick();
    const [row] = await v2.store.listOccurrences('daily', 10);
    expect(row).toMatchObject({ outcome: 'failed', jobId: null, reason: expect.stringContaining('SPOOL_INVALID') });
    expect(await runs(v2.runtime)).toEqual([]);
    expect((await v2.runtime.schedules())[0]?.nextDueAt).toBe(T0 + 2 * MIN);
    expect(v2.seen.find((e) => e.type === 'schedule.fired')).toMatchObject({ outcome: 'failed', jobId: null });
  });

  it('re-creating a schedule under the same id never fires an occurrence twice', async () => {
    const { runtime, store, clock } = await open('database');
    await runtime.schedule(spec({ startAt: undefined })); // epoch-aligned minutes: T0 is an occurrence
    await runtime.tick();
    expect(await occurrences(store)).toEqual([[0, 'started']]);
    await runtime.send(idAt(0), { type: 'FINISH' });
    expect(await runtime.unschedule('daily')).toBe(true);
    await runtime.schedule(spec({ startAt: undefined })); // at the same ms: T0 is due again for the new schedule
    expect((await runtime.schedules())[0]?.nextDueAt).toBe(T0);
    await runtime.tick();
    expect(await occurrences(store)).toEqual([[0, 'started']]);
    expect(await runs(runtime)).toEqual([[idAt(0), 'done', 'done']]);
    expect((await runtime.schedules())[0]?.nextDueAt).toBe(T0 + MIN);
    clock.set(T0 + MIN);
    await runtime.tick();
    expect(await occurrences(store)).toEqual([[0, 'started'], [1, 'started']]);
  });
});

describe('overlap: an occurrence whose previous run has not finished', () => {
  it('many schedules waiting with a buffered occurrence do not hide one that is due', async () => {
    const { runtime, store, clock } = await open('memory');
    for (let i = 0; i < 120; i += 1) await runtime.schedule(spec({ id: `b${String(i).padStart(3, '0')}`, overlap: 'buffer-one' }));
    clock.set(T0 + MIN);
    await runtime.tick();
    clock.set(T0 + 2 * MIN);
    await runtime.tick(); // 120 buffered occurrences whose previous runs go on
    await runtime.schedule(spec({ id: 'zzz', startAt: T0 + 3 * MIN }));
    clock.set(T0 + 3 * MIN);
    await runtime.tick();
    expect(await occurrences(store, 'zzz')).toEqual([[3, 'started']]);
    expect((await runtime.schedules()).filter((s) => s.bufferedDueAt === T0 + 2 * MIN)).toHaveLength(120);
  });

  for (const kind of ['database', 'memory'] as const) {
    it(`${kind}: skip records it as skipped; the next one after the run ends starts`, async () => {
      const { runtime, store, clock, seen } = await open(kind);
      await runtime.schedule(spec({ overlap: 'skip' }));
      for (const m of [1, 2]) {
        clock.set(T0 + m * MIN);
        await runtime.tick();
      }
      await runtime.send(idAt(1), { type: 'FINISH' });
      clock.set(T0 + 3 * MIN);
      await runtime.tick();
      expect(await occurrences(store)).toEqual([[1, 'started'], [2, 'skipped'], [3, 'started']]);
      expect((await store.listOccurrences('daily', 10)).find((o) => o.outcome === 'skipped')?.reason).toBe(`the previous run (job ${idAt(1)}) has not finished (overlap: skip)`);
      expect(await runs(runtime)).toEqual([[idAt(1), 'done', 'done'], [idAt(3), 'active', 'running']]);
      expect(seen.filter((e) => e.type === 'schedule.fired').map((e) => (e.type === 'schedule.fired' ? e.outcome : ''))).toEqual(['started', 'skipped', 'started']);
    });

    it(`${kind}: buffer-one keeps one occurrence and starts it when the previous run ends; later ones are skipped`, async () => {
      const { runtime, store, clock } = await open(kind);
      await runtime.schedule(spec({ overlap: 'buffer-one' }));
      for (const m of [1, 2, 3]) {
        clock.set(T0 + m * MIN);
        await runtime.tick();
      }
      expect(await occurrences(store)).toEqual([[1, 'started'], [3, 'skipped']]);
      expect((await runtime.schedules())[0]).toMatchObject({ bufferedDueAt: T0 + 2 * MIN, lastJobId: idAt(1) });
      await runtime.tick(); // the previous run still has not finished
      expect(await runs(runtime)).toEqual([[idAt(1), 'active', 'running']]);

      await runtime.send(idAt(1), { type: 'FINISH' });
      clock.advance(SEC);
      await runtime.tick(); // the buffered occurrence starts, under its own due time
      expect(await occurrences(store)).toEqual([[1, 'started'], [2, 'started'], [3, 'skipped']]);
      expect(await runs(runtime)).toEqual([[idAt(1), 'done', 'done'], [idAt(2), 'active', 'running']]);
      expect((await runtime.schedules())[0]).toMatchObject({ bufferedDueAt: null, lastJobId: idAt(2) });

      clock.set(T0 + 4 * MIN);
      await runtime.tick(); // the run of 2 has not finished: 4 is buffered
      expect((await runtime.schedules())[0]).toMatchObject({ bufferedDueAt: T0 + 4 * MIN });
    });

    it(`${kind}: allow-all starts every occurrence`, async () => {
      const { runtime, store, clock } = await open(kind);
      await runtime.schedule(spec({ overlap: 'allow-all' }));
      for (const m of [1, 2, 3]) {
        clock.set(T0 + m * MIN);
        await runtime.tick();
      }
      expect(await occurrences(store)).toEqual([[1, 'started'], [2, 'started'], [3, 'started']]);
      expect((await runs(runtime)).map(([, status]) => status)).toEqual(['active', 'active', 'active']);
    });

    it(`${kind}: cancel-previous requests cancellation of the previous run (the machine decides) and starts the new one`, async () => {
      const { runtime, store, clock, seen } = await open(kind);
      await runtime.schedule(spec({ overlap: 'cancel-previous' }));
      clock.set(T0 + MIN);
      await runtime.tick();
      clock.set(T0 + 2 * MIN);
      await runtime.tick();
      expect(await occurrences(store)).toEqual([[1, 'started'], [2, 'started']]);
      const previous = await runtime.get(idAt(1));
      expect(previous).toMatchObject({ status: 'done', value: 'cancelled', cancel: { requestedAt: T0 + 2 * MIN, completed: true } });
      expect(previous.cancel?.reason).toContain('replaces this run (overlap: cancel-previous)');
      expect((await runtime.history(idAt(1))).map((h) => h.eventType)).toEqual(['xstate.init', 'CANCEL']);
      expect(await runtime.get(idAt(2))).toMatchObject({ status: 'active', value: 'running', cancel: null });
      expect(seen.some((e) => e.type === 'cancel.requested' && e.jobId === idAt(1))).toBe(true);

      // A previous run that already ended is not cancelled.
      await runtime.send(idAt(2), { type: 'FINISH' });
      clock.set(T0 + 3 * MIN);
      await runtime.tick();
      expect(await runtime.get(idAt(2))).toMatchObject({ value: 'done', cancel: null });
    });
  }

  it('cancel-previous in one transaction: the request and its event are stored with the new job, for a processing runtime to apply', async () => {
    const path = res.dbPath();
    const clock = new VirtualClock(T0);
    const worker = await open('database', { path, clock });
    await worker.runtime.schedule(spec({ overlap: 'cancel-previous' }));
    clock.set(T0 + MIN);
    await worker.runtime.tick();
    // A runtime that runs effects but does not apply events: what it fires stays pending for another.
    const firer = await res.runtime({ store: await res.sqlite(path, { clock }), machines: MACHINES, clock, processEvents: false, runEffects: true });
    clock.set(T0 + 2 * MIN);
    await firer.tick();
    const store = worker.store;
    expect(await store.getJob(idAt(1))).toMatchObject({ status: 'active', cancelRequestedAt: T0 + 2 * MIN });
    expect((await store.listEvents(idAt(1))).map((e) => [e.type, e.status, e.source])).toEqual([['CANCEL', 'pending', 'cancel']]);
    expect(await store.getJob(idAt(2))).toMatchObject({ status: 'active' });
    await worker.runtime.processPending();
    expect(await worker.runtime.get(idAt(1))).toMatchObject({ value: 'cancelled', cancel: { completed: true } });
  });
});

describe('catch-up: the clock jumped past several occurrences (downtime)', () => {
  /** An hourly schedule; the run of hour 1 finishes; then the clock jumps to `to`. */
  async function afterDowntime(kind: Kind, catchUp: ScheduleSpec['catchUp'], to: number, overlap: ScheduleSpec['overlap'] = 'allow-all') {
    const o = await open(kind);
    o.clock.advance(SEC); // T0 itself is on the hour: start just after it
    await o.runtime.schedule(spec({ everyMs: undefined, startAt: undefined, cron: '0 * * * *', catchUp, overlap }));
    o.clock.set(T0 + HOUR);
    await o.runtime.tick();
    await o.runtime.send(occurrenceJobId('daily', T0 + HOUR), { type: 'FINISH' });
    o.clock.set(to);
    await o.runtime.tick();
    const hours = (await o.store.listOccurrences('daily', 100)).reverse().map((r) => [(r.dueAt - T0) / HOUR, r.outcome]);
    const missed = o.seen.filter((e) => e.type === 'schedule.missed');
    return { ...o, hours, missed, schedule: (await o.runtime.schedules())[0]! };
  }

  for (const kind of ['database', 'memory'] as const) {
    it(`${kind}: skip-missed runs none of them; the next run is the next occurrence`, async () => {
      const { runtime, hours, missed, schedule, clock } = await afterDowntime(kind, 'skip-missed', T0 + 5 * HOUR + 30 * MIN);
      expect(hours).toEqual([[1, 'started']]);
      expect(missed).toEqual([{ type: 'schedule.missed', jobId: null, scheduleId: 'daily', count: 4, from: T0 + 2 * HOUR, to: T0 + 5 * HOUR }]);
      expect(schedule).toMatchObject({ nextDueAt: T0 + 6 * HOUR, missed: 4, lastDueAt: T0 + HOUR });
      expect(await runtime.nextWakeAt()).toBe(T0 + 6 * HOUR);
      clock.set(T0 + 6 * HOUR);
      await runtime.tick();
      expect((await runtime.list({ machineId: 'report' })).map((j) => j.id)).toEqual([occurrenceJobId('daily', T0 + HOUR), occurrenceJobId('daily', T0 + 6 * HOUR)]);
    });

    it(`${kind}: skip-missed still runs the latest occurrence when it is late by no more than graceMs`, async () => {
      const { hours, missed } = await afterDowntime(kind, 'skip-missed', T0 + 5 * HOUR + 30 * SEC);
      expect(hours).toEqual([[1, 'started'], [5, 'started']]);
      expect(missed).toMatchObject([{ count: 3, from: T0 + 2 * HOUR, to: T0 + 4 * HOUR }]);
    });

    it(`${kind}: run-once starts one run, for the latest missed occurrence`, async () => {
      const { runtime, hours, missed, schedule } = await afterDowntime(kind, 'run-once', T0 + 5 * HOUR + 30 * MIN);
      expect(hours).toEqual([[1, 'started'], [5, 'started']]);
      expect(missed).toMatchObject([{ count: 3, from: T0 + 2 * HOUR, to: T0 + 4 * HOUR }]);
      expect(schedule).toMatchObject({ nextDueAt: T0 + 6 * HOUR, missed: 3, lastJobId: occurrenceJobId('daily', T0 + 5 * HOUR) });
      expect(await runtime.list({ machineId: 'report', status: 'active' })).toHaveLength(1);
    });

    it(`${kind}: runEach runs each of the latest n, oldest first; older ones are missed`, async () => {
      const { runtime, hours, missed, seen } = await afterDowntime(kind, { runEach: 3 }, T0 + 5 * HOUR + 30 * MIN);
      expect(hours).toEqual([[1, 'started'], [3, 'started'], [4, 'started'], [5, 'started']]);
      expect(missed).toMatchObject([{ count: 1, from: T0 + 2 * HOUR, to: T0 + 2 * HOUR }]);
      const started = seen.filter((e) => e.type === 'job.started').map((e) => (e.type === 'job.started' ? e.job.id : ''));
      expect(started).toEqual([1, 3, 4, 5].map((h) => occurrenceJobId('daily', T0 + h * HOUR)));
      expect(await runtime.list({ machineId: 'report', status: 'active' })).toHaveLength(3);
    });

    it(`${kind}: runEach with more missed than the bound, and the overlap policy applied to each run in turn`, async () => {
      const { hours, missed } = await afterDowntime(kind, { runEach: 3 }, T0 + 30 * HOUR + 30 * MIN, 'skip');
      // Hours 2-27 are missed; 28 starts; 29 and 30 meet the run of 28, which has not finished: skipped.
      expect(hours).toEqual([[1, 'started'], [28, 'started'], [29, 'skipped'], [30, 'skipped']]);
      expect(missed).toMatchObject([{ count: 26, from: T0 + 2 * HOUR, to: T0 + 27 * HOUR }]);
    });
  }

  it('a very long downtime of a per-second schedule is passed over in bounded steps', async () => {
    const { runtime, store, clock, seen } = await open('database');
    await runtime.schedule(spec({ everyMs: SEC, startAt: T0 + SEC, catchUp: { runEach: 2 } }));
    clock.set(T0 + 3 * HOUR);
    await runtime.tick();
    const count = (e: RuntimeEvent) => (e.type === 'schedule.missed' ? e.count : 0);
    expect(seen.reduce((n, e) => n + count(e), 0)).toBe(3 * 3600 - 2);
    expect((await store.listOccurrences('daily', 10)).map((o) => (o.dueAt - T0) / SEC).reverse()).toEqual([3 * 3600 - 1, 3 * 3600]);
    expect((await runtime.schedules())[0]).toMatchObject({ nextDueAt: T0 + 3 * HOUR + SEC, missed: 3 * 3600 - 2 });
  });
});

describe('many runtimes on one database, ticking at the same moments', () => {
  async function race(kind: Kind, overlap: ScheduleSpec['overlap']) {
    const clock = new VirtualClock(T0);
    const path = kind === 'database' ? res.dbPath() : undefined;
    const shared = kind === 'memory' ? new MemoryStore() : undefined;
    const opened: Opened[] = [];
    const refused = { count: 0 };
    for (let i = 0; i < 3; i += 1) {
      const store = shared ? handle(shared, refused) : handle(await res.sqlite(path!, { clock }), refused, false);
      opened.push(await open(kind, { clock, store }));
    }
    await opened[0]!.runtime.schedule(spec({ overlap, catchUp: { runEach: 2 } }));
    for (const o of opened.slice(1)) expect((await o.runtime.schedule(spec({ overlap, catchUp: { runEach: 2 } }))).status).toBe('unchanged'); // every process at boot
    for (let m = 1; m <= 30; m += 1) {
      clock.set(Math.max(clock.now(), T0 + m * MIN));
      if (m % 7 === 0) clock.advance(150 * SEC); // now and then the clock jumps past two
      await Promise.all(opened.map((o) => o.runtime.tick()));
      if (m % 4 === 0) {
        for (const j of await opened[0]!.runtime.list({ machineId: 'report', status: 'active' })) await opened[m % 3]!.runtime.send(j.id, { type: 'FINISH' });
      }
    }
    return { opened, store: opened[0]!.store, refused: refused.count };
  }

  for (const kind of ['database', 'memory'] as const) {
    for (const overlap of ['allow-all', 'buffer-one', 'cancel-previous'] as const) {
      it(`${kind}, ${overlap}: three runtimes, no occurrence fired twice, every job from exactly one occurrence`, async () => {
        const { opened, store, refused } = await race(kind, overlap);
        expect(refused).toBeGreaterThan(0); // the runtimes really raced for the same occurrences
        const rows = await store.listOccurrences('daily', 1000);
        const dues = rows.map((r) => r.dueAt);
        expect(new Set(dues).size).toBe(dues.length);
        const fired = opened.flatMap((o) => o.seen.filter((e) => e.type === 'schedule.fired' && e.outcome !== 'buffered'));
        expect(fired).toHaveLength(rows.length); // each occurrence reported by exactly one runtime
        const jobs = await opened[0]!.runtime.list({ machineId: 'report' });
        const started = rows.filter((r) => r.outcome === 'started');
        expect(jobs.map((j) => j.id).sort()).toEqual(started.map((r) => r.jobId).sort());
        for (const r of started) expect(r.jobId).toBe(occurrenceJobId('daily', r.dueAt));
        const startedEvents = opened.flatMap((o) => o.seen.filter((e) => e.type === 'job.started'));
        expect(startedEvents).toHaveLength(jobs.length);
        const schedule = (await opened[0]!.runtime.schedules())[0]!;
        // Occurrences 1..30 fell due; each clock jump of 150 s left one of three for runEach: 2 to drop.
        if (overlap === 'allow-all') expect({ started: started.length, missed: schedule.missed }).toEqual({ started: 26, missed: 4 });
        else expect(rows.length + schedule.missed + (schedule.bufferedDueAt === null ? 0 : 1)).toBe(30);
      });
    }
  }
});

describe('a damaged schedule row (a database store: SQLite or Postgres)', () => {
  it.each([
    ['input', "'{bad'", /its input is not JSON/],
    ['catch_up', "'garbage'", /its catch-up policy is unreadable/],
    ['every_ms', "NULL, cron = '61 * * * *', timezone = 'UTC'", /its time rule cannot be read/],
    ['every_ms', "NULL, cron = '0 3 * * *', timezone = 'Mars/Olympus'", /its time rule cannot be read/],
  ])('with an unreadable %s column is listed with the reason and never fired; the others fire; adding it again rewrites it', async (column, value, reason) => {
    const { runtime, store, clock, seen } = await open('database');
    await runtime.schedule(spec({ id: 'bad' }));
    await runtime.schedule(spec({ id: 'good' }));
    expect(await rawRun(store as SqliteStore, `UPDATE schedules SET ${column} = ${value} WHERE id = 'bad'`)).toBe(1);

    const listed = await runtime.schedules();
    expect(listed.find((s) => s.id === 'good')?.damaged).toBeUndefined();
    expect(listed.find((s) => s.id === 'bad')?.damaged).toMatch(reason);
    // The worker's wake-up ignores it: it would otherwise wake at once, forever.
    expect(await runtime.nextWakeAt()).toBe(T0 + MIN);

    clock.advance(2 * MIN);
    await runtime.tick();
    expect((await occurrences(store, 'good')).length).toBeGreaterThan(0);
    expect(await occurrences(store, 'bad')).toEqual([]);
    // Reported once (a worker prints it), not on every round.
    await runtime.tick();
    expect(seen.filter((e) => e.type === 'schedule.damaged')).toEqual([{ type: 'schedule.damaged', jobId: null, scheduleId: 'bad', reason: expect.stringMatching(reason) }]);

    const again = await runtime.schedule(spec({ id: 'bad' }));
    expect(again).toMatchObject({ status: 'updated' });
    expect(again.schedule.damaged).toBeUndefined();
    expect((await runtime.schedules()).every((s) => s.damaged === undefined)).toBe(true);
  });
});
