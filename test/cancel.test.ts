/**
 * Cancellation: a visible, idempotent request delivered to the machine through the inbox; running
 * activities are aborted; a retry in backoff never starts after it; an outcome accepted after the
 * CANCEL is stale; a finished job cannot be cancelled. Real SQLite files, a VirtualClock.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { retryingJob } from '../machines/index.ts';
import { JobTerminalError, ValidationError } from '../src/index.ts';
import { dumpRows } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';
import { T0, gate, releaseGates, nextEvent, openRuntime, untilAborted, type Opened } from './helpers/durable.ts';
import { work, workHooks } from './fixtures/workMachine.ts';
import { timing } from './fixtures/timingMachine.ts';

const res = new Resources();
const defaults = { ...workHooks };
beforeEach(() => Object.assign(workHooks, defaults));
afterEach(async () => {
  releaseGates();
  await res.dispose();
});

const MACHINES = [work, retryingJob, timing];
const open = (options: Parameters<typeof openRuntime>[2] = {}): Promise<Opened> => openRuntime(res, MACHINES, options);

describe('cancel', () => {
  it('records a visible request, aborts the running activity, and is completed only when the machine reaches cancelled', async () => {
    const { runtime, clock, seen } = await open();
    const started = gate();
    let abortReason: unknown;
    workHooks.work = async (args) => {
      started.resolve();
      return untilAborted(args.signal).catch((e: unknown) => {
        abortReason = e;
        throw e;
      });
    };
    const cleanup = gate<unknown>();
    workHooks.cleanup = async () => cleanup.promise;

    const job = await runtime.start('work', {});
    await runtime.send(job.id, { type: 'GO' });
    await started.promise;
    clock.advance(1000);
    const requested = await runtime.cancel(job.id, 'customer asked');
    expect(requested).toMatchObject({
      value: 'cancelling',
      final: false,
      cancel: { requestedAt: T0 + 1000, reason: 'customer asked', completed: false },
    });
    expect((abortReason as Error).message).toBe('job cancelled: customer asked');
    expect((await runtime.list({ cancelRequested: true })).map((j) => j.id)).toEqual([job.id]);
    expect(seen.filter((e) => e.type === 'cancel.requested')).toEqual([{ type: 'cancel.requested', jobId: job.id, reason: 'customer asked' }]);

    const cancelled = runtime.waitFor(job.id, (j) => j.final);
    cleanup.resolve('cleaned');
    const end = await cancelled;
    expect(end).toMatchObject({ value: 'cancelled', final: true, cancel: { requestedAt: T0 + 1000, reason: 'customer asked', completed: true } });
    await runtime.idle();
    const details = await runtime.details(job.id);
    expect(details.events.filter((e) => e.source === 'cancel')).toMatchObject([{ eventId: 'spool.cancel', type: 'CANCEL', status: 'applied', payload: { type: 'CANCEL', reason: 'customer asked' } }]);
    expect(details.effects.find((e) => e.actorId === 'work')).toMatchObject({ status: 'cancelled', active: false });
  });

  it('is idempotent: repeating it keeps the first request and puts one CANCEL in the inbox', async () => {
    const { runtime, clock, seen } = await open();
    const cleanup = gate<unknown>();
    workHooks.cleanup = async () => cleanup.promise; // the job stays in cancelling meanwhile
    const job = await runtime.start('work', {});
    await runtime.cancel(job.id, 'first');
    clock.advance(5000);
    const again = await runtime.cancel(job.id, 'second');
    expect(again).toMatchObject({ value: 'cancelling', cancel: { requestedAt: T0, reason: 'first', completed: false } });
    const details = await runtime.details(job.id);
    expect(details.events.filter((e) => e.type === 'CANCEL').map((e) => [e.eventId, e.status])).toEqual([['spool.cancel', 'applied']]);
    expect(details.history.filter((h) => h.eventType === 'CANCEL')).toHaveLength(1);
    expect(seen.filter((e) => e.type === 'cancel.requested')).toHaveLength(1);
    cleanup.resolve('cleaned');
    expect(await runtime.waitFor(job.id, (j) => j.final)).toMatchObject({ value: 'cancelled', cancel: { reason: 'first', completed: true } });
    await expect(runtime.cancel(job.id, 'third')).rejects.toBeInstanceOf(JobTerminalError);
  });

  it('through a client-only runtime: the request is visible at once and one pending CANCEL waits for a processor', async () => {
    const processor = await open();
    const client = await open({ path: processor.path, clock: processor.clock, processEvents: false });
    const job = await processor.runtime.start('work', {});
    const first = await client.runtime.cancel(job.id, 'stop');
    await client.runtime.cancel(job.id, 'stop again');
    expect(first).toMatchObject({ value: 'idle', cancel: { requestedAt: T0, reason: 'stop', completed: false } });
    expect((await client.runtime.events(job.id)).map((e) => [e.type, e.status])).toEqual([['CANCEL', 'pending']]);
    expect(await processor.runtime.processPending()).toBe(1);
    await processor.runtime.idle();
    expect(await processor.runtime.get(job.id)).toMatchObject({ value: 'cancelled', cancel: { reason: 'stop', completed: true } });
  });

  it('during a retry backoff: no further attempt starts after it', async () => {
    const { runtime, clock, store } = await open();
    const job = await runtime.start('retrying-job', { name: 'r', flakyAttempts: 2, autoStart: true });
    await runtime.idle();
    const [effect] = await store.listEffects(job.id);
    expect(effect).toMatchObject({ status: 'backoff', attempt: 1 });
    const retryAt = effect!.nextRunAt!;
    clock.set(retryAt - 1);
    const end = await runtime.cancel(job.id, 'no more');
    expect(end).toMatchObject({ value: 'cancelled', final: true, cancel: { completed: true } });
    clock.set(retryAt + 3_600_000);
    expect(await runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });
    await runtime.idle();
    expect(await runtime.nextWakeAt()).toBeNull();
    expect((await runtime.details(job.id)).attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'failed']]);
    expect(await store.getEffect(effect!.id)).toMatchObject({ status: 'cancelled', active: false, attempt: 1 });
  });

  it('an outcome accepted after the CANCEL is stale: cancelled wins', async () => {
    const processor = await open();
    const client = await open({ path: processor.path, clock: processor.clock, processEvents: false });
    const started = gate();
    const finish = gate<unknown>();
    workHooks.work = async () => {
      started.resolve();
      return finish.promise; // ignores the signal: another process's cancel cannot reach it anyway
    };
    const job = await processor.runtime.start('work', {});
    await processor.runtime.send(job.id, { type: 'GO' });
    await started.promise;
    await client.runtime.cancel(job.id, 'too slow'); // accepted first
    const finished = nextEvent(processor.runtime, 'activity.finished');
    finish.resolve({ result: 'late' }); // the success is accepted second
    expect(await finished).toMatchObject({ outcome: 'succeeded' });
    await processor.runtime.idle();
    const details = await processor.runtime.details(job.id);
    expect(details.job).toMatchObject({ value: 'cancelled', context: { output: null }, cancel: { completed: true } });
    expect(details.events.map((e) => [e.type, e.status])).toEqual([
      ['GO', 'applied'],
      ['CANCEL', 'applied'],
      ['xstate.done.actor.work', 'stale'],
      ['xstate.done.actor.cleanup', 'applied'],
    ]);
    expect(details.history.find((h) => h.eventType === 'xstate.done.actor.work')).toMatchObject({ outcome: 'stale', from: 'cancelling', to: 'cancelling' });
  });

  it('of a finished job is a JobTerminalError and changes nothing', async () => {
    const { runtime, store } = await open();
    const job = await runtime.start('work', {});
    await runtime.send(job.id, { type: 'GO' });
    await runtime.idle();
    await runtime.send(job.id, { type: 'ACCEPT' });
    expect((await runtime.get(job.id)).final).toBe(true);
    const before = await dumpRows(store);
    await expect(runtime.cancel(job.id, 'too late')).rejects.toBeInstanceOf(JobTerminalError);
    expect(await dumpRows(store)).toEqual(before);
    expect((await runtime.get(job.id)).cancel).toBeNull();
  });

  it('of a job whose machine has no CANCEL event is a ValidationError that says what to add', async () => {
    const { runtime, store } = await open();
    const job = await runtime.start('timing', {});
    const before = await dumpRows(store);
    await expect(runtime.cancel(job.id)).rejects.toThrow(ValidationError);
    await expect(runtime.cancel(job.id)).rejects.toThrow(/no "CANCEL" event.*cancel: \{ event \}/);
    expect(await dumpRows(store)).toEqual(before);
  });

  // Regression: attempts that started after a cancel request used to get an already-aborted
  // signal, including the clean-up activity the machine invokes because of the cancel.
  it('does not abort the clean-up activity that the cancel transition itself invokes', async () => {
    const { runtime } = await open();
    let abortedAtStart: boolean | undefined;
    workHooks.cleanup = async (args) => {
      abortedAtStart = args.signal.aborted;
      if (args.signal.aborted) throw new Error('clean-up aborted before it began');
      return 'cleaned';
    };
    const job = await runtime.start('work', {});
    await runtime.cancel(job.id, 'stop');
    await runtime.idle();
    expect(abortedAtStart).toBe(false);
    const details = await runtime.details(job.id);
    expect(details.attempts.map((a) => [a.effectId.split('~')[1], a.outcome])).toEqual([['cleanup', 'succeeded']]);
    expect(details.job.value).toBe('cancelled');
  });
});
