/**
 * The JobStore contract for operations on work: suspension (and the checks it adds to the
 * worker's queries and to commits), the stuck filter, redrive of a failed effect, retention
 * purge and stats. One suite, run against every store, on records built by hand (no runtime);
 * a last test runs one scenario on both stores and compares everything they return.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadMigrations, SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type {
  AttemptResult,
  EffectRecord,
  ErrorInfo,
  JobStatus,
  JobStore,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
  NoteRecord,
  TransitionCommit,
} from '../src/ports/store.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';
import { CONTRACT_STORE, ON_POSTGRES, ON_SQLITE_WASM, postgresContractStore, sqliteWasmContractStore } from './helpers/stores.ts';

interface StoreUnderTest {
  store: JobStore;
  dispose?: () => Promise<void> | void;
}
type StoreFactory = () => Promise<StoreUnderTest>;

const TMP_ROOT = fileURLToPath(new URL('../.vitest-tmp/', import.meta.url));
const T0 = 1_700_000_000_000;
const BOOM: ErrorInfo = { name: 'Error', message: 'boom', code: 'E_BOOM' };

function newJob(id: string, o: { owner?: string | null; at?: number; status?: JobStatus; value?: string } = {}): NewJob {
  const at = o.at ?? T0;
  const status = o.status ?? 'active';
  const value = o.value ?? 'idle';
  return {
    id,
    machineId: 'm',
    machineVersion: '1',
    status,
    value,
    statePaths: [value],
    context: { n: 0 },
    snapshot: JSON.stringify({ status, value, context: { n: 0 } }),
    input: { id },
    inputHash: `hash:${id}`,
    idempotencyKey: null,
    owner: o.owner ?? null,
    at,
    transition: { eventId: null, eventType: 'xstate.init', payload: { id }, from: null, to: value, outcome: 'started', error: null, at },
  };
}

function commitOf(jobId: string, expectedRevision: number, o: Omit<Partial<TransitionCommit>, 'jobId' | 'expectedRevision' | 'job'> & { at?: number; status?: JobStatus; value?: string } = {}): TransitionCommit {
  const { at = T0 + 10 * expectedRevision, status = 'active', value = `s${expectedRevision + 1}`, ...rest } = o;
  return {
    jobId,
    expectedRevision,
    job: { status, value, statePaths: [value], context: { n: expectedRevision }, snapshot: JSON.stringify({ status, value }), machineVersion: '1', at },
    transition: { eventId: null, eventType: 'GO', payload: { type: 'GO' }, from: null, to: value, outcome: 'applied', error: null, at },
    ...rest,
  };
}

function effectOf(jobId: string, actorId: string, revision: number, o: { maxAttempts?: number; src?: string } = {}): NewEffect {
  return { id: `${jobId}~${actorId}~r${revision}`, jobId, actorId, src: o.src ?? `src.${actorId}`, input: { actorId }, maxAttempts: o.maxAttempts ?? 2, unsafe: false, createdRevision: revision, at: T0 + 10 * (revision - 1) };
}

function timerOf(jobId: string, key: string, dueAt: number, revision: number): NewTimer {
  return { id: `${jobId}~${key}~r${revision}`, jobId, key, kind: 'after', event: { type: `T.${key}` }, dueAt, createdRevision: revision, createdAt: T0 };
}

function eventOf(jobId: string, eventId: string, type = 'GO', o: Partial<Pick<NewInboxEvent, 'at' | 'source' | 'sourceId' | 'attempt'>> = {}): NewInboxEvent {
  return { jobId, eventId, type, payload: { type }, payloadHash: `hash:${type}`, at: o.at ?? T0 + 1, ...o };
}

const noteOf = (jobId: string, kind: string, at = T0 + 50): NoteRecord => ({ jobId, kind, message: `${kind} note`, at });

const outcome = (e: Pick<EffectRecord, 'id' | 'jobId' | 'actorId'>, attempt: number, kind: 'done' | 'error'): NewInboxEvent =>
  eventOf(e.jobId, `${e.id}#${attempt}`, `xstate.${kind}.actor.${e.actorId}`, { source: 'effect', sourceId: e.id, attempt });

const failedFinal = (e: EffectRecord, attempt: number): AttemptResult => ({ kind: 'failed', error: BOOM, retryAt: null, event: outcome(e, attempt, 'error') });

/** Everything the store holds about one job, through the port. */
async function dumpJob(store: JobStore, jobId: string): Promise<unknown> {
  return {
    job: await store.getJob(jobId),
    history: await store.history(jobId),
    events: await store.listEvents(jobId),
    effects: await store.listEffects(jobId),
    attempts: await store.listAttempts(jobId),
    timers: await store.listTimers(jobId),
    notes: await store.listNotes(jobId),
    assets: await store.listAssets(jobId),
  };
}

function operationsContract(name: string, factory: StoreFactory): void {
  describe(`JobStore operations contract: ${name}`, () => {
    let store: JobStore;
    let current: StoreUnderTest;

    beforeEach(async () => {
      current = await factory();
      store = current.store;
      expect((await store.createJob(newJob('A'))).created).toBe(true);
      expect((await store.createJob(newJob('B'))).created).toBe(true);
    });
    afterEach(async () => {
      await store.close();
      await current.dispose?.();
    });

    /** Effects of job A created by the commit 1 -> 2. */
    async function effectsOfA(...actorIds: string[]): Promise<EffectRecord[]> {
      const create = actorIds.map((a) => effectOf('A', a, 2));
      expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
      return Promise.all(create.map(async (e) => (await store.getEffect(e.id))!));
    }

    /** Run one attempt of `e` and fail it for good (its error event accepted as pending). */
    async function failForGood(e: EffectRecord, at = T0 + 100): Promise<void> {
      const claimed = await store.claimEffect(e.id, 'w1', at, at + 1000);
      expect(claimed).toBeDefined();
      expect(await store.finishAttempt(e.id, claimed!.attempt, failedFinal(e, claimed!.attempt), at + 1)).toBe('current');
    }

    describe('suspendJob / resumeJob', () => {
      it('suspends an active job once, with its note in the same write; resume clears it once; neither touches the revision', async () => {
        expect(await store.getJob('A')).toMatchObject({ suspendedAt: null, suspendReason: null });
        expect(await store.suspendJob('A', 'outage', T0 + 50, noteOf('A', 'suspended'))).toBe(true);
        expect(await store.getJob('A')).toMatchObject({ suspendedAt: T0 + 50, suspendReason: 'outage', revision: 1, updatedAt: T0 });
        expect(await store.suspendJob('A', 'again', T0 + 60, noteOf('A', 'suspended', T0 + 60))).toBe(false);
        expect(await store.getJob('A')).toMatchObject({ suspendedAt: T0 + 50, suspendReason: 'outage' });
        expect(await store.listNotes('A')).toEqual([noteOf('A', 'suspended')]);

        expect((await store.listJobs({ suspended: true })).map((j) => j.id)).toEqual(['A']);
        expect((await store.listJobs({ suspended: false })).map((j) => j.id)).toEqual(['B']);

        expect(await store.resumeJob('A', noteOf('A', 'resumed', T0 + 70))).toBe(true);
        expect(await store.resumeJob('A', noteOf('A', 'resumed', T0 + 80))).toBe(false);
        expect(await store.getJob('A')).toMatchObject({ suspendedAt: null, suspendReason: null, revision: 1 });
        expect((await store.listNotes('A')).map((n) => [n.kind, n.at])).toEqual([
          ['suspended', T0 + 50],
          ['resumed', T0 + 70],
        ]);
        expect(await store.listJobs({ suspended: true })).toEqual([]);
      });

      it('refuses a missing or finished job and writes nothing', async () => {
        expect(await store.suspendJob('nope', 'x', T0, noteOf('nope', 'suspended'))).toBe(false);
        expect(await store.commit([commitOf('B', 1, { status: 'done', value: 'end' })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const before = await dumpJob(store, 'B');
        expect(await store.suspendJob('B', 'x', T0 + 50, noteOf('B', 'suspended'))).toBe(false);
        expect(await store.resumeJob('B', noteOf('B', 'resumed'))).toBe(false);
        expect(await dumpJob(store, 'B')).toEqual(before);
      });

      it("a suspended job's pending events, due timers and due effects are left out of the worker's queries, and come back on resume", async () => {
        const [pending, backoff, expired] = await effectsOfA('p', 'b', 'x');
        const bClaim = await store.claimEffect(backoff!.id, 'w1', T0 + 100, T0 + 1000);
        expect(await store.finishAttempt(backoff!.id, bClaim!.attempt, { kind: 'failed', error: BOOM, retryAt: T0 + 200, event: null }, T0 + 101)).toBe('current');
        expect(await store.claimEffect(expired!.id, 'w1', T0 + 100, T0 + 300)).toBeDefined();
        expect(await store.commit([commitOf('A', 2, { timers: { schedule: [timerOf('A', 'k', T0 + 150, 3)], cancel: [] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        await store.acceptEvent(eventOf('A', 'e1', 'GO', { at: T0 + 120 }));
        await store.acceptEvent(eventOf('B', 'e1', 'GO', { at: T0 + 130 }));
        await store.createJob(newJob('C'));
        expect(await store.commit([commitOf('C', 1, { timers: { schedule: [timerOf('C', 'k', T0 + 5000, 2)], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const now = T0 + 1000;

        const before = {
          pendingJobs: await store.jobsWithPendingEvents(10),
          timers: (await store.dueTimers(now, 10)).map((t) => t.id),
          effects: (await store.dueEffects(now, 10)).map((e) => e.id),
          wake: await store.nextWakeAt(),
        };
        // dueEffects orders by coalesce(next_run_at, created_at): the claim cleared x's next_run_at.
        expect(before).toEqual({ pendingJobs: ['A', 'B'], timers: ['A~k~r3'], effects: [pending!.id, expired!.id, backoff!.id], wake: T0 + 150 });

        expect(await store.suspendJob('A', 'hold', T0 + 500, noteOf('A', 'suspended'))).toBe(true);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B']);
        expect(await store.dueTimers(now, 10)).toEqual([]);
        expect(await store.dueEffects(now, 10)).toEqual([]);
        expect(await store.nextWakeAt()).toBe(T0 + 5000); // only C's timer wakes anyone
        // The fences: no timer fires, no attempt starts (not even a takeover), nothing changes.
        const frozen = await dumpJob(store, 'A');
        expect(await store.fireTimer('A~k~r3', eventOf('A', 'timer~A~k~r3', 'T.k', { source: 'timer', sourceId: 'A~k~r3' }))).toBe(false);
        expect(await store.claimEffect(pending!.id, 'w2', now, now + 1000)).toBeUndefined();
        expect(await store.claimEffect(backoff!.id, 'w2', now, now + 1000)).toBeUndefined();
        expect(await store.claimEffect(expired!.id, 'w2', now, now + 1000, 'w1')).toBeUndefined();
        expect(await dumpJob(store, 'A')).toEqual(frozen);
        // Events are still accepted, and pendingEvents still shows them (for `show`).
        expect((await store.acceptEvent(eventOf('A', 'e2', 'GO', { at: T0 + 600 }))).duplicate).toBe(false);
        expect((await store.pendingEvents('A', 10)).map((e) => e.eventId)).toEqual(['e1', 'e2']);

        expect(await store.resumeJob('A', noteOf('A', 'resumed'))).toBe(true);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['A', 'B']);
        expect((await store.dueTimers(now, 10)).map((t) => t.id)).toEqual(['A~k~r3']);
        expect((await store.dueEffects(now, 10)).map((e) => e.id)).toEqual(before.effects);
        expect(await store.nextWakeAt()).toBe(T0 + 150);
        expect(await store.fireTimer('A~k~r3', eventOf('A', 'timer~A~k~r3', 'T.k', { source: 'timer', sourceId: 'A~k~r3' }))).toBe(true);
      });

      it("a quarantined job's due effects are left out and cannot be claimed, nor wake anyone, until it is released", async () => {
        const [pending, backoff] = await effectsOfA('p', 'b');
        const bClaim = await store.claimEffect(backoff!.id, 'w1', T0 + 100, T0 + 1000);
        expect(await store.finishAttempt(backoff!.id, bClaim!.attempt, { kind: 'failed', error: BOOM, retryAt: T0 + 200, event: null }, T0 + 101)).toBe('current');
        const now = T0 + 1000;
        const due = (await store.dueEffects(now, 10)).map((e) => e.id);
        expect(due).toEqual([pending!.id, backoff!.id]);
        expect(await store.nextWakeAt()).toBe(T0 + 200);

        await store.setQuarantine('A', 'machine m is not registered', T0 + 500);
        expect(await store.dueEffects(now, 10)).toEqual([]);
        expect(await store.nextWakeAt()).toBe(T0 + 1000); // the claim's job lease expiring, not the retry at T0 + 200
        const frozen = await dumpJob(store, 'A');
        expect(await store.claimEffect(pending!.id, 'w2', now, now + 1000)).toBeUndefined();
        expect(await store.claimEffect(backoff!.id, 'w2', now, now + 1000)).toBeUndefined();
        expect(await dumpJob(store, 'A')).toEqual(frozen);

        await store.setQuarantine('A', null, T0 + 600);
        expect((await store.dueEffects(now, 10)).map((e) => e.id)).toEqual(due);
        expect(await store.claimEffect(pending!.id, 'w2', now, now + 1000)).toBeDefined();
      });

      it('a commit that settles an event is a conflict while the job is suspended; a commit without an event (a migration) is not', async () => {
        const accepted = await store.acceptEvent(eventOf('A', 'e1'));
        expect(await store.suspendJob('A', 'hold', T0 + 5, noteOf('A', 'suspended'))).toBe(true);
        const before = await dumpJob(store, 'A');
        const settle = commitOf('A', 1, { event: { seq: accepted.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } });
        const inline = commitOf('A', 1, { event: { accept: eventOf('A', 'e-inline'), status: 'applied', error: null, payload: { type: 'GO' } } });
        expect(await store.commit([settle])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 1 }]);
        expect(await store.commit([inline])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 1 }]);
        expect(await dumpJob(store, 'A')).toEqual(before);
        // In a batch, the other job's commit still applies.
        expect(await store.commit([settle, commitOf('B', 1)])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 1 }, { ok: true, revision: 2, fence: null }]);
        // A migration commit (no event) goes through.
        expect(await store.commit([commitOf('A', 1, { value: 'migrated' })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.resumeJob('A', noteOf('A', 'resumed'))).toBe(true);
        expect(await store.commit([commitOf('A', 2, { event: { seq: accepted.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
      });
    });

    describe('listJobs({ stuck })', () => {
      it('lists active jobs with no lease, no pending event, no scheduled or fired timer and no live active effect; stuck: false is the complement', async () => {
        const job = (id: string) => store.createJob(newJob(id)).then((r) => expect(r.created).toBe(true));
        for (const id of ['event', 'timer', 'fired', 'pending', 'backoff', 'running', 'waiting', 'failed', 'left', 'quarantined', 'suspended', 'done', 'delivered']) await job(id);
        await store.acceptEvent(eventOf('event', 'e1'));
        expect(await store.commit([commitOf('timer', 1, { timers: { schedule: [timerOf('timer', 'k', T0 + 100, 2)], cancel: [] } })])).toMatchObject([{ ok: true }]);
        expect(await store.commit([commitOf('fired', 1, { timers: { schedule: [timerOf('fired', 'k', T0 + 100, 2)], cancel: [] } })])).toMatchObject([{ ok: true }]);
        expect(await store.fireTimer('fired~k~r2', eventOf('fired', 't1', 'T.k', { source: 'timer', sourceId: 'fired~k~r2' }))).toBe(true);
        // `delivered`: its timer fired and its event was applied; nothing left.
        expect(await store.commit([commitOf('delivered', 1, { timers: { schedule: [timerOf('delivered', 'k', T0 + 100, 2)], cancel: [] } })])).toMatchObject([{ ok: true }]);
        expect(await store.fireTimer('delivered~k~r2', eventOf('delivered', 't1', 'T.k', { source: 'timer', sourceId: 'delivered~k~r2' }))).toBe(true);
        const fired = (await store.pendingEvents('delivered', 1))[0]!;
        expect(
          await store.commit([commitOf('delivered', 2, { consumedTimer: 'delivered~k~r2', event: { seq: fired.seq, status: 'applied', error: null, payload: { type: 'T.k' } } })]),
        ).toMatchObject([{ ok: true }]);
        for (const id of ['pending', 'backoff', 'running', 'waiting', 'failed', 'left']) {
          expect(await store.commit([commitOf(id, 1, { effects: { create: [effectOf(id, 'act', 2)], deactivate: [] } })])).toMatchObject([{ ok: true }]);
        }
        const eff = async (id: string) => (await store.getEffect(`${id}~act~r2`))!;
        let c = await store.claimEffect((await eff('backoff')).id, 'w', T0 + 100, T0 + 200);
        await store.finishAttempt(c!.id, 1, { kind: 'failed', error: BOOM, retryAt: T0 + 9000, event: null }, T0 + 101);
        await store.claimEffect((await eff('running')).id, 'w', T0 + 100, T0 + 200);
        c = await store.claimEffect((await eff('waiting')).id, 'w', T0 + 100, T0 + 200);
        await store.finishAttempt(c!.id, 1, { kind: 'waiting', token: 'tok-waiting-000001' }, T0 + 101);
        await failForGood(await eff('failed'));
        // `failed`: its error event is pending, so it is not stuck yet. Settle the event as ignored: now it is.
        const errorEvent = (await store.pendingEvents('failed', 1))[0]!;
        expect(await store.commit([commitOf('failed', 2, { event: { seq: errorEvent.seq, status: 'ignored', error: null, payload: errorEvent.payload } })])).toMatchObject([{ ok: true }]);
        await failForGood(await eff('left'));
        const leftEvent = (await store.pendingEvents('left', 1))[0]!;
        expect(
          await store.commit([commitOf('left', 2, { effects: { create: [], deactivate: ['act'] }, event: { seq: leftEvent.seq, status: 'applied', error: null, payload: leftEvent.payload } })]),
        ).toMatchObject([{ ok: true }]);
        await store.setQuarantine('quarantined', 'version gone', T0 + 5);
        await store.suspendJob('suspended', 'hold', T0 + 5, noteOf('suspended', 'suspended'));
        expect(await store.commit([commitOf('done', 1, { status: 'done', value: 'end' })])).toMatchObject([{ ok: true }]);

        // A job whose lease is held is being worked on: not stuck. The runners here recorded their
        // outcomes and hold nothing any more once they release their leases, as a runtime does.
        expect((await store.listJobs({ stuck: true })).map((j) => j.id)).toEqual(['A', 'B', 'delivered']);
        await store.releaseLeases('w1', 'all');
        await store.releaseLeases('w', 'all');
        const stuck = (await store.listJobs({ stuck: true })).map((j) => j.id);
        expect(stuck).toEqual(['A', 'B', 'delivered', 'failed', 'left']);
        const others = (await store.listJobs({ stuck: false })).map((j) => j.id);
        expect(others).toEqual(['backoff', 'done', 'event', 'fired', 'pending', 'quarantined', 'running', 'suspended', 'timer', 'waiting']);
        expect((await store.listJobs({ stuck: true, limit: 2, afterId: 'B' })).map((j) => j.id)).toEqual(['delivered', 'failed']);
        expect((await store.stats({ now: T0 + 1000 })).idle).toBe(stuck.length);
      });
    });

    describe('redriveEffect', () => {
      it('puts a failed effect whose invoking state is current back to pending with a new attempt budget, keeping its attempts, with its note', async () => {
        const [e] = await effectsOfA('act');
        await failForGood(e!);
        const failed = (await store.getEffect(e!.id))!;
        expect(failed).toMatchObject({ status: 'failed', active: true, attempt: 1, maxAttempts: 2, error: BOOM });
        const attempts = await store.listAttempts('A');

        expect(await store.redriveEffect(e!.id, 3, T0 + 500, noteOf('A', 'retry', T0 + 500))).toBe(true);
        expect(await store.getEffect(e!.id)).toEqual({ ...failed, status: 'pending', maxAttempts: 3, error: null, nextRunAt: null, claimedBy: null, claimExpiresAt: null, token: null, updatedAt: T0 + 500 });
        expect(await store.listAttempts('A')).toEqual(attempts);
        expect(await store.listNotes('A')).toEqual([noteOf('A', 'retry', T0 + 500)]);
        expect((await store.dueEffects(T0 + 500, 10)).map((x) => x.id)).toEqual([e!.id]);
        // Only once: it is no longer failed.
        expect(await store.redriveEffect(e!.id, 9, T0 + 600, noteOf('A', 'retry', T0 + 600))).toBe(false);
        // The next attempt is attempt 2, under the same id (the idempotency key).
        expect(await store.claimEffect(e!.id, 'w1', T0 + 700, T0 + 1700)).toMatchObject({ id: e!.id, attempt: 2, status: 'running', maxAttempts: 3 });
      });

      it('refuses an effect that is not failed, whose state was left, or whose job has ended, and writes nothing', async () => {
        const [ok, left] = await effectsOfA('ok', 'left');
        const c = await store.claimEffect(ok!.id, 'w1', T0 + 100, T0 + 200);
        expect(await store.finishAttempt(ok!.id, c!.attempt, { kind: 'succeeded', output: 1, event: outcome(ok!, 1, 'done') }, T0 + 101)).toBe('current');
        await failForGood(left!);
        expect(await store.commit([commitOf('A', 2, { effects: { create: [], deactivate: ['left'] } })])).toMatchObject([{ ok: true }]);
        expect(await store.commit([commitOf('B', 1, { effects: { create: [effectOf('B', 'act', 2)], deactivate: [] } })])).toMatchObject([{ ok: true }]);
        await failForGood((await store.getEffect('B~act~r2'))!);
        expect(await store.commit([commitOf('B', 2, { status: 'done', value: 'end' })])).toMatchObject([{ ok: true }]);
        const before = [await dumpJob(store, 'A'), await dumpJob(store, 'B')];
        for (const id of [ok!.id, left!.id, 'B~act~r2', 'nope']) expect(await store.redriveEffect(id, 5, T0 + 900, noteOf(id.slice(0, 1), 'retry'))).toBe(false);
        expect([await dumpJob(store, 'A'), await dumpJob(store, 'B')]).toEqual(before);
      });
    });

    describe('purgeFinished', () => {
      it('deletes finished jobs of the given statuses and owner updated before the cut-off, with everything of theirs, oldest first up to the limit', async () => {
        const end = async (id: string, status: JobStatus, at: number, owner: string | null = null) => {
          expect((await store.createJob(newJob(id, { owner, at: T0 }))).created).toBe(true);
          await store.acceptEvent(eventOf(id, 'e1'));
          await store.addNote(noteOf(id, 'n'));
          await store.attachAsset({ jobId: id, key: 'k', type: 't', uri: 'u', size: null, meta: null, effectId: null, attempt: null, createdAt: T0 });
          expect(await store.commit([commitOf(id, 1, { status, value: 'end', at, effects: { create: [effectOf(id, 'act', 2)], deactivate: [] } })])).toMatchObject([{ ok: true }]);
        };
        await end('d1', 'done', T0 + 100);
        await end('d2', 'done', T0 + 200);
        await end('d3', 'done', T0 + 300);
        await end('e1', 'error', T0 + 100);
        await end('s1', 'stopped', T0 + 100);
        await end('young', 'done', T0 + 1000);
        await end('theirs', 'done', T0 + 100, 'acme');
        const keep = await dumpJob(store, 'young');

        // Active jobs never match, whatever their age.
        expect(await store.purgeFinished({ before: T0 + 10_000, statuses: ['active'], limit: 100 })).toEqual([]);
        expect(await store.purgeFinished({ before: T0 + 500, statuses: ['done'], owner: null, limit: 2 })).toEqual(['d1', 'd2']);
        expect(await store.purgeFinished({ before: T0 + 500, statuses: ['done'], owner: null, limit: 2 })).toEqual(['d3']);
        expect(await store.purgeFinished({ before: T0 + 500, statuses: ['done'], owner: null, limit: 2 })).toEqual([]);
        expect(await store.purgeFinished({ before: T0 + 500, statuses: ['done', 'error', 'stopped'], owner: null, limit: 100 })).toEqual(['e1', 's1']);
        for (const id of ['d1', 'd2', 'd3', 'e1', 's1']) {
          expect(await dumpJob(store, id)).toEqual({ job: undefined, history: [], events: [], effects: [], attempts: [], timers: [], notes: [], assets: [] });
        }
        expect(await dumpJob(store, 'young')).toEqual(keep);
        expect(await store.getJob('theirs')).toBeDefined();
        expect(await store.purgeFinished({ before: T0 + 500, statuses: ['done'], limit: 100 })).toEqual(['theirs']); // every owner
        expect((await store.listJobs({})).map((j) => j.id)).toEqual(['A', 'B', 'young']);
      });
    });

    describe('stats', () => {
      it('aggregates the records of one owner at a time', async () => {
        const create = [effectOf('A', 'act', 2, { maxAttempts: 1 }), effectOf('A', 'other', 2), effectOf('A', 'run', 2)];
        expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const [act, other, running] = await Promise.all(create.map(async (e) => (await store.getEffect(e.id))!));
        await failForGood(act!, T0 + 100); // its only attempt failed: exhausted; its error event pending
        const c = await store.claimEffect(other!.id, 'w1', T0 + 100, T0 + 1000);
        await store.finishAttempt(other!.id, c!.attempt, { kind: 'succeeded', output: null, event: outcome(other!, 1, 'done') }, T0 + 102);
        expect(await store.claimEffect(running!.id, 'runner-7', T0 + 110, T0 + 400)).toBeUndefined(); // w1 holds job A
        expect(await store.claimEffect(running!.id, 'runner-7', T0 + 110, T0 + 400, 'w1')).toBeDefined(); // w1 is known dead
        expect(await store.commit([commitOf('B', 1, { timers: { schedule: [timerOf('B', 'k', T0 + 150, 2), timerOf('B', 'late', T0 + 9000, 2)], cancel: [] } })])).toMatchObject([{ ok: true }]);
        await store.acceptEvent(eventOf('B', 'b1', 'GO', { at: T0 + 90 }));
        await store.createJob(newJob('Q'));
        await store.setQuarantine('Q', 'gone', T0 + 1);
        await store.acceptEvent(eventOf('Q', 'q1', 'GO', { at: T0 + 5 }));
        await store.createJob(newJob('S'));
        expect(await store.commit([commitOf('S', 1, { timers: { schedule: [timerOf('S', 'k', T0 + 120, 2)], cancel: [] } })])).toMatchObject([{ ok: true }]);
        await store.suspendJob('S', 'hold', T0 + 2, noteOf('S', 'suspended'));
        await store.requestCancel('S', 'bye', eventOf('S', 'spool.cancel', 'CANCEL', { at: T0 + 3, source: 'cancel' }), T0 + 3);
        await store.createJob(newJob('X', { owner: 'acme' }));
        await store.acceptEvent(eventOf('X', 'x1', 'GO', { at: T0 }));
        await store.createJob(newJob('D'));
        expect(await store.commit([commitOf('D', 1, { status: 'done', value: 'end' })])).toMatchObject([{ ok: true }]);

        const now = T0 + 300;
        const s = await store.stats({ owner: null, now });
        expect(s).toEqual({
          jobs: [
            { machineId: 'm', machineVersion: '1', status: 'active', value: 'idle', count: 1 },
            { machineId: 'm', machineVersion: '1', status: 'active', value: 's2', count: 3 },
            { machineId: 'm', machineVersion: '1', status: 'done', value: 'end', count: 1 },
          ],
          quarantined: 1,
          suspended: 1,
          cancelRequested: 1,
          exhausted: 1,
          idle: 0,
          // A: two outcome events (accepted at T0 + 1), B: one; Q (quarantined) and S (suspended): held.
          backlog: { events: 5, jobs: 4, held: 2, oldestAcceptedAt: T0 + 1 },
          timers: { scheduled: 3, due: 1, held: 1, oldestDueAt: T0 + 150 },
          activities: [
            { src: 'src.act', effects: 1, effectsFailed: 1, attempts: 1, succeeded: 0, failed: 1, interrupted: 0, stale: 0, running: 0, waiting: 0 },
            { src: 'src.other', effects: 1, effectsFailed: 0, attempts: 1, succeeded: 1, failed: 0, interrupted: 0, stale: 0, running: 0, waiting: 0 },
            { src: 'src.run', effects: 1, effectsFailed: 0, attempts: 1, succeeded: 0, failed: 0, interrupted: 0, stale: 0, running: 1, waiting: 0 },
          ],
          running: [{ effectId: running!.id, jobId: 'A', src: 'src.run', attempt: 1, runner: 'runner-7', claimExpiresAt: T0 + 400, expired: false }],
          leases: [{ runner: 'runner-7', jobs: 1, earliestUntil: T0 + 400 }],
        });
        // The other owner sees only its own job; `undefined` means every owner.
        expect(await store.stats({ owner: 'acme', now })).toMatchObject({ jobs: [{ status: 'active', value: 'idle', count: 1 }], backlog: { events: 1, jobs: 1, held: 0, oldestAcceptedAt: T0 }, activities: [], running: [] });
        expect((await store.stats({ now })).backlog).toEqual({ events: 6, jobs: 5, held: 2, oldestAcceptedAt: T0 });
        // An empty store (for an owner with no jobs): zeros and nulls.
        expect(await store.stats({ owner: 'nobody', now })).toEqual({
          jobs: [],
          quarantined: 0,
          suspended: 0,
          cancelRequested: 0,
          exhausted: 0,
          idle: 0,
          backlog: { events: 0, jobs: 0, held: 0, oldestAcceptedAt: null },
          timers: { scheduled: 0, due: 0, held: 0, oldestDueAt: null },
          activities: [],
          running: [],
          leases: [],
        });
      });

      it('each job count equals the length of its listJobs filter, finished jobs included; the oldest pending event counts held ones', async () => {
        const settleAll = async (jobId: string) => {
          for (const e of await store.pendingEvents(jobId, 100)) expect(await store.rejectEvent(e.seq, BOOM, T0 + 200)).toBe(true);
        };
        /** A job whose only effect failed its only attempt (exhausted), its error event settled; ended when `done`. */
        const exhaust = async (id: string, done: boolean) => {
          await store.createJob(newJob(id));
          const created = effectOf(id, 'act', 2, { maxAttempts: 1 });
          expect(await store.commit([commitOf(id, 1, { effects: { create: [created], deactivate: [] } })])).toMatchObject([{ ok: true }]);
          await failForGood((await store.getEffect(created.id))!, T0 + 100);
          await settleAll(id);
          if (done) expect(await store.commit([commitOf(id, 2, { status: 'done', value: 'handled', at: T0 + 210 })])).toMatchObject([{ ok: true }]);
        };
        const cancelOf = (jobId: string, at: number) => eventOf(jobId, 'spool.cancel', 'CANCEL', { at, source: 'cancel' });
        // A cancel request on an active job, its event held by a suspension.
        await store.createJob(newJob('C1'));
        await store.suspendJob('C1', 'hold', T0 + 2, noteOf('C1', 'suspended'));
        await store.requestCancel('C1', 'bye', cancelOf('C1', T0 + 3), T0 + 3);
        // A cancel request, then the job ended (its cancel event settled).
        await store.createJob(newJob('C2'));
        await store.requestCancel('C2', 'bye', cancelOf('C2', T0 + 4), T0 + 4);
        await settleAll('C2');
        expect(await store.commit([commitOf('C2', 1, { status: 'done', value: 'cancelled', at: T0 + 220 })])).toMatchObject([{ ok: true }]);
        await exhaust('E1', false); // exhausted, still active
        await exhaust('E2', true); // exhausted, the failure handled and the job ended
        // Held events only: a quarantined job's and a suspended job's.
        await store.createJob(newJob('Q'));
        await store.setQuarantine('Q', 'gone', T0 + 1);
        await store.acceptEvent(eventOf('Q', 'q1', 'GO', { at: T0 + 5 }));
        await store.createJob(newJob('S'));
        await store.suspendJob('S', 'hold', T0 + 6, noteOf('S', 'suspended'));
        await store.acceptEvent(eventOf('S', 's1', 'GO', { at: T0 + 7 }));
        // Another owner's job: a finished cancelled one and an older held event stay out of null's figures.
        await store.createJob(newJob('X', { owner: 'acme' }));
        await store.suspendJob('X', 'hold', T0, noteOf('X', 'suspended'));
        await store.requestCancel('X', 'bye', cancelOf('X', T0), T0);

        const ids = async (filter: Parameters<JobStore['listJobs']>[0]) => (await store.listJobs(filter)).map((j) => j.id);
        expect(await ids({ cancelRequested: true, owner: null })).toEqual(['C1', 'C2']);
        expect(await ids({ exhausted: true, owner: null })).toEqual(['E1', 'E2']);
        expect(await ids({ suspended: true, owner: null })).toEqual(['C1', 'S']);
        expect(await ids({ quarantined: true, owner: null })).toEqual(['Q']);
        expect(await ids({ stuck: true, owner: null })).toEqual(['A', 'B']); // E1's lease is still w1's
        for (const owner of [null, 'acme', undefined]) {
          const scope = owner === undefined ? {} : { owner };
          const s = await store.stats({ ...scope, now: T0 + 1000 });
          const counts = {
            quarantined: (await store.listJobs({ quarantined: true, ...scope })).length,
            suspended: (await store.listJobs({ suspended: true, ...scope })).length,
            cancelRequested: (await store.listJobs({ cancelRequested: true, ...scope })).length,
            exhausted: (await store.listJobs({ exhausted: true, ...scope })).length,
            idle: (await store.listJobs({ stuck: true, ...scope })).length,
          };
          expect(s, String(owner)).toMatchObject(counts);
        }
        // Every pending event is held, and the oldest one's accept time is still reported.
        expect((await store.stats({ owner: null, now: T0 + 1000 })).backlog).toEqual({ events: 3, jobs: 3, held: 3, oldestAcceptedAt: T0 + 3 });
        expect((await store.stats({ owner: 'acme', now: T0 + 1000 })).backlog).toEqual({ events: 1, jobs: 1, held: 1, oldestAcceptedAt: T0 });
        expect((await store.stats({ now: T0 + 1000 })).backlog).toEqual({ events: 4, jobs: 4, held: 4, oldestAcceptedAt: T0 });
      });
    });
  });
}

operationsContract(CONTRACT_STORE, async () => {
  if (ON_POSTGRES) return postgresContractStore();
  if (ON_SQLITE_WASM) return sqliteWasmContractStore();
  const dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
  mkdirSync(dir, { recursive: true });
  const store = storeUnderTest(await SqliteStore.open(join(dir, 'operations.db')));
  return {
    store,
    dispose: () => {
      if (store.db.open) throw new Error('the suite left the SQLite store open');
      rmSync(dir, { recursive: true, force: true });
      if (existsSync(dir)) throw new Error(`could not remove ${dir}`);
    },
  };
});

describe('migration 0003 on an existing database', () => {
  it('adds the suspension columns to jobs written by schema 2: they read as not suspended, and work', async () => {
    const dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
    mkdirSync(dir, { recursive: true });
    const path = join(dir, 'v2.db');
    const raw = new Database(path);
    raw.exec('CREATE TABLE spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of loadMigrations().filter((x) => x.version <= 2)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, T0);
    }
    raw
      .prepare(`INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context, snapshot, input, input_hash, created_at, updated_at)
        VALUES ('old', 'm', '1', 1, 'active', '"idle"', '|idle|', '{}', '{"value":"idle"}', '{}', 'h', ?, ?)`)
      .run(T0, T0);
    raw.close();
    const store = await SqliteStore.open(path);
    try {
      expect(store.schemaVersion).toBeGreaterThanOrEqual(3);
      expect(await store.getJob('old')).toMatchObject({ suspendedAt: null, suspendReason: null });
      expect(await store.suspendJob('old', 'x', T0 + 1, noteOf('old', 'suspended', T0 + 1))).toBe(true);
      expect((await store.listJobs({ suspended: true })).map((j) => j.id)).toEqual(['old']);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
