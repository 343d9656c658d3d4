/**
 * Poison events with values JSON cannot hold: a guard or action that throws a BigInt, an object
 * that refers to itself, a Proxy or an Error whose getters throw; an assign that leaves such a
 * value in context; an action after the commit or an activity that throws one. Each is recorded
 * with a readable error and never blocks the job or the process. Also: sensitive values quoted
 * from the job's context, and odd keys and `toJSON` in events.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup, type AnyStateMachine } from 'xstate';
import { z } from 'zod';
import { MemoryStore } from '../persistence/memory/index.ts';
import { IdempotencyConflictError, ValidationError, type LogEntry, type Runtime, type RuntimeEvent } from '../src/index.ts';
import type { JobStore } from '../src/ports/store.ts';
import { Resources } from './helpers/resources.ts';
import { MAX_MICROSTEPS } from '../src/runtime/registry.ts';
import { openRuntime } from './helpers/durable.ts';
import { work, workHooks } from './fixtures/workMachine.ts';

const res = new Resources();
const defaultWork = workHooks.work;
afterEach(async () => {
  workHooks.work = defaultWork;
  await res.dispose();
});

const CARD = '4111222233334444';

/** What each `kind` throws (or, for an assign, leaves in context). */
function strange(kind: string): unknown {
  switch (kind) {
    case 'bigint':
      return { big: 10n };
    case 'circular': {
      const o: Record<string, unknown> = { name: 'loop' };
      o['self'] = o;
      return o;
    }
    case 'proxy':
      return new Proxy({}, { get: () => { throw new Error('trap'); }, ownKeys: () => { throw new Error('trap'); }, getPrototypeOf: () => { throw new Error('trap'); } });
    case 'getter': {
      const e = new Error('x');
      Object.defineProperty(e, 'message', { get: () => { throw new Error('getter'); } });
      return e;
    }
    case 'object-message':
      return Object.assign(new Error('x'), { message: { nested: true } });
    default:
      throw new Error(`no kind ${kind}`);
  }
}

type PoisonEvent = { type: 'THROW'; kind: string } | { type: 'RAISE'; kind: string } | { type: 'KEEP'; kind: string } | { type: 'AFTER'; kind: string } | { type: 'LEAK' } | { type: 'LEAKOBJ' } | { type: 'OK' } | { type: 'FINISH' } | { type: 'PAY'; card: string };

const poisonMachine = setup({
  types: { context: {} as { n: number; card: string; kept: unknown }, input: {} as { card?: string }, events: {} as PoisonEvent },
  guards: {
    throws: ({ event }) => {
      throw strange((event as { kind: string }).kind);
    },
  },
  actions: {
    count: assign({ n: ({ context }) => context.n + 1 }),
    keep: assign({ kept: ({ event }) => strange((event as { kind: string }).kind) }),
    raise: assign(({ event }) => {
      throw strange((event as { kind: string }).kind);
    }),
    after: ({ event }) => {
      throw strange((event as { kind: string }).kind);
    },
    leak: assign(({ context }) => {
      throw new Error(`the card on file is ${context.card}`);
    }),
    leakObject: assign(({ context }) => {
      throw { detail: { quoted: `card ${context.card}` }, big: 1n };
    }),
    setCard: assign({ card: ({ event }) => (event.type === 'PAY' ? event.card : '') }),
  },
}).createMachine({
  id: 'poison',
  initial: 'open',
  context: ({ input }) => {
    if (input.card === 'refuse') throw new Error('cannot start');
    if (input.card?.startsWith('9')) throw new Error(`cannot start with card ${input.card}`);
    return { n: 0, card: input.card ?? '', kept: null };
  },
  states: {
    open: {
      on: {
        THROW: { guard: 'throws', target: 'done' },
        KEEP: { actions: 'keep' },
        RAISE: { actions: 'raise' },
        AFTER: { actions: ['count', 'after'] },
        LEAK: { actions: 'leak' },
        LEAKOBJ: { actions: 'leakObject' },
        PAY: { actions: ['setCard', 'leak'] },
        OK: { actions: 'count' },
        FINISH: 'done',
      },
    },
    done: { type: 'final' },
  },
});

const kindEvent = (type: string) => z.strictObject({ type: z.literal(type), kind: z.string() });
const poison = {
  machine: poisonMachine,
  version: 1,
  input: z.strictObject({ card: z.string().optional() }),
  events: {
    THROW: kindEvent('THROW'),
    RAISE: kindEvent('RAISE'),
    KEEP: kindEvent('KEEP'),
    AFTER: kindEvent('AFTER'),
    LEAK: z.strictObject({ type: z.literal('LEAK') }),
    LEAKOBJ: z.strictObject({ type: z.literal('LEAKOBJ') }),
    OK: z.strictObject({ type: z.literal('OK') }),
    FINISH: z.strictObject({ type: z.literal('FINISH') }),
    PAY: z.strictObject({ type: z.literal('PAY'), card: z.string() }),
  },
  sensitive: ['card'],
};

async function fresh(kind: 'sqlite' | 'memory', log?: (e: LogEntry) => void): Promise<{ runtime: Runtime; store: JobStore; seen: RuntimeEvent[] }> {
  const store = kind === 'sqlite' ? await res.sqlite(res.dbPath()) : new MemoryStore();
  const runtime = await res.runtime({ store, machines: [poison], ...(log ? { log } : {}) });
  const seen: RuntimeEvent[] = [];
  runtime.subscribe((e) => seen.push(e));
  return { runtime, store, seen };
}

const revisions = async (runtime: Runtime, id: string) => (await runtime.history(id)).map((h) => h.revision);

describe.each(['sqlite', 'memory'] as const)('poison events that JSON cannot hold (%s)', (kind) => {
  it.each([
    ['THROW', 'bigint'],
    ['THROW', 'circular'],
    ['RAISE', 'bigint'],
    ['RAISE', 'circular'],
    ['RAISE', 'proxy'],
    ['RAISE', 'getter'],
    ['RAISE', 'object-message'],
  ])('%s (a guard, an action) that throws %s is recorded as failed with a readable error, and later events apply', async (type, thrown) => {
    const { runtime } = await fresh(kind);
    const job = await runtime.start('poison', {});
    const r = await runtime.send(job.id, { type, kind: thrown });
    expect(r.status).toBe('failed');
    expect(typeof r.error?.message).toBe('string');
    expect(r.error?.message.length).toBeGreaterThan(0);
    expect(r.job).toMatchObject({ value: 'open', revision: 2 });
    expect(await runtime.send(job.id, { type: 'OK' })).toMatchObject({ status: 'applied', job: { context: { n: 1 }, revision: 3 } });
    expect(await revisions(runtime, job.id)).toEqual([1, 2, 3]);
  });

  it('the error names what was thrown: a BigInt as 10n, a cycle cut where it repeats', async () => {
    const { runtime } = await fresh(kind);
    const job = await runtime.start('poison', {});
    expect((await runtime.send(job.id, { type: 'RAISE', kind: 'bigint' })).error?.message).toBe('{"big":"10n"}');
    expect((await runtime.send(job.id, { type: 'RAISE', kind: 'circular' })).error?.message).toBe('{"name":"loop","self":"[seen]"}');
    expect((await runtime.send(job.id, { type: 'RAISE', kind: 'object-message' })).error?.message).toBe('{"nested":true}');
    expect((await runtime.send(job.id, { type: 'RAISE', kind: 'proxy' })).error?.message).toBe('(a thrown value that cannot be read)');
  });

  it('a poison event accepted without waiting neither crashes the worker nor blocks the events after it', async () => {
    const { runtime, seen } = await fresh(kind);
    const job = await runtime.start('poison', {});
    // One after the other: sends in flight together are accepted in whichever order the store
    // runs them (an asynchronous store may run them in any order), and this test needs OK last.
    const queued = [];
    for (const event of [{ type: 'THROW', kind: 'bigint' }, { type: 'KEEP', kind: 'circular' }, { type: 'OK' }]) {
      queued.push(await runtime.send(job.id, event, { wait: false }));
    }
    expect(queued.every((q) => q.status === 'pending' || q.status === 'failed' || q.status === 'applied')).toBe(true);
    const done = await runtime.waitFor(job.id, (j) => (j.context as { n?: number }).n === 1, { timeoutMs: 10_000 });
    expect(done.revision).toBe(4);
    const events = await runtime.events(job.id);
    expect(events.map((e) => e.status)).toEqual(['failed', 'failed', 'applied']);
    expect(seen.some((e) => e.type === 'event.rejected')).toBe(false);
  });

  it.each(['bigint', 'circular'])('an assign that leaves %s in context fails that event (the state is kept) and the job goes on', async (value) => {
    const { runtime } = await fresh(kind);
    const job = await runtime.start('poison', {});
    const r = await runtime.send(job.id, { type: 'KEEP', kind: value });
    expect(r).toMatchObject({ status: 'failed', error: { name: 'UnserializableSnapshot' }, job: { revision: 2, context: { kept: null } } });
    expect(r.error?.message).toMatch(/cannot be stored as JSON/);
    expect((await runtime.history(job.id))[1]).toMatchObject({ outcome: 'failed', error: { name: 'UnserializableSnapshot' } });
    expect(await runtime.send(job.id, { type: 'OK' })).toMatchObject({ status: 'applied', job: { context: { n: 1 }, revision: 3 } });
  });

  it('an action that throws a cycle after the commit: the send is acknowledged as applied, and action.failed says what was thrown', async () => {
    const { runtime, seen } = await fresh(kind);
    const job = await runtime.start('poison', {});
    const r = await runtime.send(job.id, { type: 'AFTER', kind: 'circular' });
    expect(r).toMatchObject({ status: 'applied', job: { context: { n: 1 }, revision: 2 } });
    expect(seen).toContainEqual({ type: 'action.failed', jobId: job.id, revision: 2, action: 'after', error: { name: 'Error', message: '{"name":"loop","self":"[seen]"}' } });
  });

  it("a sensitive value an error quotes from the job's context is redacted in the result, history and logs", async () => {
    const logs: LogEntry[] = [];
    const { runtime } = await fresh(kind, (e) => logs.push(e));
    const job = await runtime.start('poison', { card: CARD });
    const r = await runtime.send(job.id, { type: 'LEAK' });
    expect(r.status).toBe('failed');
    expect(r.error?.message).toBe('the card on file is [redacted]');
    // A card in the event, set by the transition's first action and quoted by its second.
    const paid = await runtime.send(job.id, { type: 'PAY', card: '5500660077008800' });
    expect(paid.error?.message).toBe('the card on file is [redacted]');
    const stored = JSON.stringify([await runtime.history(job.id), await runtime.events(job.id), logs]);
    expect(stored).not.toContain(CARD);
    expect(stored).not.toContain('5500660077008800');
    expect(logs.some((l) => l.msg === 'event failed')).toBe(true);
  });

  it('a secret with quotes, backslashes or a newline is redacted in the JSON of a thrown object too', async () => {
    const { runtime } = await fresh(kind);
    const secret = 'pa"ss\\wo\nrd-1234';
    const job = await runtime.start('poison', { card: secret });
    // RAISE throws strange('...'): use an object quoting the card instead, through LEAKOBJ.
    const r = await runtime.send(job.id, { type: 'LEAKOBJ' });
    expect(r.status).toBe('failed');
    expect(r.error?.message).toContain('[redacted]');
    expect(r.error?.message).toBe('{"detail":{"quoted":"card [redacted]"},"big":"1n"}');
    // The job's context keeps it (the machine's own data); the error, history and events do not.
    const stored = JSON.stringify([r.error, await runtime.history(job.id), await runtime.events(job.id)]);
    for (const form of ['pa"ss', 'pa\\"ss', 'wo\nrd', 'wo\\nrd', 'rd-1234']) expect(stored).not.toContain(form);
  });

  it('an event queued before the job ended is rejected with its sensitive fields redacted, like any processed event', async () => {
    const store = kind === 'sqlite' ? await res.sqlite(res.dbPath()) : new MemoryStore();
    const accept = await res.runtime({ store, machines: [poison], processEvents: false });
    const job = await accept.start('poison', {});
    await accept.send(job.id, { type: 'FINISH' }, { wait: false });
    await accept.send(job.id, { type: 'PAY', card: CARD }, { wait: false });
    expect(JSON.stringify(await accept.events(job.id))).toContain(CARD); // pending: kept as sent until processed
    const worker = await res.runtime({ store, machines: [poison] });
    await worker.processPending();
    const events = await worker.events(job.id);
    expect(events.map((e) => e.status)).toEqual(['applied', 'rejected']);
    expect(events[1]?.payload).toEqual({ type: 'PAY', card: '[redacted]' });
    expect(JSON.stringify(events)).not.toContain(CARD);
  });

  it('a context factory that quotes the sensitive input: the error is redacted, and nothing is stored', async () => {
    const { runtime } = await fresh(kind);
    const error = await runtime.start('poison', { card: '9111222233334444' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toBe('Machine poison could not start with this input: cannot start with card [redacted]');
    expect(await runtime.list()).toEqual([]);
  });
});

describe('event keys and toJSON', () => {
  it('a __proto__ key counts in the idempotency comparison: the same event id with another value is a conflict', async () => {
    // A machine with no event schemas takes the payload as sent.
    const laxMachine = setup({ types: { context: {} as { n: number } } }).createMachine({
      id: 'lax',
      initial: 'a',
      context: { n: 0 },
      states: { a: { on: { OK: { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
    });
    const lax = { machine: laxMachine, version: 1 };
    const runtime = await res.runtime({ store: await res.sqlite(res.dbPath()), machines: [lax] });
    const job = await runtime.start('lax', {});
    // JSON.parse makes `__proto__` an own key (an object literal would set the prototype instead).
    const a = JSON.parse('{"type":"OK","__proto__":{"polluted":2}}') as { type: string };
    const b = JSON.parse('{"type":"OK","__proto__":{"polluted":3}}') as { type: string };
    expect(await runtime.send(job.id, a, { eventId: 'e1' })).toMatchObject({ duplicate: false });
    await expect(runtime.send(job.id, b, { eventId: 'e1' })).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(await runtime.send(job.id, a, { eventId: 'e1' })).toMatchObject({ duplicate: true });
  });

  it('an event whose toJSON nests deeper than the limit is refused, and nothing is recorded', async () => {
    const { runtime } = await fresh('sqlite');
    const job = await runtime.start('poison', {});
    let deep: unknown = 'leaf';
    for (let i = 0; i < 2000; i += 1) deep = { d: deep };
    const event = { type: 'OK', toJSON: () => ({ type: 'OK', deep }) };
    await expect(runtime.send(job.id, event)).rejects.toThrow(/nested deeper than/);
    expect((await runtime.get(job.id)).revision).toBe(1);
  });
});

describe('an activity that rejects with a value JSON cannot hold', () => {
  it('is recorded as a failed attempt with a readable error, and the job takes its error path', async () => {
    workHooks.work = async () => {
      throw { terminal: true, big: 7n };
    };
    const { runtime } = await openRuntime(res, [work]);
    const job = await runtime.start('work', {});
    await runtime.send(job.id, { type: 'GO' });
    const failed = await runtime.waitFor(job.id, (j) => j.value === 'failed', { timeoutMs: 10_000 });
    expect((failed.context as { error?: unknown }).error).toMatchObject({ message: '{"terminal":true,"big":"7n"}' });
    const [attempt] = (await runtime.details(job.id)).attempts;
    expect(attempt).toMatchObject({ outcome: 'failed', error: { message: '{"terminal":true,"big":"7n"}' } });
  });
});

describe('eventless transitions that would loop forever', () => {
  const plain = (config: object) => ({ machine: setup({ types: { context: {} as { n: number } } }).createMachine({ id: 'loopy', context: { n: 0 }, ...config } as never) as unknown as AnyStateMachine, version: 1 });
  const count = assign({ n: ({ context }: { context: { n: number } }) => context.n + 1 });

  it.each([
    ['two states that take each other', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: 'b' }, b: { always: 'a' } } }],
    ['a targetless one that assigns', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: { actions: count } } } }],
    ['one through a compound state and its initial child', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: 'b' }, b: { initial: 'c', states: { c: { always: '#loopy.a' } } } } }],
  ])('an unguarded loop (%s) fails the event that enters it, and the job goes on', async (_what, config) => {
    const machine = plain(config);
    const runtime = await res.runtime({ store: new MemoryStore(), machines: [machine] });
    const job = await runtime.start('loopy', {});
    expect(await runtime.send(job.id, { type: 'GO' })).toMatchObject({ status: 'failed', error: { message: expect.stringMatching(/Infinite loop detected/) }, job: { value: 'i' } });
    expect(machine.machine.options.maxIterations).toBe(MAX_MICROSTEPS);
  });

  it('a machine that sets its own microstep limit keeps it', async () => {
    const own = plain({ options: { maxIterations: 50 }, initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: 'b' }, b: { always: 'a' } } });
    const runtime = await res.runtime({ store: new MemoryStore(), machines: [own] });
    const job = await runtime.start('loopy', {});
    expect((await runtime.send(job.id, { type: 'GO' })).error?.message).toMatch(/more than 50 microsteps/);
  });

  it('a guarded loop whose guard never ends it fails its event after the microstep limit; the job and later events go on', async () => {
    const spin = plain({
      initial: 'i',
      states: {
        i: { on: { GO: 'a', OK: { actions: count } } },
        a: { always: { guard: ({ context }: { context: { n: number } }) => context.n >= 0, target: 'b' } },
        b: { always: 'a' },
      },
    });
    const path = res.dbPath();
    const runtime = await res.runtime({ store: await res.sqlite(path), machines: [spin] });
    const job = await runtime.start('loopy', {});
    const r = await runtime.send(job.id, { type: 'GO' });
    expect(r).toMatchObject({ status: 'failed', job: { value: 'i', revision: 2 } });
    expect(r.error?.message).toMatch(/Infinite loop detected: the machine has processed more than 10000 microsteps/);
    expect(await runtime.send(job.id, { type: 'OK' })).toMatchObject({ status: 'applied', job: { context: { n: 1 }, revision: 3 } });
    // Queued while nothing runs, it does not hang the next runtime that opens the file.
    const accept = await res.runtime({ store: await res.sqlite(path), machines: [spin], processEvents: false });
    await accept.send(job.id, { type: 'GO' }, { wait: false });
    await accept.close();
    const next = await res.runtime({ store: await res.sqlite(path), machines: [spin] });
    const done = await next.waitFor(job.id, (j) => j.revision === 4, { timeoutMs: 10_000 });
    expect(done).toMatchObject({ value: 'i', revision: 4 });
    expect((await next.history(job.id)).at(-1)).toMatchObject({ eventType: 'GO', outcome: 'failed' });
  });

  it('the limit holds on every path: a start whose first state loops, a machine with a systemId, a child machine', async () => {
    const guardedLoop = { a: { always: { guard: ({ context }: { context: { n: number } }) => context.n >= 0, target: 'b' } }, b: { always: 'a' } };
    const startLoop = plain({ initial: 'a', states: guardedLoop });
    const runtime = await res.runtime({ store: new MemoryStore(), machines: [startLoop] });
    await expect(runtime.start('loopy', {})).rejects.toThrow(/could not start with this input: Infinite loop detected/);
    expect(await runtime.list()).toEqual([]);

    const withSystemId = {
      machine: setup({ types: { context: {} as { n: number } }, actors: { work: fromPromise(async () => 1) } }).createMachine({
        id: 'sys',
        context: { n: 0 },
        initial: 'i',
        states: { i: { on: { GO: 'a' } }, ...guardedLoop, w: { invoke: { id: 'w', src: 'work', systemId: 'worker' } } },
      } as never) as unknown as AnyStateMachine,
      version: 1,
    };
    const child = setup({ types: { context: {} as { n: number } } }).createMachine({ id: 'child', context: { n: 0 }, initial: 'a', states: guardedLoop } as never);
    const parent = {
      machine: setup({ actors: { child } }).createMachine({
        id: 'parent',
        initial: 'i',
        states: { i: { on: { GO: 'calling' } }, calling: { invoke: { id: 'kid', src: 'child' } } },
      }) as unknown as AnyStateMachine,
      version: 1,
    };
    const both = await res.runtime({ store: new MemoryStore(), machines: [withSystemId, parent] });
    const s = await both.start('sys', {});
    expect(await both.send(s.id, { type: 'GO' })).toMatchObject({ status: 'failed', error: { message: expect.stringMatching(/Infinite loop detected/) } });
    // A child that cannot start fails the parent's event (nothing is created): no parent waits forever.
    const p = await both.start('parent', {});
    const r = await both.send(p.id, { type: 'GO' });
    expect(r).toMatchObject({ status: 'failed', error: { message: expect.stringMatching(/child machine "child" could not start: Infinite loop detected/) }, job: { value: 'i' } });
    expect((await both.list({ machineId: 'parent.child' })).length).toBe(0);
  });

  it.each([
    ['a guarded loop (the guard may end it)', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: { guard: ({ context }: { context: { n: number } }) => context.n < 3, target: 'b' } }, b: { always: { target: 'a', actions: count } } } }],
    ['a self-target with nothing to do (XState stops)', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: 'a' } } }],
    ['a targetless one that runs a custom action (nothing changes: XState stops)', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: { actions: (): undefined => undefined } } } }],
    ['a self-target that runs a custom action', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: { target: 'a', actions: (): undefined => undefined } } } }],
    ['an unguarded eventless transition out of a compound state', { initial: 'p', states: { p: { initial: 'x', always: 'q', states: { x: {} } }, q: { on: { GO: 'p' } } } }],
    ['a chain that ends', { initial: 'i', states: { i: { on: { GO: 'a' } }, a: { always: 'b' }, b: { always: 'c' }, c: {} } }],
  ])('runs %s as XState does', async (_what, config) => {
    const runtime = await res.runtime({ store: new MemoryStore(), machines: [plain(config)] });
    const job = await runtime.start('loopy', {});
    expect(await runtime.send(job.id, { type: 'GO' })).toMatchObject({ status: 'applied' });
  });
});
