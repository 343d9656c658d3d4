/**
 * Values validated as stored (fast-check): any JavaScript value sent as an event, or as a job's
 * input, to a real runtime on a SQLite file. Either the call is refused with a typed SpoolError and
 * the database is exactly as it was, or what is stored (read back through `events`, `history` and
 * `get`) is exactly what the machine's schema saw, and is what `JSON.stringify` writes for the
 * value sent. Plain JSON values are never refused.
 *
 * "What was sent" is judged without JSON.stringify (which runs `toJSON` and drops nested
 * `undefined`, and so would agree with a store that lost them): {@link asSent} copies every own
 * enumerable key (symbols too), keeps holes, functions and non-plain objects as they are, and maps
 * only the two rewrites the runtime documents (a valid Date to its ISO string, -0 to 0). A stored
 * value that lost or changed anything differs from it under {@link same} (vitest's `toStrictEqual`
 * compares `.constructor`, which a `constructor` key fools).
 *
 * The schemas record what they are handed (`z.custom`), so "what was validated" is observed, not
 * assumed.
 */
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { inspect } from 'node:util';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime } from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { T0 } from '../helpers/durable.ts';
import { dumpDatabase, Resources } from '../helpers/resources.ts';
import { describeThrown, isSpoolRefusal } from './refusal.ts';

const NONE = Symbol('not seen');
let seen: unknown = NONE;
const record = (v: unknown) => {
  seen = v;
  return true;
};

const machine = setup({ types: { context: {} as { n: number }, events: {} as { type: 'E' } } }).createMachine({
  id: 'stored',
  initial: 'open',
  context: { n: 0 },
  states: { open: { on: { E: { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
});
const stored = {
  machine,
  version: 1,
  input: z.custom<unknown>(record),
  events: { E: z.custom<unknown>((v) => record(v) && typeof v === 'object' && v !== null) },
};

const res = new Resources();
let rt: Runtime;
let raw: Database.Database;
let jobId: string;

beforeAll(async () => {
  const path = res.dbPath();
  const clock = new VirtualClock(T0);
  const store = await res.sqlite(path, { clock, synchronous: 'NORMAL' });
  rt = await res.runtime({ store, machines: [stored as never], clock });
  jobId = (await rt.start('stored', {})).id;
  raw = res.raw(path, { readonly: true });
});
afterAll(() => res.dispose());

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}
const cyclic = () => {
  const o: Record<string, unknown> = { a: 1 };
  o['self'] = { back: o };
  return o;
};
/** Parts JSON cannot hold, or holds only as JSON.stringify rewrites them. */
const special = fc.oneof(
  fc.constantFrom<() => unknown>(
    () => ({ type: 'E', toJSON: () => ({ type: 'E', swapped: true }) }),
    () => () => 1,
    () => Symbol('s'),
    () => 7n,
    cyclic,
    () => new Point(1, 2),
    () => new Map([['a', 1]]),
    () => new Set([1]),
    () => [1, , 3],
    () => [1, undefined],
    () => ({ a: undefined }),
    () => ({ [Symbol('k')]: 1 }),
    () => new Date('not a date'),
    () => NaN,
    () => -Infinity,
    () => -0,
    () => '\uD800',
    () => 'ok\uDFFFok',
    () => ({ '\uDC00': 1 }),
    () => '\uD83D\uDE00', // a whole pair: JSON
    () => JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":1}}') as unknown,
    () => Object.create(null) as unknown,
  ),
  fc.date({ noInvalidDate: false }).map((d) => () => d),
).map((make) => make());
const everything = fc.anything({
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  stringUnit: 'binary',
  maxDepth: 4,
});
/** Any value, with the special parts somewhere inside. */
const anyValue = fc.oneof(
  everything,
  special,
  fc.tuple(everything, special).map(([a, s]) => ({ a, deep: [{ s }] })),
  fc.tuple(fc.jsonValue({ maxDepth: 3 }), special).map(([a, s]) => [a, s]),
);
const plainJsonValue = fc.jsonValue({ maxDepth: 4 }).filter((v) => !JSON.stringify(v).includes('"__proto__"'));

/** The value as sent, copied without JSON (see the file's comment). */
function asSent(v: unknown): unknown {
  if (typeof v === 'number') return Object.is(v, -0) ? 0 : v;
  if (v === null || typeof v !== 'object') return v;
  const proto: unknown = Object.getPrototypeOf(v);
  if (v instanceof Date && proto === Date.prototype && !Number.isNaN(v.getTime()) && Reflect.ownKeys(v).length === 0) return v.toISOString();
  if (Array.isArray(v) && proto === Array.prototype) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i += 1) if (i in v) out[i] = asSent(v[i]);
    return out;
  }
  if (proto !== Object.prototype && proto !== null) return v;
  const out: Record<PropertyKey, unknown> = {};
  for (const key of Reflect.ownKeys(v)) {
    if (!Object.prototype.propertyIsEnumerable.call(v, key)) continue;
    Object.defineProperty(out, key, { value: asSent((v as Record<PropertyKey, unknown>)[key]), writable: true, enumerable: true, configurable: true });
  }
  return out;
}

/** Deep equality that tells holes, `undefined`, -0, prototypes and key order apart. */
function same(a: unknown, b: unknown): boolean {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return Object.is(a, b);
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const keys = Reflect.ownKeys(a);
  const other = Reflect.ownKeys(b);
  if (keys.length !== other.length || keys.some((k, i) => k !== other[i])) return false;
  return keys.every((k) => same(Object.getOwnPropertyDescriptor(a, k)?.value, Object.getOwnPropertyDescriptor(b, k)?.value));
}
const shown = (v: unknown) => inspect(v, { depth: 8, showHidden: false });

/**
 * Run `call`. A refusal must be a typed SpoolError with the database untouched; an acceptance must
 * store what the schema saw (checked by `read`) and what JSON.stringify writes for `sent`.
 */
async function storedAsValidated(sent: unknown, call: () => Promise<unknown>, read: (result: unknown) => Promise<unknown[]>, mustAccept = false): Promise<void> {
  const before = dumpDatabase(raw);
  seen = NONE;
  let result: unknown;
  try {
    result = await call();
  } catch (error) {
    expect(mustAccept, `refused a plain JSON value: ${describeThrown(error)}`).toBe(false);
    expect(isSpoolRefusal(error), describeThrown(error)).toBe(true);
    expect(dumpDatabase(raw), `${describeThrown(error)} changed the database`).toEqual(before);
    return;
  }
  expect(seen).not.toBe(NONE);
  const text = JSON.stringify(seen);
  for (const copy of await read(result)) {
    expect(same(copy, seen), `stored ${shown(copy)}, validated ${shown(seen)}`).toBe(true);
    expect(JSON.stringify(copy)).toBe(text);
  }
  expect(same(seen, asSent(sent)), `validated ${shown(seen)}, sent ${shown(sent)}`).toBe(true);
  // The stored copy has an own `__proto__` key, never a changed prototype.
  expect(JSON.stringify(JSON.parse(text))).toBe(text);
}

let n = 0;
async function sendAndRead(event: unknown, mustAccept = false): Promise<void> {
  const eventId = `v${(n += 1)}`;
  await storedAsValidated(
    event,
    () => rt.send(jobId, event, { eventId }),
    async () => {
      const inbox = (await rt.events(jobId)).find((e) => e.eventId === eventId);
      const step = (await rt.history(jobId)).find((h) => h.eventId === eventId);
      expect(inbox, 'the accepted event is in the inbox').toBeDefined();
      expect(step, 'the accepted event is in the history').toBeDefined();
      return [inbox!.payload, step!.payload];
    },
    mustAccept,
  );
}
async function startAndRead(input: unknown, mustAccept = false): Promise<void> {
  const id = `s${(n += 1)}`;
  await storedAsValidated(
    input === undefined ? {} : input, // start's input defaults to {}
    () => rt.start('stored', input, { jobId: id }),
    async (job) => [(job as { input: unknown }).input, (await rt.get(id)).input],
    mustAccept,
  );
}

describe('values validated as stored', () => {
  it('an event holding any value: stored as the schema saw it, or refused with nothing written', async () => {
    await fc.assert(fc.asyncProperty(anyValue, (v) => sendAndRead({ type: 'E', v })), { numRuns: 250 });
  });

  it('any value as the event itself', async () => {
    await fc.assert(fc.asyncProperty(anyValue, (v) => sendAndRead(v)), { numRuns: 100 });
  });

  it("any value as a job's input", async () => {
    await fc.assert(fc.asyncProperty(anyValue, (v) => startAndRead(v)), { numRuns: 150 });
  });

  it('plain JSON is never refused, as an event or an input', async () => {
    await fc.assert(
      fc.asyncProperty(plainJsonValue, async (v) => {
        await sendAndRead({ type: 'E', v }, true);
        await startAndRead(v, true);
      }),
      { numRuns: 100 },
    );
  });
});
