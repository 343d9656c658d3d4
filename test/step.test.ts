/**
 * The pure step (src/step), called directly: what one event means for one job, as data, with no
 * store, clock or runtime around it. The runtime's tests prove the same rules end to end.
 */
import { describe, expect, it } from 'vitest';
import { assign, createMachine, fromPromise, raise, sendTo, setup } from 'xstate';
import { MachineRegistry, ValidationError, type JobRecord, type JsonValue, type RegisteredMachine } from '../src/internal.ts';
import { hydrate, parseSnapshot } from '../src/base/hydrate.ts';
import { afterFailedAttempt, backoffDelay, DEFAULT_RETRY, interruptedError, maxAttemptsOf } from '../src/step/attempts.ts';
import { needsChildren, startStep, step, type Step, type StepInput } from '../src/step/step.ts';

const T0 = 1_700_000_000_000;

const reviewer = createMachine({ id: 'reviewer', initial: 'open', states: { open: { on: { OK: 'done' } }, done: { type: 'final' } } });

const order = setup({
  types: { context: {} as { card: string; count: number } },
  actors: { charge: fromPromise(async () => 'ok'), reviewer },
  guards: {
    checked: ({ event }) => {
      const card = (event as unknown as { card?: string }).card;
      if (card === 'boom') throw new Error(`card ${card} refused`);
      return true;
    },
  },
}).createMachine({
  id: 'order',
  initial: 'idle',
  context: ({ input }) => ({ card: (input as { card: string }).card, count: 0 }),
  states: {
    idle: {
      on: {
        BUMP: { actions: assign({ count: ({ context }) => context.count + 1 }) },
        CHECK: { guard: 'checked', target: 'idle' },
        LEAK: { guard: ({ context }) => { throw new Error(`cannot use ${context.card}`); }, target: 'idle' },
        LATER: { actions: raise({ type: 'WAKE' }, { delay: 5000, id: 'wake' }) },
        PAY: 'paying',
        REVIEW: 'reviewing',
      },
    },
    paying: { invoke: { id: 'pay', src: 'charge', input: ({ context }) => ({ card: context.card }) } },
    reviewing: { invoke: { id: 'rev', src: 'reviewer' }, on: { NUDGE: { actions: sendTo('rev', { type: 'OK' }) } } },
  },
});


function registered(): { def: RegisteredMachine; registry: MachineRegistry } {
  const registry = new MachineRegistry([{ machine: order, sensitive: ['card'], activities: { charge: { maxAttempts: 5 } } }]);
  return { def: registry.latest('order'), registry };
}

/** A job as the store would hand it back after `startStep`. */
function started(card = '4111222233334444'): { input: Omit<StepInput, 'event' | 'source'>; record: JobRecord } {
  const { def, registry } = registered();
  const s = startStep({ def, input: { card }, jobId: 'j1', idempotencyKey: null, inputHash: 'h', owner: null, runner: 'r1', now: T0, machines: (id, v) => registry.get(id, v) });
  const record: JobRecord = {
    ...s.job,
    revision: 1,
    input: s.job.input,
    quarantine: null,
    progress: null,
    cancelRequestedAt: null,
    cancelReason: null,
    suspendedAt: null,
    suspendReason: null,
    parent: null,
    lease: null,
    createdAt: T0,
    updatedAt: T0,
  } as JobRecord;
  const json = parseSnapshot(record.snapshot);
  if (typeof json === 'string') throw new Error(json);
  const h = hydrate(def, json, record.status);
  if (!h.ok) throw new Error(h.reason);
  return { input: { job: record, def, snapshot: h.snapshot, actor: h.actor, now: T0 + 1000, children: new Map(), machines: (id, v) => registry.get(id, v), runner: 'r1' }, record };
}

/** The step's input for the job after `s` committed. */
function advanced(input: Omit<StepInput, 'event' | 'source'>, s: Step): Pick<StepInput, 'job' | 'snapshot' | 'actor'> {
  const job = { ...input.job, revision: input.job.revision + 1, status: s.commit.job.status, value: s.commit.job.value, context: s.commit.job.context, snapshot: s.commit.job.snapshot };
  const json = parseSnapshot(job.snapshot);
  if (typeof json === 'string') throw new Error(json);
  const h = hydrate(input.def, json, job.status);
  if (!h.ok) throw new Error(h.reason);
  return { job, snapshot: h.snapshot, actor: h.actor };
}

function send(event: JsonValue, extra: Partial<StepInput> = {}) {
  const { input } = started();
  return step({ ...input, event, source: { seq: 7, eventId: 'e1' }, ...extra });
}

describe('the start step', () => {
  it('builds revision 1 of the job: its snapshot as JSON text, its first history record, its input redacted', () => {
    const { def, registry } = registered();
    const s = startStep({ def, input: { card: '4111222233334444' }, jobId: 'j1', idempotencyKey: 'k', inputHash: 'h', owner: 'o', runner: 'r1', now: T0, machines: (id, v) => registry.get(id, v) });
    expect(s.job).toMatchObject({ id: 'j1', machineId: 'order', status: 'active', value: 'idle', input: { card: '[redacted]' }, idempotencyKey: 'k', owner: 'o', runner: 'r1', at: T0 });
    expect(JSON.parse(s.job.snapshot)).toMatchObject({ value: 'idle', context: { count: 0 } });
    expect(s.job.transition).toEqual({ eventId: null, eventType: 'xstate.init', payload: { card: '[redacted]' }, from: null, to: 'idle', outcome: 'started', error: null, at: T0 });
    expect(s.plan.effects.create).toEqual([]);
  });

  it('refuses a machine that cannot start with this input, the sensitive value redacted from the message', () => {
    const bad = createMachine({ id: 'bad', context: ({ input }) => { throw new Error(`no ${(input as { card: string }).card}`); } });
    const registry = new MachineRegistry([{ machine: bad, sensitive: ['card'] }]);
    const start = () => startStep({ def: registry.latest('bad'), input: { card: '4111' }, jobId: 'j', idempotencyKey: null, inputHash: 'h', owner: null, runner: 'r', now: T0, machines: (id, v) => registry.get(id, v) });
    expect(start).toThrow(ValidationError);
    expect(start).toThrow('Machine bad could not start with this input: no [redacted]');
  });
});

describe('the step', () => {
  it('applied: the new snapshot, its JSON once, the history draft and the inbox event it settles', () => {
    const s = send({ type: 'BUMP' });
    expect(s.status).toBe('applied');
    expect(s.error).toBeNull();
    expect(s.next.context).toMatchObject({ count: 1 });
    expect(JSON.parse(s.commit.job.snapshot)).toMatchObject({ context: { count: 1 } });
    expect(s.commit).toMatchObject({ jobId: 'j1', expectedRevision: 1, job: { status: 'active', value: 'idle', context: { count: 1 }, at: T0 + 1000 } });
    // The context's text, made with its copy, is what the store writes: the copy's own JSON.
    expect(s.commit.job.contextJson).toBe(JSON.stringify(s.commit.job.context));
    expect(s.commit.transition).toEqual({ eventId: 'e1', eventType: 'BUMP', payload: { type: 'BUMP' }, from: 'idle', to: 'idle', outcome: 'applied', error: null, at: T0 + 1000 });
    expect(s.commit.event).toEqual({ seq: 7, status: 'applied', error: null, payload: { type: 'BUMP' } });
  });

  it('ignored: an unhandled event keeps the stored snapshot text as it is, and plans nothing', () => {
    const { input, record } = started();
    const s = step({ ...input, event: { type: 'NOPE' }, source: { seq: 1, eventId: 'e' } });
    expect(s.status).toBe('ignored');
    expect(s.next).toBe(input.snapshot);
    expect(s.commit.job.snapshot).toBe(record.snapshot);
    expect(s.plan).toBeUndefined();
    expect(s.commit.effects).toBeUndefined();
  });

  it('failed: a guard that throws is the poison event, its state kept, the sensitive value redacted from the error', () => {
    const s = send({ type: 'CHECK', card: 'boom' });
    expect(s.status).toBe('failed');
    expect(s.next.value).toBe('idle');
    expect(s.commit.transition.outcome).toBe('failed');
    // `card` is sensitive: the event's value is redacted from the message and the stored payload.
    expect(s.error?.message).not.toContain('boom');
    expect(s.error?.message).toContain('[redacted]');
    expect(s.commit.transition.payload).toEqual({ type: 'CHECK', card: '[redacted]' });
  });

  it('failed: an error quoting a sensitive value of the context is redacted', () => {
    const s = send({ type: 'LEAK' });
    expect(s.status).toBe('failed');
    expect(s.error?.message).toContain('cannot use [redacted]');
    expect(s.error?.message).not.toContain('4111222233334444');
  });

  it('stale: recorded with its reason, nothing computed', () => {
    const s = send({ type: 'BUMP' }, { stale: 'timer t1 was cancelled' });
    expect(s.status).toBe('stale');
    expect(s.error).toEqual({ name: 'StaleOutcome', message: 'timer t1 was cancelled' });
    expect(s.next.context).toMatchObject({ count: 0 });
  });

  it('a delayed raise becomes a timer with an absolute deadline', () => {
    const s = send({ type: 'LATER' });
    expect(s.status).toBe('applied');
    expect(s.commit.timers?.schedule).toEqual([
      { id: 'j1~wake~r2', jobId: 'j1', key: 'wake', kind: 'raise', event: { type: 'WAKE' }, dueAt: T0 + 1000 + 5000, createdRevision: 2, createdAt: T0 + 1000 },
    ]);
  });

  it('an invoked fromPromise becomes an effect whose id is its idempotency key, with its policy', () => {
    const s = send({ type: 'PAY' });
    expect(s.commit.effects?.create).toEqual([
      { id: 'j1~pay~r2', jobId: 'j1', actorId: 'pay', src: 'charge', input: { card: '4111222233334444' }, inputJson: '{"card":"4111222233334444"}', maxAttempts: 5, unsafe: false, createdRevision: 2, at: T0 + 1000 },
    ]);
    expect(s.plan?.effects.create).toHaveLength(1);
  });

  it('a child machine becomes a child job created in the same commit, with its parent effect', () => {
    const { input } = started();
    expect(needsChildren(input.def)).toBe(true);
    const s = step({ ...input, event: { type: 'REVIEW' }, source: { seq: 1, eventId: 'e' } });
    expect(s.status).toBe('applied');
    expect(s.commit.children).toHaveLength(1);
    expect(s.commit.children?.[0]).toMatchObject({ id: 'j1~rev~r2', machineId: 'order.reviewer', parent: { jobId: 'j1', effectId: 'j1~rev~r2' }, value: 'open', runner: 'r1' });
    expect(s.commit.effects?.create).toContainEqual(expect.objectContaining({ id: 'j1~rev~r2', kind: 'child', actorId: 'rev' }));
    expect(s.relations?.touched.has('j1~rev~r2')).toBe(true);
  });

  it('a sendTo a child goes to the child job the bookkeeping lists, and fails when it lists none', () => {
    const { input } = started();
    const reviewing = step({ ...input, event: { type: 'REVIEW' }, source: { seq: 1, eventId: 'e' } });
    const after = { ...input, ...advanced(input, reviewing) };
    const missing = step({ ...after, event: { type: 'NUDGE' }, source: { seq: 2, eventId: 'e2' } });
    expect(missing).toMatchObject({ status: 'failed', error: { name: 'UnsupportedAction', message: 'sendTo rev: no running child machine with that id' } });
    const sent = step({ ...after, children: new Map([['rev', 'j1~rev~r2']]), event: { type: 'NUDGE' }, source: { seq: 2, eventId: 'e2' } });
    expect(sent.status).toBe('applied');
    expect(sent.commit.deliveries).toEqual([expect.objectContaining({ jobId: 'j1~rev~r2', eventId: 'parent~j1~r3~0', type: 'OK', source: 'parent' })]);
  });
});

describe('attempt rules', () => {
  it('default attempts, backoff and exhaustion are decided once', () => {
    expect(maxAttemptsOf(undefined)).toBe(DEFAULT_RETRY.maxAttempts);
    expect(maxAttemptsOf({ maxAttempts: 0 })).toBe(1);
    const error = { name: 'Error', message: 'x' };
    const base = { policy: {}, effectId: 'e', error, terminal: false, retryAfterMs: undefined, now: T0 };
    expect(afterFailedAttempt({ ...base, attempt: 1, maxAttempts: 3 })).toEqual({ retry: true, retryAt: T0 + backoffDelay({}, 1, 'e') });
    expect(afterFailedAttempt({ ...base, attempt: 1, maxAttempts: 3, retryAfterMs: 42 })).toEqual({ retry: true, retryAt: T0 + 42 });
    expect(afterFailedAttempt({ ...base, attempt: 3, maxAttempts: 3 })).toEqual({
      retry: false,
      error: { ...error, code: 'SPOOL_RETRIES_EXHAUSTED' },
      eventError: { ...error, code: 'SPOOL_RETRIES_EXHAUSTED', attempts: 3 },
    });
    expect(afterFailedAttempt({ ...base, attempt: 1, maxAttempts: 3, terminal: true })).toMatchObject({ retry: false, error });
    expect(interruptedError({ src: 'charge', attempt: 1, maxAttempts: 3, unsafe: false })).toBeUndefined();
    expect(interruptedError({ src: 'charge', attempt: 3, maxAttempts: 3, unsafe: false })?.code).toBe('SPOOL_RETRIES_EXHAUSTED');
    expect(interruptedError({ src: 'charge', attempt: 1, maxAttempts: 3, unsafe: true })?.code).toBe('SPOOL_INDETERMINATE');
  });
});
