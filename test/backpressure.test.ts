/**
 * Backpressure (`maxBacklog`): past the limit of events accepted but not yet applied, `start` and
 * `send` refuse with a typed, retryable error and write nothing; a repeated event id still gets its
 * first outcome; internal events (timers, activity outcomes, cancel) are never refused; once the
 * backlog drains (the count is re-read at most every 100 ms of the runtime's clock) requests pass
 * again. Both stores; a VirtualClock, no sleeping. The CLI's one-line error is in
 * test/cli-backpressure.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { MemoryStore } from '../persistence/memory/index.ts';
import { BackpressureError, ValidationError, createRuntime, type Runtime } from '../src/index.ts';
import type { JobStore } from '../src/ports/store.ts';
import { BacklogGauge } from '../src/runtime/limits.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { T0, runToEnd } from './helpers/durable.ts';
import { dumpRows } from './helpers/rawSql.ts';
import { dumpStore, Resources } from './helpers/resources.ts';

const counter = setup({ types: { context: {} as { n: number } } }).createMachine({
  id: 'counter',
  initial: 'open',
  context: { n: 0 },
  states: {
    open: { on: { PING: { actions: assign({ n: ({ context }) => context.n + 1 }) }, CANCEL: 'cancelled' } },
    cancelled: { type: 'final' },
  },
});

/** A timer, then an activity: both deliver internal events. */
const delayed = setup({ actors: { work: fromPromise(async () => 'worked') } }).createMachine({
  id: 'delayed',
  initial: 'waiting',
  states: {
    waiting: { after: { 1000: 'working' }, on: { PING: {} } },
    working: { invoke: { id: 'work', src: 'work', onDone: 'done' } },
    done: { type: 'final' },
  },
});

const MACHINES = [counter, delayed];
const PING = { type: 'PING' };

const res = new Resources();
afterEach(() => res.dispose());

interface Stores {
  /** The store the first runtime uses. */
  store: JobStore;
  /** Another handle on the same records, for a second runtime (the same instance in memory). */
  another: () => Promise<JobStore>;
  /** Every record, to compare before and after a refusal. */
  dump: () => Promise<unknown>;
}

/** `database`: the store under test (a SQLite file; a Postgres database in the postgres project); `memory`: a MemoryStore. */
async function stores(kind: 'database' | 'memory', clock: VirtualClock): Promise<Stores> {
  if (kind === 'memory') {
    const store = new MemoryStore();
    return { store, another: async () => store, dump: () => dumpStore(store) };
  }
  const path = res.dbPath();
  const store = await res.sqlite(path, { clock });
  return { store, another: () => res.sqlite(path, { clock }), dump: () => dumpRows(store) };
}

async function refusal(work: Promise<unknown>): Promise<BackpressureError> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BackpressureError);
  return error as BackpressureError;
}

describe.each(['database', 'memory'] as const)('maxBacklog (%s store)', (kind) => {
  it('refuses send and start past the limit, writing nothing; repeats get their first outcome; a drained backlog lets them through', async () => {
    const clock = new VirtualClock(T0);
    const { store, another, dump } = await stores(kind, clock);
    const client = await res.runtime({ store, machines: MACHINES, clock, processEvents: false, maxBacklog: 3 });
    await client.start('counter', {}, { jobId: 'c1' });
    for (const eventId of ['e1', 'e2', 'e3']) expect((await client.send('c1', PING, { eventId })).status).toBe('pending');
    expect(await store.pendingBacklog()).toBe(3);

    const before = await dump();
    const refused = await refusal(client.send('c1', PING, { eventId: 'e4' }));
    expect(refused).toMatchObject({ code: 'SPOOL_BACKPRESSURE', category: 'retryable', backlog: 3, limit: 3 });
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.message).toMatch(/3 events accepted but not yet applied \(maxBacklog 3\)\. Nothing was recorded; retry after \d+ ms/);
    expect(refused.toJSON()).toMatchObject({ code: 'SPOOL_BACKPRESSURE', backlog: 3, limit: 3, retryAfterMs: refused.retryAfterMs });
    await refusal(client.send('c1', PING)); // without an event id too
    await refusal(client.send('c1', PING, { eventId: 'e4', wait: false }));
    await refusal(client.start('counter', {}, { jobId: 'c2' }));

    // Repeats are answered, never refused: an accepted event id, a job already started.
    expect(await client.send('c1', PING, { eventId: 'e2' })).toMatchObject({ status: 'pending', duplicate: true });
    expect((await client.start('counter', {}, { jobId: 'c1' })).id).toBe('c1');
    expect(await dump()).toEqual(before);

    // A processing runtime drains the backlog (recovery applies accepted events).
    const processor = await res.runtime({ store: await another(), machines: MACHINES, clock });
    expect((await processor.get('c1')).context).toEqual({ n: 3 });
    expect(await store.pendingBacklog()).toBe(0);

    // The client counted 3 less than 100 ms ago on its clock: it still refuses; once the count is
    // due for a re-read it sees the drained backlog.
    await refusal(client.send('c1', PING, { eventId: 'e4' }));
    clock.advance(100);
    expect((await client.send('c1', PING, { eventId: 'e4' })).status).toBe('pending');
    expect((await client.start('counter', {}, { jobId: 'c2' })).id).toBe('c2');
    await processor.processPending();
    expect((await processor.get('c1')).context).toEqual({ n: 4 });
  });

  it('never lets concurrent sends of one runtime pass the limit together', async () => {
    const clock = new VirtualClock(T0);
    const { store } = await stores(kind, clock);
    const client = await res.runtime({ store, machines: MACHINES, clock, processEvents: false, maxBacklog: 5 });
    await client.start('counter', {}, { jobId: 'c1' });
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => client.send('c1', PING, { eventId: `e${i}` })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(rejected).toHaveLength(7);
    for (const r of rejected) expect(r.reason).toBeInstanceOf(BackpressureError);
    expect(await store.pendingBacklog()).toBe(5);
  });

  it('never refuses internal events: timer firings, activity outcomes, cancel requests', async () => {
    const clock = new VirtualClock(T0);
    const { store } = await stores(kind, clock);
    const runtime = await res.runtime({ store, machines: MACHINES, clock, maxBacklog: 2 });
    await runtime.start('delayed', {}, { jobId: 'd1' });
    await runtime.start('counter', {}, { jobId: 'c1' });
    await runtime.start('counter', {}, { jobId: 'held' });
    // Events of a suspended job wait in the inbox: they count.
    await runtime.suspend('held');
    for (const eventId of ['h1', 'h2']) expect((await runtime.send('held', PING, { eventId })).status).toBe('pending');

    await refusal(runtime.send('c1', PING)); // even one the inline path would apply at once
    await refusal(runtime.start('counter', {}));

    clock.advance(1000); // the timer fires, the activity runs, its outcome is applied
    expect((await runToEnd(runtime, clock, 'd1')).value).toBe('done');
    expect((await runtime.cancel('c1', 'operator')).value).toBe('cancelled');
    expect(await store.pendingBacklog()).toBe(2);

    await runtime.resume('held');
    expect((await runtime.get('held')).context).toEqual({ n: 2 });
    clock.advance(100);
    expect((await runtime.start('counter', {}, { jobId: 'c2' })).id).toBe('c2');
    expect((await runtime.send('c2', PING)).status).toBe('applied');
  });
});

describe('BacklogGauge', () => {
  it('re-reads the count at most every 100 ms of its clock, and estimates the retry from the drain rate it saw', async () => {
    const clock = new VirtualClock(T0);
    let count = 10;
    let reads = 0;
    const gauge = new BacklogGauge(
      async () => {
        reads += 1;
        return count;
      },
      clock,
      5,
    );
    const first = await refusal(gauge.admit(true));
    expect(first).toMatchObject({ backlog: 10, limit: 5, retryAfterMs: 1000 }); // no drain seen yet: the default
    await refusal(gauge.admit(true));
    clock.advance(99);
    await refusal(gauge.admit(false));
    expect(reads).toBe(1);

    count = 8; // 2 applied in 100 ms: 0.02 per ms; 4 more to go under the limit = 200 ms
    clock.advance(1);
    expect(await refusal(gauge.admit(true))).toMatchObject({ backlog: 8, retryAfterMs: 200 });
    expect(reads).toBe(2);

    count = 3;
    clock.advance(100);
    await gauge.admit(true); // 3 + 1
    await gauge.admit(true); // 4 + 1
    expect(gauge.estimate).toBe(5);
    await refusal(gauge.admit(true)); // this runtime's own queued events count until the next read
    expect(reads).toBe(3);
  });

  it('Infinity turns it off; a bad limit is refused when the runtime opens', async () => {
    const gauge = new BacklogGauge(async () => Number.MAX_SAFE_INTEGER, new VirtualClock(T0), Infinity);
    await gauge.admit(true);
    const store = res.track(new MemoryStore());
    for (const maxBacklog of [0, -1, 1.5, Number.NaN]) {
      await expect(createRuntime({ store, machines: MACHINES, maxBacklog })).rejects.toBeInstanceOf(ValidationError);
    }
    const runtime: Runtime = await createRuntime({ store, machines: MACHINES, maxBacklog: Infinity });
    await runtime.close();
  });
});
