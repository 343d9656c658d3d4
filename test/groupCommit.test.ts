/**
 * Group commit: transitions of many jobs ready at the same moment share one store transaction,
 * each caller is acknowledged only after its own commit is in a durable batch, and one job's
 * failed commit does not sink the others in its batch.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import type { CommitResult, JobStore, TransitionCommit, WriteBatch } from '../src/internal.ts';
import { DAMAGED_RECORD } from '../src/ports/store.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { CommitBatcher } from '../src/runtime/commits.ts';
import { rawAll, rawAt, rawGet } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';

const counter = setup({ types: { context: {} as { n: number } } }).createMachine({
  id: 'counter',
  context: { n: 0 },
  initial: 'counting',
  states: {
    counting: { on: { BUMP: { actions: assign({ n: ({ context }) => context.n + 1 }) }, STOP: 'stopped' }, after: { 1000: 'stopped' } },
    stopped: { type: 'final' },
  },
});

/** One activity, then done: a worker's job. */
const fetcher = setup({ actors: { fetch: fromPromise(async ({ input }: { input: { n: number } }) => input.n * 2) } }).createMachine({
  id: 'fetcher',
  initial: 'fetching',
  context: ({ input }: { input: { n: number } }) => ({ n: input.n, out: 0 }),
  states: {
    fetching: {
      invoke: { id: 'fetch', src: 'fetch', input: ({ context }) => ({ n: context.n }), onDone: { target: 'done', actions: assign({ out: ({ event }) => event.output as number }) } },
    },
    done: { type: 'final' },
  },
});

/**
 * Wraps a store: records every batch handed to commit(), and can sabotage chosen commits once
 * (by job id, or `'first of a shared batch'`: the first commit of the first batch that holds more
 * than one).
 */
function spyStore(inner: JobStore, sabotage = new Set<string>()): JobStore & { batches: TransitionCommit[][]; results: CommitResult[][] } {
  const batches: TransitionCommit[][] = [];
  const results: CommitResult[][] = [];
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'batches') return batches;
      if (prop === 'results') return results;
      if (prop === 'commit') {
        return async (commits: readonly TransitionCommit[]) => {
          batches.push([...commits]);
          if (commits.length > 1 && sabotage.delete('first of a shared batch')) sabotage.add(commits[0]!.jobId);
          const tampered = commits.map((c) => (sabotage.delete(c.jobId) ? { ...c, expectedRevision: c.expectedRevision - 1 } : c));
          const r = await target.commit(tampered);
          results.push(r);
          return r;
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as JobStore & { batches: TransitionCommit[][]; results: CommitResult[][] };
}

const resources = new Resources();
afterEach(() => resources.dispose());

describe('group commit', () => {
  it('group-commits concurrent starts: new jobs share transactions, and one refused start does not sink the others', async () => {
    const path = resources.dbPath();
    const inner = await resources.sqlite(path);
    const creates: number[] = [];
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === 'writeBatch') {
          return (batch: WriteBatch) => {
            const jobs = batch.creates ?? [];
            creates.push(jobs.length);
            // The store refuses one new job of the batch (its id is taken by a row of another owner).
            return target.writeBatch({ ...batch, creates: jobs.map((j) => (j.id === 'j7' ? { ...j, owner: 'someone-else', idempotencyKey: null, children: [{ ...j, id: 'j0' }] } : j)) });
          };
        }
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as JobStore;
    const runtime = await resources.runtime({ store, machines: [counter], clock: new VirtualClock() });
    const ids = Array.from({ length: 30 }, (_, i) => `j${i}`);
    const results = await Promise.allSettled(ids.map((id) => runtime.start('counter', {}, { jobId: id })));
    // j7's batch member was refused (its child row collides with j0): j7 alone rejects, every other job started.
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
    expect((results[7] as PromiseRejectedResult).reason).toBeDefined();
    for (const [i, r] of results.entries()) if (i !== 7) expect(r).toMatchObject({ status: 'fulfilled', value: { id: ids[i], revision: 1 } });
    expect(creates.reduce((a, b) => a + b, 0)).toBe(30);
    expect(Math.max(...creates)).toBeGreaterThan(1);
    expect(creates.length).toBeLessThan(30);
    const raw = await rawAt(resources, path, { readonly: true });
    expect((await rawAll<{ id: string }>(raw, "SELECT id FROM jobs WHERE id LIKE 'j%' ORDER BY CAST(substr(id, 2) AS INTEGER)")).map((r) => r.id)).toEqual(ids.filter((id) => id !== 'j7'));
    expect(await rawGet(raw, "SELECT count(*) AS n FROM transitions WHERE job_id = 'j7'")).toEqual({ n: 0 });
  });

  it('batches concurrent sends to different jobs into shared transactions, acknowledging each after its commit', async () => {
    const path = resources.dbPath();
    const store = spyStore(await resources.sqlite(path));
    const runtime = await resources.runtime({ store, machines: [counter], clock: new VirtualClock() });
    const ids = Array.from({ length: 40 }, (_, i) => `c${i}`);
    for (const id of ids) await runtime.start('counter', {}, { jobId: id });
    store.batches.length = 0;
    const results = await Promise.all(ids.map((id) => runtime.send(id, { type: 'BUMP' })));
    expect(results.every((r) => r.status === 'applied' && r.revision === 2)).toBe(true);
    expect(store.batches.flat()).toHaveLength(40);
    expect(Math.max(...store.batches.map((b) => b.length))).toBeGreaterThan(1);
    expect(store.batches.length).toBeLessThan(40);
    for (const id of ids) expect((await runtime.get(id)).context).toEqual({ n: 1 });
  });

  it('fires timers due together in shared transactions', async () => {
    const clock = new VirtualClock();
    const store = spyStore(await resources.sqlite(resources.dbPath()));
    const runtime = await resources.runtime({ store, machines: [counter], clock });
    for (let i = 0; i < 30; i += 1) await runtime.start('counter', {}, { jobId: `t${i}` });
    store.batches.length = 0;
    clock.advance(1000);
    expect((await runtime.tick()).timersFired).toBe(30);
    expect(store.batches.flat()).toHaveLength(30);
    expect(Math.max(...store.batches.map((b) => b.length))).toBeGreaterThan(1);
    expect((await runtime.list({ state: 'stopped' })).length).toBe(30);
  });

  it('one commit failing its revision check does not sink the others in its batch; it is re-applied', async () => {
    // Which commits share a batch depends on when each send reaches its commit (with an
    // asynchronous store, not all in the same turn): the sabotaged one is picked from a shared batch.
    const sabotage = new Set(['first of a shared batch']);
    const store = spyStore(await resources.sqlite(resources.dbPath()), sabotage);
    const runtime = await resources.runtime({ store, machines: [counter], clock: new VirtualClock() });
    const ids = Array.from({ length: 20 }, (_, i) => `s${i}`);
    for (const id of ids) await runtime.start('counter', {}, { jobId: id });
    store.batches.length = 0;
    store.results.length = 0;
    const results = await Promise.all(ids.map((id) => runtime.send(id, { type: 'BUMP' })));
    expect(results.map((r) => r.status)).toEqual(ids.map(() => 'applied'));
    // The batch that held the sabotaged commit also committed others.
    const mixed = store.results.find((r) => r.some((x) => !x.ok) && r.some((x) => x.ok));
    expect(mixed).toBeDefined();
    for (const id of ids) {
      const history = await runtime.history(id);
      expect(history.map((h) => h.revision)).toEqual([1, 2]);
      expect((await runtime.get(id)).context).toEqual({ n: 1 });
    }
  });

  it("claims of one pump round share a transaction, and so do outcomes of attempts that end together, each with the transition it causes", async () => {
    const path = resources.dbPath();
    const inner = await resources.sqlite(path);
    // An outcome is recorded on its own (`finishes`) or with the transition it causes (a commit's `finish`).
    const calls: { claims: number; finishes: number }[] = [];
    const outcomes = (commits: readonly TransitionCommit[] = []) => commits.filter((c) => c.finish !== undefined).length;
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        // A pump round's claims: a batch claim (`dueClaims`), in a batch of its own or in the batch of the outcomes that freed its slots.
        if (prop === 'writeBatch') {
          return async (batch: WriteBatch) => {
            const r = await target.writeBatch(batch);
            const due = (r.dueClaims ?? []).reduce((n, d) => n + d.claimed.length, 0);
            calls.push({ claims: (batch.claims?.length ?? 0) + due, finishes: (batch.finishes?.length ?? 0) + outcomes(batch.commits) });
            return r;
          };
        }
        if (prop === 'commit') {
          return (commits: readonly TransitionCommit[]) => {
            calls.push({ claims: 0, finishes: outcomes(commits) });
            return target.commit(commits);
          };
        }
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as JobStore;
    const clock = new VirtualClock();
    // Started by a runtime that runs no activities: the worker below finds all 24 due at once.
    const parked = await resources.runtime({ store: await resources.sqlite(path), machines: [fetcher], clock, runEffects: false });
    const ids = Array.from({ length: 24 }, (_, i) => `w${i}`);
    for (const [i, id] of ids.entries()) await parked.start('fetcher', { n: i }, { jobId: id });
    await parked.close();
    const runtime = await resources.runtime({ store, machines: [fetcher], clock, maxConcurrentActivities: 8 });
    await runtime.tick();
    await runtime.idle();
    for (const [i, id] of ids.entries()) expect(await runtime.get(id)).toMatchObject({ value: 'done', context: { out: i * 2 } });
    // Every job's one activity was claimed once and its outcome recorded once.
    expect(calls.reduce((n, c) => n + c.claims, 0)).toBe(24);
    expect(calls.reduce((n, c) => n + c.finishes, 0)).toBe(24);
    expect(Math.max(...calls.map((c) => c.claims))).toBeGreaterThan(1);
    expect(Math.max(...calls.map((c) => c.claims))).toBeLessThanOrEqual(8);
    expect(Math.max(...calls.map((c) => c.finishes))).toBeGreaterThan(1);
    // The slots those outcomes freed were refilled from the backlog in the same transactions.
    expect(calls.filter((c) => c.claims > 0 && c.finishes > 0).length).toBeGreaterThan(0);
    const raw = await rawAt(resources, path, { readonly: true });
    expect(await rawGet(raw, "SELECT count(*) AS n FROM attempts WHERE outcome = 'succeeded'")).toEqual({ n: 24 });
    expect(await rawGet(raw, "SELECT count(*) AS n FROM attempts WHERE outcome <> 'succeeded'")).toEqual({ n: 0 });
    // Nothing waited before them: each outcome was recorded in the commit that applied it, its event settled there
    // (recorded by its history row alone, schema 13: no inbox row).
    expect(await rawGet(raw, "SELECT count(*) AS n FROM events WHERE source_kind = 'effect' AND status = 'applied' AND revision = 2")).toEqual({ n: 24 });
    expect(await rawGet(raw, "SELECT count(*) AS n FROM inbox WHERE source_kind = 'effect'")).toEqual({ n: 0 });
  });

  it('outcomes of attempts that end at different moments wait for the others still running and share one transaction (commitDelayMs); with 0, each takes its own', async () => {
    for (const commitDelayMs of [1000, 0]) {
      const inner = await resources.sqlite(resources.dbPath());
      const store = spyStore(inner);
      const g = gatedMachine();
      // The longest delay: the last running attempt's outcome sends the queue (runtimeParts.test.ts has the rule itself).
      const runtime = await resources.runtime({ store, machines: [g.machine], clock: new VirtualClock(), commitDelayMs });
      const ns = [1, 2, 3, 4, 5];
      const running = ns.map((n) => g.running(n));
      const jobs = await Promise.all(ns.map((n) => runtime.start('gated', { n })));
      await Promise.all(running);
      store.batches.length = 0;
      for (const n of ns) {
        g.open(n);
        // Each attempt ends in a later event-loop turn than the one before.
        await new Promise((resolve) => setImmediate(resolve));
      }
      await runtime.idle();
      for (const [i, job] of jobs.entries()) expect(await runtime.get(job.id)).toMatchObject({ value: 'done', context: { out: ns[i] } });
      const outcomes = store.batches.map((b) => b.filter((c) => c.finish !== undefined).length).filter((n) => n > 0);
      expect(outcomes.reduce((a, b) => a + b, 0)).toBe(5);
      // No delay: the first outcome goes alone (an asynchronous store holds later ones while two batches are in flight).
      if (commitDelayMs > 0) expect(outcomes).toEqual([5]);
      else expect(outcomes[0]).toBe(1);
      await runtime.close();
    }
  });

  it('an outcome is applied from the record its runtime last committed, reading no job row first; a job held meanwhile refuses that commit, and the outcome waits', async () => {
    const inner = await resources.sqlite(resources.dbPath());
    const { store, reads } = readCounting(inner);
    const g = gatedMachine();
    const runtime = await resources.runtime({ store, machines: [g.machine], clock: new VirtualClock() });
    const firstRunning = g.running(1);
    const first = await runtime.start('gated', { n: 1 });
    await firstRunning;
    reads.length = 0;
    g.open(1);
    await runtime.idle();
    expect(reads).toEqual([]);
    expect(await runtime.get(first.id)).toMatchObject({ value: 'done', context: { out: 1 } });

    const secondRunning = g.running(2);
    const second = await runtime.start('gated', { n: 2 });
    await secondRunning;
    const reason = await holdDamaged(inner, second.id);
    g.open(2);
    await runtime.idle();
    await expectHeldWaiting(inner, second.id, reason, 2);
  });

  it("a backlog job's outcome is applied from the record its batch claim read (this runtime never saw the job), reading no job row; a job held meanwhile refuses that commit, and the outcome waits", async () => {
    const path = resources.dbPath();
    const inner = await resources.sqlite(path);
    const { store, reads } = readCounting(inner);
    const g = gatedMachine();
    const clock = new VirtualClock();
    // Started by a runtime that runs no activities: the worker's snapshot cache has none of them.
    const parked = await resources.runtime({ store: await resources.sqlite(path), machines: [g.machine], clock, runEffects: false });
    const ids = Array.from({ length: 6 }, (_, i) => `b${i}`);
    for (const [i, id] of ids.entries()) await parked.start('gated', { n: i }, { jobId: id });
    await parked.close();
    const runtime = await resources.runtime({ store, machines: [g.machine], clock, maxConcurrentActivities: 8 });
    const running = ids.map((_, i) => g.running(i));
    await runtime.tick();
    await Promise.all(running);
    // The record the claim read is stale once the job is held: the commit refuses it, and a fresh read finds the job held.
    const reason = await holdDamaged(inner, 'b0');
    reads.length = 0;
    for (const i of ids.keys()) g.open(i);
    await runtime.idle();
    for (const [i, id] of ids.entries()) if (i > 0) expect(await inner.getJob(id)).toMatchObject({ status: 'done', context: { out: i } });
    await expectHeldWaiting(inner, 'b0', reason, 0);
    // The others were committed from the records their batch claim returned.
    expect(reads.filter((id) => id !== 'b0')).toEqual([]);
    expect(reads).toContain('b0');
  });
});

/** `inner` with the job id of every `getJob` call recorded (`reads`). */
function readCounting(inner: JobStore): { store: JobStore; reads: string[] } {
  const reads: string[] = [];
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'getJob') {
        return (...a: Parameters<JobStore['getJob']>) => {
          reads.push(a[0]);
          return target.getJob(...a);
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as JobStore;
  return { store, reads };
}

/** Machine `gated`: one activity (output: its input's `n`), then done; each attempt waits until the test opens it (`open(n)`), and tells it started (`running(n)`). */
function gatedMachine() {
  const started = new Map<number, () => void>();
  const gates = new Map<number, () => void>();
  const machine = setup({
    actors: {
      fetch: fromPromise(async ({ input }: { input: { n: number } }) => {
        await new Promise<void>((resolve) => {
          gates.set(input.n, resolve);
          started.get(input.n)!();
        });
        return input.n;
      }),
    },
  }).createMachine({
    id: 'gated',
    initial: 'fetching',
    context: ({ input }: { input: { n: number } }) => ({ n: input.n, out: 0 }),
    states: {
      fetching: {
        invoke: { id: 'fetch', src: 'fetch', input: ({ context }) => ({ n: context.n }), onDone: { target: 'done', actions: assign({ out: ({ event }) => event.output }) } },
      },
      done: { type: 'final' },
    },
  });
  return { machine, running: (n: number) => new Promise<void>((resolve) => started.set(n, resolve)), open: (n: number) => gates.get(n)!() };
}

/** Quarantine job `jobId` as damaged (as a read of a damaged row would): the reason. */
async function holdDamaged(inner: JobStore, jobId: string): Promise<string> {
  const reason = `${DAMAGED_RECORD}a history row is unreadable`;
  await inner.setQuarantine(jobId, reason, Date.now());
  return reason;
}

/** A `gated` job whose attempt (returning `output`) ended while it was held: its commit was refused, and it stays held, the outcome recorded and waiting. */
async function expectHeldWaiting(inner: JobStore, jobId: string, reason: string, output: number): Promise<void> {
  expect(await inner.getJob(jobId)).toMatchObject({ value: 'fetching', quarantine: reason, revision: 1 });
  expect((await inner.listEffects(jobId))[0]).toMatchObject({ status: 'succeeded', output });
  expect((await inner.pendingEvents(jobId, 10)).map((e) => e.source)).toEqual(['effect']);
}

/** An asynchronous store whose commits land when the test says: the batches it was handed (job ids), and each one's landing. */
function heldStore(): { store: JobStore; batches: string[][]; pending: (() => void)[] } {
  const batches: string[][] = [];
  const pending: (() => void)[] = [];
  const store = {
    commit: (commits: readonly TransitionCommit[]) => {
      batches.push(commits.map((c) => c.jobId));
      return new Promise<CommitResult[]>((resolve) => pending.push(() => resolve(commits.map(() => ({ ok: true, revision: 2 }) as unknown as CommitResult))));
    },
  } as unknown as JobStore;
  return { store, batches, pending };
}

describe('batches in flight (an asynchronous store)', () => {
  it('holds at most two batches in the store; writes arriving meanwhile wait and share the next one', async () => {
    const { store, batches, pending } = heldStore();
    const batcher = new CommitBatcher(store);
    const commit = (jobId: string) => batcher.submit({ jobId } as TransitionCommit);
    const acked: string[] = [];
    for (const id of ['a', 'b', 'c', 'd', 'e']) void commit(id).then(() => acked.push(id));
    await new Promise(setImmediate); // the end of the event-loop turn: every flush that can happen has
    expect(batches).toEqual([['a'], ['b']]);
    pending.shift()!();
    await new Promise(setImmediate);
    expect(batches).toEqual([['a'], ['b'], ['c', 'd', 'e']]);
    expect(acked).toEqual(['a']);
    pending.splice(0).forEach((land) => land());
    await new Promise(setImmediate);
    expect(acked).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('sends a second batch while one is in flight only once as many writes wait as it carries', async () => {
    const { store, batches, pending } = heldStore();
    const batcher = new CommitBatcher(store);
    // Two event-loop turns: a write queued after a microtask is flushed (or held) at the end of the next one.
    const turns = async () => {
      await new Promise(setImmediate);
      await new Promise(setImmediate);
    };
    // Counted operations that compute (a microtask) before they commit; three together go as one batch of three.
    const round = (ids: string[]) =>
      ids.map((id) =>
        batcher.unit(async () => {
          await Promise.resolve();
          return batcher.submit({ jobId: id } as TransitionCommit);
        }),
      );
    const first = round(['a', 'b', 'c']);
    await turns();
    expect(batches).toEqual([['a', 'b', 'c']]);
    // One write, then another, while it is in flight: fewer than it carries, they wait.
    const later = [...round(['d']), ...round(['e'])];
    await turns();
    expect(batches).toEqual([['a', 'b', 'c']]);
    // A third: as many as in flight, so the second batch goes without waiting for the first.
    later.push(...round(['f']));
    await turns();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']]);
    // The first lands: a lone write now waits for the second (in flight with three) to land.
    pending.shift()!();
    await Promise.all(first);
    const g = round(['g']);
    await turns();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']]);
    pending.shift()!();
    await Promise.all(later);
    await turns();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g']]);
    pending.splice(0).forEach((land) => land());
    await Promise.all(g);
  });
});
