/**
 * Wake-ups: a worker starts a job's next step in the round in which the previous outcome
 * commits, never at its next poll. The commit that applies an outcome (or creates the job) claims
 * the next activity for this runner in the same transaction, so a 3-step job is one create and
 * three outcome commits; a timer or retry this runtime schedules wakes the worker when it is due.
 * Every worker here polls once every 1,000 s: a job that finished by polling would time the test
 * out. The clock is virtual; nothing waits on the wall clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { runWorker, type JobStore, type Runtime, type RuntimeEvent, type WriteBatch } from '../src/internal.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { T0 } from './helpers/durable.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
  await res.dispose();
});

const NEVER_POLL_MS = 1_000_000;

/** Attempts of `threeSteps`' activity running now, and the most seen at once (reset by a test that reads it). */
const inWork = { now: 0, most: 0 };

/** Three activity steps, then done. Each step yields one event-loop turn while it counts itself running. */
const threeSteps = setup({
  types: { context: {} as { n: number } },
  actors: {
    work: fromPromise<number, { n: number }>(async ({ input }) => {
      inWork.most = Math.max(inWork.most, ++inWork.now);
      try {
        await new Promise((resolve) => setImmediate(resolve));
        return input.n + 1;
      } finally {
        inWork.now -= 1;
      }
    }),
  },
}).createMachine({
  id: 'three-steps',
  context: { n: 0 },
  initial: 'a',
  states: {
    a: { invoke: { id: 'a', src: 'work', input: ({ context }) => ({ n: context.n }), onDone: { target: 'b', actions: assign({ n: ({ event }) => event.output }) } } },
    b: { invoke: { id: 'b', src: 'work', input: ({ context }) => ({ n: context.n }), onDone: { target: 'c', actions: assign({ n: ({ event }) => event.output }) } } },
    c: { invoke: { id: 'c', src: 'work', input: ({ context }) => ({ n: context.n }), onDone: { target: 'done', actions: assign({ n: ({ event }) => event.output }) } } },
    done: { type: 'final' },
  },
});

let failuresLeft = 0;
/** An activity, a 1 s pause (a durable timer), an activity that fails `failuresLeft` times first (retried after its backoff). */
const pauseAndRetry = setup({
  actors: {
    work: fromPromise(async () => 1),
    flaky: fromPromise(async () => {
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        throw new Error('flaky');
      }
      return 2;
    }),
  },
}).createMachine({
  id: 'pause-and-retry',
  initial: 'first',
  states: {
    first: { invoke: { id: 'first', src: 'work', onDone: 'pause' } },
    pause: { after: { 1000: 'second' } },
    second: { invoke: { id: 'second', src: 'flaky', onDone: 'done' } },
    done: { type: 'final' },
  },
});

/** Writes by kind: what the runtime's `writeBatch` and `commit` calls carry. */
interface Writes {
  creates: number;
  commits: number;
  finishes: number;
  claims: number;
  claimedInCommit: number;
}

/**
 * `store` as the runtime calls it, its writes counted by kind. A proxy in front of the store the
 * test runs on (behind the asynchronous boundary too, when the run asks for it): it counts the
 * calls the runtime makes, whatever layer carries them out.
 */
function countWrites<T extends JobStore>(store: T): { store: T; writes: Writes; wakeRead: () => Promise<void> } {
  const writes: Writes = { creates: 0, commits: 0, finishes: 0, claims: 0, claimedInCommit: 0 };
  // `wakeRead()`: resolves when the next read of the next wake-up (a worker round's last step) has returned.
  let wakeReaders: (() => void)[] = [];
  const wakeRead = () => new Promise<void>((resolve) => wakeReaders.push(resolve));
  const claimed = (items: readonly { claims?: readonly unknown[] }[] = []) => items.reduce((k, c) => k + (c.claims?.length ?? 0), 0);
  const counted = new Proxy(store, {
    get(target, key) {
      if (key === 'writeBatch') {
        return async (b: WriteBatch) => {
          writes.creates += b.creates?.length ?? 0;
          writes.commits += b.commits?.length ?? 0;
          writes.claimedInCommit += claimed(b.creates) + claimed(b.commits);
          writes.finishes += b.finishes?.length ?? 0;
          writes.claims += b.claims?.length ?? 0;
          const r = await target.writeBatch(b);
          // Batch claims (a pump's, or the one a batch of outcomes carries for the slots they free): what they took.
          for (const due of r.dueClaims ?? []) writes.claims += due.claimed.length;
          return r;
        };
      }
      if (key === 'commit') {
        return (cs: Parameters<JobStore['commit']>[0]) => {
          writes.commits += cs.length;
          writes.claimedInCommit += claimed(cs);
          return target.commit(cs);
        };
      }
      if (key === 'nextWakeAt') {
        return async (now: number) => {
          const at = await target.nextWakeAt(now);
          const readers = wakeReaders;
          wakeReaders = [];
          for (const r of readers) r();
          return at;
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: counted, writes, wakeRead };
}

/**
 * runWorker in the background with a poll that never comes in a test; counts the rounds that did
 * something. `reported(n)`: once n rounds have reported (a round reports when it ends, which can
 * be after the work it started has finished).
 */
function startWorker(runtime: Runtime): { rounds: () => number; reported: (n: number) => Promise<void> } {
  const controller = new AbortController();
  let rounds = 0;
  const waiting: { n: number; resolve: () => void }[] = [];
  const onRound = () => {
    rounds += 1;
    for (const w of waiting.filter((w) => rounds >= w.n)) w.resolve();
  };
  const loop = runWorker(runtime, { pollMs: NEVER_POLL_MS, signal: controller.signal, onRound });
  stops.push(async () => {
    controller.abort();
    await loop;
  });
  const reported = (n: number) => (rounds >= n ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ n, resolve })));
  return { rounds: () => rounds, reported };
}

function finished(runtime: Runtime, jobId: string): Promise<void> {
  return new Promise((resolve) => {
    const off = runtime.subscribe((e: RuntimeEvent) => {
      if (e.type === 'job.committed' && e.job.id === jobId && e.job.final) {
        off();
        resolve();
      }
    });
  });
}

describe('wake-ups', () => {
  it('a 3-step job run by a worker completes without a poll: one create and three outcome commits, each claiming the next step', async () => {
    const clock = new VirtualClock(T0);
    const { store, writes, wakeRead } = countWrites(await res.sqlite(res.dbPath(), { clock, synchronous: 'NORMAL' }));
    const runtime = await res.runtime({ store, machines: [threeSteps], clock });
    const done = finished(runtime, 'j1');
    // The worker's first round over before the start (it ends reading the next wake-up): a
    // round's batch claim holds the free slots while it is in flight, so a commit meanwhile would
    // leave its next step to that round.
    const firstRound = wakeRead();
    const worker = startWorker(runtime);
    await firstRound;
    await runtime.start('three-steps', {}, { jobId: 'j1' });
    await done;
    await runtime.idle();
    expect(await runtime.get('j1')).toMatchObject({ value: 'done', context: { n: 3 }, revision: 4, lease: null });
    expect(writes).toEqual({ creates: 1, commits: 3, finishes: 0, claims: 0, claimedInCommit: 3 });
    expect(worker.rounds()).toBe(0); // no worker round found anything to do: each step started as the last one committed
    const attempts = (await runtime.details('j1')).attempts;
    expect(attempts.map((a) => [a.effectId.split('~')[1], a.attempt, a.runner, a.outcome])).toEqual([
      ['a', 1, runtime.runnerId, 'succeeded'],
      ['b', 1, runtime.runnerId, 'succeeded'],
      ['c', 1, runtime.runnerId, 'succeeded'],
    ]);
  });

  it('a timer and a retry this runtime schedules wake the worker when due, not at its next poll', async () => {
    failuresLeft = 1;
    const clock = new VirtualClock(T0);
    const store = await res.sqlite(res.dbPath(), { clock, synchronous: 'NORMAL' });
    const runtime = await res.runtime({ store, machines: [pauseAndRetry], clock });
    // Time passes the moment something is scheduled (before the worker hears of it): it is due at once.
    const scheduled: number[] = [];
    runtime.subscribe((e) => {
      if (e.type !== 'timers.scheduled') return;
      scheduled.push(...e.dueAt.map((at) => at - clock.now()));
      clock.set(Math.max(clock.now(), ...e.dueAt));
    });
    const worker = startWorker(runtime);
    const done = finished(runtime, 'j1');
    await runtime.start('pause-and-retry', {}, { jobId: 'j1' });
    await done;
    expect(scheduled).toHaveLength(2); // the pause's timer, then the retry's backoff
    expect(scheduled[0]).toBe(1000);
    expect(scheduled[1]).toBeGreaterThan(0);
    // The round the timer woke fired it (it reports when it ends); the retry started in that round
    // or the one its backoff woke, or by the pump its failure's commit asked for.
    await worker.reported(1);
    expect(worker.rounds()).toBeLessThanOrEqual(2);
    const details = await runtime.details('j1');
    expect(details.job).toMatchObject({ value: 'done' });
    expect(details.attempts.map((a) => [a.effectId.split('~')[1], a.attempt, a.outcome])).toEqual([
      ['first', 1, 'succeeded'],
      ['second', 1, 'failed'],
      ['second', 2, 'succeeded'],
    ]);
  });

  it('claims in a commit respect maxConcurrentActivities: a step without a free slot waits in the store and starts when one frees', async () => {
    const clock = new VirtualClock(T0);
    const { store, writes } = countWrites(await res.sqlite(res.dbPath(), { clock, synchronous: 'NORMAL' }));
    const runtime = await res.runtime({ store, machines: [threeSteps], clock, maxConcurrentActivities: 1 });
    // Counted by the activity itself: the slot is held while it runs and frees when it returns,
    // before its outcome is recorded and `activity.finished` told (behind an asynchronous store,
    // another job's step may start in between, as the limit allows).
    inWork.most = 0;
    const ids = ['j1', 'j2', 'j3'];
    const done = Promise.all(ids.map((id) => finished(runtime, id)));
    // Started before the worker: no pump round holds the one slot while the creates are built,
    // so the first of them claims its first step itself.
    await Promise.all(ids.map((id) => runtime.start('three-steps', {}, { jobId: id })));
    startWorker(runtime);
    await done;
    await runtime.idle();
    expect(inWork.most).toBe(1);
    for (const id of ids) expect(await runtime.get(id)).toMatchObject({ value: 'done', context: { n: 3 }, lease: null });
    // Nine attempts: some claimed by the commit that asked for them, the rest by the pump when a slot freed.
    expect(writes.claimedInCommit + writes.claims).toBe(9);
    expect(writes.claimedInCommit).toBeGreaterThan(0);
  });

  it('an activity this runtime does not run (activityConcurrency 0) is not claimed by its commit: it waits in the store for another process', async () => {
    const clock = new VirtualClock(T0);
    const { store, writes } = countWrites(await res.sqlite(res.dbPath(), { clock, synchronous: 'NORMAL' }));
    const runtime = await res.runtime({ store, machines: [threeSteps], clock, activityConcurrency: { work: 0 } });
    await runtime.start('three-steps', {}, { jobId: 'j1' });
    await runtime.tick();
    await runtime.idle();
    expect(writes.claimedInCommit + writes.claims).toBe(0);
    expect(await store.listEffects('j1')).toMatchObject([{ status: 'pending', attempt: 0, claimedBy: null }]);
    expect((await runtime.get('j1')).lease).toBeNull();
  });
});
