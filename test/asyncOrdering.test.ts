/**
 * Ordering without a synchronous driver: the SQLite store behind the asynchronous boundary
 * (test/helpers/asyncStore.ts), where calls in flight together execute, and their results arrive,
 * in any order. Many jobs run activity steps at once, over many seeds; every guarantee must hold:
 * each step runs once, its outcome is recorded and applied, no lease is lost, nothing is stale.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { EffectClaim, JobStore, LogEntry, Runtime, RuntimeOptions, TransitionCommit, WriteBatch } from '../src/internal.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { asyncStore } from './helpers/asyncStore.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
/** The activities of `pinged` waiting for the test, by job: opened by the test, or after it. */
const gates = new Map<string, () => void>();
afterEach(async () => {
  for (const open of gates.values()) open();
  gates.clear();
  await res.dispose();
});

/** `turns` event-loop turns, or fewer once `done()` holds. */
async function turnsUntil(done: () => boolean, turns = 50): Promise<void> {
  for (let turn = 0; turn < turns && !done(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
}

const T0 = Date.parse('2026-01-01T00:00:00Z');

/** A runtime on `store`, its warnings and errors collected (`problems()`: none is expected). */
async function runtimeOn(store: JobStore, clock: VirtualClock, machines: RuntimeOptions['machines'], options: Partial<RuntimeOptions> = {}): Promise<{ runtime: Runtime; problems: () => string[] }> {
  const logs: LogEntry[] = [];
  const runtime = await res.runtime({ ...options, store, machines, clock, log: (e) => logs.push(e) });
  return { runtime, problems: () => logs.filter((e) => e.level !== 'info').map((e) => JSON.stringify(e)) };
}

/** A runtime on a SQLite file behind the asynchronous boundary, drawing its orders from `seed`. */
async function openAsync(seed: number, machines: RuntimeOptions['machines']): Promise<{ runtime: Runtime; problems: () => string[] }> {
  const clock = new VirtualClock(T0);
  return runtimeOn(asyncStore(await SqliteStore.open(res.dbPath(), { clock }), { seed }), clock, machines);
}

/** Three activity steps, then done. */
const steps = setup({
  types: { context: {} as { n: number } },
  actors: { step: fromPromise(async ({ input }: { input: number }) => input + 1) },
}).createMachine({
  id: 'steps',
  context: { n: 0 },
  initial: 'a',
  states: {
    a: { invoke: { id: 'a', src: 'step', input: ({ context }) => context.n, onDone: { target: 'b', actions: assign({ n: ({ event }) => event.output }) } } },
    b: { invoke: { id: 'b', src: 'step', input: ({ context }) => context.n, onDone: { target: 'c', actions: assign({ n: ({ event }) => event.output }) } } },
    c: { invoke: { id: 'c', src: 'step', input: ({ context }) => context.n, onDone: { target: 'done', actions: assign({ n: ({ event }) => event.output }) } } },
    done: { type: 'final' },
  },
});

describe('the SQLite store behind an asynchronous boundary', () => {
  it('reorders: calls issued together execute, and resolve, in either order; results arrive on a later macrotask', async () => {
    const orders = new Set<string>();
    for (let seed = 1; seed <= 20; seed += 1) {
      const executed: string[] = [];
      const resolved: string[] = [];
      const inner = { description: 'probe', async getJob(id: string) { executed.push(id); return undefined; } };
      const store = asyncStore(inner as unknown as JobStore, { seed });
      let turned = false;
      const calls = ['a', 'b', 'c'].map((id) => store.getJob(id).then(() => {
        expect(turned).toBe(true);
        resolved.push(id);
      }));
      setImmediate(() => (turned = true));
      expect(executed).toEqual([]); // never inside the caller's synchronous code
      await Promise.all(calls);
      orders.add(`${executed.join('')}/${resolved.join('')}`);
    }
    expect([...orders].some((o) => !o.startsWith('abc/'))).toBe(true);
    expect([...orders].some((o) => o.split('/')[0] !== o.split('/')[1])).toBe(true);
  });

  it('copies the arguments when a call is issued, keeps optional methods optional, the description as it is, and closes after the calls in flight', async () => {
    const seen: unknown[] = [];
    let closed = false;
    const inner = {
      description: 'probe',
      async addNote(note: unknown) {
        expect(closed).toBe(false);
        seen.push(note);
      },
      async close() {
        closed = true;
      },
    };
    const store = asyncStore(inner as unknown as JobStore, { seed: 3 });
    const note = { jobId: 'j', kind: 'k', message: 'as issued', at: 1 };
    const adding = store.addNote(note);
    note.message = 'changed after';
    expect(store.description).toBe('probe');
    expect(store.releaseAttempt).toBeUndefined();
    expect(store.externalChanges).toBeUndefined();
    await store.close();
    expect(closed).toBe(true);
    await adding;
    expect(seen).toEqual([{ jobId: 'j', kind: 'k', message: 'as issued', at: 1 }]);
  });

  it.each(Array.from({ length: 8 }, (_, i) => i + 1))('jobs of activity steps, run together (seed %i): each step runs once, no outcome or lease is lost', async (seed) => {
    const { runtime, problems } = await openAsync(seed, [steps]);
    const ids = Array.from({ length: 16 }, (_, i) => `j${i}`);
    await Promise.all(ids.map((id) => runtime.start('steps', {}, { jobId: id })));
    for (let round = 0; round < 40; round += 1) {
      await runtime.tick();
      await runtime.idle();
      const jobs = await Promise.all(ids.map((id) => runtime.get(id)));
      if (jobs.every((j) => j.final)) break;
    }
    for (const id of ids) {
      const job = await runtime.get(id);
      expect({ id, value: job.value, context: job.context }).toEqual({ id, value: 'done', context: { n: 3 } });
      const attempts = (await runtime.details(id)).attempts;
      expect(attempts.map((a) => `${a.attempt}:${a.outcome}`)).toEqual(['1:succeeded', '1:succeeded', '1:succeeded']);
    }
    expect(problems()).toEqual([]);
  });
});

/** An activity that waits for the test, in a state that also takes PING (a commit that creates no effect). */
const wait = fromPromise(async ({ input }: { input: string }) => {
  await new Promise<void>((resolve) => gates.set(input, resolve));
  return 'ok';
});
const pinged = setup({
  types: { context: {} as { pings: number; out: string } },
  actors: { wait },
}).createMachine({
  id: 'pinged',
  context: { pings: 0, out: '' },
  initial: 'working',
  states: {
    working: {
      invoke: { id: 'wait', src: 'wait', input: ({ self }) => self.id, onDone: { target: 'done', actions: assign({ out: ({ event }) => String(event.output) }) } },
      on: { PING: { actions: assign({ pings: ({ context }) => context.pings + 1 }) } },
    },
    done: { type: 'final' },
  },
});

describe('a commit that lets the lease go, racing the claim of the job\'s activity', () => {
  it.each(Array.from({ length: 16 }, (_, i) => i + 1))('seed %i: the attempt keeps its lease and its outcome is applied', async (seed) => {
    const { runtime, problems } = await openAsync(seed, [pinged]);
    const ids = Array.from({ length: 8 }, (_, i) => `p${i}`);
    await Promise.all(ids.map(async (id) => {
      await runtime.start('pinged', {}, { jobId: id });
      await runtime.send(id, { type: 'PING' });
    }));
    await turnsUntil(() => gates.size >= ids.length, 5_000);
    expect(gates.size).toBe(ids.length);
    for (const open of gates.values()) open();
    gates.clear();
    await Promise.all(ids.map((id) => runtime.waitFor(id, (j) => j.final, { timeoutMs: 10_000 })));
    for (const id of ids) {
      expect((await runtime.get(id)).context).toMatchObject({ pings: 1, out: 'ok' });
      expect((await runtime.details(id)).attempts.map((a) => `${a.attempt}:${a.outcome}`)).toEqual(['1:succeeded']);
    }
    expect(problems()).toEqual([]);
  });
});

/**
 * The SQLite store, giving a job's PING commit and the claim of its activity the orders an
 * asynchronous store may give them. `together`: as they come (the runtime batches them into one
 * write when both are ready in the same turn). `execution`/`result`: the claim is read for only
 * once the PING commit is issued (so the two are separate writes), and the commit's execution, or
 * only its result, waits until the claim has resolved (or 50 turns have passed).
 */
function orderPing(inner: SqliteStore, order: 'together' | 'execution' | 'result'): SqliteStore {
  let pingIssued = false;
  let claimed = false;
  const isPing = (c: TransitionCommit) => c.transition.eventType === 'PING' || c.event?.accept?.type === 'PING';
  async function write<T>(commits: readonly TransitionCommit[] = [], claims: readonly EffectClaim[] = [], run: () => Promise<T>): Promise<T> {
    const ping = order !== 'together' && commits.some(isPing);
    pingIssued ||= ping;
    if (ping && order === 'execution') await turnsUntil(() => claimed);
    const result = await run();
    if (ping && order === 'result') await turnsUntil(() => claimed);
    claimed ||= claims.length > 0;
    return result;
  }
  return new Proxy(inner, {
    get(target, key) {
      if (key === 'writeBatch') return (batch: WriteBatch) => write(batch.commits, batch.claims, () => target.writeBatch(batch));
      if (key === 'commit') return (commits: readonly TransitionCommit[]) => write(commits, [], () => target.commit(commits));
      if (key === 'dueEffects' && order !== 'together') {
        return async (...args: Parameters<SqliteStore['dueEffects']>) => {
          await turnsUntil(() => pingIssued);
          return target.dueEffects(...args);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('a claim and a commit of the same job in flight together (the commit takes or lets go of the lease)', () => {
  it.each(['together', 'execution', 'result'] as const)('%s: the attempt keeps its lease and its outcome is applied', async (order) => {
    const clock = new VirtualClock(T0);
    const { runtime, problems } = await runtimeOn(orderPing(await res.sqlite(res.dbPath(), { clock }), order), clock, [pinged]);
    await runtime.start('pinged', {}, { jobId: 'p' });
    expect(await runtime.send('p', { type: 'PING' })).toMatchObject({ status: 'applied' });
    await turnsUntil(() => gates.size >= 1, 500);
    expect(gates.size).toBe(1);
    for (const open of gates.values()) open();
    gates.clear();
    const done = await runtime.waitFor('p', (j) => j.final, { timeoutMs: 10_000 });
    expect(done.context).toMatchObject({ pings: 1, out: 'ok' });
    expect((await runtime.details('p')).attempts.map((a) => `${a.attempt}:${a.outcome}`)).toEqual(['1:succeeded']);
    expect(problems()).toEqual([]);
  });
});

/** `pinged`, waiting for GO first: the commit that invokes its activity takes the job's lease for it. */
const later = setup({ actors: { wait } }).createMachine({
  id: 'later',
  context: { out: '' },
  initial: 'idle',
  states: {
    idle: { on: { GO: 'working' } },
    working: { invoke: { id: 'wait', src: 'wait', input: ({ self }) => self.id, onDone: { target: 'done', actions: assign({ out: ({ event }) => String(event.output) }) } } },
    done: { type: 'final' },
  },
});

describe('the heartbeat letting an idle lease go, racing the claim of that job\'s activity', () => {
  it('a release that runs after the claim does not take the lease from under the attempt', async () => {
    const clock = new VirtualClock(T0);
    const inner = await res.sqlite(res.dbPath(), { clock });
    // The heartbeat's release runs only after a claim has resolved (or 50 turns), as a store may run it.
    let claimed = false;
    let released: string[] = [];
    const store = new Proxy(inner, {
      get(target, key) {
        if (key === 'releaseLeases') {
          return async (runner: string, jobIds: readonly string[] | 'all') => {
            if (jobIds !== 'all' && jobIds.includes('b')) await turnsUntil(() => claimed);
            released = jobIds === 'all' ? ['all'] : [...released, ...jobIds];
            return target.releaseLeases(runner, jobIds);
          };
        }
        if (key === 'writeBatch') {
          return async (batch: WriteBatch) => {
            // The runtime's release of an idle job goes in a batch: held back the same way.
            const releases = (batch.releases ?? []).flatMap((r) => r.jobIds);
            if (releases.includes('b')) await turnsUntil(() => claimed);
            released = [...released, ...releases];
            const result = await target.writeBatch(batch);
            claimed ||= (batch.claims ?? []).some((c) => c.id.startsWith('b~'));
            return result;
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const { runtime, problems } = await runtimeOn(store, clock, [pinged, later], { hostDriven: true, maxConcurrentActivities: 1 });
    await runtime.start('pinged', {}, { jobId: 'a' });
    await turnsUntil(() => gates.size === 1, 500);
    const [aGate, openA] = [...gates][0]!;
    // b's activity waits for the slot a holds; the commit that invoked it kept b's lease for it.
    await runtime.start('later', {}, { jobId: 'b' });
    await runtime.send('b', { type: 'GO' });
    expect((await runtime.get('b')).lease).not.toBeNull();
    const ticking = runtime.tick(); // its heartbeat finds b idle and lets b's lease go
    openA(); // a ends: its slot frees and b's activity is claimed
    gates.delete(aGate);
    await turnsUntil(() => gates.size === 1, 500);
    await ticking;
    expect(gates.size).toBe(1);
    for (const open of gates.values()) open();
    const done = await runtime.waitFor('b', (j) => j.final, { timeoutMs: 10_000 });
    expect(done.context).toMatchObject({ out: 'ok' });
    expect((await runtime.details('b')).attempts.map((a) => `${a.attempt}:${a.outcome}`)).toEqual(['1:succeeded']);
    // The gate saw b's claim: a claim of its own (b's GO commit could not claim it, a held the only slot).
    expect(claimed).toBe(true);
    expect(problems()).toEqual([]);
  });
});

describe('the heartbeat renewing a lease that a commit of the job in flight lets go', () => {
  it('a lease the job\'s own outcome commit released (its result not yet delivered) is not reported lost', async () => {
    const clock = new VirtualClock(T0);
    const inner = await res.sqlite(res.dbPath(), { clock });
    // The commit that records a's outcome (and lets a's lease go) executes at once; its result is
    // delivered only once the heartbeat has asked to renew a's lease (or after 50 turns).
    let releasing = false;
    let renewing = false;
    const store = new Proxy(inner, {
      get(target, key) {
        if (key === 'commit') {
          return async (commits: readonly TransitionCommit[]) => {
            const result = await target.commit(commits);
            if (commits.some((c) => c.jobId === 'a' && c.finish !== undefined && c.lease?.until === null)) {
              releasing = true;
              await turnsUntil(() => renewing);
            }
            return result;
          };
        }
        if (key === 'renewLeases') {
          return (runner: string, jobIds: readonly string[], until: number, now: number) => {
            renewing ||= jobIds.includes('a');
            return target.renewLeases(runner, jobIds, until, now);
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const { runtime, problems } = await runtimeOn(store, clock, [pinged], { hostDriven: true });
    await runtime.start('pinged', {}, { jobId: 'a' });
    await turnsUntil(() => gates.size === 1, 500);
    for (const open of gates.values()) open(); // a ends: its outcome commit releases the lease
    gates.clear();
    await turnsUntil(() => releasing, 500);
    expect(releasing).toBe(true);
    await runtime.tick(); // its heartbeat still counts a's attempt (its outcome is not recorded here yet) and renews a's lease
    expect(renewing).toBe(true);
    const done = await runtime.waitFor('a', (j) => j.final, { timeoutMs: 10_000 });
    expect(done.context).toMatchObject({ out: 'ok' });
    expect(done.lease).toBeNull();
    expect(problems()).toEqual([]);
  });
});
