/**
 * Job leases with fencing tokens: the store's rules (both stores), and two runtimes on one SQLite
 * file on a VirtualClock: one owner at a time, takeover at expiry with no overlap, the old owner
 * finding out at its next write, release on close, lease expiries in `tick()`, the audit columns.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../persistence/memory/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type { JobStore, LeaseClaim, TransitionCommit, TransitionRecord } from '../src/ports/store.ts';
import { Resources } from './helpers/resources.ts';
import { T0 as RT0, gate, openRuntime, releaseGates } from './helpers/durable.ts';
import { commitOf, newJob } from './store.contract.ts';
import { work, workHooks, type WorkArgs } from './fixtures/workMachine.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';

const res = new Resources();
const defaultWork = workHooks.work;
beforeEach(() => {
  workHooks.work = defaultWork;
});
afterEach(async () => {
  releaseGates();
  await res.dispose();
});

const T0 = 1_700_000_000_000;
const lease = (runner: string, fence: number | null, now: number, until: number | null, extra: Partial<LeaseClaim> = {}): LeaseClaim => ({ runner, fence, now, until, ...extra });
const under = (c: TransitionCommit, l: LeaseClaim): TransitionCommit => ({ ...c, lease: l });

const stores: [string, () => Promise<JobStore>][] = [
  ['SqliteStore', async () => storeUnderTest(await SqliteStore.open(join(res.tempDir(), 'leases.db')))],
  ['MemoryStore', async () => new MemoryStore()],
];

describe.each(stores)('lease rules: %s', (_name, open) => {
  let store: JobStore;
  beforeEach(async () => {
    store = await open();
    await store.createJob(newJob('A'));
  });
  afterEach(async () => {
    await store.close();
  });

  it('a commit claims a free lease (the fence grows), renews its own, and is refused while another runner holds it, writing nothing', async () => {
    expect((await store.getJob('A'))?.lease).toBeNull();
    expect(await store.commit([under(commitOf('A', 1), lease('w1', null, T0, T0 + 1000))])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
    expect((await store.getJob('A'))?.lease).toEqual({ owner: 'w1', fence: 1, until: T0 + 1000 });
    // Renewed under the fence it holds: the same fence, a later expiry.
    expect(await store.commit([under(commitOf('A', 2), lease('w1', 1, T0 + 10, T0 + 2000))])).toEqual([{ ok: true, revision: 3, fence: 1 }]);
    // Another runner before expiry: refused with who holds it and until when; nothing written.
    const before = [await store.getJob('A'), await store.history('A')];
    expect(await store.commit([under(commitOf('A', 3), lease('w2', null, T0 + 1999, T0 + 3000))])).toEqual([{ ok: false, reason: 'leased', owner: 'w1', until: T0 + 2000 }]);
    expect([await store.getJob('A'), await store.history('A')]).toEqual(before);
    // The holder with a wrong fence is refused too (a stale owner).
    expect(await store.commit([under(commitOf('A', 3), lease('w1', 7, T0 + 20, T0 + 3000))])).toMatchObject([{ ok: false, reason: 'leased' }]);
    // At expiry anyone may claim it: the fence grows.
    expect(await store.commit([under(commitOf('A', 3), lease('w2', null, T0 + 2000, T0 + 5000))])).toEqual([{ ok: true, revision: 4, fence: 2 }]);
    // The old owner's next write fails its fence.
    expect(await store.commit([under(commitOf('A', 4), lease('w1', 1, T0 + 2001, T0 + 9000))])).toMatchObject([{ ok: false, reason: 'leased', owner: 'w2' }]);
    // The history records every commit's runner and fence: the audit of single ownership.
    const audit = (h: TransitionRecord[]) => h.map((r) => [r.revision, r.runner, r.fence]);
    expect(audit(await store.history('A'))).toEqual([
      [1, null, 0],
      [2, 'w1', 1],
      [3, 'w1', 1],
      [4, 'w2', 2],
    ]);
  });

  it('a commit with `until` null releases the lease; the next claim grows the fence; a dead runner named in takeOver, or force, overrides a live lease', async () => {
    expect(await store.commit([under(commitOf('A', 1), lease('w1', null, T0, null))])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
    expect((await store.getJob('A'))?.lease).toBeNull();
    expect(await store.commit([under(commitOf('A', 2), lease('w2', null, T0 + 1, T0 + 1000))])).toEqual([{ ok: true, revision: 3, fence: 2 }]);
    expect(await store.commit([under(commitOf('A', 3), lease('w3', null, T0 + 2, T0 + 1000, { takeOver: 'someone-else' }))])).toMatchObject([{ ok: false, reason: 'leased' }]);
    expect(await store.commit([under(commitOf('A', 3), lease('w3', null, T0 + 2, T0 + 1000, { takeOver: 'w2' }))])).toEqual([{ ok: true, revision: 4, fence: 3 }]);
    expect(await store.commit([under(commitOf('A', 4), lease('w4', null, T0 + 3, null, { force: true }))])).toEqual([{ ok: true, revision: 5, fence: 4 }]);
    expect((await store.getJob('A'))?.lease).toBeNull();
  });

  it('jobsWithPendingEvents and dueEffects leave out jobs another runner holds; claimEffect claims the job lease in its transaction', async () => {
    const effect = { id: 'A~act~r2', jobId: 'A', actorId: 'act', src: 'src.act', input: {}, maxAttempts: 3, unsafe: false, createdRevision: 2, at: T0 };
    expect(await store.commit([under({ ...commitOf('A', 1), effects: { create: [effect], deactivate: [] } }, lease('w1', null, T0, T0 + 1000))])).toMatchObject([{ ok: true, fence: 1 }]);
    await store.acceptEvent({ jobId: 'A', eventId: 'e1', type: 'GO', payload: { type: 'GO' }, payloadHash: 'h', at: T0 });
    expect(await store.jobsWithPendingEvents(10, { runner: 'w2', now: T0 + 10 })).toEqual([]);
    expect(await store.jobsWithPendingEvents(10, { runner: 'w1', now: T0 + 10 })).toEqual(['A']);
    expect(await store.jobsWithPendingEvents(10, { runner: 'w2', now: T0 + 1000 })).toEqual(['A']); // expired
    expect(await store.jobsWithPendingEvents(10)).toEqual(['A']);
    expect(await store.dueEffects(T0 + 10, 10, 'w2')).toEqual([]);
    expect((await store.dueEffects(T0 + 10, 10, 'w1')).map((e) => e.id)).toEqual([effect.id]);
    expect(await store.claimEffect(effect.id, 'w2', T0 + 10, T0 + 2000, undefined, null)).toBeUndefined();
    expect(await store.getEffect(effect.id)).toMatchObject({ status: 'pending', attempt: 0 }); // rolled back with the lease check
    expect(await store.claimEffect(effect.id, 'w1', T0 + 10, T0 + 2000, undefined, 1)).toMatchObject({ attempt: 1, claimedBy: 'w1', leaseFence: 1 });
    expect((await store.getJob('A'))?.lease).toEqual({ owner: 'w1', fence: 1, until: T0 + 2000 });
  });

  it("finishAttempt under a fence that was taken records nothing but a stale attempt and ends the claim; renewClaim stops once the job's lease is gone", async () => {
    const effect = { id: 'A~act~r2', jobId: 'A', actorId: 'act', src: 'src.act', input: {}, maxAttempts: 3, unsafe: false, createdRevision: 2, at: T0 };
    await store.commit([{ ...commitOf('A', 1), effects: { create: [effect], deactivate: [] } }]);
    const claimed = await store.claimEffect(effect.id, 'w1', T0, T0 + 1000, undefined, null);
    expect(claimed?.leaseFence).toBe(1);
    expect(await store.renewClaim(effect.id, 1, 'w1', T0 + 1500, T0 + 500)).toBe(true);
    // w2 takes the job at expiry (a commit), with a fresh fence.
    expect(await store.commit([under(commitOf('A', 2), lease('w2', null, T0 + 1000, T0 + 5000))])).toMatchObject([{ ok: true, fence: 2 }]);
    expect(await store.renewClaim(effect.id, 1, 'w1', T0 + 2500, T0 + 1500)).toBe(false);
    const event = { jobId: 'A', eventId: `${effect.id}#1`, type: 'xstate.done.actor.act', payload: { type: 'xstate.done.actor.act' }, payloadHash: 'h', at: T0 + 1100, source: 'effect' as const, sourceId: effect.id, attempt: 1 };
    expect(await store.finishAttempt(effect.id, 1, { kind: 'succeeded', output: 1, event }, T0 + 1100, { runner: 'w1', fence: 1 })).toBe('lease-lost');
    expect(await store.listEvents('A')).toEqual([]);
    expect(await store.getEffect(effect.id)).toMatchObject({ status: 'running', claimedBy: 'w1', claimExpiresAt: T0 + 1100 });
    expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.error?.name])).toEqual([[1, 'stale', 'LeaseLost']]);
    expect((await store.listAttempts('A'))[0]?.error?.message).toBe("the job's lease (fence 1) was taken by another runner");
  });

  it('finishAttempt from a runner that holds no lease on the job any more (fence -1) says so, and names no other runner', async () => {
    const effect = { id: 'A~act~r2', jobId: 'A', actorId: 'act', src: 'src.act', input: {}, maxAttempts: 3, unsafe: false, createdRevision: 2, at: T0 };
    await store.commit([{ ...commitOf('A', 1), effects: { create: [effect], deactivate: [] } }]);
    await store.claimEffect(effect.id, 'w1', T0, T0 + 1000, undefined, null);
    await store.releaseLeases('w1', 'all');
    const event = { jobId: 'A', eventId: `${effect.id}#1`, type: 'xstate.done.actor.act', payload: { type: 'xstate.done.actor.act' }, payloadHash: 'h', at: T0 + 100, source: 'effect' as const, sourceId: effect.id, attempt: 1 };
    expect(await store.finishAttempt(effect.id, 1, { kind: 'succeeded', output: 1, event }, T0 + 100, { runner: 'w1', fence: -1 })).toBe('lease-lost');
    const [attempt] = await store.listAttempts('A');
    expect(attempt).toMatchObject({ outcome: 'stale', error: { name: 'LeaseLost' } });
    expect(attempt?.error?.message).toMatch(/^this runner no longer held the job's lease/);
  });

  it('renewLeases keeps only what the runner still holds; releaseLeases, leaseHolders and expireLeases free leases once', async () => {
    await store.createJob(newJob('B'));
    await store.createJob(newJob('C'));
    await store.commit([under(commitOf('A', 1), lease('w1', null, T0, T0 + 1000))]);
    await store.commit([under(commitOf('B', 1), lease('w1', null, T0, T0 + 500))]);
    await store.commit([under(commitOf('C', 1), lease('w2', null, T0, T0 + 800))]);
    expect(await store.renewLeases('w1', ['A', 'B', 'C'], T0 + 3000, T0 + 100)).toEqual(new Map([['A', 1], ['B', 1]]));
    expect(await store.leaseHolders(T0 + 900)).toEqual(['w1']); // w2's lease on C expired at T0 + 800
    expect(await store.stats({ now: T0 + 100 })).toMatchObject({ leases: [{ runner: 'w1', jobs: 2, earliestUntil: T0 + 3000 }, { runner: 'w2', jobs: 1, earliestUntil: T0 + 800 }] });
    expect(await store.nextWakeAt()).toBe(T0 + 800);
    expect(await store.expireLeases({ expiredBy: T0 + 900 })).toEqual([{ jobId: 'C', owner: 'w2', fence: 1 }]);
    expect(await store.expireLeases({ expiredBy: T0 + 900 })).toEqual([]); // once
    expect(await store.releaseLeases('w1', ['B'])).toBe(1);
    expect(await store.expireLeases({ owner: 'w1' })).toEqual([{ jobId: 'A', owner: 'w1', fence: 1 }]);
    expect(await store.releaseLeases('w1', 'all')).toBe(0);
    for (const id of ['A', 'B', 'C']) expect((await store.getJob(id))?.lease).toBeNull();
    // Fences are kept while free: the next claim grows them.
    expect(await store.commit([under(commitOf('A', 2), lease('w3', null, T0 + 950, null))])).toEqual([{ ok: true, revision: 3, fence: 2 }]);
  });
});

describe('two runtimes on one file', () => {
  it('one owner at a time: the holder applies events others accept; at expiry the other takes over, and the old owner finds out at its next write', async () => {
    const a = await openRuntime(res, [work], { hostDriven: true, leaseMs: 30_000 });
    const b = await openRuntime(res, [work], { path: a.path, clock: a.clock, hostDriven: true, leaseMs: 30_000 });
    const attempt1 = gate<unknown>();
    const attempt2 = gate<unknown>();
    const started = [gate(), gate()];
    const argsOf: WorkArgs[] = [];
    workHooks.work = async (args) => {
      argsOf[args.attempt - 1] = args;
      started[args.attempt - 1]!.resolve();
      return (args.attempt === 1 ? attempt1 : attempt2).promise;
    };
    const job = await a.runtime.start('work', {});
    expect((await a.runtime.send(job.id, { type: 'GO' })).status).toBe('applied');
    await started[0]!.promise;
    expect((await a.store.getJob(job.id))?.lease).toMatchObject({ owner: a.runtime.runnerId, until: RT0 + 30_000 });

    // B accepts an event durably but may not apply it: A holds the job.
    const sent = await b.runtime.send(job.id, { type: 'ACCEPT' }, { eventId: 'from-b' });
    expect(sent).toMatchObject({ status: 'pending', duplicate: false });
    expect(await b.runtime.processPending()).toBe(0);
    expect(await b.runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });
    // A applies it (ignored in `working`), still holding the lease.
    expect(await a.runtime.processPending()).toBe(1);
    expect((await a.runtime.events(job.id)).find((e) => e.eventId === 'from-b')).toMatchObject({ status: 'ignored' });

    // A heartbeats (tick in host-driven mode) for a while, then goes silent past its lease.
    a.clock.advance(20_000);
    await a.runtime.tick();
    expect((await a.store.getJob(job.id))?.lease?.until).toBe(RT0 + 50_000);
    a.clock.advance(30_001);
    const freed = new Promise((resolve) => b.runtime.subscribe((e) => e.type === 'lease.freed' && resolve(e)));
    expect((await b.runtime.tick()).activitiesStarted).toBe(1); // the expiry is handled once, then B takes the attempt over
    expect(await freed).toMatchObject({ jobId: job.id, runner: a.runtime.runnerId, fence: 1 });
    await started[1]!.promise;
    expect((await b.store.getJob(job.id))?.lease).toMatchObject({ owner: b.runtime.runnerId, fence: 2 });

    // The superseded attempt's own writes are fenced too: its progress and assets are not recorded.
    await argsOf[0]!.progress(50);
    await argsOf[0]!.attachAsset({ type: 'file', uri: 'mem://from-a' });
    expect((await b.store.getJob(job.id))?.progress).toBeNull();
    expect(await b.store.listAssets(job.id)).toEqual([]);
    expect((await b.store.listNotes(job.id)).map((n) => n.message)).toContain("progress update to 50 ignored: the reporting attempt's runner no longer holds the job (its lease was taken)");
    await argsOf[1]!.progress(70);
    await argsOf[1]!.attachAsset({ type: 'file', uri: 'mem://from-b' });
    expect((await b.store.getJob(job.id))?.progress).toBe(70);
    expect((await b.store.listAssets(job.id)).map((x) => x.uri)).toEqual(['mem://from-b']);

    // A's attempt ends late: refused by its fence; A writes nothing to the job and stops touching it.
    const revision = (await b.runtime.get(job.id)).revision;
    attempt1.resolve({ from: 'a' });
    await a.runtime.idle();
    expect((await a.runtime.get(job.id)).revision).toBe(revision);
    expect((await a.runtime.send(job.id, { type: 'LEAVE' }, { eventId: 'from-a' })).status).toBe('pending');

    attempt2.resolve({ from: 'b' });
    await b.runtime.idle();
    const end = await b.runtime.details(job.id);
    // B applied A's pending LEAVE (accepted first) and then its own outcome (stale: the state was
    // left). Nothing ran for the job after the LEAVE, so that commit released the lease; the next
    // commit claimed it again with a new fence.
    expect(end.history.map((h) => [h.eventType, h.outcome, h.runner === a.runtime.runnerId ? 'A' : h.runner === b.runtime.runnerId ? 'B' : h.runner, h.fence])).toEqual([
      ['xstate.init', 'started', 'A', 0],
      ['GO', 'applied', 'A', 1],
      ['ACCEPT', 'ignored', 'A', 1],
      ['LEAVE', 'applied', 'B', 2],
      ['xstate.done.actor.work', 'stale', 'B', 3],
    ]);
    expect(end.attempts.map((x) => [x.attempt, x.outcome, x.runner === b.runtime.runnerId ? 'B' : 'A'])).toEqual([
      [1, 'stale', 'A'],
      [2, 'succeeded', 'B'],
    ]);
    expect(end.job.value).toBe('left');
    // Nothing runs for the job any more: B released its lease with its last commit.
    expect((await b.store.getJob(job.id))?.lease).toBeNull();
  });

  it("a live runtime's own tick() renews its leases before freeing expired ones: a clock jump past leaseMs does not abort its activity", async () => {
    const a = await openRuntime(res, [work], { leaseMs: 30_000 }); // not host-driven: its interval heartbeat is real time
    const finish = gate<unknown>();
    const started = gate();
    let aborted = false;
    workHooks.work = async (args) => {
      args.signal.addEventListener('abort', () => (aborted = true));
      started.resolve();
      return finish.promise;
    };
    const job = await a.runtime.start('work', {});
    await a.runtime.send(job.id, { type: 'GO' });
    await started.promise;
    a.clock.advance(45_000); // past the lease, with no heartbeat in between
    await a.runtime.tick();
    expect(aborted).toBe(false);
    expect((await a.store.getJob(job.id))?.lease).toMatchObject({ owner: a.runtime.runnerId, fence: 1, until: RT0 + 45_000 + 30_000 });
    finish.resolve({ ok: true });
    await a.runtime.idle();
    expect((await a.runtime.get(job.id)).value).toBe('review');
  });

  it('close() releases every lease at once: another runtime takes the job over without waiting for expiry', async () => {
    const a = await openRuntime(res, [work], { hostDriven: true });
    const started = gate();
    workHooks.work = async (args) => {
      started.resolve();
      return new Promise((_resolve, reject) => args.signal.addEventListener('abort', () => reject(args.signal.reason)));
    };
    const job = await a.runtime.start('work', {});
    await a.runtime.send(job.id, { type: 'GO' });
    await started.promise;
    expect((await a.store.getJob(job.id))?.lease?.owner).toBe(a.runtime.runnerId);
    await a.runtime.close();
    const b = await openRuntime(res, [work], { path: a.path, clock: a.clock, hostDriven: true });
    expect((await b.store.getJob(job.id))?.lease).toBeNull();
    workHooks.work = async () => ({ ok: true });
    expect((await b.runtime.tick()).activitiesStarted).toBe(1); // at the same clock time: no expiry waited for
    await b.runtime.idle();
    expect((await b.runtime.get(job.id)).value).toBe('review');
    expect(await b.runtime.stats()).toMatchObject({ leases: [] });
  });
});
