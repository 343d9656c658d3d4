/**
 * A commit whose outcome is unknown (`CommitOutcomeUnknown`: the connection dropped at COMMIT) is
 * resolved by reading back, never by writing blind. A store wrapper throws it after really
 * committing the batch (`landed`) or without committing it (`lost`), for a chosen kind of write:
 * a new job, a transition, an attempt's outcome recorded on its own, an activity claim. Every
 * event is applied exactly once and every caller gets the outcome that is stored.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { CommitOutcomeUnknown, StorageIoError, type JobStore } from '../src/internal.ts';
import { operationsOf, type TransitionCommit, type UnresolvedOperation, type WriteBatch } from '../src/ports/store.ts';
import { CommitBatcher } from '../src/runtime/commits.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { Resources } from './helpers/resources.ts';

const counter = setup({ types: { context: {} as { n: number } } }).createMachine({
  id: 'counter',
  context: { n: 0 },
  initial: 'counting',
  states: { counting: { on: { BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) }, STOP: 'stopped' } }, stopped: { type: 'final' } },
});

/** One activity that fails its first attempt (a retry 100 ms later) and succeeds its second. */
let calls = 0;
const flaky = setup({
  actors: {
    work: fromPromise(async () => {
      calls += 1;
      if (calls === 1) throw new Error('first attempt fails');
      return 'ok';
    }),
  },
}).createMachine({
  id: 'flaky',
  initial: 'working',
  context: { out: '' },
  states: {
    working: { invoke: { id: 'work', src: 'work', onDone: { target: 'done', actions: assign({ out: ({ event }) => String(event.output) }) } } },
    done: { type: 'final' },
  },
});
const flakyPolicy = { activities: { work: { maxAttempts: 3, backoff: { initialMs: 100, factor: 1, maxMs: 100, jitter: 0 } } } };

type Mode = 'landed' | 'lost';

/**
 * The store, except that the next `times` writes (commit or writeBatch) holding an operation of
 * `kind` throw CommitOutcomeUnknown: after committing (`landed`) or without (`lost`).
 */
function droppingStore(inner: JobStore, mode: Mode, kind: UnresolvedOperation['kind'], times = 1) {
  const dropped: UnresolvedOperation[][] = [];
  let left = times;
  const write = async <T>(ops: UnresolvedOperation[], run: () => Promise<T>): Promise<T> => {
    // A claim is dropped whether one claim carries it or a batch claim (`due-claims`).
    if (left === 0 || !ops.some((op) => op.kind === kind || (kind === 'claim' && op.kind === 'due-claims'))) return run();
    left -= 1;
    dropped.push(ops);
    if (mode === 'landed') await run();
    throw new CommitOutcomeUnknown('the connection dropped at COMMIT (test)', ops);
  };
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'commit') return (commits: readonly TransitionCommit[]) => write(operationsOf({ commits }), () => target.commit(commits));
      if (prop === 'writeBatch') return (batch: WriteBatch) => write(operationsOf(batch), () => target.writeBatch(batch));
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store, dropped };
}

const res = new Resources();
afterEach(() => res.dispose());

/** How many history records and inbox rows each event id has: exactly once is `1` for both. */
async function appliedCounts(store: JobStore, jobId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const t of await store.history(jobId)) if (t.eventId) counts[t.eventId] = (counts[t.eventId] ?? 0) + 1;
  return counts;
}

describe.each<Mode>(['landed', 'lost'])('an unknown outcome that %s', (mode) => {
  it('a send: applied once, and the caller told it was applied', async () => {
    const inner = await res.sqlite(res.dbPath());
    const { store, dropped } = droppingStore(inner, mode, 'commit');
    const again = await res.runtime({ store, machines: [counter], clock: new VirtualClock() });
    await again.start('counter', {}, { jobId: 'c' }); // a create: not dropped
    const sent = await again.send('c', { type: 'BUMP' }, { eventId: 'bump-1' });
    expect(dropped).toHaveLength(1);
    expect(sent.status).toBe('applied');
    expect((await again.get('c')).context).toEqual({ n: 1 });
    expect((await inner.history('c')).map((t) => t.revision)).toEqual([1, 2]);
    expect(await appliedCounts(inner, 'c')).toMatchObject({ 'bump-1': 1 });
    // The next event goes on from the revision that is stored.
    expect((await again.send('c', { type: 'BUMP' }, { eventId: 'bump-2' })).status).toBe('applied');
    expect((await again.get('c')).context).toEqual({ n: 2 });
  });

  it('a start: the job created once, and the caller given it', async () => {
    const inner = await res.sqlite(res.dbPath());
    const { store, dropped } = droppingStore(inner, mode, 'create');
    const runtime = await res.runtime({ store, machines: [counter], clock: new VirtualClock() });
    // Two at once: a writeBatch of two creates (the lone start goes the same way).
    const [a, b] = await Promise.all([runtime.start('counter', {}, { jobId: 'a' }), runtime.start('counter', {}, { jobId: 'b' })]);
    expect(dropped).toHaveLength(1);
    expect([a.id, a.revision, b.id, b.revision]).toEqual(['a', 1, 'b', 1]);
    expect((await inner.listJobs({})).map((j) => j.id).sort()).toEqual(['a', 'b']);
    expect((await inner.history('a')).map((t) => t.revision)).toEqual([1]);
    expect((await runtime.send('a', { type: 'BUMP' })).status).toBe('applied');
  });

  it.each<UnresolvedOperation['kind']>(['commit', 'finish', 'claim'])('an activity job whose %s write is dropped: finishes, each outcome applied once', async (kind) => {
    calls = 0;
    // The claim that landed expires by this clock (on Postgres: the store judges leases by it too).
    const clock = new VirtualClock();
    const inner = await res.sqlite(res.dbPath(), { clock });
    const { store, dropped } = droppingStore(inner, mode, kind);
    const runtime = await res.runtime({ store, machines: [{ machine: flaky, ...flakyPolicy }], clock, leaseMs: 1000 });
    const job = await runtime.start('flaky', {}, { jobId: 'f' });
    await runtime.idle(); // attempt 1 failed: its retry is due in 100 ms
    clock.advance(100);
    await runtime.tick();
    await runtime.idle();
    // A claim taken as not claimed: one that was lost is claimed by the next round; one that
    // landed expires at its claimUntil (the lease, 1 s), and is then taken over.
    // A batch claim that was lost may be claimed again by the same round, whose read of due work
    // (`dueEffects`) finds the attempt still pending.
    if (kind === 'claim') {
      const status = (await runtime.get('f')).status;
      if (mode === 'landed') expect(status).toBe('active');
    }
    if (kind === 'claim' && (await runtime.get('f')).status === 'active') {
      clock.advance(1000);
      await runtime.tick();
      await runtime.idle();
    }
    expect(dropped.length).toBe(1);
    const done = await runtime.get(job.id);
    expect(done).toMatchObject({ status: 'done', context: { out: 'ok' } });
    const counts = await appliedCounts(inner, 'f');
    expect(Object.values(counts).every((n) => n === 1)).toBe(true);
    const events = await inner.listEvents('f');
    expect(events.filter((e) => e.status === 'pending')).toEqual([]);
    expect(new Set(events.map((e) => e.eventId)).size).toBe(events.length);
    expect(calls).toBe(2);
  });
});

describe('a read-back that meets a storage fault', () => {
  const unknownOnce = (inner: JobStore, readFaults: number) => {
    let dropped = false;
    let reads = 0;
    const store = {
      commit: async (commits: readonly TransitionCommit[]) => {
        if (dropped) return inner.commit(commits);
        dropped = true;
        await inner.commit(commits);
        throw new CommitOutcomeUnknown('dropped (test)', operationsOf({ commits }));
      },
      commitLanded: async (jobId: string, revision: number, eventId: string | null) => {
        reads += 1;
        if (reads <= readFaults) throw new StorageIoError('the read failed too (test)');
        return inner.commitLanded(jobId, revision, eventId);
      },
      getJob: (id: string) => inner.getJob(id),
    } as unknown as JobStore;
    return { store, reads: () => reads };
  };

  async function commitOfStartedJob() {
    const inner = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store: inner, machines: [counter], clock: new VirtualClock() });
    await runtime.start('counter', {}, { jobId: 'r' });
    const record = (await inner.getJob('r'))!;
    const commit: TransitionCommit = {
      jobId: 'r',
      expectedRevision: 1,
      job: { status: 'active', value: 'counting', statePaths: ['counting'], context: { n: 9 }, snapshot: record.snapshot, machineVersion: record.machineVersion, at: 1 },
      transition: { eventId: null, eventType: 'MIGRATE', payload: null, from: 'counting', to: 'counting', outcome: 'applied', error: null, at: 1 } as never,
    };
    return { inner, commit };
  }

  it('backs off and reads again: the caller gets the landed commit', async () => {
    const { inner, commit } = await commitOfStartedJob();
    const { store, reads } = unknownOnce(inner, 2);
    const waits: number[] = [];
    const batcher = new CommitBatcher(store, { tries: 5, firstMs: 10, maxMs: 40, pause: async (ms) => void waits.push(ms) });
    expect(await batcher.submit(commit)).toEqual({ ok: true, revision: 2, fence: null });
    expect(reads()).toBe(3);
    expect(waits).toEqual([10, 20]);
    expect((await inner.history('r')).map((t) => t.revision)).toEqual([1, 2]);
  });

  it('after its bound, the caller gets the typed retryable fault, and nothing was written twice', async () => {
    const { inner, commit } = await commitOfStartedJob();
    const { store, reads } = unknownOnce(inner, Infinity);
    const waits: number[] = [];
    const batcher = new CommitBatcher(store, { tries: 4, firstMs: 10, maxMs: 25, pause: async (ms) => void waits.push(ms) });
    const error = await batcher.submit(commit).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageIoError);
    expect(error).toMatchObject({ category: 'retryable' });
    expect(reads()).toBe(4);
    expect(waits).toEqual([10, 20, 25]);
    expect((await inner.history('r')).map((t) => t.revision)).toEqual([1, 2]);
  });
});
