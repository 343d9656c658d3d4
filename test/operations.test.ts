/**
 * Operations on dead, stuck and unwanted work, through the runtime API: `list({ stuck })` and
 * `details().waitingFor`, `retry` / `retryAsNew`, `suspend` / `resume`, `purgeFinished`, `stats`
 * (recomputed here from the raw rows), tenant scoping, and structured logs without sensitive
 * values. Real SQLite files, a VirtualClock, no sleeping.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../machines/index.ts';
import {
  JobNotFoundError,
  JobTerminalError,
  RetryRefusedError,
  ValidationError,
  type ActivityArgs,
  type Job,
  type LogEntry,
  type Runtime,
  type RuntimeStats,
} from '../src/index.ts';
import { MemoryStore } from '../persistence/memory/index.ts';
import type { JobStore } from '../src/ports/store.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { rawAll, rawGet, rawRun } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';
import { gate, nextEvent, openRuntime, releaseGates, T0, type Opened } from './helpers/durable.ts';
import { deadEndMachine, fragile, FRAGILE_POLICY, mended, opsHooks, resetOpsHooks, unsafeCharge, type ChargeInput } from './fixtures/opsMachines.ts';

const res = new Resources();
beforeEach(() => resetOpsHooks());
afterEach(async () => {
  releaseGates();
  await res.dispose();
});

const DAY = 86_400_000;
const CARD = '4111111111111111';
const REFERENCE = [jobLifecycle, retryingJob, exportJob, approvalFlow];
const OPS = [fragile, unsafeCharge, mended, deadEndMachine, ...REFERENCE];

const open = (options: Parameters<typeof openRuntime>[2] = {}) => openRuntime(res, OPS, options);

/** Tick at the current time and let every activity and drain settle. */
async function settle(runtime: Runtime): Promise<void> {
  await runtime.tick();
  await runtime.idle();
}

/** Move the clock to the next wake-up (if any) and settle; false when nothing is scheduled. */
async function step(o: Pick<Opened, 'runtime' | 'clock'>): Promise<boolean> {
  const next = await o.runtime.nextWakeAt();
  if (next === null) return false;
  if (next > o.clock.now()) o.clock.set(next);
  await settle(o.runtime);
  return true;
}

const failing = (message: (input: ChargeInput) => string) => async ({ input }: ActivityArgs<ChargeInput>) => {
  throw new Error(message(input));
};

/** Start a fragile job whose charge fails every attempt and run it until its retries are used up. */
async function exhaustFragile(o: Pick<Opened, 'runtime' | 'clock'>, jobId: string, message: (input: ChargeInput) => string = () => 'card declined'): Promise<Job> {
  opsHooks.charge = failing(message);
  await o.runtime.start('fragile', { card: CARD, amount: 12 }, { jobId });
  await settle(o.runtime);
  while ((await o.runtime.details(jobId)).effects.some((e) => e.status === 'backoff')) await step(o);
  return o.runtime.get(jobId);
}

const refusal = async (p: Promise<unknown>): Promise<RetryRefusedError> => {
  const error = await p.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RetryRefusedError);
  return error as RetryRefusedError;
};

describe('list({ stuck: true }) and details().waitingFor', () => {
  it('details describes one revision: a commit landing between its reads is read again, not mixed in', async () => {
    const { runtime, store } = await openRuntime(res, REFERENCE);
    await runtime.start('job-lifecycle', { name: 'moving', items: 1 }, { jobId: 'lc-moving' });
    const history = store.history.bind(store);
    let raced = 0;
    store.history = async (jobId, ...rest) => {
      // The first read of the history finds the job one commit further than the row read before it.
      if (raced++ === 0) await runtime.send(jobId, { type: 'START' });
      return history(jobId, ...rest);
    };
    const d = await runtime.details('lc-moving');
    expect(raced).toBe(2);
    expect(d.job).toMatchObject({ revision: 2, value: 'processing' });
    expect(d.history.map((h) => h.revision)).toEqual([1, 2]);
    expect(d.stuck).toBe(false);
  });

  it('never lists a job of the reference machines in a mixed workload, through retries, timers, a restart and their ends', async () => {
    let o = await openRuntime(res, REFERENCE);
    const checks: string[] = [];
    const noneStuck = async (label: string) => {
      checks.push(label);
      expect((await o.runtime.list({ stuck: true })).map((j) => j.id), label).toEqual([]);
      const stats = await o.runtime.stats();
      expect(stats.stuck, label).toBe(0);
      for (const job of await o.runtime.list()) {
        const d = await o.runtime.details(job.id);
        expect(d.stuck, `${label}: ${job.id}`).toBe(false);
        if (job.final) expect(d.waitingFor).toEqual([]);
      }
    };
    const { runtime } = o;
    await runtime.start('job-lifecycle', { name: 'queued', items: 3 }, { jobId: 'lc-queued' });
    await runtime.start('job-lifecycle', { name: 'busy', items: 3 }, { jobId: 'lc-busy' });
    await runtime.send('lc-busy', { type: 'START' });
    await runtime.send('lc-busy', { type: 'ITEM_DONE' });
    await runtime.start('job-lifecycle', { name: 'done', items: 0 }, { jobId: 'lc-done' });
    await runtime.send('lc-done', { type: 'START' });
    await runtime.send('lc-done', { type: 'FINISH' });
    await runtime.start('job-lifecycle', { name: 'cancel' }, { jobId: 'lc-cancel' });
    await runtime.cancel('lc-cancel', 'not needed');
    await runtime.start('retrying-job', { name: 'ok', autoStart: true, flakyAttempts: 1 }, { jobId: 'rj-ok' });
    await runtime.start('retrying-job', { name: 'exhausted', autoStart: true, flakyAttempts: 5 }, { jobId: 'rj-exhausted' });
    await runtime.start('retrying-job', { name: 'later', items: 4, failItems: 1 }, { jobId: 'rj-later' });
    await runtime.start('retrying-job', { name: 'cancel', autoStart: true, flakyAttempts: 2 }, { jobId: 'rj-cancel' });
    await runtime.start('export-job', { dataset: 'a' }, { jobId: 'ex-ok' });
    await runtime.start('export-job', { dataset: 'b', flakyAttempts: 2 }, { jobId: 'ex-flaky' });
    await runtime.start('export-job', { dataset: 'c', flakyAttempts: 4 }, { jobId: 'ex-fail' });
    await runtime.start('approval-flow', { subject: 'yes', remindAfterMs: 1000, deadlineMs: 60_000 }, { jobId: 'ap-yes' });
    await runtime.start('approval-flow', { subject: 'late', remindAfterMs: 2000, deadlineMs: 5000 }, { jobId: 'ap-late' });
    await runtime.start('approval-flow', { subject: 'slow', remindAfterMs: 3000, deadlineMs: 9000 }, { jobId: 'ap-slow' });
    await noneStuck('after start');
    await settle(runtime);
    await noneStuck('after the first tick');
    await runtime.cancel('rj-cancel', 'changed mind'); // during its retry backoff
    await noneStuck('after a cancel in backoff');

    for (let round = 0; round < 3 && (await step(o)); round += 1) await noneStuck(`round ${round}`);
    // A restart in the middle: a new runtime on the same file, same clock.
    await o.runtime.close();
    o = await openRuntime(res, REFERENCE, { path: o.path, clock: o.clock });
    await noneStuck('after a restart');
    await o.runtime.send('rj-later', { type: 'START' });
    await o.runtime.send('ap-yes', { type: 'APPROVE', by: 'ops' });
    await noneStuck('after more events');
    for (let round = 0; round < 50 && (await step(o)); round += 1) await noneStuck(`late round ${round}`);
    expect(await o.runtime.nextWakeAt()).toBeNull();

    const jobs = Object.fromEntries((await o.runtime.list()).map((j) => [j.id, j]));
    expect(Object.fromEntries(Object.values(jobs).map((j) => [j.id, j.value]))).toEqual({
      'lc-queued': 'queued',
      'lc-busy': 'processing',
      'lc-done': 'completed',
      'lc-cancel': 'cancelled',
      'rj-ok': 'completed',
      'rj-exhausted': 'failed',
      'rj-later': 'partial',
      'rj-cancel': 'cancelled',
      'ex-ok': 'completed',
      'ex-flaky': 'completed',
      'ex-fail': 'failed',
      'ap-yes': 'approved',
      'ap-late': 'expired',
      'ap-slow': 'expired',
    });
    // What is left is waiting for input, visibly: not stuck.
    expect((await o.runtime.details('lc-queued')).waitingFor).toEqual(['CANCEL', 'START']);
    expect((await o.runtime.details('lc-busy')).waitingFor).toEqual(['CANCEL', 'FAIL', 'FINISH', 'ITEM_DONE', 'ITEM_FAILED', 'PROGRESS']);
    const stats = await o.runtime.stats();
    expect(stats).toMatchObject({ stuck: 0, waitingForInput: 2, exhausted: 2, backlog: { events: 0 }, timers: { due: 0 } });
    expect(checks.length).toBeGreaterThan(8);
  });

  it('lists a job in a dead-end state, one only a cancel can move, and one whose activity record was deleted by hand', async () => {
    // runEffects false: activities are recorded, never run (so one can be deleted before it runs).
    const o = await open({ runEffects: false });
    const { runtime, store } = o;
    await runtime.start('dead-end', {}, { jobId: 'limbo' });
    await runtime.send('limbo', { type: 'GO' });
    await runtime.start('dead-end', {}, { jobId: 'holding' });
    await runtime.send('holding', { type: 'HOLD' });
    await runtime.start('dead-end', {}, { jobId: 'idle' });
    await runtime.start('retrying-job', { name: 'gone' }, { jobId: 'gone' });
    await runtime.send('gone', { type: 'START' });
    await runtime.start('retrying-job', { name: 'kept' }, { jobId: 'kept' });
    await runtime.send('kept', { type: 'START' });
    expect((await runtime.list({ stuck: true })).map((j) => j.id)).toEqual(['holding', 'limbo']);

    expect(await rawRun(store, 'DELETE FROM effects WHERE job_id = ?', 'gone')).toBe(1);
    expect((await runtime.list({ stuck: true })).map((j) => [j.id, j.value])).toEqual([
      ['gone', 'processing'],
      ['holding', 'holding'],
      ['limbo', 'limbo'],
    ]);
    expect((await runtime.list({ stuck: true, limit: 1, afterId: 'gone' })).map((j) => j.id)).toEqual(['holding']);
    expect(await runtime.details('limbo')).toMatchObject({ waitingFor: [], stuck: true });
    expect(await runtime.details('holding')).toMatchObject({ waitingFor: ['CANCEL'], stuck: true });
    expect(await runtime.details('gone')).toMatchObject({ waitingFor: ['CANCEL'], stuck: true, effects: [] });
    expect(await runtime.details('idle')).toMatchObject({ waitingFor: ['CANCEL', 'GO', 'HOLD'], stuck: false });
    expect(await runtime.details('kept')).toMatchObject({ stuck: false, effects: [{ status: 'pending' }] });
    expect(await runtime.stats()).toMatchObject({ stuck: 3, waitingForInput: 1 });

    // A suspended stuck job is listed as suspended, not stuck; a quarantined one likewise.
    await runtime.suspend('limbo', 'looking into it');
    await store.setQuarantine('holding', 'held for the test', o.clock.now());
    expect((await runtime.list({ stuck: true })).map((j) => j.id)).toEqual(['gone']);
    expect((await runtime.list({ suspended: true })).map((j) => j.id)).toEqual(['limbo']);
    await store.setQuarantine('holding', null, o.clock.now());
    // A cancel ends it: no longer stuck.
    await runtime.cancel('holding', 'stuck');
    await runtime.cancel('gone', 'stuck');
    expect((await runtime.list({ stuck: true })).map((j) => j.id)).toEqual([]);
  });
});

describe('retry: redrive a recorded failure', () => {
  it('an activity that used up its attempts while the machine has no onError: a fresh attempt sequence, same idempotency key, noted; the job goes on', async () => {
    const o = await open();
    const { runtime } = o;
    const job = await exhaustFragile(o, 'f1');
    expect(job.value).toBe('charging');
    const before = await runtime.details('f1');
    const effectId = before.effects[0]!.id;
    expect(before.effects).toMatchObject([{ status: 'failed', active: true, attempt: 2, maxAttempts: 2, error: { code: 'SPOOL_RETRIES_EXHAUSTED' } }]);
    expect(before.history.at(-1)).toMatchObject({ eventType: 'xstate.error.actor.charge', outcome: 'failed' });
    expect(before.stuck).toBe(true);
    expect((await runtime.list({ exhausted: true })).map((j) => j.id)).toEqual(['f1']);

    const keys: string[] = [];
    opsHooks.charge = async ({ input, idempotencyKey, attempt }) => {
      keys.push(`${idempotencyKey}#${attempt}`);
      return { receipt: `r-${input.amount}` };
    };
    const r = await runtime.retry('f1');
    expect(r.effects).toMatchObject([{ id: effectId, status: 'pending', attempt: 2, maxAttempts: 2 + FRAGILE_POLICY.maxAttempts, error: null }]);
    await runtime.idle();
    expect(keys).toEqual([`${effectId}#3`]);
    const after = await runtime.details('f1');
    expect(after.job).toMatchObject({ value: 'charged', context: { receipt: 'r-12' } });
    expect(after.attempts.map((a) => [a.effectId, a.attempt, a.outcome])).toEqual([
      [effectId, 1, 'failed'],
      [effectId, 2, 'failed'],
      [effectId, 3, 'succeeded'],
    ]);
    expect(after.notes).toEqual([
      expect.objectContaining({ kind: 'retry', message: expect.stringMatching(/^retry: activity charge \(idempotency key .*\) redriven after 2 attempt\(s\), the last with SPOOL_RETRIES_EXHAUSTED: .*attempts 3 to 4 may run$/) }),
    ]);
    expect(after.history.slice(before.history.length).map((h) => [h.eventType, h.outcome, h.to])).toEqual([['xstate.done.actor.charge', 'applied', 'charged']]);
    expect(after.stuck).toBe(false);
    expect(await runtime.list({ exhausted: true })).toEqual([]);

    // Nothing failed any more: a second retry is refused, and says why.
    const again = await refusal(runtime.retry('f1'));
    expect(again.details).toMatchObject({ reason: 'nothing-failed' });
    expect(again.message).toMatch(/has no failed activity to retry \(state charged\)/);
  });

  it('while the error event is still pending (the job is suspended): the event is recorded stale on resume and the new attempt decides', async () => {
    const o = await open();
    const { runtime, clock } = o;
    const second = gate<{ receipt: string }>();
    opsHooks.charge = async ({ attempt }) => {
      if (attempt === 1) throw new Error('busy');
      return second.promise;
    };
    await runtime.start('fragile', { card: CARD, amount: 5 }, { jobId: 'f2' });
    await settle(runtime); // attempt 1 fails: backoff
    clock.advance(FRAGILE_POLICY.backoff.initialMs);
    await runtime.tick(); // attempt 2 starts and waits on the gate
    await runtime.suspend('f2', 'provider incident');
    second.reject(new Error('still busy'));
    await runtime.idle();
    const held = await runtime.details('f2');
    expect(held.effects).toMatchObject([{ status: 'failed', attempt: 2 }]);
    expect(held.events.filter((e) => e.status === 'pending').map((e) => e.type)).toEqual(['xstate.error.actor.charge']);
    expect(held.job.value).toBe('charging');

    opsHooks.charge = async () => ({ receipt: 'r-late' });
    const r = await runtime.retry('f2');
    expect(r.effects).toMatchObject([{ status: 'pending', maxAttempts: 4 }]);
    await runtime.idle();
    expect((await runtime.details('f2')).attempts).toHaveLength(2); // suspended: no attempt starts
    expect((await runtime.details('f2')).notes.at(-1)!.message).toMatch(/its error event, not applied yet, will be recorded as stale$/);

    await runtime.resume('f2');
    await runtime.idle();
    const done = await runtime.details('f2');
    expect(done.job.value).toBe('charged');
    expect(done.history.slice(held.history.length).map((h) => [h.eventType, h.outcome])).toEqual([
      ['xstate.error.actor.charge', 'stale'],
      ['xstate.done.actor.charge', 'applied'],
    ]);
    expect(done.history.at(-2)!.error?.message).toMatch(/is pending|superseded/);
  });

  it('refuses a job whose machine handled the failure; for a finished one, retryAsNew starts a new job with its input, once', async () => {
    const o = await open();
    const { runtime } = o;
    await runtime.start('retrying-job', { name: 'doomed', autoStart: true, flakyAttempts: 5 }, { jobId: 'rj' });
    await settle(runtime);
    while (await step(o));
    expect(await runtime.get('rj')).toMatchObject({ value: 'failed', final: true });
    const history = await runtime.history('rj');

    const final = await refusal(runtime.retry('rj'));
    expect(final.details).toMatchObject({ jobId: 'rj', reason: 'final', status: 'done' });
    expect(final.message).toMatch(/after handling the failure of process \(SPOOL_RETRIES_EXHAUSTED: provider unavailable \(attempt 3\), attempt 3 of 3\)/);
    expect(final.message).toContain('`spool retry --as-new rj`');
    expect(await runtime.history('rj')).toEqual(history);

    const fresh = await runtime.retryAsNew('rj', { jobId: 'rj-2' });
    expect(fresh).toMatchObject({ created: true, job: { id: 'rj-2', machineId: 'retrying-job', input: { name: 'doomed', autoStart: true, flakyAttempts: 5, items: 3, failItems: 0 } } });
    expect(await runtime.retryAsNew('rj')).toMatchObject({ created: false, job: { id: 'rj-2' } });
    expect((await runtime.details('rj')).notes.map((n) => [n.kind, n.message])).toEqual([['retried-as-new', 'retried as new job rj-2 (retrying-job@1) with the same input']]);
    expect((await runtime.details('rj-2')).notes.map((n) => [n.kind, n.message])).toEqual([['retry-of', 'started as a retry of job rj with its input']]);
    expect(await runtime.history('rj')).toEqual(history);

    // Handled without ending: the machine is in its own failure state, waiting for RESET.
    opsHooks.work = async () => {
      throw new Error('nope');
    };
    await runtime.start('mended', {}, { jobId: 'm1' });
    await settle(runtime);
    expect(await runtime.get('m1')).toMatchObject({ value: 'broken', final: false });
    const handled = await refusal(runtime.retry('m1'));
    expect(handled.details).toMatchObject({ reason: 'handled' });
    expect(handled.message).toMatch(/already handled the failure of work .* is now in broken/);
    const active = await refusal(runtime.retryAsNew('m1'));
    expect(active.details).toMatchObject({ reason: 'still-active' });
  });

  it('refuses to replay sensitive input into a new job, and to repeat an unsafe activity unless allowed', async () => {
    const o = await open();
    const { runtime } = o;
    await runtime.start('fragile', { card: CARD, amount: 3 }, { jobId: 'paid' });
    await runtime.idle();
    await runtime.send('paid', { type: 'SHIP' });
    expect(await runtime.get('paid')).toMatchObject({ value: 'shipped', final: true });
    const sensitive = await refusal(runtime.retryAsNew('paid'));
    expect(sensitive.details).toMatchObject({ reason: 'sensitive-input', fields: ['card'] });
    expect(sensitive.message).not.toContain(CARD);

    opsHooks.charge = failing(() => 'timeout');
    await runtime.start('unsafe-charge', { card: CARD, amount: 9 }, { jobId: 'u1' });
    await settle(runtime);
    expect((await runtime.details('u1')).effects).toMatchObject([{ status: 'failed', unsafe: true, attempt: 1 }]);
    const unsafe = await refusal(runtime.retry('u1'));
    expect(unsafe.details).toMatchObject({ reason: 'unsafe' });
    expect(unsafe.message).toMatch(/unsafeToRepeat .* Reconcile with the provider \(idempotency key u1~charge~r1\) first, then retry with --allow-unsafe/);
    expect((await runtime.details('u1')).effects[0]).toMatchObject({ status: 'failed' }); // unchanged

    opsHooks.charge = async () => ({ receipt: 'ok' });
    await runtime.retry('u1', { allowUnsafe: true });
    await runtime.idle();
    const d = await runtime.details('u1');
    expect(d.job.value).toBe('charged');
    expect(d.notes.at(-1)!.message).toContain('(unsafe to repeat: allowed by the operator)');
  });
});

describe('suspend and resume', () => {
  it('a suspended job accepts events (pending), fires no timers, and on resume applies what waited, timers at their original deadlines', async () => {
    const o = await open();
    const { runtime, clock, store } = o;
    const t0 = clock.now();
    await runtime.start('approval-flow', { subject: 'budget', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'ap' });
    await runtime.start('approval-flow', { subject: 'other', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'ap2' });
    const job = await runtime.suspend('ap', 'waiting for the board');
    expect(job.suspended).toEqual({ at: t0, reason: 'waiting for the board' });
    expect(await runtime.suspend('ap', 'again')).toMatchObject({ suspended: { at: t0, reason: 'waiting for the board' } });
    expect((await runtime.list({ suspended: true })).map((j) => j.id)).toEqual(['ap']);
    expect((await runtime.list({ suspended: false })).map((j) => j.id)).toEqual(['ap2']);

    clock.advance(6000);
    const r = await runtime.send('ap', { type: 'REJECT', by: 'cfo', reason: 'no' });
    expect(r).toMatchObject({ status: 'pending', revision: null, job: { value: 'pending', revision: 1 } });
    expect(await runtime.tick()).toMatchObject({ timersFired: 2 }); // ap2's reminder and deadline, not ap's
    await runtime.idle();
    expect(await runtime.get('ap2')).toMatchObject({ value: 'expired' });
    const held = await runtime.details('ap');
    expect(held.job).toMatchObject({ value: 'pending', revision: 1 });
    expect(held.timers.map((t) => [t.status, t.dueAt - t0])).toEqual([
      ['scheduled', 1000],
      ['scheduled', 5000],
    ]);
    expect(await runtime.nextWakeAt()).toBeNull(); // nobody wakes for a suspended job
    // The held event still counts as the oldest waiting: an operator sees how long it has waited.
    expect(await runtime.stats()).toMatchObject({ suspended: 1, backlog: { events: 1, held: 1, oldestAcceptedAt: t0 + 6000, oldestAgeMs: 0 }, timers: { due: 0, held: 2, lagMs: null } });
    // Another processing runtime on the same file leaves it alone too.
    const other = await openRuntime(res, OPS, { path: o.path, clock });
    expect(await other.runtime.processPending()).toBe(0);
    await other.runtime.close();
    expect(await store.getJob('ap')).toMatchObject({ revision: 1 });

    // Resume: the event accepted first is applied first: REJECT ends the job and cancels its timers.
    const resumed = await runtime.resume('ap');
    expect(resumed).toMatchObject({ value: 'rejected', suspended: null, final: true });
    const d = await runtime.details('ap');
    expect(d.history.map((h) => [h.eventType, h.outcome])).toEqual([
      ['xstate.init', 'started'],
      ['REJECT', 'applied'],
    ]);
    expect(d.timers.map((t) => t.status)).toEqual(['cancelled', 'cancelled']);
    expect(d.notes.map((n) => n.kind)).toEqual(['suspended', 'resumed']);
    expect(d.notes[1]!.message).toBe('resumed after 6 s suspended: 1 pending event(s) to apply, 2 timer(s) due now');
    await expect(runtime.suspend('ap')).rejects.toBeInstanceOf(JobTerminalError);
  });

  it('timers that fell due while suspended fire at once on resume, in deadline order, with their original deadlines', async () => {
    const o = await open();
    const { runtime, clock } = o;
    const t0 = clock.now();
    await runtime.start('approval-flow', { subject: 'x', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'ap' });
    await runtime.suspend('ap');
    clock.advance(7000);
    await settle(runtime);
    expect(await runtime.get('ap')).toMatchObject({ value: 'pending', revision: 1 });
    await runtime.resume('ap');
    const d = await runtime.details('ap');
    expect(d.job).toMatchObject({ value: 'expired', context: { reminders: 1 } });
    expect(d.timers.map((t) => [t.dueAt - t0, t.status])).toEqual([
      [1000, 'delivered'],
      [5000, 'delivered'],
    ]);
    expect(d.history.slice(1).map((h) => [h.eventType, h.outcome, h.at - t0])).toEqual([
      ['REMIND', 'applied', 7000],
      ['xstate.after.deadline.approval-flow.pending', 'applied', 7000],
    ]);
  });

  it('starts no activity attempt while suspended (retries wait); a cancel is recorded and applied on resume', async () => {
    const o = await open();
    const { runtime, clock } = o;
    opsHooks.charge = failing(() => 'busy');
    await runtime.start('fragile', { card: CARD, amount: 1 }, { jobId: 'f' });
    await settle(runtime);
    expect((await runtime.details('f')).effects).toMatchObject([{ status: 'backoff', attempt: 1 }]);
    await runtime.suspend('f');
    clock.advance(60_000);
    expect(await runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });
    expect(await runtime.nextWakeAt()).toBeNull();
    const cancelled = await runtime.cancel('f', 'customer left');
    expect(cancelled).toMatchObject({ value: 'charging', cancel: { reason: 'customer left', completed: false }, suspended: { reason: 'suspended by an operator' } });
    expect((await runtime.details('f')).attempts).toHaveLength(1);

    const resumed = await runtime.resume('f');
    expect(resumed).toMatchObject({ value: 'cancelled', final: true, cancel: { completed: true } });
    expect((await runtime.details('f')).attempts).toHaveLength(1); // the cancel came first: no attempt 2
  });

  it('resume of a job with a retry due starts the attempt at once', async () => {
    const o = await open();
    const { runtime, clock } = o;
    let calls = 0;
    opsHooks.charge = async () => {
      calls += 1;
      if (calls === 1) throw new Error('busy');
      return { receipt: 'second' };
    };
    await runtime.start('fragile', { card: CARD, amount: 1 }, { jobId: 'f' });
    await settle(runtime);
    await runtime.suspend('f');
    clock.advance(60_000);
    await settle(runtime);
    expect(calls).toBe(1);
    await runtime.resume('f');
    await runtime.idle();
    expect(await runtime.get('f')).toMatchObject({ value: 'charged', context: { receipt: 'second' } });
  });
});

describe('purgeFinished: retention', () => {
  it("deletes this owner's finished jobs older than the cut-off, with every record; active, younger and other owners' jobs stay", async () => {
    const o = await open();
    const { runtime, clock, store } = o;
    const acme = await openRuntime(res, OPS, { path: o.path, clock, owner: 'acme' });
    const finish = async (rt: Runtime, id: string, event: string) => {
      await rt.start('job-lifecycle', { name: id }, { jobId: id });
      await rt.send(id, { type: 'START' });
      await rt.send(id, event === 'FAIL' ? { type: 'FAIL', reason: 'bad' } : { type: event });
    };
    await finish(runtime, 'old-done', 'FINISH');
    await finish(runtime, 'old-failed', 'FAIL');
    await finish(acme.runtime, 'acme-old', 'FINISH');
    await runtime.start('job-lifecycle', { name: 'active' }, { jobId: 'old-active' });
    await store.addNote({ jobId: 'old-done', kind: 'x', message: 'y', at: clock.now() });
    await store.attachAsset({ jobId: 'old-done', key: 'k', type: 't', uri: 'u', size: 1, meta: null, effectId: null, attempt: null, createdAt: clock.now() });
    clock.advance(40 * DAY);
    await finish(runtime, 'young-done', 'FINISH');
    clock.advance(20 * DAY);

    await expect(runtime.purgeFinished({ olderThanMs: -1 })).rejects.toBeInstanceOf(ValidationError);
    await expect(runtime.purgeFinished({ olderThanMs: DAY, status: 'active' })).rejects.toBeInstanceOf(ValidationError);
    // A final state is XState status `done`, whatever its name: none of these ended in `error`.
    expect(await runtime.purgeFinished({ olderThanMs: 30 * DAY, status: 'error' })).toEqual({ purged: 0 });
    expect(await runtime.purgeFinished({ olderThanMs: 30 * DAY, status: 'done' })).toEqual({ purged: 2 });
    expect(await runtime.purgeFinished({ olderThanMs: 30 * DAY })).toEqual({ purged: 0 });
    expect((await runtime.list()).map((j) => j.id)).toEqual(['old-active', 'young-done']);
    expect((await acme.runtime.list()).map((j) => j.id)).toEqual(['acme-old']);
    for (const table of ['jobs', 'inbox', 'transitions', 'effects', 'timers', 'notes', 'assets']) {
      const column = table === 'jobs' ? 'id' : 'job_id';
      expect(await rawGet(store, `SELECT count(*) AS n FROM ${table} WHERE ${column} IN ('old-done', 'old-failed')`), table).toEqual({ n: 0 });
    }
    expect(await acme.runtime.purgeFinished({ olderThanMs: 30 * DAY })).toEqual({ purged: 1 });
    await acme.runtime.close();
  });
});

describe('stats', () => {
  it('every figure equals what the raw rows say', async () => {
    const o = await open();
    const { runtime, clock, path } = o;
    const hold = gate<{ receipt: string }>();
    opsHooks.charge = async ({ input }) => {
      if (input.amount === 1) return hold.promise;
      throw new Error('declined');
    };
    // Exhausted (stuck: only CANCEL moves it), and one in retry backoff.
    await runtime.start('fragile', { card: CARD, amount: 2 }, { jobId: 'exhausted' });
    await settle(runtime);
    clock.advance(FRAGILE_POLICY.backoff.initialMs);
    await settle(runtime);
    await runtime.start('fragile', { card: CARD, amount: 3 }, { jobId: 'backoff' });
    await settle(runtime);
    // Waiting for input, stuck, suspended with a pending event, a timer that falls due unfired.
    await runtime.start('job-lifecycle', { name: 'q' }, { jobId: 'queued' });
    await runtime.start('job-lifecycle', { name: 'b' }, { jobId: 'busy' });
    await runtime.send('busy', { type: 'START' });
    await runtime.start('dead-end', {}, { jobId: 'limbo' });
    await runtime.send('limbo', { type: 'GO' });
    await runtime.start('approval-flow', { subject: 's', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'suspended' });
    await runtime.suspend('suspended');
    await runtime.send('suspended', { type: 'APPROVE', by: 'me' });
    await runtime.start('approval-flow', { subject: 'd', remindAfterMs: 500, deadlineMs: 90_000 }, { jobId: 'due' });
    await runtime.start('job-lifecycle', { name: 'c' }, { jobId: 'cancel-asked' });
    await runtime.send('cancel-asked', { type: 'START' });
    await runtime.start('job-lifecycle', { name: 'f' }, { jobId: 'finished' });
    await runtime.send('finished', { type: 'START' });
    await runtime.send('finished', { type: 'FINISH' });
    // Another owner's job (with a pending event) stays out of these figures. Clients that do not
    // process leave events pending.
    const acme = await openRuntime(res, OPS, { path, clock, owner: 'acme', processEvents: false });
    await acme.runtime.start('job-lifecycle', { name: 'theirs' }, { jobId: 'theirs' });
    await acme.runtime.send('theirs', { type: 'START' }, { wait: false });
    await acme.runtime.close();
    const client = await openRuntime(res, OPS, { path, clock, processEvents: false });
    await client.runtime.send('queued', { type: 'START' }, { wait: false });
    await client.runtime.cancel('cancel-asked', 'please');
    await client.runtime.close();
    // An attempt running, its claim held by this runtime.
    const started = nextEvent(runtime, 'activity.started', (e) => e.jobId === 'running');
    await runtime.start('fragile', { card: CARD, amount: 1 }, { jobId: 'running' });
    await started;
    clock.advance(3000);

    const stats = await runtime.stats();
    const now = clock.now();
    const rows = <T>(sql: string) => rawAll<T>(o.store, sql);
    type JobRow = {
      id: string;
      machine_id: string;
      machine_version: string;
      status: string;
      state_value: string;
      owner: string;
      quarantine: string | null;
      suspended_at: number | null;
      cancel_requested_at: number | null;
      lease_owner: string | null;
      lease_until: number | null;
    };
    const jobs = (await rows<JobRow>('SELECT * FROM jobs')).filter((j) => j.owner === '');
    const mine = new Set(jobs.map((j) => j.id));
    const byId = new Map(jobs.map((j) => [j.id, j]));
    const inbox = (await rows<{ job_id: string; status: string; accepted_at: number }>('SELECT * FROM inbox')).filter((e) => mine.has(e.job_id));
    const timers = (await rows<{ job_id: string; status: string; due_at: number }>('SELECT * FROM timers')).filter((t) => mine.has(t.job_id));
    type EffectRow = { id: string; job_id: string; src: string; status: string; active: number; attempt: number; max_attempts: number; error: string | null; claimed_by: string | null; claim_expires_at: number | null };
    const effects = (await rows<EffectRow>('SELECT * FROM effects')).filter((e) => mine.has(e.job_id));
    const attempts = await rows<{ effect_id: string; outcome: string }>('SELECT * FROM attempts');
    const live = new Set(['pending', 'running', 'waiting', 'backoff']);
    const held = (id: string) => byId.get(id)!.suspended_at !== null || byId.get(id)!.quarantine !== null;
    const suspended = (id: string) => byId.get(id)!.suspended_at !== null;
    const active = jobs.filter((j) => j.status === 'active');
    const idle = active.filter(
      (j) =>
        j.quarantine === null &&
        j.suspended_at === null &&
        j.lease_owner === null &&
        !inbox.some((e) => e.job_id === j.id && e.status === 'pending') &&
        !timers.some((t) => t.job_id === j.id && (t.status === 'scheduled' || t.status === 'fired')) &&
        !effects.some((e) => e.job_id === j.id && e.active === 1 && live.has(e.status)),
    );
    const groups = new Map<string, RuntimeStats['jobs'][number]>();
    for (const j of jobs) {
      const key = JSON.stringify([j.machine_id, j.machine_version, j.status, j.state_value]);
      const g = groups.get(key) ?? { machineId: j.machine_id, machineVersion: j.machine_version, status: j.status as Job['status'], value: JSON.parse(j.state_value), count: 0 };
      g.count += 1;
      groups.set(key, g);
    }
    const pending = inbox.filter((e) => e.status === 'pending');
    const free = pending.filter((e) => !held(e.job_id));
    const scheduled = timers.filter((t) => t.status === 'scheduled');
    const due = scheduled.filter((t) => t.due_at <= now && !suspended(t.job_id));
    const min = (xs: number[]) => (xs.length ? Math.min(...xs) : null);
    const srcs = [...new Set(effects.map((e) => e.src))].sort();
    const expected: RuntimeStats = {
      at: now,
      owner: null,
      jobs: [...groups.values()].sort(
        (a, b) =>
          a.machineId.localeCompare(b.machineId, 'en') || a.machineVersion.localeCompare(b.machineVersion) || a.status.localeCompare(b.status) || (JSON.stringify(a.value) < JSON.stringify(b.value) ? -1 : 1),
      ),
      // The conditions of the list filters, whatever the job's status.
      quarantined: jobs.filter((j) => j.quarantine !== null).length,
      suspended: jobs.filter((j) => j.suspended_at !== null).length,
      cancelRequested: jobs.filter((j) => j.cancel_requested_at !== null).length,
      exhausted: jobs.filter((j) =>
        effects.some((e) => e.job_id === j.id && e.status === 'failed' && (e.attempt >= e.max_attempts || ['SPOOL_RETRIES_EXHAUSTED', 'SPOOL_INDETERMINATE'].includes(JSON.parse(e.error ?? '{}').code))),
      ).length,
      stuck: 2, // limbo (dead end) and exhausted (only CANCEL moves it): by construction
      waitingForInput: idle.length - 2,
      backlog: {
        events: pending.length,
        jobs: new Set(pending.map((e) => e.job_id)).size,
        held: pending.length - free.length,
        // Held events included.
        oldestAcceptedAt: min(pending.map((e) => e.accepted_at)),
        oldestAgeMs: pending.length ? now - min(pending.map((e) => e.accepted_at))! : null,
      },
      timers: {
        scheduled: scheduled.length,
        due: due.length,
        held: scheduled.filter((t) => t.due_at <= now && suspended(t.job_id)).length,
        oldestDueAt: min(due.map((t) => t.due_at)),
        lagMs: due.length ? now - min(due.map((t) => t.due_at))! : null,
      },
      activities: srcs.map((src) => {
        const mineOf = effects.filter((e) => e.src === src);
        const ids = new Set(mineOf.map((e) => e.id));
        const its = attempts.filter((a) => ids.has(a.effect_id));
        const count = (outcome: string) => its.filter((a) => a.outcome === outcome).length;
        return {
          src,
          effects: mineOf.length,
          effectsFailed: mineOf.filter((e) => e.status === 'failed').length,
          attempts: its.length,
          succeeded: count('succeeded'),
          failed: count('failed'),
          interrupted: count('interrupted'),
          stale: count('stale'),
          running: count('running'),
          waiting: count('waiting'),
        };
      }),
      running: effects
        .filter((e) => e.active === 1 && e.status === 'running')
        .sort((a, b) => (a.id < b.id ? -1 : 1))
        .map((e) => ({ effectId: e.id, jobId: e.job_id, src: e.src, attempt: e.attempt, runner: e.claimed_by, claimExpiresAt: e.claim_expires_at, expired: e.claim_expires_at !== null && e.claim_expires_at <= now })),
      leases: [...new Set(jobs.filter((j) => j.lease_owner !== null && j.lease_until! > now).map((j) => j.lease_owner!))].sort().map((runner) => {
        const held = jobs.filter((j) => j.lease_owner === runner && j.lease_until! > now);
        return { runner, jobs: held.length, earliestUntil: min(held.map((j) => j.lease_until!))! };
      }),
    };
    expect(stats).toEqual(expected);
    // And the figures say what the scenario built (so the comparison above is not vacuous).
    expect((await runtime.list({ stuck: true })).map((j) => j.id)).toEqual(['exhausted', 'limbo']);
    expect(stats).toMatchObject({
      suspended: 1,
      cancelRequested: 1,
      exhausted: 1,
      stuck: 2,
      waitingForInput: 1,
      backlog: { events: 3, jobs: 3, held: 1, oldestAgeMs: 3000 },
      timers: { scheduled: 4, due: 1, held: 1, lagMs: 2500 },
      running: [{ jobId: 'running', src: 'charge', attempt: 1, runner: runtime.runnerId, expired: false }],
    });
    expect(stats.activities).toEqual([{ src: 'charge', effects: 3, effectsFailed: 1, attempts: 4, succeeded: 0, failed: 3, interrupted: 0, stale: 0, running: 1, waiting: 0 }]);
    hold.resolve({ receipt: 'r' });
    await runtime.idle();
    expect(await runtime.get('running')).toMatchObject({ value: 'charged' });
  });
});

/** A store on each backend, and a second handle on the same records (another connection for SQLite). */
const BACKENDS: [string, (clock: VirtualClock) => Promise<{ store: JobStore; again: () => Promise<JobStore> }>][] = [
  [
    'SqliteStore',
    async (clock) => {
      const path = res.dbPath();
      return { store: await res.sqlite(path, { clock }), again: () => res.sqlite(path, { clock }) };
    },
  ],
  [
    'MemoryStore',
    async () => {
      const store = new MemoryStore();
      return { store, again: async () => store };
    },
  ],
];

describe.each(BACKENDS)('stats agree with list: %s', (_name, backend) => {
  it('each job count equals the length of its list(filter), finished jobs included; the backlog ages count held events', async () => {
    const clock = new VirtualClock(T0);
    const { store, again } = await backend(clock);
    // Another owner's cancelled job and held event (older than ours) stay out of this owner's figures.
    // (Host-driven and never ticked: it touches no job but those it is handed.)
    const acme = await res.runtime({ store: await again(), machines: OPS, clock, owner: 'acme', hostDriven: true });
    await acme.start('dead-end', {}, { jobId: 'acme-cancelled' });
    await acme.cancel('acme-cancelled', 'theirs');
    await acme.start('dead-end', {}, { jobId: 'acme-held' });
    await acme.suspend('acme-held', 'theirs');
    await acme.send('acme-held', { type: 'GO' });
    expect((await acme.list({ cancelRequested: true })).map((j) => j.id)).toEqual(['acme-cancelled']);
    clock.advance(1000);
    const runtime = await res.runtime({ store, machines: OPS, clock });
    const o = { runtime, clock };

    // A cancel request on an active job: its cancel event is held by a suspension.
    await runtime.start('dead-end', {}, { jobId: 'cancel-pending' });
    await runtime.suspend('cancel-pending', 'on hold');
    const oldest = clock.now();
    expect(await runtime.cancel('cancel-pending', 'not needed')).toMatchObject({ status: 'active', cancel: { completed: false } });
    // A cancel request, applied: the job ended.
    await runtime.start('dead-end', {}, { jobId: 'cancelled' });
    expect(await runtime.cancel('cancelled', 'not needed')).toMatchObject({ value: 'cancelled', final: true, cancel: { completed: true } });
    // Exhausted and still active (no onError: stuck, only CANCEL moves it).
    expect(await exhaustFragile(o, 'exhausted-active')).toMatchObject({ status: 'active', value: 'charging' });
    // Exhausted, then cancelled: finished.
    await exhaustFragile(o, 'exhausted-cancelled');
    expect(await runtime.cancel('exhausted-cancelled', 'give up')).toMatchObject({ final: true });
    // Exhausted, the failure handled by the machine (onError), then ended by an event of its own.
    opsHooks.work = async () => {
      throw new Error('broken');
    };
    await runtime.start('mended', {}, { jobId: 'exhausted-ended' });
    await settle(runtime);
    expect(await runtime.get('exhausted-ended')).toMatchObject({ value: 'broken' });
    expect(await runtime.send('exhausted-ended', { type: 'CANCEL' })).toMatchObject({ job: { value: 'cancelled', final: true } });
    // A second held event, later; and a job quarantined by hand.
    clock.advance(500);
    await runtime.start('dead-end', {}, { jobId: 'held' });
    await runtime.suspend('held');
    expect(await runtime.send('held', { type: 'GO' })).toMatchObject({ status: 'pending' });
    await runtime.start('dead-end', {}, { jobId: 'quarantined' });
    await store.setQuarantine('quarantined', 'held back by hand', clock.now());
    clock.advance(2000);

    const stats = await runtime.stats();
    const listed = async (filter: Parameters<Runtime['list']>[0]) => (await runtime.list(filter)).map((j) => `${j.id} ${j.status}`);
    const lists = {
      quarantined: await listed({ quarantined: true }),
      suspended: await listed({ suspended: true }),
      cancelRequested: await listed({ cancelRequested: true }),
      exhausted: await listed({ exhausted: true }),
      stuck: await listed({ stuck: true }),
    };
    // Each figure is its list's length, whatever the jobs' status...
    expect({ quarantined: stats.quarantined, suspended: stats.suspended, cancelRequested: stats.cancelRequested, exhausted: stats.exhausted, stuck: stats.stuck }).toEqual(
      Object.fromEntries(Object.entries(lists).map(([k, v]) => [k, v.length])),
    );
    // ...and the lists hold what the scenario built (active and finished jobs alike).
    expect(lists).toEqual({
      quarantined: ['quarantined active'],
      suspended: ['cancel-pending active', 'held active'],
      cancelRequested: ['cancel-pending active', 'cancelled done', 'exhausted-cancelled done'],
      exhausted: ['exhausted-active active', 'exhausted-cancelled done', 'exhausted-ended done'],
      stuck: ['exhausted-active active'],
    });
    // The only pending events are held: the age of the oldest is still shown.
    expect(stats.backlog).toEqual({ events: 2, jobs: 2, held: 2, oldestAcceptedAt: oldest, oldestAgeMs: clock.now() - oldest });
    expect(stats.backlog.oldestAgeMs).toBeGreaterThan(0);
  });
});

describe('tenant scoping', () => {
  it("another owner's job reads exactly like a missing one for every operation", async () => {
    const o = await open();
    const acme = await openRuntime(res, OPS, { path: o.path, clock: o.clock, owner: 'acme' });
    await acme.runtime.start('dead-end', {}, { jobId: 'theirs' });
    await acme.runtime.send('theirs', { type: 'GO' });
    expect((await acme.runtime.list({ stuck: true })).map((j) => j.id)).toEqual(['theirs']);
    const missing = new JobNotFoundError('theirs').toJSON();
    for (const op of [
      () => o.runtime.details('theirs'),
      () => o.runtime.suspend('theirs'),
      () => o.runtime.resume('theirs'),
      () => o.runtime.retry('theirs'),
      () => o.runtime.retryAsNew('theirs'),
      () => o.runtime.purge('theirs'),
    ]) {
      const error = await op().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobNotFoundError);
      expect((error as JobNotFoundError).toJSON()).toEqual(missing);
    }
    expect(await o.runtime.list({ stuck: true })).toEqual([]);
    expect(await o.runtime.stats()).toMatchObject({ jobs: [], stuck: 0 });
    expect(await acme.runtime.stats()).toMatchObject({ owner: 'acme', jobs: [{ machineId: 'dead-end', count: 1 }], stuck: 1 });
    await acme.runtime.close();
  });
});

describe('structured logs', () => {
  it('one entry per lifecycle event, and a card number quoted by a failing activity appears in none of them', async () => {
    const logs: LogEntry[] = [];
    const o = await open({ log: (e) => logs.push(e) });
    const { runtime } = o;
    await exhaustFragile(o, 'secret', (input) => `issuer refused card ${input.card} (amount ${input.amount})`);
    await runtime.suspend('secret', 'fraud check');
    opsHooks.charge = async () => ({ receipt: 'ok' });
    await runtime.retry('secret');
    await runtime.resume('secret');
    await runtime.idle();
    expect(await runtime.get('secret')).toMatchObject({ value: 'charged' });

    const lines = logs.map((l) => JSON.stringify(l));
    expect(lines.join('\n')).not.toContain(CARD);
    expect(JSON.stringify((await runtime.details('secret')).history)).not.toContain(CARD);
    const msgs = logs.map((l) => l.msg);
    for (const msg of ['job started', 'activity started', 'activity retrying', 'activity failed', 'event failed', 'job suspended', 'activity redriven', 'job resumed', 'activity succeeded']) {
      expect(msgs, msg).toContain(msg);
    }
    const failed = logs.find((l) => l.msg === 'activity failed')!;
    expect(failed).toMatchObject({ jobId: 'secret', level: 'warn', attempt: 2, error: { message: 'issuer refused card [redacted] (amount 12)' } });
    expect(logs.every((l) => typeof l.at === 'number' && ['info', 'warn', 'error'].includes(l.level))).toBe(true);
  });
});

describe('a job whose row is damaged (issue 27, item 8)', () => {
  it('is held back from the first read; send, cancel and retry refuse it naming purge; purge ends it', async () => {
    const first = await open();
    const input = { subject: 'x', remindAfterMs: 1000, deadlineMs: 5000 };
    await first.runtime.start('approval-flow', input, { jobId: 'dmg' });
    await first.runtime.start('approval-flow', input, { jobId: 'fine' });
    expect(await rawRun(first.store, `UPDATE jobs SET snapshot = '{"value": broken' WHERE id = ?`, 'dmg')).toBe(1);
    await first.runtime.close();
    // Not recovered on open (as `spool show` opens it): the first read already says it is held.
    const { runtime } = await open({ path: first.path, recover: false });
    const details = await runtime.details('dmg');
    expect(details.held).toEqual({ damaged: expect.stringContaining('damaged record: jobs.snapshot'), wayOut: expect.stringContaining('`spool purge dmg`') });
    expect(details).toMatchObject({ stuck: false, waitingFor: [] });
    expect((await runtime.details('fine')).held).toBeUndefined();
    const writes = [() => runtime.send('dmg', { type: 'APPROVE', by: 'ann' }), () => runtime.cancel('dmg'), () => runtime.retry('dmg')];
    for (const write of writes) {
      const refused = (await write().catch((e: unknown) => e)) as Error & { code?: string };
      expect(refused).toMatchObject({ code: 'SPOOL_QUARANTINED' });
      expect(refused.message).toContain('`spool purge dmg`');
      expect(refused.message).not.toContain('register the version');
    }
    expect((await runtime.get('dmg')).quarantine).toContain('damaged record: jobs.snapshot');
    expect((await runtime.get('dmg')).cancel).toBeNull(); // no cancel it could never apply
    await expect(runtime.purge('fine')).rejects.toMatchObject({ code: 'SPOOL_NOT_FINISHED' });
    await runtime.purge('dmg');
    await expect(runtime.get('dmg')).rejects.toThrow(JobNotFoundError);
    expect(await runtime.send('fine', { type: 'APPROVE', by: 'ann' })).toMatchObject({ status: 'applied' });
  });
});
