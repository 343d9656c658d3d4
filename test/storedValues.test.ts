/**
 * Values validated as stored: an input, an event or an activity's output is checked and copied in
 * one walk, refused (ValidationError naming the path) when JSON cannot hold it at any depth, and the
 * copy is what the schema sees and what is stored. The decided cases: a Date is stored as its ISO
 * string (and validated as that string); lone surrogates are refused; `__proto__` and `constructor`
 * are ordinary own keys.
 */
import type Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { ValidationError, type Runtime } from '../src/index.ts';
import { hashJson, inputHash, plainJson, stableStringify } from '../src/base/json.ts';
import { openRuntime } from './helpers/durable.ts';
import { dumpDatabase, Resources } from './helpers/resources.ts';
import { work, workHooks } from './fixtures/workMachine.ts';

const res = new Resources();
const defaultWork = workHooks.work;
afterEach(async () => {
  workHooks.work = defaultWork;
  await res.dispose();
});

const counter = setup({ types: { context: {} as { n: number; last: unknown }, events: {} as { type: 'PING' } | { type: 'INC' } | { type: 'AT'; at: string } | { type: 'ANY' } | { type: 'BY'; by: string } | { type: 'RETYPE' } | { type: 'NOTOBJ' } } }).createMachine({
  id: 'counter',
  initial: 'on',
  context: { n: 0, last: null },
  states: {
    on: {
      on: {
        INC: { actions: assign({ n: ({ context }) => context.n + 1 }) },
        PING: { actions: assign({ last: ({ event }) => event }) },
        AT: { actions: assign({ last: ({ event }) => event.at }) },
        ANY: { actions: assign({ last: ({ event }) => event }) },
        BY: { actions: assign({ last: ({ event }) => event }) },
        RETYPE: { actions: assign({ last: ({ event }) => event }) },
        NOTOBJ: { actions: assign({ last: ({ event }) => event }) },
      },
    },
  },
});
const schemaSaw: unknown[] = [];
const counterDef = {
  machine: counter,
  version: 1,
  input: z.custom<unknown>((v) => (schemaSaw.push(v), true)),
  events: {
    AT: z.object({ type: z.literal('AT'), at: z.string().datetime() }),
    // A schema whose transform makes values JSON cannot hold as they are.
    ANY: z.object({ type: z.literal('ANY'), when: z.string().optional(), fn: z.boolean().optional() }).transform((e) => ({ ...e, ...(e.when ? { when: new Date(e.when) } : {}), ...(e.fn ? { fn: () => 1 } : {}) })),
    // Schemas as people write them without `type`, and ones that give no event back.
    BY: z.object({ by: z.string() }),
    RETYPE: z.object({ type: z.string() }).transform(() => ({ type: 'PING' })),
    NOTOBJ: z.object({}).transform(() => 'text'),
  },
};

async function open(): Promise<{ runtime: Runtime; raw: Database.Database; jobId: string }> {
  const path = res.dbPath();
  const { runtime } = await openRuntime(res, [counterDef as never], { path });
  const jobId = (await runtime.start('counter', {})).id;
  return { runtime, raw: res.raw(path, { readonly: true }), jobId };
}

/** `call` is refused with a ValidationError whose message contains `message`, and nothing is written. */
async function refusedWith(raw: Database.Database, call: () => Promise<unknown>, message: string): Promise<void> {
  const before = dumpDatabase(raw);
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  expect((error as Error).message).toContain(message);
  expect(dumpDatabase(raw)).toEqual(before);
}

class Point {
  constructor(readonly x: number) {}
}

describe('values JSON cannot hold are refused at any depth, by path', () => {
  it("an event's toJSON cannot change what is applied: { type: 'PING', toJSON: () => INC } is refused", async () => {
    const { runtime, raw, jobId } = await open();
    await refusedWith(raw, () => runtime.send(jobId, { type: 'PING', toJSON: () => ({ type: 'INC' }) }), 'event has a toJSON method');
    expect((await runtime.get(jobId)).context).toMatchObject({ n: 0 });
  });

  it.each<[string, () => unknown, string]>([
    ['a nested function', () => ({ type: 'PING', items: [0, 1, { when: () => 1 }] }), 'event.items[2].when is a function'],
    ['a nested undefined', () => ({ type: 'PING', a: { b: undefined } }), 'event.a.b is undefined'],
    ['undefined in an array', () => ({ type: 'PING', a: [1, undefined] }), 'event.a[1] is undefined'],
    ['a hole in an array', () => ({ type: 'PING', a: [1, , 3] }), 'event.a[1] is a hole in a sparse array'],
    ['a nested symbol', () => ({ type: 'PING', a: [Symbol('s')] }), 'event.a[0] is a symbol'],
    ['a symbol key', () => ({ type: 'PING', a: { [Symbol('k')]: 1 } }), 'event.a has a symbol key'],
    ['a BigInt', () => ({ type: 'PING', a: { n: 10n } }), 'event.a.n is a BigInt'],
    ['NaN', () => ({ type: 'PING', a: [Number.NaN] }), 'event.a[0] is NaN, not a JSON number'],
    ['a cycle', () => { const a: Record<string, unknown> = {}; a['self'] = [a]; return { type: 'PING', a }; }, 'event.a.self[0] is a cycle'],
    ['a Map', () => ({ type: 'PING', m: new Map() }), 'event.m is a Map, not a plain object or array'],
    ['a Set', () => ({ type: 'PING', s: new Set([1]) }), 'event.s is a Set'],
    ['a class instance', () => ({ type: 'PING', p: new Point(1) }), 'event.p is a Point instance'],
    ['a boxed string', () => ({ type: 'PING', s: new String('x') }), 'event.s is a String'],
    ['a nested toJSON', () => ({ type: 'PING', a: { toJSON: () => 1 } }), 'event.a has a toJSON method'],
    ['an odd key, quoted in the path', () => ({ type: 'PING', 'a b': { '0x': () => 1 } }), 'event["a b"]["0x"] is a function'],
    ['a lone high surrogate', () => ({ type: 'PING', s: 'x\uD800' }), 'event.s is a string with a lone surrogate'],
    ['a lone low surrogate in a key', () => ({ type: 'PING', '\uDC00': 1 }), 'is a key with a lone surrogate'],
    ['an invalid Date', () => ({ type: 'PING', at: new Date('nope') }), 'event.at is an invalid Date'],
    ['a Date with its own toJSON', () => ({ type: 'PING', at: Object.assign(new Date(0), { toJSON: () => 'x' }) }), 'event.at is a Date with properties of its own'],
    ['a Date subclass', () => ({ type: 'PING', at: new (class Day extends Date {})(0) }), 'event.at is a Day instance'],
  ])('an event with %s', async (_, make, message) => {
    const { runtime, raw, jobId } = await open();
    await refusedWith(raw, () => runtime.send(jobId, make()), message);
  });

  it('an input likewise, at any depth', async () => {
    const { runtime, raw } = await open();
    await refusedWith(raw, () => runtime.start('counter', { deep: [{ f: () => 1 }] }), 'input.deep[0].f is a function');
    await refusedWith(raw, () => runtime.start('counter', { a: undefined }), 'input.a is undefined');
  });

  it('a getter is read once: what is checked is what is stored', async () => {
    const { runtime, jobId } = await open();
    let reads = 0;
    const event = Object.defineProperty({ type: 'ANY' }, 'when', { enumerable: true, get: () => (++reads === 1 ? '2026-01-01T00:00:00.000Z' : 'changed') });
    await runtime.send(jobId, event, { eventId: 'g1' });
    expect(reads).toBe(1);
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 'g1');
    expect(inbox!.payload).toEqual({ type: 'ANY', when: '2026-01-01T00:00:00.000Z' });
  });

  it('a shared (not cyclic) object is JSON: written at each place', async () => {
    const { runtime, jobId } = await open();
    const shared = { k: 1 };
    await runtime.send(jobId, { type: 'PING', a: shared, b: [shared] }, { eventId: 's1' });
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 's1');
    expect(inbox!.payload).toEqual({ type: 'PING', a: { k: 1 }, b: [{ k: 1 }] });
  });
});

describe('the decided cases', () => {
  it('a Date is stored as its ISO string, and the schema validates that string', async () => {
    const { runtime, jobId } = await open();
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6));
    await runtime.send(jobId, { type: 'AT', at }, { eventId: 'd1' });
    expect((await runtime.get(jobId)).context).toMatchObject({ last: '2026-01-02T03:04:05.006Z' });
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 'd1');
    expect(inbox!.payload).toEqual({ type: 'AT', at: '2026-01-02T03:04:05.006Z' });
    schemaSaw.length = 0;
    const job = await runtime.start('counter', { at });
    expect(schemaSaw).toEqual([{ at: '2026-01-02T03:04:05.006Z' }]);
    expect(job.input).toEqual({ at: '2026-01-02T03:04:05.006Z' });
  });

  it("a schema's transform: a Date it makes is stored as its ISO string, a function it makes is refused", async () => {
    const { runtime, raw, jobId } = await open();
    await runtime.send(jobId, { type: 'ANY', when: '2026-01-01T00:00:00Z' }, { eventId: 't1' });
    expect((await runtime.get(jobId)).context).toMatchObject({ last: { type: 'ANY', when: '2026-01-01T00:00:00.000Z' } });
    await refusedWith(raw, () => runtime.send(jobId, { type: 'ANY', fn: true }), "ANY event (as counter's schema gave it).fn is a function");
  });

  it('a schema that names no type (z.object strips what it does not name) keeps the type the event was sent as', async () => {
    const { runtime, jobId } = await open();
    const sent = await runtime.send(jobId, { type: 'BY', by: 'ann', extra: 1 }, { eventId: 'b1' });
    expect(sent.status).toBe('applied');
    expect((await runtime.get(jobId)).context).toMatchObject({ last: { type: 'BY', by: 'ann' } });
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 'b1');
    expect(inbox).toMatchObject({ type: 'BY', payload: { type: 'BY', by: 'ann' } });
  });

  it('a schema that gives another type, or no object, is refused as the definition\'s mistake, and nothing is written', async () => {
    const { runtime, raw, jobId } = await open();
    await refusedWith(raw, () => runtime.send(jobId, { type: 'RETYPE' }), `counter's schema for RETYPE events changed the event's type to "PING"`);
    await refusedWith(raw, () => runtime.send(jobId, { type: 'NOTOBJ' }), "counter's schema for NOTOBJ events gave a string, not an event object");
  });

  it('-0 is stored (and validated) as 0, as JSON writes it', () => {
    expect(Object.is(plainJson({ a: [-0] }, 'x', { maxDepth: 5, maxValues: 10 }), undefined)).toBe(false);
    expect(Object.is((plainJson({ a: [-0] }, 'x', { maxDepth: 5, maxValues: 10 }) as { a: number[] }).a[0], 0)).toBe(true);
  });

  it('a whole surrogate pair is kept', async () => {
    const { runtime, jobId } = await open();
    await runtime.send(jobId, { type: 'PING', s: 'smile \uD83D\uDE00', '\uD83D\uDE00': 1 }, { eventId: 'u1' });
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 'u1');
    expect(inbox!.payload).toEqual({ type: 'PING', s: 'smile \uD83D\uDE00', '\uD83D\uDE00': 1 });
  });

  it('__proto__ and constructor keys are own keys, stored as sent; the copy never changes a prototype', async () => {
    const { runtime, jobId } = await open();
    const event = JSON.parse('{"type":"PING","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}') as { type: string };
    const copy = plainJson(event, 'event', { maxDepth: 5, maxValues: 100 }) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['type', '__proto__', 'constructor']);
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
    await runtime.send(jobId, event, { eventId: 'p1' });
    const [inbox] = (await runtime.events(jobId)).filter((e) => e.eventId === 'p1');
    expect(JSON.stringify(inbox!.payload)).toBe('{"type":"PING","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('a null-prototype object is a plain object', () => {
    const o = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    expect(plainJson(o, 'x', { maxDepth: 5, maxValues: 10 })).toEqual({ a: 1 });
  });
});

describe("an activity's output", () => {
  it('is converted by the same walk: a Date becomes its ISO string', async () => {
    workHooks.work = async () => ({ at: new Date(Date.UTC(2026, 0, 1)), n: 1 });
    const { runtime } = await openRuntime(res, [work]);
    const job = await runtime.start('work', {});
    await runtime.send(job.id, { type: 'GO' });
    const done = await runtime.waitFor(job.id, (j) => j.value === 'review', { timeoutMs: 10_000 });
    expect((done.context as { output: unknown }).output).toEqual({ at: '2026-01-01T00:00:00.000Z', n: 1 });
  });

  it('with a nested function fails its attempt, naming the path, instead of being stored without it', async () => {
    workHooks.work = async () => ({ ok: true, later: [() => 1] });
    const { runtime } = await openRuntime(res, [work]);
    const job = await runtime.start('work', {});
    await runtime.send(job.id, { type: 'GO' });
    const failed = await runtime.waitFor(job.id, (j) => j.value === 'failed', { timeoutMs: 10_000 });
    expect((failed.context as { error: { message: string } }).error.message).toContain('output.later[0] is a function');
  });
});

describe('hashes of stored values do not change (a repeated start or event id is compared with the hash stored)', () => {
  it('stableStringify sorts keys at every depth and writes what JSON.stringify writes', () => {
    const value = { b: [1, { z: true, a: [null, 'x"\u00e9\u2028'] }], a: -0, '\u00e9': 1.5e-7, A: 'k' };
    expect(stableStringify(value)).toBe('{"A":"k","a":0,"b":[1,{"a":[null,"x\\"\u00e9\u2028"],"z":true}],"\u00e9":1.5e-7}');
    expect(hashJson(value)).toBe('8655c23ab22ffa9c20fdde88f270ecff');
    const own = JSON.parse('{"__proto__": {"y": 1}, "constructor": 2}') as unknown;
    expect(stableStringify(own)).toBe('{"__proto__":{"y":1},"constructor":2}');
    expect(hashJson(own)).toBe('c8f5a699a5f9a3b02dbd344bad191ddc');
  });

  it("a job's input hash is the hash of { machine, input }, as stored before", () => {
    const input = { to: 'a@b', amount: 5 };
    expect(inputHash('invoice', input)).toBe('26f316f83236aba28b87ab52a3915293');
    expect(inputHash('invoice', input)).toBe(hashJson({ machine: 'invoice', input }));
  });
});
