/**
 * Durable timers: `after`, delayed `raise` and delayed `sendTo` self are stored with absolute
 * deadlines in the commit that scheduled them, fire once at their original deadline across
 * restarts (or at once if it passed while down), never fire once their state was left, and drive
 * the approval-flow reference machine. Real SQLite files and a VirtualClock: no sleeping.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { raise, setup } from 'xstate';
import { approvalFlow } from '../machines/index.ts';
import type { Runtime, TimerRecord } from '../src/internal.ts';
import { rawGet } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';
import { T0, openRuntime, runToEnd, type Opened } from './helpers/durable.ts';
import { AFTER_EVENT, EXPIRE_MS, PING_MS, REMIND_MS, timing } from './fixtures/timingMachine.ts';

const res = new Resources();
afterEach(() => res.dispose());

const MACHINES = [timing, approvalFlow];

const open = (options: Parameters<typeof openRuntime>[2] = {}) => openRuntime(res, MACHINES, options);

/** Close and reopen on the same file with the same clock: a restart. */
async function restart(o: Opened): Promise<Opened> {
  await o.runtime.close();
  return open({ path: o.path, clock: o.clock });
}

const timerView = (timers: TimerRecord[]) =>
  timers.map((t) => ({ key: t.key, kind: t.kind, dueAt: t.dueAt - T0, status: t.status, rev: t.createdRevision })).sort((a, b) => a.dueAt - b.dueAt || a.key.localeCompare(b.key));

/** Applied (or stale) history records whose event came from timers, in order. */
async function timerHistory(runtime: Runtime, jobId: string): Promise<string[]> {
  const d = await runtime.details(jobId);
  const fromTimers = new Set(d.events.filter((e) => e.source === 'timer').map((e) => e.eventId));
  return d.history.filter((h) => h.eventId !== null && fromTimers.has(h.eventId)).map((h) => `${h.eventType}:${h.outcome}`);
}

describe('timers are stored with absolute deadlines in the same commit', () => {
  it('after, delayed raise and delayed sendTo self: one row each, due at now + delay, created by the scheduling revision', async () => {
    const { runtime, store, clock } = await open();
    let timersAtCommit: Promise<unknown> | undefined;
    runtime.subscribe((e) => {
      // The commit is already durable when its event is emitted: the read is issued here (on SQLite it runs here).
      if (e.type === 'job.committed' && e.job.revision === 3) timersAtCommit = rawGet(store, 'SELECT count(*) AS n FROM timers WHERE created_revision = 3');
    });
    const job = await runtime.start('timing', {});
    expect(timerView((await runtime.details(job.id)).timers)).toEqual([
      { key: 'remind', kind: 'raise', dueAt: REMIND_MS, status: 'scheduled', rev: 1 },
      { key: 'ping', kind: 'sendTo', dueAt: PING_MS, status: 'scheduled', rev: 1 },
      { key: AFTER_EVENT, kind: 'after', dueAt: EXPIRE_MS, status: 'scheduled', rev: 1 },
    ]);

    clock.advance(300);
    expect((await runtime.send(job.id, { type: 'LEAVE' })).revision).toBe(2);
    const r = await runtime.send(job.id, { type: 'BACK' });
    expect(r).toMatchObject({ status: 'applied', revision: 3 });
    expect(await timersAtCommit).toEqual({ n: 3 });
    const timers = (await runtime.details(job.id)).timers;
    expect(timerView(timers)).toEqual([
      { key: 'remind', kind: 'raise', dueAt: REMIND_MS, status: 'cancelled', rev: 1 },
      { key: 'remind', kind: 'raise', dueAt: 300 + REMIND_MS, status: 'scheduled', rev: 3 },
      { key: 'ping', kind: 'sendTo', dueAt: PING_MS, status: 'cancelled', rev: 1 },
      { key: 'ping', kind: 'sendTo', dueAt: 300 + PING_MS, status: 'scheduled', rev: 3 },
      { key: AFTER_EVENT, kind: 'after', dueAt: EXPIRE_MS, status: 'cancelled', rev: 1 },
      { key: AFTER_EVENT, kind: 'after', dueAt: 300 + EXPIRE_MS, status: 'scheduled', rev: 3 },
    ]);
    expect(timers.every((t) => t.createdAt === (t.createdRevision === 1 ? T0 : T0 + 300))).toBe(true);
    expect(await runtime.nextWakeAt()).toBe(T0 + 300 + REMIND_MS);
  });

  // XState's transition() returns the SAME snapshot object when a transition changes neither value
  // nor context, even when it has actions: such an event must still count as applied, with its
  // timer cancels and schedules committed (the next two tests).
  it('a delayed raise on a transition without a target is stored and fires', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('timing', {});
    await runtime.send(job.id, { type: 'LEAVE' });
    clock.advance(100);
    const r = await runtime.send(job.id, { type: 'SNOOZE' });
    expect(r.status).toBe('applied');
    expect(timerView((await runtime.details(job.id)).timers).filter((t) => t.key === 'snooze')).toEqual([
      { key: 'snooze', kind: 'raise', dueAt: 100 + REMIND_MS, status: 'scheduled', rev: 3 },
    ]);
    clock.advance(REMIND_MS);
    expect((await runtime.tick()).timersFired).toBe(1);
    expect((await runtime.get(job.id)).context).toMatchObject({ reminders: 1 });
  });

  it('a re-entered state’s old `after` timer does not fire into the new visit', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('timing', {});
    clock.advance(3000);
    expect((await runtime.send(job.id, { type: 'RESET' })).status).toBe('applied'); // re-entry: exit + entry actions
    clock.set(T0 + EXPIRE_MS); // the first visit's deadline
    await runtime.tick();
    expect((await runtime.get(job.id)).value).toBe('waiting');
    clock.set(T0 + 3000 + EXPIRE_MS);
    await runtime.tick();
    const end = await runtime.get(job.id);
    expect(end.value).toBe('expired');
    expect((await runtime.history(job.id)).filter((h) => h.eventType === AFTER_EVENT).map((h) => [h.at - T0, h.outcome])).toEqual([[3000 + EXPIRE_MS, 'applied']]);
  });
});

describe('timers across restarts', () => {
  it('fire once each at their original deadline after restarts: not earlier, not twice', async () => {
    let o = await open();
    const job = await o.runtime.start('timing', {});
    o.clock.advance(500);
    o = await restart(o);

    const fireAt = async (offset: number) => {
      o.clock.set(T0 + offset);
      return (await o.runtime.tick()).timersFired;
    };
    expect(await fireAt(REMIND_MS - 1)).toBe(0);
    expect(await fireAt(REMIND_MS)).toBe(1);
    expect(await fireAt(REMIND_MS)).toBe(0); // the same instant again: nothing more
    expect((await o.runtime.get(job.id)).context).toEqual({ reminders: 1, pings: 0 });

    o = await restart(o);
    expect(await fireAt(PING_MS - 1)).toBe(0);
    expect(await fireAt(PING_MS)).toBe(1);
    o = await restart(o);
    expect(await o.runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 }); // the restart itself fires nothing
    expect(await fireAt(EXPIRE_MS - 1)).toBe(0);
    expect((await o.runtime.get(job.id)).value).toBe('waiting');
    expect(await fireAt(EXPIRE_MS)).toBe(1);
    o = await restart(o);
    expect(await fireAt(EXPIRE_MS * 10)).toBe(0);

    const end = await o.runtime.get(job.id);
    expect(end).toMatchObject({ value: 'expired', context: { reminders: 1, pings: 1 } });
    expect(await timerHistory(o.runtime, job.id)).toEqual(['REMIND:applied', 'PING:applied', `${AFTER_EVENT}:applied`]);
    const history = await o.runtime.history(job.id);
    expect(history.filter((h) => h.eventType !== 'xstate.init').map((h) => [h.eventType, h.at - T0])).toEqual([
      ['REMIND', REMIND_MS],
      ['PING', PING_MS],
      [AFTER_EVENT, EXPIRE_MS],
    ]);
    expect(timerView((await o.runtime.details(job.id)).timers).map((t) => t.status)).toEqual(['delivered', 'delivered', 'delivered']);
  });

  it('fire at once, in deadline order, when their deadlines passed while the runtime was down', async () => {
    let o = await open();
    const job = await o.runtime.start('timing', {});
    await o.runtime.close();
    o.clock.advance(EXPIRE_MS * 3);
    o = await open({ path: o.path, clock: o.clock });
    expect((await o.runtime.get(job.id)).revision).toBe(1); // opening fires nothing by itself
    expect((await o.runtime.tick()).timersFired).toBe(3);
    expect(await o.runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });
    const end = await o.runtime.get(job.id);
    expect(end).toMatchObject({ value: 'expired', context: { reminders: 1, pings: 1 } });
    expect(await timerHistory(o.runtime, job.id)).toEqual(['REMIND:applied', 'PING:applied', `${AFTER_EVENT}:applied`]);
  });

  it('two runtimes ticking at the same deadline fire each timer once', async () => {
    const a = await open();
    const b = await open({ path: a.path, clock: a.clock });
    const job = await a.runtime.start('timing', {});
    a.clock.set(T0 + EXPIRE_MS);
    const [ra, rb] = await Promise.all([a.runtime.tick(), b.runtime.tick()]);
    expect(ra.timersFired + rb.timersFired).toBe(3);
    await Promise.all([a.runtime.idle(), b.runtime.idle()]);
    expect(await a.runtime.get(job.id)).toMatchObject({ value: 'expired', context: { reminders: 1, pings: 1 } });
    expect(await timerHistory(a.runtime, job.id)).toEqual(['REMIND:applied', 'PING:applied', `${AFTER_EVENT}:applied`]);
  });
});

describe('timers cancelled by leaving their state', () => {
  it('never fire after the state is left', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('timing', {});
    clock.advance(REMIND_MS - 1);
    await runtime.send(job.id, { type: 'LEAVE' });
    expect(timerView((await runtime.details(job.id)).timers).map((t) => t.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(await runtime.nextWakeAt()).toBeNull();
    clock.advance(EXPIRE_MS * 100);
    expect((await runtime.tick()).timersFired).toBe(0);
    expect(await runtime.get(job.id)).toMatchObject({ value: 'away', context: { reminders: 0, pings: 0 } });
    expect(await timerHistory(runtime, job.id)).toEqual([]);
  });

  it('a timer that fired but was not yet applied when an earlier event left its state is recorded as stale', async () => {
    const processor = await open();
    const client = await open({ path: processor.path, clock: processor.clock, processEvents: false });
    const job = await processor.runtime.start('timing', {});
    // LEAVE is accepted (not applied) before any deadline passes...
    expect((await client.runtime.send(job.id, { type: 'LEAVE' })).status).toBe('pending');
    // ...then all three deadlines pass and fire behind it in the inbox.
    processor.clock.set(T0 + EXPIRE_MS);
    expect((await processor.runtime.tick()).timersFired).toBe(3);
    const end = await processor.runtime.details(job.id);
    expect(end.job).toMatchObject({ value: 'away', context: { reminders: 0, pings: 0 } });
    expect(end.history.slice(1).map((h) => `${h.eventType}:${h.outcome}`)).toEqual(['LEAVE:applied', 'REMIND:stale', 'PING:stale', `${AFTER_EVENT}:stale`]);
    expect(timerView(end.timers).map((t) => t.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
  });
});

describe('timers of a job that ends', () => {
  it('a delayed raise still to come is cancelled in the commit that ends the job: it never fires, and nothing wakes for it', async () => {
    const lingering = setup({}).createMachine({
      id: 'lingering',
      initial: 'waiting',
      states: { waiting: { entry: raise({ type: 'LATE' }, { delay: 5000, id: 'late' }), on: { END: 'done', LATE: 'late' } }, late: {}, done: { type: 'final' } },
    });
    const { runtime, clock } = await openRuntime(res, [{ machine: lingering, version: 1 }]);
    const job = await runtime.start('lingering', {});
    expect(await runtime.nextWakeAt()).toBe(T0 + 5000);
    await runtime.send(job.id, { type: 'END' });
    expect((await runtime.details(job.id)).timers.map((t) => [t.key, t.status])).toEqual([['late', 'cancelled']]);
    expect(await runtime.nextWakeAt()).toBeNull();
    clock.advance(10_000);
    expect((await runtime.tick()).timersFired).toBe(0);
    expect((await runtime.details(job.id)).events.map((e) => e.status)).toEqual(['applied']);
  });
});

describe('approval-flow (reference machine) under the VirtualClock', () => {
  const input = { subject: 'invoice 7', remindAfterMs: 60_000, deadlineMs: 180_000 };

  it('reminds once, then expires at the deadline', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('approval-flow', input);
    const end = await runToEnd(runtime, clock, job.id);
    expect(end).toMatchObject({ value: 'expired', context: { reminders: 1, note: 'no decision before the deadline' } });
    expect(clock.now()).toBe(T0 + 180_000);
    const history = await runtime.history(job.id);
    expect(history.slice(1).map((h) => [h.eventType, h.at - T0])).toEqual([
      ['REMIND', 60_000],
      ['xstate.after.deadline.approval-flow.pending', 180_000],
    ]);
  });

  it('approved before the reminder: the reminder and deadline timers are cancelled and never fire', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('approval-flow', input);
    clock.advance(30_000);
    const r = await runtime.send(job.id, { type: 'APPROVE', by: 'ann' });
    expect(r.job).toMatchObject({ value: 'approved', final: true, context: { decidedBy: 'ann', reminders: 0 } });
    const { timers } = await runtime.details(job.id);
    expect(timers.map((t) => [t.key, t.status])).toEqual([
      ['reminder', 'cancelled'],
      ['xstate.after.deadline.approval-flow.pending', 'cancelled'],
    ]);
    clock.advance(365 * 86_400_000);
    expect((await runtime.tick()).timersFired).toBe(0);
    expect((await runtime.get(job.id)).context).toMatchObject({ reminders: 0 });
    expect((await runtime.history(job.id)).map((h) => h.eventType)).toEqual(['xstate.init', 'APPROVE']);
  });
});
