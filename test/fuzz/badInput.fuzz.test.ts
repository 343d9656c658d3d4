/**
 * Fuzzing the public API with bad input (fast-check): malformed and wrong-typed JSON, non-JSON
 * values, unknown machines and events, reserved `xstate.*`/`spool.*` types, huge payloads, deep
 * nesting, bad and reused event ids, arguments of the wrong JavaScript type. Every call must either
 * succeed (where the input happens to be valid) or refuse with a typed `SpoolError` (a stable
 * code and category) and leave the database exactly as it was (every table, compared row by row,
 * plus the AUTOINCREMENT counter). Nothing may throw past the API untyped, and the process lives.
 *
 * The CLI gets malformed JSON text (`spool send`, `spool start --input`): exit code 1, one line
 * `spool: SPOOL_…: …` naming a typed error, the database unchanged.
 *
 * One runtime on one SQLite file (VirtualClock, maxPayloadBytes 4096) with a few live jobs that the
 * properties aim at: `tally` (crash-tally, with events e1..e3), `life` (job-lifecycle), `approval`
 * (approval-flow), `bare` (the timing machine registered bare: no schemas), `ended` (final).
 */
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { approvalFlow, jobLifecycle, retryingJob } from '../../machines/index.ts';
import { main } from '../../src/cli/main.ts';
import {
  IdempotencyConflictError,
  JobNotFinishedError,
  JobNotFoundError,
  JobTerminalError,
  PayloadTooLargeError,
  TokenError,
  UnknownEventError,
  UnknownMachineError,
  ValidationError,
  type Runtime,
  type SpoolError,
} from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { tally } from '../crash/machines.ts';
import { timing } from '../fixtures/timingMachine.ts';
import { T0 } from '../helpers/durable.ts';
import { dumpDatabase, Resources } from '../helpers/resources.ts';
import { describeThrown, isSpoolRefusal } from './refusal.ts';

const NUM_RUNS = 150;
const MAX = 4096;
const res = new Resources();
let rt: Runtime;
let raw: Database.Database;

beforeAll(async () => {
  const path = res.dbPath();
  const clock = new VirtualClock(T0);
  const store = await res.sqlite(path, { clock, synchronous: 'NORMAL' });
  rt = await res.runtime({ store, machines: [tally, jobLifecycle, approvalFlow, timing], clock, maxPayloadBytes: MAX });
  await rt.start('crash-tally', {}, { jobId: 'tally' });
  for (let i = 1; i <= 3; i += 1) await rt.send('tally', { type: 'ADD', n: i }, { eventId: `e${i}` });
  await rt.start('job-lifecycle', { name: 'life' }, { jobId: 'life' });
  await rt.start('approval-flow', { subject: 'budget' }, { jobId: 'approval' });
  await rt.start('timing', {}, { jobId: 'bare' });
  await rt.start('crash-tally', {}, { jobId: 'ended' });
  await rt.send('ended', { type: 'STOP' });
  raw = res.raw(path, { readonly: true });
});
afterAll(() => res.dispose());

type ErrorClass = abstract new (...args: never[]) => SpoolError;

/**
 * Run `call`. If it throws, it must be a typed SpoolError (of class `expected`, when given) and the
 * database must be unchanged. If `expected` is given, it must throw.
 */
async function refused(call: () => Promise<unknown>, expected?: ErrorClass): Promise<void> {
  const before = dumpDatabase(raw);
  let thrown: unknown;
  let threw = false;
  try {
    await call();
  } catch (error) {
    threw = true;
    thrown = error;
  }
  if (expected) expect(threw, `expected ${expected.name}, but the call succeeded`).toBe(true);
  if (!threw) return;
  expect(isSpoolRefusal(thrown), describeThrown(thrown)).toBe(true);
  if (expected) expect(thrown, describeThrown(thrown)).toBeInstanceOf(expected);
  expect(dumpDatabase(raw), `${describeThrown(thrown)} changed the database`).toEqual(before);
}

// ------------------------------------------------------------------ building blocks

const cyclic = () => {
  const o: Record<string, unknown> = { type: 'INC' };
  o['self'] = o;
  return o;
};
/** Values JSON cannot carry (thrown by JSON.stringify), inside an otherwise valid event. */
const unserialisable = fc.constantFrom<() => unknown>(
  () => 10n,
  () => ({ toJSON: () => { throw new Error('toJSON refused'); } }),
  () => Object.defineProperty({}, 'x', { enumerable: true, get: () => { throw new Error('getter refused'); } }),
  () => new Proxy({}, { ownKeys: () => { throw new Error('proxy refused'); } }),
);
const everything = fc.anything({
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  stringUnit: 'binary',
});
const nonObject = fc.oneof(fc.integer(), fc.double(), fc.string(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.array(fc.jsonValue(), { maxLength: 3 }));
/** Event and job ids the runtime refuses: empty, spaces, too long, not ASCII, not a string. */
const badId = fc.oneof(
  fc.constant(''),
  fc.string({ minLength: 1, maxLength: 10 }).map((s) => `a ${s}`),
  fc.string({ minLength: 201, maxLength: 260 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 5 }).filter((s) => /[^\x21-\x7e]/.test(s)),
  fc.oneof(fc.integer(), fc.boolean(), fc.object(), fc.array(fc.integer())),
);
const LIVE = ['tally', 'life', 'bare'] as const;
/** A valid event for each live job that keeps it alive. */
const validFor: Record<(typeof LIVE)[number], fc.Arbitrary<Record<string, unknown>>> = {
  tally: fc.oneof(fc.constant({ type: 'INC' }), fc.integer({ min: -1000, max: 1000 }).map((n) => ({ type: 'ADD', n }))),
  life: fc.oneof(fc.constant({ type: 'START' }), fc.integer({ min: 0, max: 100 }).map((percent) => ({ type: 'PROGRESS', percent }))),
  bare: fc.constantFrom({ type: 'PING' }, { type: 'REMIND' }, { type: 'RESET' }),
};
const liveJobAndEvent = fc.constantFrom(...LIVE).chain((jobId) => validFor[jobId].map((event) => ({ jobId, event })));
const known = new Set(['crash-tally', 'job-lifecycle', 'approval-flow', 'timing']);

function nest(depth: number, kind: 'array' | 'object' | 'mixed'): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i += 1) v = kind === 'array' || (kind === 'mixed' && i % 2 === 0) ? [v] : { a: v };
  return v;
}

// ------------------------------------------------------------------ start

describe('start with bad input', () => {
  it('refuses unknown machines, non-object and schema-invalid input, huge and non-JSON input, bad ids and a taken id, writing nothing', async () => {
    const cases = fc.oneof(
      fc.string().filter((id) => !known.has(id)).map((machine) => ({ machine, input: {} as unknown, options: {}, expected: UnknownMachineError as ErrorClass })),
      // (`undefined` is no input at all: `start` reads it as `{}`.)
      nonObject.filter((input) => input !== undefined).map((input) => ({ machine: 'timing', input, options: {}, expected: ValidationError as ErrorClass })),
      fc.oneof(
        fc.dictionary(fc.string({ minLength: 1 }), fc.jsonValue(), { minKeys: 1 }).map((input) => ({ machine: 'crash-tally', input })),
        fc.record({ name: fc.oneof(fc.constant(''), fc.integer(), fc.constant(null)), items: fc.oneof(fc.integer({ max: -1 }), fc.double({ min: 0.1, max: 0.9 }), fc.string()) }).map((input) => ({ machine: 'job-lifecycle', input })),
        fc.record({ subject: fc.oneof(fc.constant(''), fc.integer()), remindAfterMs: fc.oneof(fc.integer({ max: -1 }), fc.string()) }).map((input) => ({ machine: 'approval-flow', input })),
      ).map((c) => ({ ...c, options: {}, expected: ValidationError as ErrorClass })),
      fc.integer({ min: MAX, max: 3 * MAX }).map((n) => ({ machine: 'timing', input: { pad: 'x'.repeat(n) }, options: {}, expected: PayloadTooLargeError as ErrorClass })),
      unserialisable.map((make) => ({ machine: 'timing', input: { v: make() }, options: {}, expected: ValidationError as ErrorClass })),
      fc.oneof(fc.record({ jobId: badId }), fc.record({ idempotencyKey: badId })).map((options) => ({ machine: 'timing', input: {}, options, expected: ValidationError as ErrorClass })),
      fc.constantFrom('tally', 'life', 'approval', 'ended').map((jobId) => ({ machine: 'timing', input: {}, options: { jobId }, expected: IdempotencyConflictError as ErrorClass })),
    );
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        await refused(() => rt.start(c.machine, c.input, c.options as never), c.expected);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('refuses arguments of the wrong JavaScript type (symbols, null-prototype objects, null options) with a typed error', async () => {
    const cases = fc.oneof(
      fc.constantFrom<() => unknown>(() => Symbol('machine'), () => Object.create(null) as unknown, () => ({ toString: () => { throw new Error('no'); } })).map((make) => ({ machine: make(), options: undefined as unknown })),
      fc.constant({ machine: 'timing' as unknown, options: null as unknown }),
    );
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        await refused(() => rt.start(c.machine as string, {}, c.options as never));
      }),
      { numRuns: 20 },
    );
  });
});

// ------------------------------------------------------------------ send

describe('send with bad input', () => {
  it('refuses malformed, wrong-typed, unknown, reserved, huge and non-JSON events, bad event ids, unknown and ended jobs, writing nothing', async () => {
    const cases = fc.oneof(
      // Job ids are checked for shape at `start`; at `send` a string that names no job is simply not found.
      fc.oneof(fc.string({ minLength: 1 }).filter((id) => !['tally', 'life', 'approval', 'bare', 'ended'].includes(id)), badId).map((jobId) => ({
        jobId: jobId as unknown,
        event: { type: 'INC' } as unknown,
        options: {},
        expected: (typeof jobId === 'string' && jobId !== '' ? JobNotFoundError : ValidationError) as ErrorClass,
      })),
      fc.record({ jobId: fc.constantFrom(...LIVE), event: nonObject }).map((c) => ({ ...c, options: {}, expected: ValidationError as ErrorClass })),
      fc.record({ jobId: fc.constantFrom(...LIVE), type: fc.oneof(fc.constant(''), fc.integer(), fc.constant(null), fc.object(), fc.array(fc.string()), fc.boolean()) }).map(({ jobId, type }) => ({
        jobId,
        event: { type, extra: 1 } as unknown,
        options: {},
        expected: ValidationError as ErrorClass,
      })),
      fc.record({ jobId: fc.constantFrom(...LIVE), prefix: fc.constantFrom('xstate.', 'spool.'), rest: fc.string({ maxLength: 30 }) }).map(({ jobId, prefix, rest }) => ({
        jobId,
        event: { type: `${prefix}${rest}` } as unknown,
        options: {},
        expected: UnknownEventError as ErrorClass,
      })),
      fc.record({ jobId: fc.constantFrom(...LIVE), type: fc.string({ minLength: 1, maxLength: 30 }).filter((t) => !/^(xstate|spool)\./.test(t) && !['INC', 'ADD', 'STOP', 'CANCEL', 'START', 'PROGRESS', 'ITEM_DONE', 'ITEM_FAILED', 'FINISH', 'FAIL', 'REMIND', 'PING', 'RESET', 'LEAVE', 'BACK', 'SNOOZE'].includes(t)) }).map(({ jobId, type }) => ({
        jobId,
        event: { type } as unknown,
        options: {},
        expected: UnknownEventError as ErrorClass,
      })),
      fc.oneof(
        fc.oneof(fc.string(), fc.double({ noInteger: true, noNaN: true }), fc.constant(null), fc.boolean()).map((n) => ({ jobId: 'tally', event: { type: 'ADD', n } })),
        fc.integer({ min: 1001 }).map((n) => ({ jobId: 'tally', event: { type: 'ADD', n } })),
        fc.constant({ jobId: 'tally', event: { type: 'ADD' } }),
        fc.dictionary(fc.string({ minLength: 1 }).filter((k) => k !== 'type'), fc.jsonValue(), { minKeys: 1 }).map((extra) => ({ jobId: 'tally', event: { ...extra, type: 'INC' } })),
        fc.oneof(fc.double({ min: 100.001, max: 1e9, noNaN: true }), fc.double({ min: -1e9, max: -0.001, noNaN: true }), fc.string()).map((percent) => ({ jobId: 'life', event: { type: 'PROGRESS', percent } })),
        fc.constantFrom({ type: 'APPROVE' }, { type: 'APPROVE', by: '' }, { type: 'REJECT', by: 'x' }, { type: 'CANCEL', reason: 5 }).map((event) => ({ jobId: 'approval', event })),
      ).map((c) => ({ ...c, event: c.event as unknown, options: {}, expected: ValidationError as ErrorClass })),
      fc.record({ jobId: fc.constantFrom(...LIVE), n: fc.integer({ min: MAX, max: 4 * MAX }) }).map(({ jobId, n }) => ({ jobId, event: { type: 'INC', pad: '\u00e9'.repeat(n / 2) } as unknown, options: {}, expected: PayloadTooLargeError as ErrorClass })),
      fc.record({ jobId: fc.constantFrom(...LIVE), make: unserialisable }).map(({ jobId, make }) => ({ jobId, event: { type: 'INC', v: make() } as unknown, options: {}, expected: ValidationError as ErrorClass })),
      fc.constant(null).map(() => ({ jobId: 'tally', event: cyclic() as unknown, options: {}, expected: ValidationError as ErrorClass })),
      fc.record({ live: liveJobAndEvent, eventId: badId.filter((id) => id !== null) }).map(({ live, eventId }) => ({ ...live, event: live.event as unknown, options: { eventId }, expected: ValidationError as ErrorClass })),
      validFor.tally.map((event) => ({ jobId: 'ended', event: event as unknown, options: {}, expected: JobTerminalError as ErrorClass })),
    );
    await fc.assert(
      fc.asyncProperty(cases, fc.boolean(), async (c, wait) => {
        await refused(() => rt.send(c.jobId as string, c.event, { ...c.options, wait } as never), c.expected);
      }),
      { numRuns: 2 * NUM_RUNS },
    );
  });

  it('an event id reused with another payload is a conflict (nothing written); with the same payload it returns the first outcome', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), validFor.tally, fc.boolean(), async (k, event, wait) => {
        const first = (await rt.events('tally')).find((e) => e.eventId === `e${k}`)!;
        const same = JSON.stringify(event) === JSON.stringify(first.payload);
        if (same) {
          const again = await rt.send('tally', event, { eventId: `e${k}`, wait });
          expect(again).toMatchObject({ duplicate: true, status: first.status, revision: first.revision });
        } else {
          await refused(() => rt.send('tally', event, { eventId: `e${k}`, wait }), IdempotencyConflictError);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('refuses arguments of the wrong JavaScript type (null options) with a typed error', async () => {
    await refused(() => rt.send('tally', { type: 'INC' }, null as never));
  });
});

describe('deep nesting', () => {
  // With the default size limit (256 KiB) a payload can nest ~100k levels deep; the 4 KiB runtime above would refuse it by size first.
  let deep: Runtime;
  let deepRaw: Database.Database;
  beforeAll(async () => {
    const path = res.dbPath();
    const clock = new VirtualClock(T0);
    deep = await res.runtime({ store: await res.sqlite(path, { clock, synchronous: 'NORMAL' }), machines: [timing], clock });
    await deep.start('timing', {}, { jobId: 'bare' });
    deepRaw = res.raw(path, { readonly: true });
  });

  it('a deeply nested event or input (default size limit) is accepted or refused with a typed error, never thrown past the API', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('array', 'object', 'mixed') as fc.Arbitrary<'array' | 'object' | 'mixed'>, fc.boolean(), async (depth, kind, asInput) => {
        const value = nest(depth, kind);
        const before = dumpDatabase(deepRaw);
        try {
          if (asInput) await deep.start('timing', { value });
          else await deep.send('bare', { type: 'PING', value });
        } catch (error) {
          expect(isSpoolRefusal(error), `depth ${depth} ${kind} ${asInput ? 'input' : 'event'}: ${describeThrown(error)}`).toBe(true);
          expect(dumpDatabase(deepRaw)).toEqual(before);
        }
      }),
      // Nested arrays ~2,300-4,100 deep pass JSON.stringify but not the recursive hashing after it: always tried.
      { numRuns: 60, examples: [[3000, 'array', false], [3000, 'array', true]] },
    );
  });
});

describe('the other calls with bad arguments', () => {
  it('a list limit beyond a safe integer (found by this fuzzer: 2^63) is a ValidationError, not a driver error', async () => {
    for (const limit of [2 ** 63, Number.MAX_SAFE_INTEGER + 1, 1e300]) await refused(() => rt.list({ limit }), ValidationError);
    expect(await rt.list({ limit: Number.MAX_SAFE_INTEGER })).not.toHaveLength(0);
  });

  it('cancel, progress, assets, tokens, reads, purge, list and waitFor refuse with a typed error, writing nothing', async () => {
    const unknownJob = fc.string({ minLength: 1, maxLength: 20 }).map((s) => `nope-${s}`);
    const calls: fc.Arbitrary<{ name: string; call: () => Promise<unknown>; expected?: ErrorClass }> = fc.oneof(
      fc.oneof(unknownJob, badId).map((id) => ({ name: 'cancel', call: () => rt.cancel(id as string, 'x'), expected: (typeof id === 'string' && id !== '' ? JobNotFoundError : ValidationError) as ErrorClass })),
      fc.oneof(fc.string({ minLength: 2001, maxLength: 2100 }), fc.integer(), fc.object()).map((reason) => ({ name: 'cancel reason', call: () => rt.cancel('approval', reason as string), expected: ValidationError as ErrorClass })),
      fc.constant({ name: 'cancel ended', call: () => rt.cancel('ended', 'x'), expected: JobTerminalError as ErrorClass }),
      fc.oneof(fc.double({ min: 100.0001, max: 1e9, noNaN: true }), fc.double({ max: -0.0001, noNaN: true }), fc.constantFrom(NaN, Infinity, -Infinity), fc.string(), fc.constant(null)).map((p) => ({
        name: 'setProgress',
        call: () => rt.setProgress('life', p as number),
        expected: ValidationError as ErrorClass,
      })),
      fc.oneof(
        fc.constantFrom<unknown>(null, undefined, 5, 'x', {}, { type: 1, uri: 'u' }, { type: 'x', uri: '' }, { type: 'x' }),
        fc.oneof(fc.integer({ max: -1 }), fc.double({ noInteger: true, noNaN: true }), fc.string()).map((size) => ({ type: 'x', uri: 'u', size })),
        unserialisable.map((make) => ({ type: 'x', uri: 'u', meta: make() })),
      ).map((asset) => ({ name: 'attachAsset', call: () => rt.attachAsset('tally', asset as never), expected: ValidationError as ErrorClass })),
      fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom(...'abcdefABCDEF0123456789_-'), minLength: 16, maxLength: 128 }), everything).map((token) => ({
        name: 'complete',
        call: () => rt.complete(token as string, { ok: true }),
        expected: TokenError as ErrorClass,
      })),
      fc.oneof(fc.string(), everything).map((token) => ({ name: 'fail', call: () => rt.fail(token as string, 'no') })),
      fc.record({ read: fc.constantFrom('get', 'history', 'events', 'details') as fc.Arbitrary<'get' | 'history' | 'events' | 'details'>, id: fc.oneof(unknownJob, badId) }).map(({ read, id }) => ({
        name: read,
        call: () => rt[read](id as string),
        expected: (typeof id === 'string' && id !== '' ? JobNotFoundError : ValidationError) as ErrorClass,
      })),
      fc.constantFrom('tally', 'life', 'bare').map((id) => ({ name: 'purge active', call: () => rt.purge(id), expected: JobNotFinishedError as ErrorClass })),
      fc
        .record({ limit: fc.oneof(fc.string(), fc.double(), fc.object()), afterId: fc.oneof(fc.integer(), fc.object()), status: fc.string(), machineId: fc.oneof(fc.integer(), fc.object()) }, { requiredKeys: [] })
        .map((filter) => ({ name: `list ${JSON.stringify(filter)}`, call: () => rt.list(filter as never) })),
      fc.oneof(fc.integer(), fc.string(), fc.constant(null), fc.object()).map((predicate) => ({ name: 'waitFor', call: () => rt.waitFor('tally', predicate as never, { timeoutMs: 50 }) })),
    );
    await fc.assert(
      fc.asyncProperty(calls, async (c) => {
        await refused(c.call, c.expected);
      }),
      { numRuns: 2 * NUM_RUNS },
    );
  });
});

describe('anything at all', () => {
  it('start and send with arbitrary values in every argument: success or a typed refusal, and the live jobs still work', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constantFrom(...known), everything), everything, everything, async (machine, input, options) => {
        await refused(() => rt.start(machine as string, input, options as never));
      }),
      { numRuns: NUM_RUNS },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constantFrom(...LIVE, 'approval', 'ended'), everything), everything, fc.oneof(fc.constant(undefined), everything), async (jobId, event, options) => {
        await refused(() => rt.send(jobId as string, event, options as never));
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await rt.send('tally', { type: 'INC' })).toMatchObject({ status: 'applied' });
  });
});

describe('the CLI with malformed JSON', () => {
  const MACHINES = fileURLToPath(new URL('../../machines/index.ts', import.meta.url));
  let path: string;
  let cliRaw: Database.Database;
  beforeAll(async () => {
    path = res.dbPath();
    const setup = await res.runtime({ store: await res.sqlite(path), machines: [jobLifecycle] });
    await setup.start('job-lifecycle', { name: 'cli' }, { jobId: 'cli-job' });
    await setup.close();
    cliRaw = res.raw(path, { readonly: true });
  });

  /** Text that is not JSON (or JSON of the wrong shape), and is not the bare-type shorthand either. */
  const malformed = fc.oneof(
    fc.string({ maxLength: 40 }).filter((t) => !/^\s*[A-Za-z_][A-Za-z0-9_.:-]*\s*$/.test(t) && !isJson(t)),
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)).filter((t) => t.length > 1).chain((t) => fc.integer({ min: 1, max: t.length - 1 }).map((n) => t.slice(0, n))).filter((t) => !isJson(t) && !/^\s*[A-Za-z_][A-Za-z0-9_.:-]*\s*$/.test(t)),
    fc.constantFrom('42', '"START"', 'null', 'true', '[]', '[{"type":"START"}]', '{"type":42}', '{"type":""}', '{"type":"xstate.init"}', '{"type":"NOPE"}', '{"type":"PROGRESS","percent":"x"}', '{"type":"START","extra":1}', "{'type':'START'}", '{"type":"START"', '\u0000'),
  );

  it('`spool send` and `spool start --input` refuse it with one typed line and exit 1, changing nothing', async () => {
    await fc.assert(
      fc.asyncProperty(malformed, fc.boolean(), async (text, asInput) => {
        const before = dumpDatabase(cliRaw);
        let stdout = '';
        let stderr = '';
        // `--` ends the options, as for any command line: text such as "-h" is then the event, not a flag.
        const args = asInput ? ['start', 'job-lifecycle', '--input', text] : ['send', 'cli-job', '--', text];
        const code = await main(['--db', path, '--machines', MACHINES, ...args], { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), cwd: res.tempDir() });
        expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
        expect(stderr).toMatch(/^spool: SPOOL_[A-Z_]+: [^\n]+\n$/);
        expect(stderr).not.toMatch(/unexpected error/);
        expect(dumpDatabase(cliRaw)).toEqual(before);
      }),
      { numRuns: NUM_RUNS },
    );
  });
});

function isJson(text: string): boolean {
  try {
    const v = JSON.parse(text) as unknown;
    // Objects with a usable shape are not malformed; everything else JSON.parse accepts counts as JSON too.
    return v !== undefined;
  } catch {
    return false;
  }
}

describe('event ids the runtime uses itself', () => {
  // The runtime files its own events under ids of its own: `spool.cancel` (a cancel request),
  // `timer~<timer id>`, `effect~<effect id>~a<attempt>` (an activity's outcome), `self~r<rev>~<i>`.
  // A user event under one of them must be refused, or must not stop the runtime's own event.
  let path: string;
  let clock: VirtualClock;
  let client: Runtime;
  beforeAll(async () => {
    path = res.dbPath();
    clock = new VirtualClock(T0);
    // A client runtime (no activities run) so that nothing races the sends below.
    client = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [tally, approvalFlow, retryingJob], clock, runEffects: false });
  });
  const sendUnder = async (jobId: string, event: unknown, eventId: string) => {
    await refused(() => client.send(jobId, event, { eventId, wait: false }));
  };

  it('`spool.cancel`: a cancel request after it still cancels the job', async () => {
    await client.start('crash-tally', {}, { jobId: 'ids-cancel' });
    await sendUnder('ids-cancel', { type: 'INC' }, 'spool.cancel');
    await client.cancel('ids-cancel', 'please');
    expect(await client.get('ids-cancel')).toMatchObject({ value: 'cancelled', final: true });
  });

  it('`timer~…`: the timer still delivers its event', async () => {
    const job = await client.start('approval-flow', { subject: 'ids', remindAfterMs: 1000, deadlineMs: 60_000 }, { jobId: 'ids-timer' });
    const [reminder] = (await client.details(job.id)).timers.filter((t) => t.key === 'reminder');
    await sendUnder(job.id, { type: 'REMIND' }, `timer~${reminder!.id}`);
    await client.processPending();
    const before = ((await client.get(job.id)).context as { reminders: number }).reminders;
    const worker = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [tally, approvalFlow, retryingJob], clock });
    clock.advance(1000);
    await worker.tick();
    await worker.idle();
    expect(((await worker.get(job.id)).context as { reminders: number }).reminders).toBe(before + 1);
    await worker.close();
  });

  it('`effect~…~a1`: the activity’s outcome still reaches the job, which ends', async () => {
    await client.start('retrying-job', { name: 'ids' }, { jobId: 'ids-effect' });
    await client.send('ids-effect', { type: 'START' });
    const [effect] = (await client.details('ids-effect')).effects;
    await sendUnder('ids-effect', { type: 'START' }, `effect~${effect!.id}~a1`);
    const worker = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [tally, approvalFlow, retryingJob], clock });
    await worker.tick();
    await worker.idle();
    expect(await worker.get('ids-effect')).toMatchObject({ value: 'completed', final: true });
    await worker.close();
  });
});
