/**
 * Durable effects: activities run after the commit that asked for them, with a stable idempotency
 * key, attempt numbers and an AbortSignal; outcomes apply once (late and superseded ones are
 * stale); retries follow the policy; out-of-band completion tokens; progress, assets and purge;
 * the reference machines with activities; registration refusals. Real SQLite files, a VirtualClock,
 * no wall-clock sleeping.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assign, createMachine, fromCallback, fromPromise, setup } from 'xstate';
import { exportJob, retryingJob } from '../machines/index.ts';
import {
  JobNotFinishedError,
  JobNotFoundError,
  MachineDefinitionError,
  MachineRegistry,
  PayloadTooLargeError,
  RetryableError,
  TerminalError,
  TokenError,
  ValidationError,
  backoffDelay,
  type AttemptRecord,
  type Runtime,
  type RuntimeEvent,
  type WriteBatch,
} from '../src/internal.ts';
import { dumpRows, rawGet } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';
import { RELEASED_ATTEMPT } from '../src/ports/store.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { T0, gate, releaseGates, nextEvent, openRuntime, rowsOf, runToEnd, untilAborted, type Opened } from './helpers/durable.ts';
import { WORK_POLICY, WORK_TIMEOUT_MS, work, workHooks } from './fixtures/workMachine.ts';

const res = new Resources();
const defaultWork = workHooks.work;
const defaultCleanup = workHooks.cleanup;
beforeEach(() => {
  workHooks.work = defaultWork;
  workHooks.cleanup = defaultCleanup;
});
afterEach(async () => {
  releaseGates();
  await res.dispose();
});

const MACHINES = [work, retryingJob, exportJob];

async function open(options: Parameters<typeof openRuntime>[2] = {}): Promise<Opened> {
  return openRuntime(res, MACHINES, options);
}

/** Start a `work` job and send GO; resolves once the GO commit is done (the activity may still run). */
async function startWorking(runtime: Runtime): Promise<string> {
  const job = await runtime.start('work', {});
  const r = await runtime.send(job.id, { type: 'GO' });
  expect(r.status).toBe('applied');
  return job.id;
}

const effectIdOf = (jobId: string, revision = 2) => `${jobId}~work~r${revision}`;
const summary = (attempts: AttemptRecord[]) => attempts.map((a) => ({ attempt: a.attempt, outcome: a.outcome, error: a.error?.message ?? null }));

describe('an activity runs only after the commit that asked for it', () => {
  it('started by a sent event: inside the activity the stored job is already at that revision, in the invoking state', async () => {
    const { runtime, store, seen } = await open();
    let inside: unknown;
    workHooks.work = async (args) => {
      const job = await store.getJob(args.jobId);
      const effect = await store.getEffect(args.idempotencyKey);
      inside = { revision: job?.revision, value: job?.value, effect: effect?.status, attempt: effect?.attempt, argAttempt: args.attempt, input: args.input };
      return { ok: true };
    };
    const job = await runtime.start('work', {});
    expect(job.value).toBe('idle');
    expect(await store.listEffects(job.id)).toEqual([]);
    await runtime.send(job.id, { type: 'GO' });
    await runtime.idle();
    expect(inside).toEqual({ revision: 2, value: 'working', effect: 'running', attempt: 1, argAttempt: 1, input: { label: 'w' } });

    // The effect record was written by the GO commit itself (created at revision 2).
    const [effect] = await store.listEffects(job.id);
    expect(effect).toMatchObject({ id: effectIdOf(job.id), actorId: 'work', src: 'work', createdRevision: 2, maxAttempts: 3, status: 'succeeded', active: false });
    // Runtime events: the commit of GO comes before the activity starts.
    const order = seen.filter((e) => e.type === 'job.committed' || e.type === 'activity.started').map((e) => (e.type === 'job.committed' ? `commit r${e.job.revision}` : 'activity'));
    expect(order).toEqual(['commit r2', 'activity', 'commit r3']);
    const done = await runtime.get(job.id);
    expect(done).toMatchObject({ value: 'review', revision: 3, context: { output: { ok: true } } });
  });

  it('started by the initial state: it runs after the job row (revision 1, invoking state) is stored', async () => {
    const { runtime, store } = await open();
    let inside: unknown;
    workHooks.work = async (args) => {
      const job = await store.getJob(args.jobId);
      inside = { revision: job?.revision, value: job?.value };
      return 'fine';
    };
    const job = await runtime.start('work', { auto: true });
    expect(job).toMatchObject({ revision: 1, value: 'working' });
    await runtime.idle();
    expect(inside).toEqual({ revision: 1, value: 'working' });
    expect((await runtime.get(job.id)).context).toMatchObject({ output: 'fine' });
  });
});

describe('idempotency key, attempt numbers and the abort signal', () => {
  it('keeps one idempotency key over attempts 1..3, with backoff delays equal to backoffDelay()', async () => {
    const { runtime, clock, store } = await open();
    const calls: Array<{ key: string; attempt: number; at: number }> = [];
    workHooks.work = async (args) => {
      calls.push({ key: args.idempotencyKey, attempt: args.attempt, at: clock.now() });
      if (args.attempt < 3) throw new Error(`flaky #${args.attempt}`);
      return { attempt: args.attempt };
    };
    const jobId = await startWorking(runtime);
    const key = effectIdOf(jobId);
    await runtime.idle();

    for (const failed of [1, 2]) {
      const effect = (await store.getEffect(key))!;
      const delay = backoffDelay(WORK_POLICY, failed, key);
      expect(effect).toMatchObject({ status: 'backoff', attempt: failed, nextRunAt: clock.now() + delay });
      expect(await runtime.nextWakeAt()).toBe(clock.now() + delay);
      clock.advance(delay - 1);
      expect((await runtime.tick()).activitiesStarted).toBe(0); // not a millisecond early
      clock.advance(1);
      expect((await runtime.tick()).activitiesStarted).toBe(1);
      await runtime.idle();
    }

    expect(calls.map((c) => c.key)).toEqual([key, key, key]);
    expect(calls.map((c) => c.attempt)).toEqual([1, 2, 3]);
    const d1 = backoffDelay(WORK_POLICY, 1, key);
    const d2 = backoffDelay(WORK_POLICY, 2, key);
    expect(calls.map((c) => c.at - T0)).toEqual([0, d1, d1 + d2]);
    // Jitter stays within ±10 % of the exponential base.
    expect(d1).toBeGreaterThanOrEqual(900);
    expect(d1).toBeLessThanOrEqual(1100);
    expect(d2).toBeGreaterThanOrEqual(1800);
    expect(d2).toBeLessThanOrEqual(2200);

    const details = await runtime.details(jobId);
    expect(details.job).toMatchObject({ value: 'review', context: { output: { attempt: 3 } } });
    expect(summary(details.attempts)).toEqual([
      { attempt: 1, outcome: 'failed', error: 'flaky #1' },
      { attempt: 2, outcome: 'failed', error: 'flaky #2' },
      { attempt: 3, outcome: 'succeeded', error: null },
    ]);
    expect(details.attempts.map((a) => [a.startedAt - T0, a.endedAt! - T0])).toEqual([
      [0, 0],
      [d1, d1],
      [d1 + d2, d1 + d2],
    ]);
    // Failed attempts with retries left do not reach the machine: one outcome event, the success.
    expect(details.history.filter((h) => /^xstate\.(done|error)\.actor\./.test(h.eventType)).map((h) => h.eventType)).toEqual(['xstate.done.actor.work']);
  });

  it('keeps the idempotency key across a runtime restart: the next runtime runs attempt 2 with the same key', async () => {
    const first = await open();
    const calls: Array<{ key: string; attempt: number }> = [];
    const started = gate();
    workHooks.work = async (args) => {
      calls.push({ key: args.idempotencyKey, attempt: args.attempt });
      started.resolve();
      return untilAborted(args.signal); // still running when the runtime shuts down
    };
    const jobId = await startWorking(first.runtime);
    await started.promise;
    await first.runtime.close();

    workHooks.work = async (args) => {
      calls.push({ key: args.idempotencyKey, attempt: args.attempt });
      return 'second time';
    };
    const second = await open({ path: first.path, clock: first.clock });
    const restarted = nextEvent(second.runtime, 'activity.started');
    await second.runtime.tick();
    expect(await restarted).toMatchObject({ attempt: 2, effectId: effectIdOf(jobId) });
    await second.runtime.idle();

    expect(calls).toEqual([
      { key: effectIdOf(jobId), attempt: 1 },
      { key: effectIdOf(jobId), attempt: 2 },
    ]);
    const details = await second.runtime.details(jobId);
    expect(details.job).toMatchObject({ value: 'review', context: { output: 'second time' } });
    expect(summary(details.attempts)).toEqual([
      // Given back by the first runtime's close: not counted against maxAttempts.
      { attempt: 1, outcome: 'interrupted', error: RELEASED_ATTEMPT.message },
      { attempt: 2, outcome: 'succeeded', error: null },
    ]);
    expect(details.attempts[1]!.runner).toBe(second.runtime.runnerId);
  });

  it('aborts the signal when an `after` timeout leaves the invoking state; the late success is recorded as stale', async () => {
    const { runtime, clock } = await open();
    let reason: unknown;
    let abortedAt: number | undefined;
    const started = gate();
    workHooks.work = async (args) => {
      started.resolve();
      try {
        await untilAborted(args.signal);
      } catch (e) {
        reason = e;
        abortedAt = clock.now();
      }
      return { late: true }; // an activity that returns something anyway
    };
    const jobId = await startWorking(runtime);
    await started.promise;
    clock.advance(WORK_TIMEOUT_MS);
    expect((await runtime.tick()).timersFired).toBe(1);
    await runtime.idle();

    expect((reason as Error).message).toMatch(/state left/);
    expect(abortedAt).toBe(T0 + WORK_TIMEOUT_MS);
    const details = await runtime.details(jobId);
    expect(details.job).toMatchObject({ value: 'timedOut', context: { output: null } });
    const last = details.history.at(-1)!;
    expect(last).toMatchObject({ eventType: 'xstate.done.actor.work', outcome: 'stale', from: 'timedOut', to: 'timedOut' });
    expect(last.revision).toBe(details.job.revision);
    expect(details.events.find((e) => e.type === 'xstate.done.actor.work')).toMatchObject({ status: 'stale', source: 'effect', attempt: 1 });
    expect(summary(details.attempts)).toEqual([{ attempt: 1, outcome: 'stale', error: null }]);
    expect(details.effects[0]).toMatchObject({ status: 'cancelled', active: false });
  });

  it('aborts the signal when another event leaves the state; an aborted attempt that throws is not retried', async () => {
    const { runtime, clock, store } = await open();
    const started = gate();
    let attempts = 0;
    workHooks.work = async (args) => {
      attempts += 1;
      started.resolve();
      return untilAborted(args.signal);
    };
    const jobId = await startWorking(runtime);
    await started.promise;
    await runtime.send(jobId, { type: 'LEAVE' });
    await runtime.idle();
    expect((await runtime.get(jobId)).value).toBe('left');
    // No retry is scheduled for an invocation whose state was left, however far time moves.
    expect((await store.getJob(jobId))?.lease).toBeNull(); // nothing runs here for it any more: its lease was released
    expect(await runtime.nextWakeAt()).toBeNull();
    clock.advance(24 * 3_600_000);
    expect(await runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });
    await runtime.idle();
    expect(attempts).toBe(1);
    expect(await store.getEffect(effectIdOf(jobId))).toMatchObject({ status: 'cancelled', active: false, attempt: 1 });
    expect(summary(await store.listAttempts(jobId))).toEqual([{ attempt: 1, outcome: 'stale', error: 'state left: invocation work is no longer current' }]);
    expect((await runtime.get(jobId)).value).toBe('left');
  });
});

describe('an outcome applies once; late and superseded outcomes are stale', () => {
  it('with nothing waiting, an outcome is recorded in the commit that applies it, and its end is told before that transition', async () => {
    const { runtime, store, seen } = await open();
    workHooks.work = async () => ({ fine: true });
    const jobId = await startWorking(runtime);
    await runtime.idle();
    const finished = seen.findIndex((e) => e.type === 'activity.finished' && e.jobId === jobId);
    const applied = seen.findIndex((e) => e.type === 'job.committed' && e.job.id === jobId && e.transition.eventType === 'xstate.done.actor.work');
    expect(finished).toBeGreaterThanOrEqual(0);
    expect(applied).toBeGreaterThan(finished);
    const details = await runtime.details(jobId);
    expect(details.job).toMatchObject({ value: 'review', revision: 3, context: { output: { fine: true } } });
    // One commit: the attempt ended and the event was applied at revision 3, never left pending.
    expect(details.events.find((e) => e.type === 'xstate.done.actor.work')).toMatchObject({ status: 'applied', revision: 3, source: 'effect', attempt: 1 });
    expect(summary(details.attempts)).toEqual([{ attempt: 1, outcome: 'succeeded', error: null }]);
    // Its history row is its only record (schema 13): no inbox row was written.
    const row = await rawGet<{ accepted_at: number; processed_at: number }>(store, "SELECT accepted_at, processed_at FROM events WHERE source_kind = 'effect'");
    expect(row!.processed_at).toBe(row!.accepted_at);
    expect(await rawGet(store, "SELECT count(*) AS n FROM inbox WHERE source_kind = 'effect'")).toEqual({ n: 0 });
  });

  /** Two live runtimes on one file: A runs attempt 1, B takes over after A's claim expires. */
  async function supersede(): Promise<{ a: Opened; b: Opened; jobId: string; attempt1: ReturnType<typeof gate<unknown>>; attempt2: ReturnType<typeof gate<unknown>> }> {
    const a = await open();
    const b = await open({ path: a.path, clock: a.clock });
    const attempt1 = gate<unknown>();
    const attempt2 = gate<unknown>();
    const started = [gate(), gate()];
    workHooks.work = async (args) => {
      started[args.attempt - 1]!.resolve();
      return (args.attempt === 1 ? attempt1 : attempt2).promise;
    };
    const jobId = await startWorking(a.runtime);
    await started[0]!.promise;
    a.clock.advance(30_001); // past A's claim and lease (leaseMs 30000); A is alive but silent
    expect((await b.runtime.tick()).activitiesStarted).toBe(1);
    await started[1]!.promise;
    return { a, b, jobId, attempt1, attempt2 };
  }

  it('the success of a superseded attempt is refused by its fence and changes nothing; the current attempt applies', async () => {
    const { a, b, jobId, attempt1, attempt2 } = await supersede();
    const before = await a.runtime.get(jobId);
    expect((await b.store.getJob(jobId))?.lease).toMatchObject({ owner: b.runtime.runnerId, fence: 2 }); // B claimed the job: the fence grew
    attempt1.resolve({ from: 1 });
    await a.runtime.idle();
    const mid = await a.runtime.details(jobId);
    expect(mid.job).toMatchObject({ value: 'working', context: { output: null }, revision: before.revision }); // A wrote nothing to the job
    expect(mid.events.filter((e) => e.source === 'effect')).toEqual([]);
    expect(summary(mid.attempts)).toEqual([
      { attempt: 1, outcome: 'stale', error: "the job's lease (fence 1) was taken by another runner" },
      { attempt: 2, outcome: 'running', error: null },
    ]);

    attempt2.resolve({ from: 2 });
    await b.runtime.idle();
    const end = await b.runtime.details(jobId);
    expect(end.job).toMatchObject({ value: 'review', context: { output: { from: 2 } } });
    expect(summary(end.attempts).map((x) => [x.attempt, x.outcome])).toEqual([
      [1, 'stale'],
      [2, 'succeeded'],
    ]);
    expect(end.history.filter((h) => h.eventType === 'xstate.done.actor.work').map((h) => [h.outcome, h.runner, h.fence])).toEqual([['applied', b.runtime.runnerId, 2]]);
  });

  it('a late failure after a success is refused by its fence: the state and output stay', async () => {
    const { a, b, jobId, attempt1, attempt2 } = await supersede();
    attempt2.resolve({ from: 2 });
    await b.runtime.idle();
    expect(await b.runtime.get(jobId)).toMatchObject({ value: 'review', context: { output: { from: 2 } } });
    const revision = (await b.runtime.get(jobId)).revision;

    attempt1.reject(new TerminalError('attempt 1 blew up late'));
    await a.runtime.idle();
    const end = await a.runtime.details(jobId);
    expect(end.job).toMatchObject({ value: 'review', context: { output: { from: 2 }, error: null }, revision });
    expect(end.events.filter((e) => e.source === 'effect').map((e) => [e.type, e.attempt, e.status])).toEqual([['xstate.done.actor.work', 2, 'applied']]);
    expect(summary(end.attempts).map((x) => [x.attempt, x.outcome])).toEqual([
      [1, 'stale'],
      [2, 'succeeded'],
    ]);
  });

  it('an outcome event delivered again under its id is a duplicate and is not applied twice', async () => {
    const { runtime, store } = await open();
    const jobId = await startWorking(runtime);
    await runtime.idle();
    const done = (await runtime.events(jobId)).find((e) => e.type === 'xstate.done.actor.work')!;
    expect(done.status).toBe('applied');
    const before = await dumpRows(store);
    const again = await store.acceptEvent({
      jobId,
      eventId: done.eventId,
      type: done.type,
      payload: done.payload,
      payloadHash: done.payloadHash,
      at: 1,
      source: 'effect',
      sourceId: done.sourceId,
      attempt: done.attempt,
    });
    expect(again.duplicate).toBe(true);
    expect(await runtime.processPending()).toBe(0);
    // Rows are unchanged (SQLite's AUTOINCREMENT counter may move on a conflicting insert: not a row).
    const { sqlite_sequence: _a, ...rowsBefore } = before;
    const { sqlite_sequence: _b, ...rowsAfter } = await dumpRows(store);
    expect(rowsAfter).toEqual(rowsBefore);
  });
});

describe('retries', () => {
  it('honours retryAfterMs (RetryableError and duck-typed) instead of the backoff', async () => {
    const { runtime, clock, store } = await open();
    workHooks.work = async (args) => {
      if (args.attempt === 1) throw new RetryableError('rate limited', { retryAfterMs: 7000 });
      if (args.attempt === 2) throw Object.assign(new Error('busy'), { retryAfterMs: 123 });
      return 'ok';
    };
    const jobId = await startWorking(runtime);
    const key = effectIdOf(jobId);
    await runtime.idle();
    expect(await store.getEffect(key)).toMatchObject({ status: 'backoff', nextRunAt: T0 + 7000 });
    clock.advance(6999);
    expect((await runtime.tick()).activitiesStarted).toBe(0);
    clock.advance(1);
    expect((await runtime.tick()).activitiesStarted).toBe(1);
    await runtime.idle();
    expect(await store.getEffect(key)).toMatchObject({ status: 'backoff', nextRunAt: T0 + 7000 + 123 });
    clock.advance(123);
    await runtime.tick();
    await runtime.idle();
    expect(await runtime.get(jobId)).toMatchObject({ value: 'review', context: { output: 'ok' } });
  });

  it.each([
    ['TerminalError', () => new TerminalError('card declined'), 'TerminalError'],
    ['{ terminal: true }', () => Object.assign(new Error('card declined'), { terminal: true }), 'Error'],
    ['{ retryable: false }', () => Object.assign(new Error('card declined'), { retryable: false, code: 'DECLINED' }), 'Error'],
  ])('does not retry %s: the machine gets xstate.error.actor.work after one attempt', async (_name, make, errorName) => {
    const { runtime, store } = await open();
    let calls = 0;
    workHooks.work = async () => {
      calls += 1;
      throw make();
    };
    const jobId = await startWorking(runtime);
    await runtime.idle();
    expect(calls).toBe(1);
    const job = await runtime.get(jobId);
    expect(job.value).toBe('failed');
    const error = (job.context as { error: Record<string, unknown> }).error;
    expect(error).toMatchObject({ name: errorName, message: 'card declined', attempts: 1 });
    expect(error['code']).not.toBe('SPOOL_RETRIES_EXHAUSTED');
    expect(await store.getEffect(effectIdOf(jobId))).toMatchObject({ status: 'failed', attempt: 1 });
    expect(await runtime.nextWakeAt()).toBeNull();
    // A terminal error is not "exhausted retries".
    expect((await runtime.list({ exhausted: true })).map((j) => j.id)).toEqual([]);
  });

  it('honours retryOn in the policy', async () => {
    const machine = { ...work, id: 'work-retry-on', activities: { work: { ...WORK_POLICY, retryOn: (e: { message: string }) => !e.message.includes('fatal') } } };
    const { runtime } = await openRuntime(res, [machine]);
    let calls = 0;
    workHooks.work = async () => {
      calls += 1;
      throw new Error('fatal: bad request');
    };
    const job = await runtime.start('work-retry-on', {});
    await runtime.send(job.id, { type: 'GO' });
    await runtime.idle();
    expect(calls).toBe(1);
    expect((await runtime.get(job.id)).value).toBe('failed');
  });

  it('a retry lets its job\'s lease go in a group-committed batch, never in a transaction of its own', async () => {
    const clock = new VirtualClock(T0);
    const inner = await res.sqlite(res.dbPath(), { clock });
    const alone: string[] = [];
    const batched: string[] = [];
    const store = new Proxy(inner, {
      get(target, key) {
        if (key === 'releaseLeases') return async (runner: string, jobIds: readonly string[] | 'all') => (alone.push(String(jobIds)), target.releaseLeases(runner, jobIds));
        if (key === 'writeBatch') return async (batch: WriteBatch) => (batched.push(...(batch.releases ?? []).flatMap((r) => r.jobIds)), target.writeBatch(batch));
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const runtime = await res.runtime({ store, machines: MACHINES, clock });
    workHooks.work = async (args) => {
      if (args.attempt === 1) throw new Error('flaky');
      return 'ok';
    };
    const jobId = await startWorking(runtime);
    await runtime.idle();
    // Attempt 1 failed and waits for its backoff: nothing runs on the job here, so its lease is free.
    expect(await inner.getEffect(effectIdOf(jobId))).toMatchObject({ status: 'backoff', attempt: 1 });
    expect((await inner.getJob(jobId))?.lease).toBeNull();
    expect(batched).toEqual([jobId]);
    expect(alone).toEqual([]);
    clock.advance(backoffDelay(WORK_POLICY, 1, effectIdOf(jobId)));
    await runtime.tick();
    await runtime.idle();
    expect(await runtime.get(jobId)).toMatchObject({ value: 'review', context: { output: 'ok' } });
  });

  it('keeps a retry’s deadline across a restart: the next runtime starts attempt 2 then, not earlier', async () => {
    const first = await open();
    workHooks.work = async (args) => {
      if (args.attempt === 1) throw new Error('flaky');
      return `attempt ${args.attempt}`;
    };
    const jobId = await startWorking(first.runtime);
    await first.runtime.idle();
    const key = effectIdOf(jobId);
    const retryAt = T0 + backoffDelay(WORK_POLICY, 1, key);
    expect(await first.store.getEffect(key)).toMatchObject({ status: 'backoff', nextRunAt: retryAt });
    await first.runtime.close();

    const second = await open({ path: first.path, clock: first.clock });
    expect(await second.runtime.nextWakeAt()).toBe(retryAt);
    second.clock.set(retryAt - 1);
    expect((await second.runtime.tick()).activitiesStarted).toBe(0);
    second.clock.set(retryAt);
    expect((await second.runtime.tick()).activitiesStarted).toBe(1);
    await second.runtime.idle();
    expect(await second.runtime.get(jobId)).toMatchObject({ value: 'review', context: { output: 'attempt 2' } });
  });

  it('an output that is not JSON fails the attempt terminally (no retry) with a message that says so', async () => {
    const { runtime } = await open();
    let calls = 0;
    workHooks.work = async () => {
      calls += 1;
      return { big: 10n };
    };
    const jobId = await startWorking(runtime);
    await runtime.idle();
    expect(calls).toBe(1);
    const job = await runtime.get(jobId);
    expect(job.value).toBe('failed');
    expect((job.context as { error: { message: string } }).error.message).toMatch(/activity output is not JSON/);
  });

  it('exhausting the attempts delivers xstate.error.actor.work; every attempt’s start, end and error is kept; list({ exhausted }) finds it', async () => {
    const { runtime, clock } = await open();
    workHooks.work = async (args) => {
      throw new Error(`down #${args.attempt}`);
    };
    const other = await runtime.start('work', {}); // stays idle: not exhausted
    const jobId = await startWorking(runtime);
    const end = await runToEnd(runtime, clock, jobId);
    expect(end.value).toBe('failed');
    expect((end.context as { error: unknown }).error).toEqual({ name: 'Error', message: 'down #3', code: 'SPOOL_RETRIES_EXHAUSTED', attempts: 3 });

    const details = await runtime.details(jobId);
    expect(summary(details.attempts)).toEqual([
      { attempt: 1, outcome: 'failed', error: 'down #1' },
      { attempt: 2, outcome: 'failed', error: 'down #2' },
      { attempt: 3, outcome: 'failed', error: 'down #3' },
    ]);
    const key = effectIdOf(jobId);
    const d1 = backoffDelay(WORK_POLICY, 1, key);
    const d2 = backoffDelay(WORK_POLICY, 2, key);
    expect(details.attempts.map((a) => a.startedAt - T0)).toEqual([0, d1, d1 + d2]);
    expect(details.attempts.every((a) => a.endedAt === a.startedAt)).toBe(true);
    expect(details.history.filter((h) => h.eventType === 'xstate.error.actor.work').map((h) => h.outcome)).toEqual(['applied']);
    expect((await runtime.list({ exhausted: true })).map((j) => j.id)).toEqual([jobId]);
    expect((await runtime.list({ exhausted: false })).map((j) => j.id)).toEqual([other.id]);
  });
});

describe('out-of-band completion tokens', () => {
  /** A job whose activity defers; resolves with the token once it has been handed out. */
  async function deferred(o: Opened): Promise<{ jobId: string; token: string; statusInside: unknown }> {
    const handed = gate<{ token: string; statusInside: unknown }>();
    workHooks.work = async (args) =>
      args.defer(async (token) => {
        const effect = await o.store.getEffect(args.idempotencyKey);
        handed.resolve({ token, statusInside: { status: effect?.status, token: effect?.token === token } });
      });
    const jobId = await startWorking(o.runtime);
    const { token, statusInside } = await handed.promise;
    await o.runtime.idle();
    return { jobId, token, statusInside };
  }

  it('hands the token out once the wait is durable; complete() settles once, a second use is a TokenError', async () => {
    const o = await open();
    const { runtime, store, seen } = o;
    const { jobId, token, statusInside } = await deferred(o);
    expect(statusInside).toEqual({ status: 'waiting', token: true });
    expect(seen.find((e) => e.type === 'activity.finished')).toMatchObject({ outcome: 'waiting', attempt: 1 });
    expect((await runtime.get(jobId)).value).toBe('working');
    expect(summary(await store.listAttempts(jobId))).toEqual([{ attempt: 1, outcome: 'waiting', error: null }]);

    const job = await runtime.complete(token, { approvedBy: 'ann' });
    expect(job).toMatchObject({ value: 'review', context: { output: { approvedBy: 'ann' } } });
    const before = await dumpRows(store);
    await expect(runtime.complete(token, { approvedBy: 'bob' })).rejects.toBeInstanceOf(TokenError);
    await expect(runtime.fail(token, { name: 'Late', message: 'too late' })).rejects.toBeInstanceOf(TokenError); // late failure after success
    expect(await dumpRows(store)).toEqual(before);
    const details = await runtime.details(jobId);
    expect(details.history.filter((h) => h.eventType === 'xstate.done.actor.work').map((h) => h.outcome)).toEqual(['applied']);
    expect(summary(details.attempts)).toEqual([{ attempt: 1, outcome: 'succeeded', error: null }]);
  });

  it('defer() without a callback: the token is in details(), and completes the activity', async () => {
    const o = await open();
    const { runtime } = o;
    workHooks.work = async (args) => args.defer();
    const finished = new Promise<RuntimeEvent>((resolve) => runtime.subscribe((e) => e.type === 'activity.finished' && resolve(e)));
    const jobId = await startWorking(runtime);
    expect(await finished).toMatchObject({ outcome: 'waiting', attempt: 1 });
    await runtime.idle();
    const [effect] = (await runtime.details(jobId)).effects;
    expect(effect).toMatchObject({ status: 'waiting', token: expect.any(String) });
    expect(await runtime.complete(effect!.token!, { approvedBy: 'cy' })).toMatchObject({ value: 'review', context: { output: { approvedBy: 'cy' } } });
  });

  it('malformed tokens and rejected payloads are typed errors, and the token still works afterwards', async () => {
    const o = await open({ maxPayloadBytes: 1024 });
    const { runtime, store } = o;
    const { jobId, token } = await deferred(o);
    const before = await dumpRows(store);
    for (const bad of ['', 'short', `${token} `, 'x'.repeat(200), `${token.slice(0, -1)}!`, 42 as unknown as string]) {
      await expect(runtime.complete(bad, 'x')).rejects.toBeInstanceOf(TokenError);
    }
    await expect(runtime.complete('A'.repeat(48), 'x')).rejects.toBeInstanceOf(TokenError); // well-formed, unknown
    await expect(runtime.complete(token, { blob: 'x'.repeat(2000) })).rejects.toBeInstanceOf(PayloadTooLargeError);
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    await expect(runtime.complete(token, circular)).rejects.toBeInstanceOf(ValidationError);
    await expect(runtime.fail(token, { message: 'y'.repeat(2000) })).rejects.toBeInstanceOf(PayloadTooLargeError);
    expect(await dumpRows(store)).toEqual(before);

    const job = await runtime.complete(token, { small: true });
    expect(job).toMatchObject({ value: 'review', context: { output: { small: true } } });
    expect(job.revision).toBe(3);
  });

  it('a token outlives the runtime that handed it out: after a restart complete() settles it', async () => {
    const o = await open();
    const { jobId, token } = await deferred(o);
    await o.runtime.close();
    let reruns = 0;
    workHooks.work = async () => {
      reruns += 1;
      return 'should not run again';
    };
    const second = await open({ path: o.path, clock: o.clock });
    await second.runtime.tick();
    await second.runtime.idle();
    expect(reruns).toBe(0); // a waiting activity is not re-run on restart
    const job = await second.runtime.complete(token, { later: true });
    expect(job).toMatchObject({ value: 'review', context: { output: { later: true } } });
    expect(summary(await second.store.listAttempts(jobId))).toEqual([{ attempt: 1, outcome: 'succeeded', error: null }]);
  });

  it('fail(token, error) delivers xstate.error.actor.work with the error', async () => {
    const o = await open();
    const { jobId, token } = await deferred(o);
    const job = await o.runtime.fail(token, { name: 'Declined', message: 'the reviewer said no' });
    expect(job.value).toBe('failed');
    expect((job.context as { error: unknown }).error).toMatchObject({ name: 'Declined', message: 'the reviewer said no' });
    expect(summary(await o.store.listAttempts(jobId))).toEqual([{ attempt: 1, outcome: 'failed', error: 'the reviewer said no' }]);
    await expect(o.runtime.complete(token, 'late')).rejects.toBeInstanceOf(TokenError);
  });

  it('fail(token, new Error(...)) delivers the Error as its name and message', async () => {
    const o = await open();
    const { jobId, token } = await deferred(o);
    const job = await o.runtime.fail(token, new RangeError('out of stock'));
    expect(job.value).toBe('failed');
    expect((job.context as { error: unknown }).error).toMatchObject({ name: 'RangeError', message: 'out of stock' });
    expect(summary(await o.store.listAttempts(jobId))).toEqual([{ attempt: 1, outcome: 'failed', error: 'out of stock' }]);
  });

  it('a token raced against an `after` timeout: once the timeout fired, complete() is a TokenError and nothing changes', async () => {
    const o = await open();
    const { runtime, store, clock } = o;
    const { jobId, token } = await deferred(o);
    clock.advance(WORK_TIMEOUT_MS);
    await runtime.tick();
    await runtime.idle();
    expect((await runtime.get(jobId)).value).toBe('timedOut');
    const before = await dumpRows(store);
    await expect(runtime.complete(token, { tooLate: true })).rejects.toBeInstanceOf(TokenError);
    await expect(runtime.fail(token, 'too late')).rejects.toBeInstanceOf(TokenError);
    expect(await dumpRows(store)).toEqual(before);
    expect(await runtime.get(jobId)).toMatchObject({ value: 'timedOut', context: { output: null } });
  });
});

describe('progress, assets and purge', () => {
  it('progress() from an activity updates job.progress; once the job is final setProgress is ignored with a note', async () => {
    const { runtime } = await open();
    const reported = gate();
    const release = gate<unknown>();
    workHooks.work = async (args) => {
      await args.progress(40);
      reported.resolve();
      return release.promise;
    };
    const jobId = await startWorking(runtime);
    await reported.promise;
    expect((await runtime.get(jobId)).progress).toBe(40);
    release.resolve('ok');
    await runtime.idle();
    await runtime.send(jobId, { type: 'ACCEPT' });
    const done = await runtime.get(jobId);
    expect(done).toMatchObject({ value: 'done', final: true, progress: 40 });

    const after = await runtime.setProgress(jobId, 90);
    expect(after.progress).toBe(40);
    expect(after.revision).toBe(done.revision);
    const details = await runtime.details(jobId);
    expect(details.notes).toEqual([{ jobId, kind: 'progress-ignored', message: expect.stringContaining('90') as unknown as string, at: T0 }]);
    await expect(runtime.setProgress(jobId, 101)).rejects.toBeInstanceOf(ValidationError);
  });

  it("the commit that applies an outcome reported after progress carries that progress, not the one the runtime knew before", async () => {
    // On Postgres that commit goes ahead of its answers, expecting the progress the runtime knows
    // (deferred.ts, "Sent ahead"; test/postgres.pg.test.ts has that statement refuse a stale one).
    const { runtime, seen } = await open();
    workHooks.work = async (args) => {
      await args.progress(40);
      return 'ok';
    };
    const jobId = await startWorking(runtime);
    await runtime.idle();
    const outcome = seen.find((e): e is Extract<RuntimeEvent, { type: 'job.committed' }> => e.type === 'job.committed' && e.jobId === jobId && e.transition.eventType.startsWith('xstate.done.actor.'));
    expect(outcome?.job.progress).toBe(40);
    expect((await runtime.get(jobId)).progress).toBe(40);
    expect(await runtime.send(jobId, { type: 'ACCEPT' })).toMatchObject({ status: 'applied', job: { progress: 40 } });
  });

  it('an asset attached by attempts 1 and 2 is attached once', async () => {
    const { runtime, clock } = await open();
    workHooks.work = async (args) => {
      await args.attachAsset({ type: 'report/pdf', uri: 'file:///out/report.pdf', size: 10 * args.attempt });
      if (args.attempt === 1) throw new Error('upload half done');
      await args.attachAsset({ type: 'log', uri: 'file:///out/log.txt' });
      return 'ok';
    };
    const jobId = await startWorking(runtime);
    const end = await runToEnd(runtime, clock, jobId, (job) => job.value !== 'working');
    expect(end.value).toBe('review');
    const { assets } = await runtime.details(jobId);
    expect(assets.map((a) => ({ uri: a.uri, attempt: a.attempt, size: a.size, effectId: a.effectId }))).toEqual([
      { uri: 'file:///out/report.pdf', attempt: 1, size: 10, effectId: effectIdOf(jobId) },
      { uri: 'file:///out/log.txt', attempt: 2, size: null, effectId: effectIdOf(jobId) },
    ]);
  });

  it('purge removes the job with its history, inbox, effects, attempts, timers, notes and assets', async () => {
    const { runtime, store } = await open();
    workHooks.work = async (args) => {
      await args.attachAsset({ type: 'x', uri: 'mem://x' });
      return 'ok';
    };
    const jobId = await startWorking(runtime);
    const keep = await startWorking(runtime);
    await runtime.idle();
    await expect(runtime.purge(jobId)).rejects.toBeInstanceOf(JobNotFinishedError);
    // An event queued in the inbox and applied from there (ignored) gives the job an inbox row: its
    // outcome and its sends are recorded by their history rows alone.
    await store.acceptEvent({ jobId, eventId: 'queued-noop', type: 'NOOP', payload: { type: 'NOOP' }, payloadHash: 'h', at: 1 });
    await runtime.processPending();
    await runtime.send(jobId, { type: 'ACCEPT' });
    await runtime.setProgress(jobId, 5); // leaves a note
    // `attempts`: the view of every attempt (a latest one lives on its effect row; effect_attempts holds the ones before it).
    const tables = ['jobs', 'transitions', 'inbox', 'effects', 'attempts', 'timers', 'notes', 'assets'];
    for (const table of tables) expect((await rowsOf(store, table, jobId)).length, table).toBeGreaterThan(0);
    const rowCounts = async (id: string) => Promise.all(tables.map(async (t) => (await rowsOf(store, t, id)).length));
    const otherBefore = await rowCounts(keep);
    await runtime.purge(jobId);
    for (const table of [...tables, 'effect_attempts']) expect(await rowsOf(store, table, jobId), table).toEqual([]);
    expect(await rowCounts(keep)).toEqual(otherBefore);
    await expect(runtime.get(jobId)).rejects.toBeInstanceOf(JobNotFoundError);
  });
});

describe('reference machines with activities, under the VirtualClock', () => {
  it('retrying-job with one flaky attempt completes after 2 attempts', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('retrying-job', { name: 'r', items: 4, flakyAttempts: 1, autoStart: true });
    const end = await runToEnd(runtime, clock, job.id);
    expect(end).toMatchObject({ value: 'completed', progress: 100, context: { succeeded: 4, failed: 0 } });
    const details = await runtime.details(job.id);
    expect(summary(details.attempts)).toEqual([
      { attempt: 1, outcome: 'failed', error: 'provider unavailable (attempt 1)' },
      { attempt: 2, outcome: 'succeeded', error: null },
    ]);
    const key = details.effects[0]!.id;
    expect(details.attempts[1]!.startedAt - details.attempts[0]!.endedAt!).toBe(backoffDelay(retryingJob.activities.process, 1, key));
    expect((await runtime.list({ exhausted: true })).length).toBe(0);
  });

  it('retrying-job failing more often than its 3 attempts ends failed and is listed as exhausted', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('retrying-job', { name: 'r', flakyAttempts: 5, autoStart: true });
    const end = await runToEnd(runtime, clock, job.id);
    expect(end).toMatchObject({ value: 'failed', context: { error: 'provider unavailable (attempt 3)' } });
    expect((await runtime.details(job.id)).attempts.map((a) => a.outcome)).toEqual(['failed', 'failed', 'failed']);
    expect((await runtime.list({ exhausted: true })).map((j) => j.id)).toEqual([job.id]);
  });

  it('export-job completes with one asset and progress 100, even after a retried export', async () => {
    const { runtime, clock } = await open();
    const job = await runtime.start('export-job', { dataset: 'sales', rows: 10, flakyAttempts: 1 });
    const end = await runToEnd(runtime, clock, job.id);
    expect(end).toMatchObject({ value: 'completed', progress: 100, context: { reconciled: false, progress: 100 } });
    const details = await runtime.details(job.id);
    expect(details.assets).toHaveLength(1);
    expect(details.assets[0]).toMatchObject({ type: 'export/csv', size: 480 });
    expect(details.assets[0]!.uri).toBe((end.context as { result: { uri: string } }).result.uri);
    expect(details.effects.map((e) => [e.src, e.status, e.attempt])).toEqual([
      ['reserve', 'succeeded', 1],
      ['export', 'succeeded', 2],
    ]);
    expect(details.history.map((h) => h.to)).toEqual(['reserving', 'exporting', 'completed']);
  });
});

describe('registration refuses machines Spool cannot run durably', () => {
  const promise = fromPromise(async () => 1);
  const cases: Array<[string, () => unknown, RegExp]> = [
    [
      'an inline actor',
      () => createMachine({ id: 'inline', initial: 'a', states: { a: { invoke: { id: 'upload', src: fromPromise(async () => 1) } } } }),
      /inline logic.*Declare it by name: setup\(\{ actors: \{ upload: fromPromise/,
    ],
    [
      'a child machine that invokes inline logic',
      () =>
        setup({ actors: { child: createMachine({ id: 'child', initial: 'a', states: { a: { invoke: { id: 'x', src: promise } } } }) } }).createMachine({
          id: 'parent',
          initial: 'a',
          states: { a: { invoke: { id: 'child', src: 'child' } } },
        }),
      /Machine "parent\.child", state "child\.a": invoke "x" uses inline logic/,
    ],
    [
      'callback logic',
      () => setup({ actors: { cb: fromCallback(() => () => undefined) } }).createMachine({ id: 'cb', initial: 'a', states: { a: { invoke: { id: 'cb', src: 'cb' } } } }),
      /callback\/observable logic, which cannot be persisted; Spool runs fromPromise activities and child machines durably/,
    ],
  ];
  it.each(cases)('refuses %s with a MachineDefinitionError that says how to fix it', async (_name, build, message) => {
    const machine = build() as Parameters<MachineRegistry['register']>[0];
    expect(() => new MachineRegistry([machine])).toThrow(MachineDefinitionError);
    expect(() => new MachineRegistry([machine])).toThrow(message);
    const path = res.dbPath();
    const store = await res.sqlite(path);
    await expect(openRuntime(res, [machine], { path })).rejects.toBeInstanceOf(MachineDefinitionError);
    expect(await store.listJobs({})).toEqual([]);
  });

  it('accepts the same machine once its invoke has an id and a named fromPromise src', () => {
    const ok = setup({ actors: { upload: promise } }).createMachine({
      id: 'fine',
      initial: 'a',
      context: { n: 0 },
      states: { a: { invoke: { id: 'upload', src: 'upload', onDone: { actions: assign({ n: 1 }) } } } },
    });
    expect(new MachineRegistry([ok]).latest('fine').id).toBe('fine');
  });

  it("runs an invoke without an id under XState's own id, the same after a restart", async () => {
    let hang = true; // the first runtime's attempt is still running when it closes
    const started = gate();
    // A fresh machine object per runtime, as a new process would build it from its module.
    const build = () =>
      setup({
        actors: {
          upload: fromPromise(async ({ input, signal }: { input: { n: number }; signal: AbortSignal }) => {
            started.resolve();
            return hang ? untilAborted(signal) : input.n + 1;
          }),
        },
      }).createMachine({
        id: 'no-id',
        initial: 'a',
        context: { n: 0 },
        states: {
          a: { invoke: { src: 'upload', input: ({ context }) => ({ n: context.n }), onDone: { target: 'b', actions: assign({ n: ({ event }) => event.output }) } } },
          b: { invoke: { src: 'upload', input: ({ context }) => ({ n: context.n }), onDone: { target: 'done', actions: assign({ n: ({ event }) => event.output }) } } },
          done: { type: 'final' },
        },
      });
    const first = await openRuntime(res, [build()]);
    const job = await first.runtime.start('no-id', {});
    await started.promise;
    expect((await first.runtime.details(job.id)).effects.map((e) => [e.id, e.actorId])).toEqual([[`${job.id}~0.no-id.a~r1`, '0.no-id.a']]);
    await first.runtime.close();

    hang = false;
    const second = await openRuntime(res, [build()], { path: first.path, clock: first.clock });
    const end = await runToEnd(second.runtime, second.clock, job.id);
    expect(end).toMatchObject({ value: 'done', status: 'done', context: { n: 2 } });
    const after = await second.runtime.details(job.id);
    expect(after.effects.map((e) => [e.actorId, e.status, e.attempt])).toEqual([
      ['0.no-id.a', 'succeeded', 2],
      ['0.no-id.b', 'succeeded', 1],
    ]);
    expect(after.history.map((h) => h.eventType)).toEqual(['xstate.init', 'xstate.done.actor.0.no-id.a', 'xstate.done.actor.0.no-id.b']);
  });
});
